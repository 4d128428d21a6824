import math

import numpy as np
import pytest

from wmkit.evals.metrics import (
    ProbeOutcome,
    breakage_by_chain,
    breakage_half_life,
    drift,
    drift_summary,
    f1,
)
from wmkit.evals.stats import aggregate, iqm
from wmkit.world.types import WorldState

A, B, C = ("a", "r", "1"), ("b", "r", "2"), ("c", "r", "3")


def test_f1_edge_cases():
    assert f1(WorldState(), WorldState()) == 1.0
    assert f1(WorldState([A]), WorldState()) == 0.0
    assert f1(WorldState(), WorldState([A])) == 0.0
    assert f1(WorldState([A, B]), WorldState([A, B])) == 1.0
    # precision 1/2, recall 1/1 -> 2/3
    assert f1(WorldState([A, B]), WorldState([A])) == pytest.approx(2 / 3)


def test_drift_ignores_unmentioned_truth_but_counts_hallucinations():
    truth = WorldState([A, B, C])
    assert drift(WorldState([A]), truth, {"a"}) == 0.0
    assert drift(WorldState([A]), truth, {"a", "b"}) == pytest.approx(1 - 2 / 3)
    assert drift(WorldState([A, C]), truth, {"a"}) == pytest.approx(1 - 2 / 3)


def test_drift_summary_reports_horizons_and_slope():
    series = np.linspace(0, 0.5, 101)
    summary = drift_summary(series)
    assert summary["mean"] == pytest.approx(0.25)
    assert summary["at_50"] == pytest.approx(0.25)
    assert "at_200" not in summary
    assert summary["slope"] == pytest.approx(0.5)


def test_breakage_bins_and_half_life():
    outcomes = [ProbeOutcome(1, True, "drift")] * 3 + [ProbeOutcome(2, False, "drift")]
    outcomes += [ProbeOutcome(30, False, "breakage"), ProbeOutcome(40, True, "breakage")]
    outcomes += [ProbeOutcome(700, False, "breakage")]
    bins = breakage_by_chain(outcomes)
    assert bins == {0: (0.25, 4), 20: (0.5, 2), 500: (1.0, 1)}
    assert breakage_half_life(outcomes) == 20.0
    assert math.isinf(breakage_half_life([ProbeOutcome(9, True, "drift")]))


def test_iqm_drops_the_tails():
    assert iqm([0, 1, 1, 1, 1, 1, 1, 100]) == 1.0
    assert iqm([2.0]) == 2.0


def test_aggregate_ci_brackets_and_is_reproducible():
    values = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    a = aggregate([values])
    assert a.ci_low <= a.iqm <= a.ci_high
    assert a.ci_low < a.ci_high
    assert a.n == 8 and a.mean == pytest.approx(0.45)
    assert aggregate([values]) == a
    constant = aggregate([[0.3] * 5, [0.3] * 2])
    assert constant.ci_low == constant.ci_high == pytest.approx(0.3)
    assert math.isnan(aggregate([]).iqm)
