"""What the Booking family says, declared once: the renderer and the reader share it.

The name pools, the slot types, the message kinds (:data:`TEXT`), their compiled forms
for the step path (:data:`VOICE`) and the perfect reader (:func:`read`).
"""

from __future__ import annotations

from functools import lru_cache

from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.world.types import Claim

__all__ = [
    "AREAS",
    "CARS",
    "CHATTER",
    "CITIES",
    "CLASSES",
    "HOTELS",
    "LINE_MAX",
    "TEXT",
    "TRAVELLERS",
    "TYPED",
    "VOICE",
    "read",
]

# --- pools -----------------------------------------------------------------------------

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
LINE_MAX = 140  # longest rendered line (checked over every template in the tests)

# --- slot types ------------------------------------------------------------------------


def _money_text(canon: str) -> str:
    return f"{int(canon):,}"


def _slot(pattern: str, to_text, to_canon, entity: bool = False) -> SlotType:
    # The surface form is memoised: names and sums recur across lines, and converting
    # one (``12000`` -> ``12,000``) costs as much as filling the whole line.
    return SlotType(pattern, lru_cache(maxsize=4096)(to_text), to_canon, entity)


def _hotel_slot() -> SlotType:
    return _slot(
        r"Hotel [A-Z][a-z]+",
        lambda c: "Hotel " + c[6:].capitalize(),
        lambda t: "hotel:" + t[6:].lower(),
        True,
    )


def _plain(pattern: str) -> SlotType:
    return _slot(pattern, str, str)


_MONEY = r"\d{1,3}(?:,\d{3})*"
_CABIN = "economy|premium|business"
_AREA = r"[a-z]+(?: [a-z]+)?"
SLOT_TYPES = {
    "trip": _slot(
        r"[A-Z][a-z]+", lambda c: c[5:].capitalize(), lambda t: "trip:" + t.lower(), True
    ),
    "hotel": _hotel_slot(),
    "old": _hotel_slot(),
    "flight": _slot(
        r"flight [A-Z]{2}\d{3}",
        lambda c: "flight " + c[7:].upper(),
        lambda t: "flight:" + t[7:].lower(),
        True,
    ),
    "car": _slot(
        r"[A-Z][a-z]+ rental",
        lambda c: c[4:].capitalize() + " rental",
        lambda t: "car:" + t[:-7].lower(),
        True,
    ),
    "city": _slot(r"[A-Z][a-z]+", str.capitalize, str.lower),
    "area": _plain(_AREA),
    "from_area": _plain(_AREA),
    "cabin": _plain(_CABIN),
    "was": _plain(_CABIN),
    "price": _slot(_MONEY, _money_text, lambda t: t.replace(",", "")),
    "budget": _slot(_MONEY, _money_text, lambda t: t.replace(",", "")),
    "before": _slot(_MONEY, _money_text, lambda t: t.replace(",", "")),
    "nights": _plain(r"\d"),
    "steps": _plain(r"\d{1,3}"),
}

# --- message kinds ---------------------------------------------------------------------


def _kind(name: str, templates: str, *claims: ClaimSpec) -> MessageKind:
    return MessageKind(name, tuple(t.strip() for t in templates.strip().split("\n")), claims)


# How each item type is named in a typed kind: mid-sentence (``{it}``) and first (``{It}``).
_ITEM_NAMES = (("hotel", "{hotel}", "{hotel}"), ("flight", "{flight}", "{flight}"),
               ("car", "the {car}", "The {car}"))  # fmt: skip


def _typed(name: str, templates: str, *claims: ClaimSpec) -> tuple[MessageKind, ...]:
    """One kind per item type, hotel first (``name``, ``flight_name``, ``car_name``).

    ``{it}``/``{It}`` in ``templates`` name the item; claims about ``"item"`` are about it.
    """
    return tuple(
        _kind(
            name if slot == "hotel" else f"{slot}_{name}",
            templates.replace("{It}", first).replace("{it}", mid),
            *(c._replace(subject=slot) if c.subject == "item" else c for c in claims),
        )
        for slot, mid, first in _ITEM_NAMES
    )


def _item_claims(slot: str, *relations: tuple[str, str | None, str | None]) -> tuple:
    return tuple(ClaimSpec(slot, rel, s, v) for rel, s, v in relations)


def _item_is(relation: str, value: str) -> ClaimSpec:
    return ClaimSpec("item", relation, value=value)


