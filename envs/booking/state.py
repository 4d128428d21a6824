"""The Booking family's parameters, its records and immutable state, and its ground truth.

The step path keeps only what the next step needs (:class:`BookingState`); what ground
truth reports (facts, deltas, the state hash) is derived from it on demand, so an
episode without ground truth never pays for it. Only a few items change in a step and
an unchanged item is the same object, so the derivations are kept per object and per
items tuple, and each step's is made from the step before's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain, compress, count
from operator import is_not
from typing import Any, NamedTuple

from wmkit.envs.booking.text import CITIES
from wmkit.envs.diagnostic.params import FamilyParams, check_int
from wmkit.envs.diagnostic.truth import Change, changes_delta
from wmkit.world.types import Delta, Fact, Probe

__all__ = [
    "CAR",
    "FLIGHT",
    "HOTEL",
    "TYPE_NAMES",
    "BookingParams",
    "BookingState",
    "Item",
    "Trip",
    "is_wanted",
    "itinerary_ok",
    "service_steps",
    "state_hash",
]

HOTEL, FLIGHT, CAR = 0, 1, 2  # item types
TYPE_NAMES = ("hotel", "flight", "car")


@dataclass(frozen=True)
class BookingParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``load`` is the cities on the trip, 1..16; ``indirection`` the probability the
    traveller names a hotel by city and area.

    Attributes:
        quote_ttl: steps a quoted price stays valid, 2..100.
        expiry_notice: whether a quote's lapse is announced ("The quote for Hotel
            Azure has expired."); when False, every quote line is followed by its
            validity period ("quote valid for 6 steps") and the lapse is silent.

    Raises:
        TypeError: a parameter has the wrong type.
        ValueError: a parameter is out of range, or ``horizon`` is too short to book
            the first wishes (every city's flight) and confirm them:
            ``service_steps(0, load)`` steps.
    """

    MAX_LOAD = len(CITIES)

    load: int = 3
    quote_ttl: int = 15
    expiry_notice: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.expiry_notice, bool):
            raise TypeError(
                f"expiry_notice must be a bool, got {type(self.expiry_notice).__name__} "
                f"{self.expiry_notice!r}"
            )
        check_int("quote_ttl", self.quote_ttl, 2, 100)
        need = service_steps(0, self.load)
        if self.horizon < need:
            raise ValueError(
                f"horizon must be at least {need} for load {self.load} (a re-quote and a "
                f"booking of every city's flight, and a confirmation), got {self.horizon}"
            )


# --- state -----------------------------------------------------------------------------


class Item(NamedTuple):
    """One offer: its facts, its quote's expiry, and when each fact was last stated.

    ``area`` is ``""`` but for hotels, ``cabin`` ``""`` but for flights, ``wanted``
    ``""`` for flights (theirs follows the trip's class). ``expires`` is the step the
    quote lapses, or -1 (booked, or already expired). ``*_at`` fields are probe anchors;
    ``revised`` names the relations whose value has been superseded at least once.
    """

    id: str
    type: int
    city: str
    area: str
    cabin: str
    price: int
    quote: str
    status: str
    wanted: str
    expires: int
    intro: int
    price_at: int
    quote_at: int
    status_at: int
    wanted_at: int
    revised: frozenset[str] = frozenset()

    @property
    def facts(self) -> tuple[Fact, ...]:
        """The item's facts, sorted by relation; the fixed ones (city, area, class) first."""
        s, new = self.id, tuple.__new__  # Fact(...) without its Python-level __new__
        price = new(Fact, (s, "price", str(self.price)))
        quote = new(Fact, (s, "quote", self.quote))
        status = new(Fact, (s, "status", self.status))
        city = new(Fact, (s, "city", self.city))
        if self.type == HOTEL:
            area, wanted = new(Fact, (s, "area", self.area)), new(Fact, (s, "wanted", self.wanted))
            return area, city, price, quote, status, wanted
        if self.type == FLIGHT:
            return city, new(Fact, (s, "class", self.cabin)), price, quote, status
        return city, price, quote, status, new(Fact, (s, "wanted", self.wanted))


