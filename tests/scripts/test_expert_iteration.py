"""Expert iteration in the main job's stages: rounds cached and resumed, the last round's
network given to the agents, the rounds' report and plot; real composition, real stages."""

import json

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from pydantic import ValidationError
from rich.console import Console

from wmkit.evals.specs import expand_games
from wmkit.evals.suite import EvalConfig
from wmkit.scripts.expert_iteration import (
    PLOT_FILE,
    REPORT_FILE,
    ExpertIterationStage,
    main,
    round_of,
    write_rounds,
)
from wmkit.scripts.pipeline import STAGE_FILE, PipelineConfig, run_pipeline

TINY = [
    "experiment=expert_iteration", "~env@envs.textworld", "~env@envs.vault",
    "agents=[mcts,mcts_net]", "agents@pipeline.collect.agents=[mcts]",
    "agents@pipeline.expert_iteration.agents=[mcts_net]",
    "train_seeds=[100,101]", "pipeline.collect.horizons=[20]",
    "pipeline.expert_iteration.horizons=[20]", "pipeline.expert_iteration.eval_seeds=[200]",
    "pipeline.expert_iteration.budget_scale=1", "agents.mcts_net.policy.budget.simulations=8",
    "pipeline.train_value.epochs=1", "horizons=[20]", "seeds=[0]", "progress=false",
]  # fmt: skip
QUIET = Console(quiet=True)


def _configs(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("eval", overrides=list(overrides))
    config = EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True))
    return config, PipelineConfig.model_validate(config.pipeline)


def _made(cache_dir):
    return {p.parent.relative_to(cache_dir) for p in cache_dir.rglob(STAGE_FILE)}


def test_the_preset_composes_the_rounds_and_the_net_search_at_a_quarter_budget():
    config, pipeline = _configs("experiment=expert_iteration")
    ei = pipeline.expert_iteration
    assert ei is not None and ei.rounds >= 1 and ei.eval_seeds
    assert set(ei.agents) == {"mcts_net", "mcts_net_games"}
    budget = {
        a: spec.policy["budget"]["simulations"]
        for a, spec in config.agents.items()
        if "budget" in spec.policy
    }
    assert budget["mcts"] == 4 * budget["mcts_net"]
    assert budget["mcts_games"] == 4 * budget["mcts_net_games"]
    assert not set(ei.eval_seeds) & set(config.train_seeds) and not set(config.seeds) & set(
        config.train_seeds
    )


def test_an_agent_that_does_not_take_the_network_cannot_iterate():
    _, pipeline = _configs("experiment=expert_iteration")
    raw = pipeline.expert_iteration.model_dump()
    raw["agents"]["mcts_net"]["needs"]["value"] = []
    with pytest.raises(ValidationError, match="does not take the network"):
        ExpertIterationStage.model_validate(raw)


def test_rounds_are_cached_stages_and_the_agents_get_the_last_network(tmp_path):
    cache = tmp_path / "cache"
    config, pipeline = _configs(
        *TINY, "pipeline.expert_iteration.rounds=1", f"pipeline.cache_dir={cache}"
    )
    artifacts, stages = run_pipeline(config, pipeline, console=QUIET)
    names = [s.stage for s in stages]
    assert names == ["collect", "train_value", "evaluate@0", "collect@1", "train_value@1",
                     "evaluate@1"]  # fmt: skip
    assert artifacts["smarthome"].checkpoint == str(stages[4].path / "value.pt")
    report = json.loads((stages[4].path / "report.json").read_text())
    # Round 1 trained on the first episodes and the round's, with the search's visits.
    assert report["split"]["train_episodes"] + report["split"]["val_episodes"] == 4
    assert report["eval"]["policy"]["examples"] > 0
    made = _made(cache)
    # A second round: only its own stages are made; the first round is found.
    config, pipeline = _configs(
        *TINY, "pipeline.expert_iteration.rounds=2", f"pipeline.cache_dir={cache}"
    )
    _, again = run_pipeline(config, pipeline, console=QUIET)
    assert [s.cached for s in again[:6]] == [True] * 6
    assert [s.stage for s in again[6:]] == ["collect@2", "train_value@2", "evaluate@2"]
    assert len(_made(cache) - made) == 3
    report = write_rounds(again, tmp_path)
    rows = report["smarthome"]
    assert [r["round"] for r in rows] == [0, 1, 2]
    assert all(r["eval_scores"] and r["value"]["mse"] is not None for r in rows)
    assert rows[1]["train_scores"] and rows[2]["policy"]["examples"] > 0
    assert (tmp_path / REPORT_FILE).is_file() and (tmp_path / PLOT_FILE).stat().st_size > 10_000


