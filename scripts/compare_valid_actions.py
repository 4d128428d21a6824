r"""Valid actions on real games: wmkit's generators against the walkthroughs and Jericho's.

Three commands:

``coverage`` (no spaCy needed)
    For each free game with a walkthrough, the walkthrough is replayed (its own seed)
    and at each of the first ``--steps`` states the outcome of the walkthrough's next
    command (world hash, score, game over: ``actions.Outcome``) is looked for among

    * the full generator's outcomes (``admissible_actions=True``),
    * the quick generator's, default limits (``admissible_actions="quick"``),
    * the unverified candidates' (``admissible_actions="candidates"``): they are tried
      in prior order from the state until one reaches the outcome; its place in that
      order is its rank (1: the first candidate tried).

    Only world-changing walkthrough commands count (the world hash or the score
    changes, or the game ends). Per game and in total: coverage (the share of those
    commands whose outcome the mode reaches), for the candidates the median and mean
    rank and the mean list size, and the mean seconds a state costs each mode to make
    its list (the candidates' trying is the report's, not the mode's, and is left out).
    ``--json out.json`` saves the rows and every state.

``rooms``
    The player's room by :func:`~wmkit.envs.jericho.objects.player_room` against the old
    rule (the player's outermost container) at every walkthrough state of every game
    (a fixed list of moves for games without a walkthrough).

``jericho`` (the default; needs spaCy's ``en_core_web_sm``)
    Jericho's own ``get_valid_actions()`` finds the objects around the player with
    spaCy's ``en_core_web_sm`` pipeline, which it downloads at run time (it is not on
    PyPI: offline, point ``--spacy-model`` at an unpacked copy, the folder holding its
    ``config.cfg``). Both generators are asked at the same states, the first
    ``--steps`` of each game's walkthrough, and compared by name (the share of Jericho's
    action strings that wmkit's list contains) and by outcome (each action of either
    list is played from the state on a scratch emulator and named by the world it leads
    to, Jericho's world-state hash plus the score; two spellings of one action count
    once).

Usage::

    WMKIT_GAMES_DIR=../shared/games python scripts/compare_valid_actions.py coverage \
        --steps 10 --workers 2 --json coverage.json
    WMKIT_GAMES_DIR=../shared/games python scripts/compare_valid_actions.py rooms
    WMKIT_GAMES_DIR=../shared/games python scripts/compare_valid_actions.py \
        --spacy-model /path/to/en_core_web_sm-3.8.0 --games 905.z5,acorncourt.z5 --steps 20
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
from rich.console import Console
from rich.table import Table

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.envs.jericho import GAMES_DIR_VAR, find_game

MODES = ("full", "quick", "candidates")


# --- coverage -----------------------------------------------------------------------------


def _games(spec: str | None) -> list[str]:
    """The games named in ``spec`` (comma-separated), or every story file in the games dir."""
    if spec:
        return spec.split(",")
    folder = Path(os.environ[GAMES_DIR_VAR])
    return sorted(p.name for p in folder.iterdir() if p.suffix[:2] == ".z" and p.is_file())


def coverage(game: str, steps: int | None) -> dict[str, Any]:
    """Replay ``game``'s walkthrough; at each state, does each mode reach its outcome?

    Returns a row: ``game``, ``states`` (walkthrough states visited), ``changing``
    (world-changing walkthrough commands among them), ``reached`` (per mode, how many
    of those outcomes it reaches), ``seconds`` (per mode, mean seconds a state costs
    to make its list), ``ranks`` (the candidates' rank per reached outcome),
    ``sizes`` (the candidate list's size per state), ``try_seconds`` (the report's
    own trying of candidates, in total) and ``detail`` (one record per state).
    Games without a walkthrough give a row with ``states`` 0.
    """
    from wmkit.envs.jericho import QUICK_OUTCOMES, QUICK_TRIES, JerichoEnv
    from wmkit.envs.jericho.actions import Candidates, Outcome, ValidActions, get_state, set_state

    env = JerichoEnv(game=find_game(game), admissible_actions=False, horizon=10**9)
    frotz = env.frotz
    row: dict[str, Any] = {
        "game": game,
        "states": 0,
        "changing": 0,
        "reached": dict.fromkeys(MODES, 0),
        "seconds": dict.fromkeys(MODES, 0.0),
        "ranks": [],
        "sizes": [],
        "try_seconds": 0.0,
        "detail": [],
    }
    try:
        walkthrough = frotz.get_walkthrough()
    except KeyError:
        env.close()
        return row
    env.reset(options={"walkthrough_seed": True})
    generators = {
        "full": ValidActions(frotz, env.templates, env._state_hash, frotz.get_score),
        "quick": ValidActions(
            frotz,
            env.templates,
            env._state_hash,
            frotz.get_score,
            max_outcomes=QUICK_OUTCOMES,
            max_tries=QUICK_TRIES,
        ),
    }
    candidates = Candidates(env.templates)
    spent = dict.fromkeys(MODES, 0.0)

    def over() -> bool:
        return bool(frotz.victory() or frotz.game_over())

    for command in walkthrough[:steps]:
        start, before, score = get_state(frotz), env._state_hash(), frotz.get_score()
        nouns, held = env._scope_nouns()
        reached_by: dict[str, set[Outcome]] = {}
        for mode, generator in generators.items():
            clock = time.perf_counter()
            reached_by[mode] = set(generator.outcomes(before, nouns, held).values())
            spent[mode] += time.perf_counter() - clock
        clock = time.perf_counter()
        actions, priors = candidates.propose(before, lambda n=nouns, h=held: (n, h))
        spent["candidates"] += time.perf_counter() - clock
        *_, terminated, _, _ = env.step(command)
        target = Outcome(env._state_hash(), frotz.get_score(), over())
        after = get_state(frotz)
        row["states"] += 1
        row["sizes"].append(len(actions))
        record: dict[str, Any] = {"command": command, "candidates": len(actions)}
        if target.state_hash != before or target.score != score or target.over:
            row["changing"] += 1
            rank = None
            clock = time.perf_counter()
            # Prior order, ties in the list's (sorted) order: what a search tries first.
            for place, i in enumerate(np.argsort(-np.asarray(priors), kind="stable"), 1):
                set_state(frotz, start)
                frotz.step(actions[i])
                if frotz._emulator_halted():
                    frotz.reset()  # a runtime error in the story: only a reset clears it
                    continue
                if Outcome(env._state_hash(), frotz.get_score(), over()) == target:
                    rank = place
                    break
            row["try_seconds"] += time.perf_counter() - clock
            set_state(frotz, after)
            found = {"full": target in reached_by["full"], "quick": target in reached_by["quick"]}
            found["candidates"] = rank is not None
            for mode in MODES:
                row["reached"][mode] += found[mode]
            if rank is not None:
                row["ranks"].append(rank)
            record.update(found, rank=rank)
        row["detail"].append(record)
        if terminated:
            break
    env.close()
    row["seconds"] = {m: spent[m] / row["states"] if row["states"] else 0.0 for m in MODES}
    return row


def _coverage_job(args: tuple[str, int | None]) -> dict[str, Any]:
    return coverage(*args)


def _console() -> Console:
    # Rich wraps at 80 columns when the output is not a terminal: too narrow for the rows.
    return Console(width=None if sys.stdout.isatty() else 150)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _rank_stats(ranks: list[int]) -> tuple[str, str]:
    if not ranks:
        return "-", "-"
    return f"{statistics.median(ranks):g}", f"{statistics.fmean(ranks):.0f}"


def coverage_table(rows: list[dict[str, Any]]) -> Table:
    """The coverage rows as a rich table, with a total row (pooled over the games)."""
    table = Table(title="Walkthrough coverage: world-changing walkthrough commands reached")
    for name in ("game", "states", "changing", "full", "quick", "candidates"):
        table.add_column(name, justify="left" if name == "game" else "right")
    for name in ("median rank", "mean rank", "list size", "full s", "quick s", "cand. ms"):
        table.add_column(name, justify="right")
    rows = [r for r in rows if r["states"]]

    def cells(name: str, rs: list[dict[str, Any]]) -> list[str]:
        states = sum(r["states"] for r in rs)
        changing = sum(r["changing"] for r in rs)
        ranks = [k for r in rs for k in r["ranks"]]
        sizes = [k for r in rs for k in r["sizes"]]

        def per_state(mode: str) -> float:  # mean over every state of the games
            return sum(r["seconds"][mode] * r["states"] for r in rs) / states if states else 0.0

        return [
            name,
            str(states),
            str(changing),
            *(_percent(sum(r["reached"][m] for r in rs), changing) for m in MODES),
            *_rank_stats(ranks),
            f"{statistics.fmean(sizes):.0f}" if sizes else "-",
            f"{per_state('full'):.2f}",
            f"{per_state('quick'):.3f}",
            f"{1000 * per_state('candidates'):.1f}",
        ]

    for row in rows:
        table.add_row(*cells(row["game"], [row]))
    table.add_section()
    table.add_row(*cells("total", rows))
    return table


def run_coverage(args: argparse.Namespace) -> None:
    """The ``coverage`` command: one row per game, in parallel over ``--workers``."""
    games = _games(args.games)
    clock = time.perf_counter()
    # Bigger story files first (they tend to be the slow ones): the workers end together.
    by_size = sorted(games, key=lambda game: -find_game(game).stat().st_size)
    jobs = [(game, args.steps) for game in by_size]
    if args.workers > 1:
        with multiprocessing.get_context("spawn").Pool(args.workers) as pool:
            found = {row["game"]: row for row in pool.imap_unordered(_coverage_job, jobs)}
    else:
        found = {row["game"]: row for row in map(_coverage_job, jobs)}
    rows = [found[game] for game in games]
    wall = time.perf_counter() - clock
    console = _console()
    console.print(coverage_table(rows))
    skipped = [r["game"] for r in rows if not r["states"]]
    if skipped:
        console.print(f"no walkthrough: {', '.join(skipped)}")
    console.print(
        f"{len(games)} games, first {args.steps or 'all'} walkthrough states, "
        f"{args.workers} worker(s): {wall:.0f} s wall; the report's own trying of "
        f"candidates: {sum(r['try_seconds'] for r in rows):.0f} s"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"steps": args.steps, "wall_seconds": wall, "rows": rows}, indent=1)
        )


# --- rooms --------------------------------------------------------------------------------


def _outermost(parents: np.ndarray, player: int) -> int:
    """The old rule: the player's outermost container; 0 if the player has none."""
    here, seen = player, 0
    while 0 < here <= len(parents) and seen <= len(parents):
        up = int(parents[here - 1])
        if up == 0:
            return here if here != player else 0
        here, seen = up, seen + 1
    return 0


def rooms(game: str) -> dict[str, Any]:
    """Compare :func:`player_room` with the old rule at every walkthrough state of ``game``.

    Returns ``game``, ``states``, ``differ`` (states where the rules disagree),
    ``inside`` (states where the player is inside something in the room) and
    ``ratio``: the largest ratio, over the states, of the objects the player's
    top-level ancestor holds directly to the number of top-level objects (the rule
    takes 2 or more for a container of rooms).
    """
    from jericho import defines

    from wmkit.envs.jericho import JerichoEnv
    from wmkit.envs.jericho.objects import player_room

    env = JerichoEnv(game=find_game(game), admissible_actions=False, horizon=10**9)
    try:
        commands = env.frotz.get_walkthrough()
        env.reset(options={"walkthrough_seed": True})
    except KeyError:
        commands = [a for a in defines.BASIC_ACTIONS if a != "take all"] * 4
        env.reset(seed=0)
    row = {"game": game, "states": 0, "differ": 0, "inside": 0, "ratio": 0.0}
    for command in [None, *commands]:
        if command is not None and env.step(command)[2]:
            break
        env._read_ram()
        parents = env._links(env._table)[0]
        room, old = player_room(parents, env.player), _outermost(parents, env.player)
        row["states"] += 1
        row["differ"] += room != old
        if room and 0 < env.player <= len(parents):
            row["inside"] += int(parents[env.player - 1]) != room
            top = np.count_nonzero(parents == 0)
            row["ratio"] = max(row["ratio"], np.count_nonzero(parents == old) / top)
    env.close()
    return row


def run_rooms(args: argparse.Namespace) -> None:
    """The ``rooms`` command: one row per game."""
    table = Table(title="The player's room: player_room() against the outermost container")
    for name in ("game", "states", "differ", "player inside something", "max held/top-level"):
        table.add_column(name, justify="left" if name == "game" else "right")
    for game in _games(args.games):
        row = rooms(game)
        table.add_row(
            game, str(row["states"]), str(row["differ"]), str(row["inside"]), f"{row['ratio']:.2f}"
        )
    _console().print(table)


# --- Jericho's own generator ---------------------------------------------------------------


def _use_model(path: str | None) -> None:
    """Make ``spacy.load("en_core_web_sm")`` load the pipeline at ``path``."""
    import spacy

    if path is None:
        return
    if not (Path(path) / "config.cfg").exists():
        raise SystemExit(f"--spacy-model {path}: no config.cfg there (not a spaCy pipeline)")
    load = spacy.load
    spacy.load = lambda name, *a, **k: load(path if name == "en_core_web_sm" else name, *a, **k)


def _outcomes(frotz, actions: list[str]) -> set[tuple[str, int]]:
    start = frotz.get_state()
    seen = set()
    for action in actions:
        frotz.set_state(start)
        frotz.step(action)
        seen.add((frotz.get_world_state_hash(), frotz.get_score()))
    frotz.set_state(start)
    return seen


def compare(game: str, steps: int) -> dict[str, float]:
    """Return mean agreements over the first ``steps`` walkthrough states of ``game``."""
    import jericho

    path = find_game(game)
    ours = gymnasium.make("wmkit/Jericho-v0", game=str(path)).unwrapped
    _, info = ours.reset(seed=0, options={"walkthrough_seed": True})
    theirs = jericho.FrotzEnv(str(path))
    theirs.reset()
    scratch = jericho.FrotzEnv(str(path))
    scratch.reset()
    by_name, recall, precision = [], [], []
    for action in [None, *theirs.get_walkthrough()[: steps - 1]]:
        if action is not None:
            _, _, done, _, info = ours.step(action)
            theirs.step(action)
            if done:
                break
        jericho_actions = theirs.get_valid_actions(use_parallel=False)
        wmkit_actions = info["admissible_actions"]
        if not jericho_actions:
            continue
        by_name.append(len(set(jericho_actions) & set(wmkit_actions)) / len(jericho_actions))
        scratch.set_state(theirs.get_state())
        theirs_out = _outcomes(scratch, jericho_actions)
        ours_out = _outcomes(scratch, wmkit_actions)
        recall.append(len(theirs_out & ours_out) / len(theirs_out))
        precision.append(len(theirs_out & ours_out) / len(ours_out) if ours_out else 0.0)
    ours.close()
    theirs.close()
    scratch.close()
    return {
        "states": len(by_name),
        "by_name": statistics.fmean(by_name) if by_name else float("nan"),
        "jericho_in_wmkit": statistics.fmean(recall) if recall else float("nan"),
        "wmkit_in_jericho": statistics.fmean(precision) if precision else float("nan"),
    }


def run_jericho(args: argparse.Namespace) -> None:
    """The ``jericho`` command: one agreement row per game."""
    _use_model(args.spacy_model)
    print(f"{'game':14} {'states':>6} {'by name':>8} {'J in W':>7} {'W in J':>7}")
    for game in args.games.split(","):
        row = compare(game, args.steps)
        print(
            f"{game:14} {row['states']:6d} {row['by_name']:8.2f} "
            f"{row['jericho_in_wmkit']:7.2f} {row['wmkit_in_jericho']:7.2f}"
        )


def main(argv: list[str] | None = None) -> None:
    """Run one command (module doc); without one, the comparison with Jericho's generator."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in ("coverage", "rooms", "jericho", "-h", "--help"):
        argv = ["jericho", *argv]  # the script's original interface
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cover = commands.add_parser("coverage", help="walkthrough coverage of wmkit's modes")
    cover.add_argument("--games", help="comma-separated (default: every game in the dir)")
    cover.add_argument("--steps", type=int, help="walkthrough states per game (default: all)")
    cover.add_argument("--workers", type=int, default=1, help="games played in parallel")
    cover.add_argument("--json", help="save the rows and every state's record here")
    room = commands.add_parser("rooms", help="player_room() against the outermost container")
    room.add_argument("--games", help="comma-separated (default: every game in the dir)")
    theirs = commands.add_parser("jericho", help="against Jericho's spaCy-based generator")
    theirs.add_argument("--games", default="905.z5,acorncourt.z5,night.z5,balances.z5,library.z5")
    theirs.add_argument("--steps", type=int, default=20, help="walkthrough states per game")
    theirs.add_argument("--spacy-model", help="folder of an unpacked en_core_web_sm pipeline")
    args = parser.parse_args(argv)
    if not os.environ.get(GAMES_DIR_VAR):
        raise SystemExit(f"set {GAMES_DIR_VAR} to the folder holding the games")
    if getattr(args, "steps", None) is not None and args.steps < 1:
        raise SystemExit("--steps must be >= 1")
    {"coverage": run_coverage, "rooms": run_rooms, "jericho": run_jericho}[args.command](args)


if __name__ == "__main__":
    main()
