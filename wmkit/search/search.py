"""One search function over small Protocols, and the PUCT and UCB1 selection rules.

A simulation descends from the root by ``select_fn`` through nodes that exist, until it
picks an action with no child yet: the simulator steps it (the only step of the
simulation), the new state is proposed for and valued, and the return is backed up
along the path. An action that leaves the state as it was (the same transposition key,
no reward: a no-op, such as a command the game refuses) is pruned at that node as soon
as it is stepped, and the simulation picks again there: no-ops cost one step each,
never a simulation (the last action left at a node is kept, so a state whose every
action is a no-op still has one to play). A simulation also ends at a terminal node
(value 0), at the depth limit, at a dead end, or on coming back to a state already on
its path (a loop: that state is searched where it first appeared); those lend their
mean value. A state whose transposition key the tree already holds shares that
state's value statistics, proposal and estimate, so neither the proposer nor the value
function runs again for it; visit counts stay per node.

Q values are normalised to [0, 1] by the smallest and largest Q sample backed up so far
(MuZero's min-max rule) before selection, so one exploration constant serves games
scored in units and in hundreds.
"""

from __future__ import annotations

import math
import random
from typing import Literal

import numpy as np

from wmkit.search.tree import PRUNED, Tree
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

__all__ = ["PUCT", "UCB1", "as_budget", "puct", "search", "ucb1"]

TieBreak = Literal["random", "first"]
_NO_ACTIONS = Proposal(())


def search(
    root: Transition | Tree,
    *,
    simulator: Simulator,
    propose_fn: ProposeFn,
    value_fn: ValueFn,
    select_fn: SelectFn,
    budget: Budget | int,
    rng: np.random.Generator,
    discount: float = 1.0,
    pruning: Pruning | None = None,
) -> SearchOutput:
    """Run ``budget.simulations`` simulations from ``root`` and pick the root action.

    Args:
        root: the state to search from (a new tree is grown), or a tree to keep growing
            (for instance one re-rooted on the action just taken).
        simulator: steps state tokens.
        propose_fn: the actions (and priors) to try at a newly reached state.
        value_fn: the estimated future return of a newly reached non-terminal state.
        select_fn: picks the action to follow at a node (:func:`puct`, :func:`ucb1`).
        budget: simulations, depth limit and node cap; an int means simulations only.
        rng: the only source of randomness (tie-breaking in the selection rules).
        discount: per-step discount, in [0, 1]; fixed for a tree's lifetime.
        pruning: prune clearly worse children every ``pruning.every`` simulations.

    Returns:
        The chosen action, root visit counts and Q values, the root value and the tree.

    Raises:
        TypeError: ``root`` is neither a Transition nor a Tree.
        ValueError: a bad budget or pruning, or a discount other than the tree's.
    """
    budget = as_budget(budget)
    if pruning is not None:
        _check_pruning(pruning)
    if isinstance(root, Tree):
        tree = root
        if tree.discount != discount:
            raise ValueError(f"the tree was grown with discount {tree.discount}, not {discount}")
        if budget.max_nodes is not None:
            tree.max_nodes = budget.max_nodes
    elif isinstance(root, Transition):
        if root.terminal:
            proposal, estimate = _NO_ACTIONS, 0.0
        else:
            proposal, estimate = propose_fn(root), value_fn(root)
        tree = Tree(root, proposal, estimate, discount=discount, max_nodes=budget.max_nodes)
    else:
        raise TypeError(f"root must be a Transition or a Tree, got {type(root).__name__}")

    top = tree.root
    ran = 0
    if not tree.terminal[top]:
        # Columns are bound once: the loop below is the hot path.
        terminal, depth, children, token = tree.terminal, tree.depth, tree.children, tree.token
        slot, slot_key = tree.slot, tree.slot_key
        limit = math.inf if budget.max_depth is None else depth[top] + budget.max_depth
        step, known, add, backup = simulator.step, tree.known, tree.add, tree.backup
        for ran in range(1, budget.simulations + 1):
            node, path, states = top, [top], [slot[top]]
            while True:
                if terminal[node]:
                    value = 0.0
                    break
                if depth[node] >= limit:
                    value = tree.value(node)
                    break
                action = select_fn(tree, node, rng)
                if action is None:  # a dead end: no action, or all pruned
                    value = tree.value(node)
                    break
                kids = children[node]
                child = kids.get(action) if kids else None
                if child is None:
                    t = step(token[node], action)
                    if (
                        t.key is not None
                        and t.key == slot_key[slot[node]]
                        and not t.reward
                        and _live(tree, node) > 1
                    ):
                        # A no-op (the state is unchanged): nothing to search below it, so
                        # the action is pruned here and this simulation picks again.
                        if kids is None:
                            children[node] = {action: PRUNED}
                        else:
                            kids[action] = PRUNED
                        continue
                    if known(t.key):
                        child = add(node, action, t)
                        value = tree.value(child)
                    elif t.terminal:
                        child = add(node, action, t, _NO_ACTIONS, 0.0)
                        value = 0.0
                    else:
                        value = value_fn(t)
                        child = add(node, action, t, propose_fn(t), value)
                    path.append(child)
                    break
                if child == PRUNED:
                    raise ValueError(f"select_fn chose the pruned action {action!r}")
                node = child
                path.append(node)
                if slot[node] in states:
                    # Back at a state on this path (a no-op, a loop): it is searched from
                    # where it first appeared; here it only lends its value.
                    value = tree.value(node)
                    break
                states.append(slot[node])
            backup(path, value)
            if pruning is not None and ran % pruning.every == 0:
                tree.prune(pruning.margin, pruning.min_visits)

    kids = tree.live_children(top)
    order = [a for a in tree.slot_actions[tree.slot[top]] if a in kids]
    return SearchOutput(
        action=tree.best_action(top),
        visits={a: tree.visits(kids[a]) for a in order},
        qvalues={a: tree.q(kids[a]) for a in order},
        root_value=tree.value(top),
        simulations=ran,
        tree=tree,
    )


