"""SmartHome's commands: parsing them, naming rules, and what each open task admits.

Plain string splitting, no regular expressions; a parse depends only on the house (and
a rule number on how many rules there are), so the episode remembers the commands that
parsed (``Memo.commands``).
"""

from __future__ import annotations

import threading
from typing import Any, NamedTuple

from wmkit.envs.smarthome.state import (
    BLIND,
    HEAT,
    HEAT_RANGE,
    LIGHT_RANGE,
    POSITIONS,
    Rule,
    _Home,
    _level_text,
    _tuple,
)
from wmkit.envs.smarthome.text import NUMBERS, SIGNED

__all__ = ["WAIT", "Command", "Rejection", "RuleName", "parse", "rule_name", "task_commands"]


class Command(NamedTuple):
    """A parsed command; ``verb`` says which fields count (a schedule uses them all)."""

    verb: str  # wait | set | adjust | schedule | cancel
    device: int = -1
    op: str = ""
    value: int = 0
    person: int = -1
    on: str = ""
    delay: int = 0
    rule: int = -1


WAIT = Command("wait")
# A rejection: the kind of the reply and its canonical values (in the kind's slot order).
Rejection = tuple[str, tuple[str, ...]]
_NOT_UNDERSTOOD: Rejection = ("not_understood", ())


class RuleName(NamedTuple):
    """How the rule of one index is named: the same in every episode."""

    id: str  # rule:r12
    text: str  # R12
    cancel: str  # cancel r12
    command: Command  # the parse of ``cancel``
    rank: int  # where the id sorts among those before it (``_rank``)


_RULE_NAMES: list[RuleName] = []  # by rule index, grown as needed
_GROWING = threading.Lock()  # two threads growing the list at once would misnumber it


def rule_name(i: int) -> RuleName:
    """Return how rule index ``i`` (``rule:r<i+1>``) is named; made once per index."""
    try:
        return _RULE_NAMES[i]
    except IndexError:
        with _GROWING:
            for n in range(len(_RULE_NAMES) + 1, i + 2):
                command = Command("cancel", rule=n - 1)
                name = RuleName(f"rule:r{n}", f"R{n}", f"cancel r{n}", command, _rank(n))
                _RULE_NAMES.append(name)
        return _RULE_NAMES[i]


def _rank(n: int) -> int:
    """Return where ``r<n>`` sorts among the ids ``r1`` .. ``r<n>`` compared as strings.

    For each length ``l`` shorter than ``n``'s ``L`` digits, the ids at most ``n``'s
    first ``l`` digits come first: ``int(s[:l]) - 10**(l-1) + 1`` of them; then the
    ``n - 10**(L-1)`` ids of ``n``'s own length below it.
    """
    s = str(n)
    rank = n - 10 ** (len(s) - 1)
    for length in range(1, len(s)):
        rank += int(s[:length]) - 10 ** (length - 1) + 1
    return rank


def _number(text: str, signed: bool) -> int | None:
    body = text[1:] if signed and text[:1] in "+-" else text
    if not (body.isascii() and body.isdigit() and len(body) <= 4):
        return None
    return -int(body) if text[0] == "-" else int(body)


def _parse_change(home: _Home, words: list[str]) -> Command | Rejection:
    """Parse ``set <device> to <value>`` or ``adjust <device> by <n>`` (split words)."""
    if len(words) < 4 or words[-2] != ("to" if words[0] == "set" else "by"):
        return _NOT_UNDERSTOOD
    device = home.by_words.get(" ".join(words[1:-2]))
    if device is None:
        return "unknown_device", ()
    dtype, raw, canon = home.types[device], words[-1], home.devices[device]
    if words[0] == "set":
        if dtype == BLIND:
            if raw not in POSITIONS:
                return "bad_value", (canon,)
            return Command("set", device, "set", POSITIONS.index(raw))
        value = _number(raw, signed=False)
        low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
        if value is None or not low <= value <= high:
            return "bad_value", (canon,)
        return Command("set", device, "set", value)
    value = _number(raw, signed=True)
    if dtype == BLIND or value is None or abs(value) > 100:
        return "bad_value", (canon,)
    return Command("adjust", device, "adjust", value)


