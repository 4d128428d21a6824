"""The scratch state of one Booking transition: its lines, and every write of the world.

:class:`Draft` is a mutable copy of a :class:`~wmkit.envs.booking.state.BookingState`
for one step. Every draw comes from the step's ``StepRng``; every line from
``VOICE.forms``. The commands (:mod:`~wmkit.envs.booking.commands`) and the world's
events (:mod:`~wmkit.envs.booking.events`) change the world only through it.
"""

from __future__ import annotations

from bisect import insort
from typing import Any

from wmkit.envs.booking.state import FLIGHT, HOTEL, BookingState, Item, Trip
from wmkit.envs.booking.text import CHATTER, TYPED, VOICE
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.text import FrameMemo, LineMemo

__all__ = ["Draft", "list_item", "trip_with"]

_FORMS = VOICE.forms
_LINES = LineMemo(VOICE)  # caches of a pure function: shared by every episode
_FRAMES = FrameMemo(VOICE)
_VALID_FOR = TYPED["valid_for"]
_tuple_new = tuple.__new__  # builds a NamedTuple from a tuple without a Python call
_PRICE, _QUOTE, _STATUS, _WANTED = (frozenset([r]) for r in ("price", "quote", "status", "wanted"))
_TRIP_FIELDS = {name: k for k, name in enumerate(Trip._fields)}


