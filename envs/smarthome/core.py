"""``wmkit/SmartHome-v0``: conditions and time (seed 000, §2.1 third case).

A home with ``load`` rooms, each with a light (brightness 0..100) and blinds (open or
closed), one thermostat (target 15..28 degrees), and ``people`` who come and go. The
user gives the agent instructions: absolute sets ("set the kitchen light to 30"),
relative changes ("turn it up by 20", "a bit lower"), future conditions ("when Leo
gets home, turn the hall light up by 20"), timers ("in 15 minutes set the porch light
to 0"), nested conditions ("when Leo leaves, wait 10 minutes, then ...") and
cancellations ("forget the kitchen light rule for Leo"). The agent carries them out
with ``set``, ``adjust``, ``schedule`` and ``cancel``; the household also changes
devices by hand and adds or cancels rules of its own. One step is one minute.

Facts (canonical lowercase):

=====================  ===========================================================
subject                relation: object
=====================  ===========================================================
``light:kitchen``      ``brightness``: ``0`` .. ``100``
``blind:kitchen``      ``position``: ``open`` | ``closed``
``thermostat:home``    ``target``: ``15`` .. ``28``
``person:leo``         ``location``: ``home`` | ``away``
``rule:r4``            ``device``: a device id; ``trigger``: a person id or ``clock``;
                       ``on``: ``arrive`` | ``leave`` | ``time``; ``delay``: minutes;
                       ``effect``: ``set 30`` | ``set open`` | ``adjust +20``;
                       ``status``: ``armed`` | ``waiting`` | ``fired`` | ``cancelled``
=====================  ===========================================================

Every fact is stated in the observation of the step that sets or changes it: when a
rule fires, the text says so and states the device's new level, so a perfect reader
with perfect memory reconstructs the state. What is hard is remembering: the level of
a device last touched long ago, which rules are still pending, what a rule does, and
resolving a rule named only by its device and trigger ("the armed kitchen light rule
for Leo fired") against the message that created it. At most one rule is pending
(armed or waiting) per (trigger, device), so such descriptions are unambiguous.

Actions (case and spacing ignored): ``wait``; ``set <device> to <value>``;
``adjust <device> by <+n|-n>`` (lights and thermostat); ``schedule <when>: <set or
adjust command>`` with ``<when>`` one of ``when <name> arrives``, ``when <name>
leaves``, ``in <n> min``, ``when <name> arrives, in <n> min`` (and ``leaves``);
``cancel r<n>``. Devices are named ``kitchen light``, ``kitchen blinds``,
``thermostat``. A command that does not parse, names an unknown device or rule, has a
value out of range, cancels a rule that is no longer pending or schedules a second
pending rule on the same trigger and device is *rejected*: the reply says so, the move
is spent and the world does not advance.

Rewards: +1 for a command that carries out an open instruction as meant (an increment
as an increment, a condition as a scheduled rule, a cancellation on the right rule);
-1 for a device change or rule nobody asked for (an increment applied as an
overwrite, a future condition applied now) and -1 when a rule fires that the user
asked to cancel; 0 otherwise. ``max_score`` counts the instructions given so far; none
comes at the horizon's step, which would leave no step to carry it out, so the scripted
solver (``solver.solve``, an oracle) earns ``max_score``.

The pure core, ``SmartHomeFuncEnv``, has Gymnasium's ``FuncEnv`` shape over an
immutable ``SmartHomeState``; a transition is a deterministic function of
``(state, action)``: per-step randomness comes from the episode seed in the state and
the step number. ``SmartHomeEnv`` is the thin ``gymnasium.Env[str, str]`` shell.

The step path is written for speed (the family's target is 50,000 steps a second with
ground truth off): lines are filled from ``VOICE``'s forms (compiled once), draws come
from the shared ``StepRng`` resumed where each step starts (``StepRng.at``), the core
keeps a ``Memo`` per episode (parsed commands, those starts, device facts: they never
change what a state means, so no state carries them), a step whose world stands still
copies none of it, the admissible commands are kept up to date rather than rebuilt,
and what only ground truth needs (rule facts, the state hash's rule digests, the
probes) is derived when ``truth`` asks, not on every step.
"""

from __future__ import annotations

from typing import Any

