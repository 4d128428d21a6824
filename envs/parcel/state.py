"""The Parcel family's parameters, its records and immutable state, and its ground truth.

A parcel's record is a plain tuple of ``Parcel``'s fields, changed only by the record
functions here (``scanned``, ``delayed``...); ``ParcelState`` holds the records of a
step. The ground truth of a state (its facts, the step's deltas, the state hash) is
derived from those records when asked, never on the step path.
"""

from __future__ import annotations

import bisect
import hashlib
import marshal
from dataclasses import dataclass
from itertools import chain
from typing import NamedTuple

import immutables

from wmkit.envs.diagnostic.params import FamilyParams
from wmkit.envs.parcel.text import ID_CAPACITY, PAIR_CAPACITY
from wmkit.world.types import Delta, Fact

__all__ = ["MIN_LIFE", "Parcel", "ParcelParams", "ParcelState", "state_hash"]

MIN_LIFE = 4  # steps from booking to delivery at the least: two events, gaps of >= 2


@dataclass(frozen=True)
class ParcelParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``load`` is the parcels active at once (bounded with the horizon, so ids and
    descriptions stay unique); ``indirection`` the probability a customer message names
    its parcel by description.
    """

    indirection: float = 0.7

    def __post_init__(self) -> None:
        super().__post_init__()
        # Rejection sampling of fresh ids and (sender, receiver) pairs must stay cheap and
        # can never run dry within the horizon.
        most = self.load * (self.horizon // MIN_LIFE + 1)
        if most > 0.75 * min(ID_CAPACITY, PAIR_CAPACITY):
            raise ValueError(
                f"load={self.load} with horizon={self.horizon} could book {most} parcels, more "
                f"than the {int(0.75 * min(ID_CAPACITY, PAIR_CAPACITY))} unique tracking ids "
                "and descriptions the family guarantees; lower load or horizon"
            )


class _ParcelFields(NamedTuple):  # the fields of ``Parcel``; grouped by what changes together
    id: str
    sender: str
    receiver: str
    route: tuple[str, ...]
    pace: int
    booked_at: int
    address: str  # 6
    address_at: int
    requested: str  # 8
    request: str
    requested_at: int
    corrected: bool  # 11
    hop: int  # 12
    location: str
    location_at: int
    status: str  # 15
    status_at: int
    due: int


_new = tuple.__new__  # builds a NamedTuple from a tuple without NamedTuple's slow __new__

# A parcel's record on the step path: a plain tuple of the fields above, read by these
# positions. CPython 3.11 reads a NamedTuple field by name, or builds a NamedTuple, at
# several times the cost of the plain tuple operation, and the step path does both a
# few dozen times per step; ``Parcel`` is the record's named view for everything else.
(
    _ID, _SENDER, _RECEIVER, _ROUTE, _PACE, _BOOKED_AT, _ADDRESS, _ADDRESS_AT, _REQUESTED,
    _REQUEST, _REQUESTED_AT, _CORRECTED, _HOP, _LOCATION, _LOCATION_AT, _STATUS, _STATUS_AT,
    _DUE,
) = range(len(_ParcelFields._fields))  # fmt: skip

_Record = tuple
"""A parcel's fields as a plain tuple, in ``Parcel``'s order."""


class Parcel(_ParcelFields):
    """One parcel: its facts, its hidden schedule, and when each fact was last stated.

    ``requested`` is ``""`` until a customer asks; ``request`` is ``none``, ``open`` or
    ``served``. ``*_at`` fields are the steps of the observations that last stated a
    fact (probe anchors); ``requested_at`` is the booking step when the request named
    the parcel by description. ``corrected`` says whether its address or request
    changed after booking. ``facts`` and ``digest`` are derived from the fields.

    States keep parcels as plain tuples of these fields (``_Record``), changed only by
    the ``_scanned``... functions below; ``ParcelState.parcel`` and ``parcels`` give
    them as ``Parcel`` (see ``_view``).
    """

    __slots__ = ()

    @property
    def facts(self) -> tuple[Fact, ...]:
        """The parcel's facts, sorted by relation (see ``_record_facts``)."""
        return _record_facts(self)

    @property
    def digest(self) -> int:
        """A stable 64-bit digest of every field (the state hash sums them)."""
        return _record_digest(self)


