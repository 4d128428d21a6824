"""Search throughput and memory, as ratios against the raw engine measured in the same run.

Prints, in one run:
- bookkeeping: raw ``restore+step``/s of the env against search simulations/s with the
  ``env_snapshot`` simulator, proposals served from a cache (one fixed tuple), so the
  ratio isolates what the search adds (target >= 0.8); on a Jericho game and on Vault.
  The raw loop replays exactly the env calls the search made and the ratio is raw time
  over search time: a simulation may step more than once (a no-op is stepped, pruned
  and the simulation goes on) or less (a transposition is not expanded again). The
  same calls through the simulator in a loop show what the simulator itself adds
  (snapshot, transposition key, record); the search's own share is the time of a
  search clocked at each step, less the time in the simulator (and less the clock's);
- wide proposals: PUCT on a fake simulator whose every state proposes ``--wide-actions``
  cached actions with priors, 95% of them no-ops (the state key stays the parent's),
  the shape of a Jericho mode that proposes templates x nouns unverified: µs of search
  per simulation, its steps and selections;
- the share of wall time spent generating valid actions in a real Jericho search
  (proposals from ``admissible_actions``), with the full generator and with the quick
  one (``admissible_actions="quick"``), same search otherwise;
- the speedup over a copy-per-simulation search at equal simulation count (MC-LAVE
  style: each simulation forks the root with ``FrotzEnv.copy()`` and replays its path);
- peak memory (tracemalloc) of the tree at 10^4, 10^5, 10^6 nodes, and of a long search
  under a node cap.

CPU seconds (``time.process_time``, best of ``--repeats``) for rates; wall seconds for
the valid-action share and the copy comparison (``copy()`` reads the story file and
loads a fresh copy of the emulator library: that is I/O, not CPU). Clocking each step
costs two ``process_time`` calls (~0.3 µs each, a twentieth of a Vault step): the rates
come from runs without the clock, and its cost is taken out of the clocked one.

Usage: ``python scripts/bench_search.py [--game 905.z5] [--sims 2000]``; Jericho rows
need ``WMKIT_GAMES_DIR`` (or ``--games-dir``) and are skipped with a note without it.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from rich.console import Console
from rich.table import Table

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.envs.jericho import GAMES_DIR_VAR
from wmkit.search import (
    Budget,
    EnvSnapshotSimulator,
    HeuristicValue,
    Proposal,
    Transition,
    Tree,
    admissible_proposal,
    puct,
    search,
    ucb1,
)

console = Console()


def cpu(run: Callable[[], Any]) -> float:
    """CPU seconds ``run()`` took."""
    start = time.process_time()
    run()
    return time.process_time() - start


class Clocked:
    """Passes steps to ``inner`` and adds up the CPU seconds spent inside them."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def step(self, token: Any, action: str) -> Transition:
        """Step ``inner``, on the clock."""
        start = time.process_time()
        t = self.inner.step(token, action)
        self.seconds += time.process_time() - start
        self.calls += 1
        return t


def clock_cost(n: int = 20_000) -> tuple[float, float]:
    """What clocking a step costs: CPU seconds in all, and those billed to the step.

    A :class:`Clocked` step costs two ``process_time()`` calls (system calls, ~0.3 µs
    each) and a Python call, about one clock call of it inside the clocked span:
    measured on a simulator that does nothing, and taken back out of both sides by
    :func:`bookkeeping_rows`, so a step as short as Vault's is not overstated.
    """

    class Null:
        def step(self, token: Any, action: str) -> Any:
            return None

    clocked = Clocked(Null())
    step = clocked.step
    start = time.process_time()
    for _ in range(n):
        step(None, "")
    total = time.process_time() - start
    return total / n, clocked.seconds / n


