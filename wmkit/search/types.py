"""Contracts of the search package: records, Protocols and callable aliases.

:func:`~wmkit.search.search.search` is one function over these pieces (mctx's shape):
a :class:`Simulator` steps opaque state tokens, a :data:`ProposeFn` names the actions
worth trying at a state with their priors, a :data:`ValueFn` estimates a state's future
return, and a :data:`SelectFn` picks the action to follow at an expanded node. The
search never knows whether the simulator is the real engine's snapshots, a diagnostic
family's pure core, learned rules or an LLM.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np

if TYPE_CHECKING:
    from wmkit.search.tree import Tree
    from wmkit.world.types import Delta, WorldState

__all__ = [
    "TRACKED_FACTS",
    "Budget",
    "EpisodeSimulator",
    "Proposal",
    "ProposeFn",
    "Pruning",
    "SearchOutput",
    "SelectFn",
    "Simulator",
    "Transition",
    "ValueFn",
]


TRACKED_FACTS = "tracked_facts"
"""The ``info`` key under which a simulator may give the facts the agent tracks (or
predicts) in a state, for a value function to read: the ``rules`` simulator puts its
predicted facts there. Agent-visible: they are the agent's own belief, never ``wm.*``."""


class Transition(NamedTuple):
    """What a simulator says one step led to (or, for a root, where the search starts).

    Attributes:
        token: the state to continue from, opaque to the search (an env snapshot, a
            pure state value, ...). Only the simulator that made it reads it.
        observation: the text the step produced.
        reward: the reward of the step into this state (0 for a root).
        terminal: no step may follow (won, lost or out of steps).
        info: the agent-visible info of the state (``admissible_actions``, ``score``,
            ...); never ground truth (``wm.*``).
        key: the transposition key (a state hash): states with equal keys are the same
            state and share statistics in the tree; None means "never merge".
        delta: the simulator's predicted change of the world for this step (a
            :class:`~wmkit.world.types.Delta` for the built-in simulators), or None when
            it predicts none; the self-correcting policy compares it with what it sees.
    """

    token: Any
    observation: str
    reward: float
    terminal: bool
    info: Mapping[str, Any]
    key: Hashable | None = None
    delta: Any = None


class Proposal(NamedTuple):
    """The actions worth trying at a state, in a fixed order, with their priors.

    Attributes:
        actions: distinct commands; their order is the tie-break order of selection.
        priors: one non-negative weight per action (normalised by the search), or
            None for uniform priors.
    """

    actions: tuple[str, ...]
    priors: tuple[float, ...] | None = None


class Budget(NamedTuple):
    """How much one search may do.

    Attributes:
        simulations: simulations to run, >= 1; each descends the tree once and steps
            the simulator at most once.
        max_depth: depth below the root past which no node is expanded (None: no limit).
        max_nodes: cap on the nodes the tree holds (None: no cap); when full, the
            least-visited, least valuable, oldest subtrees are evicted first.
    """

    simulations: int
    max_depth: int | None = None
    max_nodes: int | None = None


class Pruning(NamedTuple):
    """When to cut a child off (seed 004: clearly worse than its siblings).

    A child with at least ``min_visits`` visits whose Q value is more than ``margin``
    below its best sibling's (itself with at least ``min_visits`` visits) is pruned:
    its subtree is freed and its action is never expanded again in this tree.

    Attributes:
        margin: Q gap to the best sibling, in reward units, > 0.
        min_visits: visits both need before the comparison counts, >= 1.
        every: prune the whole tree every this many simulations, >= 1.
    """

    margin: float
    min_visits: int = 10
    every: int = 100


class SearchOutput(NamedTuple):
    """The result of one :func:`~wmkit.search.search.search`.

    Attributes:
        action: the root action to take: the most visited, ties to the higher Q, then
            to proposal order; None when the root is terminal or has no actions.
        visits: visit count per root action that was expanded, in proposal order.
        qvalues: Q value per expanded root action (reward + discount * value).
        root_value: mean return of the simulations from the root.
        simulations: simulations run (the budget's, unless the root was terminal).
        tree: the search tree, for reuse (``reroot``), inspection and correction.
    """

    action: str | None
    visits: dict[str, int]
    qvalues: dict[str, float]
    root_value: float
    simulations: int
    tree: Tree


class Simulator(Protocol):
    """Steps opaque state tokens; must be deterministic for a given token and action."""

    def step(self, token: Any, action: str) -> Transition:
        """Return what ``action`` leads to from the state ``token`` stands for."""


class EpisodeSimulator(Simulator, Protocol):
    """A simulator an acting policy searches with, step after step of an episode.

    :func:`~wmkit.search.search.search` needs only :meth:`step`; a policy also makes the
    root of each search from the real state, keeps what the simulator moves (the live
    env) as it was around a search, forgets an episode, and tells the simulator what a
    step really did. Both built-in simulators are one:
    :class:`~wmkit.search.simulators.EnvSnapshotSimulator` (the env is the model: it
    reads no tracked state and learns nothing) and
    :class:`~wmkit.search.rules_sim.RulesSimulator` (a rule model over tracked facts
    that learns exceptions).
    """

    def root(
        self, observation: str, info: Mapping[str, Any], tracked: WorldState, *, step: int = 0
    ) -> Transition:
        """The transition record of the real state now (step ``step``), to search from."""

    def preserve(self) -> AbstractContextManager[Any]:
        """A context that leaves the real world as it found it, however the search ends."""

    def reset(self) -> None:
        """Forget the episode (what was learned or seen in it)."""

    def correct(self, state: WorldState, action: str, observed: Delta) -> Delta | None:
        """Learn that ``action`` in ``state`` did ``observed``; the part kept, or None."""


ProposeFn = Callable[[Transition], Proposal]
"""Returns the actions (and priors) to try at the state a transition reached."""

ValueFn = Callable[[Transition], float]
"""Returns an estimate of the future return from a non-terminal state, in reward units."""

SelectFn = Callable[["Tree", int, np.random.Generator], "str | None"]
"""Returns the action to follow at a node (see ``search.puct``), an action of the node's
proposal that is not pruned; None when there is none (a dead end)."""