class Draft:
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Items and the schedule are tuples until the first write, then lists; every write
    of an item is a new ``Item`` object, so unchanged items stay the same objects (the
    ground truth's diffs skip by identity). It is not a ``StepDraft``: the step's
    changes are not noted as they happen (``StepDraft.note``), ground truth diffs
    ``prior``, ``middle`` and the result when asked, so a step without ground truth never
    pays for them; and ``say`` takes values positionally, memoised (``LineMemo``).
    """

    __slots__ = (
        "admissible", "by_city", "by_id", "commands", "confirmed", "items", "lines",
        "max_score", "middle", "named", "params", "prior", "quiet", "rate", "reward",
        "rng", "schedule", "score", "seed", "step", "trip",
    )  # fmt: skip
    items: tuple[Item, ...] | list[Item]  # copied on first write
    schedule: tuple[tuple[int, str, int], ...] | list[tuple[int, str, int]]  # the same

    def __init__(self, state: BookingState, advance: int) -> None:
        """Start the step ``advance`` (1, or 0 at reset) steps after ``state``'s."""
        # One unpacking: a NamedTuple's attributes are slow to get one by one.
        (
            self.params, seed, step, trip, items, self.by_id, self.commands, self.by_city,
            self.schedule, self.confirmed, self.quiet, _, _, _, self.score, self.max_score,
            self.admissible, _, _, _,
        ) = state  # fmt: skip
        self.trip, self.items, self.prior = trip, items, (items, trip)
        self.seed, self.step = seed, step + advance
        self.rng = StepRng(seed, step + advance)
        self.rate = self.params.paraphrase_rate
        self.lines: list[str] = []
        self.named: list[str] = []  # entity ids named, with repeats
        self.reward = 0
        self.middle: tuple[tuple[Item, ...], Trip | None] | None = None  # see transition

    # -- text --

    def say(self, kind: str, *values: str) -> None:
        """Add a line of ``kind``; canonical ``values`` in its ``VOICE`` order.

        A paraphrase at ``paraphrase_rate`` (one draw, ``StepRng.variant``). Lines recur
        (an offer's, a city's): rendered once, then looked up (``LineMemo``).
        """
        form = _FORMS[kind]
        n = form.paraphrases
        variant = self.rng.variant(n, self.rate) if n else 0
        if not values:  # a line without slots is its format
            self.lines.append(form.formats[variant])
            return
        key = kind, variant, values
        self.lines.append(_LINES.get(key) or _LINES.render(key))
        for k in form.entities:
            self.named.append(values[k])

    def say_price(self, kind: str, item: Item) -> None:
        """Say ``item``'s fresh price in ``kind`` (its type's ``quoted`` or ``requoted``).

        ``say(kind, item.id, str(item.price))``, but prices drift: the line is kept
        around its price, per item (``FrameMemo``).
        """
        form = _FORMS[kind]
        key = kind, self.rng.variant(form.paraphrases, self.rate), (item.id,)
        head, tail = _FRAMES.get(key) or _FRAMES.render(key)
        self.lines.append(head + form.to_text[1](str(item.price)) + tail)
        self.named.append(item.id)

    def say_valid(self, item: Item) -> None:
        """Without expiry notices, say how many more steps ``item``'s quote is valid."""
        if not self.params.expiry_notice:
            self.say(_VALID_FOR[item.type], item.id, str(item.expires - self.step))

    def chatter(self) -> None:
        """Insert the distractor lines anywhere after the first line."""
        # One ``bits()`` draw a line, 16 bits each for the line, its city and its place:
        # this runs every step.
        rng, lines = self.rng, self.lines
        for _ in range(self.params.distractors):
            bits = rng.bits()
            line, slot = CHATTER[((bits & 0xFFFF) * len(CHATTER)) >> 16]
            if slot == "city":
                cities = self.trip.cities
                line = line[cities[(((bits >> 16) & 0xFFFF) * len(cities)) >> 16]]
            elif slot == "trip":
                self.named.append(self.trip.id)
                line = line[self.trip.id]
            lines.insert(1 + (((bits >> 32) * len(lines)) >> 16), line)

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
        if reprice:  # prices drift by up to 15% either way
            price = max(10, price + max(1, price // 20) * (self.rng.below(7) - 3))
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

    def wish(self, i: int, wanted: str) -> int:
        """Set the traveller's wish on item ``i``; return the chances it opens.

        One: booking an item now wanted, or cancelling a booking no longer wanted.
        """
        old = self.items[i]
        revised = old.revised
        if wanted != old.wanted and "wanted" not in revised:
            revised = revised | _WANTED
        self.put_wish(i, old, wanted, revised)
        return int(wanted == "yes" or old.status == "booked")

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
        changed since is stale, and the lapse drops it (cheaper than finding it now).
        """
        schedule = self.schedule
        if type(schedule) is tuple:
            schedule = self.schedule = list(schedule)
        insort(schedule, (expires, item_id, i))

    # -- the trip --

    def set_trip(self, trip: Trip) -> None:
        """Replace the trip, marking the wishes it revises."""
        old, changed = self.trip, []
        if trip.budget != old.budget:
            changed.append("budget")
        if old.cabin and trip.cabin != old.cabin:
            changed.append("class")
        if trip.assumed != old.assumed:
            changed.append("assumed_class")
        if changed and not trip.revised.issuperset(changed):
            trip = trip_with(trip, revised=trip.revised.union(changed))
        self.trip = trip

    def wishes_changed(self, opened: int, service: int) -> None:
        """A new version of the wishes: ``opened`` chances, and a confirmation's.

        The traveller then keeps quiet for the ``service`` steps an attentive desk
        needs to serve the version (``service_steps``).
        """
        self.max_score += opened + 1
        self.confirmed = False
        self.quiet = self.step + service

    def freeze(self, probes: bool, prior: Any = None) -> BookingState:
        """Return the new state; ``probes``: whether probes may be due at it.

        ``prior``: what the step changed from, ``(items, trip)``; the draft's state's by
        default (``((), None)`` at reset: everything is new).
        """
        prior = prior or self.prior
        # Positional, in field order: the state is built every step.
        return _tuple_new(BookingState, (
            self.params, self.seed, self.step, self.trip, tuple(self.items), self.by_id,
            self.commands, self.by_city, tuple(self.schedule), self.confirmed, self.quiet,
            "\n".join(self.lines), tuple(self.named), self.reward, self.score + self.reward,
            self.max_score, self.admissible, self.rng.x if probes else -1, prior,
            self.middle or prior,
        ))  # fmt: skip


def trip_with(trip: Trip, **changes: Any) -> Trip:
    """``trip._replace(**changes)`` at half the cost: trips change on the step path."""
    values = list(trip)
    for name, value in changes.items():
        values[_TRIP_FIELDS[name]] = value
    return _tuple_new(Trip, values)


def list_item(d: Draft, item: Item, new: bool = False) -> None:
    """State every fact of a newly listed item."""
    price = str(item.price)
    if item.type == HOTEL:
        d.say("new_hotel" if new else "hotel_listed", item.id, item.city, item.area, price)
    elif item.type == FLIGHT:
        d.say("flight_listed", item.id, item.city, item.cabin, price)
    else:
        d.say("car_listed", item.id, item.city, price)
