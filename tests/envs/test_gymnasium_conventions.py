"""Gymnasium 1.x conventions: how a fresh interpreter makes our envs, and vector envs.

A bare ``gymnasium.make("wmkit/Parcel-v0")`` knows nothing of wmkit until ``wmkit.envs``
is imported (Gymnasium 1.x has no plugin entry points); the two 1.x forms that load it
are tested in a fresh interpreter. Vector envs run in sync mode and in async mode with
``shared_memory=False``; async with shared memory would return the same strings at every
step (Gymnasium reads a ``Text`` buffer once), so it is refused with a clear error.
"""

import subprocess
import sys

import gymnasium
import pytest

import wmkit.envs
from wmkit.envs.spaces import SHARED_MEMORY_ERROR, TextSpace

ENV_ID = "wmkit/Parcel-v0"
KWARGS = {"horizon": 20}


def _fresh(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )


def test_a_bare_make_fails_and_both_gymnasium_1x_forms_work_in_a_fresh_interpreter():
    bare = _fresh(f"import gymnasium; gymnasium.make({ENV_ID!r})")
    assert bare.returncode != 0 and "Namespace wmkit not found" in bare.stderr  # as README says
    module_form = _fresh(
        f"import gymnasium; env = gymnasium.make('wmkit.envs:{ENV_ID}');"
        "print(env.reset(seed=0)[0].splitlines()[0])"
    )
    assert module_form.returncode == 0, module_form.stderr
    registered = _fresh(
        "import gymnasium, wmkit.envs; gymnasium.register_envs(wmkit.envs);"
        f"env = gymnasium.make({ENV_ID!r}); print(env.reset(seed=0)[0].splitlines()[0])"
    )
    assert registered.returncode == 0, registered.stderr
    assert module_form.stdout == registered.stdout and module_form.stdout.strip()


def _singles(seeds, actions):
    """Each env on its own: the observations a vector env must return, step by step."""
    trace = []
    for seed in seeds:
        env = gymnasium.make(ENV_ID, **KWARGS)
        observation, _ = env.reset(seed=seed)
        seen = [observation]
        for action in actions:
            observation, *_ = env.step(action)
            seen.append(observation)
        trace.append(seen)
        env.close()
    return [tuple(step) for step in zip(*trace, strict=True)]


@pytest.mark.parametrize(
    ("mode", "vector_kwargs"),
    [("sync", {}), ("async", {"shared_memory": False})],
    ids=["sync", "async-no-shared-memory"],
)
def test_vector_envs_return_what_each_env_returns(mode, vector_kwargs):
    seeds, actions = [0, 1], ["wait", "look", "wait"]
    envs = gymnasium.make_vec(
        ENV_ID, num_envs=2, vectorization_mode=mode, vector_kwargs=vector_kwargs, **KWARGS
    )
    try:
        assert isinstance(envs.single_observation_space, TextSpace)
        observations, infos = envs.reset(seed=seeds)
        got = [tuple(observations)]
        for action in actions:
            observations, rewards, terminated, truncated, infos = envs.step([action] * 2)
            assert not truncated.any()
            got.append(tuple(observations))
            assert rewards.shape == (2,) and not terminated.any()
        assert "admissible_actions" in infos
    finally:
        envs.close()
    assert got == _singles(seeds, actions)
    assert got[0][0] != got[0][1]  # two seeds, two episodes


def test_async_vector_envs_with_shared_memory_are_refused_with_the_fix():
    with pytest.raises(ValueError, match="shared_memory=False") as error:
        gymnasium.make_vec(ENV_ID, num_envs=2, vectorization_mode="async", **KWARGS)
    assert str(error.value) == SHARED_MEMORY_ERROR


def test_every_registered_env_uses_the_text_space_that_refuses_shared_memory():
    for env_id in wmkit.envs.DIAGNOSTIC_IDS:
        env = gymnasium.make(env_id, **KWARGS)
        assert isinstance(env.observation_space, TextSpace), env_id
        assert isinstance(env.action_space, TextSpace), env_id
        env.close()