def _live(tree: Tree, node: int) -> int:
    """How many of the actions proposed at ``node`` are not pruned."""
    kids = tree.children[node]
    pruned = list(kids.values()).count(PRUNED) if kids else 0
    return len(tree.slot_actions[tree.slot[node]]) - pruned


def as_budget(budget: Budget | int) -> Budget:
    """Return ``budget`` as a checked :class:`Budget` (an int means simulations only).

    Raises:
        TypeError: not a Budget nor an int.
        ValueError: a field out of range.
    """
    if isinstance(budget, bool):
        raise TypeError("budget must be a Budget or an int, got a bool")
    if isinstance(budget, (int, np.integer)):
        budget = Budget(int(budget))
    if not isinstance(budget, Budget):
        raise TypeError(f"budget must be a Budget or an int, got {type(budget).__name__}")
    if budget.simulations < 1:
        raise ValueError(f"budget.simulations must be >= 1, got {budget.simulations}")
    if budget.max_depth is not None and budget.max_depth < 1:
        raise ValueError(f"budget.max_depth must be >= 1 or None, got {budget.max_depth}")
    if budget.max_nodes is not None and budget.max_nodes < 2:
        raise ValueError(f"budget.max_nodes must be >= 2 or None, got {budget.max_nodes}")
    return budget


def _check_pruning(pruning: Pruning) -> None:
    if not isinstance(pruning, Pruning):
        raise TypeError(f"pruning must be a Pruning, got {type(pruning).__name__}")
    if not pruning.margin > 0:
        raise ValueError(f"pruning.margin must be > 0, got {pruning.margin}")
    if pruning.min_visits < 1 or pruning.every < 1:
        raise ValueError(f"pruning.min_visits and .every must be >= 1, got {pruning}")


class _Rule:
    """Shared parts of the selection rules: the constant and the tie-break."""

    __slots__ = ("_source", "_stream", "c", "first")

    def __init__(self, c: float, tie_break: TieBreak) -> None:
        if not (math.isfinite(c) and c >= 0):
            raise ValueError(f"exploration constant must be finite and >= 0, got {c}")
        if tie_break not in ("random", "first"):
            raise ValueError(f"tie_break must be 'random' or 'first', got {tie_break!r}")
        self.c = float(c)
        self.first = tie_break == "first"
        self._source: np.random.Generator | None = None
        self._stream = random.Random(0)

    def _pick(self, ties: list[str], actions: tuple[str, ...], rng: np.random.Generator) -> str:
        """One of ``ties``: the earliest in ``actions``, or uniformly drawn."""
        if len(ties) == 1:
            return ties[0]
        if self.first:
            return min(ties, key=actions.index)
        if rng is not self._source:
            # A numpy draw costs microseconds; a stream seeded once from ``rng`` does not.
            self._source = rng
            self._stream = random.Random(int(rng.integers(2**63)))
        return ties[self._stream.randrange(len(ties))]

    def __repr__(self) -> str:
        tie = "first" if self.first else "random"
        return f"{type(self).__name__}(c={self.c}, tie_break={tie!r})"