def test_eval_seeds_may_not_be_training_seeds(tmp_path):
    config, pipeline = _configs(
        *TINY, "pipeline.expert_iteration.eval_seeds=[101]", f"pipeline.cache_dir={tmp_path}"
    )
    with pytest.raises(ValueError, match="eval_seeds meet train_seeds"):
        run_pipeline(config, pipeline, console=QUIET)


def test_the_script_prints_a_run_folders_rounds(tmp_path, capsys):
    with pytest.raises(SystemExit, match="not a wmkit-eval run folder"):
        main([str(tmp_path)])
    (tmp_path / "pipeline.json").write_text(json.dumps({"stages": [], "artifacts": {}}))
    with pytest.raises(SystemExit, match="no expert-iteration rounds"):
        main([str(tmp_path)])
    assert round_of("train_value@3") == 3 and round_of("collect") == 0
    assert round_of("distill") is None


def test_a_game_pattern_makes_one_env_per_game(tmp_path, monkeypatch):
    for name in ("a.z5", "b.z8", "sherbet.z5", "notes.txt"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("WMKIT_GAMES_DIR", str(tmp_path))
    spec = {"id": "wmkit/Jericho-v0", "kwargs": {"game": ["*", "!sherbet.z5"], "horizon": 9}}
    envs = expand_games({"jericho": spec, "parcel": {"id": "wmkit/Parcel-v0"}})
    assert list(envs) == ["jericho_a", "jericho_b", "parcel"]
    assert envs["jericho_b"]["kwargs"] == {"game": "b.z8", "horizon": 9}
    listed = expand_games({"j": {"id": "x", "kwargs": {"game": ["b.z8", "a.z5"]}}})
    assert [e["kwargs"]["game"] for e in listed.values()] == ["a.z5", "b.z8"]
    assert (
        expand_games({"j": {"id": "x", "kwargs": {"game": "a.z5"}}})["j"]["kwargs"]["game"]
        == "a.z5"
    )
    with pytest.raises(ValueError, match="no story file"):
        expand_games({"j": {"id": "x", "kwargs": {"game": "zz*"}}})
    monkeypatch.delenv("WMKIT_GAMES_DIR")
    with pytest.raises(ValueError, match="set WMKIT_GAMES_DIR"):
        expand_games({"j": {"id": "x", "kwargs": {"game": "*"}}})


def test_the_protocol_preset_plays_every_game_of_the_folder_at_mcdmls_settings(
    tmp_path, monkeypatch
):
    for name in ("a.z5", "b.z8", "sherbet.z5"):
        (tmp_path / name).write_text("")
    monkeypatch.setenv("WMKIT_GAMES_DIR", str(tmp_path))
    config, pipeline = _configs("experiment=mcdml")
    assert sorted(config.envs) == ["jericho_a", "jericho_b"]  # sherbet.z5 left out
    assert config.horizons == [100] and len(config.seeds) == 5
    for name in ("mcts_net_games", "mcts_games"):
        policy = config.agents[name].policy
        assert policy["budget"]["simulations"] == 50 and policy["discount"] == 0.95
        assert policy["select_fn"]["_target_"] == "wmkit.search.puct"
    assert config.envs["jericho_a"].kwargs["admissible_actions"] == "candidates"
    assert pipeline.expert_iteration.rounds == 1
    with pytest.raises(ValidationError, match="mcts_games is not among the agents chosen"):
        _configs("experiment=mcdml", "agents=[mcts_net_games]")
    quarter, _ = _configs(
        "experiment=mcdml", "agents=[mcts_net_games]", "~agents.mcts_games",
        "agents.mcts_net_games.policy.budget.simulations=12",
    )  # fmt: skip
    assert quarter.agents["mcts_net_games"].policy["budget"]["simulations"] == 12
