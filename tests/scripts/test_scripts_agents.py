"""The search agents' Hydra configs: composition, every search/value/simulator option,
the runtime arguments the build step passes, a tiny run."""

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf
from pydantic import ValidationError

from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.policies import LookaheadGreedyPolicy, RandomPolicy
from wmkit.agents.self_correcting import SelfCorrectingPolicy
from wmkit.agents.trackers import NullTracker, WindowTracker
from wmkit.envs.vault.naive_rules import NaiveVaultRules
from wmkit.evals.runner import make_env, run_episode
from wmkit.evals.suite import AgentSpec, EvalConfig, build_agent
from wmkit.knowledge.rules import RuleSet
from wmkit.search.rules_sim import RulesSimulator
from wmkit.search.search import PUCT, UCB1
from wmkit.search.simulators import EnvSnapshotSimulator
from wmkit.search.values import HeuristicValue, HybridValue

SEARCH_AGENTS = ["mcts", "self_correcting", "mcts_rules", "random"]


def _compose(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        return compose("eval", overrides=list(overrides))


def test_search_agents_compose_validate_and_build_with_the_live_env():
    cfg = _compose(f"agents=[{','.join(SEARCH_AGENTS)}]")
    config = EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True))
    assert sorted(config.agents) == sorted(SEARCH_AGENTS)
    env = make_env("wmkit/Vault-v0", 20, {"load": 1})
    try:
        agents = {n: build_agent(n, s, env) for n, s in config.agents.items()}
    finally:
        env.close()
    mcts = agents["mcts"].policy
    assert isinstance(mcts, MCTSPolicy) and mcts.simulator.env is env.unwrapped
    assert isinstance(mcts.select_fn, UCB1) and isinstance(mcts.value_fn, HeuristicValue)
    assert mcts.budget.simulations == 64
    assert isinstance(agents["mcts"].tracker, WindowTracker)  # given the env's reader
    assert agents["mcts"].tracker.reader is env.unwrapped.reader
    sc, plain = agents["self_correcting"].policy, agents["mcts_rules"].policy
    # Plain MCTS exists once: mcts_rules is the same MCTSPolicy, over the rules simulator.
    assert isinstance(sc, SelfCorrectingPolicy) and type(plain) is MCTSPolicy
    assert isinstance(sc.mcts, MCTSPolicy)  # the self-correcting policy searches through it
    for policy in (sc, plain):
        assert isinstance(policy.simulator, RulesSimulator)
        assert isinstance(policy.simulator.rules, NaiveVaultRules)
    assert sc.simulator is not plain.simulator  # one model per agent (each learns its own)
    assert sc.value_fn.novelty_weight == 0.1 and sc.max_backtrack == 3
    assert plain.value_fn.novelty_weight == 0.1 and plain.budget.simulations == 100


def test_runtime_arguments_go_where_needs_says_and_nowhere_else():
    cfg = _compose(
        "agents=[self_correcting]",
        "simulator@agents.self_correcting.policy.simulator=env_snapshot",
        "agents.self_correcting.needs.simulator=[env,reader]",
    )
    spec = EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True)).agents[
        "self_correcting"
    ]
    env = make_env("wmkit/Parcel-v0", 20, {})
    try:
        sim = build_agent("self_correcting", spec, env).policy.simulator
        assert isinstance(sim, EnvSnapshotSimulator) and sim.env is env.unwrapped
        assert sim.reader is env.unwrapped.reader
        # Without reader in needs the simulator is given the env only: no reader.
        needs = spec.needs.model_copy(update={"simulator": ("env",)})
        only_env = spec.model_copy(update={"needs": needs})
        assert build_agent("self_correcting", only_env, env).policy.simulator.reader is None
    finally:
        env.close()


def test_needs_that_name_a_part_which_takes_nothing_stop_with_a_clear_error():
    # Swapping the tracker for one that takes nothing: the listed reader has nowhere to go.
    cfg = _compose("agents=[mcts]", "tracker@agents.mcts.tracker=none")
    raw = OmegaConf.to_container(cfg, resolve=True)
    with pytest.raises(ValidationError, match=r"needs.tracker lists \['reader'\]"):
        EvalConfig.model_validate(raw)
    raw["agents"]["mcts"]["needs"]["tracker"] = []
    spec = EvalConfig.model_validate(raw).agents["mcts"]
    assert "_partial_" not in spec.tracker
    node = raw["agents"]["mcts"]
    random = {"_target_": "wmkit.agents.policies.RandomPolicy"}
    with pytest.raises(ValidationError, match=r"needs\.simulator lists \['env'\]"):
        AgentSpec.model_validate({**node, "needs": {"simulator": ["env"]}, "policy": random})
    with pytest.raises(ValidationError, match="listed twice"):
        AgentSpec.model_validate({**node, "needs": {"simulator": ["env", "env"]}})
    with pytest.raises(ValidationError, match="memory"):  # memory is the tracker's only
        AgentSpec.model_validate({**node, "needs": {"simulator": ["memory"]}})


