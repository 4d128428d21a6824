"""The Booking family's scripted solver: it reads the true state, so it is an oracle.

It proves every chance ``max_score`` counts can be taken. The traveller keeps quiet for
the steps an attentive desk needs to serve each version of the wishes
(:func:`~wmkit.envs.booking.state.service_steps`: a step per cancellation, at most two
per booking, one for the confirmation) and states no wish that could not be served by
the horizon; this desk is that attentive one. It serves a version in that budget:
first it cancels every booking no longer wanted (so no booking is a double), then books
each wanted item, re-quoting its city first when the quote has lapsed (a fresh quote
lasts at least two steps, so the booking right after the search is on a valid price),
then confirms the itinerary once; it never books an unwanted item or an expired price.
"""

from __future__ import annotations

from wmkit.envs.booking.commands import words
from wmkit.envs.booking.state import BookingState, is_wanted, itinerary_ok

__all__ = ["solve"]


def solve(state: BookingState) -> str:
    """Return the next command of a desk that knows the traveller's true wishes."""
    trip, items = state.trip, state.items
    for item in items:
        if item.status == "booked" and not is_wanted(trip, item):
            return "cancel " + words(item.id)
    for item in items:
        if item.status != "booked" and is_wanted(trip, item):
            if item.quote == "valid":
                return "book " + words(item.id)
            return "search " + item.city
    if not state.confirmed and itinerary_ok(trip, items):
        return "confirm"
    return "wait"
