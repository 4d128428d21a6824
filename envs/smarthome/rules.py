"""SmartHome's rules: the agent's commands, the world's events and the chatter.

Each handler works on a :class:`~wmkit.envs.smarthome.draft.Draft` and draws from its
``rng``, the step's :class:`~wmkit.envs.diagnostic.rng.StepRng`.
"""

from __future__ import annotations

import math

from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.smarthome.commands import Command, rule_name
from wmkit.envs.smarthome.draft import BY_HAND, DONE, Draft
from wmkit.envs.smarthome.state import (
    _T_DELAY,
    _T_DEVICE,
    _T_KIND,
    _T_ON,
    _T_OP,
    _T_PERSON,
    _T_RULE,
    _T_VALUE,
    _TASK_DEVICE,
    BLIND,
    HEAT,
    HEAT_RANGE,
    LIGHT,
    LIGHT_RANGE,
    _apply,
    _Home,
    _level_text,
)
from wmkit.envs.smarthome.text import ASK_KINDS, CHATTER, CHATTER_PERSON, FORMS, NUMBERS

__all__ = ["by_hand", "chatter", "command", "house_cancel", "house_rule", "instruct", "move"]

P_MOVE = 0.08  # per step: someone comes home or goes out
P_MANUAL = 0.05  # per step: someone at home changes a device by hand
P_HOUSE_RULE = 0.06  # per step: the household adds a rule of its own
P_HOUSE_CANCEL = 0.02  # per step: the household cancels one of its pending rules
P_INSTRUCT = 0.3  # per step: the user gives the agent an instruction
INSTRUCTION_WEIGHTS = (("now", 35), ("when", 20), ("timer", 15), ("nested", 10), ("cancel", 20))
DELAYS = (5, 10, 15, 20, 30)  # minutes, for timers and nested conditions


def _roll(p: float, shift: int) -> tuple[int, int]:
    """Return ``(mask, bound)``: ``bits & mask < bound`` when a 9-bit roll comes true.

    The roll is ``(bits >> shift) & 511``, true when below ``p * 512``.
    """
    return 511 << shift, math.ceil(p * 512) << shift


# The step's world events: five 9-bit rolls of one ``StepRng.bits`` draw.
MOVE_MASK, MOVE_BOUND = _roll(P_MOVE, 0)
MANUAL_MASK, MANUAL_BOUND = _roll(P_MANUAL, 9)
HOUSE_RULE_MASK, HOUSE_RULE_BOUND = _roll(P_HOUSE_RULE, 18)
HOUSE_CANCEL_MASK, HOUSE_CANCEL_BOUND = _roll(P_HOUSE_CANCEL, 27)
INSTRUCT_MASK, INSTRUCT_BOUND = _roll(P_INSTRUCT, 36)
# The instruction kind for each roll in [0, 100).
_KIND_BY_ROLL = tuple(kind for kind, weight in INSTRUCTION_WEIGHTS for _ in range(weight))
_WAITED = FORMS["waited"]  # the reply to wait
_N_CHATTER = len(CHATTER)


def command(d: Draft, cmd: Command) -> bool:
    """Apply the agent's parsed command to the draft; return False if rejected."""
    verb, device, op, value, person, on, delay, i = cmd
    if verb == "wait":  # (a parse of "wait" is _WAIT, seen by transition)
        d.say(_WAITED)
        return True
    if verb == "cancel":
        if i >= len(d.rules):  # parsed on a branch of the episode with more rules
            d.say_canon("unknown_rule", f"rule:r{i + 1}")
            return False
        name = rule_name(i)
        if i not in d.pending:
            d.say_canon("rule_over", name.id)
            return False
        d.say(FORMS["rule_cancelled"], (name.text,), (name.id,))
        d.set_status(i, "cancelled", -1)
        for task in d.tasks:
            if task[_T_KIND] == "cancel" and task[_T_RULE] == i:
                d.reward += 1
                d.close_task(task)
                break
        else:
            d.reward -= 1
        return True
    home = d.home
    if verb == "schedule":
        if d.rule_on(person, device):
            d.say_canon("rule_clash", home.devices[device])
            return False
        rule = d.new_rule(device, person, on, delay, op, value, "agent")
        d.announce_rule(rule)
        # One try per instruction: the open future instruction on this device is
        # carried out (+1) or misread (-1); a rule nobody asked for costs -1.
        for task in d.tasks:
            kind = task[_T_KIND]
            if task[_T_DEVICE] == device and kind != "now" and kind != "cancel":
                right = (task[_T_OP], task[_T_VALUE], task[_T_PERSON], task[_T_DELAY]) == (
                    op,
                    value,
                    person,
                    delay,
                )
                d.reward += 1 if right and (task[_T_PERSON] < 0 or task[_T_ON] == on) else -1
                d.close_task(task)
                break
        else:
            d.reward -= 1
        return True
    # set / adjust now
    dtype = home.types[device]
    before = d.levels[device]
    if op == "set":  # _apply, inlined
        level = value
    else:
        low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
        level = before + value
        level = low if level < low else high if level > high else level
    for task in d.tasks:
        if task[_T_DEVICE] == device and task[_T_KIND] == "now":
            wanted = _apply(task[_T_OP], task[_T_VALUE], before, dtype)
            d.reward += 1 if level == wanted else -1
            d.close_task(task)
            break
    else:
        if level != before:
            d.reward -= 1  # nobody asked for this change (or not yet: a condition applied now)
    d.set_level(device, level, op == "adjust", DONE)
    return True


