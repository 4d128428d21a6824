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
import sys
from math import log, sqrt
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
        slot, slot_key, slot_actions, npruned = (
            tree.slot,
            tree.slot_key,
            tree.slot_actions,
            tree.npruned,
        )
        by_key = tree._by_key
        limit = sys.maxsize if budget.max_depth is None else depth[top] + budget.max_depth
        step, grow, backup, value_of = simulator.step, tree._grow, tree._backup, tree.value
        # A rule's bound method is called faster than the rule itself.
        select = select_fn.__call__ if isinstance(select_fn, _Rule) else select_fn
        for ran in range(1, budget.simulations + 1):
            node, path, states = top, [top], [slot[top]]
            repeat = False  # whether the last node of the path is a state met earlier on it
            while True:
                if terminal[node]:
                    value = 0.0
                    break
                if depth[node] >= limit:
                    value = value_of(node)
                    break
                action = select(tree, node, rng)
                if action is None:  # a dead end: no action, or all pruned
                    value = value_of(node)
                    break
                kids = children[node]
                child = kids.get(action) if kids else None
                if child is None:
                    t = step(token[node], action)
                    key = t.key
                    if key is None:
                        found = None
                    else:
                        s = slot[node]
                        if (
                            key == slot_key[s]
                            and not t.reward
                            and len(slot_actions[s]) - npruned[node] > 1
                        ):
                            # A no-op (the state is unchanged): nothing to search below
                            # it, so the action is pruned here and this simulation picks
                            # again (the last action left at a node is kept).
                            tree._mark_pruned(node, action)
                            continue
                        found = by_key.get(key)
                    if found is not None:  # a known state: its statistics are shared
                        child = grow(node, action, t, None, None, found)
                        value = value_of(child)
                        repeat = found in states
                    elif t.terminal:
                        child = grow(node, action, t, _NO_ACTIONS, 0.0, None)
                        value = 0.0
                    else:
                        value = value_fn(t)
                        child = grow(node, action, t, propose_fn(t), value, None)
                    path.append(child)
                    break
                if child == PRUNED:
                    raise ValueError(f"select_fn chose the pruned action {action!r}")
                node = child
                path.append(node)
                s = slot[node]
                if s in states:
                    # Back at a state on this path (a no-op, a loop): it is searched from
                    # where it first appeared; here it only lends its value.
                    value = value_of(node)
                    repeat = True
                    break
                states.append(s)
            backup(path, value, repeat)
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

    def _draw(self, n: int, rng: np.random.Generator) -> int:
        """A uniform index below ``n`` (>= 2) for a random tie-break.

        A numpy draw costs microseconds; a stream seeded once from ``rng`` does not. The
        draw is ``random.Random.randrange(n)``'s own, inline (a test checks they agree).
        """
        if rng is not self._source:
            self._source = rng
            self._stream = random.Random(int(rng.integers(2**63)))
        getrandbits = self._stream.getrandbits
        k = n.bit_length()
        r = getrandbits(k)
        while r >= n:
            r = getrandbits(k)
        return r

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
        slots, slot_actions, children, unpruned, count, visits, sums, reward, penalty, name = (
            tree.hot
        )
        actions = slot_actions[slots[node]]
        kids = children[node]
        if kids is None or len(kids) < len(actions):
            if self.first:  # the first action in proposal order not tried yet
                if kids is None:
                    return actions[0] if actions else None
                return next((a for a in actions if a not in kids), None)
            fresh = list(actions) if kids is None else [a for a in actions if a not in kids]
            if len(fresh) < 2:
                return fresh[0] if fresh else None
            return fresh[self._draw(len(fresh), rng)]
        live = unpruned[node]
        if live is None:
            live = kids
        elif not live:
            return None
        discount, lo, hi = tree.discount, tree.qmin, tree.qmax
        shift, factor = (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)
        c = self.c * sqrt(log(max(count[node], 1)))
        # One comprehension over the live children in expansion order (no lookups): the
        # inner loop of the whole search.
        ids = list(live.values())
        scores = [
            (reward[ch] + discount * sums[s := slots[ch]] / visits[s] - penalty[ch] - shift)
            * factor
            + c / sqrt(count[ch])
            for ch in ids
        ]
        best = max(scores)
        ties = scores.count(best)
        i = scores.index(best)
        if ties == 1:
            return name[ids[i]]
        if self.first:  # the earliest in proposal order
            index = tree.action_index
            first = ids[i]
            for _ in range(ties - 1):
                i = scores.index(best, i + 1)
                if index[ids[i]] < index[first]:
                    first = ids[i]
            return name[first]
        # A uniform draw among the ties in expansion order: the pick-th one.
        for _ in range(self._draw(ties, rng)):
            i = scores.index(best, i + 1)
        return name[ids[i]]


