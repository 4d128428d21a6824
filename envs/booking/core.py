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
memory reconstructs the state from the text. With ``expiry_notice=False`` a quote's
lapse is not announced: instead every quote line is followed by its validity period
(``Hotel Azure: quote valid for 6 steps.``, read as ``valid_for``: ``6``), and the
quote turns ``expired`` silently that many steps later (a hold ending with it is
still said, and so is a booking fixing the price for good). Then only a memory that
keeps the stated validity as a TTL stays exact; a last-write-wins memory keeps
``valid`` for good. What is hard is keeping the latest
version of each wish over long gaps, not using a released or superseded fact, telling
the assumption from the stated class, and resolving a hotel named only by its city
and area ("the Lisbon hotel in the old town") against the offer that introduced it.

Actions (case and spacing ignored): ``wait``; ``search <city>``; ``hold <item>``;
``book <item>``; ``cancel <item>``; ``ask budget``, ``ask class``, ``ask <city>``;
``confirm``. Items are named ``hotel azure``, ``flight tp123``, ``car lisbon``. A
command that does not parse or names an unknown city or item is *rejected*: the reply
says so, the move is spent and the world does not advance: no events run, so a quote
due at that step lapses at the next step whose events run (stated there).

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

import hashlib
import math
import string
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, compress, count, filterfalse
from operator import is_not
from typing import Any, NamedTuple

