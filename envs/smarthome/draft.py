"""SmartHome's draft: the mutable scratch copy of a state for one transition.

Its lines are rendered from ``VOICE``'s forms (:meth:`Draft.say`); its draws are the step's
:class:`~wmkit.envs.diagnostic.rng.StepRng`.
"""

from __future__ import annotations

from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.text import Form
from wmkit.envs.smarthome.commands import rule_name, task_commands
from wmkit.envs.smarthome.state import (
    _R_CREATED,
    _R_DEVICE,
    _R_DUE,
    _R_OWNER,
    _R_STATUS,
    _R_TRIGGER,
    _S_HOME,
    _S_SCORE,
    _T_COMMANDS,
    _TASK_DEVICE,
    BLIND,
    POSITIONS,
    Rule,
    SmartHomeState,
    Task,
    _apply,
    _level_text,
    _put,
    _tuple,
)
from wmkit.envs.smarthome.text import FORMS, LATER, LEVEL_KINDS, NUMBERS

__all__ = ["BY_HAND", "DONE", "STATE", "Draft"]

STATE, DONE, BY_HAND = 0, 1, 2  # contexts of a device's level: stated, a reply, by hand


class Draft:
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Transitions stay pure: the draft replaces the state's tuples when it changes them
    (rarely more than twice a step), never mutates them. ``changes`` lists the step's
    ``(subject, relation, before, after)`` changes in order; ``transition`` notes where
    the agent's command ends and the world's events begin, to split the delta by cause.
    ``rng`` is the step's ``StepRng``; ``lines`` and ``mentioned`` are the step's lists:
    ``transition`` shares them with the draft, having made them before it needed one.
    """

    __slots__ = (
        "admissible",
        "changes",
        "commands",
        "home",
        "level_at",
        "levels",
        "lines",
        "max_score",
        "mentioned",
        "next_due",
        "pending",
        "present",
        "present_at",
        "relative",
        "reward",
        "rng",
        "rules",
        "step",
        "tasks",
        "timers_dirty",
    )

    def __init__(
        self,
        state: SmartHomeState,
        step: int,
        rng: StepRng,
        lines: list[str],
        mentioned: list[str],
        commands: dict,
    ) -> None:
        """Start step ``step`` (the one after ``state``'s), drawing from ``rng``.

        ``commands`` is the episode's ``Memo.commands``: new rules and tasks put the
        parses of the commands they admit there.
        """
        # One unpacking of the world's fields (``freeze`` takes the others from ``state``
        # or makes them anew). A slice of the state is a plain tuple: the fast unpacking.
        (
            self.home,
            self.levels,
            self.level_at,
            self.relative,
            self.present,
            self.present_at,
            self.rules,
            self.pending,
            self.tasks,
            self.admissible,
            self.next_due,
            self.max_score,
        ) = state[_S_HOME:_S_SCORE]
        self.step = step
        self.rng = rng
        self.commands = commands
        self.lines = lines
        self.mentioned = mentioned
        self.changes: list[tuple[str, str, str | None, str]] = []
        self.reward = 0
        self.timers_dirty = False  # a timed rule left: recompute next_due

    # -- text --

    def say(self, form: Form, texts: tuple[str, ...] = (), entities: tuple[str, ...] = ()) -> None:
        """Add a line of ``form``: ``texts`` as written, in its order (``VOICE``'s orders).

        ``entities`` are the ids the line names. A paraphrase at ``paraphrase_rate``, in
        one draw (``StepRng.variant``); a kind without paraphrases draws nothing.
        """
        others = form.paraphrases
        variant = self.rng.variant(others, self.home.paraphrase_rate) if others else 0
        self.lines.append(form.line(variant, texts))
        if entities:
            self.mentioned += entities

    def say_canon(self, kind: str, *values: str) -> None:
        """``say`` with canonical values (ids), turned to text by the slot types.

        The plain path, for the messages too rare to be worth writing out at the caller.
        """
        form = FORMS[kind]
        texts = tuple([to_text(value) for to_text, value in zip(form.to_text, values, strict=True)])
        self.say(form, texts, tuple([values[k] for k in form.entities]))

    # -- facts --

    def set_level(
        self, device: int, level: int, relative: bool, context: int, owner: int = -1
    ) -> None:
        """Set a device's level and state it: at reset or a firing, as a reply, or by hand.

        ``relative``: the change was an adjustment. ``context`` is ``STATE``, ``DONE``
        or ``BY_HAND``, with ``owner`` the person who changed it by hand.
        """
        home = self.home
        dtype = home.types[device]
        texts = POSITIONS if dtype == BLIND else NUMBERS
        old = self.levels[device]
        if old != level:
            self.changes.append(
                (home.devices[device], home.relation[device], texts[old], texts[level])
            )
            levels = list(self.levels)  # _put, inlined
            levels[device] = level
            self.levels = tuple(levels)
        if relative:
            if device not in self.relative:
                self.relative = self.relative | {device}
        elif device in self.relative:
            self.relative = self.relative - {device}
        level_at = list(self.level_at)
        level_at[device] = self.step
        self.level_at = tuple(level_at)
        kind = LEVEL_KINDS[dtype][context]
        if owner < 0:
            self.say(kind, (home.words[device], texts[level]), (home.devices[device],))
        else:
            texts = (home.titles[owner], home.words[device], texts[level])
            self.say(kind, texts, (home.persons[owner], home.devices[device]))

    def set_present(self, person: int, home_now: bool) -> None:
        """Move ``person`` home (``home_now``) or out; the caller says so."""
        before = "home" if self.present[person] else "away"
        after = "home" if home_now else "away"
        self.changes.append((self.home.persons[person], "location", before, after))
        self.present = _put(self.present, person, home_now)
        self.present_at = _put(self.present_at, person, self.step)

    # -- admissible commands --

    def admit(self, commands: tuple[str, ...]) -> None:
        """Add ``commands``, distinct and none admissible yet, to the admissible ones.

        None is: see ``unadmit``. The admissible commands are kept sorted here rather
        than rebuilt (a set, then sorted) at every change.
        """
        admissible = [*self.admissible, *commands]
        admissible.sort()  # cheap: the old part is one sorted run
        self.admissible = tuple(admissible)

    def unadmit(self, commands: tuple[str, ...]) -> None:
        """Remove ``commands`` from the admissible ones.

        No command belongs to two open sources: a task's commands name its device, no
        two open tasks share a device, and a cancel names its rule.
        """
        admissible = list(self.admissible)
        for command in commands:
            if command in admissible:  # a task's commands may repeat (set to 0 either way)
                admissible.remove(command)
        self.admissible = tuple(admissible)

    # -- tasks --

    def close_task(self, task: Task) -> None:
        """Close an open task (done, misread or void) and drop the commands it admitted."""
        tasks = self.tasks
        k = tasks.index(task)  # tasks are distinct (each is given at its own step)
        self.tasks = tasks[:k] + tasks[k + 1 :]
        if task[_T_COMMANDS]:
            self.unadmit(task[_T_COMMANDS])

    def add_task(
        self,
        kind: str,
        device: int,
        op: str,
        value: int,
        person: int,
        on: str,
        delay: int,
        rule: int,
    ) -> None:
        """Open a task (the user's instruction) and admit its commands."""
        commands, distinct = task_commands(
            self.home, self.commands, kind, device, op, value, person, on, delay
        )
        task = _tuple(Task, (kind, device, op, value, person, on, delay, rule, self.step, commands))
        self.tasks = (*self.tasks, task)
        self.max_score += 1
        if commands:
            self.admit(distinct)

    def free_devices(self) -> tuple[int, ...] | list[int]:
        """Devices no open instruction is about, in order."""
        if not self.tasks:
            return self.home.device_ids
        return sorted(self.home.device_set.difference(map(_TASK_DEVICE, self.tasks)))

    # -- rules --

    def rule_on(self, trigger: int, device: int) -> bool:
        """Whether a pending rule covers this (trigger, device): it must stay unique."""
        rules = self.rules
        for i in self.pending:
            rule = rules[i]
            if rule[_R_TRIGGER] == trigger and rule[_R_DEVICE] == device:
                return True
        return False

    def new_rule(
        self, device: int, trigger: int, on: str, delay: int, op: str, value: int, owner: str
    ) -> Rule:
        """Make an armed rule (its facts are all new: see ``truth.net_changes``)."""
        step, rules = self.step, self.rules
        i = len(rules)
        name = rule_name(i)
        due = step + delay if trigger < 0 else -1
        rule = _tuple(
            Rule, (name.id, device, trigger, on, delay, op, value, "armed", due, owner, step, step)
        )
        self.rules = rules + (rule,)  # noqa: RUF005  (a third of the time of (*rules, rule))
        self.changes.append((name.id, None, None, rule))
        self.pending = (*self.pending, i)
        if due >= 0 and (due < self.next_due or self.next_due < 0):
            self.next_due = due
        self.admit((name.cancel,))
        self.commands[name.cancel] = name.command  # its cancel parses without ``parse``
        return rule

    def set_status(self, i: int, status: str, due: int) -> None:
        """Move pending rule ``i`` to ``status`` (and ``due``) at this step.

        ``status`` is ``waiting`` (still pending), ``fired`` or ``cancelled``.
        """
        rules = self.rules
        rule = rules[i]
        old, old_due = rule[_R_STATUS], rule[_R_DUE]
        rules = list(rules)  # _put, inlined
        changed = (status, due, rule[_R_OWNER], rule[_R_CREATED], self.step)
        rules[i] = _tuple(Rule, rule[:_R_STATUS] + changed)
        self.rules = tuple(rules)
        if old != status:
            self.changes.append((rule[0], "status", old, status))
        if due >= 0:  # now waiting: its time is set
            if due < self.next_due or self.next_due < 0:
                self.next_due = due
        elif old_due >= 0 and old_due == self.next_due:
            self.timers_dirty = True  # the next rule due may be a later one now
        if status != "waiting":
            pending = self.pending
            k = pending.index(i)
            self.pending = pending[:k] + pending[k + 1 :]
            self.unadmit((rule_name(i).cancel,))

    def announce_rule(self, rule: Rule, owner: int = -1) -> None:
        """State a new rule's facts; ``owner`` is the person who made it, or -1 (agent)."""
        home = self.home
        rid, device, trigger, on, delay, op, value = rule[:_R_STATUS]  # a plain tuple: fast
        if op == "set":
            effect = "set to " + _level_text(home.types[device], value)
        else:
            effect = ("raised by " if value >= 0 else "lowered by ") + NUMBERS[abs(value)]
        name, word = "R" + rid[6:], home.words[device]
        if trigger >= 0:
            on_text = "gets home" if on == "arrive" else "leaves"
            texts: tuple[str, ...] = (
                name,
                home.titles[trigger],
                on_text,
                LATER[delay],
                word,
                effect,
            )
            entities: tuple[str, ...] = (rid, home.persons[trigger], home.devices[device])
            kind = "rule_person"
        else:
            texts = (name, NUMBERS[delay], word, effect)
            entities = (rid, home.devices[device])
            kind = "rule_timer"
        if owner >= 0:
            texts, entities = (home.titles[owner], *texts), (*entities, home.persons[owner])
            self.say(FORMS["house_" + kind], texts, entities)
        else:
            self.say(FORMS[kind], texts, entities)

    def describe_rule(self, kind: str, rule: Rule, owner: int = -1) -> None:
        """Name a pending rule by id, or by device and trigger (``indirection``).

        ``kind`` is ``rule_waiting``, ``rule_fired`` or, with ``owner`` (a person),
        ``house_cancel``.
        """
        home = self.home
        if self.rng.random() < home.indirection:
            device = home.devices[rule.device]
            texts: tuple[str, ...] = (rule.status, home.words[rule.device])
            if rule.trigger >= 0:
                texts += (home.titles[rule.trigger],)
                entities: tuple[str, ...] = (device, home.persons[rule.trigger])
                kind += "_desc"
            else:
                texts += ("timer",)  # the clock slot
                entities = (device,)
                kind = "house_cancel_timer_desc" if owner >= 0 else "timer_fired_desc"
        else:
            texts, entities = ("R" + rule.id[6:],), (rule.id,)
        if owner >= 0:
            texts = (home.titles[owner], *texts)
            entities += (home.persons[owner],)
        self.say(FORMS[kind], texts, entities)

    def fire(self, i: int) -> None:
        """Fire pending rule ``i``: say so, apply its effect, settle a cancel asked for it."""
        rule = self.rules[i]
        self.describe_rule("rule_fired", rule)
        self.set_status(i, "fired", -1)
        device = rule.device
        dtype = self.home.types[device]
        level = _apply(rule.op, rule.value, self.levels[device], dtype)
        self.set_level(device, level, rule.op == "adjust", STATE)
        for task in self.tasks:
            if task.kind == "cancel" and task.rule == i:
                self.reward -= 1  # the user asked for it to be cancelled, and it ran
                self.close_task(task)

    def freeze(self, state: SmartHomeState, probe_x: int, split: int) -> SmartHomeState:
        """Return the step's new state; ``state`` is the one it started from.

        ``changes[:split]`` are the agent's, the rest the world's. ``probe_x``: where this
        step's probes are drawn from, or -1 for none.
        """
        next_due = self.next_due
        if self.timers_dirty:
            rules = self.rules
            next_due = -1
            for i in self.pending:
                due = rules[i][_R_DUE]
                if due >= 0 and (due < next_due or next_due < 0):
                    next_due = due
        changes = self.changes
        if not changes:
            action_changes = event_changes = ()
        elif split == 0:
            action_changes, event_changes = (), tuple(changes)
        elif split == len(changes):
            action_changes, event_changes = tuple(changes), ()
        else:
            action_changes, event_changes = tuple(changes[:split]), tuple(changes[split:])
        reward = self.reward
        # Positional, in field order: the state is built every step.
        return _tuple(
            SmartHomeState,
            (
                state[0],
                state[1],
                self.home,
                self.levels,
                self.level_at,
                self.relative,
                self.present,
                self.present_at,
                self.rules,
                self.pending,
                self.tasks,
                self.admissible,
                next_due,
                self.max_score,
                state[_S_SCORE] + reward,
                self.step,
                "\n".join(self.lines),
                tuple(self.mentioned),
                probe_x,
                action_changes,
                event_changes,
                reward,
            ),
        )