class Trip(NamedTuple):
    """The traveller's wishes about the whole trip, with anchors and revisions."""

    id: str
    cities: tuple[str, ...]
    nights: tuple[int, ...]
    budget: int
    cabin: str  # "" until stated
    assumed: str  # "economy" or "released"
    budget_at: int
    cabin_at: int
    assumed_at: int
    revised: frozenset[str] = frozenset()


class BookingState(NamedTuple):
    """The whole episode state at one step: an immutable value, the snapshot token.

    The step path keeps only what the next step needs; what ground truth reports
    (facts, deltas, probes, the state hash) is derived from it on demand, so an episode
    without ground truth never pays for it.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        step: steps taken since reset (0 at reset).
        trip: the traveller's wishes.
        items: every offer on file, in order of arrival.
        by_id: indices into ``items`` sorted by item id.
        commands: every admissible command, verbatim (``hold hotel azure``) -> its
            handler and argument; shared by the episode's states, replaced when an offer
            comes in.
        by_city: city -> (index of its car, indices of its hotels, indices of its
            flights; both sorted by id), shared by the episode.
        schedule: ``(expires, item id, index)`` of every quote that will lapse, sorted:
            the next expiries first, those due at one step in id order. An entry whose
            item's ``expires`` has changed since (renewed, held, booked, cancelled) is
            stale and dropped when due. (A quote due at a rejected command's step, when
            no events run, lapses at the next step whose events run.)
        confirmed: whether the current wishes were already confirmed (+1 once each).
        quiet: the first step at which the traveller may state a wish again. Each
            version of the wishes is given the steps an attentive desk needs to serve
            it (``service_steps``), so every chance ``max_score`` counts can be taken.
        text: this step's observation.
        mentioned: entity ids named in this step's observation, in order, with repeats.
        reward: this step's reward.
        score: cumulative reward.
        max_score: chances to earn +1 created so far.
        admissible: sorted admissible commands.
        probe_rng: the step generator's state once the text was drawn, from which the
            probes are drawn (see ``probes``); -1 when no probes are due (reset, a
            rejected command).
        prior: ``(items, trip)`` before this step (``((), None)`` at reset).
        middle: ``(items, trip)`` after the agent's command, before the world's events.
    """

    params: BookingParams
    seed: int
    step: int
    trip: Trip
    items: tuple[Item, ...]
    by_id: tuple[int, ...]
    commands: dict[str, tuple[Callable[[Any, Any], None], Any]]
    by_city: dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]]
    schedule: tuple[tuple[int, str, int], ...]
    confirmed: bool
    quiet: int
    text: str
    mentioned: tuple[str, ...]
    reward: int
    score: int
    max_score: int
    admissible: tuple[str, ...]
    probe_rng: int
    prior: tuple[tuple[Item, ...], Trip | None]
    middle: tuple[tuple[Item, ...], Trip | None]

    @property
    def probes(self) -> tuple[Probe, ...]:
        """The probes due this step."""
        from wmkit.envs.booking.events import probes  # the rules import the state

        return probes(self)

    @property
    def action_changes(self) -> tuple[Change, ...]:
        """The fact changes caused by the agent's command this step.

        ``(subject, relation, before, after)``, ``before`` None for a new fact; see
        ``action_delta``.
        """
        return _changes(*self.prior, *self.middle)

    @property
    def event_changes(self) -> tuple[Change, ...]:
        """The same for the world's events this step; see ``event_delta``."""
        return _changes(*self.middle, self.items, self.trip)

    @property
    def action_delta(self) -> Delta:
        """The fact change caused by the agent's command this step."""
        return changes_delta(self.action_changes)

    @property
    def event_delta(self) -> Delta:
        """The fact change caused by the world's events (expiries, wishes...) this step."""
        return changes_delta(self.event_changes)

    @property
    def digest(self) -> int:
        """Sum of the item digests mod 2**64 (the items' part of the state hash)."""
        return _truth(self.items, self.by_id, self.prior[0]).digest


