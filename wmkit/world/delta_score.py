"""Scoring a predicted change against a true one: exact match and fact F1 over steps.

The one scorer of "a predicted delta part against a true delta part", shared by the
rule distiller's held-out score (:func:`wmkit.trainers.distill.evaluate`) and the
causal-confusion metric (:func:`wmkit.evals.metrics.confusion_scores`). Changes are
compared as *signed facts*: ``("+", fact)`` for a fact added, ``("-", fact)`` for a
fact removed, so adding a fact never matches removing it.

A :class:`DeltaTally` takes one ``(predicted, true)`` pair per step and pools the
counts: a step is *exact* when both sets of signed facts are equal; true positives,
false positives and false negatives are summed over the steps (micro-averaged), and
precision, recall and F1 follow from the sums.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from wmkit.world.types import Delta, Fact

__all__ = ["DeltaTally", "PartScore", "SignedFact", "signed_facts"]

SignedFact = tuple[str, Fact]
"""``("+", fact)``: the fact was added; ``("-", fact)``: it was removed."""


def signed_facts(delta: Delta) -> frozenset[SignedFact]:
    """Return the change as a set of signed facts (``+`` added, ``-`` removed)."""
    return frozenset(("+", f) for f in delta.added) | frozenset(("-", f) for f in delta.removed)


class PartScore(NamedTuple):
    """How well one part (action- or event-driven) of the deltas was predicted.

    Attributes:
        exact: share of steps whose predicted part equals the true part (added and
            removed facts both), empty parts included (NaN when no step was scored).
        changed: steps whose true part is not empty.
        exact_changed: ``exact`` over those only (NaN when there are none): the harder
            number, since predicting "no change" is right most of the time.
        precision, recall, f1: micro-averaged over signed facts (``+fact``/``-fact``)
            of all steps; 1.0 when nothing was to be predicted and nothing was.
    """

    exact: float
    changed: int
    exact_changed: float
    precision: float
    recall: float
    f1: float


class DeltaTally:
    """Pooled counts of predicted vs true changes, one :meth:`add` per step.

    Attributes:
        steps: steps added.
        exact: steps whose prediction equals the truth.
        changed: steps whose true change is not empty.
        exact_changed: those among them predicted exactly.
        tp, fp, fn: signed facts predicted and true, predicted only, true only.
    """

    __slots__ = ("changed", "exact", "exact_changed", "fn", "fp", "steps", "tp")

    def __init__(self) -> None:
        self.steps = self.exact = self.changed = self.exact_changed = 0
        self.tp = self.fp = self.fn = 0

    def add(self, predicted: Delta, true: Delta) -> bool:
        """Count one step; return whether ``predicted`` equals ``true`` exactly."""
        p, t = signed_facts(predicted), signed_facts(true)
        same = p == t
        self.steps += 1
        self.exact += same
        if t:
            self.changed += 1
            self.exact_changed += same
        self.tp += len(p & t)
        self.fp += len(p - t)
        self.fn += len(t - p)
        return same

    @property
    def precision(self) -> float:
        """Precision, tp / (tp + fp); 1.0 when nothing was predicted."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """Recall, tp / (tp + fn); 1.0 when nothing was to be predicted."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0

    @property
    def f1(self) -> float:
        """F1, the harmonic mean of precision and recall (0.0 when both are 0)."""
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0

    def score(self) -> PartScore:
        """Return the pooled :class:`PartScore` of the steps added so far."""
        return PartScore(
            self.exact / self.steps if self.steps else math.nan,
            self.changed,
            self.exact_changed / self.changed if self.changed else math.nan,
            self.precision,
            self.recall,
            self.f1,
        )