def _view(record: _Record) -> Parcel:
    """``record`` as a ``Parcel`` (named fields), for everything off the step path."""
    return _new(Parcel, record)


def _record_facts(p: _Record) -> tuple[Fact, ...]:
    """The facts of parcel record ``p``, sorted by relation (so ``wm.state`` needs no sort)."""
    s = p[_ID]
    if p[_REQUESTED]:
        return (
            _new(Fact, (s, "address", p[_ADDRESS])),
            _new(Fact, (s, "location", p[_LOCATION])),
            _new(Fact, (s, "receiver", p[_RECEIVER])),
            _new(Fact, (s, "requested_address", p[_REQUESTED])),
            _new(Fact, (s, "sender", p[_SENDER])),
            _new(Fact, (s, "status", p[_STATUS])),
        )
    return (
        _new(Fact, (s, "address", p[_ADDRESS])),
        _new(Fact, (s, "location", p[_LOCATION])),
        _new(Fact, (s, "receiver", p[_RECEIVER])),
        _new(Fact, (s, "sender", p[_SENDER])),
        _new(Fact, (s, "status", p[_STATUS])),
    )


def _record_digest(p: _Record) -> int:
    """A stable 64-bit digest of every field of parcel record ``p``."""
    # marshal's version 0 format writes equal values as equal bytes (it has no
    # references or interned strings), and writes them faster than repr().
    h = _BLAKE2B_8.copy()
    h.update(marshal.dumps(tuple(p), 0))
    return int.from_bytes(h.digest(), "big")


# Copied for each hash: cheaper than a new blake2b (the constructor parses its keywords).
_BLAKE2B_8 = hashlib.blake2b(digest_size=8)


# How a step changes a parcel record; each returns a new record. They splice tuples by
# field position and concatenate (cheaper in CPython than unpacking slices into a
# display), so they follow the field order above.


def _scanned(p: _Record, hub: str, step: int, due: int) -> _Record:
    """Arrived at the next hub of its route, in transit, next event at ``due``."""
    return p[:12] + (p[12] + 1, hub, step, "in_transit", step, due)  # noqa: RUF005


def _delayed(p: _Record, step: int, due: int) -> _Record:
    """Held up where it is until ``due``."""
    return p[:14] + (step, "delayed", step, due)  # noqa: RUF005


def _escalated(p: _Record, step: int) -> _Record:
    """Moving again: its next event comes at the next step."""
    return p[:14] + (step, "in_transit", step, step + 1)  # noqa: RUF005


def _delivered(p: _Record, step: int) -> _Record:
    """Delivered to its address (stated at ``step``); no more events."""
    return p[:7] + (step,) + p[8:15] + ("delivered", step, -1)  # noqa: RUF005


def _tracked(p: _Record, step: int) -> _Record:
    """Status, location and address all stated at ``step``."""
    return p[:7] + (step,) + p[8:14] + (step, p[15], step, p[17])  # noqa: RUF005


def _status_stated(p: _Record, step: int) -> _Record:
    """Status stated at ``step``."""
    return p[:16] + (step, p[17])  # noqa: RUF005


def _address_stated(p: _Record, step: int) -> _Record:
    """Address stated at ``step``."""
    return p[:7] + (step,) + p[8:]  # noqa: RUF005


def _readdressed(p: _Record, address: str, step: int, request: str) -> _Record:
    """Sent to ``address`` (stated at ``step``), its request now ``request``."""
    return p[:6] + (address, step, p[8], request, p[10], True) + p[12:]  # noqa: RUF005