def parse(home: _Home, rules: tuple[Rule, ...], action: Any) -> Command | Rejection:
    """Parse a command, or return the rejection message ``(kind, values)``.

    Plain string splitting, no regular expressions. A rule number is checked against
    ``rules`` here; ``rules.command`` checks it again for a parse remembered from another
    branch of the episode.
    """
    if not isinstance(action, str):
        return _NOT_UNDERSTOOD
    words = action.lower().split()
    if not words:
        return _NOT_UNDERSTOOD
    verb = words[0]
    if verb == "wait" and len(words) == 1:
        return WAIT
    if verb in ("set", "adjust"):
        return _parse_change(home, words)
    if verb == "cancel" and len(words) == 2:
        n = _number(words[1][1:], signed=False) if words[1][:1] == "r" else None
        if n is None:
            return _NOT_UNDERSTOOD
        if not 1 <= n <= len(rules):
            return "unknown_rule", (f"rule:r{n}",)
        return rule_name(n - 1).command
    if verb != "schedule":
        return _NOT_UNDERSTOOD
    head, colon, tail = " ".join(words).partition(":")
    when = head.replace(",", " ").split()[1:]
    if not colon or not when:
        return _NOT_UNDERSTOOD
    change = (
        _parse_change(home, tail.split()) if tail.split()[:1] in (["set"], ["adjust"]) else None
    )
    if change is None:
        return _NOT_UNDERSTOOD
    if not isinstance(change, Command):
        return change
    person, on, delay = -1, "time", 0
    if when[0] == "when" and len(when) in (3, 6):
        if when[1] not in home.by_name:
            return "unknown_person", ()
        person = home.by_name[when[1]]
        on = {"arrives": "arrive", "leaves": "leave"}.get(when[2], "")
        when = when[3:]
        if not on:
            return _NOT_UNDERSTOOD
    if when:
        if len(when) != 3 or when[0] != "in" or when[2] != "min":
            return _NOT_UNDERSTOOD
        delay = _number(when[1], signed=False)
        if delay is None or not 1 <= delay <= 999:
            return _NOT_UNDERSTOOD
    elif person < 0:
        return _NOT_UNDERSTOOD
    return change._replace(verb="schedule", person=person, on=on, delay=delay)


def task_commands(
    home: _Home,
    cache: dict,
    kind: str,
    device: int,
    op: str,
    value: int,
    person: int,
    on: str,
    delay: int,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The command that carries a task out, then the confusable ones beside it.

    Returns them, and them without repeats (setting a light to 0 reads the same both
    ways). Each is also put in ``cache`` (the episode's ``Memo.commands``), parsed as
    ``parse`` would.
    """
    if kind == "cancel":
        return (), ()  # every pending rule's cancel is admissible anyway
    if op == "set":
        do = home.set_to[device] + _level_text(home.types[device], value)
    else:
        do = home.adjust_by[device] + SIGNED[value]
    if do not in cache:  # most tasks repeat a command of the episode: skip the parse then
        cache[do] = _tuple(Command, (op, device, op, value, -1, "", 0, -1))
    # The same number read the other way: an increment as an overwrite or back.
    other = None
    dtype = home.types[device]
    if dtype != BLIND:
        if op == "set" and value:
            other_op, other_value = "adjust", value
            other = home.adjust_by[device] + SIGNED[value]
        else:
            low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
            other_op, other_value = "set", abs(value)
            if low <= other_value <= high:
                other = home.set_to[device] + NUMBERS[other_value]
        if other is not None and other not in cache:
            parsed = (other_op, device, other_op, other_value, -1, "", 0, -1)
            cache[other] = _tuple(Command, parsed)
    if kind == "now":
        if other is None:
            return (do,), (do,)
        return (do, other), ((do, other) if other != do else (do,))
    if person < 0:
        when = f"schedule in {delay} min: "
    else:
        verb = "arrives: " if on == "arrive" else "leaves: "
        if delay:
            verb = f"{verb[:-2]}, in {delay} min: "
        when = f"schedule when {home.names[person]} {verb}"
    # The right rule, and the condition applied now.
    schedule = when + do
    cache[schedule] = _tuple(Command, ("schedule", device, op, value, person, on, delay, -1))
    if other is None:
        return (schedule, do), (schedule, do)
    if other == do:
        return (schedule, do, schedule), (schedule, do)
    other_schedule = when + other
    cache[other_schedule] = _tuple(
        Command, ("schedule", device, other_op, other_value, person, on, delay, -1)
    )
    return (schedule, do, other_schedule), (schedule, do, other_schedule)
