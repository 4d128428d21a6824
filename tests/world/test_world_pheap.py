import random

from wmkit.world import _pheap


def drain(heap):
    out = []
    while heap is not None:
        key, _, heap = _pheap.pop(heap)
        out.append(key)
    return out


def test_push_pop_sorts_and_old_versions_survive():
    rng = random.Random(0)
    keys = [rng.randrange(1000) for _ in range(500)]
    heap, versions = None, []
    for i, key in enumerate(keys):
        heap = _pheap.push(heap, (key, i), None)
        versions.append(heap)
    assert drain(heap) == sorted((k, i) for i, k in enumerate(keys))
    # every intermediate version still holds exactly its own prefix
    assert drain(versions[99]) == sorted((k, i) for i, k in enumerate(keys[:100]))


def test_from_sorted_and_merge():
    chain = _pheap.from_sorted([((i, 0), i) for i in range(0, 100, 2)])
    other = None
    for i in range(1, 100, 2):
        other = _pheap.push(other, (i, 0), i)
    merged = _pheap.merge(chain, other)
    assert [k for k, _ in drain(merged)] == list(range(100))


def test_rank_stays_logarithmic():
    heap = None
    for i in range(2**12):
        heap = _pheap.push(heap, -i, None)  # decreasing keys: worst case for a naive heap
    assert heap[0] <= 13
