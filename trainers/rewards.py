"""Counting a reward model from logged commands (:class:`~wmkit.knowledge.rewards.RewardModel`).

The distillers read each logged command into its template and the preconditions its
state offered (the reading of the command rules, :mod:`wmkit.trainers.distill`) and
hand them here with the step's reward. :func:`count_rewards` learns each template's
decision list by sequential covering: of every set of up to ``max_conditions`` of
those preconditions that covers at least ``min_support`` of the template's steps not
yet covered (the pool), the one whose steps' rewards differ most from the rest of the
pool's is kept (the greatest cut in squared error,
``n_group * n_rest / n * (mean_group - mean_rest) ** 2``) and its steps leave the
pool, as long as that cut is significant: at least ``significance`` times the
variance left in the pool (an F test with one degree of freedom; 10.83 is p = 0.001,
strict because thousands of sets are tried). What no group covers is the template's
rest, its last group.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence

from wmkit.knowledge.rewards import RewardGroup, RewardModel
from wmkit.knowledge.rules import Feature, RuleSet
from wmkit.trainers.types import Transition

__all__ = ["SIGNIFICANCE", "count_rewards", "reward_error"]

SIGNIFICANCE = 10.83
"""The F statistic (one degree of freedom) a group's cut must reach: p = 0.001."""
_MAX_GROUPS = 64  # most groups per template before its rest
_EPS = 1e-12


def count_rewards(
    readings: Iterable[tuple[str, Sequence[Feature], float]],
    *,
    min_support: int = 3,
    max_conditions: int = 2,
    significance: float = SIGNIFICANCE,
) -> RewardModel:
    """Count a reward model from ``(template, preconditions, reward)`` readings.

    Args:
        readings: one per logged command: its template, the preconditions the state
            before it offered (the step's signature) and the reward it earned.
        min_support: fewest steps a group with conditions must cover (>= 1).
        max_conditions: most conditions per group (0..3; 0: each template's mean).
        significance: see the module docstring (> 0).

    Raises:
        ValueError: ``min_support`` < 1, ``max_conditions`` outside 0..3,
            ``significance`` not > 0, or a reward that is not finite.
    """
    if min_support < 1:
        raise ValueError(f"min_support must be >= 1, got {min_support}")
    if not 0 <= max_conditions <= 3:
        raise ValueError(f"max_conditions must be in 0..3, got {max_conditions}")
    if not (math.isfinite(significance) and significance > 0):
        raise ValueError(f"significance must be finite and > 0, got {significance}")
    # Sums (steps, rewards, squares) per distinct (template, signature): steps share them.
    sums: dict[str, dict[tuple[Feature, ...], list[float]]] = {}
    for template, sig, reward in readings:
        reward = float(reward)
        if not math.isfinite(reward):
            raise ValueError(f"a reward must be finite, got {reward} for {template!r}")
        found = sums.setdefault(template, {}).setdefault(tuple(sorted(sig)), [0, 0.0, 0.0])
        found[0] += 1
        found[1] += reward
        found[2] += reward * reward
    groups: list[RewardGroup] = []
    for template in sorted(sums):
        groups += _decision_list(
            template, sums[template], min_support, max_conditions, significance
        )
    return RewardModel(groups)


def _decision_list(
    template: str,
    by_sig: dict[tuple[Feature, ...], list[float]],
    min_support: int,
    max_conditions: int,
    significance: float,
) -> list[RewardGroup]:
    """One template's groups by sequential covering, its rest last."""
    sigs = list(by_sig.values())
    pool = [sum(v[i] for v in sigs) for i in range(3)]
    # Each candidate set: the sums of the pool's steps it covers, and the signatures.
    cover: dict[tuple[Feature, ...], list[float]] = {}
    members: dict[int, list[tuple[Feature, ...]]] = {}
    for k, (sig, v) in enumerate(by_sig.items()):
        subsets = [c for size in range(1, max_conditions + 1)
                   for c in itertools.combinations(sig, size)]  # fmt: skip
        members[k] = subsets
        for c in subsets:
            acc = cover.setdefault(c, [0, 0.0, 0.0])
            acc[0] += v[0]
            acc[1] += v[1]
            acc[2] += v[2]
    holders: dict[tuple[Feature, ...], list[int]] = {}
    for k, subsets in members.items():
        for c in subsets:
            holders.setdefault(c, []).append(k)
    live = set(range(len(sigs)))
    out: list[RewardGroup] = []
    while len(out) < _MAX_GROUPS:
        n, s, ss = pool
        sse = ss - s * s / n if n else 0.0
        best, best_cut = None, 0.0
        for c, (ng, sg, _) in cover.items():
            nr = n - ng
            if ng < min_support or nr < 1:
                continue
            diff = sg / ng - (s - sg) / nr
            cut = ng * nr / n * diff * diff
            if cut > best_cut + _EPS or (
                best is not None and abs(cut - best_cut) <= _EPS and (len(c), c) < (len(best), best)
            ):
                best, best_cut = c, cut
        if best is None:
            break
        left = max(0.0, sse - best_cut) / (n - 2) if n > 2 else 0.0
        if best_cut < significance * left:
            break
        out.append(_group(template, best, cover[best]))
        for k in holders[best]:
            if k not in live:
                continue
            live.discard(k)
            v = sigs[k]
            for i in range(3):
                pool[i] -= v[i]
            for c in members[k]:
                acc = cover[c]
                for i in range(3):
                    acc[i] -= v[i]
        cover = {c: acc for c, acc in cover.items() if acc[0] > 0}
    out.append(_group(template, (), pool))
    return out


def reward_error(ruleset: RuleSet, transitions: Iterable[Transition]) -> dict[str, float | int]:
    """How well ``ruleset``'s reward model predicts held-out rewards.

    Returns:
        ``steps`` (commands scored; resets are skipped), ``mse`` (of the estimate's
        mean), ``mse_zero`` (of predicting 0 everywhere, the neutral guess) and
        ``sign`` (share of the steps with a nonzero reward whose estimate, cautious as
        the simulator counts it, has the same sign; NaN without any).
    """
    n = err = zero = signed = right = 0
    for t in transitions:
        if t.action is None:
            continue
        estimate = ruleset.estimate_reward(t.before, t.action)
        n += 1
        err += (estimate.mean - t.reward) ** 2
        zero += t.reward**2
        if t.reward:
            signed += 1
            right += estimate.cautious * t.reward > 0
    return {
        "steps": n,
        "mse": err / n if n else math.nan,
        "mse_zero": zero / n if n else math.nan,
        "sign": right / signed if signed else math.nan,
    }


def _group(template: str, conditions: tuple[Feature, ...], sums: Sequence[float]) -> RewardGroup:
    n, s, ss = round(sums[0]), sums[1], sums[2]
    mean = s / n
    return RewardGroup(template, conditions, n, mean, math.sqrt(max(0.0, ss / n - mean * mean)))
