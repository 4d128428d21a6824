"""The Vault family's parameters, its entities and its immutable state."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from wmkit.envs.diagnostic.params import FamilyParams, check_int
from wmkit.envs.diagnostic.truth import Change

if TYPE_CHECKING:
    from wmkit.envs.vault.world import VaultWorld

__all__ = [
    "BAR",
    "CLOSED",
    "DOOR_STATES",
    "HELD",
    "LATCH_STATES",
    "LEVER_STATES",
    "LOCKED",
    "MAX_LOAD",
    "OPEN",
    "SPRING",
    "Door",
    "Item",
    "Lever",
    "VaultParams",
    "VaultState",
    "state_hash",
    "vector",
]

LOCKED, CLOSED, OPEN = 0, 1, 2
DOOR_STATES = ("locked", "closed", "open")
LATCH_STATES = ("down", "up")  # latches[i]: -1 no latch, 0 down, 1 up
LEVER_STATES = ("up", "down")  # levers[k]: 0 up, 1 down
HELD = -1  # where[j] of a carried item
BAR, SPRING = 0, 1  # the kinds of scheduled mechanism: (due step, kind, door, value)
MAX_LOAD = 10


@dataclass(frozen=True)
class VaultParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``load`` is the locked doors between the start and the vault, 1..10 (the house has
    about twice as many rooms, plus decoy keys, levers and notes in proportion);
    ``indirection`` the probability a mechanism event names its door by where it is.

    Attributes:
        delay: ``(low, high)`` steps, 1..50, from which each lever's delay and each
            spring door's shutting time are drawn (a list is accepted).
    """

    MAX_LOAD = MAX_LOAD

    delay: tuple[int, int] = (2, 6)

    def __post_init__(self) -> None:
        super().__post_init__()
        delay = self.delay
        if isinstance(delay, (str, bytes)) or not isinstance(delay, Sequence) or len(delay) != 2:
            raise TypeError(f"delay must be a (low, high) pair of ints, got {delay!r}")
        low, high = delay
        check_int("delay low", low, 1, 50)
        check_int("delay high", high, 1, 50)
        if low > high:
            raise ValueError(f"delay must have low <= high, got {tuple(delay)}")
        object.__setattr__(self, "delay", (int(low), int(high)))


class Door(NamedTuple):
    """A door between rooms ``a`` and ``b``; ``b`` lies ``direction`` of ``a``.

    Attributes:
        id: ``door:oak``.
        a: index of the room on one side.
        b: index of the room on the other side.
        direction: the way from ``a`` through the door to ``b``.
        lock: ``keyhole``, ``bar``, ``keypad`` or ``none`` (visible).
        latch: whether the door carries a latch (visible).
        latch_blocks: hidden rule: the door will not open with its latch down.
        key: hidden rule: index in ``VaultWorld.items`` of the key that fits, or -1.
        spring: hidden rule: steps after opening that it shuts itself; 0 for never.
        spine: position on the way to the vault (1..load), 0 for a side door.
    """

    id: str
    a: int
    b: int
    direction: str
    lock: str
    latch: bool
    latch_blocks: bool
    key: int
    spring: int
    spine: int


class Item(NamedTuple):
    """A thing that can be carried: ``kind`` is ``key``, ``note`` or ``treasure``.

    ``code`` is a note's four digits ("" otherwise); ``home`` the room it starts in.
    """

    id: str
    kind: str
    home: int
    code: str


class Lever(NamedTuple):
    """A lever in ``room``; hidden rule: it works ``door`` (-1: nothing) after ``delay`` steps."""

    id: str
    room: int
    door: int
    delay: int


class VaultState(NamedTuple):
    """The whole episode state at one step: an immutable value, the snapshot token.

    ``params`` and ``seed`` (properties) are the world's.

    Attributes:
        world: the layout and hidden rules (shared by the episode's states).
        step: steps taken since reset (0 at reset).
        player: index of the player's room.
        doors: per door, ``LOCKED`` (0), ``CLOSED`` (1) or ``OPEN`` (2).
        latches: per door, -1 (no latch), 0 (down) or 1 (up).
        levers: per lever, 0 (up) or 1 (down).
        where: per item, its room index or -1 (carried).
        read: bit j set once note j has been read.
        visited: bit r set once room r has been described in full.
        pending: scheduled mechanisms ``(due step, kind, door, value)``, sorted.
        opened: bit i set once spine door i has been opened (progress reward).
        evented: bit i set once door i was changed by a mechanism (confusion probes).
        mentioned: every entity id named in an observation so far.
        anchors: per fact slot, the step of the observation that last established it
            (-1: never).
        messages: this step's messages as ``(kind, variant, values)`` triples, in
            order; chatter, which names and states nothing, is left out.
        text: this step's observation.
        action_changes: this step's net fact changes by the agent's command;
            ``event_changes``: by the mechanisms (``truth.changes_delta`` makes deltas).
        actions: the admissible actions, sorted.
        reward: this step's reward.
        score: cumulative reward.
        won: whether the treasure has been taken.
    """

    world: VaultWorld
    step: int
    player: int
    doors: tuple[int, ...]
    latches: tuple[int, ...]
    levers: tuple[int, ...]
    where: tuple[int, ...]
    read: int
    visited: int
    pending: tuple[tuple[int, int, int, int], ...]
    opened: int
    evented: int
    mentioned: frozenset[str]
    anchors: tuple[int, ...]
    messages: tuple[tuple[str, int, tuple[str, ...]], ...]
    text: str
    action_changes: tuple[Change, ...]
    event_changes: tuple[Change, ...]
    actions: tuple[str, ...]
    reward: int
    score: int
    won: bool

    @property
    def params(self) -> VaultParams:
        """The episode parameters."""
        return self.world.params

    @property
    def seed(self) -> int:
        """The episode seed."""
        return self.world.seed


def state_hash(state: VaultState, vec: tuple[int, ...] | None = None) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, every changeable fact and the scheduled
    mechanisms: equal hashes mean the same world at the same step of the same episode,
    the transposition key for search. The observation, anchors and score are left out.
    """
    numbers = (state.world.seed & 0x7FFFFFFFFFFFFFFF, state.step, *(vec or vector(state)))
    for event in state.pending:
        numbers += event
    packed = _STRUCTS.get(len(numbers)) or _STRUCTS.setdefault(
        len(numbers), struct.Struct(f"<{len(numbers)}q")
    )
    return hashlib.blake2b(packed.pack(*numbers), digest_size=8).hexdigest()


_STRUCTS: dict[int, struct.Struct] = {}


def vector(state: VaultState) -> tuple[int, ...]:
    """Every changeable fact of ``state`` as one int tuple (``VaultWorld.fact_plan`` reads it).

    Position 0 is a constant for the static facts; then the player's room, the doors,
    latches, levers, items' places and, per item, whether it has been read.
    """
    read = state.read
    return (
        0, state.player, *state.doors, *state.latches, *state.levers, *state.where,
        *[read >> j & 1 for j in range(len(state.where))],
    )  # fmt: skip
