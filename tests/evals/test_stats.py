"""The statistics against scipy and against the replicate-by-replicate loop they replaced."""

import math

import numpy as np
import pytest
import scipy.stats

from wmkit.evals.metrics import (
    BREAKAGE_BINS,
    ProbeOutcome,
    breakage_by_chain,
    breakage_half_life,
    breakage_intervals,
)
from wmkit.evals.stats import (
    aggregate,
    iqm,
    iqm_rows,
    pooled_ratios,
    probability_of_improvement,
)

RNG = np.random.default_rng(1234)
SCORES = RNG.beta(2, 5, size=(6, 5))  # 6 tasks x 5 seeds, in [0, 1]
OTHER = RNG.beta(3, 4, size=(6, 5))


def _loop_aggregate(strata, reps=2000, seed=0):
    """The leaderboard's bootstrap before it was vectorised (kept verbatim as the reference)."""
    groups = [np.asarray(s, dtype=float) for s in strata if len(s)]
    rng = np.random.default_rng(seed)
    boot = np.empty(reps)
    for i in range(reps):
        boot[i] = iqm(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups]))
    return tuple(float(v) for v in np.percentile(boot, [2.5, 97.5]))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 13, 40])
def test_iqm_is_scipys_quarter_trimmed_mean(n):
    x = RNG.normal(size=n)
    assert iqm(x) == pytest.approx(scipy.stats.trim_mean(x, 0.25), abs=1e-12)
    rows = RNG.normal(size=(4, n))
    assert iqm_rows(rows) == pytest.approx([scipy.stats.trim_mean(r, 0.25) for r in rows])


@pytest.mark.parametrize(
    "strata",
    [
        [[0.1, 0.5, 0.2, 0.9, 0.4]],  # one stratum: every per-cell aggregate
        [[0.3, 0.1, 0.7], [0.9, 0.8]],  # one stratum each of 3 and 2 seeds
        SCORES.tolist(),  # six tasks, five seeds each
        [[2.0], [0.1, 0.2]],
    ],
)
def test_the_vectorised_bootstrap_gives_the_loops_interval(strata):
    a = aggregate(strata, seed=7)
    sizes = {len(s) for s in strata}
    if len(sizes) == 1:  # the same draws, in the same order: the same interval
        assert (a.ci_low, a.ci_high) == pytest.approx(_loop_aggregate(strata, seed=7), abs=1e-12)
    flat = np.concatenate([np.asarray(s, float) for s in strata])
    assert a.iqm == pytest.approx(scipy.stats.trim_mean(flat, 0.25))
    assert a.mean == pytest.approx(flat.mean()) and a.n == flat.size
    assert a.ci_low <= a.iqm <= a.ci_high or a.n < 4
    assert a.mean_ci_low <= a.mean <= a.mean_ci_high


def test_unequal_strata_draw_another_stream_of_the_same_distribution():
    strata = [SCORES[0, :3], SCORES[1], SCORES[2, :2], SCORES[3]]
    a = aggregate(strata, reps=20_000)
    lo, hi = _loop_aggregate(strata, reps=20_000)
    assert a.ci_low == pytest.approx(lo, abs=0.02) and a.ci_high == pytest.approx(hi, abs=0.02)


def test_one_stratum_matches_scipys_percentile_bootstrap():
    x = SCORES.ravel()
    for stat, ours in ((lambda v, axis: v.mean(axis=axis), "mean"), (None, "iqm")):
        if stat is None:
            stat = lambda v, axis: scipy.stats.trim_mean(v, 0.25, axis=axis)  # noqa: E731
        ref = scipy.stats.bootstrap(
            (x,), stat, n_resamples=20_000, method="percentile", rng=np.random.default_rng(3)
        ).confidence_interval
        a = aggregate([x], reps=20_000)
        low, high = (a.ci_low, a.ci_high) if ours == "iqm" else (a.mean_ci_low, a.mean_ci_high)
        assert low == pytest.approx(ref.low, abs=0.01), ours
        assert high == pytest.approx(ref.high, abs=0.01), ours


def test_stratification_keeps_each_task_weight():
    # Two tasks far apart: resampling within each task keeps half the values in each,
    # so the mean's interval is far narrower than an unstratified bootstrap's.
    strata = [[0.0, 0.01, 0.02, 0.0], [1.0, 0.99, 0.98, 1.0]]
    a = aggregate(strata)
    assert a.mean_ci_high - a.mean_ci_low < 0.02
    loose = aggregate([strata[0] + strata[1]])
    assert loose.mean_ci_high - loose.mean_ci_low > 0.2


