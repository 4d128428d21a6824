"""Benchmarks of the policy/value network, and the search comparison that says whether it helps.

``speed``: on trajectories a search recorded (MCTS on SmartHome, its visits logged as the
policy targets; or ``--data``), per device (cpu, and cuda when present; on cuda the
training runs under bfloat16 autocast):

* training samples/s of ``train_value`` (value and policy heads) against a raw torch
  loop of the same network, loss, optimizer and batch size over batches built before
  the clock starts;
* inference one state at a time, as the search calls it (``ValueNetValue`` on distinct
  states, cache off, featurising included: the value and the prior over every
  candidate command from one pass; on the CPU the numpy forward pass), in states/s and
  in states x candidate commands/s, against torch's forward of one pre-featurised
  state; and with the cache warm;
* batched inference (``ValueNetValue.evaluate_batch``, ``--batch`` states a call,
  torch), the same units, against torch's forward of the same pre-featurised batches.

Ratios are ours / raw, measured in the same run (1.0: no overhead over raw torch; above
1: faster than torch, as the numpy single-state path is).

``search``: MCTS over the ``env_snapshot`` simulator on ``wmkit/Vault-v0`` at one budget,
with the heuristic value against ``value_net``, the hybrid of the two (novelty filter,
network costly) and optionally their sum (``heuristic+net``), through
``scripts/search_experiments.py``'s episode helpers; prints episodes solved (treasure
taken) and scores over the seeds. Train on seeds other than the ones compared.

Usage::

    python scripts/bench_value.py speed --episodes 40 --epochs 2
    python scripts/bench_value.py speed --data runs/cache/collect@1/<fingerprint>/jericho_905
    python scripts/bench_value.py search --checkpoint runs/value/vault/value.pt \
        --load 2 --steps 100 --sims 32 --seeds 20
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from rich.console import Console

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.recording import record_policy
from wmkit.knowledge.recording import Recorder, TrajectoryWriter
from wmkit.scripts.search_experiments import _play, iqm
from wmkit.search.simulators import EnvSnapshotSimulator
from wmkit.search.types import Budget, Transition
from wmkit.search.value_net import ValueNet, load_value_net, segment_log_softmax
from wmkit.search.values import HeuristicValue, HybridValue, ValueNetValue
from wmkit.trainers.value import Examples, TrainValueConfig, load_examples, train_value


def _best(fn: Callable[[], Any], repeats: int) -> float:
    """Best wall time of ``repeats`` runs of ``fn`` (the least disturbed by other load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _raw_training(
    model: ValueNet, batches: list[tuple[Any, ...]], lr: float, device: torch.device
) -> float:
    """Samples/s of a bare loop: forward, value MSE + policy cross-entropy, backward, AdamW."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model.train()

    def epoch() -> None:
        for ids, offsets, numeric, z, candidates, share in batches:
            state = model.state(ids, offsets, numeric)
            loss = torch.nn.functional.mse_loss(model.mlp[4](state).squeeze(-1), z)
            commands = model.bag(candidates.ids, candidates.offsets)
            logp = segment_log_softmax(
                model.logits(state, commands, candidates.owner), candidates.owner, len(z)
            )
            loss = loss - (share * logp).sum() / len(z)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        _sync(device)

    epoch()  # warm-up
    secs = _best(epoch, 2)
    return sum(len(b[3]) for b in batches) / secs


def _rate(fn: Callable[[Any], Any], items: list[Any], device: torch.device, repeats: int) -> float:
    """Items per second of ``fn`` called on each item in turn (best of ``repeats``)."""

    def run() -> None:
        with torch.inference_mode():
            for item in items:
                fn(item)
        _sync(device)

    return len(items) / _best(run, repeats)


def _bench_device(name: str, data: list[str], examples: Examples, args: argparse.Namespace,
                  tmp: Path) -> None:  # fmt: skip
    device = torch.device(name)
    config = TrainValueConfig(
        data_dirs=data, epochs=args.epochs, device=name, progress=False, resume=False,
        batch_size=args.batch, model={"policy": True},
    )  # fmt: skip
    report = train_value(config, tmp / f"run-{name}", console=Console(quiet=True))
    path = report["value_path"]
    _, model, featurizer = load_value_net(path, device)
    searched = [i for i, p in enumerate(examples.policies) if p is not None]
    order = np.random.default_rng(0).permutation(searched)
    inputs = [examples.inputs[i] for i in order]
    commands = [examples.policies[i][0] for i in order]  # type: ignore[index]
    batches = []
    for s in range(0, len(order), args.batch):
        xs, cs = inputs[s : s + args.batch], commands[s : s + args.batch]
        share = torch.full((sum(map(len, cs)),), 0.0, device=device)
        batches.append((*featurizer.batch(xs, device), torch.zeros(len(xs), device=device),
                        featurizer.candidates(cs, device), share))  # fmt: skip
    ours = max(h["charts/samples_per_s"] for h in report["history"])
    _row(
        name,
        "train samples/s (value + policy)",
        ours,
        _raw_training(model, batches, config.lr, device),
    )

    # One state at a time, as the search asks: distinct states, cache off.
    model.eval()
    k = min(args.single, len(inputs))
    states = [
        Transition(None, x.observation, 0.0, False,
                   {"admissible_actions": list(c), "score": x.score, "max_score": 1})
        for x, c in zip(inputs[:k], commands[:k], strict=True)
    ]  # fmt: skip
    per_state = sum(len(c) for c in commands[:k]) / k
    singles = [
        (*featurizer.batch([x], device), featurizer.candidates([c], device))
        for x, c in zip(inputs[:k], commands[:k], strict=True)
    ]
    raw = _rate(lambda b: model.evaluate(*b), singles, device, args.repeats)
    value = ValueNetValue(path, device=name, cache_size=0)
    one = _rate(value, states, device, args.repeats)
    _row(name, "one state/call, states/s", one, raw)
    _row(name, "one state/call, states x actions/s", one * per_state, raw * per_state)
    cached = ValueNetValue(path, device=name)
    _rate(cached, states, device, 1)  # fill the cache
    _row(name, "one state/call, cache warm", _rate(cached, states, device, args.repeats), raw)

    chunks = [states[s : s + args.batch] for s in range(0, len(states), args.batch)]
    ready = [
        (*featurizer.batch(inputs[s : s + args.batch], device),
         featurizer.candidates(commands[s : s + args.batch], device))
        for s in range(0, k, args.batch)
    ]  # fmt: skip
    ours_b = _rate(value.evaluate_batch, chunks, device, args.repeats) * k / len(chunks)
    raw_b = _rate(lambda b: model.evaluate(*b), ready, device, args.repeats) * k / len(ready)
    _row(name, f"batched ({args.batch}), states/s", ours_b, raw_b)
    _row(name, f"batched ({args.batch}), states x actions/s", ours_b * per_state, raw_b * per_state)
    print(f"| {name} | batched / one at a time, states x actions/s | | | "
          f"{ours_b / one:.2f} |", flush=True)  # fmt: skip


def _record_search(path: Path, episodes: int, horizon: int, sims: int) -> None:
    """SmartHome episodes played by MCTS, each state's root visits recorded."""
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=horizon)
    with TrajectoryWriter(path) as writer:
        recorder = Recorder(env, writer.write, env_name="smarthome", agent="mcts")
        policy = MCTSPolicy(EnvSnapshotSimulator(recorder), budget=Budget(sims, max_depth=6))
        record_policy(recorder, policy, range(episodes))


