"""The agent's commands: parsing, the admissible catalogue, and one handler per verb.

Every admissible command, verbatim, maps to its handler and argument (a city, a topic,
an item index) in the state's ``commands``: the usual step parses with one lookup.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from wmkit.envs.booking.rules import Draft, trip_with
from wmkit.envs.booking.state import (
    CAR,
    FLIGHT,
    HOTEL,
    TYPE_NAMES,
    Item,
    Trip,
    is_wanted,
    itinerary_ok,
)
from wmkit.envs.booking.text import TYPED

__all__ = ["ITEM_VERBS", "Command", "catalog", "parse", "words"]

Command = tuple[Callable[[Any, Any], None], Any]
"""A parsed command: its handler and the handler's argument (a city, a topic, an index)."""

_QUOTED, _REQUOTED, _FIXED = TYPED["quoted"], TYPED["requoted"], TYPED["fixed"]
_HELD, _BOOKED, _CANCELLED = TYPED["held"], TYPED["booked"], TYPED["cancelled"]


def words(item_id: str) -> str:
    """The command name of an item: ``hotel:azure`` -> ``hotel azure``."""
    kind, _, name = item_id.partition(":")
    return f"{kind} {name}"


def parse(commands: dict[str, Command], action: Any) -> Command | str:
    """Parse a command whatever its case and spacing, or return the rejection kind."""
    if not isinstance(action, str):
        return "not_understood"
    said = action.lower().split()
    command = commands.get(" ".join(said))
    if command is not None:
        return command
    n = len(said)
    if n == 3 and said[0] in ITEM_VERBS:
        return "unknown_item" if said[1] in TYPE_NAMES else "not_understood"
    if n == 2 and said[0] in ("ask", "search") and said[1] not in ("budget", "class"):
        return "unknown_city"
    return "not_understood"


def catalog(trip: Trip, items: list[Item]) -> tuple[tuple[int, ...], dict, dict, tuple]:
    """Return ``(by_id, commands, by_city, admissible)`` of a trip's first offers."""
    by_id = tuple(sorted(range(len(items)), key=lambda j: items[j].id))
    commands: dict[str, Command] = {
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
        name = words(item.id)
        for verb, handler in ITEM_VERBS.items():
            commands[f"{verb} {name}"] = handler, i
    return by_id, commands, by_city, tuple(sorted(commands))


def _wait(d: Draft, _: None) -> None:
    d.say("waited")


def _confirm(d: Draft, _: None) -> None:
    trip = d.trip
    if itinerary_ok(trip, d.items):
        d.say("confirmed", trip.id)
        d.reward += 0 if d.confirmed else 1
        d.confirmed = True
    else:
        d.say("not_as_wished", trip.id)
        d.reward -= 1


def _search(d: Draft, city: str) -> None:
    d.say("searched", city)
    car, hotels, flights = d.by_city[city]
    items = d.items  # each item is read before its own quote changes it
    for i in (car, *flights, *hotels):  # the city's items in id order: car < flight < hotel
        if items[i].status != "booked":
            item = d.quote(i, reprice=True)
            d.say_price(_QUOTED[item.type], item)
            d.say_valid(item)


# The item commands run at almost every step: each unpacks the item once (a NamedTuple's
# attributes are slow to get one by one).


def _cancel(d: Draft, i: int) -> None:
    item = d.items[i]
    item_id, kind, _, _, _, _, _, status, _, _, _, _, _, _, _, _ = item
    if status == "offered":
        d.say("nothing_held")
        return
    if status == "booked":
        d.reward += -1 if is_wanted(d.trip, item) else 1
    d.say(_CANCELLED[kind], item_id)
    d.set_status(i, item, "expired", "offered", -1, d.step, d.step)


def _hold(d: Draft, i: int) -> None:
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


def _book(d: Draft, i: int) -> None:
    item = d.items[i]
    item_id, kind, city, _, _, _, quote, status, _, _, _, _, quote_at, _, _, _ = item
    if status == "booked":
        d.say("already_booked")
        return
    if quote != "valid":
        d.reward -= 1  # booking on an expired price: the desk re-quotes instead
        item = d.quote(i, reprice=True)
        d.say_price(_REQUOTED[kind], item)
        d.say_valid(item)
        return
    if is_wanted(d.trip, item):
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


ITEM_VERBS = {"hold": _hold, "book": _book, "cancel": _cancel}


def _answer(d: Draft, topic: str) -> None:
    """The traveller restates the current wish on ``topic``."""
    trip = d.trip
    if topic == "budget":
        d.say("say_budget", trip.id, str(trip.budget))
        d.set_trip(trip_with(trip, budget_at=d.step))
    elif topic == "class":
        if trip.cabin:
            d.say("say_class", trip.id, trip.cabin)
            d.set_trip(trip_with(trip, cabin_at=d.step))
        else:
            d.say("say_undecided", trip.id, trip.assumed)
            d.set_trip(trip_with(trip, assumed_at=d.step))
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
        kind = "say_car" if items[car].wanted == "yes" else "say_no_car"
        d.say(kind, trip.id, items[car].id)
        d.restate_wish(car)
