"""The tracking agents in the real suite: one tracked-state policy per family, by env id.

oracle, memory, window and rules share ``TrackedPolicy``, which the suite hands the
episode's env id; with the oracle's tracker it reaches every family's maximum score where
random does not, and the id is not ground truth, so a non-oracle agent may take it.
"""

import json

import pytest
from pydantic import ValidationError
from small_suite import small_config

from wmkit.agents.tracked import FAMILY_POLICIES, TrackedPolicy
from wmkit.evals.runner import make_env
from wmkit.evals.suite import AgentSpec, EvalConfig, build_agent, run_suite

FAMILIES = ("parcel", "smarthome", "booking", "vault")
TRACKING = ("oracle", "memory", "window", "rules")


def _config(agents: str = "[oracle,window,random]") -> EvalConfig:
    return small_config(agents, FAMILIES)


def test_the_tracking_agents_share_the_tracked_policy_handed_the_env_id():
    config = _config("[oracle,memory,window,rules]")
    privileged = {"oracle": (), "memory": ("env_parser",), "window": ("env_parser",), "rules": ()}
    for name in TRACKING:
        spec = config.agents[name]
        assert spec.policy["_target_"] == "wmkit.agents.tracked.TrackedPolicy", name
        assert spec.needs.policy == ("env_id",), name
        assert spec.oracle == (name == "oracle")
        assert spec.privileged == privileged[name], name  # the env id is not privileged
    for family in FAMILIES:
        env_id = config.envs[family].id
        agent = build_agent("window", config.agents["window"], make_env(env_id, 50, {}))
        assert isinstance(agent.policy, TrackedPolicy) and agent.policy.env_id == env_id
        assert isinstance(agent.policy.policy, FAMILY_POLICIES[env_id])


def test_the_live_env_still_needs_an_oracle_and_the_env_id_does_not():
    spec = _config().agents["window"].model_dump()
    with pytest.raises(ValidationError, match="must be marked `oracle: true`"):
        AgentSpec.model_validate(spec | {"needs": spec["needs"] | {"policy": ["env"]}})
    with pytest.raises(ValidationError, match="not a `_partial_: true` node"):
        AgentSpec.model_validate(spec | {"policy": {"_target_": spec["policy"]["_target_"]}})


def test_the_oracle_reaches_every_familys_maximum_and_random_does_not(tmp_path):
    config = _config()
    run_suite(config, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert len(rows) == len(FAMILIES) * 3 * 3
    for family in FAMILIES:
        oracle = [r for r in rows if r["env"] == family and r["agent"] == "oracle"]
        random = [r for r in rows if r["env"] == family and r["agent"] == "random"]
        for row in oracle:
            assert row["oracle"] is True and row["max_score"] > 0
            assert row["score"] >= 0.9 * row["max_score"], (family, row["seed"])
        assert all(row["score"] < row["max_score"] for row in random), family
