"""Contracts of the agents package: trackers, policies, and the agent made of them.

A tracker turns text into a :class:`~wmkit.world.types.WorldState`; a policy picks
the next command. Both see an :func:`agent_view` of ``info`` (``wm.*`` removed) unless
the agent is an oracle, which the leaderboard marks as an upper bound.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

import numpy as np

from wmkit.world.types import Claim, WorldState

__all__ = ["GROUND_TRUTH_PREFIX", "Agent", "Policy", "Reader", "Tracker", "agent_view"]

GROUND_TRUTH_PREFIX = "wm."

Reader = Callable[[str], list[Claim]]
"""Reads one observation into claims, from the text alone."""


def agent_view(info: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a read-only copy of ``info`` without the ground-truth ``wm.*`` keys."""
    return MappingProxyType(
        {k: v for k, v in info.items() if not k.startswith(GROUND_TRUTH_PREFIX)}
    )


class Tracker(Protocol):
    """Keeps a world state from observations: text -> claims -> facts."""

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:
        """Start a new episode from its first observation."""

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:
        """Take in the command just sent and the observation it produced."""

    @property
    def state(self) -> WorldState:
        """The tracked state now."""


class Policy(Protocol):
    """Picks the next command from the observation, the visible info and tracked state."""

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode; all randomness comes from ``rng``."""

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Return the next command."""


@dataclass
class Agent:
    """A tracker and a policy under one name.

    Attributes:
        name: the row label in results and leaderboards.
        tracker: the world-state tracker.
        policy: the command policy.
        oracle: True when the agent reads ground truth; it then gets the full ``info``
            and its rows are marked as upper bounds.
    """

    name: str
    tracker: Tracker
    policy: Policy
    oracle: bool = False

    def view(self, info: Mapping[str, Any]) -> Mapping[str, Any]:
        """Return what this agent may see of ``info``."""
        return info if self.oracle else agent_view(info)