def test_empty_and_constant():
    assert math.isnan(aggregate([]).iqm) and aggregate([[], []]).n == 0
    constant = aggregate([[0.3] * 5, [0.3] * 2])
    assert constant.ci_low == constant.ci_high == pytest.approx(0.3)


def test_probability_of_improvement_is_mann_whitney_u_over_nm_averaged_over_tasks():
    x, y = SCORES.tolist(), OTHER.tolist()
    x[0] = [0.5, 0.5, 0.2, 0.1, 0.5]  # ties count one half
    y[0] = [0.5, 0.3, 0.2, 0.2, 0.5]
    expected = np.mean(
        [
            scipy.stats.mannwhitneyu(a, b).statistic / (len(a) * len(b))
            for a, b in zip(x, y, strict=True)
        ]
    )
    p = probability_of_improvement(x, y)
    assert p.probability == pytest.approx(expected) and p.tasks == 6
    assert p.ci_low <= p.probability <= p.ci_high
    lower = probability_of_improvement(x, y, higher_is_better=False)
    assert lower.probability == pytest.approx(1 - expected)  # P(X < Y) = 1 - P(X > Y)
    assert probability_of_improvement(x, x).probability == pytest.approx(0.5)


def test_probability_of_improvement_interval_is_the_independent_stratified_bootstrap():
    x, y = SCORES[:3], OTHER[:3, :4]
    reps = 500
    rng = np.random.default_rng(0)
    boot = np.zeros(reps)
    for a, b in zip(x, y, strict=True):  # the draws a loop makes, task by task
        xi, yi = rng.integers(0, a.size, (reps, a.size)), rng.integers(0, b.size, (reps, b.size))
        for r in range(reps):
            boot[r] += scipy.stats.mannwhitneyu(a[xi[r]], b[yi[r]]).statistic / (a.size * b.size)
    lo, hi = np.percentile(boot / 3, [2.5, 97.5])
    p = probability_of_improvement(x, y, reps=reps)
    assert (p.ci_low, p.ci_high) == pytest.approx((lo, hi), abs=1e-12)


def test_probability_of_improvement_leaves_tasks_out_that_one_side_lacks():
    p = probability_of_improvement([[1.0], [], [0.0]], [[0.0], [1.0], []])
    assert p.tasks == 1 and p.probability == 1.0
    assert probability_of_improvement([[]], [[1.0]]).tasks == 0
    with pytest.raises(ValueError, match="same tasks"):
        probability_of_improvement([[1.0]], [[1.0], [2.0]])


def test_pooled_ratios_resample_runs_and_pool_their_counts():
    num = np.array([[1, 0], [2, 0], [0, 0]])
    den = np.array([[2, 1], [2, 0], [1, 0]])
    boot = pooled_ratios(num, den, reps=300, seed=5)
    idx = np.random.default_rng(5).integers(0, 3, (300, 3))
    for r in (0, 17, 299):
        n, d = num[idx[r]].sum(axis=0), den[idx[r]].sum(axis=0)
        expect = [n[0] / d[0], n[1] / d[1] if d[1] else np.nan]
        np.testing.assert_allclose(boot[r], expect)
    with pytest.raises(ValueError, match="runs, k"):
        pooled_ratios(num, den[:, :1])


def test_breakage_intervals_bracket_the_pooled_values():
    rng = np.random.default_rng(0)
    episodes = [
        [ProbeOutcome(int(c), bool(rng.random() > c / 60), "drift") for c in chains]
        for chains in rng.integers(0, 60, (5, 30))
    ]
    bins, half = breakage_intervals(episodes)
    pooled = [o for e in episodes for o in e]
    assert {k: v.value for k, v in bins.items()} == {
        k: pytest.approx(share) for k, (share, _) in breakage_by_chain(pooled).items()
    }
    for interval in bins.values():
        assert 0 <= interval.ci_low <= interval.value <= interval.ci_high <= 1
    assert half.value == breakage_half_life(pooled)
    assert half.ci_low <= half.value <= half.ci_high
    assert {half.ci_low, half.ci_high} <= set(map(float, BREAKAGE_BINS)) | {math.inf}


def test_breakage_intervals_without_probes():
    bins, half = breakage_intervals([[], []])
    assert bins == {} and math.isinf(half.value) and math.isinf(half.ci_high)
    # Never broken: the half-life is inf, and so is its interval.
    _, half = breakage_intervals([[ProbeOutcome(3, True, "drift")]] * 3)
    assert math.isinf(half.ci_low)
