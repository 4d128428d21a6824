"""SmartHome's parameters, records and immutable state, and the state hash.

A state is a ``NamedTuple`` the step path reads by position (``_S_*``, ``_T_*``,
``_R_*``: indexing is much cheaper than reading attributes). What is fixed for an
episode (devices, people, names) sits in one ``_Home`` shared by all its states; what
the core remembers of an episode for speed (``Memo``) is kept by the core, not the
state.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NamedTuple

from wmkit.envs.diagnostic.params import FamilyParams, check_int
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import Change
from wmkit.envs.smarthome.text import NUMBERS, ROOMS
from wmkit.world.types import Fact

__all__ = ["Rule", "SmartHomeParams", "SmartHomeState", "Task", "state_hash"]

LIGHT_RANGE = (0, 100)
HEAT_RANGE = (15, 28)
LIGHT, BLIND, HEAT = 0, 1, 2  # device types
POSITIONS = ("closed", "open")  # blind levels 0 and 1


@dataclass(frozen=True)
class SmartHomeParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``horizon`` counts minutes; ``load`` is the rooms, each with a light and blinds,
    1..16; ``indirection`` the probability that a rule firing or a cancellation names
    its rule by device and trigger instead of by id.

    Attributes:
        people: household members who come and go, 1..12.
    """

    MAX_LOAD = len(ROOMS)

    people: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("people", self.people, 1, 12)


# --- state -----------------------------------------------------------------------------


class Rule(NamedTuple):
    """One automation rule: its facts, its hidden schedule and its anchors.

    ``trigger`` is a person index or -1 for the clock; ``on`` is ``arrive``, ``leave``
    or ``time``; ``value`` is the level set or the signed change. ``due`` is the step it
    fires at once timed (timers and triggered rules), else -1. Its facts and its share
    of the state hash are derived when ground truth asks (``_rule_facts_of``,
    ``_rule_digest``), not on the step path.
    """

    id: str
    device: int
    trigger: int
    on: str
    delay: int
    op: str
    value: int
    status: str
    due: int
    owner: str  # "agent" or "house"
    created: int
    status_at: int


class Task(NamedTuple):
    """An open user instruction, hidden from the agent but for its wording.

    ``kind`` is ``now``, ``when``, ``timer``, ``nested`` or ``cancel``; ``person`` is a
    person index or -1; ``rule`` is the index of the rule to cancel, or -1.
    """

    kind: str
    device: int
    op: str
    value: int
    person: int
    on: str
    delay: int
    rule: int
    issued: int
    commands: tuple[str, ...] = ()  # admissible commands it brings (see ``_task_commands``)


# Field positions, for the hot loops: indexing a NamedTuple is much cheaper than reading
# its attributes.
_T_KIND, _T_DEVICE, _T_OP, _T_VALUE, _T_PERSON, _T_ON, _T_DELAY, _T_RULE, _T_COMMANDS = (
    Task._fields.index(name)
    for name in ("kind", "device", "op", "value", "person", "on", "delay", "rule", "commands")
)
_TASK_DEVICE = itemgetter(_T_DEVICE)
_R_DEVICE, _R_TRIGGER, _R_STATUS, _R_DUE, _R_OWNER, _R_CREATED = (
    Rule._fields.index(name) for name in ("device", "trigger", "status", "due", "owner", "created")
)


