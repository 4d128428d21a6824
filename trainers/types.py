"""Contracts of the trainers: a logged step, the distiller interface, rule-set scores.

:mod:`wmkit.trainers.distill` implements them (``CountingDistiller``, ``LLMDistiller``,
``evaluate``); :class:`PartScore`, the score of one part of the deltas, is the one of
:mod:`wmkit.world.delta_score`, shared with the evals. The value trainer's records
(``TrainValueConfig``, ``Examples``) stay in :mod:`wmkit.trainers.value`: they are built
of the network's own inputs and sizes (:mod:`wmkit.search.value_net`), which a contracts
file should not pull in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

from wmkit.knowledge.rules import RuleSet
from wmkit.world.delta_score import PartScore
from wmkit.world.types import Delta, WorldState

__all__ = ["DeltaAccuracy", "Distiller", "PartScore", "Transition"]


class Transition(NamedTuple):
    """One logged step: the state before, what was done and said, the true change.

    Attributes:
        env: the env's name in the data.
        episode: the episode id.
        step: the step number (0: the reset, with no action and an empty ``before``).
        before: the true state before the step.
        action: the command sent; None at the reset.
        observation: what the env said after it.
        action_delta: the true change caused by the command.
        event_delta: the true change caused by the env itself (timers, mechanisms).
        after: the true state after the step.
        reward: the env's reward for the step (0 at the reset).
    """

    env: str
    episode: str
    step: int
    before: WorldState
    action: str | None
    observation: str
    action_delta: Delta
    event_delta: Delta
    after: WorldState
    reward: float = 0.0


class Distiller(Protocol):
    """What every distiller offers: ``fit(transitions) -> RuleSet``."""

    def fit(self, transitions: Sequence[Transition]) -> RuleSet:
        """Learn rules from ``transitions``."""
        ...


class DeltaAccuracy(NamedTuple):
    """Predicted vs true deltas over transitions (ByteSized32's state-difference score).

    Attributes:
        transitions: transitions scored (those with a command).
        exact: share whose whole predicted delta (both parts) equals the true one.
        action: the action-driven part.
        event: the event-driven part.
    """

    transitions: int
    exact: float
    action: PartScore
    event: PartScore

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (NaN as None)."""

        def clean(v: Any) -> Any:
            return None if isinstance(v, float) and math.isnan(v) else v

        return {
            "transitions": self.transitions,
            "exact": clean(self.exact),
            "action": {k: clean(v) for k, v in self.action._asdict().items()},
            "event": {k: clean(v) for k, v in self.event._asdict().items()},
        }
