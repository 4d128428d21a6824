"""Command policies: uniform random and a greedy one that acts on the tracked state."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wmkit.world.types import WorldState

__all__ = ["GreedyPolicy", "RandomPolicy"]


def _admissible(info: Mapping[str, Any]) -> list[str]:
    actions = info.get("admissible_actions")
    if not actions:
        raise KeyError("the env gave no admissible_actions in info; these policies need them")
    return actions


class RandomPolicy:
    """Picks a uniformly random admissible command."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        self._rng = rng

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        actions = _admissible(info)
        return actions[int(self._rng.integers(len(actions)))]


class GreedyPolicy:
    """Serves the open requests it can see in its tracked state, else waits.

    An open request is a subject whose ``requested_address`` differs from its
    ``address``; the policy sends ``reroute <id> to <address>`` when the env admits it.
    Its success therefore depends on what the tracker remembers: with the oracle
    tracker it is the scripted solver's upper bound.

    Args:
        fallback: command sent when nothing is to be done.
    """

    def __init__(self, fallback: str = "wait") -> None:
        self.fallback = fallback

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        pass

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        admissible = {a.lower(): a for a in _admissible(info)}
        for subject, relation, wanted in sorted(tracked):
            if relation != "requested_address" or tracked.value(subject, "address") == wanted:
                continue
            command = f"reroute {subject.split(':', 1)[-1]} to {wanted}"
            if command in admissible:
                return admissible[command]
        return self.fallback if self.fallback in admissible else next(iter(admissible.values()))