class UCB1(_Rule):
    """UCB1: every proposed action once, then ``q + c * sqrt(ln N / n)``.

    ``q`` is the child's min-max normalised Q, ``N`` the node's visits and ``n`` the
    child's. Priors are not used. Actions not yet expanded go first (ties among them
    broken as below).

    Args:
        c: exploration constant, >= 0 (sqrt(2) is the classic one for [0, 1] returns).
        tie_break: ``"random"`` (uniform among equal scores, from the search's rng) or
            ``"first"`` (the earliest in proposal order).
    """

    __slots__ = ()

    def __init__(self, c: float = math.sqrt(2), tie_break: TieBreak = "random") -> None:
        super().__init__(c, tie_break)

    def __call__(self, tree: Tree, node: int, rng: np.random.Generator) -> str | None:
        """Return the action to follow at ``node``; None at a dead end."""
        actions = tree.slot_actions[tree.slot[node]]
        kids = tree.children[node]
        if kids is None or len(kids) < len(actions):
            fresh = list(actions) if kids is None else [a for a in actions if a not in kids]
            return self._pick(fresh, actions, rng) if fresh else None
        count, visits, sums, slots = tree.count, tree.slot_visits, tree.slot_value_sum, tree.slot
        reward, penalty, discount = tree.reward, tree.penalty, tree.discount
        lo, hi = tree.qmin, tree.qmax
        shift, factor = (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)
        c = self.c * math.sqrt(math.log(max(count[node], 1)))
        sqrt = math.sqrt
        # One comprehension over the children in expansion order (no lookups): the
        # inner loop of the whole search. Ties are rare and put back in proposal order.
        names, ids = list(kids), list(kids.values())
        if PRUNED in ids:
            names = [a for a, ch in zip(names, ids, strict=True) if ch != PRUNED]
            ids = [ch for ch in ids if ch != PRUNED]
            if not ids:
                return None
        scores = [
            (reward[ch] + discount * sums[s := slots[ch]] / visits[s] - penalty[ch] - shift)
            * factor
            + c / sqrt(count[ch])
            for ch in ids
        ]
        best = max(scores)
        if scores.count(best) == 1:
            return names[scores.index(best)]
        return self._pick(
            [a for a, x in zip(names, scores, strict=True) if x == best], actions, rng
        )


class PUCT(_Rule):
    """PUCT (AlphaZero): ``q + c * prior * sqrt(N) / (1 + n)`` over every proposed action.

    ``q`` is the min-max normalised Q of a visited child; an action not yet expanded
    counts the node's own mean value as its Q (first-play value = the parent's).

    Args:
        c: exploration constant, >= 0.
        tie_break: ``"random"`` or ``"first"``, as for :class:`UCB1`.
    """

    __slots__ = ()

    def __init__(self, c: float = 1.25, tie_break: TieBreak = "random") -> None:
        super().__init__(c, tie_break)

    def __call__(self, tree: Tree, node: int, rng: np.random.Generator) -> str | None:
        """Return the action to follow at ``node``; None at a dead end."""
        slot = tree.slot[node]
        actions, priors = tree.slot_actions[slot], tree.slot_priors[slot]
        kids = tree.children[node] or {}
        count, visits, sums, slots = tree.count, tree.slot_visits, tree.slot_value_sum, tree.slot
        reward, penalty, discount = tree.reward, tree.penalty, tree.discount
        lo, hi = tree.qmin, tree.qmax
        shift, factor = (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)
        unvisited_q = (sums[slot] / visits[slot] - shift) * factor
        c_sqrt = self.c * math.sqrt(count[node])
        get = kids.get
        inf = -math.inf
        scores = [
            unvisited_q + c_sqrt * prior
            if (ch := get(action)) is None
            else inf
            if ch == PRUNED
            else (reward[ch] + discount * sums[s := slots[ch]] / visits[s] - penalty[ch] - shift)
            * factor
            + c_sqrt * prior / (1 + count[ch])
            for action, prior in zip(actions, priors, strict=True)
        ]
        best = max(scores, default=inf)
        if best == inf:
            return None
        if scores.count(best) == 1:
            return actions[scores.index(best)]
        return self._pick(
            [a for a, x in zip(actions, scores, strict=True) if x == best], actions, rng
        )


def puct(c: float = 1.25, tie_break: TieBreak = "random") -> PUCT:
    """Return the PUCT selection rule (see :class:`PUCT`)."""
    return PUCT(c, tie_break)


def ucb1(c: float = math.sqrt(2), tie_break: TieBreak = "random") -> UCB1:
    """Return the UCB1 selection rule (see :class:`UCB1`)."""
    return UCB1(c, tie_break)
