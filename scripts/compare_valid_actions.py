r"""Compare wmkit's valid actions with Jericho's own spaCy-based generator.

Jericho's ``get_valid_actions()`` needs spaCy's ``en_core_web_sm`` pipeline, which it
downloads at run time; offline, point ``--spacy-model`` at an unpacked copy of the
pipeline (the folder holding its ``config.cfg``). Both generators are asked at the same
states — the first ``--steps`` states of each game's walkthrough — and compared in two
ways:

* by name: the share of Jericho's action strings that wmkit's list contains;
* by outcome: each action of either list is played from the state on a scratch emulator
  and named by the world it leads to (Jericho's world-state hash, plus the score);
  agreement is the share of Jericho's outcomes that wmkit also reaches, and the
  share of wmkit's outcomes Jericho reaches. Two spellings of one action count once.

Usage::

    WMKIT_GAMES_DIR=../shared/games python scripts/compare_valid_actions.py \
        --spacy-model /path/to/en_core_web_sm-3.8.0 --games 905.z5,acorncourt.z5 --steps 20
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path

import gymnasium

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.envs.jericho import GAMES_DIR_VAR, find_game


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


def main() -> None:
    """Print one agreement row per game."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default="905.z5,acorncourt.z5,night.z5,balances.z5,library.z5")
    parser.add_argument("--steps", type=int, default=20, help="walkthrough states per game")
    parser.add_argument("--spacy-model", help="folder of an unpacked en_core_web_sm pipeline")
    args = parser.parse_args()
    if not os.environ.get(GAMES_DIR_VAR):
        raise SystemExit(f"set {GAMES_DIR_VAR} to the folder holding the games")
    _use_model(args.spacy_model)
    print(f"{'game':14} {'states':>6} {'by name':>8} {'J in W':>7} {'W in J':>7}")
    for game in args.games.split(","):
        row = compare(game, args.steps)
        print(
            f"{game:14} {row['states']:6d} {row['by_name']:8.2f} "
            f"{row['jericho_in_wmkit']:7.2f} {row['wmkit_in_jericho']:7.2f}"
        )


if __name__ == "__main__":
    main()
