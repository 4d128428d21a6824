"""The relation graph: directed, typed edges with confidence, step and optional TTL.

Edges are indexed both ways, ``out[src][(relation, dst)]`` and ``in[dst][(relation,
src)]``, in nested ``immutables.Map``s, so ``outgoing`` and ``incoming`` cost
O(degree) and never scan the other edges. The graph is a persistent value: every
change returns a new graph in O(log n) and leaves the old one intact.

TTL expiry uses a persistent heap keyed by ``(expires_at, seq)`` whose items are edge
keys (``seq`` counts additions: cheap integer ties, deterministic order). Removing or
re-adding an edge leaves its old heap entry behind; ``expire`` drops such stale
entries when it meets them (lazy invalidation), so it costs O((expired + stale) log n)
and each entry is popped once: never a scan of all edges.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from typing import NamedTuple

import immutables

from wmkit.world import _pheap
from wmkit.world.errors import (
    ConfidenceError,
    InvalidEdgeError,
    UnknownEdgeError,
    UnknownEntityError,
)

__all__ = ["Edge", "RelationGraph"]

_EMPTY: immutables.Map = immutables.Map()


class Edge(NamedTuple):
    """A directed edge ``src -relation-> dst``.

    Attributes:
        src: source entity id.
        relation: relation name, e.g. ``"assigned_to"``.
        dst: destination entity id.
        confidence: belief in the edge, in [confidence floor, 1].
        step: the step it was added at.
        expires_at: the step at which ``expire`` removes it (``step + ttl``), or None
            for an edge that never expires. It is live for steps ``step .. expires_at-1``.
    """

    src: str
    relation: str
    dst: str
    confidence: float = 1.0
    step: int = 0
    expires_at: int | None = None


class RelationGraph:
    """A persistent directed multigraph keyed by ``(src, relation, dst)``.

    At most one edge per key: adding an existing key replaces that edge.
    """

    __slots__ = ("_count", "_expiry", "_floor", "_in", "_out", "_seq")

    def __init__(self, *, confidence_floor: float = 0.0) -> None:
        """Create an empty graph.

        Args:
            confidence_floor: edges with a lower confidence are refused (never clamped
                up: a weak belief must not silently become a stronger one).
        """
        if not 0.0 <= confidence_floor <= 1.0:
            raise ConfidenceError(f"confidence_floor must be in [0, 1], got {confidence_floor}")
        self._floor = float(confidence_floor)
        self._out: immutables.Map = _EMPTY
        self._in: immutables.Map = _EMPTY
        self._expiry: _pheap.Heap = None  # entries ((expires_at, seq), (src, relation, dst))
        self._count = 0
        self._seq = 0

    def _with(
        self, out: immutables.Map, in_: immutables.Map, expiry: _pheap.Heap, count: int, seq: int
    ) -> RelationGraph:
        new = object.__new__(RelationGraph)
        new._floor, new._out, new._in = self._floor, out, in_
        new._expiry, new._count, new._seq = expiry, count, seq
        return new

    @property
    def confidence_floor(self) -> float:
        """The lowest confidence an edge may have."""
        return self._floor

    def __len__(self) -> int:
        return self._count

    def __contains__(self, key: object) -> bool:
        """Whether ``(src, relation, dst)`` is an edge."""
        if not isinstance(key, tuple) or len(key) != 3:
            return False
        src, relation, dst = key
        return (relation, dst) in self._out.get(src, _EMPTY)

    def __eq__(self, other: object) -> bool:
        # The expiry heap is an index (it may hold stale entries): compare the edges.
        if isinstance(other, RelationGraph):
            return self._floor == other._floor and self._out == other._out
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RelationGraph({self._count} edges; confidence_floor={self._floor})"

    def edge(self, src: str, relation: str, dst: str) -> Edge:
        """Return the edge ``(src, relation, dst)``.

        Raises:
            UnknownEdgeError: no such edge.
        """
        found = self._out.get(src, _EMPTY).get((relation, dst))
        if found is None:
            raise UnknownEdgeError(f"no edge {src} -{relation}-> {dst}")
        return found

    def edges(self) -> Iterator[Edge]:
        """Iterate over every edge, in no particular order (O(E))."""
        for adjacent in self._out.values():
            yield from adjacent.values()

    def outgoing(self, src: str, relation: str | None = None) -> tuple[Edge, ...]:
        """Return the edges leaving ``src``, optionally of one relation.

        Sorted by ``(relation, dst)`` so results are deterministic. O(d log d) for the
        out-degree d of ``src``; empty for an unknown id.
        """
        adjacent = self._out.get(src, _EMPTY)
        found = [e for e in adjacent.values() if relation is None or e.relation == relation]
        found.sort(key=lambda e: (e.relation, e.dst))
        return tuple(found)

    def incoming(self, dst: str, relation: str | None = None) -> tuple[Edge, ...]:
        """Return the edges entering ``dst``, sorted by ``(relation, src)``; O(d log d)."""
        adjacent = self._in.get(dst, _EMPTY)
        found = [e for e in adjacent.values() if relation is None or e.relation == relation]
        found.sort(key=lambda e: (e.relation, e.src))
        return tuple(found)

    def add_edge(
        self,
        src: str,
        relation: str,
        dst: str,
        *,
        confidence: float = 1.0,
        step: int = 0,
        ttl: int | None = None,
        entities: Container[str] | None = None,
    ) -> RelationGraph:
        """Return a graph that also holds ``src -relation-> dst`` (replacing it if present).

        Args:
            src: source entity id.
            relation: relation name (non-empty).
            dst: destination entity id.
            confidence: in [confidence_floor, 1].
            step: the current step.
            ttl: steps the edge lives (>= 1); None for no expiry.
            entities: known entity ids (e.g. an ``EntityRegistry``); when given, an
                endpoint outside it is refused as dangling.

        Raises:
            ConfidenceError, UnknownEntityError, InvalidEdgeError (empty relation, ttl < 1).
        """
        edge = Edge(src, relation, dst, confidence, step, None if ttl is None else step + ttl)
        self._check(edge, entities)
        adjacent = self._out.get(src, _EMPTY)
        count = self._count + ((relation, dst) not in adjacent)
        out = self._out.set(src, adjacent.set((relation, dst), edge))
        in_ = self._in.set(dst, self._in.get(dst, _EMPTY).set((relation, src), edge))
        expiry, seq = self._expiry, self._seq
        if edge.expires_at is not None:
            expiry = _pheap.push(expiry, (edge.expires_at, seq), (src, relation, dst))
            seq += 1
        return self._with(out, in_, expiry, count, seq)

    def add_edges(
        self, edges: Iterable[Edge], *, entities: Container[str] | None = None
    ) -> RelationGraph:
        """Return a graph that also holds ``edges`` (each with ``expires_at`` set already).

        All or nothing: one invalid edge raises and nothing is added. One batch
        (``Map.mutate``), much faster than repeated ``add_edge`` for bulk loads.
        """
        new_out: dict[str, dict[tuple[str, str], Edge]] = {}
        new_in: dict[str, dict[tuple[str, str], Edge]] = {}
        expiring: list[tuple[tuple[int, int], tuple[str, str, str]]] = []
        seq = self._seq
        for edge in edges:
            self._check(edge, entities)
            new_out.setdefault(edge.src, {})[edge.relation, edge.dst] = edge
            new_in.setdefault(edge.dst, {})[edge.relation, edge.src] = edge
            if edge.expires_at is not None:
                expiring.append(((edge.expires_at, seq), (edge.src, edge.relation, edge.dst)))
                seq += 1
        count = self._count
        with self._out.mutate() as out:
            for src, adjacent in new_out.items():
                old = out.get(src, _EMPTY)
                count += sum(1 for key in adjacent if key not in old)
                out[src] = old.update(adjacent)
            out_map = out.finish()
        with self._in.mutate() as in_:
            for dst, adjacent in new_in.items():
                in_[dst] = in_.get(dst, _EMPTY).update(adjacent)
            in_map = in_.finish()
        expiring.sort(key=_first)  # keys are unique: items are never compared
        expiry = _pheap.merge(self._expiry, _pheap.from_sorted(expiring))
        return self._with(out_map, in_map, expiry, count, seq)

    def _check(self, edge: Edge, entities: Container[str] | None) -> None:
        if not edge.relation or not isinstance(edge.relation, str):
            raise InvalidEdgeError(f"edge {_name(edge)}: relation must be a non-empty string")
        if not self._floor <= edge.confidence <= 1.0:
            raise ConfidenceError(
                f"edge {_name(edge)}: confidence {edge.confidence} is outside "
                f"[{self._floor} (the graph's floor), 1.0]"
            )
        if edge.expires_at is not None and edge.expires_at <= edge.step:
            raise InvalidEdgeError(f"edge {_name(edge)}: ttl must be >= 1 step")
        if entities is not None:
            if edge.src not in entities:
                raise UnknownEntityError(f"edge {_name(edge)}: dangling src {edge.src!r}")
            if edge.dst not in entities:
                raise UnknownEntityError(f"edge {_name(edge)}: dangling dst {edge.dst!r}")

    def remove_edge(self, src: str, relation: str, dst: str) -> RelationGraph:
        """Return a graph without ``src -relation-> dst``.

        Raises:
            UnknownEdgeError: no such edge.
        """
        self.edge(src, relation, dst)
        return self._with(
            _drop(self._out, src, (relation, dst)),
            _drop(self._in, dst, (relation, src)),
            self._expiry,  # its heap entry goes stale; expire() skips it
            self._count - 1,
            self._seq,
        )

    def next_expiry(self) -> int | None:
        """Return the earliest expiry step in the heap (maybe stale), or None.

        Only a lower bound on the next real expiry, which is all ``advance`` needs to
        skip quiet steps.
        """
        return None if self._expiry is None else self._expiry[1][0]

    def expire(self, step: int) -> tuple[RelationGraph, tuple[Edge, ...]]:
        """Remove every edge with ``expires_at <= step``.

        Returns:
            ``(graph, expired)``: the new graph and the removed edges, by
            ``expires_at``, then in the order they were added.
        """
        heap, out, in_ = self._expiry, self._out, self._in
        expired: list[Edge] = []
        while heap is not None and heap[1][0] <= step:
            (expires_at, _), (src, relation, dst), heap = _pheap.pop(heap)
            edge = out.get(src, _EMPTY).get((relation, dst))
            if edge is None or edge.expires_at != expires_at:
                continue  # stale: removed, or re-added with another expiry
            out = _drop(out, src, (relation, dst))
            in_ = _drop(in_, dst, (relation, src))
            expired.append(edge)
        if heap is self._expiry:
            return self, ()
        return self._with(out, in_, heap, self._count - len(expired), self._seq), tuple(expired)


def _name(edge: Edge) -> str:
    return f"{edge.src} -{edge.relation}-> {edge.dst}"


def _first(entry: tuple) -> object:
    return entry[0]


def _drop(index: immutables.Map, node: str, key: tuple[str, str]) -> immutables.Map:
    """Remove ``key`` from ``index[node]``, dropping the node when it empties."""
    adjacent = index[node].delete(key)
    return index.set(node, adjacent) if adjacent else index.delete(node)
