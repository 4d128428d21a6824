"""Search agents never read ground truth (ARCHITECTURE §2), checked with a spy.

The env under the agent is a real family env whose own ``reset``/``step`` (what the
``env_snapshot`` simulator calls) return an info in which every ``wm.*`` value is a
tripwire: hashing, comparing, indexing, iterating or testing it fails and is logged,
and so is looking a ``wm.*`` key up (``get``, ``[]``, ``in``). Listing the keys, as
``agent_view`` does to drop them, is allowed. A wrapper above hands the runner (which
scores with ground truth) the real info, so the episode is the suite's own loop, with
agents built from the real Hydra configs by the suite.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wmkit.agents.mcts import MCTSPolicy
from wmkit.envs.parcel import ParcelEnv
from wmkit.envs.vault import VaultEnv
from wmkit.evals.runner import run_episode
from wmkit.evals.suite import EvalConfig, build_agent
from wmkit.search import EnvSnapshotSimulator, truth_hash


class Tripwire:
    """A ground-truth value: any use of it is logged and fails."""

    def __init__(self, key: str, log: list[str]) -> None:
        self._key, self._log = key, log

    def _trip(self, *args: Any, **kwargs: Any) -> Any:
        self._log.append(self._key)
        raise AssertionError(f"the agent read ground truth {self._key!r}")

    __hash__ = __eq__ = __getitem__ = __iter__ = __len__ = __bool__ = __str__ = _trip

    def __getattr__(self, name: str) -> Any:
        return self._trip()

    def __repr__(self) -> str:
        return f"<ground truth {self._key}>"


class GuardedInfo(dict):
    """An env info whose ``wm.*`` values are tripwires and whose ``wm.*`` keys trip too."""

    def __init__(self, real: dict[str, Any], log: list[str]) -> None:
        super().__init__(
            (k, Tripwire(k, log) if k.startswith("wm.") else v) for k, v in real.items()
        )
        self.real, self.log = real, log

    def _check(self, key: object) -> None:
        if isinstance(key, str) and key.startswith("wm."):
            self.log.append(key)
            raise AssertionError(f"the agent looked up ground truth {key!r}")

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._check(key)
        return super().__contains__(key)


def spied(env_class: type) -> type:
    """A subclass of a real env whose infos are guarded (the simulator steps these)."""

    class Spied(env_class):
        log: list[str]

        def reset(self, **kwargs: Any) -> tuple[str, GuardedInfo]:
            observation, info = super().reset(**kwargs)
            return observation, GuardedInfo(info, self.log)

        def step(self, action: str) -> tuple[str, float, bool, bool, GuardedInfo]:
            observation, reward, terminated, truncated, info = super().step(action)
            return observation, reward, terminated, truncated, GuardedInfo(info, self.log)

    return Spied


class Unguard(gymnasium.Wrapper):
    """Hands the runner the real info; the agent's simulator steps the guarded env below."""

    def reset(self, **kwargs: Any) -> tuple[str, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        return observation, info.real

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        return observation, reward, terminated, truncated, info.real


def _env(env_class: type, horizon: int, **params: Any) -> tuple[Unguard, list[str]]:
    core = spied(env_class)(ground_truth=True, horizon=horizon, **params)
    core.log = []
    return Unguard(core), core.log


def _agents(*overrides: str) -> dict[str, Any]:
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("eval", overrides=list(overrides))
    return EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True)).agents


@pytest.mark.parametrize(
    ("env_class", "params", "agent", "overrides"),
    [
        (ParcelEnv, {"load": 3}, "mcts", ["agents.mcts.policy.budget.simulations=12"]),
        (VaultEnv, {"load": 1}, "mcts", ["agents.mcts.policy.budget.simulations=12"]),
        (
            VaultEnv,
            {"load": 1},
            "self_correcting",
            ["agents.self_correcting.policy.budget.simulations=20"],
        ),
        (
            ParcelEnv,
            {"load": 3},
            "self_correcting",
            [
                "simulator@agents.self_correcting.policy.simulator=env_snapshot",
                "agents.self_correcting.needs.simulator=[env,reader]",
                "agents.self_correcting.policy.budget.simulations=12",
            ],
        ),
    ],
)
def test_search_agents_read_no_ground_truth(env_class, params, agent, overrides):
    env, log = _env(env_class, 20, **params)
    specs = _agents(f"agents=[{agent}]", *overrides)
    built = build_agent(agent, specs[agent], env)
    assert not built.oracle
    row = run_episode(env, built, 0)
    assert row["steps"] >= 1
    assert built.policy.last is not None and built.policy.last.simulations > 0  # it searched
    assert log == []


def test_the_spy_catches_a_ground_truth_key():
    # The oracle opt-in reads wm.state_hash: the same episode trips the spy at once.
    env, log = _env(ParcelEnv, 20, load=3)
    policy = MCTSPolicy(EnvSnapshotSimulator(env, key_fn=truth_hash), budget=4)
    specs = _agents("agents=[mcts]")
    built = build_agent("mcts", specs["mcts"], env)
    built.policy = policy
    with pytest.raises(AssertionError, match=r"wm\.state_hash"):
        run_episode(env, built, 0)
    assert "wm.state_hash" in log
