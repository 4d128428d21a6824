"""The world's events in a Booking step (lapses, offers, wishes), and the probes.

Most steps have no event, only their draws: that quiet path stays in :func:`run`, and
each event has its own function.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from itertools import filterfalse

from wmkit.envs.booking.commands import ITEM_VERBS, words
from wmkit.envs.booking.rules import Draft, list_item, trip_with
from wmkit.envs.booking.state import CAR, FLIGHT, HOTEL, BookingState, Item, service_steps
from wmkit.envs.booking.text import AREAS, CLASSES, HOTELS, TYPED
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.world.types import Probe

__all__ = ["P_OFFER", "P_USER", "USER_WEIGHTS", "new_hotel", "new_item", "probes", "run"]

P_USER = 0.2  # per step, once the desk has had time to serve the last wish: a new one
P_OFFER = 0.04  # per step: a new hotel offer comes in
USER_WEIGHTS = (("hotel", 35), ("drop", 10), ("car", 15), ("budget", 20), ("class", 20))
# One ``bits()`` draw makes the step's two rolls, 12 bits each: thresholds out of 4096.
_OFFER_BELOW, _USER_BELOW = math.ceil(P_OFFER * 4096), math.ceil(P_USER * 4096)
_WISH_KINDS = tuple(kind for kind, _ in USER_WEIGHTS)
_WISH_BOUNDS = tuple(sum(w for _, w in USER_WEIGHTS[: k + 1]) for k in range(len(USER_WEIGHTS)))
_EXPIRED, _HOLD_LAPSED, _HOLD_ENDED = TYPED["expired"], TYPED["hold_lapsed"], TYPED["hold_ended"]
_HOTEL_HOLDS = tuple("hold hotel " + name for name in HOTELS)


def run(d: Draft) -> None:
    """Quotes lapse; a new hotel offer may come in; the traveller may state a wish.

    The traveller speaks only once the desk has had the steps it needs to serve the
    wishes before (``BookingState.quiet``).
    """
    schedule = d.schedule
    if schedule and schedule[0][0] <= d.step:
        _lapse(d)
    bits = d.rng.bits()
    if bits & 4095 < _OFFER_BELOW:
        _offer(d)
    if (bits >> 12) & 4095 < _USER_BELOW and d.step >= d.quiet:
        _wish(d)


def _lapse(d: Draft) -> None:
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


def _offer(d: Draft) -> None:
    """A new hotel offer comes in, in a trip city, under a free name in a free area."""
    rng, step = d.rng, d.step
    city = rng.choice(d.trip.cities)
    items = d.items
    taken = {items[i].area for i in d.by_city[city][1]}
    areas = [a for a in AREAS if a not in taken]
    free = [*filterfalse(d.commands.__contains__, _HOTEL_HOLDS)]  # names not on file
    if areas and free:
        name = rng.choice(free)[len("hold hotel ") :]
        item = new_hotel(rng, name, city, rng.choice(areas), step, step + d.params.quote_ttl)
        list_item(d, item, new=True)
        _add(d, item)
        d.say_valid(item)


def _add(d: Draft, item: Item) -> None:
    """Put a new offer on file: last in ``items``, and in the indexes and commands.

    The indexes and commands are shared by the episode's states: replaced, never mutated.
    """
    items = d.items
    if type(items) is tuple:
        items = d.items = list(items)
    i = len(items)
    items.append(item)
    k = bisect_left(d.by_id, item.id, key=lambda j: items[j].id)
    d.by_id = (*d.by_id[:k], i, *d.by_id[k:])
    name = words(item.id)
    commands, admissible = dict(d.commands), list(d.admissible)
    for verb, handler in ITEM_VERBS.items():
        action = f"{verb} {name}"
        commands[action] = handler, i
        insort(admissible, action)
    d.commands, d.admissible = commands, tuple(admissible)
    car, hotels, flights = d.by_city[item.city]
    if item.type == HOTEL:
        hotels = tuple(sorted((*hotels, i), key=lambda j: items[j].id))
    elif item.type == FLIGHT:
        flights = tuple(sorted((*flights, i), key=lambda j: items[j].id))
    else:
        car = i
    d.by_city = {**d.by_city, item.city: (car, hotels, flights)}
    if item.expires >= 0:
        d.lapse_at(item.expires, item.id, i)


def new_item(
    item_id: str, kind: int, city: str, area: str, cabin: str, price: int, wanted: str,
    step: int, expires: int,
) -> Item:  # fmt: skip
    """Return a new offer, quoted and offered, every fact stated at ``step``."""
    return Item(
        id=item_id, type=kind, city=city, area=area, cabin=cabin, price=price, quote="valid",
        status="offered", wanted=wanted, expires=expires, intro=step, price_at=step,
        quote_at=step, status_at=step, wanted_at=step,
    )  # fmt: skip


def new_hotel(rng: StepRng, name: str, city: str, area: str, step: int, expires: int) -> Item:
    """Return a new hotel offer at a drawn price."""
    price = 60 + 10 * rng.below(20)
    return new_item("hotel:" + name, HOTEL, city, area, "", price, "no", step, expires)


def _too_late(d: Draft, service: int) -> bool:
    """Whether a change needing ``service`` steps could not be served by the horizon."""
    return d.step + service > d.params.horizon


def _wish(d: Draft) -> None:
    """The traveller states or revises one wish, picked by ``USER_WEIGHTS``.

    A wish that no desk could serve before the horizon is left unsaid.
    """
    rng, trip = d.rng, d.trip
    kind = _WISH_KINDS[bisect_right(_WISH_BOUNDS, rng.below(100))]
    if kind == "budget":
        _revise_budget(d)
        return
    if kind == "class":
        _revise_class(d)
        return
    city = rng.choice(trip.cities)  # a hotel or the car in a city
    items = d.items
    car, hotels, _ = d.by_city[city]
    chosen = next((i for i in hotels if items[i].wanted == "yes"), None)
    by_desc = rng.random() < d.params.indirection
    if kind == "drop" and chosen is not None:
        service = service_steps(1, 0)
        if _too_late(d, service):
            return
        old = items[chosen]
        if by_desc:
            d.say("drop_hotel_desc", trip.id, city, old.area)
        else:
            d.say("drop_hotel", trip.id, old.id)
        d.wishes_changed(d.wish(chosen, "no"), service)
    elif kind in ("hotel", "drop"):
        new_i = rng.choice([i for i in hotels if i != chosen])
        new = items[new_i]
        service = service_steps(int(chosen is not None), 1)
        if _too_late(d, service):
            return
        opened = 0
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
            opened = d.wish(chosen, "no")
        d.wishes_changed(opened + d.wish(new_i, "yes"), service)
    else:
        wanted = "no" if items[car].wanted == "yes" else "yes"
        service = service_steps(int(wanted == "no"), int(wanted == "yes"))
        if _too_late(d, service):
            return
        d.say("want_car" if wanted == "yes" else "drop_car", trip.id, items[car].id)
        d.wishes_changed(d.wish(car, wanted), service)


def _revise_budget(d: Draft) -> None:
    # A revision up or down by 500 to 3,000, kept within 4,000..20,000.
    rng, trip = d.rng, d.trip
    change = 500 * (1 + rng.below(6)) * (1 if rng.below(2) else -1)
    if not 4000 <= trip.budget + change <= 20000:
        change = -change
    service = service_steps(0, 0)  # nothing to book or cancel: the confirmation
    if _too_late(d, service):
        return
    budget = trip.budget + change
    d.say("revise_budget", trip.id, str(budget), str(trip.budget))
    d.set_trip(trip_with(trip, budget=budget, budget_at=d.step))
    d.wishes_changed(0, service)


def _revise_class(d: Draft) -> None:
    trip = d.trip
    current = trip.cabin or trip.assumed
    cabin = d.rng.choice([c for c in CLASSES if c != trip.cabin])
    # Every city's flight changes: a cancellation and a booking each.
    legs = len(trip.cities) if cabin != current else 0
    service = service_steps(legs, legs)
    if _too_late(d, service):
        return
    if trip.cabin:
        d.say("revise_class", trip.id, cabin, trip.cabin)
        new = trip_with(trip, cabin=cabin, cabin_at=d.step)
    else:
        d.say("state_class", trip.id, cabin)
        new = trip_with(trip, cabin=cabin, cabin_at=d.step, assumed="released", assumed_at=d.step)
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
    d.wishes_changed(opened, service)


def probes(state: BookingState) -> tuple[Probe, ...]:
    """Questions due at ``state`` about mentioned entities: stale, breakage and drift.

    Drawn from the step's generator where the transition left it, so a state's probes
    are the same whenever they are asked for.
    """
    if state.probe_rng < 0:
        return ()
    rng = StepRng.at(state.probe_rng)
    if rng.random() >= state.params.probe_rate:
        return ()
    trip, items = state.trip, state.items
    due: dict[tuple[str, str], Probe] = {}
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
        due.setdefault((probe.subject, probe.relation), probe)
    return tuple(due.values())


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
