"""The action/event split of wmkit/Jericho-v0 on a game with randomly moving characters.

advent.z5's dwarves and pirate wander at random. The counterfactual ``wait`` starts from
the same emulator state (its RNG included), but a command may draw random numbers
differently from ``wait``, so a wanderer can end a step in a different room in the two
runs. The split goes by slot: such a move is one event, never an action half and an
event half (issue 14).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import gymnasium
import pytest

jericho = pytest.importorskip("jericho")

import wmkit.envs  # noqa: E402, F401  (registers the ids)
from wmkit.envs.diagnostic.truth import fact_slot  # noqa: E402
from wmkit.envs.jericho import JerichoEnv  # noqa: E402
from wmkit.world.types import Fact  # noqa: E402

pytestmark = [pytest.mark.jericho, pytest.mark.filterwarnings("ignore::UserWarning")]

WANDERERS = ("dwarf", "pirate")
SET_VALUED = ("attr",)


def slot(fact: Fact) -> tuple:
    return fact_slot(fact, SET_VALUED)


def parts_by_slot(delta: dict) -> dict[tuple, set[str]]:
    """``{slot: {"action", "event"}}``: the parts each changed slot has facts in."""
    parts: dict[tuple, set[str]] = defaultdict(set)
    for part in ("action", "event"):
        for fact in delta[part]["added"] + delta[part]["removed"]:
            parts[slot(fact)].add(part)
    return parts


def changed_slots(before: list[Fact], after: list[Fact]) -> set[tuple]:
    return {slot(f) for f in set(before) ^ set(after)}


def test_no_slot_is_split_and_a_wanderer_moved_by_waiting_too_is_an_event(games_dir: Path):
    """Seeded walkthrough stretches underground, checked against our own ``wait`` run.

    Per step: ``wait`` from the same snapshot (restored after), then the command. A slot
    ``wait`` changes too is wholly in the event part, any other changed slot wholly in
    the action part; so no slot has facts in both.
    """
    env = gymnasium.make(
        "wmkit/Jericho-v0",
        game=str(games_dir / "advent.z5"),
        ground_truth=True,
        admissible_actions=False,
        horizon=10_000,
    ).unwrapped
    assert isinstance(env, JerichoEnv)
    walkthrough = env.frotz.get_walkthrough()[:130]
    wanderer_events = []
    steps = 0
    for seed in (3, 4, 5):
        _, info = env.reset(seed=seed)
        for action in walkthrough:
            before = info["wm.state"]
            token = env.snapshot()
            waited = env.step("wait")[-1]["wm.state"]
            env.restore(token)
            _, _, terminated, _, info = env.step(action)
            steps += 1
            by_wait = changed_slots(before, waited)
            delta = info["wm.delta"]
            added = set(delta["action"]["added"]) | set(delta["event"]["added"])
            removed = set(delta["action"]["removed"]) | set(delta["event"]["removed"])
            assert added == set(info["wm.state"]) - set(before), (seed, action)
            assert removed == set(before) - set(info["wm.state"]), (seed, action)
            parts = parts_by_slot(delta)
            assert set(parts) == changed_slots(before, info["wm.state"]), (seed, action)
            for key, where in parts.items():
                expected = {"event"} if key in by_wait else {"action"}
                assert where == expected, (seed, action, key, delta)
            for key in parts:
                subject, relation, _ = key
                named = any(w in action.lower() for w in WANDERERS)
                if relation == "in" and any(w in subject for w in WANDERERS) and not named:
                    now = {f.object for f in info["wm.state"] if slot(f) == key}
                    then = {f.object for f in waited if slot(f) == key}
                    if key in by_wait and now != then:  # the case: two rooms
                        wanderer_events.append((seed, action, subject))
            if terminated:
                break
    assert steps > 200
    # The stretch holds the case the issue was about: a command that never named the
    # wanderer, after which he is somewhere else than ``wait`` would have put him.
    assert len(wanderer_events) >= 2, wanderer_events
