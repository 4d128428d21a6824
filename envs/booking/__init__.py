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
it does not. ``max_score`` counts the chances to earn +1 created so far, and each can
be taken: the traveller gives the desk time, so after each version of the wishes no
new wish comes for the steps an attentive desk needs to serve it (``service_steps``: a
step per cancellation, two per booking, one to confirm), and none comes that could not
be served by the horizon. The scripted solver (``solve``, an oracle: it reads the true
state) is such a desk and earns ``max_score`` in every episode.

The pure core, ``BookingFuncEnv``, has Gymnasium's ``FuncEnv`` shape over an immutable
``BookingState``; a transition is a deterministic function of ``(state, action)``.
``BookingEnv`` is the thin ``gymnasium.Env[str, str]`` shell. One concern a file:
``text.py`` (what is said: one declaration renders and reads), ``state.py`` (parameters,
records, the state and its ground truth), ``rules.py`` (a step's scratch state and its
writes), ``commands.py`` and ``events.py`` (the agent's commands, the world's events and
the probes), ``core.py`` (the pure core), ``solver.py`` (the scripted solver).
"""

from wmkit.envs.booking.core import BookingFuncEnv
from wmkit.envs.booking.solver import solve
from wmkit.envs.booking.state import (
    BookingParams,
    BookingState,
    Item,
    Trip,
    is_wanted,
    itinerary_ok,
    service_steps,
    state_hash,
)
from wmkit.envs.booking.text import LINE_MAX, TEXT, VOICE, read
from wmkit.envs.diagnostic.shell import DiagnosticEnv

__all__ = [
    "LINE_MAX",
    "TEXT",
    "VOICE",
    "BookingEnv",
    "BookingFuncEnv",
    "BookingParams",
    "BookingState",
    "Item",
    "Trip",
    "is_wanted",
    "itinerary_ok",
    "read",
    "service_steps",
    "solve",
    "state_hash",
]

# The names these had when the family was one module (still imported from here).
_LINE_MAX, _is_wanted, _itinerary_ok = LINE_MAX, is_wanted, itinerary_ok


class BookingEnv(DiagnosticEnv):
    """``wmkit/Booking-v0``: the shared diagnostic shell over ``BookingFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ``max_score`` counts the chances
    to earn +1 created so far, all of which can be taken. ``terminated`` is always
    False; the episode ends at ``horizon``. ``BookingEnv.reader`` is the family's
    perfect reader, ``read``; ``BookingEnv.solver`` its scripted solver, ``solve`` (an
    oracle).

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        **params: the fields of :class:`BookingParams` (``horizon`` 20..1000, default
            200, at least ``2 * load + 1``; ``load``, the cities, 1..16, default 3;
            ``quote_ttl`` 2..100, default 15; ``expiry_notice``, default True: when
            False, quotes state their validity in steps and lapse silently;
            ``paraphrase_rate``, ``distractors``, ``indirection``, ``probe_rate``),
            checked there: a wrong type or an unknown name raises TypeError, a value
            out of range ValueError.
    """

    core_class = BookingFuncEnv
    params_class = BookingParams
    reader = staticmethod(read)
    solver = staticmethod(solve)