from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic.core import CoreDefaults, episode_seed, text_spaces
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import changes_delta, truth_info
from wmkit.envs.smarthome.commands import WAIT, Command, parse
from wmkit.envs.smarthome.draft import STATE, Draft
from wmkit.envs.smarthome.rules import (
    HOUSE_CANCEL_BOUND,
    HOUSE_CANCEL_MASK,
    HOUSE_RULE_BOUND,
    HOUSE_RULE_MASK,
    INSTRUCT_BOUND,
    INSTRUCT_MASK,
    MANUAL_BOUND,
    MANUAL_MASK,
    MOVE_BOUND,
    MOVE_MASK,
    by_hand,
    chatter,
    command,
    house_cancel,
    house_rule,
    instruct,
    move,
)
from wmkit.envs.smarthome.state import (
    _R_DUE,
    _S_HOME,
    _S_NEXT_DUE,
    _S_RULES,
    _S_STEP,
    BLIND,
    HEAT,
    LIGHT,
    Memo,
    SmartHomeParams,
    SmartHomeState,
    _Home,
    _level_text,
    _state_hash,
    _tuple,
)
from wmkit.envs.smarthome.text import (
    CHATTER,
    CHATTER_PERSON,
    FORMS,
    LINE_MAX,
    NAMES,
    ROOMS,
    SLOT_TYPES,
    _device_text,
)
from wmkit.envs.smarthome.truth import RuleTruth, net_changes, probes, world_facts
from wmkit.world.types import Fact, Probe

__all__ = ["SmartHomeFuncEnv"]

_WAITED = FORMS["waited"]
_MEMOS = 64  # episodes a core remembers at once (a memo is ~40 kB at the longest horizon)


