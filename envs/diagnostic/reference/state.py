"""The reference family's parameters and its immutable state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from wmkit.envs.diagnostic.params import FamilyParams
from wmkit.envs.diagnostic.truth import Change

__all__ = ["Box", "ReferenceParams", "ReferenceState"]


@dataclass(frozen=True)
class ReferenceParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`): ``load`` is the boxes at the start.

    More boxes arrive over the episode, up to one per colour (12).
    """

    MAX_LOAD = 8


class Box(NamedTuple):
    """One box: where it is (a shelf id or ``courier``), its colour and its label."""

    on: str
    colour: str
    label: str = "plain"


class ReferenceState(NamedTuple):
    """Everything about an episode after a step; the snapshot token.

    Attributes:
        boxes: box ``i`` is ``box:<i+1>``, in arrival order.
        stated: the step each box's place was last stated (the probes' anchors).
        pickup: the one timer, ``(box index, due step)``, or None.
        rule: the one conditional, ``(box index, shelf, fired)``.
        requests: open requests, ``(box index, shelf)``, oldest first.
        action_changes: what the agent's command changed; ``event_changes``: the world.
    """

    params: ReferenceParams
    seed: int
    step: int
    boxes: tuple[Box, ...]
    stated: tuple[int, ...]
    pickup: tuple[int, int] | None
    rule: tuple[int, str, bool]
    requests: tuple[tuple[int, str], ...]
    text: str
    mentioned: tuple[str, ...]
    action_changes: tuple[Change, ...]
    event_changes: tuple[Change, ...]
    admissible: tuple[str, ...]
    reward: int
    score: int
    max_score: int
