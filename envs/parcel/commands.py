"""The Parcel family's commands: parsing what the agent sends, and the admissible ones."""

from __future__ import annotations

import re

from wmkit.envs.parcel.state import _ID, _RECEIVER, _REQUEST, _REQUESTED, _Commands, _Record
from wmkit.envs.parcel.text import PERSON_SET, PERSONS, TRACKING_IDS

__all__ = [
    "NOT_UNDERSTOOD",
    "PARSES",
    "REFUSALS",
    "admissible_commands",
    "command_parts",
    "parse",
    "parse_words",
]

# Agent-given addresses: a house number and one to four words of letters.
_ID_RE = re.compile(r"px-\d{4}")
_NAME_RE = re.compile(r"[a-z]+")
_ADDRESS_RE = re.compile(r"\d{1,4}(?: [a-z]{1,20}){1,4}")
_REROUTE_RE = re.compile(r"reroute (px-\d{4}) to (\d{1,4}(?: [a-z]{1,20}){1,4})")


# ``ParcelFuncEnv.admissible_actions`` defines the commands. They are sorted without a
# sort of the whole list: the verbs sort escalate < notify < reroute < track < wait, and
# ids have a fixed width, so each group is in order. They are rebuilt only when the
# active parcels or their open requests change; other steps carry them over.


def _verbs(pid: str) -> tuple[str, str, str]:
    short = pid.removeprefix("parcel:")
    return f"escalate {short}", f"track {short}", f"reroute {short} to "


# Each parcel's commands and each receiver's, made at import (~10 ms and ~4 MB with the
# parses ahead below): made on first use instead, as a new parcel is booked every few
# steps, they cost ~2.5 % of a step's instructions.
_VERBS = {pid: _verbs(pid) for pid in TRACKING_IDS}
_NOTIFY_COMMAND = {person: "notify " + person.removeprefix("person:") for person in PERSONS}


def _parsed_ahead() -> dict[str, tuple[str, ...]]:
    # Agents send the admissible commands back: those naming no address are parsed
    # ahead (see parse).
    parsed: dict[str, tuple[str, ...]] = {}
    for pid, (escalate, track, _) in _VERBS.items():
        parsed[escalate], parsed[track] = ("escalate", pid), ("track", pid)
    for person, notify in _NOTIFY_COMMAND.items():
        parsed[notify] = ("notify", person)
    return parsed


_PARSED_AHEAD = _parsed_ahead()


def command_parts(live: list[_Record]) -> _Commands:
    """The parts of the commands that the active parcels alone decide."""
    escalate, track, reroute, receivers = [], [], [], set()
    for p in sorted(live):  # records sort by their id, the first field
        e, t, r = _VERBS[p[_ID]]
        escalate.append(e)
        track.append(t)
        reroute.append(r)
        receivers.add(p[_RECEIVER])
    for person in sorted(receivers):
        escalate.append(_NOTIFY_COMMAND[person])
    track.append("wait")
    return tuple(reroute), tuple(escalate), tuple(track)


def admissible_commands(commands: _Commands, live: list[_Record]) -> tuple[str, ...]:
    """All commands: ``commands`` with a reroute per active parcel and open request."""
    reroute, head, tail = commands
    wanted = []
    for p in live:
        if p[_REQUEST] == "open":
            wanted.append(p[_REQUESTED])
    if not wanted:
        return head + tail
    if len(wanted) > 1:  # (two parcels may be wanted at the same address)
        wanted = sorted(set(wanted))
    block = []  # (a loop: a comprehension costs a function object and a call in 3.11)
    for prefix in reroute:
        for address in wanted:
            block.append(prefix + address)
    return head + tuple(block) + tail


# --- parsing -----------------------------------------------------------------------------

NOT_UNDERSTOOD = ("not_understood",)
REFUSALS = frozenset({"not_understood", "unknown_person"})  # what parse refuses as is


class _Parses(dict):
    """The commands parsed so far: a dict that parses a command on a miss.

    Agents repeat commands (the admissible ones above all), so parses are kept; as they
    are a pure function of the text, emptying the dict when it reaches ``limit``
    entries only costs re-parsing (the commands parsed ahead are put back). A hit is
    one dict lookup, no Python call: the step path subscripts ``PARSES`` directly.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__(_PARSED_AHEAD)
        self.limit = limit

    def __missing__(self, action: str) -> tuple[str, ...]:
        if len(self) >= self.limit:
            self.clear()
            self.update(_PARSED_AHEAD)
        if match := _REROUTE_RE.fullmatch(action):
            # A reroute as the admissible commands spell it, the one kind agents send that
            # is not parsed ahead: one match instead of splitting and matching its words.
            command = ("reroute", "parcel:" + match[1], match[2])
        else:
            command = parse_words(action.lower().split())
        self[action] = command
        return command


PARSES = _Parses(1 << 16)


def parse(action: str) -> tuple[str, ...]:
    """Return ``(verb, *args)`` for a command, or ``(reply kind,)`` for one refused as is.

    Verbs: ``wait``; ``notify`` person; ``track``/``escalate`` parcel; ``reroute`` parcel
    address, the address None if we cannot ship to it (refused once the parcel is known
    to exist). Case and spacing are ignored: the command is its lower-cased words.
    ``PARSES[action]`` is the same, without the call.
    """
    return PARSES[action]


def parse_words(words: list[str]) -> tuple[str, ...]:
    """Return what ``parse`` does for a command split into its lower-cased ``words``."""
    verb, n = (words[0], len(words)) if words else ("", 0)
    if verb == "wait" and n == 1:
        return ("wait",)
    if verb == "notify" and n == 2 and _NAME_RE.fullmatch(words[1]):
        person = "person:" + words[1]
        return ("notify", person) if person in PERSON_SET else ("unknown_person",)
    if verb in ("track", "escalate") and n == 2 and _ID_RE.fullmatch(words[1]):
        return (verb, "parcel:" + words[1])
    if verb == "reroute" and n > 3 and words[2] == "to" and _ID_RE.fullmatch(words[1]):
        address = " ".join(words[3:])
        return (
            "reroute",
            "parcel:" + words[1],
            address if _ADDRESS_RE.fullmatch(address) else None,
        )
    return NOT_UNDERSTOOD
