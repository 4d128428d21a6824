"""Contracts of the knowledge package that other layers use: a rule model, a curiosity flag.

A :class:`Predictor` is anything that predicts the change of one step from the state
before it: the distiller's :class:`~wmkit.knowledge.rules.RuleSet`, or a hand-written
rule set (the Vault family's naive rules, ``wmkit.envs.vault.naive_rules``). The search's
``rules`` simulator and the rules tracker step with one. A :class:`Curiosity` is a raised
curiosity flag (seed 001): the detector, the recorder and the self-correcting policy
raise them; :mod:`wmkit.knowledge.scenes` formats and parses their text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from wmkit.world.types import Delta, WorldState

__all__ = ["Curiosity", "Predictor"]


class Predictor(Protocol):
    """Predicts the change of one step from the state before it (a ``RuleSet``).

    A predictor may also offer ``actions(state)`` (the commands worth trying),
    ``reward(before, action, after, token)`` (what the step earns; a ``RuleSet``'s
    reward model) and ``terminal(state)``; the ``rules`` simulator uses them when they
    are there.
    """

    def predict(
        self, state: WorldState, action: str | None, observation: str | None = None
    ) -> Delta:
        """Return the predicted delta relative to ``state``."""


@dataclass(frozen=True)
class Curiosity:
    """A raised curiosity flag and why.

    Attributes:
        reason: one line of plain text, not empty.
    """

    reason: str

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError("a curiosity flag needs a non-empty reason")
        if "\n" in self.reason or "\r" in self.reason:
            raise ValueError(f"a curiosity reason is one line, got {self.reason!r}")
        object.__setattr__(self, "reason", self.reason.strip())
