"""Benchmark ``wmkit.knowledge``: world-graph merge cost as scenes grow; rule distillation.

Sections (run all, or leave some out with ``--skip``):

``merge``
    For each size n, merges n synthetic scene deltas (JSON text, as a distiller
    returns it) into a fresh graph bound to a temporary directory, flushing every
    ``--flush-every`` scenes. The synthetic world grows with n (n/20 rooms, n/5
    objects, n/50 rules, each stated in paraphrases), so later scenes meet a bigger
    graph. Linear growth shows as a flat time per scene; the last column divides by
    the smallest size. ``raw`` is a baseline measured in the same run on the same
    text: ``json.loads`` and a plain dict upsert per part, no validation, evidence or
    similarity: the ratio is what the graph's bookkeeping costs on top of parsing.
``incremental``
    Builds a graph of ``--incremental-size`` scenes and saves it, then merges 1%
    (``--incremental-fraction``) new scenes: warm (the graph in memory; merge +
    flush) and cold (``load`` + merge + flush), against a full rebuild from all
    scenes (merge + save). Prints the ratios and checks that incremental and
    rebuilt graphs hold the same rows.
``distill``
    Rule distillation throughput on one core (``wmkit.trainers.distill.bench_counting``):
    ``--distill-episodes`` random Vault episodes of 200 steps are read into counting
    examples (transitions/s), the examples are tiled to ``--distill-n`` and counted
    (examples/s; the target is >= 100k/s), against a raw baseline in the same run: a
    bare ``Counter`` of one key per example; then one whole ``CountingDistiller.fit``.

As ``bench_world`` does, the cyclic GC is paused while timing (``--gc`` keeps it on):
its full passes walk the whole graph, a cost of CPython's collector that grows with
the heap (about +20% per merge at 10^4 scenes here), not of the merge. ``cpu µs/scene``
is process time, for machines shared with other work, where wall time is not.

The 10^6 point costs ~350 s of CPU here (about 1.4 GB of memory); the default run
needs about 7.5 minutes of CPU, and much more wall time on a busy machine.
``--sizes 10000,100000,300000`` is the quick check.

    python scripts/bench_knowledge.py                        # 10^4, 10^5, 10^6
    python scripts/bench_knowledge.py --sizes 1000,10000 --incremental-size 5000
    python scripts/bench_knowledge.py --skip merge
    python scripts/bench_knowledge.py --skip merge,incremental   # distillation only
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.table import Table

from wmkit.knowledge.graph import WorldGraph

KINDS = ("door", "chest", "lamp", "lever", "box")
VALUES = {"door": "locked", "chest": "open", "lamp": "lit", "lever": "up", "box": "full"}
VERBS = ("open", "take", "push", "pull", "light", "unlock", "read", "climb")
DIRECTIONS = ("north", "south", "east", "west", "up", "down")
OUTCOMES = ("fails", "works", "breaks", "sticks")


class World:
    """Sizes of the synthetic world for ``n`` scenes: it grows with n."""

    def __init__(self, n: int) -> None:
        self.rooms = max(4, n // 20)
        self.objects = 4 * self.rooms  # object o lies in room o % rooms
        self.rules = max(4, n // 50)


def scene_delta(i: int, world: World) -> str:
    """The delta of scene ``i`` as JSON text: a deterministic function of ``i``.

    The agent is in a room, goes through one of its four exits (rooms form a ring
    with shortcuts), and sees one object of the room with a property whose value
    disagrees in one scene of five (conflicts). One rule, in one of three wordings:
    two merge by similarity, the third (naming the object) makes a rule of its own.
    """
    rng = random.Random(i)
    room = rng.randrange(world.rooms)
    exit_ = rng.randrange(4)
    nxt = (room + (1, -1, 7, -7)[exit_]) % world.rooms
    obj = room + world.rooms * rng.randrange(4)
    kind = KINDS[obj % len(KINDS)]
    prop = VALUES[kind]
    value = obj % 2 == 0 if rng.random() < 0.8 else obj % 2 == 1
    r = rng.randrange(world.rules)
    rkind, verb = KINDS[r % len(KINDS)], VERBS[r % len(VERBS)]
    condition = f"{rkind}{r}.{VALUES[rkind]} == {'true' if r % 3 else 'false'}"
    style = rng.randrange(3)
    if style == 1:
        condition = "the " + condition
    action = f"{verb} {rkind}{r} {OUTCOMES[r % len(OUTCOMES)]}"
    if style == 2:
        action += f" near {kind}{obj}"
    entities = [{"name": f"room:{room}", "type": "room"}]
    if nxt != room:
        entities.append({"name": f"room:{nxt}", "type": "room"})
    entities.append({"name": f"{kind}:{obj}", "type": kind, "properties": {prop: value}})
    delta = {
        "entities": entities,
        "edges": [
            {"relation": "containment", "src_ref": f"room:{room}", "dst_ref": f"{kind}:{obj}"},
            {
                "relation": "transition",
                "src_ref": f"room:{room}",
                "dst_ref": f"room:{nxt}",
                "trigger": f"go {DIRECTIONS[exit_]}",
            },
        ],
        "rules": [
            {
                "condition": condition,
                "action": action,
                "confidence": round(0.5 + 0.5 * rng.random(), 2),
                "linked_nodes": [f"{kind}:{obj}"],
            }
        ],
    }
    return json.dumps(delta)


def chunks(start: int, stop: int, size: int, world: World) -> Iterator[list[str]]:
    for lo in range(start, stop, size):
        yield [scene_delta(i, world) for i in range(lo, min(stop, lo + size))]


def raw_upsert(texts: list[str], store: dict) -> None:
    """The baseline: parse, then put every part in a dict by its key."""
    for text in texts:
        delta = json.loads(text)
        for e in delta["entities"]:
            store[e["name"]] = e
        for e in delta["edges"]:
            store[(e["src_ref"], e["relation"], e["dst_ref"], e.get("trigger"))] = e
        for r in delta["rules"]:
            store[(r["condition"], r["action"])] = r


class Timing(NamedTuple):
    """Seconds spent merging, flushing, and on the raw baseline; CPU seconds of the first two."""

    merge: float
    flush: float
    raw: float
    cpu: float


def merge_scenes(
    graph: WorldGraph, start: int, stop: int, world: World, flush_every: int
) -> Timing:
    """Merge scenes ``start..stop-1`` (flushing every ``flush_every`` if bound to a dir)."""
    merge_s = flush_s = raw_s = cpu = 0.0
    store: dict = {}
    for texts in chunks(start, stop, flush_every, world):
        c0, t0 = time.process_time(), time.perf_counter()
        for offset, text in enumerate(texts):
            graph.merge(text, scene=f"s{start + offset}")
        t1 = time.perf_counter()
        if graph.directory is not None:
            graph.flush()
        t2, c2 = time.perf_counter(), time.process_time()
        raw_upsert(texts, store)
        t3 = time.perf_counter()
        merge_s, flush_s, raw_s = merge_s + t1 - t0, flush_s + t2 - t1, raw_s + t3 - t2
        cpu += c2 - c0
        start += len(texts)
    return Timing(merge_s, flush_s, raw_s, cpu)


def section_merge(args: argparse.Namespace, console: Console) -> None:
    title = "merge: n scenes into a fresh graph (validate + merge + journal flush)"
    table = Table(title=title)
    for col in ("scenes", "nodes", "edges", "rules", "merge s", "flush s", "total s"):
        table.add_column(col, justify="right")
    for col in ("µs/scene", "cpu µs/scene", "× raw", "µs/scene vs first"):
        table.add_column(col, justify="right")
    first = None
    for n in args.sizes:
        world = World(n)
        with tempfile.TemporaryDirectory() as tmp:
            graph = WorldGraph("bench")
            graph.save(tmp)
            t = merge_scenes(graph, 0, n, world, args.flush_every)
        total = t.merge + t.flush
        per = total / n * 1e6
        first = first or per
        stats = graph.stats
        console.print(f"  {n:,} scenes: {total:.1f} s, {per:.1f} µs/scene", style="dim")
        table.add_row(
            f"{n:,}",
            f"{stats.nodes:,}",
            f"{stats.edges:,}",
            f"{stats.rules:,}",
            f"{t.merge:.2f}",
            f"{t.flush:.2f}",
            f"{total:.2f}",
            f"{per:.1f}",
            f"{t.cpu / n * 1e6:.1f}",
            f"{total / t.raw:.1f}",
            f"{per / first:.2f}",
        )
        del graph
        gc.collect()
    console.print(table)


def section_incremental(args: argparse.Namespace, console: Console) -> None:
    n = args.incremental_size
    new = max(1, int(n * args.incremental_fraction))
    world = World(n + new)  # one world for both paths, so they see the same scenes
    with tempfile.TemporaryDirectory() as tmp:
        warm_dir, cold_dir, full_dir = (Path(tmp, d) for d in ("warm", "cold", "full"))
        graph = WorldGraph("bench")
        graph.save(warm_dir)
        merge_scenes(graph, 0, n, world, args.flush_every)
        graph.compact()
        shutil.copytree(warm_dir, cold_dir)

        t = merge_scenes(graph, n, n + new, world, args.flush_every)
        warm = t.merge + t.flush

        gc.collect()
        t0 = time.perf_counter()
        cold_graph = WorldGraph.load(cold_dir)
        t_load = time.perf_counter() - t0
        t = merge_scenes(cold_graph, n, n + new, world, args.flush_every)
        cold = t_load + t.merge + t.flush

        rebuilt = WorldGraph("bench")
        t = merge_scenes(rebuilt, 0, n + new, world, args.flush_every)
        t0 = time.perf_counter()
        rebuilt.save(full_dir)
        rebuild = t.merge + time.perf_counter() - t0
        want = rebuilt.records()
        same = graph.records() == want and WorldGraph.load(cold_dir).records() == want

    table = Table(title=f"incremental: {new:,} new scenes on {n:,} vs full rebuild of {n + new:,}")
    for col in ("path", "seconds", "× full rebuild"):
        table.add_column(col, justify="right")
    table.add_row("full rebuild (merge all + save)", f"{rebuild:.2f}", "1.000")
    table.add_row("incremental warm (merge + flush)", f"{warm:.3f}", f"{warm / rebuild:.4f}")
    table.add_row(
        f"incremental cold (load {t_load:.2f}s + merge + flush)",
        f"{cold:.3f}",
        f"{cold / rebuild:.4f}",
    )
    console.print(table)
    console.print(f"incremental graph == rebuilt graph: {same}")
    if not same:
        raise SystemExit("incremental and rebuilt graphs differ")


def section_distill(args: argparse.Namespace, console: Console) -> None:
    # Imported here: the distiller pulls in the envs, which the graph sections do not need.
    from wmkit.trainers.distill import bench_counting, bench_transitions

    transitions = bench_transitions(episodes=args.distill_episodes)
    found = bench_counting(args.distill_n, transitions=transitions)
    table = Table(
        title=f"distill: {found['transitions']:,} Vault transitions, counted x{args.distill_n:,}"
    )
    for col in ("phase", "per second", "× raw"):
        table.add_column(col, justify="right")
    table.add_row("read into examples (transitions)", f"{found['read_per_s']:,.0f}", "")
    table.add_row(
        "count (examples; target 100,000)", f"{found['count_per_s']:,.0f}", f"{found['ratio']:.1f}"
    )
    table.add_row("raw: Counter of one key each", f"{found['raw_per_s']:,.0f}", "1.0")
    table.add_row(
        f"whole fit -> {found['rules']:,} rules (transitions)", f"{found['fit_per_s']:,.0f}", ""
    )
    console.print(table)
    met = "met" if found["count_per_s"] >= 100_000 else "NOT met"
    console.print(f"counting target (>= 100k examples/s on one core): {met}")


SECTIONS: dict[str, Callable[[argparse.Namespace, Console], None]] = {
    "merge": section_merge,
    "incremental": section_incremental,
    "distill": section_distill,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="scene counts")
    parser.add_argument("--flush-every", type=int, default=5000, help="scenes per flush")
    parser.add_argument("--incremental-size", type=int, default=100_000)
    parser.add_argument("--incremental-fraction", type=float, default=0.01)
    parser.add_argument(
        "--skip", default="", help=f"comma-separated sections to leave out: {', '.join(SECTIONS)}"
    )
    parser.add_argument("--gc", action="store_true", help="keep the cyclic GC on while timing")
    parser.add_argument("--distill-n", type=int, default=200_000, help="examples counted")
    parser.add_argument("--distill-episodes", type=int, default=4, help="Vault episodes read")
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    skip = {s for s in args.skip.split(",") if s}
    unknown = skip - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; known: {', '.join(SECTIONS)}")
    console = Console(width=max(Console().width, 150))
    if not args.gc:
        gc.disable()
    console.print(f"cyclic GC {'on' if args.gc else 'paused'} while timing (see the docstring)")
    for name, section in SECTIONS.items():
        if name not in skip:
            section(args, console)
            gc.collect()


if __name__ == "__main__":
    main()
