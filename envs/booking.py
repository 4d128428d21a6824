"""``wmkit/Booking-v0``: revisions and authority (seed 002, governed memory).

A traveller plans a trip through ``load`` cities. The travel desk has offers on file
for each city: hotels, flights in three cabin classes, a rental car. Each quoted price
is valid for ``quote_ttl`` steps, then expires; a ``search`` re-quotes a city. Over
the episode the traveller gives wishes piecemeal and revises them: which hotel, a car
or not, the budget ("my budget is 8,000, not 10,000"), the cabin class. Until the
traveller names a class, the desk works on an *assumption* (economy); once the
traveller speaks, the assumption is released and the stated class is a fact. New
hotel offers come in as the episode runs.

Facts (canonical lowercase):

======================  ==========================================================
subject                 relation: object
======================  ==========================================================
``trip:ann``            ``budget``: ``8000`` (stated by the traveller);
                        ``class``: ``economy`` | ``premium`` | ``business`` (stated
                        by the traveller, absent until then); ``assumed_class``:
                        ``economy`` (the desk's assumption) or ``released``
``hotel:azure``         ``city``, ``area``, ``price`` (per night), ``quote``
                        (``valid`` | ``expired``), ``status`` (``offered`` |
                        ``held`` | ``booked``), ``wanted`` (``yes`` | ``no``)
``flight:tp123``        ``city``, ``class``, ``price``, ``quote``, ``status``
``car:lisbon``          ``city``, ``price`` (per day), ``quote``, ``status``,
                        ``wanted``
======================  ==========================================================

A flight is wanted when its class is the traveller's stated class, or the assumed one
while none is stated. Every fact is stated in the observation of the step that sets
or changes it (expiries and releases included), so a perfect reader with perfect
memory reconstructs the state from the text. What is hard is keeping the latest
version of each wish over long gaps, not using a released or superseded fact, telling
the assumption from the stated class, and resolving a hotel named only by its city
and area ("the Lisbon hotel in the old town") against the offer that introduced it.

Actions (case and spacing ignored): ``wait``; ``search <city>``; ``hold <item>``;
``book <item>``; ``cancel <item>``; ``ask budget``, ``ask class``, ``ask <city>``;
``confirm``. Items are named ``hotel azure``, ``flight tp123``, ``car lisbon``. A
command that does not parse or names an unknown city or item is *rejected*: the reply
says so, the move is spent and the world does not advance.

Rewards: ``book`` +1 for a wanted item with a valid quote; -1 for booking on an
expired quote (the desk re-quotes instead), for a double booking (a second item of the
same kind in a city) and for booking an item that is not wanted (a dropped hotel, a
flight in the wrong class). ``cancel`` +1 for a booking that is no longer wanted, -1
for a wanted one. ``confirm`` +1 once per version of the wishes when the itinerary
matches them (every city's wanted flight, hotel and car booked, nothing else), -1 when
it does not. ``max_score`` counts the chances to earn +1 created so far.

The pure core, ``BookingFuncEnv``, has Gymnasium's ``FuncEnv`` shape over an immutable
``BookingState``; a transition is a deterministic function of ``(state, action)``.
``BookingEnv`` is the thin ``gymnasium.Env[str, str]`` shell.
"""

from __future__ import annotations

import bisect
import hashlib
import string
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import (
    CoreDefaults,
    DiagnosticEnv,
    StepDraft,
    StepRng,
    changes_delta,
    check_int,
    check_rate,
)
from wmkit.envs.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.world.types import Claim, Delta, Fact, Probe, delta_info

__all__ = [
    "TEXT",
    "BookingEnv",
    "BookingFuncEnv",
    "BookingParams",
    "BookingState",
    "Item",
    "Trip",
    "read",
    "state_hash",
]

# --- pools and constants ---------------------------------------------------------------

CITIES = (
    "lisbon", "porto", "seville", "madrid", "lyon", "nice", "turin", "florence", "vienna",
    "prague", "krakow", "dublin", "bergen", "tallinn", "riga", "split",
)  # fmt: skip
HOTELS = (
    "azure", "mira", "lumen", "aurora", "bellevue", "cedar", "corsa", "dorian", "elba",
    "fenix", "garnet", "helios", "iris", "jasper", "kestrel", "laurel", "marina", "nova",
    "olive", "palma", "quarry", "regent", "sable", "tivoli", "umbra", "vesta", "willow",
    "zenith", "amber", "baltic", "coral", "delta", "ember", "flora", "grove", "harbor",
    "ivory", "juniper", "kingsley", "linden", "maple", "north", "orchid", "pearl",
)  # fmt: skip
AREAS = (
    "old town", "harbour", "riverside", "airport", "centre", "university", "market",
    "beach", "station", "park", "castle", "cathedral",
)  # fmt: skip
CARS = (
    "fiat", "clio", "golf", "polo", "corsa", "yaris", "ibiza", "panda", "micra", "astra",
    "focus", "fabia", "leon", "octavia", "megane", "civic",
)  # fmt: skip
TRAVELLERS = (
    "ann", "ben", "cleo", "dara", "eli", "finn", "hana", "ivo", "jade", "kai", "lena",
    "milo", "nora", "omar", "pia", "rosa", "sami", "tess", "uma", "vera",
)  # fmt: skip
CLASSES = ("economy", "premium", "business")
HOTEL, FLIGHT, CAR = 0, 1, 2  # item types
TYPE_NAMES = ("hotel", "flight", "car")

P_USER = 0.2  # per step: the traveller states or revises a wish
P_OFFER = 0.04  # per step: a new hotel offer comes in
USER_WEIGHTS = (("hotel", 35), ("drop", 10), ("car", 15), ("budget", 20), ("class", 20))

# --- text ------------------------------------------------------------------------------


def _money_text(canon: str) -> str:
    return f"{int(canon):,}"


_TITLE = SlotType(r"[A-Z][a-z]+", str.capitalize, str.lower)
SLOT_TYPES = {
    "trip": SlotType(
        r"[A-Z][a-z]+", lambda c: c[5:].capitalize(), lambda t: "trip:" + t.lower(), True
    ),
    "hotel": SlotType(
        r"Hotel [A-Z][a-z]+",
        lambda c: "Hotel " + c[6:].capitalize(),
        lambda t: "hotel:" + t[6:].lower(),
        True,
    ),
    "old": SlotType(
        r"Hotel [A-Z][a-z]+",
        lambda c: "Hotel " + c[6:].capitalize(),
        lambda t: "hotel:" + t[6:].lower(),
        True,
    ),
    "flight": SlotType(
        r"flight [A-Z]{2}\d{3}",
        lambda c: "flight " + c[7:].upper(),
        lambda t: "flight:" + t[7:].lower(),
        True,
    ),
    "car": SlotType(
        r"[A-Z][a-z]+ rental",
        lambda c: c[4:].capitalize() + " rental",
        lambda t: "car:" + t[:-7].lower(),
        True,
    ),
    "city": _TITLE,
    "area": SlotType(r"[a-z]+(?: [a-z]+)?", str, str),
    "from_area": SlotType(r"[a-z]+(?: [a-z]+)?", str, str),
    "cabin": SlotType("economy|premium|business", str, str),
    "was": SlotType("economy|premium|business", str, str),
    "price": SlotType(r"\d{1,3}(?:,\d{3})*", _money_text, lambda t: t.replace(",", "")),
    "budget": SlotType(r"\d{1,3}(?:,\d{3})*", _money_text, lambda t: t.replace(",", "")),
    "before": SlotType(r"\d{1,3}(?:,\d{3})*", _money_text, lambda t: t.replace(",", "")),
    "nights": SlotType(r"\d", str, str),
}


