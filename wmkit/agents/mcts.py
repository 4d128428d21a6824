"""``MCTSPolicy``: plain Monte Carlo tree search over any episode simulator (a Policy).

The one plain MCTS of wmkit: each step it searches from the real state with
:func:`~wmkit.search.search.search` and plays the root's most visited action. The
simulator is a part, not a mode: the live env restored exactly
(:class:`~wmkit.search.simulators.EnvSnapshotSimulator`) or a rule model over the
tracked facts that can be wrong (:class:`~wmkit.search.rules_sim.RulesSimulator`, the
baseline :class:`~wmkit.agents.self_correcting.SelfCorrectingPolicy` is measured
against). The self-correcting policy searches through this one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wmkit.search.search import as_budget, search, ucb1
from wmkit.search.simulators import admissible_proposal
from wmkit.search.tree import PRUNED, Tree
from wmkit.search.types import (
    Budget,
    EpisodeSimulator,
    ProposeFn,
    Pruning,
    SearchOutput,
    SelectFn,
    Simulator,
    Transition,
    ValueFn,
)
from wmkit.search.values import HeuristicValue, reset_value, visit_value
from wmkit.world.types import Delta, WorldState

__all__ = ["MCTSPolicy", "stand_still"]


def stand_still(
    tree: Tree, action: str, simulator: Simulator
) -> tuple[str, int | None, Delta | None] | None:
    """Where ``action`` is predicted worse than staying put, the root action that stays.

    Staying put is a choice the search does not rank: an action that leaves the state
    as it is with no reward is pruned at the root (a no-op: nothing to search below
    it), and one that keeps the state with a reward of its own (a wait the world's
    events once penalised) shares the root's statistics, which every action explored
    from there drags about. So the comparison is one step deep, on the value
    function's estimates: ``action``'s reward plus the discounted estimate of its state
    (less any penalty) against each stay's reward plus the discounted estimate of the
    root. The best stay is returned when it is higher: ``(action, its node or None for
    a pruned no-op, its predicted delta)``; else None. A pruned action is stepped again
    to check it is a no-op (the tree does not say why an action was pruned), until one
    is: every pruned no-op is worth the same, so the first stands for all (a game's
    candidate commands prune by the thousand). The caller steps inside the simulator's
    ``preserve``.
    """
    root = tree.root
    kids = tree.children[root] or {}
    node = kids.get(action)
    slot = tree.slot[root]
    if node is None or node == PRUNED or tree.slot[node] == slot:
        return None
    discount, estimate = tree.discount, tree.slot_estimate
    stay_value = discount * estimate[slot]
    bar = tree.reward[node] + discount * estimate[tree.slot[node]] - tree.penalty[node]
    best: tuple[str, int | None, Delta | None] | None = None
    stayed = False  # a pruned no-op was found: the others are worth no more
    for a in tree.slot_actions[slot]:
        c = kids.get(a)
        if c is None:
            continue
        if c == PRUNED:
            if stayed:
                continue
            t = simulator.step(tree.token[root], a)
            if t.key is None or t.key != tree.slot_key[slot] or t.reward:
                continue
            value, found, stayed = stay_value, (a, None, t.delta), True
        elif tree.slot[c] == slot:
            value, found = tree.reward[c] + stay_value - tree.penalty[c], (a, c, tree.delta[c])
        else:
            continue
        if value > bar:
            bar, best = value, found
    return best


class MCTSPolicy:
    """Plain Monte Carlo tree search: search from the real state, play the best action.

    Each :meth:`act` makes the root from the real state (:meth:`EpisodeSimulator.root`),
    searches inside :meth:`EpisodeSimulator.preserve` (a live env is restored, so the
    real episode goes on exactly as if no search had run) and returns the root's most
    visited action, or the action that stays put when that one is predicted worse than
    staying (:func:`stand_still`). With ``reuse_tree`` the subtree under the
    action taken is kept for the next step when the observation and the state that step
    produced are the ones the tree predicted (a rule model's prediction came true and
    the text did not change).

    Args:
        simulator: what the search steps (``configs/simulator/``); its transposition key
            and predicted deltas are its own (an env snapshot simulator reads no
            ``wm.*`` unless it is built with an oracle ``key_fn``).
        budget: simulations per step, depth limit and node cap (an int: simulations).
        select_fn: the selection rule (default UCB1, ties broken by the policy's rng).
        propose_fn: actions to try (default: the value function's ``propose`` when it
            has one, a policy/value network's prior over the state's commands, from the
            forward pass that values the state; else the state's
            ``admissible_actions``).
        value_fn: leaf values (default: a :class:`HeuristicValue`, reset per episode);
            it is told each state the policy acts from (:func:`visit_value`).
        discount: per-step discount in [0, 1].
        pruning: prune clearly worse children while searching (None: never).
        reuse_tree: keep the taken action's subtree for the next search.

    Raises:
        TypeError: a bad budget type.
        ValueError: a budget field out of range.
    """

    def __init__(
        self,
        simulator: EpisodeSimulator,
        *,
        budget: Budget | int = 64,
        select_fn: SelectFn | None = None,
        propose_fn: ProposeFn | None = None,
        value_fn: ValueFn | None = None,
        discount: float = 0.95,
        pruning: Pruning | None = None,
        reuse_tree: bool = True,
    ) -> None:
        self.simulator = simulator
        self.budget = as_budget(budget)
        self.select_fn = select_fn or ucb1()
        self.value_fn = value_fn or HeuristicValue()
        self.propose_fn = propose_fn or getattr(self.value_fn, "propose", admissible_proposal)
        self.discount = discount
        self.pruning = pruning
        self.reuse_tree = reuse_tree
        self.last: SearchOutput | None = None
        """The last search's output (its tree included), for logging and inspection."""
        self.rng = np.random.default_rng(0)
        """The episode's randomness (set by :meth:`reset`); searches draw from it."""
        self.step = 0
        """Actions taken this episode."""
        self._tree: Tree | None = None
        self._next: int | None = None

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode: forget the tree and the simulator's episode; use ``rng``."""
        self.rng = rng
        self.step = 0
        self._tree = self._next = self.last = None
        self.simulator.reset()
        reset_value(self.value_fn)

    def root(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> Transition:
        """The real state now as a search root; the value function is told it was visited."""
        root = self.simulator.root(observation, info, tracked, step=self.step)
        visit_value(self.value_fn, root)
        return root

    def search(self, root: Transition | Tree, simulator: Simulator | None = None) -> SearchOutput:
        """One search from ``root`` with this policy's pieces; the real world is preserved.

        Args:
            root: the state to search from, or a tree to keep growing.
            simulator: steps instead of :attr:`simulator` (a wrapper around it, such as
                the self-correcting policy's loop penalty); None: the policy's own.
        """
        with self.simulator.preserve():
            out = search(
                root,
                simulator=self.simulator if simulator is None else simulator,
                propose_fn=self.propose_fn,
                value_fn=self.value_fn,
                select_fn=self.select_fn,
                budget=self.budget,
                rng=self.rng,
                discount=self.discount,
                pruning=self.pruning,
            )
        self.last = out
        return out

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Search from the real state and return the best root action.

        Raises:
            RuntimeError: the search found no action (the state proposes none).
        """
        root: Transition | Tree = self.root(observation, info, tracked)
        kept, node = self._tree, self._next
        self._tree = self._next = None
        if (
            kept is not None
            and node is not None
            and kept.observation[node] == observation
            and kept.slot_key[kept.slot[node]] in (None, root.key)
        ):
            # The tree foresaw this very observation (and state, where the simulator
            # keys them): keep what it learned below it.
            kept.reroot(node)
            kept.replace_root_record(root)
            root = kept
        out = self.search(root)
        if out.action is None:
            raise RuntimeError(
                "MCTSPolicy found no action to take: the proposer offered none here "
                f"(admissible_actions={list(info.get('admissible_actions', []))[:5]})"
            )
        action = out.action
        with self.simulator.preserve():
            stay = stand_still(out.tree, action, self.simulator)
        if stay is not None:  # predicted worse than staying put: stay
            action = stay[0]
        if self.reuse_tree and stay is None:
            self._tree, self._next = out.tree, out.tree.child(out.tree.root, action)
        self.step += 1
        return action