def move(d: Draft) -> None:
    """Someone comes home or goes out; rules waiting for it trigger."""
    home, step = d.home, d.step
    p = d.rng.below(len(home.persons))
    arrive = not d.present[p]
    on = "arrive" if arrive else "leave"
    d.set_present(p, arrive)
    d.say(FORMS[on], (home.titles[p],), (home.persons[p],))
    for i in d.pending:
        rule = d.rules[i]
        if rule.trigger == p and rule.on == on and rule.status == "armed":
            if rule.delay:
                d.describe_rule("rule_waiting", rule)
                d.set_status(i, "waiting", step + rule.delay)
            else:
                d.fire(i)
    for task in d.tasks:  # the condition came true before the agent set it up
        if task.person == p and task.on == on:
            d.close_task(task)


def by_hand(d: Draft) -> None:
    """Someone at home changes a device no instruction is about."""
    owners = [i for i, here in enumerate(d.present) if here]
    free = d.free_devices()
    if owners and free:
        device = d.rng.choice(free)
        level = _random_level(d.rng, d.home.types[device], d.levels[device])
        d.set_level(device, level, False, BY_HAND, d.rng.choice(owners))


def house_cancel(d: Draft) -> None:
    """The household cancels one of its pending rules nobody asked to cancel."""
    asked = {t.rule for t in d.tasks if t.kind == "cancel"}
    rules = d.rules
    mine = [i for i in d.pending if rules[i].owner == "house" and i not in asked]
    if mine:
        i = d.rng.choice(mine)
        owner = d.rng.below(len(d.home.persons))
        d.describe_rule("house_cancel", rules[i], owner=owner)
        d.set_status(i, "cancelled", -1)


def _random_level(rng: StepRng, dtype: int, avoid: int) -> int:
    if dtype == BLIND:
        return 1 - avoid
    while True:
        level = rng.below(11) * 10 if dtype == LIGHT else HEAT_RANGE[0] + 2 + rng.below(10)
        if level != avoid:
            return level


_PHRASES = ("set", "set", "up", "down", "nudge_up", "nudge_down")
_TRIES = range(8)  # tries at a change that stays in range (made once: range() costs)


def _random_change(rng: StepRng, dtype: int, level: int, now: bool) -> tuple[str, str, int]:
    """Pick ``(phrase, op, value)``; a change made now stays inside the device's range."""
    if dtype == BLIND:
        return "set", "set", (1 - level if now else rng.below(2))
    low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
    unit = 1 if dtype == HEAT else 10
    for _ in _TRIES:
        phrase = rng.choice(_PHRASES)
        if phrase == "set":
            return phrase, "set", _random_level(rng, dtype, level)
        size = unit if phrase[0] == "n" else unit * (1 + rng.below(4))  # a nudge: one unit
        value = size if phrase[-1] == "p" else -size  # up or down
        if not now or low <= level + value <= high:
            return phrase, "adjust", value
    return "set", "set", _random_level(rng, dtype, level)