def _requested_to(p: _Record, address: str, anchor: int) -> _Record:
    """An open request to send it to ``address``, identified by step ``anchor``."""
    return p[:8] + (address, "open", anchor, True) + p[12:]  # noqa: RUF005


class _Digests(dict):
    """Each record's digest, by the record's identity.

    A step's state hash adds the digests of the records it made and takes off those of
    the records they replaced, which the step before made and hashed: kept here, they
    are hashed once. Each entry holds its record, so an identity cannot be reused while
    it is cached (nothing here can go stale). Emptied when it reaches ``limit`` entries:
    small, as a step needs only the digests of its own records and of the step before's,
    and entries kept alive long end up in the cyclic garbage collector's oldest
    generation, where they trigger full collections.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __call__(self, record: _Record) -> int:
        entry = self.get(id(record))
        if entry is None:
            if len(self) >= self.limit:
                self.clear()
            entry = self[id(record)] = (record, _record_digest(record))
        return entry[1]


_digest = _Digests(512)


_Change = tuple[_Record | None, _Record | None, _Record]
"""A parcel the step changed: its record before the step, after the agent's command
(both ``None`` for a parcel booked in the step), and after the world events."""



_Commands = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""Per active parcel in id order ``reroute <id> to ``; the commands before the reroutes;
those after them."""


class _ParcelStateFields(NamedTuple):  # the fields of ``ParcelState``
    params: ParcelParams
    seed: int
    step: int
    active: tuple[int, ...]
    live: tuple[_Record, ...]
    retired: immutables.Map[int, _Record]
    index: immutables.Map[str, int]
    used_pairs: immutables.Map[tuple[str, str], None]
    text: str
    said: tuple[str, ...]
    advanced: bool
    before: tuple[tuple[int, ...], tuple[_Record, ...]]
    acted: tuple[tuple[int, _Record, _Record], ...]
    admissible: tuple[str, ...]
    commands: _Commands
    reward: int
    score: int
    max_score: int


