"""Tree-structured memory and the search it serves (seed 004).

:func:`search` is one function over small Protocols (:mod:`wmkit.search.types`); the
tree it grows (:class:`Tree`) is a bounded arena of node records with transpositions,
pruning, penalties and re-rooting for the self-correcting policy built on top.
Simulators: :class:`EnvSnapshotSimulator` (the live env, exact) and
:class:`RulesSimulator` (a rule world model over tracked facts, that can be wrong);
value functions in :mod:`wmkit.search.values`. The policies that act with them
(``MCTSPolicy``, ``SelfCorrectingPolicy``, ``LookaheadGreedyPolicy``) are agents' parts:
:mod:`wmkit.agents.mcts`, :mod:`wmkit.agents.self_correcting`,
:mod:`wmkit.agents.policies`.

The function :func:`search` shadows the submodule of the same name as an attribute of
this package: import the module's other names from here (``wmkit.search.ucb1``, as
the Hydra configs do) or with ``from wmkit.search.search import ...``.
"""

from wmkit.search.rules_sim import RulesSimulator, RulesToken
from wmkit.search.search import PUCT, UCB1, as_budget, puct, search, ucb1
from wmkit.search.simulators import (
    EnvSnapshotSimulator,
    TokenKey,
    admissible_proposal,
    read_delta,
    truth_delta,
    truth_hash,
)
from wmkit.search.tree import FREE, PRUNED, NodeView, Tree
from wmkit.search.types import (
    Budget,
    EpisodeSimulator,
    Proposal,
    ProposeFn,
    Pruning,
    SearchOutput,
    SelectFn,
    Simulator,
    Transition,
    ValueFn,
)
from wmkit.search.values import HeuristicValue, HybridValue, LLMValue, ValueNetValue

__all__ = [
    "FREE",
    "PRUNED",
    "PUCT",
    "UCB1",
    "Budget",
    "EnvSnapshotSimulator",
    "EpisodeSimulator",
    "HeuristicValue",
    "HybridValue",
    "LLMValue",
    "NodeView",
    "Proposal",
    "ProposeFn",
    "Pruning",
    "RulesSimulator",
    "RulesToken",
    "SearchOutput",
    "SelectFn",
    "Simulator",
    "TokenKey",
    "Transition",
    "Tree",
    "ValueFn",
    "ValueNetValue",
    "admissible_proposal",
    "as_budget",
    "puct",
    "read_delta",
    "search",
    "truth_delta",
    "truth_hash",
    "ucb1",
]
