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
only :class:`Tree` methods write them. Node ids are reused after a node is freed, so
hold an id only while its node is alive (:meth:`Tree.alive`).

Memory stays under ``max_nodes``: when the arena is full, :meth:`Tree.add` evicts a
tenth of the cap in whole subtrees, least-visited first, then least valuable, then
oldest, never the root nor the path being extended.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Collection, Hashable, Iterator, Mapping
from typing import Any, NamedTuple

import numpy as np

from wmkit.search.types import Proposal, Transition

__all__ = ["FREE", "PRUNED", "NodeView", "Tree"]

PRUNED = -1
"""The child id recorded for a pruned action: it is never expanded again."""

FREE = -2
"""The parent id of a freed node (the root's parent is -1)."""

_EVICT_FRACTION = 10  # a pass frees a tenth of the cap: its O(n log n) sort amortised


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
    ``action``, ``depth`` (absolute: subtract ``depth[root]``), ``children``
    (``action -> id``, :data:`PRUNED` for a pruned action; None before the first
    child), ``prior``, ``reward``, ``terminal``, ``penalty``, ``slot``, ``count``
    (visits), ``born`` (creation order), ``token``, ``observation``, ``info``,
    ``delta``. By slot id: ``slot_visits``, ``slot_value_sum``, ``slot_refs``,
    ``slot_estimate``, ``slot_key``, ``slot_actions``, ``slot_priors`` (normalised).

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
        # index, which boxes); the rest are compact arrays.
        self.parent = array("q")
        self.action: list[str | None] = []
        self.depth: list[int] = []
        self.children: list[dict[str, int] | None] = []
        self.prior = array("d")
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
        self.qmin = math.inf
        """Smallest Q sample backed up so far (for min-max normalisation)."""
        self.qmax = -math.inf
        """Largest Q sample backed up so far."""
        self._by_key: dict[Hashable, int] = {}
        self._checked: tuple[Proposal | None, tuple[str, ...], tuple[float, ...]] = (None, (), ())
        self._free_nodes: list[int] = []
        self._free_slots: list[int] = []
        self._born = 0
        self._size = 0
        self.evicted = 0
        """Nodes evicted to keep under ``max_nodes`` so far."""
        self._numeric = (
            self.parent,
            self.depth,
            self.prior,
            self.reward,
            self.terminal,
            self.penalty,
            self.slot,
            self.count,
            self.born,
        )
        self._objects = (
            self.action,
            self.children,
            self.token,
            self.observation,
            self.info,
            self.delta,
        )
        self._slot_numeric = (
            self.slot_visits,
            self.slot_value_sum,
            self.slot_refs,
            self.slot_estimate,
        )
        self.root = self._new(-1, None, 0, 1.0, root, proposal, estimate)
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

    def live_children(self, node: int) -> dict[str, int]:
        """Live children of ``node``, ``action -> id``, in expansion order."""
        self._check(node)
        return {a: c for a, c in (self.children[node] or {}).items() if c != PRUNED}

    def siblings(self, node: int) -> dict[str, int]:
        """The other live children of ``node``'s parent (empty for the root)."""
        self._check(node)
        if node == self.root:
            return {}
        return {a: c for a, c in self.live_children(self.parent[node]).items() if c != node}

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
            children={a: c for a, c in kids.items() if c != PRUNED},
            actions=self.slot_actions[s],
            pruned=tuple(a for a, c in kids.items() if c == PRUNED),
        )

    def nodes(self) -> Iterator[int]:
        """Live node ids, breadth first from the root, children in expansion order."""
        frontier = [self.root]
        while frontier:
            yield from frontier
            frontier = [
                c for n in frontier for c in (self.children[n] or {}).values() if c != PRUNED
            ]

    def best_action(self, node: int | None = None) -> str | None:
        """The most visited live child's action (ties: higher Q, then proposal order)."""
        node = self.root if node is None else node
        kids = self.live_children(node)
        if not kids:
            return None
        order = {a: i for i, a in enumerate(self.slot_actions[self.slot[node]])}
        return max(kids, key=lambda a: (self.visits(kids[a]), self.q(kids[a]), -order[a]))

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
        actions = self.slot_actions[self.slot[parent]]
        try:
            index = actions.index(action)
        except ValueError:
            raise KeyError(f"action {action!r} was not proposed at node {parent}") from None
        if action in (self.children[parent] or {}):
            raise ValueError(f"node {parent} already has a child for {action!r}")
        if self.max_nodes is not None and self._size >= self.max_nodes:
            # A known state's slot must outlive the eviction: the caller skipped its
            # proposal and estimate because the tree already holds them.
            key = transition.key
            keep = self._by_key.get(key, -1) if key is not None else -1
            self._evict(max(1, self.max_nodes // _EVICT_FRACTION), (*protect, parent), keep)
        prior = self.slot_priors[self.slot[parent]][index]
        child = self._new(
            parent, action, self.depth[parent] + 1, prior, transition, proposal, estimate
        )
        kids = self.children[parent]
        if kids is None:
            self.children[parent] = {action: child}
        else:
            kids[action] = child
        return child

    def _new(
        self,
        parent: int,
        action: str | None,
        depth: int,
        prior: float,
        t: Transition,
        proposal: Proposal | None,
        estimate: float | None,
    ) -> int:
        slot = self._slot(t, proposal, estimate)
        row = (parent, depth, prior, float(t.reward), bool(t.terminal), 0.0, slot, 0, self._born)
        objects = (action, None, t.token, t.observation, t.info, t.delta)
        if self._free_nodes:
            node = self._free_nodes.pop()
            for column, value in zip(self._numeric, row, strict=True):
                column[node] = value
            (
                self.action[node],
                self.children[node],
                self.token[node],
                self.observation[node],
                self.info[node],
                self.delta[node],
            ) = objects
        else:
            node = len(self.parent)
            for column, value in zip(self._numeric, row, strict=True):
                column.append(value)
            for column, value in zip(self._objects, objects, strict=True):
                column.append(value)
        self._born += 1
        self._size += 1
        return node

    def _slot(self, t: Transition, proposal: Proposal | None, estimate: float | None) -> int:
        key = t.key
        if key is not None:
            found = self._by_key.get(key)
            if found is not None:
                self.slot_refs[found] += 1
                return found
        if t.terminal:
            # Nothing follows a terminal state: no actions, and no future value.
            actions, priors, estimate = (), (), 0.0
        else:
            if proposal is None or estimate is None:
                raise ValueError("a new state needs its proposal and value estimate")
            if proposal is not self._checked[0]:  # a cached proposal is checked once
                self._checked = (proposal, *_priors(proposal))
            _, actions, priors = self._checked
            estimate = float(estimate)
            if not math.isfinite(estimate):
                raise ValueError(f"value estimate must be finite, got {estimate}")
        values = (0, 0.0, 1, estimate)
        if self._free_slots:
            slot = self._free_slots.pop()
            for column, value in zip(self._slot_numeric, values, strict=True):
                column[slot] = value
            self.slot_key[slot], self.slot_actions[slot], self.slot_priors[slot] = (
                key,
                actions,
                priors,
            )
        else:
            slot = len(self.slot_visits)
            for column, value in zip(self._slot_numeric, values, strict=True):
                column.append(value)
            self.slot_key.append(key)
            self.slot_actions.append(actions)
            self.slot_priors.append(priors)
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
        g = value
        discount, reward, slot = self.discount, self.reward, self.slot
        returns = []
        for node in reversed(path):
            returns.append(g)
            g = reward[node] + discount * g
            if node != self.root:
                if g < self.qmin:
                    self.qmin = g
                if g > self.qmax:
                    self.qmax = g
        visits, sums, count = self.slot_visits, self.slot_value_sum, self.count
        if not self._by_key:  # no keys, no shared slots: no state can repeat
            for node, g in zip(path, reversed(returns), strict=True):
                count[node] += 1
                s = slot[node]
                visits[s] += 1
                sums[s] += g
            return
        seen: set[int] = set()
        for node, g in zip(path, reversed(returns), strict=True):
            count[node] += 1
            s = slot[node]
            if s in seen:
                continue
            seen.add(s)
            visits[s] += 1
            sums[s] += g

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
            for c in (self.children[a] or {}).values():
                if c != below and c != PRUNED:
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
            kids = self.children[node]
            if not kids:
                continue
            scored = [
                (a, c, self.q(c))
                for a, c in kids.items()
                if c != PRUNED and self.visits(c) >= min_visits
            ]
            if len(scored) < 2:
                continue
            best = max(q for _, _, q in scored)
            for action, c, q in scored:
                if q < best - margin:
                    self._free_subtree(c)
                    kids[action] = PRUNED
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
            if self.parent[node] == FREE:  # went with an earlier victim's subtree
                continue
            del self.children[self.parent[node]][self.action[node]]
            freed += self._free_subtree(node)
        self.evicted += freed
        return freed

    def _free_subtree(self, node: int) -> int:
        stack, freed = [node], 0
        while stack:
            x = stack.pop()
            stack.extend(c for c in (self.children[x] or {}).values() if c != PRUNED)
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
            self._free_slots.append(s)
        self.parent[node] = FREE
        self.slot[node] = -1
        for column in self._objects:
            column[node] = None
        self._free_nodes.append(node)
        self._size -= 1
