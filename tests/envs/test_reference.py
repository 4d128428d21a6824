"""The reference family's own checks, beside the contract every family passes
(``test_family_contract.py``): a newcomer's family test starts from this file.
"""

from __future__ import annotations

import random

import gymnasium
from family_checks import (
    assert_snapshot_restore_reproduces,
    assert_state_hash_follows_the_world,
    assert_truncates_at_horizon,
    replay_with_full_memory,
)

import wmkit.envs  # noqa: F401  (registers wmkit/Reference-v0)
from wmkit.envs.diagnostic.reference import ReferenceEnv, read


def make(**kwargs) -> ReferenceEnv:
    return gymnasium.make("wmkit/Reference-v0", **kwargs).unwrapped


def pick(rng: random.Random, info: dict, *_) -> str:
    return rng.choice(info["admissible_actions"])


def test_probes_are_anchored_where_the_answer_was_last_stated():
    described, probes = replay_with_full_memory(
        make, read, pick, range(6), {"indirection": 0.8}, (20, 80, 300)
    )
    assert described > 5 and probes > 50  # boxes named by colour were really resolved


def test_the_timer_and_the_conditional_are_events():
    env = make(ground_truth=True, horizon=400)
    _, info = env.reset(seed=1)
    seen = set()
    for _ in range(400):
        _, _, _, truncated, info = env.step("wait")
        event = info["wm.delta"]["event"]["added"]
        seen |= {(f.relation, f.object) for f in event if f.object in ("courier", "fragile")}
        assert not info["wm.delta"]["action"]["added"]  # waiting changes nothing itself
        if truncated:
            break
    assert seen == {("on", "courier"), ("label", "fragile")}


def test_a_reply_to_a_bad_command_names_the_commands():
    env = make()
    env.reset(seed=0)
    obs = env.step("dance")[0]
    assert "move box N to shelf X" in obs.split("\n")[0]


def test_truncates_at_the_horizon():
    assert_truncates_at_horizon(make(horizon=20))


def test_snapshot_restore_reproduces_the_next_step():
    assert_snapshot_restore_reproduces(make, lambda rng, info, env: pick(rng, info), "Reference")


def test_state_hash_follows_the_world():
    assert_state_hash_follows_the_world(
        make(ground_truth=True), lambda token, info: "move box 1 to shelf A"
    )
