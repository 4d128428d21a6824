"""Metric definitions (ARCHITECTURE §4, evals): state drift and chain breakage.

These functions are the contract: leaderboards, tests and later suites all call them.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wmkit.world.types import WorldState

__all__ = [
    "BREAKAGE_BINS",
    "DRIFT_HORIZONS",
    "ProbeOutcome",
    "breakage_by_chain",
    "breakage_half_life",
    "drift",
    "drift_summary",
    "f1",
]

DRIFT_HORIZONS = (10, 50, 100, 200, 500)
"""Steps at which drift is reported (those the episode reaches)."""

BREAKAGE_BINS = (0, 5, 10, 20, 50, 100, 200, 500)
"""Lower edges of the chain-length bins; the last bin is open-ended."""


def f1(predicted: WorldState, truth: WorldState) -> float:
    """Return the F1 score of ``predicted`` facts against ``truth`` facts.

    Two empty states agree perfectly (F1 = 1); one empty and one not score 0.
    """
    if not predicted and not truth:
        return 1.0
    hits = len(predicted.facts & truth.facts)
    if hits == 0:
        return 0.0
    precision = hits / len(predicted)
    recall = hits / len(truth)
    return 2 * precision * recall / (precision + recall)


def drift(tracked: WorldState, truth: WorldState, mentioned: set[str] | frozenset[str]) -> float:
    """Return state drift at one step: ``1 - F1(tracked, truth restricted to mentioned)``.

    Args:
        tracked: the agent's tracked state.
        truth: the full true state at the same step.
        mentioned: entity ids mentioned in observations so far; only their true facts
            are expected of a tracker. Tracked facts about anything else count as errors.
    """
    return 1.0 - f1(tracked, truth.restrict(mentioned))


def drift_summary(series: Sequence[float]) -> dict[str, float]:
    """Summarise one episode's per-step drift.

    Args:
        series: drift at steps 0, 1, 2, ... (index = step).

    Returns:
        ``mean``; ``at_<h>`` for each horizon in :data:`DRIFT_HORIZONS` the episode
        reaches (drift at step h); ``slope`` = least-squares drift change per 100 steps.
    """
    values = np.asarray(series, dtype=float)
    out = {"mean": float(values.mean()) if values.size else float("nan")}
    for h in DRIFT_HORIZONS:
        if h < values.size:
            out[f"at_{h}"] = float(values[h])
    if values.size >= 2:
        out["slope"] = float(np.polyfit(np.arange(values.size), values, 1)[0] * 100)
    return out


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe as answered from the tracked state.

    Attributes:
        chain: chain length, probe step - anchor step (>= 0).
        correct: whether the tracked state gave the true answer.
        kind: the probe's kind (drift, breakage, confusion, stale).
    """

    chain: int
    correct: bool
    kind: str


def breakage_by_chain(outcomes: Sequence[ProbeOutcome]) -> dict[int, tuple[float, int]]:
    """Return ``{bin lower edge: (share answered wrong, probe count)}`` by chain length.

    Bins follow :data:`BREAKAGE_BINS` (the last is open-ended); empty bins are left out.
    """
    counts: dict[int, list[int]] = {}
    for o in outcomes:
        lo = BREAKAGE_BINS[bisect.bisect_right(BREAKAGE_BINS, o.chain) - 1]
        wrong_total = counts.setdefault(lo, [0, 0])
        wrong_total[0] += not o.correct
        wrong_total[1] += 1
    return {lo: (wrong / total, total) for lo, (wrong, total) in sorted(counts.items())}


def breakage_half_life(outcomes: Sequence[ProbeOutcome]) -> float:
    """Return the chain length where breakage first reaches 50%, or inf if it never does.

    Breakage is computed per bin of :data:`BREAKAGE_BINS`; the answer is the lower edge
    of the first bin at or above 50%, so it is a conservative (short) estimate.
    """
    for lo, (share, _) in breakage_by_chain(outcomes).items():
        if share >= 0.5:
            return float(lo)
    return float("inf")