class SmartHomeFuncEnv(
    CoreDefaults, FuncEnv[SmartHomeState, str, str, int, bool, None, SmartHomeParams]
):
    """SmartHome's pure core (:class:`~wmkit.envs.diagnostic.core.FamilyCore`); see the module doc.

    A transition draws from ``StepRng(seed, step)``: the planner's simulator is this
    code, and a state is its own snapshot. Only ``initial`` reads ``rng`` or ``params``.

    Args:
        params: the episode parameters; defaults to ``SmartHomeParams()``.
    """

    def __init__(self, params: SmartHomeParams | None = None) -> None:
        self._params = params or SmartHomeParams()
        super().__init__()
        p = self._params
        devices = 2 * p.load + 1
        # Lines per step: the intro states every device and person; later a reply, a
        # firing (two lines) per pending rule at most, four world events, the chatter.
        lines = max(devices + p.people + p.load, 2 * devices * (p.people + 1) + 8) + p.distractors
        self.observation_space, self.action_space = text_spaces(LINE_MAX * lines)
        # Ground truth of consecutive steps shares most of its parts: the last ones are
        # kept, keyed by the identity of what they were made from (and holding it).
        # levels, present -> their facts and the thermostat's, and their text for the hash
        self._world_facts: tuple = (None, None, (), None, "")
        self._rules = RuleTruth()
        self._tasks_text: tuple = (None, "")  # tasks -> repr(tasks)
        # The memos of the episodes this core steps, by id of their house (each memo
        # holds its house, so the id stays its own); ``_memo`` is the last one used.
        self._memos: dict[int, Memo] = {}
        self._memo = Memo.__new__(Memo)
        self._memo.home = None

    def memo(self, home: _Home) -> Memo:
        """Return the memo of the episode of ``home``, made when first asked."""
        memo = self._memos.get(id(home))
        if memo is None:
            if len(self._memos) >= _MEMOS:  # a planner hopping over many episodes
                self._memos.clear()
            memo = self._memos[id(home)] = Memo(home)
        self._memo = memo
        return memo

    def initial(self, rng: Any, params: SmartHomeParams | None = None) -> SmartHomeState:
        """Return the state at reset: the house, everyone's whereabouts, a few rules.

        ``rng`` gives the episode seed (``episode_seed``); ``params``, when given, stands
        in for the core's own for this episode.
        """
        params = params or self._params
        seed = episode_seed(rng)
        r = StepRng(seed, -1)
        rooms = _sample(r, ROOMS, params.load)
        names = sorted(_sample(r, NAMES, params.people))
        # Sorted ids; the thermostat sorts last of all devices.
        devices = [*sorted(f"{kind}:{room}" for kind in ("light", "blind") for room in rooms)]
        devices.append("thermostat:home")
        types = tuple(
            HEAT if d.startswith("t") else BLIND if d.startswith("b") else LIGHT for d in devices
        )
        words = tuple(_device_text(d) for d in devices)
        persons = tuple("person:" + n for n in names)
        titles = tuple(SLOT_TYPES["person"].to_text(p) for p in persons)
        lines_said = tuple(
            tuple((t.format(person=title), p) for title, p in zip(titles, persons, strict=True))
            if has_person
            else t
            for t, has_person in zip(CHATTER, CHATTER_PERSON, strict=True)
        )
        home = _Home(
            devices=tuple(devices),
            types=types,
            words=words,
            set_to=tuple(f"set {w} to " for w in words),
            adjust_by=tuple(f"adjust {w} by " for w in words),
            by_words={w: i for i, w in enumerate(words)},
            persons=persons,
            names=tuple(names),
            by_name={n: i for i, n in enumerate(names)},
            relation=tuple(("brightness", "position", "target")[t] for t in types),
            titles=titles,
            device_ids=tuple(range(len(devices))),
            device_set=frozenset(range(len(devices))),
            chatter=lines_said,
            locations=tuple(
                (Fact(p, "location", "away"), Fact(p, "location", "home")) for p in persons
            ),
            paraphrase_rate=params.paraphrase_rate,
            indirection=params.indirection,
            distractors=params.distractors,
            seed=seed,
            horizon=params.horizon,
        )
        levels = tuple(
            r.below(11) * 10 if t == LIGHT else r.below(2) if t == BLIND else 18 + r.below(5)
            for t in types
        )
        present = tuple(r.random() < 0.6 for _ in names)
        none: tuple = ()
        blank = SmartHomeState(
            params=params,
            seed=seed,
            step=-1,
            home=home,
            levels=levels,
            level_at=(0,) * len(devices),
            relative=frozenset(),
            present=present,
            present_at=(0,) * len(names),
            rules=none,
            pending=none,
            tasks=none,
            text="",
            mentioned=none,
            probe_x=-1,
            action_changes=none,
            event_changes=none,
            reward=0,
            score=0,
            max_score=0,
            admissible=("wait",),
            next_due=-1,
        )
        memo = self.memo(home)
        d = Draft(blank, 0, memo.rng(0), [], [], memo.commands)  # the reset is step 0
        d.say(FORMS["intro"])
        for i in range(len(devices)):
            d.set_level(i, levels[i], False, STATE)  # the level it has: no change
            d.changes.append((devices[i], home.relation[i], None, _level_text(types[i], levels[i])))
        for i, pid in enumerate(persons):
            where = "home" if present[i] else "away"
            d.say_canon("person_state", pid, where)
            d.changes.append((pid, "location", None, where))
        for _ in range(params.load // 2):
            house_rule(d)
        chatter(home, d.rng, d.lines, d.mentioned)
        return d.freeze(blank, -1, 0)

    def transition(
        self, state: SmartHomeState, action: str, rng: Any = None, params: Any = None
    ) -> SmartHomeState:
        """Apply the agent's command, then the world's events at the next step.

        A rejected command spends the move with a reply and leaves the world as it was:
        no events, no probes.
        """
        # A ``Draft`` (the world, to change) is made only once the command or an event
        # changes something: about a quarter of the steps need none, and their world is
        # ``state``'s, kept as one slice.
        home = state[_S_HOME]
        memo = self._memo
        if memo.home is not home:
            memo = self.memo(home)
        step = state[_S_STEP] + 1
        try:
            rng = StepRng.at(memo.starts[step])  # Memo.rng's common case, inlined
        except IndexError:
            rng = memo.rng(step)
        lines: list[str] = []
        mentioned: list[str] = []
        commands = memo.commands
        try:
            cmd = commands[action]
        except (KeyError, TypeError):  # not seen yet, or not even hashable
            cmd = parse(home, state[_S_RULES], action)
            if type(cmd) is not Command:
                d = Draft(state, step, rng, lines, mentioned, commands)
                kind, values = cmd
                d.say_canon(kind, *values)
                return d.freeze(state, -1, 0)
            commands[action] = cmd  # a command that parsed is a string
        d = None
        if cmd is WAIT:  # the most common command: its reply needs no draft
            lines.append(_WAITED.line(rng.variant(_WAITED.paraphrases, home.paraphrase_rate), ()))
            next_due, split = state[_S_NEXT_DUE], 0
        else:
            d = Draft(state, step, rng, lines, mentioned, commands)
            if not command(d, cmd):
                return d.freeze(state, -1, 0)
            next_due, split = d.next_due, len(d.changes)
        # The world's events: rules due now, then five independent 9-bit rolls of one
        # draw for comings and goings, the household and the user. The user gives no
        # instruction at the horizon's step: none would be left to carry it out.
        if 0 <= next_due <= step:
            if d is None:
                d = Draft(state, step, rng, lines, mentioned, commands)
            for i in d.pending:  # the tuple as it was: firing replaces d.pending
                if d.rules[i][_R_DUE] == step:
                    d.fire(i)
        bits = rng.bits()
        moved = bits & MOVE_MASK < MOVE_BOUND
        manual = bits & MANUAL_MASK < MANUAL_BOUND
        ruled = bits & HOUSE_RULE_MASK < HOUSE_RULE_BOUND
        cancelled = bits & HOUSE_CANCEL_MASK < HOUSE_CANCEL_BOUND
        asked = bits & INSTRUCT_MASK < INSTRUCT_BOUND and step < home.horizon
        if moved or manual or ruled or cancelled or asked:
            if d is None:
                d = Draft(state, step, rng, lines, mentioned, commands)
            if moved:
                move(d)
            if manual:
                by_hand(d)
            if ruled:
                house_rule(d)
            if cancelled:
                house_cancel(d)
            if asked:
                instruct(d)
        chatter(home, rng, lines, mentioned)
        if d is None:  # the world as it was; the probes are drawn from rng.x when asked
            news = (step, "\n".join(lines), tuple(mentioned), rng.x, (), (), 0)
            return _tuple(SmartHomeState, state[:_S_STEP] + news)
        return d.freeze(state, rng.x, split)

    # observation, reward, terminal and state_info are CoreDefaults': the shell then
    # steps the core with their code inline (a NamedTuple's attributes read as fast as
    # its items on Python 3.11, so positional overrides only cost four calls a step).

    def truth(self, state: SmartHomeState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        # The true facts, sorted: ids sort as blind:* < light:* < person:* < rule:* <
        # thermostat:home, so the rules' facts go between the people and the thermostat.
        levels, present, head, thermostat, world = self._world_facts
        if state.levels is not levels or state.present is not present:
            memo = self._memo if self._memo.home is state.home else self.memo(state.home)
            head, thermostat = world_facts(state, memo.facts)
            world = f"{state.levels!r}, {state.present!r}"
            self._world_facts = (state.levels, state.present, head, thermostat, world)
        rules = self._rules
        if state.rules is not rules.rules:
            rules.update(state.rules, state.home)
        tasks, tasks_text = self._tasks_text
        if state.tasks is not tasks:
            tasks_text = repr(state.tasks)
            self._tasks_text = (state.tasks, tasks_text)
        return truth_info(
            state=[*head, *rules.facts, thermostat],
            action=changes_delta(net_changes(state.action_changes, state.home)),
            event=changes_delta(net_changes(state.event_changes, state.home)),
            probes=probes(state),
            state_hash=_state_hash(state.seed, state.step, world, tasks_text, rules.digest),
            mentioned=state.mentioned,
            step=state.step,
        )

    def probes(self, state: SmartHomeState) -> list[Probe]:
        """Return the probes due at ``state``."""
        return list(probes(state))

    @staticmethod
    def admissible_actions(state: SmartHomeState) -> list[str]:
        """Return the commands that do something here, sorted.

        ``wait``; ``cancel`` for every pending rule; for each open instruction the
        command that carries it out and the confusable ones beside it (the increment
        read as an overwrite or back, the condition applied now), so choosing the right
        reading is the task.
        """
        return list(state.admissible)


def _sample(rng: StepRng, pool: tuple[str, ...], k: int) -> list[str]:
    items = list(pool)
    for i in range(k):
        j = i + rng.below(len(items) - i)
        items[i], items[j] = items[j], items[i]
    return items[:k]
