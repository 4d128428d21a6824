"""Benchmark ``wmkit.world``: per-operation cost as the world grows.

For each size n the script builds a world of n entities, n edges (half with a TTL)
and n pending events, then times single operations against it. Every operation works
on the same size-n world (the structures are persistent, so nothing accumulates), and
the last column divides by the cost at the smallest size: a flat ratio means no O(n)
scan on that path; HAMT depth (log32 n) and CPU caches account for a modest rise.

As ``timeit`` does, the cyclic GC is paused while building and timing (``--gc``
keeps it on while timing): its young-generation passes walk into the big heap, so they
add a cost that grows with the heap and belongs to CPython, not to the operation. The
row ``baseline: dict get`` is a plain dict lookup at the same size, for the share of
any rise that random access into a bigger heap costs on CPU caches alone.

    python scripts/bench_world.py                       # 10^3 .. 10^6, ~1-2 minutes
    python scripts/bench_world.py --sizes 1000,10000 --ops 500
"""

from __future__ import annotations

import argparse
import gc
import random
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from wmkit.world import (
    AddRelation,
    Edge,
    EntityContract,
    EntityRegistry,
    EventTimeline,
    RelationGraph,
    ScheduledEvent,
    UpdateEntity,
    World,
    apply,
    canonical_id,
)

TYPE = "node"
CONTRACTS = [EntityContract(TYPE, {"level"})]


def build(n: int, rng: random.Random) -> tuple[World, list[str]]:
    registry = EntityRegistry(CONTRACTS).register_many(
        ((TYPE, str(i), {"status": "ok", "level": i}) for i in range(n)), step=0
    )
    ids = [canonical_id(TYPE, str(i)) for i in range(n)]
    edges = (
        Edge(ids[i], "link", ids[rng.randrange(n)], 1.0, 0, 2 + i % 1000 if i % 2 else None)
        for i in range(n)
    )
    graph = RelationGraph().add_edges(edges, entities=registry)
    timeline = EventTimeline().schedule_many(
        ScheduledEvent(event_id=f"e{i}", due=2 + i % 1000, deadline=2 + i % 1000, reason="bench")
        for i in range(n)
    )
    return World(registry, graph, timeline, step=0), ids


def timed(fn: Callable[[int], object], ops: int, repeat: int) -> float:
    """Return the best seconds per call of ``fn(i)`` over ``repeat`` batches of ``ops``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for i in range(ops):
            fn(i)
        best = min(best, (time.perf_counter() - start) / ops)
    return best


def bench_size(
    n: int, ops: int, repeat: int, seed: int, keep_gc: bool
) -> tuple[dict[str, float], float]:
    rng = random.Random(seed)
    gc.disable()
    start = time.perf_counter()
    world, ids = build(n, rng)
    built = time.perf_counter() - start
    gc.freeze()  # the world is long-lived: no collection needs to walk it again
    if keep_gc:
        gc.enable()
    plain = dict.fromkeys(ids, 0)
    reg, graph, timeline = world.registry, world.graph, world.timeline
    pick = [rng.randrange(n) for _ in range(ops)]
    other = [rng.randrange(n) for _ in range(ops)]
    updates = [UpdateEntity(entity_id=ids[p], attributes={"level": -1}, reason="b") for p in pick]
    adds = [
        AddRelation(src=ids[p], relation="bench", dst=ids[o], ttl=5, reason="b")
        for p, o in zip(pick, other, strict=True)
    ]
    # One event due at step 1, before any of the n pending ones (due >= 2).
    events = [ScheduledEvent(event_id=f"new{i}", due=1, deadline=1, reason="b") for i in range(ops)]
    # ``ops`` fresh edges expiring at step 1, on top of the n/2 TTL edges already in the heap.
    expiring = graph.add_edges(
        Edge(ids[p], "short", ids[o], 1.0, 0, 1) for p, o in zip(pick, other, strict=True)
    )

    def register_lookup(i: int) -> None:
        reg.register(TYPE, f"new{i}", {"status": "ok"}, step=0)
        reg.id_of(TYPE, str(pick[i]))

    def no_facts(subject: str, relation: str) -> tuple[str, ...]:
        return ()

    def expire_all(_: int) -> None:
        expiring.expire(1)

    results = {
        "baseline: dict get": timed(lambda i: plain[ids[pick[i]]], ops, repeat),
        "registry register+lookup": timed(register_lookup, ops, repeat),
        "graph add_edge": timed(
            lambda i: graph.add_edge(ids[pick[i]], "bench", ids[other[i]], entities=reg),
            ops,
            repeat,
        ),
        "graph outgoing": timed(lambda i: graph.outgoing(ids[pick[i]]), ops, repeat),
        "graph incoming": timed(lambda i: graph.incoming(ids[pick[i]]), ops, repeat),
        # one expire() call removes ``ops`` edges: report the cost per expired edge
        "graph expire (per edge)": timed(expire_all, 1, repeat) / ops,
        "apply(update_entity)": timed(lambda i: apply(world, updates[i]), ops, repeat),
        "apply(add_relation)": timed(lambda i: apply(world, adds[i]), ops, repeat),
        "timeline schedule+drain": timed(
            lambda i: timeline.schedule(events[i]).drain(1, no_facts), ops, repeat
        ),
    }
    assert len(expiring.expire(1)[1]) == len(set(zip(pick, other, strict=True)))
    gc.enable()
    return results, built


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000")
    parser.add_argument("--ops", type=int, default=5000, help="timed operations per batch")
    parser.add_argument("--repeat", type=int, default=5, help="batches; the best is kept")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gc", action="store_true", help="keep the cyclic GC on while timing")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    console = Console()
    rows: dict[str, dict[int, float]] = {}
    for n in sizes:
        results, built = bench_size(n, args.ops, args.repeat, args.seed, args.gc)
        gc.unfreeze()  # the world of size n is gone: let the collector have it back
        gc.collect()
        console.print(f"size {n:>9,}: world built in {built:6.2f}s (n entities, edges, events)")
        for name, seconds in results.items():
            rows.setdefault(name, {})[n] = seconds
    base = sizes[0]
    gc_note = "GC on" if args.gc else "GC paused"
    table = Table(
        title=f"wmkit.world per-operation cost ({args.ops} ops, best of {args.repeat}, {gc_note})"
    )
    for column in ("operation", "size", "µs/op", "ops/s", f"× vs {base:,}"):
        table.add_column(column, justify="left" if column == "operation" else "right")
    for name, by_size in rows.items():
        for n in sizes:
            seconds = by_size[n]
            table.add_row(
                name if n == base else "",
                f"{n:,}",
                f"{seconds * 1e6:.2f}",
                f"{1 / seconds:,.0f}",
                f"{seconds / by_size[base]:.2f}",
                end_section=n == sizes[-1],
            )
    console.print(table)


if __name__ == "__main__":
    main()
