"""The Parcel family's scripted solver: it reads the true state, so it is an oracle.

It proves every episode can be won in full. A step brings at most one request (one draw
picks a step's news), about a parcel still active at the step's end (requests come
after the deliveries), and never at the horizon's step; the agent's command runs before
the next step's events, so serving each request the step after it is made always
arrives before its parcel is delivered, and a served request is never corrected again.
``max_score`` counts the requests issued, so the solver scores ``max_score``.

From a state where several requests are open (another policy played before), it serves
first the one whose parcel's next event comes soonest.
"""

from __future__ import annotations

from wmkit.envs.parcel.state import _DUE, _ID, _REQUEST, _REQUESTED, ParcelState

__all__ = ["solve"]


def solve(state: ParcelState) -> str:
    """Return the reroute that serves the most urgent open request, or ``wait``.

    Args:
        state: the env's true state (``ParcelEnv.snapshot()``).

    Returns:
        An admissible command: ``reroute <id> to <requested address>`` or ``wait``.
    """
    wanted = [p for p in state.live if p[_REQUEST] == "open"]
    if not wanted:
        return "wait"
    p = min(wanted, key=lambda p: (p[_DUE], p[_ID]))
    return f"reroute {p[_ID].removeprefix('parcel:')} to {p[_REQUESTED]}"