def _kind(name: str, templates: str, *claims: ClaimSpec) -> MessageKind:
    return MessageKind(name, tuple(t.strip() for t in templates.strip().split("\n")), claims)


def _item_claims(slot: str, *relations: tuple[str, str | None, str | None]) -> tuple:
    return tuple(ClaimSpec(slot, rel, s, v) for rel, s, v in relations)


_QUOTED = (("price", "price", None), ("quote", None, "valid"))
_UNCHOSEN = (("status", None, "offered"), ("wanted", None, "no"))
_HOTEL_DESC = (("city", "city"), ("area", "area"))  # "the Lisbon hotel in the old town"
_OLD_DESC = (("city", "city"), ("area", "from_area"))

KINDS = (
    _kind(
        "intro",
        """
        Travel desk: a new trip to plan.
        The travel desk opens a new file.
        """,
    ),
    _kind(
        "trip",
        """
        {trip} is travelling; the first stop is {city}, {nights} nights.
        Trip file for {trip}: {city} first, for {nights} nights.
        """,
    ),
    _kind(
        "leg",
        """
        Then {city}, {nights} nights.
        Next stop: {city}, for {nights} nights.
        """,
    ),
    _kind(
        "budget_first",
        """
        {trip} sets a budget of {budget}.
        {trip}: my budget is {budget}.
        """,
        ClaimSpec("trip", "budget", "budget"),
    ),
    _kind(
        "assume",
        """
        No cabin class given for {trip}; the desk assumes {cabin} for now.
        Assumption on file for {trip}: {cabin}, until told otherwise.
        """,
        ClaimSpec("trip", "assumed_class", "cabin"),
    ),
    # Offers: every fact of an item, at reset and when a new one comes in.
    _kind(
        "hotel_listed",
        """
        {hotel} in {city}, {area}: {price} a night, quote valid, not chosen.
        On file: {hotel} ({city}, {area}) at {price} per night, price valid, not picked yet.
        """,
        *_item_claims(
            "hotel", ("city", "city", None), ("area", "area", None), *_QUOTED, *_UNCHOSEN
        ),
    ),
    _kind(
        "new_hotel",
        """
        New offer just in: {hotel} in {city}, {area}, {price} a night, quote valid, not chosen.
        Fresh listing: {hotel} ({city}, {area}) at {price} per night, price valid, not picked yet.
        """,
        *_item_claims(
            "hotel", ("city", "city", None), ("area", "area", None), *_QUOTED, *_UNCHOSEN
        ),
    ),
    _kind(
        "flight_listed",
        """
        {flight} to {city}, {cabin}: {price}, quote valid, on offer.
        On file: {flight} ({city}, {cabin} class) at {price}, price valid, on offer.
        """,
        *_item_claims(
            "flight",
            ("city", "city", None),
            ("class", "cabin", None),
            *_QUOTED,
            ("status", None, "offered"),
        ),
    ),
    _kind(
        "car_listed",
        """
        {car} in {city}: {price} a day, quote valid, not chosen.
        On file: the {car} ({city}) at {price} per day, price valid, not picked yet.
        """,
        *_item_claims("car", ("city", "city", None), *_QUOTED, *_UNCHOSEN),
    ),
    # Search results: a fresh quote per offer.
    _kind(
        "quoted",
        """
        {hotel}: {price} a night, quote valid.
        Quote for {hotel}: {price} per night, valid for now.
        """,
        *_item_claims("hotel", *_QUOTED),
    ),
    _kind(
        "flight_quoted",
        """
        {flight}: {price}, quote valid.
        Quote for {flight}: {price}, valid for now.
        """,
        *_item_claims("flight", *_QUOTED),
    ),
    _kind(
        "car_quoted",
        """
        {car}: {price} a day, quote valid.
        Quote for the {car}: {price} per day, valid for now.
        """,
        *_item_claims("car", *_QUOTED),
    ),
    # Quotes lapse.
    _kind(
        "expired",
        """
        The quote for {hotel} has expired.
        {hotel}: the quoted price is no longer valid.
        """,
        ClaimSpec("hotel", "quote", value="expired"),
    ),
    _kind(
        "flight_expired",
        """
        The quote for {flight} has expired.
        {flight}: the quoted price is no longer valid.
        """,
        ClaimSpec("flight", "quote", value="expired"),
    ),
    _kind(
        "car_expired",
        """
        The quote for the {car} has expired.
        The {car}: the quoted price is no longer valid.
        """,
        ClaimSpec("car", "quote", value="expired"),
    ),
    _kind(
        "hold_lapsed",
        """
        The hold on {hotel} lapsed with its quote.
        {hotel} is no longer held: the quote expired.
        """,
        ClaimSpec("hotel", "quote", value="expired"),
        ClaimSpec("hotel", "status", value="offered"),
    ),
    _kind(
        "flight_hold_lapsed",
        """
        The hold on {flight} lapsed with its quote.
        {flight} is no longer held: the quote expired.
        """,
        ClaimSpec("flight", "quote", value="expired"),
        ClaimSpec("flight", "status", value="offered"),
    ),
    _kind(
        "car_hold_lapsed",
        """
        The hold on the {car} lapsed with its quote.
        The {car} is no longer held: the quote expired.
        """,
        ClaimSpec("car", "quote", value="expired"),
        ClaimSpec("car", "status", value="offered"),
    ),
    # The traveller's wishes.
    _kind(
        "want_hotel",
        """
        {trip}: in {city}, I would like {hotel}.
        {trip} writes: for {city}, book me into {hotel}.
        """,
        ClaimSpec("hotel", "wanted", value="yes"),
    ),
    _kind(
        "want_hotel_desc",
        """
        {trip}: in {city}, I would like the hotel in the {area}.
        {trip} writes: for {city}, the {area} hotel, please.
        """,
        ClaimSpec(_HOTEL_DESC, "wanted", value="yes"),
    ),
    _kind(
        "swap_hotel",
        """
        {trip}: in {city}, make it {hotel} instead of {old}.
        {trip} changed their mind about {city}: {hotel}, not {old}.
        """,
        ClaimSpec("old", "wanted", value="no"),
        ClaimSpec("hotel", "wanted", value="yes"),
    ),
    _kind(
        "swap_hotel_desc",
        """
        {trip}: in {city}, switch from the {from_area} hotel to the one in the {area}.
        {trip} changed their mind about {city}: the {area} hotel, not the {from_area} one.
        """,
        ClaimSpec(_OLD_DESC, "wanted", value="no"),
        ClaimSpec(_HOTEL_DESC, "wanted", value="yes"),
    ),
    _kind(
        "drop_hotel",
        """
        {trip}: drop {hotel}.
        {trip} no longer wants {hotel}.
        """,
        ClaimSpec("hotel", "wanted", value="no"),
    ),
    _kind(
        "drop_hotel_desc",
        """
        {trip}: drop the {city} hotel in the {area}.
        {trip} no longer wants the {area} hotel in {city}.
        """,
        ClaimSpec(_HOTEL_DESC, "wanted", value="no"),
    ),
    _kind(
        "want_car",
        """
        {trip}: I will need the {car}.
        {trip} asks for the {car} after all.
        """,
        ClaimSpec("car", "wanted", value="yes"),
    ),
    _kind(
        "drop_car",
        """
        {trip}: no {car} for me.
        {trip} will manage without the {car}.
        """,
        ClaimSpec("car", "wanted", value="no"),
    ),
    _kind(
        "revise_budget",
        """
        {trip}: my budget is {budget}, not {before}.
        {trip} revises the budget to {budget} (it was {before}).
        """,
        ClaimSpec("trip", "budget", "budget"),
    ),
    _kind(
        "state_class",
        """
        {trip}: {cabin} class for me, please; drop the assumption.
        {trip} settles the cabin: {cabin}; the assumed class is released.
        """,
        ClaimSpec("trip", "class", "cabin"),
        ClaimSpec("trip", "assumed_class", value="released"),
    ),
    _kind(
        "revise_class",
        """
        {trip}: make that {cabin} class, not {was}.
        {trip} changes the cabin to {cabin} (it was {was}).
        """,
        ClaimSpec("trip", "class", "cabin"),
    ),
    # Replies to the agent.
    _kind(
        "held",
        """
        {hotel} is on hold; its quote is valid again.
        Holding {hotel}; the price stays valid for now.
        """,
        ClaimSpec("hotel", "status", value="held"),
        ClaimSpec("hotel", "quote", value="valid"),
    ),
    _kind(
        "flight_held",
        """
        {flight} is on hold; its quote is valid again.
        Holding {flight}; the price stays valid for now.
        """,
        ClaimSpec("flight", "status", value="held"),
        ClaimSpec("flight", "quote", value="valid"),
    ),
    _kind(
        "car_held",
        """
        The {car} is on hold; its quote is valid again.
        Holding the {car}; the price stays valid for now.
        """,
        ClaimSpec("car", "status", value="held"),
        ClaimSpec("car", "quote", value="valid"),
    ),
    _kind(
        "booked",
        """
        Booked {hotel}.
        {hotel} is booked.
        """,
        ClaimSpec("hotel", "status", value="booked"),
    ),
    _kind(
        "flight_booked",
        """
        Booked {flight}.
        {flight} is booked.
        """,
        ClaimSpec("flight", "status", value="booked"),
    ),
    _kind(
        "car_booked",
        """
        Booked the {car}.
        The {car} is booked.
        """,
        ClaimSpec("car", "status", value="booked"),
    ),
    _kind(
        "requoted",
        """
        The quote for {hotel} had expired; the price is now {price}, quote valid. Not booked.
        Not booked: {hotel} needed a new quote, {price}, valid for now.
        """,
        *_item_claims("hotel", *_QUOTED),
    ),
    _kind(
        "flight_requoted",
        """
        The quote for {flight} had expired; the price is now {price}, quote valid. Not booked.
        Not booked: {flight} needed a new quote, {price}, valid for now.
        """,
        *_item_claims("flight", *_QUOTED),
    ),
    _kind(
        "car_requoted",
        """
        The quote for the {car} had expired; the price is now {price}, quote valid. Not booked.
        Not booked: the {car} needed a new quote, {price}, valid for now.
        """,
        *_item_claims("car", *_QUOTED),
    ),
    _kind(
        "cancelled",
        """
        Cancelled {hotel}; it is back on offer, and its quote has expired.
        {hotel} released: offered again, quote expired.
        """,
        ClaimSpec("hotel", "status", value="offered"),
        ClaimSpec("hotel", "quote", value="expired"),
    ),
    _kind(
        "flight_cancelled",
        """
        Cancelled {flight}; it is back on offer, and its quote has expired.
        {flight} released: offered again, quote expired.
        """,
        ClaimSpec("flight", "status", value="offered"),
        ClaimSpec("flight", "quote", value="expired"),
    ),
    _kind(
        "car_cancelled",
        """
        Cancelled the {car}; it is back on offer, and its quote has expired.
        The {car} released: offered again, quote expired.
        """,
        ClaimSpec("car", "status", value="offered"),
        ClaimSpec("car", "quote", value="expired"),
    ),
    _kind("nothing_held", "Nothing to cancel: it is neither held nor booked."),
    _kind("already_booked", "That is already booked."),
    _kind("need_quote", "That quote has expired; search again before holding."),
    _kind(
        "searched",
        """
        Searching {city}...
        Fresh quotes for {city}:
        """,
    ),
    # The traveller answers the agent's questions.
    _kind(
        "say_budget",
        """
        {trip}: my budget is {budget}.
        {trip} confirms the budget: {budget}.
        """,
        ClaimSpec("trip", "budget", "budget"),
    ),
    _kind(
        "say_class",
        """
        {trip}: {cabin} class.
        {trip} confirms the cabin: {cabin}.
        """,
        ClaimSpec("trip", "class", "cabin"),
    ),
    _kind(
        "say_undecided",
        """
        {trip} has not chosen a cabin; the desk still assumes {cabin}.
        {trip}: no class decided yet; {cabin} is only the assumption.
        """,
        ClaimSpec("trip", "assumed_class", "cabin"),
    ),
    _kind(
        "say_hotel",
        """
        {trip}: in {city} I want {hotel}.
        {trip} confirms {hotel} for {city}.
        """,
        ClaimSpec("hotel", "wanted", value="yes"),
    ),
    _kind(
        "say_no_hotel",
        """
        {trip}: no hotel chosen in {city} yet.
        {trip} has not picked a hotel in {city}.
        """,
    ),
    _kind(
        "say_car",
        """
        {trip}: yes, I need the {car}.
        {trip} confirms the {car}.
        """,
        ClaimSpec("car", "wanted", value="yes"),
    ),
    _kind(
        "say_no_car",
        """
        {trip}: no, I do not need the {car}.
        {trip} confirms: no {car}.
        """,
        ClaimSpec("car", "wanted", value="no"),
    ),
    _kind(
        "confirmed",
        """
        {trip} confirms the itinerary: all as wished.
        {trip} is happy with the itinerary.
        """,
    ),
    _kind(
        "not_as_wished",
        """
        {trip}: that is not what I asked for.
        {trip} does not confirm: the itinerary does not match the wishes.
        """,
    ),
    _kind("waited", "You wait.\nThe desk is quiet for a moment."),
    _kind(
        "not_understood",
        "That command was not understood. Try: wait, search <city>, hold <item>, book "
        "<item>, cancel <item>, ask budget|class|<city>, confirm.",
    ),
    _kind("unknown_city", "That city is not on this trip."),
    _kind("unknown_item", "There is no such offer on file."),
    _kind(
        "chatter",
        """
        The printer at the desk jams again.
        A colleague asks about {city} in the spring.
        Exchange rates moved a little today.
        {trip} sends a photo of their suitcase.
        The phone rings; a wrong number.
        """,
    ),
)