class ParcelState(_ParcelStateFields):
    """The whole episode state at one step: an immutable value, the snapshot token.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        step: steps taken since reset (0 at reset).
        active: indices (0, 1, ... in booking order) of the parcels not yet delivered,
            in booking order.
        live: those parcels' records (see ``Parcel``), in the same order. Kept apart
            from the delivered ones, which rarely change, so that a step copies a few
            records, not a map.
        retired: the delivered parcels' records by index, a persistent map (a delivery
            shares structure with the previous step's instead of copying them all).
        index: each parcel's index by its id (the ids taken, never reused).
        used_pairs: (sender, receiver) pairs taken, as the keys of a persistent map;
            never reused, so descriptions are unambiguous.
        text: this step's observation, one message per line.
        said: the entity ids this step's lines name, with repeats (see ``mentioned``).
        advanced: whether the world moved on into this state (False at reset and
            after a rejected command); probes come only then.
        before: ``(active, live)`` of the state this one came from (empty at reset).
        acted: the parcel the agent's command changed, as ``(index, record before,
            record after)``; empty if it changed none. With ``before``, what the world
            events changed is derived when asked (``_changes``), so that a step
            without ground truth does no bookkeeping for it.
        admissible: the admissible commands, sorted.
        commands: the parts of them that only the active parcels decide (see
            ``commands.command_parts``), kept to rebuild the rest cheaply when a request
            changes.
        reward: this step's reward.
        score: cumulative reward.
        max_score: requests issued so far (each can be served once for +1).

    Derived when asked (only ground truth needs them): ``parcels``, ``mentioned``,
    ``action_delta``, ``event_delta``, ``facts`` and ``digest``.
    """

    # A NamedTuple, being cheaper to build than a frozen dataclass (one per step),
    # subclassed without ``__slots__`` for the one memo it carries (see ``world``).

    def record(self, i: int) -> _Record:
        """Return the record of the parcel with index ``i`` (booked ``i``-th, from 0)."""
        p = self.retired.get(i)
        return self.live[self.active.index(i)] if p is None else p

    def parcel(self, i: int) -> Parcel:
        """Return the parcel with index ``i`` (booked ``i``-th, from 0)."""
        return _view(self.record(i))

    @property
    def parcels(self) -> immutables.Map[int, Parcel]:
        """Every parcel ever booked, by index."""
        every = chain(self.retired.items(), zip(self.active, self.live, strict=True))
        return immutables.Map({i: _view(record) for i, record in every})

    @property
    def mentioned(self) -> tuple[str, ...]:
        """Sorted entity ids named in this step's observation."""
        return tuple(sorted(set(self.said)))

    @property
    def action_delta(self) -> Delta:
        """Fact change caused by the agent's command this step."""
        return _deltas(_changes(self))[0]

    @property
    def event_delta(self) -> Delta:
        """Fact change caused by scheduled world events this step."""
        return _deltas(_changes(self))[1]

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every fact of the world, sorted (``wm.state``)."""
        return tuple(self._world[0])

    @property
    def digest(self) -> int:
        """Sum of parcel digests mod 2**64 (the world part of ``state_hash``)."""
        return self._world[1]

    @property
    def _world(self) -> tuple[list[Fact], int]:
        # The sorted facts (a list, never changed once made, so that the next state's
        # splice and ``wm.state`` copy it once each) and the digest. Kept on the state:
        # the one memo it carries (see ``world``).
        return _world(self, _changes(self))


def state_hash(state: ParcelState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step and every parcel's facts, hidden schedule and
    anchors: equal hashes mean the same world at the same step of the same episode, the
    transposition key for search. The observation, probes and score are left out. Cheap:
    once a state's digest is known, later steps update it by the parcels they change.
    """
    return _hash(state, state._world[1])


def _hash(state: ParcelState, digest: int) -> str:
    h = _BLAKE2B_8.copy()
    h.update(b"%d/%d" % (state.seed, state.step))
    return f"{(int.from_bytes(h.digest(), 'big') + digest) % 2**64:016x}"


# --- ground truth ------------------------------------------------------------------------
#
# Derived when asked, from what a state keeps anyway: ``before`` (the previous step's
# parcels), ``acted`` (the command's change) and the parcels now. One walk finds the
# parcels the step changed (``_changes``); the deltas compare their fact fields, and the
# facts and digest of the world are the previous state's, updated by those parcels.

_FACT_FIELDS = (
    (_ADDRESS, "address"),
    (_LOCATION, "location"),
    (_REQUESTED, "requested_address"),
    (_STATUS, "status"),
)
"""The record fields that facts state and a step can change (sender and receiver never
change), with their relations."""


def _changes(state: ParcelState) -> list[_Change]:
    """The parcels ``state``'s step changed: ``(before it, after the command, after it)``.

    A step passes unchanged records on as they are, so a record that is not the one
    before is a change. ``None`` before a booking.
    """
    before_active, before_live = state.before
    active, live = state.active, state.live
    changes: list[_Change] = []
    if state.acted:
        ((acted, old, mid),) = state.acted  # at most one parcel
        if acted not in before_active:  # a delivered parcel: no event changes it
            changes.append((old, mid, mid))
    else:
        acted = mid = -1
    if active is before_active:
        # No delivery or booking (most steps): the parcels line up position by position.
        if live is not before_live:
            for i, old, new in zip(active, before_live, live, strict=True):
                if i == acted:
                    changes.append((old, mid, new))
                elif old is not new:
                    changes.append((old, old, new))
        return changes
    base = dict(zip(before_active, before_live, strict=True))
    for i, new in zip(active, live, strict=True):
        old = base.pop(i, None)
        if i == acted:
            changes.append((old, mid, new))
        elif old is not new:
            changes.append((old, old, new))
    retired = state.retired
    for i, old in base.items():  # the rest left ``live``: delivered now
        changes.append((old, mid if i == acted else old, retired[i]))
    return changes


