"""The Booking family's pure core: ``initial``, ``transition``, ``truth`` and ``probes``.

A transition is the agent's command (:mod:`~wmkit.envs.booking.commands`), then the
world's events (:mod:`~wmkit.envs.booking.events`), then the chatter, on a
:class:`~wmkit.envs.booking.rules.Draft` frozen into the next state.
"""

from __future__ import annotations

from typing import Any

from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.booking import events
from wmkit.envs.booking.commands import catalog, parse
from wmkit.envs.booking.rules import Draft, list_item
from wmkit.envs.booking.state import (
    CAR,
    FLIGHT,
    BookingParams,
    BookingState,
    Trip,
    _state_hash,
    _truth,
    _view,
    service_steps,
)
from wmkit.envs.booking.text import AREAS, CARS, CITIES, CLASSES, HOTELS, LINE_MAX, TRAVELLERS
from wmkit.envs.diagnostic.core import CoreDefaults, episode_seed, text_spaces
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import truth_info
from wmkit.world.types import Probe

__all__ = ["BookingFuncEnv"]


class BookingFuncEnv(CoreDefaults, FuncEnv[BookingState, str, str, int, bool, None, BookingParams]):
    """The Booking family's pure core (a :class:`~wmkit.envs.diagnostic.core.FamilyCore`).

    A step's draws come from a ``StepRng`` of (episode seed, step), both carried in the
    ``BookingState``: ``transition`` is a function of ``(state, action)``, the planner's
    simulator is this very code, and a state value is its own snapshot. Of the
    ``rng``/``params`` arguments of the ``FuncEnv`` methods only ``initial`` reads any.

    Args:
        params: the episode parameters; defaults to ``BookingParams()``.
    """

    def __init__(self, params: BookingParams | None = None) -> None:
        self._params = params or BookingParams()
        super().__init__()
        p = self._params
        # Lines per step: the intro lists every offer; a search lists a city's offers
        # (up to one hotel per area); expiries, a wish, an offer and the chatter.
        lines = max(6 + p.load * 10, p.load * (len(AREAS) + 4) + 8)
        if not p.expiry_notice:  # a validity line after every quote line
            lines *= 2
        self.observation_space, self.action_space = text_spaces(LINE_MAX * (lines + p.distractors))

    def initial(self, rng: Any, params: BookingParams | None = None) -> BookingState:
        """Return the state at reset: the trip, the budget, the assumption, the offers.

        The episode seed is ``episode_seed(rng)`` (one draw of a numpy ``Generator``, or
        an int taken as it is); ``params``, when given, replace the core's for the episode.
        """
        params = params or self._params
        seed = episode_seed(rng)
        r = StepRng(seed, -1)
        cities = tuple(r.sample(CITIES, params.load))
        trip = Trip(
            id="trip:" + r.choice(TRAVELLERS), cities=cities,
            nights=tuple(1 + r.below(4) for _ in cities), budget=500 * (12 + r.below(19)),
            cabin="", assumed="economy", budget_at=0, cabin_at=-1, assumed_at=0,
        )  # fmt: skip
        none: tuple = ()
        blank = BookingState(
            params=params, seed=seed, step=0, trip=trip, items=none, by_id=none, commands={},
            by_city={}, schedule=none, confirmed=False, quiet=0, text="", mentioned=none,
            reward=0, score=0, max_score=0, admissible=none, probe_rng=-1, prior=((), None),
            middle=((), None),
        )  # fmt: skip
        d = Draft(blank, 0)
        d.say("intro")
        d.say("trip", trip.id, cities[0], str(trip.nights[0]))
        for city, nights in zip(cities[1:], trip.nights[1:], strict=True):
            d.say("leg", city, str(nights))
        d.say("budget_first", trip.id, str(trip.budget))
        d.say("assume", trip.id, trip.assumed)
        used_flights: set[str] = set()
        hotels = r.sample(HOTELS, len(HOTELS))
        cars = r.sample(CARS, len(cities))
        items = []
        for city, car in zip(cities, cars, strict=True):
            for area in r.sample(AREAS, 2):
                items.append(events.new_hotel(r, hotels.pop(), city, area, 0, -1))
                list_item(d, items[-1])
            for k, cabin in enumerate(CLASSES):
                code = _flight_code(r, used_flights)
                price = (150 + 10 * r.below(26)) * (1, 2, 4)[k]
                items.append(
                    events.new_item("flight:" + code, FLIGHT, city, "", cabin, price, "", 0, -1)
                )
                list_item(d, items[-1])
            price = 30 + 5 * r.below(13)
            items.append(events.new_item("car:" + car, CAR, city, "", "", price, "no", 0, -1))
            list_item(d, items[-1])
        # Quotes given at reset lapse at staggered steps.
        ttl = params.quote_ttl
        d.items = [item._replace(expires=ttl // 2 + r.below(ttl)) for item in items]
        d.by_id, d.commands, d.by_city, d.admissible = catalog(trip, d.items)
        d.schedule = sorted((item.expires, item.id, i) for i, item in enumerate(d.items))
        for item in d.items:
            d.say_valid(item)
        d.max_score = len(cities) + 1  # every city's flight, and a confirmation
        d.quiet = service_steps(0, len(cities))  # the traveller's first wishes' time
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
        d = Draft(state, 1)
        if command is None:  # another case or spacing, or a rejection
            command = parse(d.commands, action)
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
        events.run(d)
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
            probes=events.probes(state),
            state_hash=_state_hash(state, truth.digest),
            mentioned=state.mentioned,
            step=state.step,
        )

    def probes(self, state: BookingState) -> list[Probe]:
        """Return the probes due at ``state``."""
        return list(events.probes(state))

    @staticmethod
    def admissible_actions(state: BookingState) -> list[str]:
        """Return the commands the desk accepts here, sorted.

        ``wait``, ``confirm``, ``ask`` and ``search`` for the trip, and ``hold``,
        ``book`` and ``cancel`` for every offer on file: picking the right one is the
        task.
        """
        return list(state.admissible)


def _flight_code(rng: StepRng, used: set[str]) -> str:
    while True:
        code = chr(97 + rng.below(26)) + chr(97 + rng.below(26)) + str(100 + rng.below(900))
        if code not in used:
            used.add(code)
            return code