def speed(args: argparse.Namespace) -> None:
    """Training and inference throughput against raw torch, per device."""
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    with tempfile.TemporaryDirectory() as tmp:
        data = args.data
        if not data:
            data = [str(Path(tmp) / "smarthome")]
            _record_search(Path(data[0]), args.episodes, args.horizon, args.sims)
        examples = load_examples(data, 0.95)
        searched = sum(p is not None for p in examples.policies)
        if not searched:
            raise SystemExit(f"{data}: no step holds a search's visits (record a search agent)")
        print(f"data: {len(examples.inputs)} steps of {len(set(examples.episodes))} episodes, "
              f"{searched} with a search's visits; torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads")  # fmt: skip
        print("| device | measure | ours | raw torch | ratio |")
        print("|---|---|---|---|---|")
        for name in devices:
            _bench_device(name, data, examples, args, Path(tmp))


def _row(device: str, measure: str, ours: float, raw: float) -> None:
    print(f"| {device} | {measure} | {ours:,.0f} | {raw:,.0f} | {ours / raw:.2f} |", flush=True)


def search_comparison(args: argparse.Namespace) -> None:
    """MCTS on Vault at one budget: heuristic vs value_net (vs hybrid) values."""
    budget = Budget(args.sims, max_depth=args.depth)
    net = ValueNetValue(args.checkpoint)
    if net.spec.target.discount != args.discount:
        print(f"note: the network learned discount {net.spec.target.discount}, the search "
              f"uses {args.discount}")  # fmt: skip

    def hybrid() -> HybridValue:
        return HybridValue(HeuristicValue(0.0, 1.0), net, args.threshold)

    def summed() -> Callable[[Transition], float]:
        # The heuristic's novelty explores; the network adds what it learned of returns.
        heuristic = HeuristicValue()
        return lambda t: heuristic(t) + net(t)

    def mcts(env: Any, value_fn: Callable[[Transition], float] | None = None) -> MCTSPolicy:
        sim = EnvSnapshotSimulator(env)
        return MCTSPolicy(sim, budget=budget, discount=args.discount, value_fn=value_fn)

    variants: dict[str, Callable[[Any], Any]] = {
        # value_fn=None: the policy's own heuristic, reset every episode.
        "heuristic": lambda env: mcts(env),
        "value_net": lambda env: mcts(env, net),
        "hybrid": lambda env: mcts(env, hybrid()),
        "heuristic+net": lambda env: mcts(env, summed()),
    }  # fmt: skip
    print(f"Vault load={args.load}, {args.steps} steps, {args.sims} simulations/step, depth "
          f"{args.depth}, seeds {args.first_seed}..{args.first_seed + args.seeds - 1}; "
          f"network trained on {net.spec.data.envs if net.spec.data else '?'}")  # fmt: skip
    print("| value | solved | score mean | score IQM | secs/ep |")
    print("|---|---|---|---|---|")
    for name in args.variants:
        solved, scores, secs = 0, [], []
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            row, _, sec = _play("wmkit/Vault-v0", {"load": args.load}, args.steps, seed,
                                variants[name])  # fmt: skip
            solved += row["score"] >= 10  # the treasure is worth 10 and ends the episode
            scores.append(row["score"])
            secs.append(sec)
        print(f"| {name} | {solved}/{args.seeds} | {statistics.fmean(scores):.2f} | "
              f"{iqm(scores):.2f} | {statistics.fmean(secs):.1f} |", flush=True)  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run one benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    s = sub.add_parser("speed", help="training and inference throughput vs raw torch")
    s.add_argument("--data", nargs="*", default=[], help="data folders (default: record)")
    s.add_argument("--episodes", type=int, default=40, help="SmartHome search episodes recorded")
    s.add_argument("--horizon", type=int, default=100)
    s.add_argument("--sims", type=int, default=16, help="simulations a step when recording")
    s.add_argument("--epochs", type=int, default=2)
    s.add_argument("--batch", type=int, default=256)
    s.add_argument("--single", type=int, default=500, help="states scored one at a time")
    s.add_argument("--repeats", type=int, default=3)
    s.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    c = sub.add_parser("search", help="MCTS on Vault: heuristic vs value_net vs hybrid")
    c.add_argument("--checkpoint", required=True)
    c.add_argument("--variants", nargs="*", default=["heuristic", "value_net", "hybrid"],
                   choices=["heuristic", "value_net", "hybrid", "heuristic+net"])  # fmt: skip
    c.add_argument("--load", type=int, default=2)
    c.add_argument("--steps", type=int, default=100)
    c.add_argument("--sims", type=int, default=32)
    c.add_argument("--depth", type=int, default=10)
    c.add_argument("--seeds", type=int, default=10)
    c.add_argument("--first-seed", type=int, default=0)
    c.add_argument("--discount", type=float, default=0.95)
    c.add_argument("--threshold", type=float, default=0.5, help="the hybrid's novelty cut")
    args = parser.parse_args(argv)
    np.seterr(all="ignore")
    {"speed": speed, "search": search_comparison}[args.what](args)


if __name__ == "__main__":
    main()
