"""The runner on the real Parcel env: the numbers come from the runs."""

import numpy as np

from wmkit.agents.policies import GreedyPolicy, RandomPolicy
from wmkit.agents.trackers import OracleTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import make_env, run_episode

SEEDS = range(3)


def _mean_drift(horizon, make_agent):
    env = make_env("wmkit/Parcel-v0", horizon, {})
    rows = [run_episode(env, make_agent(env), seed) for seed in SEEDS]
    return float(np.mean([r["drift"]["mean"] for r in rows])), rows


def test_oracle_has_zero_drift_and_answers_every_probe():
    drift, rows = _mean_drift(
        200, lambda env: Agent("oracle", OracleTracker(), GreedyPolicy(), oracle=True)
    )
    assert drift == 0.0
    probes = [p for r in rows for p in r["probes"]]
    assert probes and all(correct for _, correct, _ in probes)
    assert all(len(r["drift_series"]) == 201 for r in rows)


def test_window_drift_grows_with_horizon_and_breakage_with_chain():
    def window(env):
        return Agent("window", WindowTracker(env.unwrapped.reader, k=10), RandomPolicy())

    short, _ = _mean_drift(50, window)
    long, rows = _mean_drift(400, window)
    assert 0.0 < short < long
    probes = [p for r in rows for p in r["probes"]]
    near = [ok for chain, ok, _ in probes if chain < 10]
    far = [ok for chain, ok, _ in probes if chain >= 50]
    assert near and far
    assert np.mean(far) < np.mean(near)  # share correct falls with chain length


def test_reader_with_unbounded_memory_tracks_exactly():
    drift, _ = _mean_drift(
        200,
        lambda env: Agent("memory", WindowTracker(env.unwrapped.reader, k=None), GreedyPolicy()),
    )
    assert drift == 0.0


def test_agents_never_see_ground_truth():
    seen = []

    class Spy(RandomPolicy):
        def act(self, observation, info, tracked):
            seen.append(set(info))
            return super().act(observation, info, tracked)

    env = make_env("wmkit/Parcel-v0", 20, {})
    run_episode(env, Agent("spy", WindowTracker(env.unwrapped.reader), Spy()), 0)
    assert seen and not any(k.startswith("wm.") for keys in seen for k in keys)


def test_env_module_imports_an_env_and_names_the_extra_a_missing_package_needs():
    import gymnasium
    import pytest

    from wmkit.evals.runner import env_module

    assert env_module("wmkit/Parcel-v0") == "wmkit.envs.parcel"
    with pytest.raises(ValueError, match="'wmkit/Nowhere-v0' is not registered"):
        env_module("wmkit/Nowhere-v0")
    gymnasium.register("wmkit/NeedsAnExtra-v0", entry_point="wmkit_no_such_package.env:Env")
    try:
        with pytest.raises(ValueError, match="'wmkit_no_such_package', which is not installed"):
            env_module("wmkit/NeedsAnExtra-v0")
    finally:
        del gymnasium.registry["wmkit/NeedsAnExtra-v0"]
