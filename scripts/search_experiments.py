"""Issue 4's "done means" experiments: search agents against baselines, in one process.

``games``: MCTS over the ``env_snapshot`` simulator (heuristic value) against the
``random`` and ``greedy`` baselines on Jericho games (``WMKIT_GAMES_DIR``) and TextWorld
games, at one step limit, over several seeds; prints score mean, IQM, the per-seed
scores and the budget. ``--actions`` picks the Jericho env's valid-action generator
(``quick``: bounded by ``--quick-tries``/``--quick-outcomes`` a state; ``full``: every
candidate) and ``--no-informative`` drops the commands that only inform from its lists
(``informative_actions=False``); every agent of a run plays the same env, so all choose
from the same list.
With ``--out``, rows already in the file (same env, agent, seed and budget) are not
played again: a long run can be stopped and restarted.

``vault``: on ``wmkit/Vault-v0``, the self-correcting policy against plain MCTS, both
over the ``rules`` simulator with the naive hand-written rules
(:class:`~wmkit.envs.vault.naive_rules.NaiveVaultRules`); prints episodes solved (treasure
taken), mean score, mismatches and backtracks. Plain MCTS does not check its
predictions: its mismatches are counted here, by an audit that corrects nothing.

Every agent reads with the env's own reader (``WindowTracker``; on games, which have
none, a ``NullTracker``) and sees the agent view of ``info``; episodes are played by
:func:`~wmkit.evals.runner.run_episode`, the suite's loop. Rows go to ``--out`` as JSONL
as they finish.

Usage::

    WMKIT_GAMES_DIR=/work/shared/games python scripts/search_experiments.py games \
        --games snacktime.z8 --textworld coin_collector:level=10 simple --steps 20 --sims 16
    WMKIT_GAMES_DIR=/work/shared/games python scripts/search_experiments.py games \
        --games balances.z5 night.z5 --actions quick --steps 40 --sims 16 --out runs/g.jsonl
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

from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.policies import LookaheadGreedyPolicy, RandomPolicy
from wmkit.agents.self_correcting import SelfCorrectingPolicy, compare
from wmkit.agents.trackers import NullTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.envs.vault.naive_rules import NaiveVaultRules
from wmkit.evals.runner import make_env, run_episode
from wmkit.search.rules_sim import RulesSimulator
from wmkit.search.simulators import EnvSnapshotSimulator
from wmkit.search.types import Budget
from wmkit.search.values import HeuristicValue
from wmkit.world.types import Delta, WorldState


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
        # Commands the valid-action search tried this episode (Jericho): its real cost.
        row["tries"] = getattr(getattr(env.unwrapped, "valid_actions", None), "tried", None)
        return row, policy, time.perf_counter() - start
    finally:
        env.close()


def _jericho_kwargs(game: str, args: argparse.Namespace) -> dict[str, Any]:
    """The Jericho env of a ``games`` run: the same for every agent (fair action sets)."""
    kwargs = {"game": game, "informative_actions": args.informative}
    if args.actions == "full":
        return {**kwargs, "admissible_actions": True}
    return {
        **kwargs,
        "admissible_actions": "quick",
        "quick_tries": args.quick_tries,
        "quick_outcomes": args.quick_outcomes,
    }


def games(args: argparse.Namespace) -> None:
    """MCTS (env_snapshot) vs random vs greedy on Jericho and TextWorld games."""
    budget = Budget(args.sims, max_depth=args.depth)
    policies: dict[str, Callable[[Any], Any]] = {
        "mcts": lambda env: MCTSPolicy(
            EnvSnapshotSimulator(env),
            budget=budget,
            value_fn=HeuristicValue(novelty_weight=args.novelty),
        ),
        "random": lambda env: RandomPolicy(),
        "greedy": lambda env: LookaheadGreedyPolicy(EnvSnapshotSimulator(env)),
    }
    unknown = set(args.agents) - set(policies)
    if unknown:
        raise SystemExit(f"unknown agents {sorted(unknown)}; choose from {sorted(policies)}")
    policies = {name: policies[name] for name in args.agents}
    if args.games and args.actions == "quick":
        from wmkit.envs.jericho import QUICK_OUTCOMES, QUICK_TRIES  # needs jericho

        args.quick_tries = args.quick_tries or QUICK_TRIES
        args.quick_outcomes = args.quick_outcomes or QUICK_OUTCOMES
    envs = [(f"jericho:{g}", "wmkit/Jericho-v0", _jericho_kwargs(g, args)) for g in args.games]
    envs += [
        (f"textworld:{spec}", "wmkit/TextWorld-v0", _textworld_kwargs(spec))
        for spec in args.textworld
    ]
    actions = (
        f"quick ({args.quick_tries} tries, {args.quick_outcomes} outcomes a state)"
        if args.actions == "quick"
        else "full"
    )
    actions += "" if args.informative else ", informative commands left out"
    print(f"budget: {args.sims} simulations/step, depth {args.depth}, {args.steps} steps, "
          f"seeds 0..{args.seeds - 1}; Jericho valid actions: {actions}")  # fmt: skip
    print("| env | agent | score mean | score IQM | per seed | max | secs/episode |")
    print("|---|---|---|---|---|---|---|")
    done = _done_rows(args.out)
    for label, env_id, kwargs in envs:
        # The budget a row was played with; a row in --out with the same one is reused.
        setup = {"sims": args.sims, "depth": args.depth, "max_steps": args.steps}
        if args.novelty != 1.0:  # only then: rows of the default keep their key
            setup["novelty"] = args.novelty
        if env_id == "wmkit/Jericho-v0":
            setup["actions"] = args.actions
            if args.actions == "quick":
                setup |= {"quick_tries": args.quick_tries, "quick_outcomes": args.quick_outcomes}
            if not args.informative:  # only then: rows of the default keep their key
                setup["informative"] = False
        for name, make in policies.items():
            scores, secs, max_score = [], [], 0
            for seed in range(args.seeds):
                key = {"exp": "games", "env": label, "agent": name, "seed": seed, **setup}
                row = done.get(_key(key))
                if row is None:
                    played, _, sec = _play(env_id, kwargs, args.steps, seed, make)
                    results = {k: played[k] for k in ("score", "max_score", "steps", "tries")}
                    row = {**key, **results, "secs": sec}
                    _log(args.out, row)
                scores.append(row["score"])
                secs.append(row["secs"])
                max_score = row["max_score"]
            print(f"| {label} | {name} | {statistics.fmean(scores):.2f} | {iqm(scores):.2f} | "
                  f"{' '.join(map(str, scores))} | {max_score} | {statistics.fmean(secs):.1f} |",
                  flush=True)  # fmt: skip


_FLAGS = {"true": True, "false": False}


def _textworld_kwargs(spec: str) -> dict[str, Any]:
    """The TextWorld env of ``challenge[:option=value,...]`` (tw-make seed 1 unless set)."""
    challenge, _, rest = spec.partition(":")
    options: dict[str, Any] = {"seed": 1}
    for pair in filter(None, rest.split(",")):
        name, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--textworld {spec!r}: options are name=value, got {pair!r}")
        options[name] = (
            int(value) if value.lstrip("-").isdigit() else _FLAGS.get(value.lower(), value)
        )
    return {"challenge": challenge, "options": options}


def _key(row: dict[str, Any]) -> str:
    return json.dumps(row, sort_keys=True)


def _done_rows(path: Path | None) -> dict[str, dict[str, Any]]:
    """Rows of ``games`` already in ``path``, by everything but their results."""
    if path is None or not path.exists():
        return {}
    results = {"score", "max_score", "steps", "secs", "tries"}
    done = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a killed run: that episode is played again
        if row.get("exp") == "games" and results <= row.keys():
            done[_key({k: v for k, v in row.items() if k not in results})] = row
    return done


class _Audited:
    """Plain MCTS with its predictions checked as the self-correcting policy checks them.

    Only counted (the ``mismatches`` column): nothing is penalised, learned or retried.
    """

    def __init__(self, policy: MCTSPolicy) -> None:
        self.policy = policy
        self.mismatches = 0
        self._pending: tuple[WorldState, Delta | None] | None = None

    def reset(self, rng: np.random.Generator) -> None:
        self.policy.reset(rng)
        self.mismatches, self._pending = 0, None

    def act(self, observation: str, info: Any, tracked: WorldState) -> str:
        if self._pending is not None and self._pending[1] is not None:
            before, predicted = self._pending
            missing, surprising = compare(predicted, before, tracked)
            self.mismatches += bool(missing or surprising)
        action = self.policy.act(observation, info, tracked)
        tree = self.policy.last.tree
        node = tree.child(tree.root, action)
        self._pending = (tracked, None if node is None else tree.delta[node])
        return action


def _mismatches(policy: Any) -> int:
    if isinstance(policy, _Audited):
        return policy.mismatches
    return sum(r.mismatch for r in policy.trace)


def _backtracks(policy: Any) -> int:
    trace = getattr(policy, "trace", [])
    return sum(r.backtrack in ("sibling", "ancestor") for r in trace)


def vault(args: argparse.Namespace) -> None:
    """Self-correcting vs plain MCTS on Vault, both over the naive rules simulator."""
    budget = Budget(args.sims, max_depth=args.depth)

    def policy(**kw: Any) -> Callable[[Any], Any]:
        return lambda env: SelfCorrectingPolicy(
            RulesSimulator(NaiveVaultRules()),
            budget=budget,
            value_fn=HeuristicValue(0.0, args.novelty),
            **kw,
        )

    def plain(env: Any) -> _Audited:
        return _Audited(
            MCTSPolicy(
                RulesSimulator(NaiveVaultRules()),
                budget=budget,
                value_fn=HeuristicValue(0.0, args.novelty),
            )
        )

    variants = {
        "self_correcting": policy(),
        "self_correcting_no_backtrack": policy(max_backtrack=0),
        "self_correcting_no_loop": policy(loop_penalty=0.0),
        "mcts_rules": plain,
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
            mism.append(_mismatches(pol))
            backs.append(_backtracks(pol))
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
    g.add_argument("--textworld", nargs="*", default=[],
                   help="TextWorld games: challenge[:option=value,...] (tw-make options, "
                        "seed 1 unless given), e.g. coin_collector:level=10 or "
                        "cooking:go=6,open=true")  # fmt: skip
    g.add_argument("--steps", type=int, default=30)
    g.add_argument("--sims", type=int, default=50)
    g.add_argument("--depth", type=int, default=10)
    g.add_argument("--novelty", type=float, default=1.0,
                   help="MCTS heuristic value's novelty weight")  # fmt: skip
    g.add_argument("--seeds", type=int, default=5)
    g.add_argument("--agents", nargs="*", default=["mcts", "random", "greedy"],
                   help="agents to run, in this order")  # fmt: skip
    g.add_argument("--actions", choices=["quick", "full"], default="quick",
                   help="Jericho valid actions: the bounded search or every candidate")  # fmt: skip
    g.add_argument("--no-informative", dest="informative", action="store_false",
                   help="Jericho lists without look/inventory/examine where something "
                        "changes the world (informative_actions=False)")  # fmt: skip
    g.add_argument("--quick-tries", type=int, help="default: the env's QUICK_TRIES")
    g.add_argument("--quick-outcomes", type=int, help="default: the env's QUICK_OUTCOMES")
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
