"""The search agents' Hydra configs: composition, every search/value option, a tiny run."""

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module
from hydra.utils import instantiate
from omegaconf import OmegaConf

from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import NullTracker
from wmkit.evals.runner import make_env, run_episode
from wmkit.evals.suite import EvalConfig, build_agent
from wmkit.search.policy import LookaheadGreedyPolicy, MCTSPolicy
from wmkit.search.search import PUCT, UCB1
from wmkit.search.self_correcting import SelfCorrectingPolicy
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
    sc, plain = agents["self_correcting"].policy, agents["mcts_rules"].policy
    assert isinstance(sc, SelfCorrectingPolicy) and sc.correct and not plain.correct
    assert sc.value_fn.novelty_weight == 0.1 and sc.max_backtrack == 3


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
        with pytest.raises(ValueError, match="needs a reader"):
            build_agent("window", window, env)
        row = run_episode(env, agents["random_games"], 0)
        greedy_row = run_episode(env, agents["greedy_games"], 0)
    finally:
        env.close()
    assert row["steps"] == greedy_row["steps"] == 2 and row["max_score"] > 0
