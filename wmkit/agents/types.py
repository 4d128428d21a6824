"""The agent: a tracker and a policy under one name.

The contracts it is made of (:class:`~wmkit.world.types.Tracker`,
:class:`~wmkit.world.types.Policy`, :func:`~wmkit.world.types.agent_view`) live at the
bottom layer, in :mod:`wmkit.world.types`, because search, knowledge and the envs use
them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wmkit.llm.types import Usage
from wmkit.world.types import Policy, Tracker, agent_view

__all__ = ["Agent"]


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

    def usage(self) -> Usage | None:
        """What its language models have cost so far, summed; None when it has none.

        A model is the ``client`` (anything with a :class:`~wmkit.llm.types.Usage`
        ``usage``) of the tracker, the policy, or the policy's ``value_fn`` or
        ``tracker``; one client shared by several parts is counted once.
        """
        clients = {}
        for part in (self.tracker, self.policy):
            for holder in (part, getattr(part, "value_fn", None), getattr(part, "tracker", None)):
                client = getattr(holder, "client", None)
                if isinstance(getattr(client, "usage", None), Usage):
                    clients[id(client)] = client
        if not clients:
            return None
        return Usage.total(client.usage for client in clients.values())