class Recording:
    """Passes steps to ``inner`` and records each ``(token, action)`` it was asked for."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: list[tuple[Any, str]] = []

    def step(self, token: Any, action: str) -> Transition:
        """Record the call, then step ``inner``."""
        self.calls.append((token, action))
        return self.inner.step(token, action)


def bookkeeping_rows(
    table: Table, name: str, env: Any, proposal: Proposal, sims: int, repeats: int
) -> None:
    """Search simulations/s against raw restore+step/s of the very same env calls.

    A first search records the (token, action) pairs it steps; the raw loop replays
    exactly those, so both sides do the same engine work and the ratio is the search's
    own cost (the same seed gives the same tree every time).
    """
    core = env.unwrapped
    sim = EnvSnapshotSimulator(env)
    lazy = EnvSnapshotSimulator(env, lazy=True)

    def run_search(simulator: Any) -> Any:
        return search(
            root,
            simulator=simulator,
            propose_fn=lambda t: proposal,  # the cache: one fixed tuple
            value_fn=HeuristicValue(),
            select_fn=ucb1(),
            budget=Budget(sims),
            rng=np.random.default_rng(0),
        )

    def raw() -> None:
        for token, action in calls:
            core.restore(token)
            core.step(action)

    def raw_snapshot() -> None:
        for token, action in calls:
            core.restore(token)
            core.step(action)
            core.snapshot()

    def through_simulator() -> None:
        step = loop.step
        for token, action in calls:
            step(token, action)

    loop = EnvSnapshotSimulator(env)
    with sim.preserve() as token:
        root = Transition(token, "", 0.0, False, {})
        recording = Recording(EnvSnapshotSimulator(env, lazy=False))  # real tokens
        out = run_search(recording)
        calls = recording.calls
        # Interleaved, best of each: both sides see the same machine load.
        raw_s = snap_s = sim_s = search_s = lazy_s = math.inf
        split = (math.inf, 0.0)  # (CPU seconds of the clocked search, of its steps)
        for _ in range(repeats):
            raw_s = min(raw_s, cpu(raw))
            snap_s = min(snap_s, cpu(raw_snapshot))
            sim_s = min(sim_s, cpu(through_simulator))
            search_s = min(search_s, cpu(lambda: run_search(sim)))
            lazy_s = min(lazy_s, cpu(lambda: run_search(lazy)))
            clocked = Clocked(sim)
            total = cpu(lambda clocked=clocked: run_search(clocked))
            cost, billed = clock_cost()
            steps = clocked.calls
            split = min(split, (total - cost * steps, clocked.seconds - billed * steps))
    total_s, inside_s = split
    raw_rate, snap_rate, search_rate = len(calls) / raw_s, len(calls) / snap_s, sims / search_s
    lazy_steps = lazy.steps / repeats  # lazy snapshots replay a step per expanded leaf
    depth = max(out.tree.node(n).depth for n in out.tree.nodes())
    table.add_row(name, "raw restore+step (the search's calls)", f"{raw_rate:,.0f}", "1.00")
    table.add_row(
        "", "raw restore+step+snapshot", f"{snap_rate:,.0f}", f"{snap_rate / raw_rate:.2f}"
    )
    table.add_row(
        "",
        "the same calls through the simulator",
        f"{len(calls) / sim_s:,.0f}",
        f"{raw_s / sim_s:.2f} (+{(sim_s - raw_s) / len(calls) * 1e6:.1f} µs a step: "
        "snapshot, key, record)",
    )
    # A simulation may step several times (a no-op is stepped, pruned and the simulation
    # goes on), so the ratio compares times for the same engine calls: raw / search.
    table.add_row(
        "",
        f"search sims/s (UCB1, {len(proposal.actions)} cached actions)",
        f"{search_rate:,.0f}",
        f"{raw_s / search_s:.2f} of raw at equal engine work (target ≥ 0.80); {sims} sims, "
        f"{len(calls) / sims:.2f} env steps/sim, depth ≤ {depth}",
    )
    table.add_row(
        "",
        "search sims/s, lazy snapshots",
        f"{sims / lazy_s:,.0f}",
        f"{raw_s / lazy_s:.2f}; {lazy_steps / sims:.2f} env steps/sim (replays)",
    )
    table.add_row(
        "",
        "search bookkeeping / time in simulator",
        f"{(total_s - inside_s) / sims * 1e6:,.1f} µs/sim",
        f"{(total_s - inside_s) / inside_s:.1%} of the simulator's time (target < 25%); "
        f"the simulator {inside_s / sims * 1e6:,.1f} µs/sim inside the search",
    )


class WideModel:
    """A fake game whose every state proposes the same ``n`` actions, with priors.

    Action ``i`` is a no-op (the state and its key stay the parent's, no reward) unless
    ``i % 20 == 0`` (5%: 95% no-ops); the others lead to a new state (an int token, its
    own key) with a reward of 0 or 1. Priors are fixed and distinct-ish (1 / (1 + rank)
    with jitter), as a language model's over candidate commands.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        actions = tuple(f"verb{i % 97} noun{i}" for i in range(n))
        weights = 1.0 / (1.0 + rng.permutation(n)) * (1.0 + 0.01 * rng.random(n))
        self.proposal = Proposal(actions, tuple(weights.tolist()))
        self.effect = {a: i + 1 if i % 20 == 0 else 0 for i, a in enumerate(actions)}
        self.steps = 0

    def step(self, token: int, action: str) -> Transition:
        """A no-op, or a new state numbered from the token and the action."""
        self.steps += 1
        effect = self.effect[action]
        if not effect:
            return Transition(token, "Nothing happens.", 0.0, False, {}, token)
        new = (token * 2003 + effect) % 1_000_000_007
        return Transition(new, "Something happens.", float(new % 7 == 0), False, {}, new)


def wide_rows(table: Table, n: int, sims: int, repeats: int) -> None:
    """µs of PUCT search per simulation when every state proposes ``n`` actions."""
    best, model, selections = math.inf, WideModel(n), [0]
    rule = puct()

    def select(tree: Tree, node: int, rng: np.random.Generator) -> str | None:
        selections[0] += 1
        return rule(tree, node, rng)

    def run() -> Any:
        return search(
            Transition(0, "", 0.0, False, {}, 0),
            simulator=model,
            propose_fn=lambda t: model.proposal,  # the cache: one fixed tuple
            value_fn=lambda t: (t.token % 100) / 100,
            select_fn=select,
            budget=Budget(sims),
            rng=np.random.default_rng(0),
        )

    for _ in range(repeats):
        model.steps, selections[0] = 0, 0
        best = min(best, cpu(run))
    table.add_row(
        "Wide",
        f"PUCT search, {n:,} cached actions a state, 95% no-ops",
        f"{sims / best:,.0f}",
        f"{best / sims * 1e6:,.1f} µs/sim ({sims} sims; {model.steps / sims:.1f} steps and "
        f"{selections[0] / sims:.1f} selections a simulation, fake simulator)",
    )


class _Timed:
    """Forwards calls to ``inner`` and adds up the wall seconds they take."""

    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return self.inner(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _real_search(
    game: Path, sims: int, mode: bool | str
) -> tuple[float, _Timed, int, int, int]:
    """One real search with valid actions ``mode`` (True: full, "quick", "candidates").

    UCB1 over the verified lists; PUCT over the candidates (it reads their counted prior
    and tries them in its order, pruning the no-ops as it steps them).

    Returns wall seconds, the timed generator, commands it tried, tree nodes and env
    steps the search took.
    """
    env = gymnasium.make("wmkit/Jericho-v0", game=str(game), horizon=10**6, admissible_actions=mode)
    observation, info = env.reset(seed=0)
    core = env.unwrapped
    timer = _Timed(core.valid_actions)
    core.valid_actions = timer  # the env calls it once per step (cached by state hash)
    tried = timer.inner.tried  # the root's search (in reset) is left out of both counts
    sim = EnvSnapshotSimulator(env)
    start = time.perf_counter()
    with sim.preserve():
        out = search(
            sim.root(observation, info),
            simulator=sim,
            propose_fn=admissible_proposal,
            value_fn=HeuristicValue(),
            select_fn=puct() if mode == "candidates" else ucb1(),
            budget=Budget(sims),
            rng=np.random.default_rng(0),
        )
    wall = time.perf_counter() - start
    env.close()
    return wall, timer, timer.inner.tried - tried, len(out.tree), sim.steps


def valid_action_rows(table: Table, game: Path, sims: int) -> None:
    """Share of a real search's wall time spent in valid-action generation, per mode.

    The same search (seed, budget, proposals from ``admissible_actions``) with the full
    generator, the quick one (``admissible_actions="quick"``, the env's default limits)
    and the unverified candidates (``"candidates"``, searched with PUCT on their prior);
    the trees differ, since the lists do. The candidates' own cost is building the
    lists; the no-ops the search steps and prunes are env steps, counted apart.
    """
    full_wall = None
    for mode, label in ((True, "full"), ("quick", "quick"), ("candidates", "candidates")):
        wall, timer, tried, nodes, steps = _real_search(game, sims, mode)
        note = (
            f"valid actions: {timer.seconds / wall:.1%} of {wall:.1f} s wall "
            f"({timer.calls} calls, {tried:,} commands tried, {nodes} nodes, "
            f"{steps / sims:.1f} env steps/sim)"
        )
        if full_wall is None:
            full_wall = wall
        else:
            note += f"; {full_wall / wall:.1f}x less wall than full"
            if mode == "quick":
                limits = timer.inner
                note += f" (≤ {limits.max_tries} tries, {limits.max_outcomes} outcomes a state)"
        table.add_row(
            game.name if mode is True else "",
            f"real search, {sims} sims, valid actions {label}",
            f"{sims / wall:,.2f}",
            note,
        )


class CopyReplaySimulator:
    """MC-LAVE's way: fork the root emulator with ``copy()`` and replay the path."""

    def __init__(self, frotz: Any) -> None:
        self.root = frotz
        self.steps = 0

    def step(self, token: tuple[str, ...], action: str) -> Transition:
        """Fork the root, replay ``token``'s actions, then step ``action``."""
        env = self.root.copy()
        try:
            for past in token:
                env.step(past)
            observation, reward, done, _ = env.step(action)
            self.steps += len(token) + 1
        finally:
            env.close()
        return Transition((*token, action), observation, float(reward), bool(done), {})


def copy_rows(table: Table, game: Path, proposal: Proposal, sims: int) -> None:
    """Wall time of the same search with the copy-per-simulation engine and snapshots."""
    env = gymnasium.make(
        "wmkit/Jericho-v0", game=str(game), horizon=10**6, admissible_actions=False
    )
    env.reset(seed=0)

    def zero(t: Transition) -> float:
        return 0.0

    def run(sim: Any, root: Transition) -> tuple[float, Tree]:
        start = time.perf_counter()
        out = search(
            root,
            simulator=sim,
            propose_fn=lambda t: proposal,
            value_fn=zero,
            select_fn=ucb1(tie_break="first"),
            budget=Budget(sims),
            rng=np.random.default_rng(0),
        )
        return time.perf_counter() - start, out.tree

    copier = CopyReplaySimulator(env.unwrapped.frotz)  # only read (get_state) by copy()
    copy_s, copy_tree = run(copier, Transition((), "", 0.0, False, {}))
    # No transposition keys on either side (the copier has none): no transpositions and
    # no no-op pruning, so both grow the same tree and the engine cost is compared alone.
    snap = EnvSnapshotSimulator(env, key_fn=lambda info: None)
    with snap.preserve() as token:
        snap_s, snap_tree = run(snap, Transition(token, "", 0.0, False, {}))
    same = sorted(map(tuple, map(copy_tree.path, copy_tree.nodes()))) == sorted(
        map(tuple, map(snap_tree.path, snap_tree.nodes()))
    )
    table.add_row(
        game.name,
        f"copy()+replay search, {sims} sims",
        f"{sims / copy_s:,.1f}",
        f"{copier.steps / sims:.1f} steps/sim",
    )
    table.add_row(
        "",
        f"env_snapshot search, {sims} sims",
        f"{sims / snap_s:,.0f}",
        f"speedup {copy_s / snap_s:,.0f}x at equal simulations (same tree: {same})",
    )


def memory_rows(table: Table, sizes: list[int], cap_sims: int) -> None:
    """Peak traced memory of trees of each size, and of a capped long search."""
    actions = Proposal(tuple(f"action {i}" for i in range(8)))
    info: dict[str, Any] = {}
    for size in sizes:
        gc.collect()
        tracemalloc.start()
        tree = Tree(Transition(0, "obs", 0.0, False, info), actions, 0.0)
        for i in range(1, size):
            # A complete 8-ary tree, grown breadth first; tokens and texts shared.
            parent = (i - 1) // 8
            node = tree.add(
                parent,
                actions.actions[(i - 1) % 8],
                Transition(i, "obs", 0.5, False, info),
                actions,
                0.0,
            )
            tree.backup([parent, node], 0.0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(tree) == size
        del tree
        table.add_row(
            "Tree",
            f"{size:,} nodes",
            f"{peak / 2**20:,.1f} MiB",
            f"{peak / size:,.0f} B/node (tokens excluded: they are the simulator's)",
        )

    if cap_sims <= 0:  # as --valid-sims and --copy-sims: 0 skips the row
        return

    class Chain:
        def step(self, token: int, action: str) -> Transition:
            return Transition(token + 1, "obs", 0.1, False, info)

    cap = max(sizes[0], 2)
    gc.collect()
    tracemalloc.start()
    out = search(
        Transition(0, "obs", 0.0, False, info),
        simulator=Chain(),
        propose_fn=lambda t: actions,
        value_fn=lambda t: 0.0,
        select_fn=ucb1(),
        budget=Budget(cap_sims, max_nodes=cap),
        rng=np.random.default_rng(0),
    )
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    table.add_row(
        "Tree",
        f"{cap_sims:,} sims, cap {cap:,}",
        f"{peak / 2**20:,.1f} MiB",
        f"{len(out.tree):,} nodes held, {out.tree.evicted:,} evicted",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="905.z5", help="Jericho game in the games dir")
    parser.add_argument("--games-dir", default=os.environ.get(GAMES_DIR_VAR))
    parser.add_argument("--sims", type=int, default=2000, help="simulations per rate run")
    parser.add_argument("--repeats", type=int, default=3, help="best of this many runs")
    parser.add_argument("--valid-sims", type=int, default=12, help="0 skips that row")
    parser.add_argument("--copy-sims", type=int, default=100, help="0 skips that row")
    parser.add_argument("--mem-sizes", default="10000,100000,1000000")
    parser.add_argument("--cap-sims", type=int, default=100_000, help="0 skips that row")
    parser.add_argument("--wide-actions", type=int, default=2000, help="actions a state")
    parser.add_argument("--wide-sims", type=int, default=300, help="0 skips that row")
    args = parser.parse_args()

    table = Table(title="wmkit search: rates against the raw engine (CPU s, best of repeats)")
    for column in ("engine", "what", "rate", "ratio / notes"):
        table.add_column(column, justify="right" if column == "rate" else "left")

    vault = gymnasium.make("wmkit/Vault-v0", load=4, horizon=1000)
    _, info = vault.reset(seed=0)
    bookkeeping_rows(
        table,
        "Vault-v0",
        vault,
        Proposal(tuple(info["admissible_actions"])),
        args.sims,
        args.repeats,
    )
    if args.games_dir:
        game = Path(args.games_dir) / args.game
        # Proposals served from a cache: the root's valid actions, found once.
        finder = gymnasium.make("wmkit/Jericho-v0", game=str(game), horizon=10**6)
        proposal = Proposal(tuple(finder.reset(seed=0)[1]["admissible_actions"]))
        env = gymnasium.make(
            "wmkit/Jericho-v0", game=str(game), horizon=10**6, admissible_actions=False
        )
        env.reset(seed=0)
        bookkeeping_rows(table, game.name, env, proposal, args.sims, args.repeats)
        if args.valid_sims:
            valid_action_rows(table, game, args.valid_sims)
        if args.copy_sims:
            copy_rows(table, game, proposal, args.copy_sims)
    else:
        table.add_row("Jericho", "skipped", "", f"set {GAMES_DIR_VAR} or --games-dir")
    if args.wide_sims:
        wide_rows(table, args.wide_actions, args.wide_sims, args.repeats)
    sizes = [int(s) for s in args.mem_sizes.split(",") if s]
    if sizes:
        memory_rows(table, sizes, args.cap_sims)
    console.print(table)


if __name__ == "__main__":
    main()
