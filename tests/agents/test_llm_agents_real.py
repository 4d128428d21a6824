"""The LLM tracker and agents driven by a real language model for a few steps (marker llm).

The model is whatever ``llm_server`` gives (the local SmolLM2-135M in CI): what it
writes is weak, so these tests hold what must be true of any model, not what it says:
every request is counted, constrained replies validate, the tracked state is made of
what validated, a policy only ever sends admissible commands.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.agents.llm_agents import LLMPolicy, LLMWindowTracker
from wmkit.agents.tracked import TrackedPolicy
from wmkit.agents.trackers import LLMTracker, NullTracker
from wmkit.agents.types import Agent
from wmkit.evals.metrics import score_episode
from wmkit.evals.runner import play_episode
from wmkit.llm import ChatClient

pytestmark = pytest.mark.llm


def _client(llm_server) -> ChatClient:
    return ChatClient(
        llm_server.base_url,
        llm_server.model,
        constrain="json_object",
        timeout=120,
        max_retries=1,
        params={"temperature": 0, "max_tokens": 96},
    )


def _episode(agent: Agent, env_id: str = "wmkit/Parcel-v0"):
    env = gymnasium.make(env_id, horizon=20, ground_truth=True)
    try:
        return play_episode(env, agent, seed=0)
    finally:
        env.close()


def test_the_structured_tracker_writes_into_the_engine_through_a_real_model(llm_server):
    tracker = LLMTracker(_client(llm_server), constrained=True, max_repairs=0)
    record = _episode(Agent("llm_structured", tracker, TrackedPolicy(env_id="wmkit/Parcel-v0")))
    usage = record.usage
    # one request a step; one that timed out on a loaded machine is a lost step, not a call
    assert usage["calls"] + tracker.stats.request_errors == len(record.steps) == 21
    assert tracker.stats.request_errors <= 2
    assert usage["tokens_in"] > 0 and usage["tokens_out"] > 0 and usage["seconds"] > 0
    assert usage["valid"] + usage["repaired"] + usage["failed"] == usage["calls"]
    assert usage["valid"] >= usage["calls"] // 2  # constrained: most first replies validate
    assert tracker.stats.replies == usage["valid"]
    row = score_episode(record)
    assert 0.0 <= row["drift"]["mean"] <= 1.0


def test_the_window_tracker_answers_the_probes_itself(llm_server):
    tracker = LLMWindowTracker(_client(llm_server), k=3)
    agent = Agent("llm_window", tracker, TrackedPolicy(env_id="wmkit/Vault-v0"))
    record = _episode(agent, "wmkit/Vault-v0")
    asked = [step for step in record.steps[:-1] if step.probes]
    assert asked, "Vault asks probes within 20 steps"
    assert record.usage["calls"] == len(record.steps) + len(asked)
    assert all(a is None or isinstance(a, str) for s in asked for a in s.answers)
    assert record.usage["failed"] <= record.usage["calls"] // 4


def test_the_llm_policy_only_sends_admissible_commands(llm_server):
    policy = LLMPolicy(_client(llm_server), memory="window", k=2, goal="open the vault")
    env = gymnasium.make("wmkit/Vault-v0", horizon=20)
    observation, info = env.reset(seed=0)
    policy.reset(np.random.default_rng(0))
    tracker = NullTracker()
    for _ in range(5):
        command = policy.act(observation, info, tracker.state)
        assert command in info["admissible_actions"]
        observation, _, terminated, truncated, info = env.step(command)
        if terminated or truncated:
            break
    assert policy.client.usage.calls == 5
    assert policy.fallbacks <= 1  # the enum constraint: replies name a listed command
