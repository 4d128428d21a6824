"""The ``value_net`` and ``llm`` value functions: a real checkpoint in a real search, a real
chat server for every LLM outcome, and their Hydra configs."""

import time
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from chat_server import http_error, ok, slow, think_json
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf
from omegaconf.errors import MissingMandatoryValue
from rich.console import Console

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.knowledge.recording import Recorder, TrajectoryWriter, record_random
from wmkit.llm import ChatClient, ReplyCache
from wmkit.llm.prompts import OBSERVATION_HEADER, VALUE_SYSTEM
from wmkit.search import (
    Budget,
    EnvSnapshotSimulator,
    Transition,
    admissible_proposal,
    search,
    ucb1,
)
from wmkit.search.value_net import CheckpointError, value_input
from wmkit.search.values import (
    HeuristicValue,
    HybridValue,
    LLMValue,
    ValueNetValue,
    visit_value,
)
from wmkit.trainers.value import TrainValueConfig, train_value
from wmkit.world.types import WorldState

VAULT = {"load": 1, "horizon": 40}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A value network trained for one epoch on ten random Vault episodes."""
    root = tmp_path_factory.mktemp("value")
    env = gymnasium.make("wmkit/Vault-v0", **VAULT)
    with TrajectoryWriter(root / "vault") as writer:
        record_random(Recorder(env, writer.write, env_name="vault"), range(10))
    config = TrainValueConfig(
        data_dirs=[str(root / "vault")], epochs=1, progress=False, threads=1,
        features={"buckets": 1024}, model={"dim": 8, "hidden": 16},
    )  # fmt: skip
    report = train_value(config, root / "run", console=Console(quiet=True))
    return report["value_path"]


def _transition(observation, info):
    return Transition(None, observation, 0.0, False, info)


def test_value_net_scores_what_the_agent_sees_and_caches_by_it(checkpoint):
    vn = ValueNetValue(checkpoint)
    env = gymnasium.make("wmkit/Vault-v0", ground_truth=True, **VAULT)
    observation, info = env.reset(seed=3)
    full = _transition(observation, info)
    seen = _transition(observation, {k: v for k, v in info.items() if not k.startswith("wm.")})
    value = vn(full)
    assert isinstance(value, float) and np.isfinite(value)
    # Ground truth is never read: the same visible state scores the same without it.
    assert vn(seen) == value and (vn.calls, vn.hits) == (2, 1)
    assert vn.predict([value_input(observation, info)]) == pytest.approx([value], abs=1e-6)
    # The admissible actions are part of the input: other actions, another value.
    fewer = _transition(observation, {**info, "admissible_actions": ["look"]})
    assert vn(fewer) != value and vn.hits == 1
    assert vn.batch([full, fewer]) == pytest.approx([value, vn(fewer)], abs=1e-6)
    scaled = ValueNetValue(checkpoint, scale=2.0, cache_size=0)
    assert scaled(full) == scaled(full) == pytest.approx(2 * value, abs=1e-6)
    assert scaled.hits == 0  # no cache


def test_value_net_guides_a_real_search_on_vault(checkpoint):
    vn = ValueNetValue(checkpoint)
    env = gymnasium.make("wmkit/Vault-v0", **VAULT)
    observation, info = env.reset(seed=0)
    sim = EnvSnapshotSimulator(env)
    with sim.preserve():
        out = search(
            sim.root(observation, info),
            simulator=sim, propose_fn=admissible_proposal, value_fn=vn,
            select_fn=ucb1(), budget=Budget(40, max_depth=6),
            rng=np.random.default_rng(0), discount=0.95,
        )  # fmt: skip
    assert out.action in info["admissible_actions"] and out.simulations == 40
    tree = out.tree
    expanded = [tree.node(n) for n in tree.nodes() if not tree.node(n).terminal]
    # One call per new state (transpositions share the first estimate).
    assert len(expanded) > 10 and 10 < vn.calls <= len(expanded)
    # Every state the search reached holds the network's value of what was seen there.
    for node in expanded:
        want = vn.predict([value_input(node.observation, node.info)])[0]
        assert node.estimate == pytest.approx(want, abs=1e-5)
    # And as the MCTS policy's value function, the episode plays on.
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=Budget(16, max_depth=5), value_fn=vn)
    policy.reset(np.random.default_rng(0))
    observation, info = env.reset(seed=1)
    for _ in range(3):
        observation, *_, info = env.step(policy.act(observation, info, WorldState()))
    assert policy.last.simulations == 16


def test_value_net_refuses_a_missing_or_corrupt_checkpoint(checkpoint, tmp_path):
    with pytest.raises(FileNotFoundError, match="no value-network checkpoint"):
        ValueNetValue(tmp_path / "none.pt")
    cut = tmp_path / "cut.pt"
    data = Path(checkpoint).read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="not a readable value-network checkpoint"):
        ValueNetValue(cut)


def test_value_configs_build_value_net_and_the_learned_hybrid(checkpoint):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("value/value_net", overrides=[f"value.checkpoint={checkpoint}"])
        assert isinstance(instantiate(cfg.value), ValueNetValue)
        with pytest.raises(MissingMandatoryValue, match="checkpoint"):
            instantiate(compose("value/value_net").value)
        cfg = compose(
            "eval",
            overrides=[
                "agents=[mcts]",
                "value@agents.mcts.policy.value_fn=hybrid",
                "value@agents.mcts.policy.value_fn.costly=value_net",
                f"agents.mcts.policy.value_fn.costly.checkpoint={checkpoint}",
            ],
        )
    hybrid = instantiate(cfg.agents.mcts.policy.value_fn)
    assert isinstance(hybrid, HybridValue) and isinstance(hybrid.cheap, HeuristicValue)
    assert isinstance(hybrid.costly, ValueNetValue)
    env = gymnasium.make("wmkit/Vault-v0", **VAULT)
    t = _transition(*env.reset(seed=0))
    learned = hybrid.costly(t)
    # Novelty 1/sqrt(1 + visits) filters: the network is asked while the state is new
    # enough (visited at most 3 times), then the cheap value is returned as it is.
    values = []
    for _ in range(5):
        values.append(hybrid(t))
        visit_value(hybrid, t)
    assert values == pytest.approx([learned] * 4 + [1 / np.sqrt(5)])
    assert (hybrid.cheap_calls, hybrid.costly_calls) == (5, 4)


# --- LLMValue against a real chat-completions server -----------------------------------

STATE = _transition(
    "You are in the Vault. The crown gleams on a pedestal.",
    {"admissible_actions": ["look", "take crown"], "score": 1, "max_score": 11},
)


def _value(server, *, timeout=5.0, cache=None, **kwargs):
    client = ChatClient(server.url, "judge", timeout=timeout, max_retries=0, cache=cache)
    return LLMValue(client, goal="take the treasure", **kwargs)


def test_llm_value_takes_a_good_reply(chat_server):
    chat_server.script(think_json("the crown is here", {"value": 0.9, "reason": "one step"}))
    judge = _value(chat_server, scale=10.0)
    assert judge(STATE) == pytest.approx(9.0)
    assert (judge.stats.replies, judge.stats.fallbacks) == (1, 0)
    messages = chat_server.requests[0]["messages"]
    assert messages[0] == {"role": "system", "content": VALUE_SYSTEM}
    user = messages[1]["content"]
    assert user.endswith(OBSERVATION_HEADER + STATE.observation)
    assert "Goal: take the treasure" in user and "Score: 1 of 11" in user
    assert "Commands: look, take crown" in user


def test_llm_value_corrects_malformed_json_once(chat_server):
    chat_server.script(
        ok('```json\n{"value": 0.3, "reason": "far"\n```'),  # the object never closes
        think_json("fixed", {"value": 0.4, "reason": "far from the vault"}),
    )
    judge = _value(chat_server)
    assert judge(STATE) == pytest.approx(0.4)
    assert (judge.stats.replies, judge.stats.repaired, judge.stats.failed) == (1, 1, 0)
    assert len(chat_server.requests) == 2
    correction = chat_server.requests[1]["messages"][-1]["content"]
    assert "could not be used" in correction and '"value"' in correction


def test_llm_value_out_of_range_is_corrected_then_falls_back(chat_server):
    chat_server.script(
        think_json("very good", {"value": 1.5, "reason": "great"}),
        think_json("still", {"value": 7, "reason": "great"}),
    )
    judge = _value(chat_server, fallback=0.25, scale=2.0)
    assert judge(STATE) == pytest.approx(0.5)  # scale * fallback
    assert (judge.stats.failed, judge.stats.fallbacks, judge.stats.replies) == (1, 1, 0)
    assert "value: Input should be less than or equal to 1" in judge.notes[-1]
    assert "less than or equal to 1" in chat_server.requests[1]["messages"][-1]["content"]


@pytest.mark.parametrize("status", [500, 401])
def test_llm_value_falls_back_on_an_http_error(chat_server, status):
    chat_server.script(http_error(status))
    judge = _value(chat_server)
    assert judge(STATE) == 0.5
    assert (judge.stats.request_errors, judge.stats.replies) == (1, 0)
    assert f"HTTP {status}" in judge.notes[-1]


def test_llm_value_falls_back_on_a_slow_reply(chat_server):
    chat_server.script(slow(3.0, '```json\n{"value": 1, "reason": "late"}\n```'))
    judge = _value(chat_server, timeout=0.3)
    start = time.perf_counter()
    assert judge(STATE) == 0.5
    assert time.perf_counter() - start < 2.0
    assert judge.stats.request_errors == 1 and "within 0.3s" in judge.notes[-1]


def test_llm_value_asks_once_for_identical_states(chat_server):
    chat_server.responder = lambda body: think_json("ok", {"value": 0.6, "reason": "fine"})
    judge = _value(chat_server, cache=ReplyCache())
    assert judge(STATE) == judge(STATE) == pytest.approx(0.6)
    assert len(chat_server.requests) == 1  # the second call sent nothing
    other = STATE._replace(observation="You are in the Hall.")
    assert judge(other) == pytest.approx(0.6) and len(chat_server.requests) == 2
    assert judge.stats.calls == 3 and judge.stats.replies == 3


def test_llm_value_config_builds_against_the_endpoint(chat_server, monkeypatch):
    monkeypatch.setenv("WMKIT_LLM_BASE_URL", chat_server.url)
    monkeypatch.setenv("WMKIT_LLM_MODEL", "judge")
    monkeypatch.delenv("WMKIT_LLM_CACHE", raising=False)
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        # The judge's client is the llm group's (${llm.client}), at the config's root.
        llm = compose("llm/openai_compatible")
        config = OmegaConf.merge(OmegaConf.to_container(llm), compose("value/llm"))
        judge = instantiate(config.value)
    assert isinstance(judge, LLMValue) and judge.max_repairs == 1
    chat_server.script(think_json("fine", {"value": 0.2, "reason": "nothing here"}))
    assert judge(STATE) == pytest.approx(0.2)
    assert chat_server.requests[0]["temperature"] == 0


def test_search_policies_report_real_visits_and_start_every_episode_afresh():
    # The policy tells its value function each state it acts from, through a hybrid's
    # parts too; the search's own look-ahead is no visit. A configured heuristic (not
    # the policy's own) must forget its visits at reset: otherwise episode 2 sees
    # episode 1's states as old.
    cheap, costly = HeuristicValue(score_weight=0.0), HeuristicValue()
    hybrid = HybridValue(cheap, costly, threshold=0.0)
    env = gymnasium.make("wmkit/Vault-v0", **VAULT)
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=4, value_fn=hybrid)
    observation, info = env.reset(seed=0)
    policy.reset(np.random.default_rng(0))
    policy.act(observation, info, WorldState())
    assert cheap.visits == costly.visits == {observation: 1}
    here = _transition(observation, info)
    assert hybrid(here) < hybrid(_transition("never seen", info))
    policy.reset(np.random.default_rng(1))
    assert not cheap.visits and not costly.visits
    assert hybrid(here) == hybrid(_transition("never seen", info))
