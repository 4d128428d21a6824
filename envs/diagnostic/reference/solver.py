"""The reference family's scripted solver: it reads the true state, so it is an oracle.

It proves every episode can be won in full: each request is served the step after it is
made (requests never name a box the courier will take, and none comes on the last step).
"""

from __future__ import annotations

from wmkit.envs.diagnostic.reference.state import ReferenceState

__all__ = ["solve"]


def solve(state: ReferenceState) -> str:
    """Return the command that serves the oldest open request, or ``wait``."""
    if not state.requests:
        return "wait"
    i, shelf = state.requests[0]
    return f"move box {i + 1} to shelf {shelf[-1].upper()}"
