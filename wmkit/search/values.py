"""Value functions: ``heuristic`` (score + novelty) and ``hybrid`` (cheap filter, then costly).

A value function estimates the future return of a newly reached, non-terminal state
from its :class:`~wmkit.search.types.Transition` (agent-visible info only). The search
adds the rewards along the path itself, and calls the value function once per new
state (transpositions reuse the first estimate). ``value_net`` and ``llm`` come later
behind the same callable shape.
"""

from __future__ import annotations

import math

from wmkit.search.types import Transition, ValueFn

__all__ = ["HeuristicValue", "HybridValue"]


class HeuristicValue:
    """``score_weight * score + novelty_weight / sqrt(times seen)``.

    ``score`` is the state's ``info["score"]`` over ``info["max_score"]`` when that is
    positive (so in [0, 1] for games that bound it), else the raw score. It rewards
    being in a well-scored state on top of the rewards the search already adds along the
    path (set ``score_weight=0`` to count score once). Novelty counts how often this
    evaluator has been asked about a state with this observation text since
    :meth:`reset`: 1 the first time, decaying after, so repeats ("You can't see any
    such thing.") look dull and new text bright. It reads the text, not the state hash,
    so it needs no ground truth and does not count a changed step counter as news.

    Args:
        score_weight: weight of the score term, finite.
        novelty_weight: weight of the novelty term, finite.

    Raises:
        ValueError: a weight is not finite.
    """

    def __init__(self, score_weight: float = 1.0, novelty_weight: float = 1.0) -> None:
        for name, weight in (("score_weight", score_weight), ("novelty_weight", novelty_weight)):
            if not math.isfinite(weight):
                raise ValueError(f"{name} must be finite, got {weight}")
        self.score_weight = float(score_weight)
        self.novelty_weight = float(novelty_weight)
        self._seen: dict[str, int] = {}

    def reset(self) -> None:
        """Forget what was seen (a new episode)."""
        self._seen.clear()

    def __call__(self, transition: Transition) -> float:
        """Return the heuristic value of the state ``transition`` reached."""
        info = transition.info
        score = float(info.get("score", 0) or 0)
        max_score = float(info.get("max_score", 0) or 0)
        if max_score > 0:
            score /= max_score
        text = transition.observation
        count = self._seen.get(text, 0) + 1
        self._seen[text] = count
        return self.score_weight * score + self.novelty_weight / math.sqrt(count)


class HybridValue:
    """A cheap value first; the costly one only where the cheap one is promising.

    Returns ``cheap(t)`` when it is below ``threshold`` (not worth a costly look),
    else ``costly(t)``. The counters say how often each ran.

    Args:
        cheap: a fast value function (a heuristic, rules).
        costly: a slow one (a value network, an LLM).
        threshold: cheap values below it skip the costly call.
    """

    def __init__(self, cheap: ValueFn, costly: ValueFn, threshold: float) -> None:
        if math.isnan(threshold):
            raise ValueError("threshold must be a number, got nan")
        self.cheap = cheap
        self.costly = costly
        self.threshold = float(threshold)
        self.cheap_calls = 0
        self.costly_calls = 0

    def __call__(self, transition: Transition) -> float:
        """Return the cheap value if it is below the threshold, else the costly one."""
        self.cheap_calls += 1
        value = self.cheap(transition)
        if value < self.threshold:
            return value
        self.costly_calls += 1
        return self.costly(transition)
