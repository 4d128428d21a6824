"""Aggregates over seeds: IQM, mean and 95% stratified-bootstrap confidence intervals.

Written out here (some 30 lines) rather than pulled from rliable, whose dependencies
(arch, seaborn, ...) outweigh what we use of it; the estimators follow Agarwal et al.
(2021), "Deep RL at the Edge of the Statistical Precipice".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = ["Aggregate", "aggregate", "iqm"]


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Return the interquartile mean: the mean of the middle 50% of values."""
    x = np.sort(np.asarray(values, dtype=float).ravel())
    if x.size == 0:
        return float("nan")
    lo, hi = int(np.floor(0.25 * x.size)), int(np.ceil(0.75 * x.size))
    return float(x[lo:hi].mean()) if hi > lo else float(x.mean())


class Aggregate(NamedTuple):
    """One metric aggregated over runs."""

    iqm: float
    mean: float
    ci_low: float
    ci_high: float
    n: int


def aggregate(strata: Sequence[Sequence[float]], *, reps: int = 2000, seed: int = 0) -> Aggregate:
    """Aggregate a metric given per stratum (e.g. per task), each a list over seeds.

    The confidence interval is the 95% percentile interval of the IQM under a
    stratified bootstrap: seeds are resampled with replacement within each stratum.

    Args:
        strata: one sequence of per-seed values per stratum.
        reps: bootstrap replicates.
        seed: seed of the resampling, so reports are reproducible.
    """
    groups = [np.asarray(s, dtype=float) for s in strata if len(s)]
    if not groups:
        nan = float("nan")
        return Aggregate(nan, nan, nan, nan, 0)
    flat = np.concatenate(groups)
    rng = np.random.default_rng(seed)
    boot = np.empty(reps)
    for i in range(reps):
        boot[i] = iqm(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups]))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return Aggregate(iqm(flat), float(flat.mean()), float(lo), float(hi), int(flat.size))