def state_hash(state: BookingState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, the trip's wishes, when the traveller may speak
    again and every item (through item digests). The observation and score are left out.
    """
    return _state_hash(state, state.digest)


def _state_hash(state: BookingState, digest: int) -> str:
    # repr((seed, step, trip[:-1], confirmed, quiet, digest)), with the trip's repr kept.
    text = _view(state.trip).text
    raw = (
        f"({state.seed!r}, {state.step!r}, {text}, {state.confirmed!r}, {state.quiet!r}, "
        f"{digest!r})"
    )
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


_tuple_new = tuple.__new__  # builds a NamedTuple from a tuple without a Python call
_CODE = {
    word: i
    for i, word in enumerate(
        (
            "valid",
            "expired",
            "offered",
            "held",
            "booked",
            "yes",
            "no",
            "economy",
            "premium",
            "business",
            "released",
        )
    )
}

# Ground truth needs every item's facts and digest at every step, but only a few items
# change in a step, and an unchanged item is the same object. So the facts and digest of
# an item object are kept, keyed by its id() and checked by identity (the entry holds
# the object, so its id() cannot be reused while the entry lives); and so are the
# per-item lists of recent items tuples, each derived from the step before's.
_DERIVED: dict[int, tuple[Item, tuple[Fact, ...], int]] = {}
_TRUTHS: dict[int, _Truth] = {}
_DERIVED_MAX = 1024


def _derived(index: int, item: Item) -> tuple[Item, tuple[Fact, ...], int]:
    """Return ``(item, its facts, its digest)``, ``item`` at ``index`` in its items."""
    entry = _DERIVED.get(id(item))
    if entry is not None and entry[0] is item:
        return entry
    # Hash what changes over an item's life, keyed by its arrival index (its id, city
    # and kind are fixed then): ints hash the same in every process, unlike strings.
    key = (
        index,
        item.intro,
        item.type,
        item.price,
        _CODE[item.quote],
        _CODE[item.status],
        _CODE.get(item.wanted, -1),
        item.expires,
    )
    entry = item, item.facts, hash(key) % 2**64
    if len(_DERIVED) >= _DERIVED_MAX:
        _DERIVED.clear()
    _DERIVED[id(item)] = entry
    return entry


class _Truth(NamedTuple):
    """What ground truth derives from an items tuple (and its ``by_id``)."""

    items: tuple[Item, ...]
    by_id: tuple[int, ...]
    facts: list[tuple[Fact, ...]]  # per item
    digests: list[int]  # per item
    digest: int  # of the whole tuple: the sum mod 2**64
    offsets: list[int]  # per item: where its facts start in ``flat``
    flat: list[Fact]  # every item's facts, items in id order


def _truth(items: tuple[Item, ...], by_id: tuple[int, ...], base: tuple[Item, ...]) -> _Truth:
    """Return the ``_Truth`` of ``items``; from ``base``'s if that is at hand."""
    hit = _TRUTHS.get(id(items))
    if hit is not None and hit.items is items:
        return hit
    old = _TRUTHS.get(id(base))
    if old is not None and old.items is base and len(base) <= len(items):
        facts, digests, digest = old.facts.copy(), old.digests.copy(), old.digest
        n = len(base)
        changed = _changed(base, items)
        for i in changed:
            _, item_facts, item_digest = _derived(i, items[i])
            if i < n:
                digest += item_digest - digests[i]
                facts[i], digests[i] = item_facts, item_digest
            else:
                digest += item_digest
                facts.append(item_facts)
                digests.append(item_digest)
        if old.by_id is by_id:  # no new item: the facts keep their places
            offsets, flat = old.offsets, old.flat.copy()
            for i in changed:
                flat[offsets[i] : offsets[i] + len(facts[i])] = facts[i]
        else:
            offsets, flat = _flatten(facts, by_id)
    else:
        entries = [_derived(i, item) for i, item in enumerate(items)]
        facts, digests = [e[1] for e in entries], [e[2] for e in entries]
        digest = sum(digests)
        offsets, flat = _flatten(facts, by_id)
    truth = _Truth(items, by_id, facts, digests, digest % 2**64, offsets, flat)
    if len(_TRUTHS) >= 16:
        _TRUTHS.clear()
    _TRUTHS[id(items)] = truth
    return truth


def _flatten(facts: list[tuple[Fact, ...]], by_id: tuple[int, ...]) -> tuple[list[int], list[Fact]]:
    offsets, at = [0] * len(facts), 0
    for i in by_id:
        offsets[i] = at
        at += len(facts[i])
    return offsets, list(chain.from_iterable(map(facts.__getitem__, by_id)))


def _changed(a: tuple[Item, ...], b: tuple[Item, ...]) -> list[int]:
    """Return the indices where ``b`` (a later items tuple) differs from ``a``."""
    out = list(compress(count(), map(is_not, a, b)))
    if len(b) > len(a):
        out += range(len(a), len(b))
    return out


def _trip_facts(trip: Trip) -> list[Fact]:
    s = trip.id
    out = [Fact(s, "assumed_class", trip.assumed), Fact(s, "budget", str(trip.budget))]
    if trip.cabin:
        out.append(Fact(s, "class", trip.cabin))
    return out


class _TripView(NamedTuple):
    trip: Trip
    text: str  # repr of the trip without ``revised``, for the state hash
    facts: tuple[Fact, ...]


_trip_view = _TripView(None, "", ())  # type: ignore[arg-type]


def _view(trip: Trip) -> _TripView:
    """Return what ground truth derives from ``trip``; the last one is kept."""
    global _trip_view
    view = _trip_view
    if view.trip is not trip:
        # A frozenset of strings reprs in a per-process order: ``revised`` is left out.
        view = _trip_view = _TripView(trip, repr(trip[:-1]), tuple(_trip_facts(trip)))
    return view


def _changes(
    items_a: tuple[Item, ...], trip_a: Trip | None, items_b: tuple[Item, ...], trip_b: Trip | None
) -> tuple[Change, ...]:
    """Return the net fact changes from ``(items_a, trip_a)`` to ``(items_b, trip_b)``.

    Items only change in place or arrive at the end, and an unchanged item is the same
    object, so the diff skips by identity. Facts new in ``b`` have ``before`` None. An
    item's id, city, area and class never change: only its other facts are compared.
    """
    out: list[Change] = []
    if items_a is not items_b:
        n = len(items_a)
        for i in _changed(items_a, items_b):
            b = items_b[i]
            if i >= n:
                out += [(s, r, None, o) for s, r, o in _derived(i, b)[1]]
                continue
            a, s = items_a[i], b.id
            if a.price != b.price:
                out.append((s, "price", str(a.price), str(b.price)))
            if a.quote != b.quote:
                out.append((s, "quote", a.quote, b.quote))
            if a.status != b.status:
                out.append((s, "status", a.status, b.status))
            if a.wanted != b.wanted:
                out.append((s, "wanted", a.wanted, b.wanted))
    if trip_a is not trip_b and trip_b is not None:
        before = {} if trip_a is None else {f[1]: f[2] for f in _view(trip_a).facts}
        out += [(s, r, before.get(r), o) for s, r, o in _view(trip_b).facts if before.get(r) != o]
    return tuple(out)


def service_steps(cancels: int, books: int) -> int:
    """Return the steps an attentive desk needs to serve a change of the wishes.

    The desk had the wishes before served and confirmed; the change makes ``cancels``
    bookings unwanted and ``books`` items wanted. Each cancellation is a step, each
    booking at most two (a ``search`` when its quote has lapsed, then ``book``; a
    change wants at most one item per city, so a search serves one booking), and the
    confirmation one more.
    """
    return cancels + 2 * books + 1


def is_wanted(trip: Trip, item: Item) -> bool:
    """Whether the traveller wants ``item``: a flight of the stated (else assumed) class."""
    if item.type == FLIGHT:
        return item.cabin == (trip.cabin or trip.assumed)
    return item.wanted == "yes"


def itinerary_ok(trip: Trip, items: tuple[Item, ...] | list[Item]) -> bool:
    """Whether exactly the wanted items are booked, and every city has its flight."""
    cabin, has_flight = trip.cabin or trip.assumed, set()
    for item in items:  # is_wanted, inlined
        if item.type == FLIGHT:
            wanted = item.cabin == cabin
            if wanted:
                has_flight.add(item.city)
        else:
            wanted = item.wanted == "yes"
        if (item.status == "booked") != wanted:
            return False
    return len(has_flight) == len(trip.cities)
