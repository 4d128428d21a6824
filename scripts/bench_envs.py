"""Environment throughput, as ratios against the raw engine measured in the same run.

Prints, in one run:
- Jericho: raw ``FrotzEnv.step`` steps/s vs ``wmkit/Jericho-v0`` with ground truth off
  and on (ratios), and snapshot+restore+step/s vs raw ``get_state``/``set_state``+step;
- TextWorld: raw ``FrotzEnv.step`` on the generated game, TextWorld's own
  ``textworld.start`` env, and ``wmkit/TextWorld-v0`` (ground truth off and on);
- every diagnostic family's steps/s with ground truth off and on.

Times are CPU seconds of this process (``time.process_time``): on a shared, noisy
machine they vary less than wall time. Each figure is the best of ``--repeats`` runs,
taken in turns with the other engines of its section (see :func:`rates`). The
caption names the interpreter and the load average at the start: the interpreter's
build matters (the diagnostic families ran 1.2-1.4x faster on Debian's python3.11 than
on a default pyenv build of 3.11 on the same machine), so compare figures from one
interpreter only.

Usage: ``python scripts/bench_envs.py [--games 905.z5,acorncourt.z5] [--steps 5000]``;
Jericho rows need ``WMKIT_GAMES_DIR`` (or ``--games-dir``), TextWorld rows need the
``textworld`` extra; missing parts are skipped with a note.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium
from rich.console import Console
from rich.table import Table

from wmkit.envs import DIAGNOSTIC_IDS
from wmkit.envs.jericho import GAMES_DIR_VAR

console = Console()


def rates(runs: dict[Any, Callable[[int], None]], steps: int, repeats: int) -> dict[Any, float]:
    """Best steps per CPU second of each ``run(steps)`` over ``repeats`` runs.

    The runs take turns, round by round, rather than each repeating at once: this VM
    has slow phases lasting minutes, and a best of runs spread over the whole bench
    catches each engine in a fast phase, where back-to-back repeats could all fall in
    one slow phase (one family then read 38,000 steps/s in one run and 61,000 in the
    next). Ratios compare engines timed in the same rounds.
    """
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for key, run in runs.items():
            start = time.process_time()
            run(steps)
            best[key] = min(best[key], time.process_time() - start)
    return {key: steps / seconds for key, seconds in best.items()}


def cycle(actions: list[str], i: int) -> str:
    return actions[i % len(actions)]


def family_run(env_id: str, ground_truth: bool) -> Callable[[int], None]:
    env = gymnasium.make(env_id, horizon=1000, ground_truth=ground_truth)

    def run(n: int) -> None:
        _, info = env.reset(seed=0)
        for i in range(n):
            _, _, terminated, truncated, info = env.step(cycle(info["admissible_actions"], i))
            if terminated or truncated:
                _, info = env.reset(seed=i)

    return run


def bench_families(table: Table, steps: int, repeats: int) -> None:
    runs, skipped = {}, {}
    for env_id in DIAGNOSTIC_IDS:
        try:
            for ground_truth in (False, True):
                runs[env_id, ground_truth] = family_run(env_id, ground_truth)
        except (ImportError, gymnasium.error.Error) as err:
            skipped[env_id] = f"{type(err).__name__}: {err}"
    best = rates(runs, steps, repeats)
    for env_id in DIAGNOSTIC_IDS:
        if env_id in skipped:
            table.add_row(env_id, "skipped", "", skipped[env_id])
            continue
        table.add_row(env_id, "GT off", f"{best[env_id, False]:,.0f}", "target ≥ 50,000")
        table.add_row("", "GT on", f"{best[env_id, True]:,.0f}", "target ≥ 10,000")


def bench_jericho(table: Table, games: list[Path], steps: int, repeats: int) -> None:
    import jericho

    for path in games:
        walkthrough = jericho.FrotzEnv(str(path)).get_walkthrough()
        raw = jericho.FrotzEnv(str(path))

        def run_raw(n: int, raw=raw, walkthrough=walkthrough) -> None:
            raw.reset()
            for i in range(n):
                _, _, done, _ = raw.step(cycle(walkthrough, i))
                if done or i % len(walkthrough) == len(walkthrough) - 1:
                    raw.reset()

        def wrapped(
            ground_truth: bool, path=path, walkthrough=walkthrough
        ) -> Callable[[int], None]:
            env = gymnasium.make(
                "wmkit/Jericho-v0", game=str(path), horizon=10**6,
                ground_truth=ground_truth, admissible_actions=False,
            )  # fmt: skip

            # The raw emulator plays with the walkthrough's seed: play the same game.
            same = {"walkthrough_seed": True}

            def run(n: int) -> None:
                env.reset(seed=0, options=same)
                for i in range(n):
                    _, _, terminated, truncated, _ = env.step(cycle(walkthrough, i))
                    if terminated or truncated or i % len(walkthrough) == len(walkthrough) - 1:
                        env.reset(seed=0, options=same)

            return run

        # Planning: restore a snapshot, then step, over and over.
        raw.reset()
        raw_state = raw.get_state()

        def run_raw_restore(n: int, raw=raw, raw_state=raw_state, walkthrough=walkthrough) -> None:
            for i in range(n):
                raw.set_state(raw_state)
                raw.step(walkthrough[i % min(len(walkthrough), 5)])

        env = gymnasium.make(
            "wmkit/Jericho-v0", game=str(path), horizon=10**6, admissible_actions=False
        )
        env.reset(seed=0, options={"walkthrough_seed": True})
        token = env.unwrapped.snapshot()

        def run_restore(n: int, env=env, token=token, walkthrough=walkthrough) -> None:
            for i in range(n):
                env.unwrapped.restore(token)
                env.step(walkthrough[i % min(len(walkthrough), 5)])

        best = rates(
            {
                "raw": run_raw, "off": wrapped(False), "on": wrapped(True),
                "raw restore": run_raw_restore, "restore": run_restore,
            },
            steps,
            repeats,
        )  # fmt: skip
        base, off, on = best["raw"], best["off"], best["on"]
        table.add_row(path.name, "raw FrotzEnv.step", f"{base:,.0f}", "1.00")
        table.add_row("", "Jericho-v0 GT off", f"{off:,.0f}", f"{off / base:.2f} (target ≥ 0.90)")
        table.add_row("", "Jericho-v0 GT on", f"{on:,.0f}", f"{on / base:.2f}")
        raw_rs, ours_rs = best["raw restore"], best["restore"]
        table.add_row("", "raw set_state+step", f"{raw_rs:,.0f}", "1.00")
        table.add_row("", "restore+step", f"{ours_rs:,.0f}", f"{ours_rs / raw_rs:.2f}")


def bench_textworld(table: Table, steps: int, repeats: int) -> None:
    import jericho
    import textworld

    from wmkit.envs.twgames import make_game

    game = make_game("simple", {"seed": 1})
    env = gymnasium.make("wmkit/TextWorld-v0", game=str(game), horizon=10**6)
    _, info = env.reset(seed=0)
    walk = [info["admissible_actions"][0]]
    for i in range(199):  # a fixed random-looking walk every engine replays
        _, _, terminated, truncated, info = env.step(walk[-1])
        if terminated or truncated:
            _, info = env.reset(seed=0)
        walk.append(cycle(info["admissible_actions"], 7 * i + 3))

    raw = jericho.FrotzEnv(str(game))

    def run_raw(n: int) -> None:
        raw.reset()
        for i in range(n):
            raw.step(walk[i % len(walk)])
            if i % len(walk) == len(walk) - 1:
                raw.reset()

    infos = textworld.EnvInfos(facts=True, admissible_commands=True, score=True)
    tw = textworld.start(str(game), request_infos=infos)

    def run_tw(n: int) -> None:
        tw.reset()
        for i in range(n):
            tw.step(walk[i % len(walk)])
            if i % len(walk) == len(walk) - 1:
                tw.reset()

    def wrapped(ground_truth: bool) -> Callable[[int], None]:
        env = gymnasium.make(
            "wmkit/TextWorld-v0", game=str(game), horizon=10**6, ground_truth=ground_truth
        )

        def run(n: int) -> None:
            env.reset(seed=0)
            for i in range(n):
                _, _, terminated, truncated, _ = env.step(walk[i % len(walk)])
                if terminated or truncated or i % len(walk) == len(walk) - 1:
                    env.reset(seed=0)

        return run

    best = rates(
        {
            "raw": run_raw,
            "textworld.start": run_tw,
            "TextWorld-v0 GT off": wrapped(False),
            "TextWorld-v0 GT on": wrapped(True),
        },
        steps,
        repeats,
    )
    base = best.pop("raw")
    table.add_row(game.name, "raw FrotzEnv.step", f"{base:,.0f}", "1.00")
    for name, value in best.items():
        table.add_row("", name, f"{value:,.0f}", f"{value / base:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--games",
        default="905.z5,acorncourt.z5,lostpig.z8",
        help="Jericho games (comma-separated names in the games dir)",
    )
    parser.add_argument("--games-dir", default=os.environ.get(GAMES_DIR_VAR))
    parser.add_argument("--steps", type=int, default=5000, help="steps per measurement")
    parser.add_argument("--repeats", type=int, default=5, help="best of this many runs")
    parser.add_argument("--skip", default="", help="comma-separated: families,jericho,textworld")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))

    table = Table(
        title="wmkit env throughput (steps per CPU second, best of repeats)",
        caption=f"{platform.python_implementation()} {platform.python_version()} "
        f"({sys.executable}); load average {os.getloadavg()[0]:.2f} at the start",
    )
    for column in ("env", "what", "steps/s", "ratio / target"):
        table.add_column(column, justify="right" if column == "steps/s" else "left")
    if "families" not in skip:
        bench_families(table, args.steps * 4, args.repeats)
    if "jericho" not in skip:
        if args.games_dir:
            games = [Path(args.games_dir) / g for g in args.games.split(",")]
            bench_jericho(table, games, args.steps, args.repeats)
        else:
            table.add_row("Jericho", "skipped", "", f"set {GAMES_DIR_VAR}")
    if "textworld" not in skip:
        try:
            bench_textworld(table, max(args.steps // 10, 200), args.repeats)
        except ImportError as err:
            table.add_row("TextWorld", "skipped", "", str(err))
    console.print(table)


if __name__ == "__main__":
    main()
