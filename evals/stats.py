"""Aggregates over seeds and tasks, after rliable's protocol (Agarwal et al., 2021).

"Deep RL at the Edge of the Statistical Precipice": report the interquartile mean (IQM)
and the mean, each with a 95% percentile interval under a *stratified* bootstrap (runs
are resampled with replacement within each stratum, a task, so every task keeps its
weight), and compare two configurations by the *probability of improvement*.

Written out here rather than pulled from rliable: rliable 1.2.0 imports ``arch``, whose
releases that install beside pandas 3 fail on import (``deprecate_kwarg``), and it
drags seaborn and statsmodels in for the hundred lines we use. The tests check these
estimators against scipy (``trim_mean``, ``bootstrap``, ``mannwhitneyu``).

The bootstrap is vectorised: every replicate is drawn in one call and the IQM of all
of them is taken by one sort along an axis. For strata of equal size (one stratum
included, which is every per-cell aggregate of the leaderboard) the draws are exactly
those of the replicate-by-replicate loop this replaced, so the interval is identical
for the same seed; strata of unequal sizes are drawn stratum by stratum, a different
stream of the same distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

__all__ = [
    "CI_PERCENTILES",
    "REPS",
    "Aggregate",
    "Improvement",
    "Interval",
    "aggregate",
    "bootstrap_indices",
    "iqm",
    "iqm_rows",
    "pooled_ratios",
    "probability_of_improvement",
    "stratified_resample",
]

CI_PERCENTILES = (2.5, 97.5)
"""Percentiles of the bootstrap distribution that bound a 95% interval."""

REPS = 2000
"""Bootstrap replicates by default."""


def iqm(values: Sequence[float] | np.ndarray) -> float:
    """Return the interquartile mean: the mean of the middle 50% of values.

    The same cut as ``scipy.stats.trim_mean(values, 0.25)``: ``floor(n / 4)`` values
    off each end (none for fewer than four).
    """
    x = np.asarray(values, dtype=float).ravel()
    if x.size == 0:
        return float("nan")
    return float(iqm_rows(x[None, :])[0])


def iqm_rows(samples: np.ndarray) -> np.ndarray:
    """Return the IQM of each row of a ``(rows, n)`` array, by one sort along axis 1."""
    n = samples.shape[1]
    lo, hi = int(np.floor(0.25 * n)), int(np.ceil(0.75 * n))
    return np.sort(samples, axis=1)[:, lo:hi].mean(axis=1)


class Aggregate(NamedTuple):
    """One metric aggregated over runs (and tasks, for an overall aggregate).

    Attributes:
        iqm: interquartile mean of every value.
        mean: mean of every value.
        ci_low, ci_high: 95% stratified-bootstrap percentile interval of the IQM.
        n: how many values.
        mean_ci_low, mean_ci_high: the same interval for the mean.
    """

    iqm: float
    mean: float
    ci_low: float
    ci_high: float
    n: int
    mean_ci_low: float = float("nan")
    mean_ci_high: float = float("nan")


class Interval(NamedTuple):
    """A point estimate with its 95% bootstrap interval."""

    value: float
    ci_low: float
    ci_high: float


class Improvement(NamedTuple):
    """Probability that one configuration improves on another (:func:`probability_of_improvement`).

    Attributes:
        probability: P(X > Y) averaged over the tasks both played.
        ci_low, ci_high: its 95% stratified-bootstrap interval.
        tasks: how many tasks it averages over (0: none in common, all NaN).
    """

    probability: float
    ci_low: float
    ci_high: float
    tasks: int


def _groups(strata: Sequence[Sequence[float]]) -> list[np.ndarray]:
    return [np.asarray(s, dtype=float).ravel() for s in strata if len(s)]


def bootstrap_indices(rng: np.random.Generator, size: int, reps: int) -> np.ndarray:
    """Draw ``(reps, size)`` indices into ``size`` runs, with replacement.

    One call of ``rng.integers``: row r equals what the r-th of ``reps`` successive
    calls ``rng.integers(0, size, size)`` would draw.
    """
    return rng.integers(0, size, (reps, size))


def stratified_resample(
    strata: Sequence[np.ndarray], rng: np.random.Generator, reps: int
) -> np.ndarray:
    """Resample runs within each stratum; return ``(reps, total runs)`` values.

    Strata of equal size are drawn in one call, in the order a loop over replicates,
    then strata, then runs would draw them; otherwise one call per stratum.
    """
    if len({g.size for g in strata}) == 1:
        stacked = np.stack(strata)  # (strata, n)
        k, n = stacked.shape
        idx = rng.integers(0, n, (reps, k, n))
        return stacked[np.arange(k)[None, :, None], idx].reshape(reps, k * n)
    return np.concatenate([g[bootstrap_indices(rng, g.size, reps)] for g in strata], axis=1)


def _percentiles(boot: np.ndarray) -> tuple[float, float]:
    lo, hi = np.percentile(boot, CI_PERCENTILES)
    return float(lo), float(hi)


def aggregate(
    strata: Sequence[Sequence[float]], *, reps: int = REPS, seed: int = 0
) -> Aggregate:
    """Aggregate a metric given per stratum (a task), each a sequence over runs (seeds).

    The intervals are 95% percentile intervals of the IQM and of the mean under a
    stratified bootstrap: runs are resampled with replacement within each stratum.

    Args:
        strata: one sequence of per-run values per stratum; empty ones are left out.
        reps: bootstrap replicates.
        seed: seed of the resampling, so reports are reproducible.

    Returns:
        The :class:`Aggregate`; all NaN with ``n == 0`` when there is no value.
    """
    groups = _groups(strata)
    if not groups:
        nan = float("nan")
        return Aggregate(nan, nan, nan, nan, 0, nan, nan)
    flat = np.concatenate(groups)
    samples = stratified_resample(groups, np.random.default_rng(seed), reps)
    lo, hi = _percentiles(iqm_rows(samples))
    mean_lo, mean_hi = _percentiles(samples.mean(axis=1))
    return Aggregate(iqm(flat), float(flat.mean()), lo, hi, int(flat.size), mean_lo, mean_hi)


def _p_greater(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(X > Y) + P(X = Y) / 2 along the last axes of ``(..., n)`` and ``(..., m)``."""
    diff = x[..., :, None] - y[..., None, :]
    return ((diff > 0) + 0.5 * (diff == 0)).mean(axis=(-2, -1))


