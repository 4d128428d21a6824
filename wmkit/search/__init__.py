"""Tree-structured memory and self-correcting search (seed 004).

:func:`search` is one function over small Protocols (:mod:`wmkit.search.types`); the
tree it grows (:class:`Tree`) is a bounded arena of node records with transpositions,
pruning, penalties and re-rooting for the self-correcting policy built on top.
Simulators: :class:`EnvSnapshotSimulator` (the live env, exact) and
:class:`RulesSimulator` (a rule world model over tracked facts, that can be wrong);
policies: :class:`MCTSPolicy`, :class:`SelfCorrectingPolicy` and the one-step
:class:`LookaheadGreedyPolicy` (the greedy baseline for games).

The function :func:`search` shadows the submodule of the same name as an attribute of
this package: import the module's other names from here (``wmkit.search.ucb1``, as
the Hydra configs do) or with ``from wmkit.search.search import ...``.
"""

from wmkit.search.policy import LookaheadGreedyPolicy, MCTSPolicy
from wmkit.search.rules_sim import NaiveVaultRules, RulesSimulator, RulesToken
from wmkit.search.search import PUCT, UCB1, as_budget, puct, search, ucb1
from wmkit.search.self_correcting import SelfCorrectingPolicy, TraceRecord
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
    "HeuristicValue",
    "HybridValue",
    "LLMValue",
    "LookaheadGreedyPolicy",
    "MCTSPolicy",
    "NaiveVaultRules",
    "NodeView",
    "Proposal",
    "ProposeFn",
    "Pruning",
    "RulesSimulator",
    "RulesToken",
    "SearchOutput",
    "SelectFn",
    "SelfCorrectingPolicy",
    "Simulator",
    "TokenKey",
    "TraceRecord",
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
