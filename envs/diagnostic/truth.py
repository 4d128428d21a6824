"""The ground truth of a diagnostic step: its change as a ``Delta``, and the ``wm.*`` keys.

Every family builds its ``wm.*`` info with :func:`truth_info` (one shape, fresh
containers, ARCHITECTURE §3) and its deltas with :func:`changes_delta` from the raw
changes its transition noted, split by cause: the agent's command, then world events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from wmkit.world.types import Delta, Fact, Probe, delta_info

__all__ = ["NO_DELTA", "Change", "changes_delta", "truth_info"]

Change = tuple[str, str, str | None, str]
"""One net fact change of a step: ``(subject, relation, before or None, after)``."""

NO_DELTA = Delta()


def changes_delta(changes: Iterable[Change]) -> Delta:
    """Return the ``Delta`` of a step's raw changes (sorted added and removed facts)."""
    # Built only when asked (ground truth on): the step path keeps raw changes.
    if not changes:
        return NO_DELTA
    added = sorted(Fact(s, r, after) for s, r, _, after in changes)
    removed = sorted(Fact(s, r, before) for s, r, before, _ in changes if before is not None)
    return Delta(tuple(added), tuple(removed))


def truth_info(
    *,
    state: Iterable[Fact],
    action: Delta,
    event: Delta,
    probes: Iterable[Probe],
    state_hash: str,
    mentioned: Iterable[str],
    **extra: Any,
) -> dict[str, Any]:
    """Return a step's ``wm.*`` info (fresh containers, so callers may keep or change it).

    Args:
        state: the true facts now, sorted.
        action: the change the agent's command made.
        event: the change the world's events made.
        probes: the questions due now.
        state_hash: a fast hash of the true state (transposition, caching).
        mentioned: the entity ids the observation names (any order, repeats allowed).
        **extra: family-specific keys, given without the ``wm.`` prefix.
    """
    info = {
        "wm.state": list(state),
        "wm.delta": delta_info(action, event),
        "wm.probes": list(probes),
        "wm.state_hash": state_hash,
        "wm.mentioned": sorted(set(mentioned)),
    }
    for key, value in extra.items():
        info[f"wm.{key}"] = value
    return info
