"""Tests for the shared diagnostic shell, ``DiagnosticEnv``, through the Parcel family."""

from __future__ import annotations

import gymnasium
import pytest

import wmkit.envs  # noqa: F401  (registers wmkit/Parcel-v0)
from wmkit.envs.diagnostic import DiagnosticEnv
from wmkit.envs.parcel import ParcelEnv, ParcelState

VISIBLE = {"admissible_actions", "score", "max_score", "moves"}
TRUTH = {"wm.state", "wm.delta", "wm.probes", "wm.state_hash", "wm.mentioned"}


def make(**kwargs) -> ParcelEnv:
    return gymnasium.make("wmkit/Parcel-v0", **kwargs).unwrapped


# --- the shell ---------------------------------------------------------------------------


def test_parcel_is_a_diagnostic_env():
    env = make()
    assert isinstance(env, DiagnosticEnv)
    assert env.observation_space is env.core.observation_space
    assert env.action_space is env.core.action_space


@pytest.mark.parametrize("value", ["yes", 1, 0, None, 1.0])
def test_ground_truth_must_be_a_bool(value):
    with pytest.raises(TypeError, match=f"ground_truth must be a bool, got {value!r}"):
        ParcelEnv(ground_truth=value)


def test_unknown_and_bad_parameters_are_rejected_by_the_params_class():
    with pytest.raises(TypeError, match="bogus"):
        ParcelEnv(bogus=3)
    with pytest.raises(ValueError, match="horizon"):
        ParcelEnv(horizon=2)


@pytest.mark.parametrize("call", ["step", "snapshot"])
def test_step_and_snapshot_before_reset_raise(call):
    env = make()
    with pytest.raises(RuntimeError, match=r"call reset\(\) before"):
        env.step("wait") if call == "step" else env.snapshot()


@pytest.mark.parametrize("token", ["not a token", 7, None, (), ("params",), object()])
def test_restore_rejects_what_is_not_a_state(token):
    env = make()
    with pytest.raises(TypeError, match="restore"):
        env.restore(token)  # before reset: no state type to compare with yet
    env.reset(seed=0)
    with pytest.raises(TypeError, match=f"needs a ParcelState token, got {type(token).__name__}"):
        env.restore(token)


def test_restore_rejects_a_token_with_other_parameters_and_keeps_its_state():
    env = make(load=3)
    env.reset(seed=0)
    mine = env.snapshot()
    other = make(load=5)
    other.reset(seed=0)
    with pytest.raises(ValueError, match="parameters"):
        env.restore(other.snapshot())
    assert env.snapshot() is mine


def test_restore_works_before_reset_and_resumes_exactly():
    source = make(ground_truth=True)
    source.reset(seed=3)
    for _ in range(10):
        source.step("wait")
    token = source.snapshot()
    assert isinstance(token, ParcelState)
    expected = source.step("wait")

    fresh = make(ground_truth=True)
    fresh.restore(token)  # a planner may restore into an env it never reset
    got = fresh.step("wait")
    assert got[:4] == expected[:4]
    assert got[4]["wm.state_hash"] == expected[4]["wm.state_hash"]
    assert got[4]["wm.state"] == expected[4]["wm.state"]


def test_truncated_exactly_at_the_horizon_and_after_it():
    env = make(horizon=20)
    env.reset(seed=1)
    flags = [env.step("wait")[2:4] for _ in range(22)]
    assert flags[:19] == [(False, False)] * 19
    assert flags[19:] == [(False, True)] * 3  # stepping on past the horizon stays truncated
    env.reset()
    assert env.step("wait")[2:4] == (False, False)


def test_info_keys_follow_ground_truth():
    plain, truth = make(), make(ground_truth=True)
    for env, keys in ((plain, VISIBLE), (truth, VISIBLE | TRUTH)):
        _, info = env.reset(seed=2)
        assert set(info) == keys
        assert set(env.step("wait")[-1]) == keys


def test_visible_info_is_the_same_with_and_without_ground_truth():
    plain, truth = make(), make(ground_truth=True)
    a, b = plain.reset(seed=4), truth.reset(seed=4)
    for _ in range(30):
        assert a[:-1] == b[:-1]  # observation (reward, flags)
        assert {k: b[-1][k] for k in VISIBLE} == a[-1]
        action = a[-1]["admissible_actions"][-2]  # a track command
        a, b = plain.step(action), truth.step(action)


def test_info_values_are_fresh_containers():
    # Caches inside the state must not leak out: a caller mutating info changes nothing.
    env = make(ground_truth=True)
    _, info = env.reset(seed=5)
    token = env.snapshot()
    first = env.step("wait")[-1]
    for key in ("admissible_actions", "wm.state", "wm.probes", "wm.mentioned"):
        first[key].append("junk")
    first["wm.delta"]["action"]["added"].append("junk")
    info["admissible_actions"].clear()
    env.restore(token)
    again = env.step("wait")[-1]
    assert "junk" not in again["admissible_actions"] and "wait" in again["admissible_actions"]
    assert "junk" not in again["wm.state"] and "junk" not in again["wm.mentioned"]
    assert "junk" not in again["wm.delta"]["action"]["added"]
    assert env.core.state_info(token)["admissible_actions"] == sorted(
        env.core.state_info(token)["admissible_actions"]
    )
    assert "wait" in env.core.state_info(token)["admissible_actions"]


def test_reward_and_moves_are_plain_python_numbers():
    env = make()
    env.reset(seed=6)
    _, reward, terminated, truncated, info = env.step("wait")
    assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
    assert all(type(info[k]) is int for k in ("score", "max_score", "moves"))
