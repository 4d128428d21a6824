"""Issue 4's "done means" experiments: search agents against baselines, in one process.

``games``: MCTS over the ``env_snapshot`` simulator (heuristic value) against the
``random`` and ``greedy`` baselines on Jericho games (``WMKIT_GAMES_DIR``) and TextWorld
games, at one step limit, over several seeds; prints score mean, IQM and the budget.

``vault``: on ``wmkit/Vault-v0``, the self-correcting policy against plain MCTS, both
over the ``rules`` simulator with the naive hand-written rules
(:class:`~wmkit.search.rules_sim.NaiveVaultRules`); prints episodes solved (treasure
taken), mean score, mismatches and backtracks.

Every agent reads with the env's own reader (``WindowTracker``; on games, which have
none, a ``NullTracker``) and sees the agent view of ``info``; episodes are played by
:func:`~wmkit.evals.runner.run_episode`, the suite's loop. Rows go to ``--out`` as JSONL
as they finish.

Usage::

    WMKIT_GAMES_DIR=/work/shared/games python scripts/search_experiments.py games \
        --games snacktime.z8 --textworld coin_collector simple --steps 20 --sims 16
    python scripts/search_experiments.py vault --seeds 20 --load 2 --steps 100 --sims 100
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from wmkit.agents.policies import GreedyPolicy, RandomPolicy
from wmkit.agents.trackers import NullTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import make_env, run_episode
from wmkit.search.policy import MCTSPolicy
from wmkit.search.self_correcting import SelfCorrectingPolicy
from wmkit.search.types import Budget
from wmkit.search.values import HeuristicValue


def iqm(values: list[float]) -> float:
    """Interquartile mean: the mean of the middle half (ends trimmed by a quarter each)."""
    xs = sorted(values)
    n = len(xs)
    cut = n // 4
    middle = xs[cut : n - cut] or xs
    return statistics.fmean(middle)


def _agent(name: str, env: Any, policy: Any) -> Agent:
    # Games have no reader: their agents keep no facts (as the *_games configs).
    reader = getattr(env.unwrapped, "reader", None)
    tracker = NullTracker() if reader is None else WindowTracker(reader, k=None)
    return Agent(name, tracker, policy)


def _play(
    env_id: str, kwargs: dict[str, Any], steps: int, seed: int, make: Callable[[Any], Any]
) -> tuple[dict[str, Any], Any, float]:
    env = make_env(env_id, steps, kwargs)
    try:
        policy = make(env)
        start = time.perf_counter()
        row = run_episode(env, _agent("x", env, policy), seed)
        return row, policy, time.perf_counter() - start
    finally:
        env.close()


def games(args: argparse.Namespace) -> None:
    """MCTS (env_snapshot) vs random vs greedy on Jericho and TextWorld games."""
    budget = Budget(args.sims, max_depth=args.depth)
    policies: dict[str, Callable[[Any], Any]] = {
        "mcts": lambda env: MCTSPolicy(env, budget=budget),
        "random": lambda env: RandomPolicy(),
        "greedy": lambda env: GreedyPolicy(),
    }
    unknown = set(args.agents) - set(policies)
    if unknown:
        raise SystemExit(f"unknown agents {sorted(unknown)}; choose from {sorted(policies)}")
    policies = {name: policies[name] for name in args.agents}
    envs = [(f"jericho:{g}", "wmkit/Jericho-v0", {"game": g}) for g in args.games]
    envs += [
        (f"textworld:{c}", "wmkit/TextWorld-v0", {"challenge": c, "options": {"seed": 1}})
        for c in args.textworld
    ]
    print(f"budget: {args.sims} simulations/step, depth {args.depth}, {args.steps} steps, "
          f"seeds 0..{args.seeds - 1}")  # fmt: skip
    print("| env | agent | score mean | score IQM | max | secs/episode |")
    print("|---|---|---|---|---|---|")
    for label, env_id, kwargs in envs:
        for name, make in policies.items():
            scores, secs, max_score = [], [], 0
            for seed in range(args.seeds):
                row, _, sec = _play(env_id, kwargs, args.steps, seed, make)
                scores.append(row["score"])
                secs.append(sec)
                max_score = row["max_score"]
                _log(args.out, {"exp": "games", "env": label, "agent": name, "seed": seed,
                                "score": row["score"], "steps": row["steps"], "secs": sec,
                                "sims": args.sims, "depth": args.depth})  # fmt: skip
            print(f"| {label} | {name} | {statistics.fmean(scores):.2f} | {iqm(scores):.2f} | "
                  f"{max_score} | {statistics.fmean(secs):.1f} |", flush=True)  # fmt: skip


def vault(args: argparse.Namespace) -> None:
    """Self-correcting vs plain MCTS on Vault, both over the naive rules simulator."""
    budget = Budget(args.sims, max_depth=args.depth)

    def policy(**kw: Any) -> Callable[[Any], Any]:
        return lambda env: SelfCorrectingPolicy(
            rules="naive_vault",
            budget=budget,
            value_fn=HeuristicValue(0.0, args.novelty),
            **kw,
        )

    variants = {
        "self_correcting": policy(),
        "self_correcting_no_backtrack": policy(max_backtrack=0),
        "self_correcting_no_loop": policy(loop_penalty=0.0),
        "mcts_rules": policy(correct=False),
    }
    kwargs = {"load": args.load}
    print(f"Vault load={args.load}, {args.steps} steps, {args.sims} simulations/step, depth "
          f"{args.depth}, seeds 0..{args.seeds - 1}")  # fmt: skip
    print("| agent | solved | score mean | score IQM | mismatches/ep | backtracks/ep | secs/ep |")
    print("|---|---|---|---|---|---|---|")
    for name, make in variants.items():
        if args.only and name not in args.only:
            continue
        solved, scores, mism, backs, secs = 0, [], [], [], []
        for seed in range(args.seeds):
            row, pol, sec = _play("wmkit/Vault-v0", kwargs, args.steps, seed, make)
            won = row["score"] >= 10  # the treasure is worth 10 and ends the episode
            solved += won
            scores.append(row["score"])
            mism.append(sum(r.mismatch for r in pol.trace))
            backs.append(sum(r.backtrack in ("sibling", "ancestor") for r in pol.trace))
            secs.append(sec)
            _log(args.out, {"exp": "vault", "agent": name, "seed": seed, "score": row["score"],
                            "steps": row["steps"], "solved": won, "mismatches": mism[-1],
                            "backtracks": backs[-1], "secs": sec})  # fmt: skip
        print(f"| {name} | {solved}/{args.seeds} | {statistics.fmean(scores):.2f} | "
              f"{iqm(scores):.2f} | {statistics.fmean(mism):.1f} | {statistics.fmean(backs):.1f} | "
              f"{statistics.fmean(secs):.1f} |", flush=True)  # fmt: skip


def _log(path: Path | None, row: dict[str, Any]) -> None:
    if path is not None:
        with path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run one experiment."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="exp", required=True)
    g = sub.add_parser("games", help="MCTS vs random vs greedy on Jericho/TextWorld")
    g.add_argument("--games", nargs="*", default=["905.z5"])
    g.add_argument("--textworld", nargs="*", default=[])
    g.add_argument("--steps", type=int, default=30)
    g.add_argument("--sims", type=int, default=50)
    g.add_argument("--depth", type=int, default=10)
    g.add_argument("--seeds", type=int, default=5)
    g.add_argument("--agents", nargs="*", default=["mcts", "random", "greedy"],
                   help="agents to run, in this order")  # fmt: skip
    g.add_argument("--out", type=Path)
    v = sub.add_parser("vault", help="self-correcting vs plain MCTS on Vault (rules sim)")
    v.add_argument("--seeds", type=int, default=20)
    v.add_argument("--load", type=int, default=2)
    v.add_argument("--steps", type=int, default=100)
    v.add_argument("--sims", type=int, default=100)
    v.add_argument("--depth", type=int, default=10)
    v.add_argument("--novelty", type=float, default=0.1)
    v.add_argument("--only", nargs="*", default=[])
    v.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    np.seterr(all="ignore")
    {"games": games, "vault": vault}[args.exp](args)


if __name__ == "__main__":
    main()