_QUOTED = (("price", "price", None), ("quote", None, "valid"))
_UNCHOSEN = (("status", None, "offered"), ("wanted", None, "no"))
_HOTEL_DESC = (("city", "city"), ("area", "area"))  # "the Lisbon hotel in the old town"
_OLD_DESC = (("city", "city"), ("area", "from_area"))
_PLACE = (("city", "city", None), ("area", "area", None))

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
        *_item_claims("hotel", *_PLACE, *_QUOTED, *_UNCHOSEN),
    ),
    _kind(
        "new_hotel",
        """
        New offer just in: {hotel} in {city}, {area}, {price} a night, quote valid, not chosen.
        Fresh listing: {hotel} ({city}, {area}) at {price} per night, price valid, not picked yet.
        """,
        *_item_claims("hotel", *_PLACE, *_QUOTED, *_UNCHOSEN),
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
    # Search results: a fresh quote per offer (the units differ: written out per type).
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
    *_typed(
        "expired",
        """
        The quote for {it} has expired.
        {It}: the quoted price is no longer valid.
        """,
        _item_is("quote", "expired"),
    ),
    *_typed(
        "hold_lapsed",
        """
        The hold on {it} lapsed with its quote.
        {It} is no longer held: the quote expired.
        """,
        _item_is("quote", "expired"),
        _item_is("status", "offered"),
    ),
    # Without expiry notices (``expiry_notice=False``): a quote states how long it is
    # valid, and its lapse is silent; only a hold that ends with it is said.
    *_typed(
        "valid_for",
        """
        {It}: quote valid for {steps} steps.
        The price of {it} holds for {steps} steps.
        """,
        ClaimSpec("item", "valid_for", "steps"),
    ),
    *_typed(
        "fixed",
        """
        {It}: the booked price is fixed; the quote no longer lapses.
        The price of {it} is locked in by the booking.
        """,
        _item_is("quote", "valid"),
    ),
    *_typed(
        "hold_ended",
        """
        The hold on {it} has ended.
        {It} is no longer held.
        """,
        _item_is("status", "offered"),
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
    *_typed(
        "held",
        """
        {It} is on hold; its quote is valid again.
        Holding {it}; the price stays valid for now.
        """,
        _item_is("status", "held"),
        _item_is("quote", "valid"),
    ),
    *_typed(
        "booked",
        """
        Booked {it}.
        {It} is booked.
        """,
        _item_is("status", "booked"),
    ),
    *_typed(
        "requoted",
        """
        The quote for {it} had expired; the price is now {price}, quote valid. Not booked.
        Not booked: {it} needed a new quote, {price}, valid for now.
        """,
        ClaimSpec("item", "price", "price"),
        _item_is("quote", "valid"),
    ),
    *_typed(
        "cancelled",
        """
        Cancelled {it}; it is back on offer, and its quote has expired.
        {It} released: offered again, quote expired.
        """,
        _item_is("status", "offered"),
        _item_is("quote", "expired"),
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

# The order the step code passes each kind's values in (``say``); a rewording of a
# template, even one that reorders its slots, cannot misplace a value.
_ITEM_ORDERS = {
    f"{prefix}{base}": f"{slot} {rest}".strip()
    for base, rest in (("quoted", "price"), ("requoted", "price"), ("valid_for", "steps"))
    for prefix, slot in (("", "hotel"), ("flight_", "flight"), ("car_", "car"))
}
ORDERS = {
    "trip": "trip city nights", "leg": "city nights", "budget_first": "trip budget",
    "assume": "trip cabin", "hotel_listed": "hotel city area price",
    "new_hotel": "hotel city area price", "flight_listed": "flight city cabin price",
    "car_listed": "car city price", **_ITEM_ORDERS, "want_hotel": "trip city hotel",
    "want_hotel_desc": "trip city area", "swap_hotel": "trip city hotel old",
    "swap_hotel_desc": "trip city from_area area", "drop_hotel": "trip hotel",
    "drop_hotel_desc": "trip city area", "want_car": "trip car", "drop_car": "trip car",
    "revise_budget": "trip budget before", "state_class": "trip cabin",
    "revise_class": "trip cabin was", "say_budget": "trip budget", "say_class": "trip cabin",
    "say_undecided": "trip cabin", "say_hotel": "trip city hotel", "say_no_hotel": "trip city",
    "say_car": "trip car", "say_no_car": "trip car",
}  # fmt: skip
VOICE = Voice(TEXT, ORDERS)
"""The step path's renderer: ``VOICE.forms[kind]``, values in ``ORDERS``' order."""

# Message kinds per item type (hotel, flight, car): ``TYPED["held"][item.type]``.
TYPED = {
    base: (base, "flight_" + base, "car_" + base)
    for base in (
        "quoted", "expired", "hold_lapsed", "held", "booked", "requoted", "cancelled",
        "valid_for", "hold_ended", "fixed",
    )
}  # fmt: skip

# Chatter, rendered once (its templates name different slots, so it has no form): per
# template, its line or its lines per city or traveller, and which of the two it names
# ("" for neither).
CHATTER: tuple[tuple[object, str], ...] = tuple(
    ({c: t.format(city=c.capitalize()) for c in CITIES}, "city")
    if "{city}" in t
    else ({"trip:" + n: t.format(trip=n.capitalize()) for n in TRAVELLERS}, "trip")
    if "{trip}" in t
    else (t, "")
    for t in TEXT.kinds["chatter"].templates
)


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    Inverts every template and paraphrase of the family. A hotel named by its city and
    area comes out as a description subject, ``(("city", "lisbon"), ("area", "old
    town"))``, which the caller resolves against facts it read earlier: no two hotels in
    a city share an area. Chatter and replies without facts yield nothing.
    """
    return TEXT.read(observation)
