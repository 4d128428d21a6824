"""The families' tracked-state policies: with the oracle tracker each reaches its family's score.

Each family's policy acts on the tracked state (and what any agent is shown); with the
oracle's tracked state it earns (nearly) the family's ``max_score``, so the score of the
other trackers under the same policy says how good their tracked picture is. The policies
never read the ground-truth ``wm.*`` keys, even when handed them.
"""

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pytest

from wmkit.agents.policies import GreedyPolicy
from wmkit.agents.tracked import FAMILY_POLICIES, SmartHomePolicy, TrackedPolicy
from wmkit.agents.trackers import OracleTracker, WindowTracker
from wmkit.envs import DIAGNOSTIC_IDS
from wmkit.envs.smarthome.text import TEXT as SMARTHOME_TEXT
from wmkit.evals.runner import make_env
from wmkit.world.types import GROUND_TRUTH_PREFIX, WorldState, agent_view

FAMILIES = ("wmkit/Parcel-v0", "wmkit/SmartHome-v0", "wmkit/Booking-v0", "wmkit/Vault-v0")


class _NoTruth(Mapping[str, Any]):
    """``info`` with its ground truth in it, failing any read of a ``wm.*`` key."""

    def __init__(self, info: Mapping[str, Any]) -> None:
        self._info = dict(info)
        assert any(k.startswith(GROUND_TRUTH_PREFIX) for k in self._info)

    def __getitem__(self, key: str) -> Any:
        if key.startswith(GROUND_TRUTH_PREFIX):
            raise AssertionError(f"the policy read {key!r}")
        return self._info[key]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("the policy listed info's keys (ground truth among them)")

    def __len__(self) -> int:
        return len(self._info)


def _play(env_id: str, horizon: int, seed: int, tracker: Any, view) -> tuple[int, int]:
    """One episode of ``TrackedPolicy(env_id)`` on ``tracker``; returns (score, max_score)."""
    env = make_env(env_id, horizon, {})
    policy = TrackedPolicy(env_id)
    observation, info = env.reset(seed=seed)
    tracker.reset(observation, info)
    policy.reset(np.random.default_rng(seed))
    done = False
    while not done:
        action = policy.act(observation, view(info), tracker.state)
        assert action in info["admissible_actions"]
        observation, _, terminated, truncated, info = env.step(action)
        tracker.update(action, observation, info)
        done = terminated or truncated
    env.close()
    return info["score"], info["max_score"]


@pytest.mark.parametrize("env_id", [*FAMILIES, "wmkit/Reference-v0"])
@pytest.mark.parametrize("horizon", [50, 200])
def test_the_oracle_tracker_and_the_familys_policy_reach_its_maximum(env_id, horizon):
    for seed in range(3):
        score, max_score = _play(env_id, horizon, seed, OracleTracker(), agent_view)
        assert max_score > 0
        assert score >= 0.9 * max_score, (env_id, horizon, seed, score, max_score)


@pytest.mark.parametrize("env_id", FAMILIES)
def test_the_policies_never_read_ground_truth(env_id):
    # The oracle agent is handed the full info: its policy must leave wm.* alone there too.
    score, max_score = _play(env_id, 50, 0, OracleTracker(), _NoTruth)
    assert score >= 0.9 * max_score


@pytest.mark.parametrize("env_id", ["wmkit/Booking-v0", "wmkit/Vault-v0"])
def test_forgetting_costs_score_under_the_same_policy(env_id):
    def mean(make_tracker) -> float:
        return np.mean([_play(env_id, 200, s, make_tracker(), agent_view)[0] for s in range(3)])

    reader = make_env(env_id, 50, {}).unwrapped.reader
    oracle = mean(OracleTracker)
    assert mean(lambda: WindowTracker(reader, k=None)) == oracle  # perfect reading, all kept
    assert mean(lambda: WindowTracker(reader, k=10)) < 0.75 * oracle


def test_every_diagnostic_family_has_a_policy_and_other_envs_are_refused():
    assert set(FAMILY_POLICIES) == set(DIAGNOSTIC_IDS)
    assert isinstance(TrackedPolicy("wmkit/Parcel-v0").policy, GreedyPolicy)
    with pytest.raises(ValueError, match="no tracked-state policy for env 'wmkit/Jericho-v0'"):
        TrackedPolicy("wmkit/Jericho-v0")


# --- SmartHome: the instruction's wording decides between its confusable commands -------

_VALUES = {
    "person": "Leo",
    "on": "gets home",
    "minutes": "10",
    "device": "hall light",
    "setting": "30",
    "amount": "20",
}
_CHANGES = {  # op of the kind -> (the command asked, its confusable twin)
    "set": ("set hall light to 30", "adjust hall light by +30"),
    "up": ("adjust hall light by +20", "set hall light to 20"),
    "down": ("adjust hall light by -20", "set hall light to 20"),
    "nudge_up": ("adjust hall light by +10", "set hall light to 10"),
    "nudge_down": ("adjust hall light by -10", "set hall light to 10"),
}


def _instructions() -> Iterator[tuple[str, str, str]]:
    for name, kind in SMARTHOME_TEXT.kinds.items():
        if name.startswith("ask_") and not name.startswith("ask_cancel"):
            condition, op = name[4:].split("_", 1)
            for template in kind.templates:
                yield condition, op, template.format_map(_VALUES)


@pytest.mark.parametrize(("condition", "op", "line"), list(_instructions()))
def test_smarthome_carries_out_every_wording_of_an_instruction(condition, op, line):
    asked, twin = _CHANGES[op]
    admissible = [asked, twin]
    if condition != "now":  # a future instruction: its schedules, and the change now
        when = "schedule when leo arrives: " if condition == "when" else "schedule in 10 min: "
        admissible = [when + asked, asked, when + twin]
        asked = when + asked
    info = {"admissible_actions": sorted([*admissible, "wait"])}
    observation = f"You wait.\n{line}\nLeo set the hall light to 20 by hand."
    assert SmartHomePolicy().act(observation, info, WorldState()) == asked


def _rule(n: int, device: str, trigger: str, status: str) -> list[tuple[str, str, str]]:
    rule = f"rule:r{n}"
    return [(rule, "device", device), (rule, "trigger", trigger), (rule, "status", status)]


def test_smarthome_cancels_the_pending_rule_its_tracked_state_describes():
    tracked = WorldState(
        _rule(1, "light:hall", "person:leo", "fired")
        + _rule(2, "light:hall", "person:leo", "armed")
        + _rule(3, "blind:den", "clock", "waiting")
    )
    info = {"admissible_actions": ["cancel r2", "cancel r3", "cancel r4", "wait"]}
    policy = SmartHomePolicy()
    for line, cancel in [
        ("Forget the hall light rule for Leo, please.", "cancel r2"),
        ("I changed my mind about the hall light rule for Leo: cancel it.", "cancel r2"),
        ("Forget the den blinds timer, please.", "cancel r3"),
        ("I changed my mind about the den blinds timer: cancel it.", "cancel r3"),
        ("Please cancel rule R4.", "cancel r4"),  # named by id: no tracking needed
        ("I no longer need R4; cancel it.", "cancel r4"),
        ("Rule R2 fired.", "wait"),
    ]:
        assert policy.act(line, info, tracked) == cancel, line
    # A tracker that forgot the rule cannot say which one is meant.
    forgot = "Forget the hall light rule for Leo, please."
    assert policy.act(forgot, info, WorldState()) == "wait"
