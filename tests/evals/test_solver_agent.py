"""The ``solver`` agent: each family's scripted solver played through the real suite.

It is the upper bound the leaderboard prints beside the oracle tracker: it reaches every
family's maximum score where random does not, its rows are oracle rows, and its tracker
is the oracle's (drift 0).
"""

import json

import gymnasium
import pytest
from pydantic import ValidationError
from small_suite import small_config

from wmkit.evals.runner import make_env
from wmkit.evals.suite import AgentSpec, EvalConfig, build_agent, run_suite
from wmkit.world.types import WorldState

FAMILIES = ("parcel", "smarthome")


def _config(**update) -> EvalConfig:
    return small_config("[solver,random]", FAMILIES, **update)


def test_the_solver_reaches_every_familys_maximum_and_random_does_not(tmp_path):
    config = _config()
    assert set(FAMILIES) <= set(config.agents["solver"].envs)
    run_suite(config, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len(FAMILIES) * 3 * 2
    for family in FAMILIES:
        solver = [r for r in rows if r["env"] == family and r["agent"] == "solver"]
        random = [r for r in rows if r["env"] == family and r["agent"] == "random"]
        assert len(solver) == len(random) == 3
        for row in solver:
            assert row["oracle"] is True
            assert row["max_score"] > 0
            assert row["score"] == row["max_score"], (family, row["seed"])
            assert row["drift"]["mean"] == 0.0
        assert all(row["score"] < row["max_score"] for row in random), family
    board = (tmp_path / "leaderboard.md").read_text()
    assert "solver †" in board


def test_the_solver_agent_is_handed_the_env_and_refuses_one_without_a_solver():
    spec = _config().agents["solver"]
    assert spec.needs.policy == ("env",) and spec.oracle
    env = make_env("wmkit/Parcel-v0", 20, {})
    agent = build_agent("solver", spec, env)
    assert agent.oracle
    _, info = env.reset(seed=0)
    core = env.unwrapped
    assert agent.policy.act("", info, WorldState([])) == core.solver(core.snapshot())
    with pytest.raises(TypeError, match="has no scripted solver"):
        build_agent("solver", spec, gymnasium.make("CartPole-v1"))


def test_a_policy_handed_the_live_env_must_be_an_oracle():
    spec = _config().agents["solver"].model_dump()
    with pytest.raises(ValidationError, match="must be marked `oracle: true`"):
        AgentSpec.model_validate(spec | {"oracle": False})
    with pytest.raises(ValidationError, match="not a `_partial_: true` node"):
        AgentSpec.model_validate(spec | {"policy": {"_target_": spec["policy"]["_target_"]}})
