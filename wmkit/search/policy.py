"""Policies over the live env's snapshots: ``MCTSPolicy`` and ``LookaheadGreedyPolicy``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wmkit.search.search import as_budget, search, ucb1
from wmkit.search.simulators import EnvSnapshotSimulator, KeyFn, admissible_proposal
from wmkit.search.tree import Tree
from wmkit.search.types import Budget, ProposeFn, Pruning, SearchOutput, SelectFn, ValueFn
from wmkit.search.values import HeuristicValue, reset_value, visit_value
from wmkit.world.types import WorldState

__all__ = ["LookaheadGreedyPolicy", "MCTSPolicy"]


class MCTSPolicy:
    """Plain Monte Carlo tree search over the ``env_snapshot`` simulator (a Policy).

    Each :meth:`act` snapshots the live env, runs :func:`~wmkit.search.search.search`
    from it and restores it, so the real episode goes on exactly as if no search had
    run; it returns the root's most visited action. With ``reuse_tree`` the subtree
    under the action taken is kept for the next step when the observation that step
    produced is the one the tree predicted.

    Args:
        env: the live env the episode runs in (the suite injects it); it, or the env it
            wraps, has ``snapshot()``/``restore(token)``.
        budget: simulations per step, depth limit and node cap (an int: simulations).
        select_fn: the selection rule (default UCB1, ties broken by the policy's rng).
        propose_fn: actions to try (default: the state's ``admissible_actions``).
        value_fn: leaf values (default: a :class:`HeuristicValue`, reset per episode);
            it is told each state the policy acts from (:func:`visit_value`).
        discount: per-step discount in [0, 1].
        pruning: prune clearly worse children while searching (None: never).
        key_fn: transposition key from the env's full info, replacing the default: the
            env's own state identity (:meth:`EnvSnapshotSimulator.state_key`). A
            function that reads ``wm.*`` (:func:`~wmkit.search.simulators.truth_hash`)
            is for configurations marked ``oracle`` only.
        reuse_tree: keep the taken action's subtree for the next search.

    Raises:
        TypeError: the env cannot snapshot and restore, or a bad budget type.
        ValueError: a budget field out of range.
    """

    def __init__(
        self,
        env: Any,
        *,
        budget: Budget | int = 64,
        select_fn: SelectFn | None = None,
        propose_fn: ProposeFn | None = None,
        value_fn: ValueFn | None = None,
        discount: float = 0.95,
        pruning: Pruning | None = None,
        key_fn: KeyFn | None = None,
        reuse_tree: bool = True,
    ) -> None:
        self.simulator = EnvSnapshotSimulator(env, key_fn=key_fn)
        self.budget = as_budget(budget)
        self.select_fn = select_fn or ucb1()
        self.propose_fn = propose_fn or admissible_proposal
        self.value_fn = value_fn or HeuristicValue()
        self.discount = discount
        self.pruning = pruning
        self.reuse_tree = reuse_tree
        self.last: SearchOutput | None = None
        """The last search's output (its tree included), for logging and inspection."""
        self._rng = np.random.default_rng(0)
        self._tree: Tree | None = None
        self._next: int | None = None

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode: forget the tree; all randomness comes from ``rng``."""
        self._rng = rng
        self._tree = self._next = self.last = None
        reset_value(self.value_fn)

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Search from the env's current state and return the best root action.

        Raises:
            RuntimeError: the search found no action (the state proposes none).
        """
        sim = self.simulator
        root: Any = sim.root(observation, info)
        visit_value(self.value_fn, root)
        kept, node = self._tree, self._next
        self._tree = self._next = None
        if kept is not None and node is not None and kept.observation[node] == observation:
            # The tree foresaw this very observation: keep what it learned below it.
            kept.reroot(node)
            kept.replace_root_record(root)
            root = kept
        with sim.preserve():
            out = search(
                root,
                simulator=sim,
                propose_fn=self.propose_fn,
                value_fn=self.value_fn,
                select_fn=self.select_fn,
                budget=self.budget,
                rng=self._rng,
                discount=self.discount,
                pruning=self.pruning,
            )
        self.last = out
        if out.action is None:
            raise RuntimeError(
                "MCTSPolicy found no action to take: the proposer offered none here "
                f"(admissible_actions={list(info.get('admissible_actions', []))[:5]})"
            )
        if self.reuse_tree:
            self._tree, self._next = out.tree, out.tree.child(out.tree.root, out.action)
        return out.action


class LookaheadGreedyPolicy:
    """The greedy baseline for games: the command with the best immediate reward (a Policy).

    Each :meth:`act` tries every proposed command once from a snapshot of the live env
    (then restores it) and plays one with the highest reward; among equals it prefers
    one after which the episode goes on, then one that changes the state (its
    transposition key differs from the current one's), drawn uniformly: with no reward
    in sight it wanders instead of repeating a no-op.

    Args:
        env: the live env (the suite injects it); it, or the env it wraps, has
            ``snapshot()``/``restore(token)``.
        propose_fn: commands to try (default: the state's ``admissible_actions``).
        key_fn: transposition key from the env's full info (as for :class:`MCTSPolicy`).

    Raises:
        TypeError: the env cannot snapshot and restore.
    """

    def __init__(
        self, env: Any, *, propose_fn: ProposeFn | None = None, key_fn: KeyFn | None = None
    ) -> None:
        self.simulator = EnvSnapshotSimulator(env, key_fn=key_fn)
        self.propose_fn = propose_fn or admissible_proposal
        self._rng = np.random.default_rng(0)

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode; ties are drawn from ``rng``."""
        self._rng = rng

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Return a proposed command with the highest one-step reward.

        Raises:
            RuntimeError: nothing is proposed here.
        """
        sim = self.simulator
        root = sim.root(observation, info)
        actions = self.propose_fn(root).actions
        if not actions:
            raise RuntimeError(
                "LookaheadGreedyPolicy found no action to take: nothing is proposed here"
            )
        with sim.preserve():
            # Per command: its reward, then whether the episode goes on, then whether the
            # state changes (ties broken in that order).
            scored = []
            for action in actions:
                t = sim.step(root.token, action)
                scored.append((t.reward, not t.terminal, t.key is None or t.key != root.key))
        best = max(scored)
        ties = [a for a, s in zip(actions, scored, strict=True) if s == best]
        return ties[int(self._rng.integers(len(ties)))]