TEXT = TextBook(KINDS, SLOT_TYPES)
"""The Booking family's templates: renders observations and reads them back."""

_CHATTER = TEXT.kinds["chatter"].templates
_LINE_MAX = 140  # longest rendered line (checked over every template in the tests)


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    Inverts every template and paraphrase of the family. A hotel named by its city and
    area comes out as a description subject, ``(("city", "lisbon"), ("area", "old
    town"))``, which the caller resolves against facts it read earlier: no two hotels in
    a city share an area. Chatter and replies without facts yield nothing.
    """
    return TEXT.read(observation)


# --- parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class BookingParams:
    """Episode parameters; validated on construction.

    Attributes:
        horizon: steps per episode, 20..1000.
        load: cities on the trip, 1..16.
        quote_ttl: steps a quoted price stays valid, 2..100.
        paraphrase_rate: probability a message uses a non-canonical template.
        distractors: chatter lines per step, 0..50.
        indirection: probability the traveller names a hotel by city and area.
        probe_rate: probability that probes are due at a step.

    Raises:
        TypeError: a parameter has the wrong type.
        ValueError: a parameter is out of range.
    """

    horizon: int = 200
    load: int = 3
    quote_ttl: int = 15
    paraphrase_rate: float = 0.5
    distractors: int = 1
    indirection: float = 0.5
    probe_rate: float = 0.3

    def __post_init__(self) -> None:
        check_int("horizon", self.horizon, 20, 1000)
        check_int("load", self.load, 1, len(CITIES))
        check_int("quote_ttl", self.quote_ttl, 2, 100)
        check_int("distractors", self.distractors, 0, 50)
        for name in ("paraphrase_rate", "indirection", "probe_rate"):
            check_rate(name, getattr(self, name))


# --- state -----------------------------------------------------------------------------


class Item(NamedTuple):
    """One offer: its facts, its quote's expiry, and when each fact was last stated.

    ``area`` is ``""`` but for hotels, ``cabin`` ``""`` but for flights, ``wanted``
    ``""`` for flights (theirs follows the trip's class). ``expires`` is the step the
    quote lapses, or -1 (booked, or already expired). ``*_at`` fields are probe anchors;
    ``revised`` names the relations whose value has been superseded at least once.
    ``facts`` (sorted by relation) and ``digest`` are derived (see ``_seal``).
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
    facts: tuple[Fact, ...] = ()
    digest: int = 0


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

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        step: steps taken since reset (0 at reset).
        trip: the traveller's wishes.
        items: every offer on file, in order of arrival.
        by_id: indices into ``items`` sorted by item id.
        by_words: command name (``hotel azure``) -> item index, shared by the episode.
        next_expiry: the earliest quote expiry step among items, or -1.
        confirmed: whether the current wishes were already confirmed (+1 once each).
        text: this step's observation.
        mentioned: entity ids named in this step's observation (unique, in text order).
        probes: probes due this step.
        action_changes: ``(subject, relation, before, after)`` changes caused by the
            agent's command this step (``before`` None for a new fact); see
            ``action_delta``.
        event_changes: the same for the world's events this step; see ``event_delta``.
        reward: this step's reward.
        score: cumulative reward.
        max_score: chances to earn +1 created so far.
        admissible: sorted admissible commands.
        digest: sum of item digests mod 2**64 (incremental state hash).
    """

    params: BookingParams
    seed: int
    step: int
    trip: Trip
    items: tuple[Item, ...]
    by_id: tuple[int, ...]
    by_words: dict[str, int]
    next_expiry: int
    confirmed: bool
    text: str
    mentioned: tuple[str, ...]
    probes: tuple[Probe, ...]
    action_changes: tuple[tuple[str, str, str | None, str], ...]
    event_changes: tuple[tuple[str, str, str | None, str], ...]
    reward: int
    score: int
    max_score: int
    admissible: tuple[str, ...]
    digest: int

    @property
    def action_delta(self) -> Delta:
        """The fact change caused by the agent's command this step."""
        return changes_delta(self.action_changes)

    @property
    def event_delta(self) -> Delta:
        """The fact change caused by the world's events (expiries, wishes...) this step."""
        return changes_delta(self.event_changes)


def state_hash(state: BookingState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, the trip's wishes and every item (incrementally,
    through item digests). The observation and score are left out.
    """
    # The trip without ``revised``: a frozenset of strings reprs in a per-process order.
    raw = repr((state.seed, state.step, state.trip[:-1], state.confirmed, state.digest))
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


_new_state = BookingState._make
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


def _seal(item: Item, index: int) -> Item:
    s = item.id
    quote_etc = (
        Fact(s, "price", str(item.price)),
        Fact(s, "quote", item.quote),
        Fact(s, "status", item.status),
    )
    if item.type == HOTEL:
        facts = (
            Fact(s, "area", item.area),
            Fact(s, "city", item.city),
            *quote_etc,
            Fact(s, "wanted", item.wanted),
        )
    elif item.type == FLIGHT:
        facts = (Fact(s, "city", item.city), Fact(s, "class", item.cabin), *quote_etc)
    else:
        facts = (Fact(s, "city", item.city), *quote_etc, Fact(s, "wanted", item.wanted))
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
    digest = hash(key) % 2**64
    return item._replace(facts=facts, digest=digest)


def _trip_facts(trip: Trip) -> list[Fact]:
    s = trip.id
    out = [Fact(s, "assumed_class", trip.assumed), Fact(s, "budget", str(trip.budget))]
    if trip.cabin:
        out.append(Fact(s, "class", trip.cabin))
    return out


def _words(item_id: str) -> str:
    kind, _, name = item_id.partition(":")
    return f"{kind} {name}"


def _kind_prefix(item: Item) -> str:
    return ("", "flight_", "car_")[item.type]


def _slot(item: Item) -> str:
    return TYPE_NAMES[item.type]


def _is_wanted(trip: Trip, item: Item) -> bool:
    if item.type == FLIGHT:
        return item.cabin == (trip.cabin or trip.assumed)
    return item.wanted == "yes"


def _itinerary_ok(trip: Trip, items: tuple[Item, ...] | list[Item]) -> bool:
    """Whether exactly the wanted items are booked, and every city has its flight."""
    has_flight = set()
    for item in items:
        wanted = _is_wanted(trip, item)
        if (item.status == "booked") != wanted:
            return False
        if wanted and item.type == FLIGHT:
            has_flight.add(item.city)
    return len(has_flight) == len(trip.cities)


# --- transitions -----------------------------------------------------------------------


class _Draft(StepDraft):
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    ``changes`` maps ``(subject, relation)`` to ``[before, after]`` for the current phase
    (agent command, then world events), to split the delta by cause.
    """

    __slots__ = (
        "by_id", "by_words", "changes", "confirmed", "digest", "dirty", "items", "lines",
        "max_score", "mentioned", "next_expiry", "params", "reward", "rng", "state", "step",
        "trip",
    )  # fmt: skip
    voice = Voice(TEXT)

    def __init__(self, state: BookingState, step: int) -> None:
        self.state = state
        self.params = state.params
        self.step = step
        self.rng = StepRng(state.seed, step)
        self.trip = state.trip
        self.items: tuple[Item, ...] | list[Item] = state.items  # copied on first write
        self.by_id = state.by_id
        self.by_words = state.by_words
        self.next_expiry = state.next_expiry
        self.confirmed = state.confirmed
        self.lines: list[str] = []
        self.mentioned: dict[str, None] = {}  # insertion-ordered: deterministic
        self.changes: dict[tuple[str, str], list[str | None]] = {}
        self.digest = state.digest
        self.max_score = state.max_score
        self.reward = 0
        self.dirty = False  # items were added: recompute admissible

    def say_item(self, kind: str, item: Item, **values: str) -> None:
        self.say(_kind_prefix(item) + kind, **{_slot(item): item.id}, **values)

    def chatter(self, first: int) -> None:
        rng = self.rng
        for _ in range(self.params.distractors):
            variant = rng.below(len(_CHATTER))
            template = _CHATTER[variant]
            if "{city}" in template:
                line = template.format(city=rng.choice(self.trip.cities).capitalize())
            elif "{trip}" in template:
                self.mentioned[self.trip.id] = None
                line = template.format(trip=self.trip.id[5:].capitalize())
            else:
                line = template
            self.lines.insert(first + rng.below(len(self.lines) - first + 1), line)

    # -- facts --

    def put(self, i: int, item: Item) -> None:
        item = _seal(item, i)
        if type(self.items) is tuple:
            self.items = list(self.items)
        if i == len(self.items):
            self.items.append(item)
            for fact in item.facts:
                self.note(fact.subject, fact.relation, None, fact.object)
            k = bisect.bisect_left(self.by_id, item.id, key=lambda j: self.items[j].id)
            self.by_id = (*self.by_id[:k], i, *self.by_id[k:])
            self.digest = (self.digest + item.digest) % 2**64
            self.dirty = True
        else:
            old = self.items[i]
            changed = set()
            for before, after in zip(old.facts, item.facts, strict=True):
                if before.object != after.object:
                    self.note(after.subject, after.relation, before.object, after.object)
                    changed.add(after.relation)
            if changed - item.revised:
                item = item._replace(revised=item.revised | changed)
            self.items[i] = item
            self.digest = (self.digest + item.digest - old.digest) % 2**64
        if item.expires >= 0 and (self.next_expiry < 0 or item.expires < self.next_expiry):
            self.next_expiry = item.expires

    def set_trip(self, trip: Trip) -> None:
        changed = set()
        for before, after in zip(_trip_facts(self.trip), _trip_facts(trip), strict=False):
            if before != after:
                self.note(after.subject, after.relation, before.object, after.object)
                changed.add(after.relation)
        if trip.cabin and not self.trip.cabin:
            self.note(trip.id, "class", None, trip.cabin)
        self.trip = trip._replace(revised=trip.revised | changed)

    # -- items --

    def quote(self, i: int, *, reprice: bool) -> Item:
        """Give item ``i`` a fresh valid quote (a new price when ``reprice``)."""
        item, step = self.items[i], self.step
        price = _reprice(self.rng, item) if reprice else item.price
        self.put(
            i,
            item._replace(
                price=price, price_at=step, quote="valid", quote_at=step,
                expires=step + self.params.quote_ttl,
            ),
        )  # fmt: skip
        return self.items[i]

    def wish(self, i: int, wanted: str) -> None:
        """Set the traveller's wish on item ``i``; count the chances it opens."""
        item = self.items[i]
        self.put(i, item._replace(wanted=wanted, wanted_at=self.step))
        self.wishes_changed(opened=int(wanted == "yes" or item.status == "booked"))

    def wishes_changed(self, opened: int) -> None:
        # A new version of the wishes: a confirmation can earn +1 again.
        self.max_score += opened + 1
        self.confirmed = False

    def freeze(
        self, *, admissible: tuple[str, ...] | None, probes: tuple[Probe, ...],
        action_changes: tuple = (), event_changes: tuple = (),
    ) -> BookingState:  # fmt: skip
        state = self.state
        if admissible is None:
            admissible = _admissible(self.trip, self.items) if self.dirty else state.admissible
        items = self.items if type(self.items) is tuple else tuple(self.items)
        # Positional, in field order: the state is built every step.
        return _new_state((
            self.params, state.seed, self.step, self.trip, items, self.by_id, self.by_words,
            self.next_expiry, self.confirmed, "\n".join(self.lines), tuple(self.mentioned),
            probes, action_changes, event_changes, self.reward, state.score + self.reward,
            self.max_score, admissible, self.digest,
        ))  # fmt: skip


def _admissible(trip: Trip, items: tuple[Item, ...] | list[Item]) -> tuple[str, ...]:
    actions = ["wait", "confirm", "ask budget", "ask class"]
    for city in trip.cities:
        actions += [f"ask {city}", f"search {city}"]
    for item in items:
        words = _words(item.id)
        actions += [f"hold {words}", f"book {words}", f"cancel {words}"]
    return tuple(sorted(actions))


def _reprice(rng: StepRng, item: Item) -> int:
    # Prices drift by up to 15% either way at each new quote.
    step = max(1, item.price // 20)
    return max(10, item.price + step * (rng.below(7) - 3))


def _list(d: _Draft, item: Item, new: bool = False) -> None:
    """State every fact of a newly listed item."""
    price = str(item.price)
    if item.type == HOTEL:
        kind = "new_hotel" if new else "hotel_listed"
        d.say(kind, hotel=item.id, city=item.city, area=item.area, price=price)
    elif item.type == FLIGHT:
        d.say("flight_listed", flight=item.id, city=item.city, cabin=item.cabin, price=price)
    else:
        d.say("car_listed", car=item.id, city=item.city, price=price)


class _Command(NamedTuple):
    verb: str  # wait | confirm | ask | search | hold | book | cancel
    arg: str = ""  # budget | class | city for ask; city for search
    item: int = -1


def _parse(state: BookingState, action: Any) -> _Command | str:
    """Parse a command, or return the rejection message kind. No regex: runs every step."""
    if not isinstance(action, str):
        return "not_understood"
    words = action.lower().split()
    if len(words) == 1 and words[0] in ("wait", "confirm"):
        return _Command(words[0])
    if len(words) == 2 and words[0] in ("ask", "search"):
        if words[1] in state.trip.cities or (words[0] == "ask" and words[1] in ("budget", "class")):
            return _Command(words[0], words[1])
        return "unknown_city" if words[1] not in ("budget", "class") else "not_understood"
    if len(words) == 3 and words[0] in ("hold", "book", "cancel"):
        if words[1] not in TYPE_NAMES:
            return "not_understood"
        i = state.by_words.get(f"{words[1]} {words[2]}")
        return "unknown_item" if i is None else _Command(words[0], item=i)
    return "not_understood"


# --- the pure core ---------------------------------------------------------------------


class BookingFuncEnv(CoreDefaults, FuncEnv[BookingState, str, str, int, bool, None, BookingParams]):
    """The Booking family as pure functions over an immutable ``BookingState``.

    ``transition(state, action)`` is deterministic: its randomness is drawn from the
    episode seed carried in the state and the step number, so the same code serves as
    the planner's simulator and the state value is the snapshot. The ``rng`` and
    ``params`` arguments of the ``FuncEnv`` signatures are accepted but only ``initial``
    uses them.

    Args:
        params: the episode parameters; defaults to ``BookingParams()``.
    """

    def __init__(self, params: BookingParams | None = None) -> None:
        self._params = params or BookingParams()
        super().__init__()
        p = self._params
        # Lines per step: the intro lists every offer; a search lists a city's offers
        # (up to one hotel per area); expiries, a wish, an offer and the chatter.
        per_city = len(AREAS) + 4
        lines = max(6 + p.load * 10, p.load * per_city + 8) + p.distractors
        charset = string.ascii_letters + string.digits + string.punctuation + " "
        self.observation_space = spaces.Text(
            max_length=_LINE_MAX * lines, min_length=1, charset=charset + "\n"
        )
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=charset)

    def initial(self, rng: Any, params: BookingParams | None = None) -> BookingState:
        """Return the state at reset: the trip, the budget, the assumption, the offers.

        Args:
            rng: a ``numpy.random.Generator`` (one draw makes the episode seed) or an int
                used as the episode seed directly.
            params: overrides the core's parameters for this episode.
        """
        params = params or self._params
        seed = int(rng.integers(2**62)) if hasattr(rng, "integers") else int(rng)
        r = StepRng(seed, -1)
        cities = tuple(_sample(r, CITIES, params.load))
        trip = Trip(
            id="trip:" + r.choice(TRAVELLERS), cities=cities,
            nights=tuple(1 + r.below(4) for _ in cities), budget=500 * (12 + r.below(19)),
            cabin="", assumed="economy", budget_at=0, cabin_at=-1, assumed_at=0,
        )  # fmt: skip
        none: tuple = ()
        blank = BookingState(
            params=params, seed=seed, step=0, trip=trip, items=none, by_id=none, by_words={},
            next_expiry=-1, confirmed=False, text="", mentioned=none, probes=none,
            action_changes=none, event_changes=none, reward=0, score=0, max_score=0,
            admissible=(), digest=0,
        )  # fmt: skip
        d = _Draft(blank, 0)
        d.say("intro")
        d.say("trip", trip=trip.id, city=cities[0], nights=str(trip.nights[0]))
        for city, nights in zip(cities[1:], trip.nights[1:], strict=True):
            d.say("leg", city=city, nights=str(nights))
        d.say("budget_first", trip=trip.id, budget=str(trip.budget))
        d.say("assume", trip=trip.id, cabin=trip.assumed)
        for fact in _trip_facts(trip):
            d.note(*fact[:2], None, fact.object)
        used_flights: set[str] = set()
        hotels = list(_sample(r, HOTELS, len(HOTELS)))
        cars = _sample(r, CARS, len(cities))
        for city, car in zip(cities, cars, strict=True):
            for area in _sample(r, AREAS, 2):
                _add_item(d, _new_hotel(r, hotels.pop(), city, area, 0))
            for cabin in CLASSES:
                code = _flight_code(r, used_flights)
                price = (150 + 10 * r.below(26)) * (1, 2, 4)[CLASSES.index(cabin)]
                _add_item(d, _item("flight:" + code, FLIGHT, city, "", cabin, price, "", 0))
            _add_item(d, _item("car:" + car, CAR, city, "", "", 30 + 5 * r.below(13), "no", 0))
        # Quotes given at reset lapse at staggered steps.
        for i, item in enumerate(d.items):
            d.put(i, item._replace(expires=params.quote_ttl // 2 + r.below(params.quote_ttl)))
        d.max_score = len(cities) + 1  # every city's flight, and a confirmation
        d.chatter(first=1)
        return d.freeze(admissible=None, probes=(), event_changes=d.take_changes())

    def transition(
        self, state: BookingState, action: str, rng: Any = None, params: Any = None
    ) -> BookingState:
        """Apply the agent's command, then the world's events at the next step.

        A rejected command spends the move with a reply and leaves the world as it was:
        no events, no probes.
        """
        d = _Draft(state, state.step + 1)
        cmd = _parse(state, action)
        if not isinstance(cmd, _Command):
            d.say(cmd)
            return d.freeze(admissible=state.admissible, probes=())
        _command(d, cmd)
        action_changes = d.take_changes()
        _events(d)
        event_changes = d.take_changes()
        d.chatter(first=1)
        return d.freeze(
            admissible=None, probes=_probes(d), action_changes=action_changes,
            event_changes=event_changes,
        )  # fmt: skip

    def observation(self, state: BookingState, rng: Any = None, params: Any = None) -> str:
        """Return the text of ``state``'s step, one message per line."""
        return state.text

    def truth_info(self, state: BookingState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        items = state.items
        # Ids sort as car:* < flight:* < hotel:* < trip:*.
        facts = list(chain.from_iterable([items[i].facts for i in state.by_id]))
        facts += _trip_facts(state.trip)
        return {
            "wm.state": facts,
            "wm.delta": delta_info(state.action_delta, state.event_delta),
            "wm.probes": list(state.probes),
            "wm.state_hash": state_hash(state),
            "wm.mentioned": sorted(state.mentioned),
        }

    @staticmethod
    def admissible_actions(state: BookingState) -> list[str]:
        """Return the commands the desk accepts here, sorted.

        ``wait``, ``confirm``, ``ask`` and ``search`` for the trip, and ``hold``,
        ``book`` and ``cancel`` for every offer on file: picking the right one is the
        task.
        """
        return list(state.admissible)


def _sample(rng: StepRng, pool: tuple[str, ...], k: int) -> list[str]:
    items = list(pool)
    for i in range(k):
        j = i + rng.below(len(items) - i)
        items[i], items[j] = items[j], items[i]
    return items[:k]


def _flight_code(rng: StepRng, used: set[str]) -> str:
    while True:
        code = chr(97 + rng.below(26)) + chr(97 + rng.below(26)) + str(100 + rng.below(900))
        if code not in used:
            used.add(code)
            return code


def _item(
    item_id: str, kind: int, city: str, area: str, cabin: str, price: int, wanted: str, step: int
) -> Item:
    return Item(
        id=item_id, type=kind, city=city, area=area, cabin=cabin, price=price, quote="valid",
        status="offered", wanted=wanted, expires=-1, intro=step, price_at=step, quote_at=step,
        status_at=step, wanted_at=step,
    )  # fmt: skip


def _new_hotel(rng: StepRng, name: str, city: str, area: str, step: int) -> Item:
    return _item("hotel:" + name, HOTEL, city, area, "", 60 + 10 * rng.below(20), "no", step)


def _add_item(d: _Draft, item: Item, new: bool = False) -> None:
    _list(d, item, new)
    d.put(len(d.items), item)
    d.by_words = {**d.by_words, _words(item.id): len(d.items) - 1}  # shared: never mutate


def _command(d: _Draft, cmd: _Command) -> None:
    """Apply the agent's parsed command to the draft (every parsed command is accepted)."""
    trip = d.trip
    if cmd.verb == "wait":
        d.say("waited")
    elif cmd.verb == "confirm":
        if _itinerary_ok(trip, d.items):
            d.say("confirmed", trip=trip.id)
            d.reward += 0 if d.confirmed else 1
            d.confirmed = True
        else:
            d.say("not_as_wished", trip=trip.id)
            d.reward -= 1
    elif cmd.verb == "ask":
        _answer(d, cmd.arg)
    elif cmd.verb == "search":
        d.say("searched", city=cmd.arg)
        for i in d.by_id:
            item = d.items[i]
            if item.city == cmd.arg and item.status != "booked":
                item = d.quote(i, reprice=True)
                d.say_item("quoted", item, price=str(item.price))
    else:
        _item_command(d, cmd.verb, cmd.item)


def _item_command(d: _Draft, verb: str, i: int) -> None:
    item, step, trip = d.items[i], d.step, d.trip
    if verb == "cancel":
        if item.status == "offered":
            d.say("nothing_held")
            return
        if item.status == "booked":
            d.reward += -1 if _is_wanted(trip, item) else 1
        d.say_item("cancelled", item)
        d.put(
            i,
            item._replace(
                status="offered", status_at=step, quote="expired", quote_at=step, expires=-1
            ),
        )  # fmt: skip
        return
    if item.status == "booked":
        d.say("already_booked")
        return
    if verb == "hold":
        if item.quote != "valid":
            d.say("need_quote")
            return
        d.say_item("held", item)
        d.put(
            i,
            item._replace(
                status="held", status_at=step, quote_at=step, expires=step + d.params.quote_ttl
            ),
        )
        return
    # book
    if item.quote != "valid":
        d.reward -= 1  # booking on an expired price: the desk re-quotes instead
        item = d.quote(i, reprice=True)
        d.say_item("requoted", item, price=str(item.price))
        return
    double = any(
        other.status == "booked" and other.type == item.type and other.city == item.city
        for other in d.items
    )
    d.reward += 1 if _is_wanted(trip, item) and not double else -1
    d.say_item("booked", item)
    d.put(i, item._replace(status="booked", status_at=step, expires=-1))


def _answer(d: _Draft, topic: str) -> None:
    """The traveller restates the current wish on ``topic``."""
    trip = d.trip
    if topic == "budget":
        d.say("say_budget", trip=trip.id, budget=str(trip.budget))
        d.set_trip(trip._replace(budget_at=d.step))
    elif topic == "class":
        if trip.cabin:
            d.say("say_class", trip=trip.id, cabin=trip.cabin)
            d.set_trip(trip._replace(cabin_at=d.step))
        else:
            d.say("say_undecided", trip=trip.id, cabin=trip.assumed)
            d.set_trip(trip._replace(assumed_at=d.step))
    else:
        hotel = next(
            (
                i
                for i, it in enumerate(d.items)
                if it.type == HOTEL and it.city == topic and it.wanted == "yes"
            ),
            None,
        )
        if hotel is None:
            d.say("say_no_hotel", trip=trip.id, city=topic)
        else:
            d.say("say_hotel", trip=trip.id, city=topic, hotel=d.items[hotel].id)
            d.put(hotel, d.items[hotel]._replace(wanted_at=d.step))
        car = _car_of(d, topic)
        d.say("say_car" if d.items[car].wanted == "yes" else "say_no_car", trip=trip.id,
              car=d.items[car].id)  # fmt: skip
        d.put(car, d.items[car]._replace(wanted_at=d.step))


def _car_of(d: _Draft, city: str) -> int:
    return next(i for i, it in enumerate(d.items) if it.type == CAR and it.city == city)


def _events(d: _Draft) -> None:
    """Quotes lapse; a new hotel offer may come in; the traveller may state a wish."""
    rng, step = d.rng, d.step
    if 0 <= d.next_expiry <= step:
        d.next_expiry = -1
        for i in d.by_id:
            item = d.items[i]
            if item.expires == step:
                held = item.status == "held"
                d.say_item("hold_lapsed" if held else "expired", item)
                d.put(
                    i,
                    item._replace(
                        quote="expired", quote_at=step, expires=-1,
                        status="offered" if held else item.status,
                        status_at=step if held else item.status_at,
                    ),
                )  # fmt: skip
            elif item.expires > step and (d.next_expiry < 0 or item.expires < d.next_expiry):
                d.next_expiry = item.expires
    bits = rng.bits()  # one draw for the step's two independent rolls (12 bits each)
    if bits & 4095 < P_OFFER * 4096:
        city = rng.choice(d.trip.cities)
        taken = {it.area for it in d.items if it.type == HOTEL and it.city == city}
        names = {it.id for it in d.items if it.type == HOTEL}
        areas = [a for a in AREAS if a not in taken]
        free = [h for h in HOTELS if "hotel:" + h not in names]
        if areas and free:
            item = _new_hotel(rng, rng.choice(free), city, rng.choice(areas), step)
            item = item._replace(expires=step + d.params.quote_ttl)
            _add_item(d, item, new=True)
    if (bits >> 12) & 4095 < P_USER * 4096:
        _wish(d)


def _wish(d: _Draft) -> None:
    """The traveller states or revises one wish."""
    rng, trip = d.rng, d.trip
    roll = rng.below(100)
    for kind, weight in USER_WEIGHTS:  # noqa: B007  (the loop picks ``kind``)
        if roll < weight:
            break
        roll -= weight
    if kind == "budget":
        # A revision up or down by 500 to 3,000, kept within 4,000..20,000.
        change = 500 * (1 + rng.below(6)) * (1 if rng.below(2) else -1)
        if not 4000 <= trip.budget + change <= 20000:
            change = -change
        budget = trip.budget + change
        d.say("revise_budget", trip=trip.id, budget=str(budget), before=str(trip.budget))
        d.set_trip(trip._replace(budget=budget, budget_at=d.step))
        d.wishes_changed(opened=0)
        return
    if kind == "class":
        current = trip.cabin or trip.assumed
        cabin = rng.choice([c for c in CLASSES if c != trip.cabin])
        if trip.cabin:
            d.say("revise_class", trip=trip.id, cabin=cabin, was=trip.cabin)
            new = trip._replace(cabin=cabin, cabin_at=d.step)
        else:
            d.say("state_class", trip=trip.id, cabin=cabin)
            new = trip._replace(
                cabin=cabin, cabin_at=d.step, assumed="released", assumed_at=d.step
            )  # fmt: skip
        d.set_trip(new)
        # Flights of the old class that are booked must go; the new class's be booked.
        opened = 0
        if cabin != current:
            for item in d.items:
                if item.type == FLIGHT and (item.cabin == cabin or item.status == "booked"):
                    opened += item.cabin == cabin or item.cabin == current
        d.wishes_changed(opened=opened)
        return
    city = rng.choice(trip.cities)
    hotels = [i for i in d.by_id if d.items[i].type == HOTEL and d.items[i].city == city]
    chosen = next((i for i in hotels if d.items[i].wanted == "yes"), None)
    by_desc = rng.random() < d.params.indirection
    if kind == "drop" and chosen is not None:
        old = d.items[chosen]
        if by_desc:
            d.say("drop_hotel_desc", trip=trip.id, city=city, area=old.area)
        else:
            d.say("drop_hotel", trip=trip.id, hotel=old.id)
        d.wish(chosen, "no")
    elif kind in ("hotel", "drop"):
        new_i = rng.choice([i for i in hotels if i != chosen])
        new = d.items[new_i]
        if chosen is None:
            if by_desc:
                d.say("want_hotel_desc", trip=trip.id, city=city, area=new.area)
            else:
                d.say("want_hotel", trip=trip.id, city=city, hotel=new.id)
        else:
            old = d.items[chosen]
            if by_desc:
                d.say("swap_hotel_desc", trip=trip.id, city=city, area=new.area,
                      from_area=old.area)  # fmt: skip
            else:
                d.say("swap_hotel", trip=trip.id, city=city, hotel=new.id, old=old.id)
            d.wish(chosen, "no")
        d.wish(new_i, "yes")
    else:
        car = _car_of(d, city)
        wanted = "no" if d.items[car].wanted == "yes" else "yes"
        d.say("want_car" if wanted == "yes" else "drop_car", trip=trip.id, car=d.items[car].id)
        d.wish(car, wanted)


def _probes(d: _Draft) -> tuple[Probe, ...]:
    """Questions due now about mentioned entities: stale, breakage and drift."""
    rng, trip = d.rng, d.trip
    if rng.random() >= d.params.probe_rate:
        return ()
    items = d.items
    probes: dict[tuple[str, str], Probe] = {}
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        roll = rng.below(3)
        item = items[rng.below(len(items))]
        if roll == 0:
            # Stale: a fact that was superseded or released at least once.
            probe = _stale_probe(d, rng)
            if probe is None:
                continue
        elif roll == 1:
            # Breakage: what an offer is, stated when it arrived; or the budget.
            if rng.random() < 0.25:
                probe = Probe(trip.id, "budget", str(trip.budget), trip.budget_at, "breakage")
            else:
                # Fixed facts: a hotel's area and city, a flight's city and class, a car's city.
                fact = item.facts[rng.below(1 if item.type == CAR else 2)]
                probe = Probe(item.id, fact.relation, fact.object, item.intro, "breakage")
        elif rng.random() < 0.5:
            probe = Probe(item.id, "status", item.status, item.status_at, "drift")
        else:
            probe = Probe(item.id, "quote", item.quote, item.quote_at, "drift")
        probes.setdefault((probe.subject, probe.relation), probe)
    return tuple(probes.values())


def _stale_probe(d: _Draft, rng: StepRng) -> Probe | None:
    trip = d.trip
    if trip.revised and rng.random() < 0.4:
        relation = rng.choice(sorted(trip.revised))
        answer, anchor = {
            "budget": (str(trip.budget), trip.budget_at),
            "class": (trip.cabin, trip.cabin_at),
            "assumed_class": (trip.assumed, trip.assumed_at),
        }[relation]
        return Probe(trip.id, relation, answer, anchor, "stale")
    revised = [it for it in d.items if it.revised]
    if not revised:
        return None
    item = rng.choice(revised)
    relation = rng.choice(sorted(item.revised))
    answer, anchor = {
        "price": (str(item.price), item.price_at),
        "quote": (item.quote, item.quote_at),
        "status": (item.status, item.status_at),
        "wanted": (item.wanted, item.wanted_at),
    }[relation]
    return Probe(item.id, relation, answer, anchor, "stale")


# --- the Gymnasium shell ---------------------------------------------------------------


class BookingEnv(DiagnosticEnv):
    """``wmkit/Booking-v0``: the shared diagnostic shell over ``BookingFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ``max_score`` counts the chances
    to earn +1 created so far. ``terminated`` is always False; the episode ends at
    ``horizon``. ``BookingEnv.reader`` is the family's perfect reader, ``read``.

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        horizon: steps per episode, 20..1000 (default 200).
        load: cities on the trip, 1..16 (default 3).
        quote_ttl: steps a quoted price stays valid, 2..100 (default 15).
        paraphrase_rate: probability a message uses a non-canonical template, 0..1.
        distractors: chatter lines per step, 0..50.
        indirection: probability the traveller names a hotel by city and area.
        probe_rate: probability that probes are due at a step, 0..1.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = BookingFuncEnv
    params_class = BookingParams
    reader = staticmethod(read)