class PUCT(_Rule):
    """PUCT (AlphaZero): ``q + c * prior * sqrt(N) / (1 + n)`` over every proposed action.

    ``q`` is the min-max normalised Q of a visited child; an action not yet expanded
    counts the node's own mean value as its Q (first-play value = the parent's).

    Unexpanded actions share that Q, so the best of them is the one with the highest
    prior: only the live children and the unexpanded actions at the head of the node's
    prior-sorted order are scored (a cursor skips the ones expanded or pruned since), so
    a selection costs the node's live children, not its thousands of proposed actions.
    The result is the rule's over every action, ties included (in proposal order).

    Args:
        c: exploration constant, >= 0.
        tie_break: ``"random"`` or ``"first"``, as for :class:`UCB1`.
    """

    __slots__ = ()

    def __init__(self, c: float = 1.25, tie_break: TieBreak = "random") -> None:
        super().__init__(c, tie_break)

    def __call__(self, tree: Tree, node: int, rng: np.random.Generator) -> str | None:
        """Return the action to follow at ``node``; None at a dead end."""
        slots, slot_actions, children, unpruned, count, visits, sums, reward, penalty, name = (
            tree.hot
        )
        slot = slots[node]
        actions, priors = slot_actions[slot], tree.slot_priors[slot]
        kids = children[node]
        lo, hi = tree.qmin, tree.qmax
        shift, factor = (lo, 1.0 / (hi - lo)) if hi > lo else (0.0, 1.0)
        unvisited_q = (sums[slot] / visits[slot] - shift) * factor
        c_sqrt = self.c * sqrt(count[node])
        n = len(actions)
        # The best unexpanded action: the first of the prior order not in ``kids``.
        ranked = tree.slot_order[slot]
        if ranked is None:
            ranked = tree.prior_order(slot)
        order, ends = ranked
        cursor = tree.cursor
        p = cursor[node]
        if kids:
            while p < n and actions[order[p]] in kids:
                p += 1
            cursor[node] = p
        inf = -math.inf
        fresh = unvisited_q + c_sqrt * priors[order[p]] if p < n else inf
        live = unpruned[node]
        if live is None:
            live = kids
        if live:
            prior, discount = tree.prior, tree.discount
            ids = list(live.values())
            scores = [
                (reward[ch] + discount * sums[s := slots[ch]] / visits[s] - penalty[ch] - shift)
                * factor
                + c_sqrt * prior[ch] / (1 + count[ch])
                for ch in ids
            ]
            best = max(scores)
            if best > fresh:
                if scores.count(best) == 1:
                    return name[ids[scores.index(best)]]
                index = tree.action_index
                ties = [index[ch] for ch, x in zip(ids, scores, strict=True) if x == best]
                return self._choose(ties, actions, rng)
            ties = (
                [tree.action_index[ch] for ch, x in zip(ids, scores, strict=True) if x == best]
                if best == fresh
                else []
            )
        else:
            ties = []
        if fresh == inf:  # no action left (all pruned), or none scores above -inf
            return None
        # Unexpanded actions scoring ``fresh`` too: a run of the prior order from the
        # cursor (scores never rise along it), less those expanded or pruned.
        # Equal priors score alike: the run ends at a run of lower priors that scores less.
        i = order[p]
        end = ends[p]
        while end < n and unvisited_q + c_sqrt * priors[order[end]] == fresh:
            end = ends[end]  # a lower prior, rounded to the same score
        if end > p + 1:
            run = order[p + 1 : end]
            ties.extend([k for k in run if actions[k] not in kids] if kids else run)
        if not ties:
            return actions[i]
        ties.append(i)
        return self._choose(ties, actions, rng)

    def _choose(self, ties: list[int], actions: tuple[str, ...], rng: np.random.Generator) -> str:
        """One of the tied action indices ``ties`` (two or more), by the tie-break."""
        if self.first:
            return actions[min(ties)]
        ties.sort()  # proposal order
        return actions[ties[self._draw(len(ties), rng)]]


def puct(c: float = 1.25, tie_break: TieBreak = "random") -> PUCT:
    """Return the PUCT selection rule (see :class:`PUCT`)."""
    return PUCT(c, tie_break)


def ucb1(c: float = math.sqrt(2), tie_break: TieBreak = "random") -> UCB1:
    """Return the UCB1 selection rule (see :class:`UCB1`)."""
    return UCB1(c, tie_break)