@dataclass(frozen=True, slots=True, eq=False)
class _Home:
    """What is fixed for an episode: devices, people, their names, its parameters.

    (A slotted class, not a NamedTuple: the step path reads its fields a lot, and slot
    reads are the fast ones.) Homes compare by what they are made from; they do not
    hash (the dicts are lookups, derived from the rest).
    """

    devices: tuple[str, ...]  # ids, sorted
    types: tuple[int, ...]  # LIGHT, BLIND or HEAT per device
    words: tuple[str, ...]  # command names: "kitchen light"
    set_to: tuple[str, ...]  # per device, its commands' heads: "set kitchen light to "
    adjust_by: tuple[str, ...]  # "adjust kitchen light by "
    by_words: dict[str, int]
    persons: tuple[str, ...]  # ids, sorted
    names: tuple[str, ...]  # command names: "leo"
    by_name: dict[str, int]
    relation: tuple[str, ...]  # per device: brightness, position or target
    titles: tuple[str, ...]  # per person, as the text writes them: "Leo"
    device_ids: tuple[int, ...]  # range(len(devices))
    device_set: frozenset[int]  # the same
    # per chatter line: (line, id) per person, or the line if it names nobody
    chatter: tuple[tuple[tuple[str, str], ...] | str, ...]
    locations: tuple[tuple[Fact, Fact], ...]  # per person: (away, home) facts
    # The parameters the step path reads, next to the fields it reads with them.
    paraphrase_rate: float
    indirection: float
    distractors: int
    seed: int  # the episode seed
    horizon: int

    def _key(self) -> tuple:
        return (
            self.devices,
            self.persons,
            self.paraphrase_rate,
            self.indirection,
            self.distractors,
            self.seed,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Home) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


class SmartHomeState(NamedTuple):
    """The whole episode state at one step: an immutable value, the snapshot token.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        home: the episode's fixed devices and people.
        levels: per device: brightness, 0/1 for closed/open blinds, or degrees.
        level_at: per device, the step its level was last stated.
        relative: devices whose last change was relative (an adjust).
        present: per person, whether they are home.
        present_at: per person, the step their location was last stated.
        rules: every rule ever made, in creation order (``rules[i].id`` is
            ``rule:r<i+1>``).
        pending: indices of armed or waiting rules.
        tasks: open user instructions.
        admissible: sorted admissible commands.
        next_due: the earliest step a pending rule is due at, or -1.
        max_score: instructions given so far.
        score: cumulative reward.
        step: steps taken since reset (0 at reset).
        text: this step's observation.
        mentioned: entity ids named in this step's observation (unsorted, may repeat).
        probe_x: where this step's generator stood when its probes were due, or -1 for
            none (the reset, a rejected command); see ``probes``.
        action_changes: ``(subject, relation, before, after)`` changes caused by the
            agent's command this step, in the order made (``before`` None for a new
            fact; a fact changed twice appears twice; a new rule is one record
            ``(id, None, None, rule)``); ``truth`` nets them (``net_changes``).
        event_changes: the same for the world's events this step.
        reward: this step's reward.

    The fields are in this order so that a step that leaves the world as it was (a
    ``wait`` and no event) keeps the first ``_S_STEP`` of them as one slice.
    """

    params: SmartHomeParams
    seed: int
    home: _Home
    levels: tuple[int, ...]
    level_at: tuple[int, ...]
    relative: frozenset[int]
    present: tuple[bool, ...]
    present_at: tuple[int, ...]
    rules: tuple[Rule, ...]
    pending: tuple[int, ...]
    tasks: tuple[Task, ...]
    admissible: tuple[str, ...]
    next_due: int
    max_score: int
    score: int
    step: int
    text: str
    mentioned: tuple[str, ...]
    probe_x: int
    action_changes: tuple[Change, ...]
    event_changes: tuple[Change, ...]
    reward: int


_S_HOME, _S_RULES, _S_ADMISSIBLE, _S_NEXT_DUE, _S_MAX_SCORE, _S_SCORE, _S_STEP, _S_TEXT = (
    SmartHomeState._fields.index(name)
    for name in ("home", "rules", "admissible", "next_due", "max_score", "score", "step", "text")
)
_S_REWARD = SmartHomeState._fields.index("reward")