def probability_of_improvement(
    x: Sequence[Sequence[float]],
    y: Sequence[Sequence[float]],
    *,
    higher_is_better: bool = True,
    reps: int = REPS,
    seed: int = 0,
) -> Improvement:
    """Return the probability that configuration X improves on configuration Y.

    rliable's definition: per task, ``P(X > Y)`` over every pair of a run of X and a
    run of Y, ties counting one half (the Mann-Whitney U statistic over ``n * m``),
    averaged over tasks. The interval resamples X's and Y's runs independently within
    each task (a stratified, independent bootstrap).

    Args:
        x: per task, the runs' values of configuration X; a task where X or Y has
            no value is left out.
        y: per task, in the same order, the runs' values of configuration Y.
        higher_is_better: False for a metric to minimise (drift): then "improves" is
            ``X < Y``.
        reps: bootstrap replicates.
        seed: seed of the resampling.

    Raises:
        ValueError: ``x`` and ``y`` name different numbers of tasks.
    """
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} tasks and y {len(y)}: give both the same tasks")
    sign = 1.0 if higher_is_better else -1.0
    pairs = [
        (sign * np.asarray(a, dtype=float), sign * np.asarray(b, dtype=float))
        for a, b in zip(x, y, strict=True)
        if len(a) and len(b)
    ]
    if not pairs:
        nan = float("nan")
        return Improvement(nan, nan, nan, 0)
    rng = np.random.default_rng(seed)
    point = np.mean([_p_greater(a, b) for a, b in pairs])
    boot = np.zeros(reps)
    for a, b in pairs:
        xb, yb = a[bootstrap_indices(rng, a.size, reps)], b[bootstrap_indices(rng, b.size, reps)]
        boot += _p_greater(xb, yb)
    lo, hi = _percentiles(boot / len(pairs))
    return Improvement(float(point), lo, hi, len(pairs))


def pooled_ratios(
    numerators: np.ndarray, denominators: np.ndarray, *, reps: int = REPS, seed: int = 0
) -> np.ndarray:
    """Bootstrap pooled ratios over runs: ``(reps, k)`` of ``sum(num) / sum(den)`` per column.

    Args:
        numerators: ``(runs, k)`` counts per run (an episode) and column (a
            chain-length bin): runs are resampled with replacement, counts pooled.
        denominators: ``(runs, k)``, the counts the numerators are a share of.
        reps: bootstrap replicates.
        seed: seed of the resampling.

    Returns:
        The ratio per replicate and column; NaN where the resampled runs have no count.
    """
    num, den = np.asarray(numerators, dtype=float), np.asarray(denominators, dtype=float)
    if num.shape != den.shape or num.ndim != 2:
        raise ValueError(f"numerators {num.shape} and denominators {den.shape}: want (runs, k)")
    idx = bootstrap_indices(np.random.default_rng(seed), num.shape[0], reps)
    total = den[idx].sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, num[idx].sum(axis=1) / total, np.nan)