def instruct(d: Draft) -> None:
    """The user gives an instruction: a new open task, worded as a message."""
    home, rng = d.home, d.rng
    kind = _KIND_BY_ROLL[rng.below(100)]
    if kind == "cancel":
        if _ask_cancel(d):
            return
        kind = "now"
    tasks = d.tasks
    if tasks:  # the devices no open instruction is about
        free = sorted(home.device_set.difference(map(_TASK_DEVICE, tasks)))
        if not free:
            return
    else:
        free = home.device_ids
    device = rng.choice(free)
    person, on, delay = -1, "time", 0
    if kind != "now":
        if kind != "timer":  # when or nested
            person = rng.below(len(home.persons))
            on = "leave" if d.present[person] else "arrive"
        if kind != "when":  # timer or nested
            delay = rng.choice(DELAYS)
        if d.rule_on(person, device):
            return  # the pending rule there must stay the only one for its description
    dtype = home.types[device]
    phrase, op, value = _random_change(rng, dtype, d.levels[device], kind == "now")
    d.add_task(kind, device, op, value, person, on, delay, -1)
    # The texts in the kind's order: person, on, minutes, device, then setting or amount.
    word = home.words[device]
    if phrase == "set":
        texts: tuple[str, ...] = (word, _level_text(dtype, value))
    elif phrase[0] == "n":  # a nudge names no amount
        texts = (word,)
    else:
        texts = (word, NUMBERS[abs(value)])
    if delay:
        texts = (NUMBERS[delay], *texts)
    if person >= 0:
        on_text = "gets home" if on == "arrive" else "leaves"
        texts = (home.titles[person], on_text, *texts)
        entities: tuple[str, ...] = (home.devices[device], home.persons[person])
    else:
        entities = (home.devices[device],)
    d.say(ASK_KINDS[kind][phrase], texts, entities)


def _ask_cancel(d: Draft) -> bool:
    """The user asks to cancel a pending rule nobody asked about yet; False if none."""
    asked = {t.rule for t in d.tasks if t.kind == "cancel"}
    open_rules = [i for i in d.pending if i not in asked]
    if not open_rules:
        return False
    home = d.home
    i = d.rng.choice(open_rules)
    rule = d.rules[i]
    d.add_task("cancel", rule.device, "", 0, -1, "", 0, i)
    device, word = home.devices[rule.device], home.words[rule.device]
    if d.rng.random() >= home.indirection:
        d.say(FORMS["ask_cancel"], (rule_name(i).text,), (rule.id,))
    elif rule.trigger >= 0:
        person = home.titles[rule.trigger]
        d.say(FORMS["ask_cancel_desc"], (word, person), (device, home.persons[rule.trigger]))
    else:
        d.say(FORMS["ask_cancel_timer_desc"], (word, "timer"), (device,))
    return True


def house_rule(d: Draft) -> None:
    """Someone in the household sets up a rule of their own (never on a busy device)."""
    home = d.home
    busy = {t.device for t in d.tasks}
    device = d.rng.below(len(home.devices))
    person = d.rng.below(len(home.persons)) if d.rng.random() < 0.6 else -1
    if device in busy or d.rule_on(person, device):
        return
    _, op, value = _random_change(d.rng, home.types[device], d.levels[device], False)
    if person >= 0:
        on = "leave" if d.present[person] else "arrive"
        delay = d.rng.choice(DELAYS) if d.rng.random() < 0.3 else 0
    else:
        on, delay = "time", d.rng.choice(DELAYS)
    rule = d.new_rule(device, person, on, delay, op, value, "house")
    d.announce_rule(rule, owner=d.rng.below(len(home.persons)))


def chatter(home: _Home, rng: StepRng, lines: list[str], mentioned: list[str]) -> None:
    """Insert the step's distractor lines anywhere after the first (the reply).

    One ``StepRng.bits`` draw a line: 16 bits each for the line, the person and the
    position.
    """
    lines_of = home.chatter
    n = home.distractors
    while n:  # (cheaper than a range, on the step path)
        n -= 1
        bits = rng.bits()  # < 2**48
        variant = ((bits & 0xFFFF) * _N_CHATTER) >> 16
        said = lines_of[variant]
        if CHATTER_PERSON[variant]:  # said: (line, person) per person
            # ((bits >> 16) & 0xFFFF) * n >> 16, with one operation less
            line, person = said[((bits & 0xFFFF0000) * len(said)) >> 32]
            mentioned.append(person)
        else:
            line = said
        if len(lines) == 1:  # after the reply, the only place (bits >> 32 < 2**16)
            lines.append(line)
        else:
            lines.insert(1 + (((bits >> 32) * len(lines)) >> 16), line)
