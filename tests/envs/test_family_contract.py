"""The contract every diagnostic family keeps, checked the same way for each of them.

Parametrised over ``DIAGNOSTIC_IDS``, the four benchmark families and the reference
family a newcomer copies: Gymnasium's ``check_env``, determinism per seed, probes and
anchors in range, the full-memory reader invariant, solvability by the family's solver
(where it has one), and the difficulty property of DIAGNOSTICS.md (the window baseline's
drift grows with the horizon while the oracle's stays 0).
"""

from __future__ import annotations

import random

import gymnasium
import numpy as np
import pytest
from family_checks import assert_deterministic, play, probe_chains, replay_with_full_memory
from gymnasium.utils.env_checker import check_env

from wmkit.agents.trackers import OracleTracker, WindowTracker
from wmkit.envs import DIAGNOSTIC_IDS
from wmkit.envs.diagnostic import DiagnosticEnv, FamilyCore, FamilyParams
from wmkit.evals.metrics import drift
from wmkit.world.types import WorldState


def make(env_id: str, **kwargs) -> DiagnosticEnv:
    return gymnasium.make(env_id, **kwargs).unwrapped


def random_action(rng: random.Random, info: dict) -> str:
    return rng.choice(info["admissible_actions"])


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_the_family_is_built_from_the_shared_core(env_id):
    env = make(env_id)
    assert isinstance(env, DiagnosticEnv)
    assert isinstance(env.core, FamilyCore)
    assert isinstance(env.params, FamilyParams)
    with pytest.raises(TypeError, match="horizon"):
        make(env_id, horizon="long")
    with pytest.raises(ValueError, match="distractors"):
        make(env_id, distractors=51)


@pytest.mark.parametrize("ground_truth", [False, True])
@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_check_env(env_id, ground_truth):
    check_env(make(env_id, ground_truth=ground_truth), skip_render_check=True)


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_deterministic_per_seed(env_id):
    assert_deterministic(
        lambda seed: play(make(env_id, ground_truth=True), seed, 40, random_action)
    )


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_probes_ask_about_mentioned_entities_with_anchors_in_range(env_id):
    env = make(env_id, ground_truth=True, horizon=300, probe_rate=0.5)
    chains, kinds = probe_chains(env, 5, 300, lambda rng, info, env: random_action(rng, info))
    assert len(chains) > 20 and min(chains) >= 0
    assert set(kinds) <= {"drift", "breakage", "confusion", "stale"}


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_a_full_memory_reader_holds_the_true_state(env_id):
    reader = make(env_id).reader

    def build(**kwargs):
        return make(env_id, **kwargs)

    _, probes = replay_with_full_memory(
        build, reader, random_action, range(3), {}, (20, 80, 160), exact_anchors=False
    )
    assert probes > 0


@pytest.mark.parametrize("env_id", [i for i in DIAGNOSTIC_IDS if hasattr(make(i), "solver")])
def test_the_solver_wins_every_point(env_id):
    for seed in range(4):
        env = make(env_id, horizon=150)
        _, info = env.reset(seed=seed)
        truncated = terminated = False
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(env.solver(env.snapshot()))
        assert info["max_score"] > 0
        assert info["score"] == info["max_score"], seed


def _mean_drift(env_id: str, tracker, horizon: int, seeds: range) -> float:
    means = []
    for seed in seeds:
        env = make(env_id, ground_truth=True, horizon=horizon)
        rng = random.Random(seed)
        obs, info = env.reset(seed=seed)
        tracker.reset(obs, info)
        mentioned, series = set(), []
        while True:
            mentioned.update(info["wm.mentioned"])
            series.append(drift(tracker.state, WorldState(info["wm.state"]), mentioned))
            if len(series) > horizon:
                break
            action = random_action(rng, info)
            obs, _, terminated, _, info = env.step(action)
            tracker.update(action, obs, info)
            if terminated:
                break
        means.append(np.mean(series))
    return float(np.mean(means))


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_difficulty_bites_the_window_grows_with_the_horizon_and_the_oracle_stays_exact(env_id):
    reader = make(env_id).reader
    short = _mean_drift(env_id, WindowTracker(reader, k=10), 50, range(3))
    long = _mean_drift(env_id, WindowTracker(reader, k=10), 300, range(3))
    assert long > short > 0, (short, long)
    assert _mean_drift(env_id, OracleTracker(), 300, range(2)) == 0