from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import (
    Change,
    CoreDefaults,
    DiagnosticEnv,
    FamilyParams,
    StepRng,
    check_int,
    truth_info,
)
from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook
from wmkit.world.types import Claim, Delta, Fact, Probe

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
_OFFER_12, _USER_12 = P_OFFER * 4096, P_USER * 4096  # as thresholds on 12 random bits
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
    "steps": SlotType(r"\d{1,3}", str, str),
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
    # Without expiry notices (``expiry_notice=False``): a quote states how long it is
    # valid, and its lapse is silent; only a hold that ends with it is said.
    _kind(
        "valid_for",
        """
        {hotel}: quote valid for {steps} steps.
        The price of {hotel} holds for {steps} steps.
        """,
        ClaimSpec("hotel", "valid_for", "steps"),
    ),
    _kind(
        "flight_valid_for",
        """
        {flight}: quote valid for {steps} steps.
        The price of {flight} holds for {steps} steps.
        """,
        ClaimSpec("flight", "valid_for", "steps"),
    ),
    _kind(
        "car_valid_for",
        """
        The {car}: quote valid for {steps} steps.
        The price of the {car} holds for {steps} steps.
        """,
        ClaimSpec("car", "valid_for", "steps"),
    ),
    _kind(
        "fixed",
        """
        {hotel}: the booked price is fixed; the quote no longer lapses.
        The price of {hotel} is locked in by the booking.
        """,
        ClaimSpec("hotel", "quote", value="valid"),
    ),
    _kind(
        "flight_fixed",
        """
        {flight}: the booked price is fixed; the quote no longer lapses.
        The price of {flight} is locked in by the booking.
        """,
        ClaimSpec("flight", "quote", value="valid"),
    ),
    _kind(
        "car_fixed",
        """
        The {car}: the booked price is fixed; the quote no longer lapses.
        The price of the {car} is locked in by the booking.
        """,
        ClaimSpec("car", "quote", value="valid"),
    ),
    _kind(
        "hold_ended",
        """
        The hold on {hotel} has ended.
        {hotel} is no longer held.
        """,
        ClaimSpec("hotel", "status", value="offered"),
    ),
    _kind(
        "flight_hold_ended",
        """
        The hold on {flight} has ended.
        {flight} is no longer held.
        """,
        ClaimSpec("flight", "status", value="offered"),
    ),
    _kind(
        "car_hold_ended",
        """
        The hold on the {car} has ended.
        The {car} is no longer held.
        """,
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
        ValueError: a parameter is out of range.
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
        # The rolls ``random() < paraphrase_rate`` and ``< indirection`` as bounds on the
        # step generator's state (see ``_BELOW``): derived once, not fields.
        object.__setattr__(self, "paraphrase_below", math.ceil(self.paraphrase_rate * 2**48))
        object.__setattr__(self, "indirection_below", math.ceil(self.indirection * 2**48))


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
        return _probes(self)

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
        return _delta(self.action_changes)

    @property
    def event_delta(self) -> Delta:
        """The fact change caused by the world's events (expiries, wishes...) this step."""
        return _delta(self.event_changes)

    @property
    def digest(self) -> int:
        """Sum of the item digests mod 2**64 (the items' part of the state hash)."""
        return _truth(self.items, self.by_id, self.prior[0]).digest


def state_hash(state: BookingState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, the trip's wishes and every item (through item
    digests). The observation and score are left out.
    """
    return _state_hash(state, state.digest)


def _state_hash(state: BookingState, digest: int) -> str:
    # repr((seed, step, trip[:-1], confirmed, digest)), with the trip's repr kept.
    text = _view(state.trip).text
    raw = f"({state.seed!r}, {state.step!r}, {text}, {state.confirmed!r}, {digest!r})"
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


_NO_DELTA = Delta()


def _delta(changes: tuple[Change, ...]) -> Delta:
    """Return the ``Delta`` of raw changes (``changes_delta``, without Python-level calls)."""
    if not changes:
        return _NO_DELTA
    new = tuple.__new__
    added = sorted([new(Fact, (s, r, after)) for s, r, _, after in changes])
    removed = sorted([new(Fact, (s, r, b)) for s, r, b, _ in changes if b is not None])
    return new(Delta, (tuple(added), tuple(removed)))


def _words(item_id: str) -> str:
    kind, _, name = item_id.partition(":")
    return f"{kind} {name}"


def _is_wanted(trip: Trip, item: Item) -> bool:
    if item.type == FLIGHT:
        return item.cabin == (trip.cabin or trip.assumed)
    return item.wanted == "yes"


def _itinerary_ok(trip: Trip, items: tuple[Item, ...] | list[Item]) -> bool:
    """Whether exactly the wanted items are booked, and every city has its flight."""
    cabin, has_flight = trip.cabin or trip.assumed, set()
    for item in items:  # _is_wanted, inlined
        if item.type == FLIGHT:
            wanted = item.cabin == cabin
            if wanted:
                has_flight.add(item.city)
        else:
            wanted = item.wanted == "yes"
        if (item.status == "booked") != wanted:
            return False
    return len(has_flight) == len(trip.cities)


# --- text on the step path ---------------------------------------------------------------


class _Spec:
    """A message kind on the step path: its templates and a memo of rendered lines.

    ``say`` passes a kind's values positionally, in the order its slots first appear in
    its templates (``slots``). A line is a pure function of (variant, values), so each
    is formatted once and then looked up.
    """

    __slots__ = (
        "entities", "formats", "lines", "memo", "priced", "slots", "templates", "to_text",
        "variants",
    )  # fmt: skip

    def __init__(self, kind: MessageKind) -> None:
        slots = {
            slot: None
            for template in kind.templates
            for _, slot, _, _ in string.Formatter().parse(template)
            if slot
        }
        self.templates = kind.templates
        self.variants = len(kind.templates)
        self.slots = tuple(slots)
        self.to_text = tuple(_TO_TEXT[slot] for slot in slots)
        self.entities = tuple(k for k, slot in enumerate(slots) if SLOT_TYPES[slot].entity)
        # Per variant: values -> (line, entity ids named). Lines about one thing (an
        # offer, a city) recur all episode; longer ones (a swap of two hotels, a budget
        # revision) mostly do not, so those are formatted each time.
        self.memo = len(self.slots) <= 1
        self.lines: tuple[dict[tuple[str, ...], tuple[str, tuple[str, ...]]], ...] = tuple(
            {} for _ in kind.templates
        )
        # Quotes (``say_quote``), per variant: item id -> the line around its price.
        self.priced: tuple[dict[str, tuple[str, str]], ...] = tuple({} for _ in kind.templates)
        # Per variant, the template for ``%`` and the slots its fields take, in order.
        self.formats: tuple[tuple[str, tuple[int, ...]], ...] = tuple(
            _percent(template, self.slots) for template in kind.templates
        )

    def render(self, variant: int, values: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if len(values) != len(self.slots):
            raise ValueError(f"{self.slots} needed, got {values}")
        to_text = self.to_text
        template, fields = self.formats[variant]
        line = template % tuple([to_text[k](values[k]) for k in fields])
        out = line, tuple([values[k] for k in self.entities])
        if self.memo:
            memo = self.lines[variant]
            if len(memo) >= 4096:  # flight codes are drawn: new ones keep coming
                memo.clear()
            memo[values] = out
        return out

    def render_quote(self, variant: int, item_id: str) -> tuple[str, str]:
        if self.slots[1:] != ("price",) or self.variants != 2:
            raise ValueError(f"{self.slots}: not an item and its price in two variants")
        text = {self.slots[0]: self.to_text[0](item_id), "price": "\0"}
        head, _, tail = self.templates[variant].format_map(text).partition("\0")
        memo = self.priced[variant]
        if len(memo) >= 4096:  # flight codes are drawn: new ones keep coming
            memo.clear()
        memo[item_id] = head, tail
        return head, tail


def _percent(template: str, slots: tuple[str, ...]) -> tuple[str, tuple[int, ...]]:
    """Return ``template`` for ``%`` formatting and the index in ``slots`` of each field."""
    out, fields = [], []
    for literal, slot, spec, conversion in string.Formatter().parse(template):
        out.append(literal.replace("%", "%%"))
        if slot is not None:
            if spec or conversion:
                raise ValueError(f"{template!r}: only plain {{slot}} fields are supported")
            out.append("%s")
            fields.append(slots.index(slot))
    return "".join(out), tuple(fields)


# Slot values to text, memoised: names and sums recur across lines, and converting one
# (``12000`` -> ``12,000``) costs as much as formatting the whole line.
_TO_TEXT = {slot: lru_cache(maxsize=4096)(kind.to_text) for slot, kind in SLOT_TYPES.items()}
_SPECS = {name: _Spec(kind) for name, kind in TEXT.kinds.items() if name != "chatter"}
_M48 = (1 << 48) - 1
# Message kinds per item type: hotel, flight, car.
_TYPED = {
    base: (base, "flight_" + base, "car_" + base)
    for base in (
        "quoted", "expired", "hold_lapsed", "held", "booked", "requoted", "cancelled",
        "valid_for", "hold_ended", "fixed",
    )
}  # fmt: skip
_EXPIRED, _HOLD_LAPSED = _TYPED["expired"], _TYPED["hold_lapsed"]
_VALID_FOR, _HOLD_ENDED, _FIXED = _TYPED["valid_for"], _TYPED["hold_ended"], _TYPED["fixed"]
_HELD, _BOOKED, _CANCELLED = _TYPED["held"], _TYPED["booked"], _TYPED["cancelled"]
# Chatter, rendered once: per template, its line or its lines per city or traveller, and
# which of the two it names ("" for neither).
_CHATTER_TABLE: tuple[tuple[Any, str], ...] = tuple(
    ({c: t.format(city=c.capitalize()) for c in CITIES}, "city")
    if "{city}" in t
    else ({"trip:" + n: t.format(trip=n.capitalize()) for n in TRAVELLERS}, "trip")
    if "{trip}" in t
    else (t, "")
    for t in _CHATTER
)


# --- transitions -----------------------------------------------------------------------

# The step generator's draws on the step path are inlined: a method call costs as much
# as the draw. StepRng's step is ``x = (x * 0x5DEECE66D + 11) & _M48``; ``random() < p``
# is ``x < ceil(p * 2**48)`` in ints (``random()`` is ``x / 2**48``, exactly); and
# ``below(n)``, ``((x >> 16) * n) >> 32``, is how many of the bounds
# ``ceil((k << 32) / n) << 16`` (k = 1..n-1) ``x`` reaches: one bisection over
# precomputed ints instead of three operations on multi-digit ones.
_BELOW = tuple(tuple(-(-(k << 32) // n) << 16 for k in range(1, n)) for n in range(33))
_BELOW_CHATTER = _BELOW[len(_CHATTER)]
# ``rng.below(100)`` against the cumulative ``USER_WEIGHTS``: the index of the wish.
_WISH_KINDS = tuple(kind for kind, _ in USER_WEIGHTS)
_WISH_BOUNDS = tuple(
    -(-(sum(w for _, w in USER_WEIGHTS[: k + 1]) << 32) // 100) << 16
    for k in range(len(USER_WEIGHTS) - 1)
)
_OFFER_BELOW = math.ceil(P_OFFER * 4096)  # ``bits & 4095 < P_OFFER * 4096`` in ints
_USER_BELOW = math.ceil(P_USER * 4096)


class _Draft:
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Items and the schedule are tuples until the first write, then lists; every write
    of an item is a new ``Item`` object, so unchanged items stay the same objects (see
    ``_changes``).
    """

    __slots__ = (
        "admissible", "by_city", "by_id", "commands", "confirmed", "items", "lines",
        "max_score", "middle", "named", "params", "prior", "reward", "rng", "schedule",
        "score", "seed", "step", "trip",
    )  # fmt: skip
    items: tuple[Item, ...] | list[Item]  # copied on first write
    schedule: tuple[tuple[int, str, int], ...] | list[tuple[int, str, int]]  # the same

    def __init__(self, state: BookingState, advance: int) -> None:
        """Start the step ``advance`` (1, or 0 at reset) steps after ``state``'s."""
        # One unpacking: a NamedTuple's attributes are slow to get one by one.
        (
            self.params, seed, step, trip, items, self.by_id, self.commands, self.by_city,
            self.schedule, self.confirmed, _, _, _, self.score, self.max_score,
            self.admissible, _, _, _,
        ) = state  # fmt: skip
        self.trip, self.items, self.prior = trip, items, (items, trip)
        self.seed, self.step = seed, step + advance
        self.rng = StepRng(seed, step + advance)
        self.lines: list[str] = []
        self.named: list[str] = []  # entity ids named, with repeats
        self.reward = 0
        self.middle: tuple[tuple[Item, ...], Trip | None] | None = None  # see transition

    # -- text --

    def say(self, kind: str, *values: str) -> None:
        """Add a line of ``kind``; values in its slot order (see ``_Spec``).

        A paraphrase at ``paraphrase_rate``: the draws of ``StepDraft.say``, inlined.
        """
        spec = _SPECS[kind]
        variant = 0
        n = spec.variants
        if n > 1:
            rng = self.rng
            rng.x = x = (rng.x * 0x5DEECE66D + 11) & _M48
            if x < self.params.paraphrase_below:
                rng.x = x = (x * 0x5DEECE66D + 11) & _M48
                variant = 1 if n == 2 else bisect_right(_BELOW[n - 1], x) + 1
        line, named = spec.lines[variant].get(values) or spec.render(variant, values)
        self.lines.append(line)
        if named:
            self.named += named

    def say_quote(self, kind: str, item: Item) -> None:
        """Say ``item``'s fresh quote in ``kind`` (``quoted`` or ``requoted``).

        ``say(kind, item.id, str(item.price))``, but prices drift, so the line is kept
        per item around its price.
        """
        spec = _SPECS[_TYPED[kind][item.type]]
        variant = 0  # two variants: the draws of ``say``
        rng = self.rng
        rng.x = x = (rng.x * 0x5DEECE66D + 11) & _M48
        if x < self.params.paraphrase_below:
            rng.x = (x * 0x5DEECE66D + 11) & _M48
            variant = 1
        head, tail = spec.priced[variant].get(item.id) or spec.render_quote(variant, item.id)
        self.lines.append(f"{head}{item.price:,}{tail}")
        self.named.append(item.id)

    def say_valid(self, item: Item) -> None:
        """Without expiry notices, say how many more steps ``item``'s quote is valid."""
        if not self.params.expiry_notice:
            self.say(_VALID_FOR[item.type], item.id, str(item.expires - self.step))

    def chatter(self) -> None:
        """Insert the distractor lines anywhere after the first line.

        The draws of ``rng.below``/``rng.choice``, inlined (see ``_BELOW``): this runs
        every step.
        """
        rng, lines = self.rng, self.lines
        x = rng.x
        for _ in range(self.params.distractors):
            x = (x * 0x5DEECE66D + 11) & _M48
            line, slot = _CHATTER_TABLE[bisect_right(_BELOW_CHATTER, x)]
            if slot == "city":
                cities = self.trip.cities
                x = (x * 0x5DEECE66D + 11) & _M48
                line = line[cities[bisect_right(_BELOW[len(cities)], x)]]
            elif slot == "trip":
                trip_id = self.trip.id
                self.named.append(trip_id)
                line = line[trip_id]
            x = (x * 0x5DEECE66D + 11) & _M48
            n = len(lines)
            lines.insert(
                1 + (bisect_right(_BELOW[n], x) if n < len(_BELOW) else ((x >> 16) * n) >> 32),
                line,
            )
        rng.x = x

    # -- items: every write goes through a fresh list, copied on the first write --

    def set_status(
        self, i: int, old: Item, quote: str, status: str, expires: int, quote_at: int,
        status_at: int,
    ) -> None:  # fmt: skip
        """Change item ``i``'s quote and status (``old`` is the item now)."""
        # One unpacking (a NamedTuple's attributes are slow to get one by one), the new
        # item built positionally: this runs at almost every step.
        (
            item_id, kind, city, area, cabin, price, old_quote, old_status, wanted,
            old_expires, intro, price_at, _, _, wanted_at, revised,
        ) = old  # fmt: skip
        if quote != old_quote and "quote" not in revised:
            revised = revised | _QUOTE
        if status != old_status and "status" not in revised:
            revised = revised | _STATUS
        items = self.items
        if type(items) is tuple:
            items = self.items = list(items)
        items[i] = _tuple_new(Item, (
            item_id, kind, city, area, cabin, price, quote, status, wanted, expires, intro,
            price_at, quote_at, status_at, wanted_at, revised,
        ))  # fmt: skip
        if expires >= 0 and expires != old_expires:
            self.lapse_at(expires, item_id, i)

    def quote(self, i: int, *, reprice: bool) -> Item:
        """Give item ``i`` a fresh valid quote (a new price when ``reprice``); return it."""
        items, step = self.items, self.step
        if type(items) is tuple:
            items = self.items = list(items)
        (
            item_id, kind, city, area, cabin, old_price, old_quote, status, wanted,
            old_expires, intro, _, _, status_at, wanted_at, revised,
        ) = items[i]  # fmt: skip
        price = old_price
        if reprice:  # prices drift by up to 15% either way: rng.below(7), inlined
            rng = self.rng
            rng.x = x = (rng.x * 0x5DEECE66D + 11) & _M48
            price += max(1, price // 20) * (bisect_right(_BELOW[7], x) - 3)
            if price < 10:
                price = 10
            if price != old_price and "price" not in revised:
                revised = revised | _PRICE
        if old_quote != "valid" and "quote" not in revised:
            revised = revised | _QUOTE
        expires = step + self.params.quote_ttl
        items[i] = item = _tuple_new(Item, (
            item_id, kind, city, area, cabin, price, "valid", status, wanted, expires, intro,
            step, step, status_at, wanted_at, revised,
        ))  # fmt: skip
        if expires != old_expires:
            self.lapse_at(expires, item_id, i)
        return item

    def wish(self, i: int, wanted: str) -> None:
        """Set the traveller's wish on item ``i``; count the chances it opens."""
        old = self.items[i]
        revised = old.revised
        if wanted != old.wanted and "wanted" not in revised:
            revised = revised | _WANTED
        self.put_wish(i, old, wanted, revised)
        self.wishes_changed(opened=int(wanted == "yes" or old.status == "booked"))

    def restate_wish(self, i: int) -> None:
        """The traveller restated the wish on item ``i``: a new anchor, no change."""
        old = self.items[i]
        self.put_wish(i, old, old.wanted, old.revised)

    def put_wish(self, i: int, old: Item, wanted: str, revised: frozenset[str]) -> None:
        """Store item ``i`` (``old`` now) with ``wanted``, anchored now, and ``revised``."""
        items = self.items
        if type(items) is tuple:
            items = self.items = list(items)
        items[i] = _tuple_new(Item, (*old[:8], wanted, *old[9:14], self.step, revised))

    def lapse_at(self, expires: int, item_id: str, i: int) -> None:
        """Schedule item ``i``'s quote to lapse at step ``expires``.

        Entries are not removed before they are due: one whose item's ``expires`` has
        changed since is stale, and ``_lapse`` drops it (cheaper than finding it now).
        """
        schedule = self.schedule
        if type(schedule) is tuple:
            schedule = self.schedule = list(schedule)
        insort(schedule, (expires, item_id, i))

    def add(self, item: Item) -> None:
        """Put a new offer on file: last in ``items``, and in the indexes and commands.

        The indexes and commands are shared by the episode's states: replaced, never
        mutated.
        """
        items = self.items
        if type(items) is tuple:
            items = self.items = list(items)
        i = len(items)
        items.append(item)
        k = bisect_left(self.by_id, item.id, key=lambda j: items[j].id)
        self.by_id = (*self.by_id[:k], i, *self.by_id[k:])
        words = _words(item.id)
        commands, admissible = dict(self.commands), list(self.admissible)
        for verb, handler in _ITEM_VERBS.items():
            action = f"{verb} {words}"
            commands[action] = handler, i
            insort(admissible, action)
        self.commands, self.admissible = commands, tuple(admissible)
        car, hotels, flights = self.by_city[item.city]
        if item.type == HOTEL:
            hotels = tuple(sorted((*hotels, i), key=lambda j: items[j].id))
        elif item.type == FLIGHT:
            flights = tuple(sorted((*flights, i), key=lambda j: items[j].id))
        else:
            car = i
        self.by_city = {**self.by_city, item.city: (car, hotels, flights)}
        if item.expires >= 0:
            self.lapse_at(item.expires, item.id, i)

    # -- the trip --

    def set_trip(self, trip: Trip) -> None:
        old, changed = self.trip, []
        if trip.budget != old.budget:
            changed.append("budget")
        if old.cabin and trip.cabin != old.cabin:
            changed.append("class")
        if trip.assumed != old.assumed:
            changed.append("assumed_class")
        if changed and not trip.revised.issuperset(changed):
            trip = _trip_with(trip, revised=trip.revised.union(changed))
        self.trip = trip

    def wishes_changed(self, opened: int) -> None:
        # A new version of the wishes: a confirmation can earn +1 again.
        self.max_score += opened + 1
        self.confirmed = False

    def freeze(self, probes: bool, prior: Any = None) -> BookingState:
        """Return the new state; ``probes``: whether probes may be due at it.

        ``prior``: what the step changed from, ``(items, trip)``; the draft's state's by
        default (``((), None)`` at reset: everything is new).
        """
        prior = prior or self.prior
        # Positional, in field order: the state is built every step.
        return _tuple_new(BookingState, (
            self.params, self.seed, self.step, self.trip, tuple(self.items), self.by_id,
            self.commands, self.by_city, tuple(self.schedule), self.confirmed,
            "\n".join(self.lines), tuple(self.named), self.reward, self.score + self.reward,
            self.max_score, self.admissible, self.rng.x if probes else -1, prior,
            self.middle or prior,
        ))  # fmt: skip


_PRICE, _QUOTE, _STATUS, _WANTED = (frozenset([r]) for r in ("price", "quote", "status", "wanted"))
_TRIP_FIELDS = {name: k for k, name in enumerate(Trip._fields)}


def _trip_with(trip: Trip, **changes: Any) -> Trip:
    """``trip._replace(**changes)`` at half the cost: trips change on the step path."""
    values = list(trip)
    for name, value in changes.items():
        values[_TRIP_FIELDS[name]] = value
    return _tuple_new(Trip, values)


def _list(d: _Draft, item: Item, new: bool = False) -> None:
    """State every fact of a newly listed item."""
    price = str(item.price)
    if item.type == HOTEL:
        d.say("new_hotel" if new else "hotel_listed", item.id, item.city, item.area, price)
    elif item.type == FLIGHT:
        d.say("flight_listed", item.id, item.city, item.cabin, price)
    else:
        d.say("car_listed", item.id, item.city, price)


_Command = tuple[Callable[[Any, Any], None], Any]
"""A parsed command: its handler and the handler's argument (a city, a topic, an index)."""


def _parse(commands: dict[str, _Command], action: Any) -> _Command | str:
    """Parse a command whatever its case and spacing, or return the rejection kind."""
    if not isinstance(action, str):
        return "not_understood"
    words = action.lower().split()
    command = commands.get(" ".join(words))
    if command is not None:
        return command
    n = len(words)
    if n == 3 and words[0] in _ITEM_VERBS:
        return "unknown_item" if words[1] in TYPE_NAMES else "not_understood"
    if n == 2 and words[0] in ("ask", "search") and words[1] not in ("budget", "class"):
        return "unknown_city"
    return "not_understood"


def _catalog(trip: Trip, items: list[Item]) -> tuple[tuple[int, ...], dict, dict, tuple]:
    """Return ``(by_id, commands, by_city, admissible)`` of a trip's first offers."""
    by_id = tuple(sorted(range(len(items)), key=lambda j: items[j].id))
    commands: dict[str, _Command] = {
        "wait": (_wait, None), "confirm": (_confirm, None), "ask budget": (_answer, "budget"),
        "ask class": (_answer, "class"),
    }  # fmt: skip
    by_city: dict[str, tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
    for city in trip.cities:
        commands["ask " + city], commands["search " + city] = (_answer, city), (_search, city)
        mine = [j for j in by_id if items[j].city == city]
        car = next(j for j in mine if items[j].type == CAR)
        hotels = tuple(j for j in mine if items[j].type == HOTEL)
        by_city[city] = car, hotels, tuple(j for j in mine if items[j].type == FLIGHT)
    for i, item in enumerate(items):
        words = _words(item.id)
        for verb, handler in _ITEM_VERBS.items():
            commands[f"{verb} {words}"] = handler, i
    return by_id, commands, by_city, tuple(sorted(commands))


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
        lines = max(6 + p.load * 10, p.load * per_city + 8)
        if not p.expiry_notice:  # a validity line after every quote line
            lines *= 2
        lines += p.distractors
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
            params=params, seed=seed, step=0, trip=trip, items=none, by_id=none, commands={},
            by_city={}, schedule=none, confirmed=False, text="", mentioned=none, reward=0,
            score=0, max_score=0, admissible=none, probe_rng=-1, prior=((), None),
            middle=((), None),
        )  # fmt: skip
        d = _Draft(blank, 0)
        d.say("intro")
        d.say("trip", trip.id, cities[0], str(trip.nights[0]))
        for city, nights in zip(cities[1:], trip.nights[1:], strict=True):
            d.say("leg", city, str(nights))
        d.say("budget_first", trip.id, str(trip.budget))
        d.say("assume", trip.id, trip.assumed)
        used_flights: set[str] = set()
        hotels = list(_sample(r, HOTELS, len(HOTELS)))
        cars = _sample(r, CARS, len(cities))
        items: list[Item] = []
        for city, car in zip(cities, cars, strict=True):
            for area in _sample(r, AREAS, 2):
                items.append(_new_hotel(r, hotels.pop(), city, area, 0, -1))
                _list(d, items[-1])
            for cabin in CLASSES:
                code = _flight_code(r, used_flights)
                price = (150 + 10 * r.below(26)) * (1, 2, 4)[CLASSES.index(cabin)]
                items.append(_item("flight:" + code, FLIGHT, city, "", cabin, price, "", 0, -1))
                _list(d, items[-1])
            price = 30 + 5 * r.below(13)
            items.append(_item("car:" + car, CAR, city, "", "", price, "no", 0, -1))
            _list(d, items[-1])
        # Quotes given at reset lapse at staggered steps.
        ttl = params.quote_ttl
        d.items = [item._replace(expires=ttl // 2 + r.below(ttl)) for item in items]
        d.by_id, d.commands, d.by_city, d.admissible = _catalog(trip, d.items)
        d.schedule = sorted((item.expires, item.id, i) for i, item in enumerate(d.items))
        if not params.expiry_notice:
            for item in d.items:
                d.say_valid(item)
        d.max_score = len(cities) + 1  # every city's flight, and a confirmation
        d.chatter()
        return d.freeze(False, ((), None))

    def transition(
        self, state: BookingState, action: str, rng: Any = None, params: Any = None
    ) -> BookingState:
        """Apply the agent's command, then the world's events at the next step.

        A rejected command spends the move with a reply and leaves the world as it was:
        no events, no probes.
        """
        try:  # the usual command is an admissible one, verbatim: one lookup
            command = state.commands.get(action)
        except TypeError:  # unhashable: not a command
            command = None
        d = _Draft(state, 1)
        if command is None:  # another case or spacing, or a rejection
            command = _parse(d.commands, action)
            if type(command) is str:
                d.say(command)
                return d.freeze(False)
        handler, arg = command
        handler(d, arg)
        # The command is done; what follows are the world's events.
        items = d.items
        if type(items) is list:  # the events copy it again if they change an item
            items = d.items = tuple(items)
        d.middle = (items, d.trip)
        _events(d)
        d.chatter()
        # The probes draw last from the step's generator: ``probes`` draws them from the
        # state it was left in, and only when asked (ground truth on).
        return d.freeze(True)

    def truth(self, state: BookingState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        truth = _truth(state.items, state.by_id, state.prior[0])
        # Ids sort as car:* < flight:* < hotel:* < trip:*.
        facts = [*truth.flat, *_view(state.trip).facts]
        return truth_info(
            state=facts,
            action=state.action_delta,
            event=state.event_delta,
            probes=_probes(state),
            state_hash=_state_hash(state, truth.digest),
            mentioned=state.mentioned,
        )

    def probes(self, state: BookingState) -> list[Probe]:
        """Return the probes due at ``state``."""
        return list(_probes(state))

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
    item_id: str, kind: int, city: str, area: str, cabin: str, price: int, wanted: str,
    step: int, expires: int,
) -> Item:  # fmt: skip
    return Item(
        id=item_id, type=kind, city=city, area=area, cabin=cabin, price=price, quote="valid",
        status="offered", wanted=wanted, expires=expires, intro=step, price_at=step,
        quote_at=step, status_at=step, wanted_at=step,
    )  # fmt: skip


def _new_hotel(rng: StepRng, name: str, city: str, area: str, step: int, expires: int) -> Item:
    price = 60 + 10 * rng.below(20)
    return _item("hotel:" + name, HOTEL, city, area, "", price, "no", step, expires)


# Commands: every parsed command is accepted (see ``_parse``).


def _wait(d: _Draft, _: None) -> None:
    d.say("waited")


def _confirm(d: _Draft, _: None) -> None:
    trip = d.trip
    if _itinerary_ok(trip, d.items):
        d.say("confirmed", trip.id)
        d.reward += 0 if d.confirmed else 1
        d.confirmed = True
    else:
        d.say("not_as_wished", trip.id)
        d.reward -= 1


def _search(d: _Draft, city: str) -> None:
    d.say("searched", city)
    car, hotels, flights = d.by_city[city]
    items = d.items  # each item is read before its own quote changes it
    for i in (car, *flights, *hotels):  # the city's items in id order: car < flight < hotel
        if items[i].status != "booked":
            item = d.quote(i, reprice=True)
            d.say_quote("quoted", item)
            d.say_valid(item)


# The item commands run at almost every step: each unpacks the item once (a NamedTuple's
# attributes are slow to get one by one).


def _cancel(d: _Draft, i: int) -> None:
    item = d.items[i]
    item_id, kind, _, _, _, _, _, status, _, _, _, _, _, _, _, _ = item
    if status == "offered":
        d.say("nothing_held")
        return
    if status == "booked":
        d.reward += -1 if _is_wanted(d.trip, item) else 1
    d.say(_CANCELLED[kind], item_id)
    d.set_status(i, item, "expired", "offered", -1, d.step, d.step)


def _hold(d: _Draft, i: int) -> None:
    item = d.items[i]
    item_id, kind, _, _, _, _, quote, status, _, _, _, _, _, _, _, _ = item
    if status == "booked":
        d.say("already_booked")
    elif quote != "valid":
        d.say("need_quote")
    else:
        d.say(_HELD[kind], item_id)
        step = d.step
        d.set_status(i, item, quote, "held", step + d.params.quote_ttl, step, step)
        d.say_valid(d.items[i])


def _book(d: _Draft, i: int) -> None:
    item = d.items[i]
    item_id, kind, city, _, _, _, quote, status, _, _, _, _, quote_at, _, _, _ = item
    if status == "booked":
        d.say("already_booked")
        return
    if quote != "valid":
        d.reward -= 1  # booking on an expired price: the desk re-quotes instead
        item = d.quote(i, reprice=True)
        d.say_quote("requoted", item)
        d.say_valid(item)
        return
    if _is_wanted(d.trip, item):
        # A double booking: another item of its kind in its city is booked already.
        car, hotels, flights = d.by_city[city]
        items = d.items
        for j in (hotels, flights, (car,))[kind]:
            if items[j].status == "booked":
                d.reward -= 1
                break
        else:
            d.reward += 1
    else:
        d.reward -= 1  # not wanted
    d.say(_BOOKED[kind], item_id)
    if not d.params.expiry_notice:  # the stated validity no longer holds: say so
        d.say(_FIXED[kind], item_id)
        quote_at = d.step
    d.set_status(i, item, quote, "booked", -1, quote_at, d.step)


_ITEM_VERBS = {"hold": _hold, "book": _book, "cancel": _cancel}


def _answer(d: _Draft, topic: str) -> None:
    """The traveller restates the current wish on ``topic``."""
    trip = d.trip
    if topic == "budget":
        d.say("say_budget", trip.id, str(trip.budget))
        d.set_trip(_trip_with(trip, budget_at=d.step))
    elif topic == "class":
        if trip.cabin:
            d.say("say_class", trip.id, trip.cabin)
            d.set_trip(_trip_with(trip, cabin_at=d.step))
        else:
            d.say("say_undecided", trip.id, trip.assumed)
            d.set_trip(_trip_with(trip, assumed_at=d.step))
    else:
        car, hotels, _ = d.by_city[topic]
        items = d.items
        wanted = [i for i in hotels if items[i].wanted == "yes"]
        if wanted:
            hotel = min(wanted)
            d.say("say_hotel", trip.id, topic, items[hotel].id)
            d.restate_wish(hotel)
        else:
            d.say("say_no_hotel", trip.id, topic)
        d.say("say_car" if items[car].wanted == "yes" else "say_no_car", trip.id,
              items[car].id)  # fmt: skip
        d.restate_wish(car)


# The world's events. Most steps have none, only their draws: that quiet path stays in
# ``_events``, each event has its own function.


def _events(d: _Draft) -> None:
    """Quotes lapse; a new hotel offer may come in; the traveller may state a wish."""
    schedule = d.schedule
    if schedule and schedule[0][0] <= d.step:
        _lapse(d)
    # One draw for the step's two independent rolls (12 bits each): the low 24 bits of
    # rng.bits(), inlined (the low 24 bits of ``x * 0x9E3779B1`` only need those of x).
    rng = d.rng
    rng.x = x = (rng.x * 0x5DEECE66D + 11) & _M48
    bits = (x ^ (x >> 24) ^ (x & 0xFFFFFF) * 0x9E3779B1) & 0xFFFFFF
    if bits & 4095 < _OFFER_BELOW:
        _offer(d)
    if bits >> 12 < _USER_BELOW:
        _wish(d)


def _lapse(d: _Draft) -> None:
    """Quotes due at or before this step lapse, oldest first, then in id order.

    A rejected command runs no events, so a quote due at such a step lapses here, at the
    next step whose events run. Without notices the lapse is unsaid: the quote's anchor
    stays at its validity.
    """
    step, schedule = d.step, d.schedule
    k = bisect_left(schedule, (step + 1,))
    d.schedule = schedule[k:]
    notice = d.params.expiry_notice
    for expires, _, i in schedule[:k]:
        item = d.items[i]
        item_id, kind, _, _, _, _, _, status, _, live, _, _, quote_at, status_at, _, _ = item
        if live != expires:
            continue  # stale: renewed, held, booked or cancelled since it was scheduled
        if notice:
            quote_at = step
        if status == "held":
            d.say((_HOLD_LAPSED if notice else _HOLD_ENDED)[kind], item_id)
            status, status_at = "offered", step
        elif notice:
            d.say(_EXPIRED[kind], item_id)
        d.set_status(i, item, "expired", status, -1, quote_at, status_at)


def _offer(d: _Draft) -> None:
    """A new hotel offer comes in, in a trip city, under a free name in a free area."""
    rng, step = d.rng, d.step
    city = rng.choice(d.trip.cities)
    items = d.items
    taken = {items[i].area for i in d.by_city[city][1]}
    areas = [a for a in AREAS if a not in taken]
    free = [*filterfalse(d.commands.__contains__, _HOTEL_HOLDS)]  # names not on file
    if areas and free:
        name = rng.choice(free)[len("hold hotel ") :]
        item = _new_hotel(rng, name, city, rng.choice(areas), step, step + d.params.quote_ttl)
        _list(d, item, new=True)
        d.add(item)
        d.say_valid(item)


_HOTEL_HOLDS = tuple("hold hotel " + name for name in HOTELS)


def _wish(d: _Draft) -> None:
    """The traveller states or revises one wish, picked by ``USER_WEIGHTS``."""
    rng, trip = d.rng, d.trip
    rng.x = x = (rng.x * 0x5DEECE66D + 11) & _M48  # rng.below(100), inlined (see _BELOW)
    kind = _WISH_KINDS[bisect_right(_WISH_BOUNDS, x)]
    if kind == "budget":
        _revise_budget(d)
        return
    if kind == "class":
        _revise_class(d)
        return
    # A hotel or the car in a city; rng.choice(cities) and rng.random(), inlined.
    cities = trip.cities
    rng.x = x = (x * 0x5DEECE66D + 11) & _M48
    city = cities[bisect_right(_BELOW[len(cities)], x)]
    items = d.items
    car, hotels, _ = d.by_city[city]
    chosen = None
    for i in hotels:
        if items[i].wanted == "yes":
            chosen = i
            break
    rng.x = x = (x * 0x5DEECE66D + 11) & _M48
    by_desc = x < d.params.indirection_below
    if kind == "drop" and chosen is not None:
        old = items[chosen]
        if by_desc:
            d.say("drop_hotel_desc", trip.id, city, old.area)
        else:
            d.say("drop_hotel", trip.id, old.id)
        d.wish(chosen, "no")
    elif kind in ("hotel", "drop"):
        new_i = rng.choice([i for i in hotels if i != chosen])
        new = items[new_i]
        if chosen is None:
            if by_desc:
                d.say("want_hotel_desc", trip.id, city, new.area)
            else:
                d.say("want_hotel", trip.id, city, new.id)
        else:
            old = items[chosen]
            if by_desc:
                d.say("swap_hotel_desc", trip.id, city, old.area, new.area)
            else:
                d.say("swap_hotel", trip.id, city, new.id, old.id)
            d.wish(chosen, "no")
        d.wish(new_i, "yes")
    else:
        wanted = "no" if items[car].wanted == "yes" else "yes"
        d.say("want_car" if wanted == "yes" else "drop_car", trip.id, items[car].id)
        d.wish(car, wanted)


def _revise_budget(d: _Draft) -> None:
    # A revision up or down by 500 to 3,000, kept within 4,000..20,000.
    rng, trip = d.rng, d.trip
    change = 500 * (1 + rng.below(6)) * (1 if rng.below(2) else -1)
    if not 4000 <= trip.budget + change <= 20000:
        change = -change
    budget = trip.budget + change
    d.say("revise_budget", trip.id, str(budget), str(trip.budget))
    d.set_trip(_trip_with(trip, budget=budget, budget_at=d.step))
    d.wishes_changed(opened=0)


def _revise_class(d: _Draft) -> None:
    trip = d.trip
    current = trip.cabin or trip.assumed
    cabin = d.rng.choice([c for c in CLASSES if c != trip.cabin])
    if trip.cabin:
        d.say("revise_class", trip.id, cabin, trip.cabin)
        new = _trip_with(trip, cabin=cabin, cabin_at=d.step)
    else:
        d.say("state_class", trip.id, cabin)
        new = _trip_with(trip, cabin=cabin, cabin_at=d.step, assumed="released", assumed_at=d.step)
    d.set_trip(new)
    # Flights of the old class that are booked must go; the new class's be booked.
    opened = 0
    if cabin != current:
        items = d.items
        for _, _, flights in d.by_city.values():
            for i in flights:
                item = items[i]
                if item.cabin == cabin or item.status == "booked":
                    opened += item.cabin == cabin or item.cabin == current
    d.wishes_changed(opened=opened)


def _probes(state: BookingState) -> tuple[Probe, ...]:
    """Questions due at ``state`` about mentioned entities: stale, breakage and drift.

    Drawn from the step's generator where the transition left it, so a state's probes
    are the same whenever they are asked for.
    """
    if state.probe_rng < 0:
        return ()
    rng = _rng_at(state.probe_rng)
    if rng.random() >= state.params.probe_rate:
        return ()
    trip, items = state.trip, state.items
    probes: dict[tuple[str, str], Probe] = {}
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        roll = rng.below(3)
        item = items[rng.below(len(items))]
        if roll == 0:
            # Stale: a fact that was superseded or released at least once.
            probe = _stale_probe(state, rng)
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


def _rng_at(x: int) -> StepRng:
    rng = StepRng.__new__(StepRng)  # skips the seeding: the state is given
    rng.x = x
    return rng


def _stale_probe(state: BookingState, rng: StepRng) -> Probe | None:
    trip = state.trip
    if trip.revised and rng.random() < 0.4:
        relation = rng.choice(sorted(trip.revised))
        answer, anchor = {
            "budget": (str(trip.budget), trip.budget_at),
            "class": (trip.cabin, trip.cabin_at),
            "assumed_class": (trip.assumed, trip.assumed_at),
        }[relation]
        return Probe(trip.id, relation, answer, anchor, "stale")
    revised = [it for it in state.items if it.revised]
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
        expiry_notice: announce a quote's lapse (default True); when False, quotes
            state their validity period in steps and lapse silently.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = BookingFuncEnv
    params_class = BookingParams
    reader = staticmethod(read)
