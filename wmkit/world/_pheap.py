"""A persistent leftist heap: push and pop in O(log n), every old version stays valid.

``heapq`` mutates one list, so two worlds that share a timeline would see each other's
pops. A leftist heap is a tree whose right spine has at most log2(n + 1) nodes; merge
walks only right spines and copies only the nodes it walks, so push and pop allocate
O(log n) new nodes and share the rest. The bounds are worst-case, not amortised, which
is what persistence needs (a skew heap's amortised bound breaks when versions fork).

A heap is ``None`` (empty) or a node tuple ``(rank, key, item, left, right)``; keys are
compared with ``<`` only, items never.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["Heap", "from_sorted", "merge", "pop", "push"]

Heap = Any  # None | tuple[int, key, item, Heap, Heap]; Any keeps the recursion simple


def merge(a: Heap, b: Heap) -> Heap:
    """Return the heap holding the entries of ``a`` and ``b`` (both left intact)."""
    if a is None:
        return b
    if b is None:
        return a
    if b[1] < a[1]:
        a, b = b, a
    _, key, item, left, right = a
    # Recursion depth is the sum of the two right-spine lengths: at most ~2 log2(n).
    right = merge(right, b)
    if left is None or left[0] < right[0]:
        left, right = right, left  # keep rank(left) >= rank(right)
    return ((right[0] if right is not None else 0) + 1, key, item, left, right)


def push(heap: Heap, key: Any, item: Any) -> Heap:
    """Return ``heap`` with ``(key, item)`` added."""
    return merge(heap, (1, key, item, None, None))


def pop(heap: Heap) -> tuple[Any, Any, Heap]:
    """Return ``(key, item, rest)`` for the smallest key; ``heap`` must not be empty."""
    _, key, item, left, right = heap
    return key, item, merge(left, right)


def from_sorted(entries: Iterable[tuple[Any, Any]]) -> Heap:
    """Build a heap from ``(key, item)`` pairs already sorted by key, in O(n).

    A left-leaning chain is a valid leftist heap (every right child is empty), and
    later pushes and pops on it stay O(log n).
    """
    heap: Heap = None
    for key, item in reversed(list(entries)):
        heap = (1, key, item, heap, None)
    return heap
