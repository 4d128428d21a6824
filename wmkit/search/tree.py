"""The search tree: a bounded struct-of-arrays arena of node records (seed 004).

Each node is one path from the root: its parent, the action that led to it, its depth,
its children (``action -> node id``), its visit count, the prior of its action, the
reward of the step into it, whether it is terminal, and what the simulator said about
it (token, observation, agent-visible info, predicted delta). Value statistics live in
*slots*: nodes whose states share a transposition key share one slot (state visits,
sum of returns, the proposal and the value estimate), so what one path learns about a
state every other path to it sees. Nodes without a key get a slot of their own.

Visit counts stay per node (per edge, as in UCT with transpositions): a no-op action
leads back to its parent's state, and counting that state's visits as the action's
would make the no-op look like the most tried move.

Columns are public for reading (selection functions read them in their inner loop);
only :class:`Tree` methods write them. A pruned action stays in ``children`` (as
:data:`PRUNED`), counted per node (``npruned``); a node with pruned actions also keeps
its live children apart (``unpruned``), so selection never walks past the pruned ones,
and PUCT finds the best unexpanded action from a cursor into the prior-sorted order
(``cursor``, ``slot_order``) instead of scoring every proposed action. Node ids are
reused after a node is freed, so hold an id only while its node is alive
(:meth:`Tree.alive`).

Memory stays under ``max_nodes``: when the arena is full, :meth:`Tree.add` evicts a
tenth of the cap in whole subtrees, least-visited first, then least valuable, then
oldest, never the root nor the path being extended.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from wmkit.search.types import Proposal, Transition

__all__ = ["FREE", "PRUNED", "NodeView", "Tree"]

PRUNED = -1
"""The child id recorded for a pruned action: it is never expanded again."""

FREE = -2
"""The parent id of a freed node (the root's parent is -1)."""

_EVICT_FRACTION = 10  # a pass frees a tenth of the cap: its O(n log n) sort amortised


# fmt: off
_FREE_ROW = (
    FREE, None, -1, 0, None, 0, None, 0, 0.0, 0.0, False, 0.0, -1, 0, 0, None, None, None, None,
)
# fmt: on
"""A reserved node's row (:meth:`Tree._reserve`): free, numbers where eviction reads
columns as arrays."""


class NodeView(NamedTuple):
    """A read-only copy of one node's record.

    Attributes:
        id: the node id.
        parent: the parent's id, -1 for the root.
        action: the action from the parent (for the root, the one that led to it, if
            it was re-rooted, else None).
        depth: steps below the current root.
        visits: simulations that went through this node, its creation included.
        state_visits: returns backed up into the node's state (its slot), from every
            path that reaches it.
        value: mean return from the state (reward units).
        q: the parent's view of the node: ``reward + discount * value - penalty``.
        prior: the prior of ``action`` at the parent (normalised).
        reward: reward of the step into the node.
        terminal: no step may follow.
        estimate: the value function's estimate when the state was first reached.
        penalty: the total penalty put on the node (:meth:`Tree.penalise`).
        observation: the observation of the step into the node.
        info: the agent-visible info of the state.
        token: the simulator's state token.
        key: the transposition key, or None.
        delta: the simulator's predicted change for the step, or None.
        children: live children, ``action -> id``, in expansion order.
        actions: the proposed actions, in proposal order.
        pruned: proposed actions that were pruned.
    """

    id: int
    parent: int
    action: str | None
    depth: int
    visits: int
    state_visits: int
    value: float
    q: float
    prior: float
    reward: float
    terminal: bool
    estimate: float
    penalty: float
    observation: str
    info: Mapping[str, Any]
    token: Any
    key: Hashable | None
    delta: Any
    children: dict[str, int]
    actions: tuple[str, ...]
    pruned: tuple[str, ...]


_UNIFORM: dict[int, tuple[float, ...]] = {}


def _priors(proposal: Proposal) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """Check a proposal and return its actions and normalised priors."""
    actions = tuple(proposal.actions)
    n = len(actions)
    if len(set(actions)) != n:
        raise ValueError(f"proposal has repeated actions: {actions}")
    if proposal.priors is None:
        uniform = _UNIFORM.get(n)
        if uniform is None:
            uniform = _UNIFORM.setdefault(n, (1.0 / n,) * n if n else ())
        return actions, uniform
    priors = tuple(float(p) for p in proposal.priors)
    if len(priors) != n:
        raise ValueError(f"proposal has {n} actions but {len(priors)} priors")
    total = math.fsum(priors)
    if not all(p >= 0.0 and math.isfinite(p) for p in priors) or (n and total <= 0.0):
        raise ValueError(f"priors must be finite, >= 0 and not all 0, got {priors}")
    return actions, tuple(p / total for p in priors)


class Tree:
    """A bounded search tree over one root state.

    Columns by node id: ``parent`` (-1 at the root, :data:`FREE` when freed),
    ``action``, ``action_index`` (its index in the parent's proposal, -1 at the root),
    ``depth`` (absolute: subtract ``depth[root]``), ``children`` (``action -> id``,
    :data:`PRUNED` for a pruned action; None before the first child), ``npruned``
    (how many of ``children`` are :data:`PRUNED`), ``unpruned`` (the live children,
    ``action -> id`` in expansion order, while ``npruned`` > 0; None otherwise, when
    ``children`` holds only live ones), ``cursor`` (a position in ``slot_order``: the
    actions before it all have an entry in ``children``), ``prior``, ``reward``,
    ``terminal``, ``penalty``, ``slot``, ``count`` (visits), ``born`` (creation order),
    ``token``, ``observation``, ``info``, ``delta``. By slot id: ``slot_visits``,
    ``slot_value_sum``, ``slot_refs``, ``slot_estimate``, ``slot_key``, ``slot_actions``,
    ``slot_priors`` (normalised), ``slot_order`` (the actions by decreasing prior,
    :meth:`prior_order`'s ``(order, ends)``; None until it is first asked).

    Args:
        root: the transition record of the root state.
        proposal: the actions to try at the root.
        estimate: the value function's estimate of the root (ignored if terminal).
        discount: per-step discount of rewards, in [0, 1].
        max_nodes: most nodes held at once, >= 2 (None: unbounded).

    Raises:
        ValueError: a bad discount, cap or proposal.
    """

    def __init__(
        self,
        root: Transition,
        proposal: Proposal,
        estimate: float,
        *,
        discount: float = 1.0,
        max_nodes: int | None = None,
    ) -> None:
        if not 0.0 <= discount <= 1.0:
            raise ValueError(f"discount must be in [0, 1], got {discount}")
        if max_nodes is not None and (isinstance(max_nodes, bool) or max_nodes < 2):
            raise ValueError(f"max_nodes must be >= 2 or None, got {max_nodes}")
        self.discount = float(discount)
        self.max_nodes = max_nodes
        # Node columns, indexed by node id.
        # Columns the selection loop reads are lists (a list index costs half an array
        # index, which boxes); the rest are compact arrays. ``prior`` holds the very
        # float objects of the proposal's priors, so a list costs no more than an array.
        self.parent = array("q")
        self.action: list[str | None] = []
        self.action_index: list[int] = []
        self.depth: list[int] = []
        self.children: list[dict[str, int] | None] = []
        self.npruned: list[int] = []
        self.unpruned: list[dict[str, int] | None] = []
        self.cursor: list[int] = []
        self.prior: list[float] = []
        self.reward: list[float] = []
        self.terminal: list[bool] = []
        self.penalty: list[float] = []
        self.slot: list[int] = []
        self.count: list[int] = []
        self.born = array("q")
        self.token: list[Any] = []
        self.observation: list[str | None] = []
        self.info: list[Mapping[str, Any] | None] = []
        self.delta: list[Any] = []
        # Slot columns, indexed by slot id: what nodes of one state share.
        self.slot_visits: list[int] = []
        self.slot_value_sum: list[float] = []
        self.slot_refs = array("q")
        self.slot_estimate = array("d")
        self.slot_key: list[Hashable | None] = []
        self.slot_actions: list[tuple[str, ...] | None] = []
        self.slot_priors: list[tuple[float, ...] | None] = []
        self.slot_order: list[tuple[Sequence[int], Sequence[int]] | None] = []
        self.qmin = math.inf
        """Smallest Q sample backed up so far (for min-max normalisation)."""
        self.qmax = -math.inf
        """Largest Q sample backed up so far."""
        self._by_key: dict[Hashable, int] = {}
        self._checked: tuple[Proposal | None, tuple[str, ...], tuple[float, ...]] = (None, (), ())
        self._sorted: tuple[tuple[float, ...] | None, tuple[Sequence[int], Sequence[int]]] = (
            None,
            ((), ()),
        )
        self._free_nodes: list[int] = []
        self._free_slots: list[int] = []
        self._born = 0
        self._size = 0
        self.evicted = 0
        """Nodes evicted to keep under ``max_nodes`` so far."""
        self.hot = (
            self.slot,
            self.slot_actions,
            self.children,
            self.unpruned,
            self.count,
            self.slot_visits,
            self.slot_value_sum,
            self.reward,
            self.penalty,
            self.action,
        )
        """The columns a selection rule reads, in one tuple (one lookup, not ten): ``slot``,
        ``slot_actions``, ``children``, ``unpruned``, ``count``, ``slot_visits``,
        ``slot_value_sum``, ``reward``, ``penalty``, ``action``."""
        self._columns = (
            self.parent,
            self.action,
            self.action_index,
            self.depth,
            self.children,
            self.npruned,
            self.unpruned,
            self.cursor,
            self.prior,
            self.reward,
            self.terminal,
            self.penalty,
            self.slot,
            self.count,
            self.born,
            self.token,
            self.observation,
            self.info,
            self.delta,
        )
        """Every node column, in the order of a node's row (:meth:`_new`, ``_FREE_ROW``)."""
        self._objects = (
            self.action,
            self.children,
            self.unpruned,
            self.token,
            self.observation,
            self.info,
            self.delta,
        )
        self.root = self._new(-1, None, -1, 0, 1.0, root, proposal, estimate, None)
        self.backup([self.root], self.slot_estimate[self.slot[self.root]])

    # -- size and identity --

    def __len__(self) -> int:
        """Number of live nodes."""
        return self._size

    def alive(self, node: int) -> bool:
        """Whether ``node`` is a live node id."""
        return 0 <= node < len(self.parent) and self.parent[node] != FREE

    def known(self, key: Hashable | None) -> bool:
        """Whether a live node has transposition key ``key`` (None is never known)."""
        return key is not None and key in self._by_key

    def _check(self, node: int) -> None:
        if not self.alive(node):
            raise KeyError(f"node {node} is not in the tree (freed, pruned or never made)")

    # -- reading --

    def visits(self, node: int) -> int:
        """Simulations that went through ``node`` (its creation included)."""
        return self.count[node]

    def state_visits(self, node: int) -> int:
        """Returns backed up into ``node``'s state, from every path to it."""
        return self.slot_visits[self.slot[node]]

    def value(self, node: int) -> float:
        """Mean return from ``node``'s state (0 before any visit)."""
        s = self.slot[node]
        n = self.slot_visits[s]
        return self.slot_value_sum[s] / n if n else 0.0

    def q(self, node: int) -> float:
        """The parent's view of ``node``: ``reward + discount * value - penalty``."""
        return self.reward[node] + self.discount * self.value(node) - self.penalty[node]

    def child(self, node: int, action: str) -> int | None:
        """The live child of ``node`` reached by ``action``, or None."""
        self._check(node)
        found = (self.children[node] or {}).get(action)
        return None if found is None or found == PRUNED else found

    def _live(self, node: int) -> dict[str, int]:
        """The live children of ``node`` (the tree's own dict: do not change it)."""
        live = self.unpruned[node]
        if live is None:
            live = self.children[node]
        return live or {}

    def live_children(self, node: int) -> dict[str, int]:
        """Live children of ``node``, ``action -> id``, in expansion order."""
        self._check(node)
        return dict(self._live(node))

    def siblings(self, node: int) -> dict[str, int]:
        """The other live children of ``node``'s parent (empty for the root)."""
        self._check(node)
        if node == self.root:
            return {}
        return {a: c for a, c in self._live(self.parent[node]).items() if c != node}

    def ancestors(self, node: int) -> list[int]:
        """Ids from ``node``'s parent up to the root, nearest first."""
        self._check(node)
        out = []
        while node != self.root:
            node = self.parent[node]
            out.append(node)
        return out

    def path(self, node: int) -> list[str]:
        """The actions from the root to ``node``."""
        actions = [self.action[node]] if node != self.root else []
        actions += [self.action[a] for a in self.ancestors(node)[:-1]]
        return actions[::-1]

    def find(self, actions: list[str] | tuple[str, ...]) -> int | None:
        """The live node reached from the root by ``actions``, or None."""
        node = self.root
        for action in actions:
            found = self.child(node, action)
            if found is None:
                return None
            node = found
        return node

    def node(self, node: int) -> NodeView:
        """A read-only copy of ``node``'s record."""
        self._check(node)
        s = self.slot[node]
        kids = self.children[node] or {}
        return NodeView(
            id=node,
            parent=self.parent[node],
            action=self.action[node],
            depth=self.depth[node] - self.depth[self.root],
            visits=self.count[node],
            state_visits=self.slot_visits[s],
            value=self.value(node),
            q=self.q(node),
            prior=self.prior[node],
            reward=self.reward[node],
            terminal=bool(self.terminal[node]),
            estimate=self.slot_estimate[s],
            penalty=self.penalty[node],
            observation=self.observation[node],
            info=self.info[node],
            token=self.token[node],
            key=self.slot_key[s],
            delta=self.delta[node],
            children=dict(self._live(node)),
            actions=self.slot_actions[s],
            pruned=tuple(a for a, c in kids.items() if c == PRUNED) if self.npruned[node] else (),
        )

    def nodes(self) -> Iterator[int]:
        """Live node ids, breadth first from the root, children in expansion order."""
        frontier = [self.root]
        while frontier:
            yield from frontier
            frontier = [c for n in frontier for c in self._live(n).values()]

    def best_action(self, node: int | None = None) -> str | None:
        """The most visited live child's action (ties: higher Q, then proposal order)."""
        node = self.root if node is None else node
        kids = self.live_children(node)
        if not kids:
            return None
        index = self.action_index
        return max(kids, key=lambda a: (self.visits(kids[a]), self.q(kids[a]), -index[kids[a]]))

    def prior_order(self, slot: int) -> tuple[Sequence[int], Sequence[int]]:
        """``slot``'s actions by decreasing prior: ``(order, ends)``.

        ``order`` holds action indices, equal priors in proposal order; ``ends[j]`` is
        the position just past the run of priors equal to ``order[j]``'s. Computed once
        per proposal (slots sharing a proposal share it), on first use.

        Raises:
            KeyError: ``slot`` is free.
        """
        ranked = self.slot_order[slot]
        if ranked is None:
            priors = self.slot_priors[slot]
            if priors is None:
                raise KeyError(f"slot {slot} is free")
            last, ranked = self._sorted
            if priors is not last:
                n = len(priors)
                if priors is _UNIFORM.get(n):
                    ranked = (range(n), [n] * n)
                else:  # a stable sort: equal priors keep proposal order
                    order = sorted(range(n), key=priors.__getitem__, reverse=True)
                    ends = [n] * n
                    for j in range(n - 2, -1, -1):
                        ends[j] = j + 1 if priors[order[j]] != priors[order[j + 1]] else ends[j + 1]
                    ranked = (order, ends)
                self._sorted = (priors, ranked)
            self.slot_order[slot] = ranked
        return ranked

    # -- growing --

    def add(
        self,
        parent: int,
        action: str,
        transition: Transition,
        proposal: Proposal | None = None,
        estimate: float | None = None,
        protect: Collection[int] = (),
    ) -> int:
        """Add the child of ``parent`` reached by ``action``; return its id.

        ``proposal`` and ``estimate`` describe the new state; they may be None only when
        its key is :meth:`known` (a transposition: the known state's are shared). When
        the arena is full, subtrees are evicted first; ``protect`` names nodes that must
        survive (the path being extended; ``parent`` and its ancestors always do).

        Raises:
            KeyError: ``parent`` is not live, or ``action`` is not proposed there.
            ValueError: ``parent`` already has a child for ``action``, or a bad proposal.
        """
        self._check(parent)
        key = transition.key
        found = None if key is None else self._by_key.get(key)
        return self._grow(parent, action, transition, proposal, estimate, found, protect)

    def _grow(
        self,
        parent: int,
        action: str,
        transition: Transition,
        proposal: Proposal | None,
        estimate: float | None,
        found: int | None,
        protect: Collection[int] = (),
    ) -> int:
        """:meth:`add` for a live ``parent``; ``found``: the slot of the key, or None."""
        s = self.slot[parent]
        actions = self.slot_actions[s]
        try:
            index = actions.index(action)
        except ValueError:
            raise KeyError(f"action {action!r} was not proposed at node {parent}") from None
        kids = self.children[parent]
        if kids is not None and action in kids:
            raise ValueError(f"node {parent} already has a child for {action!r}")
        if self.max_nodes is not None and self._size >= self.max_nodes:
            # A known state's slot must outlive the eviction: the caller skipped its
            # proposal and estimate because the tree already holds them.
            keep = -1 if found is None else found
            self._evict(max(1, self.max_nodes // _EVICT_FRACTION), (*protect, parent), keep)
            kids = self.children[parent]
        child = self._new(
            parent,
            action,
            index,
            self.depth[parent] + 1,
            self.slot_priors[s][index],
            transition,
            proposal,
            estimate,
            found,
        )
        if kids is None:
            self.children[parent] = {action: child}
        else:
            kids[action] = child
            live = self.unpruned[parent]
            if live is not None:
                live[action] = child
        return child

    def _new(
        self,
        parent: int,
        action: str | None,
        index: int,
        depth: int,
        prior: float,
        t: Transition,
        proposal: Proposal | None,
        estimate: float | None,
        found: int | None,
    ) -> int:
        token, observation, reward, terminal, info, key, delta = t
        if found is None:
            slot = self._slot(key, terminal, proposal, estimate)
        else:
            self.slot_refs[found] += 1
            slot = found
        if type(reward) is not float:
            reward = float(reward)
        terminal = terminal is True or bool(terminal)
        born = self._born
        self._born = born + 1
        self._size += 1
        if not self._free_nodes:
            self._reserve()
        node = self._free_nodes.pop()
        # A store per column: a loop over self._columns costs about a microsecond more.
        self.parent[node] = parent
        self.action[node] = action
        self.action_index[node] = index
        self.depth[node] = depth
        self.children[node] = None
        self.npruned[node] = 0
        self.unpruned[node] = None
        self.cursor[node] = 0
        self.prior[node] = prior
        self.reward[node] = reward
        self.terminal[node] = terminal
        self.penalty[node] = 0.0
        self.slot[node] = slot
        self.count[node] = 0
        self.born[node] = born
        self.token[node] = token
        self.observation[node] = observation
        self.info[node] = info
        self.delta[node] = delta
        return node

    def _reserve(self) -> None:
        """Grow every node column by a block of free nodes.

        A sixteenth of the arena, 64 at least, never past ``max_nodes``: a new node costs one
        row of assignments, not an append per column.
        """
        start = len(self.count)
        n = max(64, start // 16)
        if self.max_nodes is not None and start < self.max_nodes:
            n = min(n, self.max_nodes - start)
        for column, fill in zip(self._columns, _FREE_ROW, strict=True):
            column.extend(array("q", [fill]) * n if isinstance(column, array) else [fill] * n)
        self._free_nodes.extend(range(start + n - 1, start - 1, -1))  # lowest id first

    def _slot(
        self,
        key: Hashable | None,
        terminal: bool,
        proposal: Proposal | None,
        estimate: float | None,
    ) -> int:
        """A new slot for a state whose key the tree does not know (or None)."""
        if terminal:
            # Nothing follows a terminal state: no actions, and no future value.
            actions, priors, estimate = (), (), 0.0
        else:
            if proposal is None or estimate is None:
                raise ValueError("a new state needs its proposal and value estimate")
            checked = self._checked
            if proposal is not checked[0]:  # a cached proposal is checked once
                checked = self._checked = (proposal, *_priors(proposal))
            actions, priors = checked[1], checked[2]
            estimate = float(estimate)
            if not math.isfinite(estimate):
                raise ValueError(f"value estimate must be finite, got {estimate}")
        if self._free_slots:
            slot = self._free_slots.pop()
            self.slot_visits[slot] = 0
            self.slot_value_sum[slot] = 0.0
            self.slot_refs[slot] = 1
            self.slot_estimate[slot] = estimate
            self.slot_key[slot] = key
            self.slot_actions[slot] = actions
            self.slot_priors[slot] = priors
            self.slot_order[slot] = None
        else:
            slot = len(self.slot_visits)
            self.slot_visits.append(0)
            self.slot_value_sum.append(0.0)
            self.slot_refs.append(1)
            self.slot_estimate.append(estimate)
            self.slot_key.append(key)
            self.slot_actions.append(actions)
            self.slot_priors.append(priors)
            self.slot_order.append(None)
        if key is not None:
            self._by_key[key] = slot
        return slot

    def backup(self, path: list[int], value: float) -> None:
        """Back up a simulation: ``value`` at the last node of ``path`` (root first).

        Each node gains a visit; each node's slot gains a state visit and the return
        from it (rewards below it, discounted, plus the discounted leaf value). A slot
        met twice on one path (the path came back to a state) is updated once, at its
        shallowest node, so a simulation counts once per state.
        """
        discount, reward, slot, count = self.discount, self.reward, self.slot, self.count
        visits, sums, root = self.slot_visits, self.slot_value_sum, self.root
        qmin, qmax = self.qmin, self.qmax
        g = value
        if not self._by_key:  # no keys, no shared slots: no state can repeat
            for node in reversed(path):
                count[node] += 1
                s = slot[node]
                visits[s] += 1
                sums[s] += g
                g = reward[node] + discount * g
                if node != root:
                    if g < qmin:
                        qmin = g
                    if g > qmax:
                        qmax = g
            self.qmin, self.qmax = qmin, qmax
            return
        returns: dict[int, float] = {}  # slot -> the return at its shallowest node so far
        for node in reversed(path):
            count[node] += 1
            returns[slot[node]] = g
            g = reward[node] + discount * g
            if node != root:
                if g < qmin:
                    qmin = g
                if g > qmax:
                    qmax = g
        self.qmin, self.qmax = qmin, qmax
        for s, g in returns.items():
            visits[s] += 1
            sums[s] += g

    def _backup(self, path: list[int], value: float, repeat: bool) -> None:
        """:meth:`backup` of a path the search walked, in one pass from the leaf.

        The path's states are distinct, but for its last node's when ``repeat``: that
        state is an earlier node's, whose slot alone is updated (as :meth:`backup` does).
        """
        discount, reward, slot, count = self.discount, self.reward, self.slot, self.count
        visits, sums = self.slot_visits, self.slot_value_sum
        qmin, qmax = self.qmin, self.qmax
        g = value
        i = len(path) - 1
        node = path[i]
        count[node] += 1
        if not repeat:
            s = slot[node]
            visits[s] += 1
            sums[s] += g
        while i:
            g = reward[node] + discount * g  # a Q sample of ``node``, a return of its parent
            if g < qmin:
                qmin = g
            if g > qmax:
                qmax = g
            i -= 1
            node = path[i]
            count[node] += 1
            s = slot[node]
            visits[s] += 1
            sums[s] += g
        self.qmin, self.qmax = qmin, qmax

    # -- correcting --

    def penalise(self, node: int, amount: float) -> None:
        """Lower ``node``'s Q by ``amount`` for good (seed 004: a failed prediction).

        The penalty is kept apart from the backed-up returns, so later visits do not
        wash it out; penalties add up.

        Raises:
            KeyError: ``node`` is not live.
            ValueError: ``amount`` is not finite.
        """
        self._check(node)
        if not math.isfinite(amount):
            raise ValueError(f"penalty must be finite, got {amount}")
        self.penalty[node] += amount

    def reroot(self, node: int) -> None:
        """Make ``node`` the root and free everything outside its subtree.

        Ids and statistics of the kept nodes are unchanged; depths are counted from the
        new root.

        Raises:
            KeyError: ``node`` is not live.
        """
        self._check(node)
        chain = self.ancestors(node)  # parent first, the old root last
        below = node
        for a in chain:
            for c in self._live(a).values():
                if c != below:
                    self._free_subtree(c)
            below = a
        for a in chain:
            self._free_one(a)
        self.parent[node] = -1
        self.root = node

    def replace_root_record(self, transition: Transition) -> None:
        """Put the real env's record of the root state in place of the simulated one.

        After :meth:`reroot` on the action actually taken, the root's token,
        observation and info come from the simulator; this replaces them with what the
        real episode gave (same state, fresh token). Statistics are kept.
        """
        root = self.root
        self.token[root] = transition.token
        self.observation[root] = transition.observation
        self.info[root] = transition.info

    def prune_action(self, node: int, action: str) -> int:
        """Prune ``action`` at ``node``: it is never expanded there again; return nodes freed.

        Its child's subtree, if it has one, is freed.

        Raises:
            KeyError: ``node`` is not live, or ``action`` is not proposed there.
        """
        self._check(node)
        if action not in self.slot_actions[self.slot[node]]:
            raise KeyError(f"action {action!r} was not proposed at node {node}")
        found = (self.children[node] or {}).get(action)
        if found == PRUNED:
            return 0
        freed = 0 if found is None else self._free_subtree(found)
        self._mark_pruned(node, action)
        return freed

    def _mark_pruned(self, node: int, action: str) -> None:
        """Record ``action`` as pruned at ``node`` (its child, if any, already freed)."""
        kids = self.children[node]
        if kids is None:
            kids = self.children[node] = {}
        live = self.unpruned[node]
        if live is None:  # the first pruned action: the live children are all of them
            live = self.unpruned[node] = dict(kids)
        live.pop(action, None)
        kids[action] = PRUNED
        self.npruned[node] += 1

    def prune(self, margin: float, min_visits: int = 1) -> int:
        """Prune every child clearly worse than its best sibling; return nodes freed.

        At each expanded node, among children with at least ``min_visits`` visits, a
        child whose Q is more than ``margin`` below the best one's is pruned: its
        subtree is freed and its action is never expanded again here.

        Raises:
            ValueError: ``margin`` <= 0 or ``min_visits`` < 1.
        """
        if not margin > 0:
            raise ValueError(f"margin must be > 0, got {margin}")
        if min_visits < 1:
            raise ValueError(f"min_visits must be >= 1, got {min_visits}")
        before = self._size
        for node in list(self.nodes()):
            if not self.alive(node):
                continue
            kids = self._live(node)
            if not kids:
                continue
            scored = [(a, c, self.q(c)) for a, c in kids.items() if self.count[c] >= min_visits]
            if len(scored) < 2:
                continue
            best = max(q for _, _, q in scored)
            for action, c, q in scored:
                if q < best - margin:
                    self._free_subtree(c)
                    self._mark_pruned(node, action)
        return before - self._size

    def evict(self, count: int, protect: Collection[int] = ()) -> int:
        """Free at least ``count`` nodes (when that many may go); return nodes freed.

        Whole subtrees go, least-visited first, then lowest value, then oldest; never
        the root, a node in ``protect`` or an ancestor of one. The parent forgets the
        action, so it may be expanded again later.
        """
        return self._evict(count, protect, -1)

    def _evict(self, count: int, protect: Collection[int], keep_slot: int) -> int:
        parents = np.frombuffer(self.parent, dtype=np.int64).copy()
        slots = np.array(self.slot, dtype=np.int64)
        keep = [n for n in protect if self.alive(n)]
        if keep_slot >= 0:
            keep += np.flatnonzero((slots == keep_slot) & (parents != FREE)).tolist()
        # A subtree holding a kept node must stay: keep its ancestors too.
        protected = set(keep)
        for node in keep:
            protected.update(self.ancestors(node))
        live = parents != FREE
        live[self.root] = False
        live[list(protected)] = False
        ids = np.flatnonzero(live)
        if ids.size == 0:
            return 0
        visits = np.array(self.count, dtype=np.int64)[ids]
        sums = np.array(self.slot_value_sum, dtype=np.float64)[slots[ids]]
        states = np.array(self.slot_visits, dtype=np.int64)[slots[ids]]
        born = np.frombuffer(self.born, dtype=np.int64)[ids]
        order = ids[np.lexsort((born, sums / np.maximum(states, 1), visits))]
        freed = 0
        for node in order.tolist():
            if freed >= count:
                break
            parent = self.parent[node]
            if parent == FREE:  # went with an earlier victim's subtree
                continue
            action = self.action[node]
            del self.children[parent][action]
            unpruned = self.unpruned[parent]
            if unpruned is not None:
                del unpruned[action]
            self.cursor[parent] = 0  # the action is unexpanded again
            freed += self._free_subtree(node)
        self.evicted += freed
        return freed

    def _free_subtree(self, node: int) -> int:
        stack, freed = [node], 0
        while stack:
            x = stack.pop()
            stack.extend(self._live(x).values())
            self._free_one(x)
            freed += 1
        return freed

    def _free_one(self, node: int) -> None:
        s = self.slot[node]
        self.slot_refs[s] -= 1
        if self.slot_refs[s] == 0:
            key = self.slot_key[s]
            if key is not None:
                del self._by_key[key]
            self.slot_key[s] = self.slot_actions[s] = self.slot_priors[s] = None
            self.slot_order[s] = None
            self._free_slots.append(s)
        self.parent[node] = FREE
        self.slot[node] = -1
        for column in self._objects:
            column[node] = None
        self._free_nodes.append(node)
        self._size -= 1