def state_hash(state: SmartHomeState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, device levels, who is home, open instructions
    and every rule (through the sum of per-rule digests). Equal hashes mean the same
    world at the same step of the same episode; the observation and score are left out.
    """
    digest = sum(map(_rule_digest, state.rules)) % 2**64
    world = f"{state.levels!r}, {state.present!r}"
    return _state_hash(state.seed, state.step, world, repr(state.tasks), digest)


def _state_hash(seed: int, step: int, world: str, tasks: str, digest: int) -> str:
    """``state_hash`` from its parts; ``world``: ``"%r, %r" % (levels, present)``."""
    # repr((seed, step, levels, present, tasks, digest)), from the parts' reprs
    raw = f"({seed}, {step}, {world}, {tasks}, {digest})"
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def _rule_facts_of(rule: Rule, home: _Home) -> tuple[Fact, ...]:
    """Return the facts of ``rule``, sorted by relation."""
    rid, device, trigger, on, delay, op, value, status, _, _, _, _ = rule
    return (
        _tuple(Fact, (rid, "delay", str(delay))),
        _tuple(Fact, (rid, "device", home.devices[device])),
        _tuple(Fact, (rid, "effect", _effect(op, value, home.types[device]))),
        _tuple(Fact, (rid, "on", on)),
        _tuple(Fact, (rid, "status", status)),
        _tuple(Fact, (rid, "trigger", home.persons[trigger] if trigger >= 0 else "clock")),
    )


def _rule_digest(rule: Rule) -> int:
    """Return ``rule``'s share of the state hash (the hash sums them mod 2**64)."""
    # Hashing a tuple of ints is cheap and, unlike hashing strings, the same in every
    # process.
    rid, device, trigger, on, delay, op, value, status, due, owner, created, _ = rule
    code = _CODE
    key = (
        int(rid[6:]),
        device,
        trigger,
        code[on],
        delay,
        code[op],
        value,
        code[status],
        due,
        code[owner],
        created,
    )
    return hash(key) % 2**64


_tuple = tuple.__new__  # builds a NamedTuple from a tuple, skipping its Python __new__
_CODE = {
    word: i
    for i, word in enumerate(
        (
            "arrive",
            "leave",
            "time",
            "set",
            "adjust",
            "armed",
            "waiting",
            "fired",
            "cancelled",
            "agent",
            "house",
        )
    )
}


class Memo:
    """What a core remembers of one episode: pure functions of its house, for speed.

    They hold for every state of the episode, snapshots and branches included, and
    never change what a state means, so they live with the core, not in the state
    (a pickled state carries none): a command's parse depends only on the house, a
    device's fact only on its level, a step's generator start only on the seed.

    Attributes:
        home: the house it is the memo of (held, so that its ``id`` stays its own).
        starts: ``StepRng(seed, step).x`` for the steps ``0 .. horizon``.
        commands: command text -> its ``Command``, for commands that parsed.
        facts: ``device << 7 | level`` -> that device's fact.
    """

    __slots__ = ("commands", "facts", "home", "starts")

    def __init__(self, home: _Home) -> None:
        self.home = home
        self.starts = StepRng.starts(home.seed, 0, home.horizon + 1)
        self.commands: dict[Any, Any] = {}
        self.facts: dict[int, Fact] = {}

    def rng(self, step: int) -> StepRng:
        """Return step ``step``'s generator (past the horizon too: a planner looking on)."""
        if 0 <= step < len(self.starts):
            return StepRng.at(self.starts[step])
        return StepRng(self.home.seed, step)


def _level_text(dtype: int, level: int) -> str:
    return POSITIONS[level] if dtype == BLIND else NUMBERS[level]


def _effect(op: str, value: int, dtype: int) -> str:
    if op == "set":
        return "set " + _level_text(dtype, value)
    return f"adjust {value:+d}"


def _apply(op: str, value: int, level: int, dtype: int) -> int:
    if op == "set":
        return value
    low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
    return min(high, max(low, level + value))


def _put(values: tuple, i: int, value: Any) -> tuple:
    copy = list(values)  # cheaper than splicing slices
    copy[i] = value
    return tuple(copy)
