"""Benchmark the evaluation's own costs, part by part (``--part``).

``leaderboard``: the leaderboard step (:func:`~wmkit.evals.leaderboard.summarise`, then
:func:`~wmkit.evals.leaderboard.write_leaderboard`: Markdown, CSVs, plots, HTML) on a
row set the size of the default main job's (seven envs, horizons 50/200/500, five
seeds, the default agents where they play; synthetic but shaped like real rows), or on
a ``results.jsonl`` given by ``--results``. It runs twice in the same process: with
the replicate-by-replicate bootstrap the leaderboard used before (kept here only, as
the "before") and with the vectorised one of :mod:`wmkit.evals.stats`, then prints
both times, their ratio, and whether the intervals are identical.

    python scripts/bench_eval.py                      # every part
    python scripts/bench_eval.py --part leaderboard --results runs/<date>/results.jsonl

``workers``: the main job's wall time with ``workers=1`` and ``workers=2`` (episodes
played in that many worker processes, :mod:`wmkit.evals.workers`), each a real
``wmkit-eval`` run into a new run folder, on ``--experiment`` (default ``debug``, about 2
minutes; ``--experiment none`` is the default main job, about 13 minutes warm) plus any
``--overrides``. A first small run (one seed, h=20) warms the training stages' cache
(the ``--cache-dir``, by default ``runs/cache`` as the main job's; ``--no-warmup`` when
it is warm already), so the two timed runs evaluate only; it prints both times and their
ratio.

    python scripts/bench_eval.py --part workers                   # experiment=debug
    python scripts/bench_eval.py --part workers --experiment none --no-warmup

Each part is a function in :data:`PARTS` taking the parsed arguments; a new part adds
its function there and its options to :func:`parser`.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from wmkit.evals import leaderboard, stats
from wmkit.evals.marks import CONFUSION_KEYS
from wmkit.evals.metrics import DRIFT_HORIZONS
from wmkit.evals.results import ResultsFile

FAMILIES = ("parcel", "smarthome", "booking", "vault")
GAMES = ("textworld", "textworld_cooking", "textworld_treasure")
FAMILY_AGENTS = (
    "oracle", "solver", "window", "memory", "rules", "wm_agent", "wm_no_value",
    "wm_no_correction", "wm_exact_sim", "random",
)  # fmt: skip
BOOKING_AGENTS = ("governed", "dict")
GAME_AGENTS = ("random_games", "rules_games", "greedy_games")
ORACLES = {"oracle", "solver"}
PRIVILEGED = {
    "window": ["env_parser"], "memory": ["env_parser"], "random": ["env_parser"],
    "dict": ["env_parser"], "wm_exact_sim": ["exact_simulator"],
    "greedy_games": ["exact_simulator"],
}  # fmt: skip


def synthetic_rows(
    horizons: Sequence[int] = (50, 200, 500), seeds: int = 5, rng_seed: int = 0
) -> list[dict[str, Any]]:
    """Rows shaped like the default main job's: the same cells, keys and series lengths."""
    rng = np.random.default_rng(rng_seed)
    plan = [(env, a) for env in FAMILIES for a in FAMILY_AGENTS]
    plan += [("booking", a) for a in BOOKING_AGENTS] + [(g, a) for g in GAMES for a in GAME_AGENTS]
    rows = []
    for env, agent in plan:
        level = 0.0 if agent in ORACLES else rng.uniform(0.05, 0.8)
        for horizon in horizons:
            for seed in range(seeds):
                growth = rng.uniform(0, 0.3) * (agent not in ORACLES)
                noise = rng.normal(0, 0.02, horizon + 1) * (agent not in ORACLES)
                series = np.clip(level + growth * np.linspace(0, 1, horizon + 1) + noise, 0, 1)
                drift = {"mean": float(series.mean()), "slope": float(growth * 100 / horizon)}
                drift |= {f"at_{h}": float(series[h]) for h in DRIFT_HORIZONS if h <= horizon}
                chains = rng.integers(0, horizon, horizon // 5)
                kinds = rng.choice(["drift", "confusion"], chains.size)
                probes = [
                    [int(c), bool(rng.random() > level * c / horizon), str(kind)]
                    for c, kind in zip(chains, kinds, strict=True)
                ]
                most = int(rng.integers(5, 15))
                confusion = {k: float(rng.uniform(0.3, 1.0)) for k in CONFUSION_KEYS}
                confusion |= {"action_steps": horizon // 2, "event_steps": horizon // 4}
                rows.append(dict(
                    env=env, env_id=f"wmkit/{env}", horizon=horizon, seed=seed, agent=agent,
                    oracle=agent in ORACLES, privileged=PRIVILEGED.get(agent, []), variant="",
                    spec=f"{env}-{agent}", steps=horizon, score=int(rng.integers(0, most + 1)),
                    max_score=most, drift=drift, drift_series=[round(float(d), 4) for d in series],
                    probes=probes, stale_use=float(rng.uniform(0, 0.1)), confusion=confusion,
                ))  # fmt: skip
    return rows


def loop_aggregate(
    strata: Sequence[Sequence[float]], *, reps: int = stats.REPS, seed: int = 0
) -> stats.Aggregate:
    """The leaderboard's bootstrap before it was vectorised: one replicate at a time."""
    groups = [np.asarray(s, dtype=float) for s in strata if len(s)]
    if not groups:
        nan = float("nan")
        return stats.Aggregate(nan, nan, nan, nan, 0)
    flat = np.concatenate(groups)
    rng = np.random.default_rng(seed)
    boot = np.empty(reps)
    for i in range(reps):
        boot[i] = stats.iqm(np.concatenate([g[rng.integers(0, g.size, g.size)] for g in groups]))
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return stats.Aggregate(
        stats.iqm(flat), float(flat.mean()), float(lo), float(hi), int(flat.size)
    )


@contextmanager
def _bootstrap(kind: str) -> Iterator[None]:
    """Swap the leaderboard's aggregate for the loop ("before") or keep the vectorised one."""
    saved = leaderboard.aggregate
    leaderboard.aggregate = loop_aggregate if kind == "before" else saved
    try:
        yield
    finally:
        leaderboard.aggregate = saved


def _intervals(summaries: Sequence[dict[str, Any]]) -> list[tuple[float, float]]:
    return [
        (v.ci_low, v.ci_high)
        for s in summaries
        for v in s.values()
        if isinstance(v, stats.Aggregate)
    ]


def _same(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-12
        for p, q in zip(a, b, strict=True)
        for x, y in zip(p, q, strict=True)
    )


def bench_leaderboard(args: argparse.Namespace) -> None:
    """Time summarise + write_leaderboard with the loop bootstrap, then the vectorised one."""
    if args.results:
        rows = list(ResultsFile(args.results).rows())
        source = str(args.results)
    else:
        rows = synthetic_rows(args.horizons, seeds=args.seeds)
        source = f"synthetic rows ({args.seeds} seeds, horizons {args.horizons})"
    cells = len(leaderboard.cells(rows))
    print(f"leaderboard step: {len(rows)} episodes, {cells} cells, from {source}, {args.reps} reps")
    times, found = {}, {}
    for kind in ("before", "after"):
        with _bootstrap(kind), tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            summaries = leaderboard.summarise(rows, reps=args.reps)
            summarised = time.perf_counter() - start
            leaderboard.write_leaderboard(rows, out, reps=args.reps)
            times[kind] = (summarised, time.perf_counter() - start)
            found[kind] = _intervals(summaries)
        label = "loop bootstrap (before)" if kind == "before" else "vectorised (after)"
        print(
            f"  {label:<26} summarise {times[kind][0]:7.2f} s   "
            f"summarise + write {times[kind][1]:7.2f} s",
            flush=True,
        )
    before, after = times["before"], times["after"]
    print(
        f"  ratio before/after: summarise {before[0] / after[0]:.1f}x, "
        f"summarise + write {before[1] / after[1]:.1f}x"
    )
    print(f"  intervals identical: {'yes' if _same(found['before'], found['after']) else 'NO'}")


def _timed_eval(overrides: Sequence[str], run_dir: Path) -> float:
    """Run ``wmkit-eval`` with ``overrides`` into ``run_dir``; return its wall time (s)."""
    command = [sys.executable, "-m", "wmkit.scripts.eval", *overrides, f"hydra.run.dir={run_dir}"]
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"bench_eval: wmkit-eval exited {proc.returncode} ({' '.join(overrides)}):\n"
            f"{proc.stderr[-3000:]}"
        )
    return seconds


def bench_workers(args: argparse.Namespace) -> None:
    """Time the main job (warm stages) with workers=1, then workers=2, into new run folders."""
    overrides = [] if args.experiment == "none" else [f"experiment={args.experiment}"]
    overrides += [*args.overrides, f"pipeline.cache_dir={args.cache_dir}", "progress=false"]
    label = " ".join(overrides)
    print(f"main job: wmkit-eval {label}, on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.warmup:  # the stages do not depend on the evaluated seeds and horizons
            small = [o for o in overrides if not o.startswith(("seeds=", "horizons="))]
            seconds = _timed_eval([*small, "seeds=[0]", "horizons=[20]"], Path(tmp) / "warmup")
            print(f"  warm-up (stages and games cached; seed 0, h=20) {seconds:7.1f} s", flush=True)
        times = {}
        for workers in (1, 2):
            run_dir = Path(tmp) / f"workers{workers}"
            times[workers] = _timed_eval([*overrides, f"workers={workers}"], run_dir)
            episodes = len(list(ResultsFile(run_dir / "results.jsonl").rows()))
            print(f"  workers={workers}: {times[workers]:7.1f} s ({episodes} episodes)", flush=True)
    print(f"  ratio workers=1 / workers=2: {times[1] / times[2]:.2f}x")


PARTS: dict[str, Callable[[argparse.Namespace], None]] = {
    "leaderboard": bench_leaderboard,
    "workers": bench_workers,
}
"""The benchmark's parts, by ``--part`` name, in the order ``--part all`` runs them."""


def parser() -> argparse.ArgumentParser:
    """The command line of every part."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--part", choices=[*PARTS, "all"], default="all")
    g = p.add_argument_group("leaderboard")
    g.add_argument("--results", type=Path, help="a results.jsonl (default: synthetic rows)")
    g.add_argument("--seeds", type=int, default=5, help="seeds of the synthetic rows")
    g.add_argument("--horizons", type=int, nargs="+", default=[50, 200, 500])
    g.add_argument("--reps", type=int, default=stats.REPS, help="bootstrap replicates")
    g = p.add_argument_group("workers")
    g.add_argument(
        "--experiment", default="debug", help="the experiment option, or none: the default job"
    )
    g.add_argument("--overrides", nargs="*", default=[], help="more wmkit-eval overrides")
    g.add_argument("--cache-dir", default="runs/cache", help="the training stages' cache")
    g.add_argument(
        "--no-warmup", dest="warmup", action="store_false", help="the cache is warm already"
    )
    return p


def main(argv: Sequence[str] | None = None) -> None:
    args = parser().parse_args(argv)
    for name, part in PARTS.items():
        if args.part in (name, "all"):
            part(args)


if __name__ == "__main__":
    main()