def _deltas(changes: list[_Change]) -> tuple[Delta, Delta]:
    """The fact changes of the command, then those of the events (sorted)."""
    action_added: list[Fact] = []
    action_removed: list[Fact] = []
    event_added: list[Fact] = []
    event_removed: list[Fact] = []
    for old, mid, new in changes:
        if old is not mid:
            _diff(old, mid, action_added, action_removed)
        if mid is not new:
            _diff(mid, new, event_added, event_removed)
    # Each parcel changes at most once in a phase, so there are no duplicates.
    action_added.sort()
    action_removed.sort()
    event_added.sort()
    event_removed.sort()
    return (
        _new(Delta, (tuple(action_added), tuple(action_removed))),
        _new(Delta, (tuple(event_added), tuple(event_removed))),
    )


def _diff(old: _Record | None, new: _Record, added: list[Fact], removed: list[Fact]) -> None:
    """Add the facts ``old`` to ``new`` adds to ``added``, those it removes to ``removed``."""
    if old is None:
        added += _record_facts(new)
        return
    s = new[_ID]
    for k, relation in _FACT_FIELDS:
        if (after := new[k]) != (before := old[k]):
            added.append(_new(Fact, (s, relation, after)))
            if before:  # (no requested address is "": no fact to remove)
                removed.append(_new(Fact, (s, relation, before)))


def _world(state: ParcelState, changes: list[_Change]) -> tuple[list[Fact], int]:
    """``state``'s sorted facts and digest, made once and kept on the state.

    The one memo a state carries, measured to matter: with ground truth on, a step's
    facts and digest are the previous state's updated by the parcels it changed
    (``_carry_world``), 1.4x faster than from scratch; a state is kept in search trees
    for long, so a cache outside it would miss.
    """
    known = state.__dict__
    if (world := known.get("_world")) is None:
        world = known["_world"] = _make_world(state, changes)
    return world


def _carry_world(old: ParcelState, new: ParcelState) -> None:
    """Let ``new`` derive its facts and digest from ``old``'s, where those are known."""
    if (world := old.__dict__.get("_world")) is not None:
        new.__dict__["_world_before"] = world


def _make_world(state: ParcelState, changes: list[_Change]) -> tuple[list[Fact], int]:
    """``state``'s sorted facts and digest: the previous state's updated by ``changes``.

    From scratch when the previous state's are not known (ground truth was off, or
    ``state`` was made by ``initial``).
    """
    before = state.__dict__.pop("_world_before", None)
    if before is None:
        records = sorted(chain(state.retired.values(), state.live))  # sorted by id
        facts = list(chain.from_iterable([_record_facts(record) for record in records]))
        return facts, sum(map(_digest, records)) % 2**64
    facts, digest = before
    runs = []
    for old, _, new in changes:
        if old is None:
            digest += _digest(new)
            runs.append((bisect.bisect_left(facts, (new[_ID],)), new[_ID], 0, new))
            continue
        digest += _digest(new) - _digest(old)
        for k, _ in _FACT_FIELDS:
            if new[k] != old[k]:
                # Its run of facts: facts sort by subject first, and (pid,) sorts just
                # before every fact about pid; the requested address adds one.
                start = bisect.bisect_left(facts, (new[_ID],))
                runs.append((start, new[_ID], 6 if old[_REQUESTED] else 5, new))
                break
    if runs:
        # Replaced from the last run back, so that the earlier positions stay valid (a
        # booking's empty run may start where another parcel's does: ids order them).
        runs.sort(reverse=True)
        facts = list(facts)
        for start, _, length, new in runs:
            facts[start : start + length] = _record_facts(new)
    return facts, digest % 2**64

