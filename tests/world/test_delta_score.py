"""The shared scorer of predicted vs true changes (distiller and causal confusion)."""

import math

import pytest

from wmkit.world.delta_score import DeltaTally, PartScore, signed_facts
from wmkit.world.types import Delta, Fact

A, B, C = Fact("a", "r", "1"), Fact("b", "r", "2"), Fact("c", "r", "3")


def test_signed_facts_keep_added_and_removed_apart():
    assert signed_facts(Delta((A,), (B,))) == {("+", A), ("-", B)}
    assert signed_facts(Delta((A,))) != signed_facts(Delta((), (A,)))
    assert signed_facts(Delta()) == frozenset()


def test_a_tally_pools_counts_over_steps():
    tally = DeltaTally()
    assert tally.add(Delta((A,), (B,)), Delta((A,), (B,))) is True  # exact
    assert tally.add(Delta((A, C)), Delta((A,), (B,))) is False  # +C wrong, -B missed
    assert tally.add(Delta(), Delta()) is True  # nothing happened, nothing said
    assert (tally.steps, tally.exact, tally.changed, tally.exact_changed) == (3, 2, 2, 1)
    assert (tally.tp, tally.fp, tally.fn) == (3, 1, 1)
    assert tally.score() == PartScore(2 / 3, 2, 0.5, 0.75, 0.75, pytest.approx(0.75))


def test_an_empty_tally_and_one_that_predicted_nothing():
    empty = DeltaTally().score()
    assert math.isnan(empty.exact) and math.isnan(empty.exact_changed)
    assert (empty.changed, empty.precision, empty.recall, empty.f1) == (0, 1.0, 1.0, 1.0)
    silent = DeltaTally()
    silent.add(Delta(), Delta((A,)))
    assert (silent.precision, silent.recall, silent.f1) == (1.0, 0.0, 0.0)