def test_group_overrides_swap_the_search_and_value_parts():
    cfg = _compose(
        "agents=[mcts]",
        "search@agents.mcts.policy.select_fn=puct",
        "value@agents.mcts.policy.value_fn=hybrid",
        "tracker@agents.mcts.tracker=memory",
    )
    policy = cfg.agents.mcts.policy
    assert isinstance(instantiate(policy.select_fn), PUCT)
    assert isinstance(instantiate(policy.value_fn), HybridValue)
    assert cfg.agents.mcts.tracker.k is None


def test_every_search_and_value_option_instantiates():
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        for group, options, kinds in (
            ("search", ("ucb1", "puct"), (UCB1, PUCT)),
            ("value", ("heuristic", "hybrid"), (HeuristicValue, HybridValue)),
        ):
            for option, kind in zip(options, kinds, strict=True):
                cfg = compose(f"{group}/{option}")
                assert isinstance(instantiate(cfg[group]), kind)


def test_every_simulator_option_instantiates(tmp_path):
    rules = RuleSet([]).save(tmp_path / "rules.jsonl")
    env = make_env("wmkit/Vault-v0", 20, {"load": 1})
    try:
        with initialize_config_module("wmkit.configs", version_base="1.3"):
            # env_snapshot is partial: the live env completes it (the build step's job).
            partial = instantiate(compose("simulator/env_snapshot").simulator)
            assert isinstance(partial(env=env), EnvSnapshotSimulator)
            naive = instantiate(compose("simulator/naive_vault").simulator)
            assert isinstance(naive, RulesSimulator) and isinstance(naive.rules, NaiveVaultRules)
            # rules is partial too: the env's distilled rules complete it.
            partial = instantiate(compose("simulator/rules").simulator)
            assert isinstance(partial(rules=str(rules)), RulesSimulator)
    finally:
        env.close()


def test_tiny_wmkit_eval_run_with_search_agents_on_vault(tmp_path):
    out = tmp_path / "run"
    args = [
        sys.executable, "-m", "wmkit.scripts.eval",
        "~env@envs.parcel", "~env@envs.smarthome", "~env@envs.booking",
        "envs.vault.kwargs.load=1",
        "agents=[mcts,self_correcting]",
        "agents.mcts.policy.budget.simulations=4",
        "agents.self_correcting.policy.budget.simulations=8",
        "horizons=[20]", "seeds=[0]", "progress=false", f"hydra.run.dir={out}",
    ]  # fmt: skip
    subprocess.run(args, check=True, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["agent"] for r in rows) == ["mcts", "self_correcting"]
    assert all(r["env"] == "vault" and "failed" not in r and r["steps"] >= 1 for r in rows)
    assert (out / "leaderboard.md").exists()


GAME_AGENTS = ["mcts_games", "random_games", "greedy_games"]


@pytest.mark.jericho
def test_game_agents_build_and_play_on_a_jericho_game(games_dir):
    # Jericho has no reader: the *_games agents keep no facts and still play.
    cfg = _compose(f"agents=[{','.join(GAME_AGENTS)}]")
    config = EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True))
    env = make_env("wmkit/Jericho-v0", 2, {"game": str(games_dir / "905.z5")})
    try:
        agents = {n: build_agent(n, s, env) for n, s in config.agents.items()}
        assert all(isinstance(a.tracker, NullTracker) for a in agents.values())
        assert isinstance(agents["random_games"].policy, RandomPolicy)
        greedy = agents["greedy_games"].policy
        assert isinstance(greedy, LookaheadGreedyPolicy) and greedy.simulator.env is env.unwrapped
        mcts = agents["mcts_games"].policy
        assert isinstance(mcts, MCTSPolicy) and mcts.simulator.env is env.unwrapped
        # The window tracker cannot be built there: it needs the reader Jericho lacks.
        window = EvalConfig.model_validate(
            OmegaConf.to_container(_compose("agents=[window]"), resolve=True)
        ).agents["window"]
        with pytest.raises(ValueError, match="tracker needs a reader and the env has none"):
            build_agent("window", window, env)
        row = run_episode(env, agents["random_games"], 0)
        greedy_row = run_episode(env, agents["greedy_games"], 0)
    finally:
        env.close()
    assert row["steps"] == greedy_row["steps"] == 2 and row["max_score"] > 0
