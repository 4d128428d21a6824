"""The main job's training stages: seeds kept apart, stages cached by fingerprint, the
trained artifacts given to the agents that need them; real composition, real stages."""

import json
import subprocess
import sys

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from pydantic import ValidationError
from rich.console import Console

from wmkit.evals.runner import make_env
from wmkit.evals.suite import Artifacts, EvalConfig, build_agent, run_suite
from wmkit.knowledge.recording import load_episodes
from wmkit.knowledge.rules import RuleSet
from wmkit.scripts.pipeline import STAGE_FILE, PipelineConfig, run_pipeline

TRAINED = ["rules", "wm_agent", "wm_no_value", "wm_no_correction", "wm_exact_sim"]
TINY = [
    "~env@envs.parcel", "~env@envs.smarthome", "~env@envs.booking",
    "agents=[rules,wm_agent,wm_no_correction]", "agents@pipeline.collect.agents=[random]",
    "train_seeds=[100,101]", "pipeline.collect.horizons=[20]", "pipeline.train_value.epochs=1",
    "horizons=[20]", "seeds=[0]", "progress=false",
]  # fmt: skip


def _compose(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        return compose("eval", overrides=list(overrides))


def _configs(*overrides):
    config = EvalConfig.model_validate(OmegaConf.to_container(_compose(*overrides), resolve=True))
    return config, PipelineConfig.model_validate(config.pipeline)


QUIET = Console(quiet=True)


def test_the_default_train_seeds_are_never_evaluation_seeds():
    config, pipeline = _configs()
    assert config.train_seeds and config.seeds
    assert not set(config.train_seeds) & set(config.seeds)
    assert set(TRAINED) <= set(config.agents)
    assert set(pipeline.collect.agents) == {"window", "random", "random_games"}


def test_a_config_whose_seeds_meet_its_train_seeds_is_refused():
    raw = OmegaConf.to_container(_compose("seeds=[0,1,100]", "train_seeds=[100,101]"), resolve=True)
    with pytest.raises(ValidationError, match=r"seeds \[100\] are both evaluation seeds"):
        EvalConfig.model_validate(raw)


def test_wmkit_eval_refuses_overlapping_seeds_before_anything_runs(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "wmkit.scripts.eval", *TINY, "seeds=[101]",
         f"pipeline.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "are both evaluation seeds and train_seeds" in proc.stderr
    assert not (tmp_path / "cache").exists() and not (run_dir / "results.jsonl").exists()


def test_agents_that_need_training_need_train_seeds():
    config, pipeline = _configs(*TINY, "train_seeds=[]")
    with pytest.raises(ValueError, match="train_seeds is empty"):
        run_pipeline(config, pipeline, console=QUIET)


def _stage_files(cache_dir):
    return {
        p.parent.relative_to(cache_dir): p.stat().st_mtime_ns for p in cache_dir.rglob(STAGE_FILE)
    }


def test_stages_are_cached_and_a_changed_distill_setting_redistills_only(tmp_path):
    cache_dir = tmp_path / "cache"
    config, pipeline = _configs(*TINY, f"pipeline.cache_dir={cache_dir}")
    artifacts, runs = run_pipeline(config, pipeline, console=QUIET)
    assert [(r.stage, r.env, r.cached) for r in runs] == [
        ("collect", "vault", False), ("distill", "vault", False), ("train_value", "vault", False),
    ]  # fmt: skip
    made = _stage_files(cache_dir)
    assert len(made) == 3
    trained = artifacts["vault"]
    assert trained.rules.endswith("vault/rules.jsonl") and trained.checkpoint.endswith("value.pt")

    # The same config again: every stage found, nothing rewritten.
    again, runs = run_pipeline(config, pipeline, console=QUIET)
    assert again == artifacts and all(r.cached for r in runs)
    assert _stage_files(cache_dir) == made

    # A distill setting: new rules; the episodes and the value network (which does not
    # read the rules) are reused.
    config, pipeline = _configs(
        *TINY, f"pipeline.cache_dir={cache_dir}", "pipeline.distill.counting.min_confidence=0.9"
    )
    changed, runs = run_pipeline(config, pipeline, console=QUIET)
    assert {r.stage: r.cached for r in runs} == {
        "collect": True, "distill": False, "train_value": True,
    }  # fmt: skip
    assert changed["vault"].checkpoint == trained.checkpoint
    assert changed["vault"].rules != trained.rules
    now = _stage_files(cache_dir)
    assert len(now) == 4 and all(now[k] == t for k, t in made.items())
    assert not list(cache_dir.rglob(".*.tmp-*"))  # no temporary folder left behind

    # The training episodes are the train seeds' and no others.
    collected = next(r for r in runs if r.stage == "collect").path / "vault"
    episodes = load_episodes(collected, cache_dir=tmp_path / "hf")["episode"]
    assert sorted(episodes) == ["random/h20/seed=100", "random/h20/seed=101"]

    # The agents that need them get them, and play; the evaluated seeds are not trained on.
    out = tmp_path / "run"
    paths = run_suite(config, out, console=QUIET, artifacts=changed)
    rows = [json.loads(line) for line in paths["results"].read_text().splitlines()]
    assert sorted(r["agent"] for r in rows) == ["rules", "wm_agent", "wm_no_correction"]
    assert all("failed" not in r and r["steps"] == 20 for r in rows)
    assert not {r["seed"] for r in rows} & set(config.train_seeds)


def test_a_failed_stage_leaves_no_folder_behind(tmp_path):
    cache_dir = tmp_path / "cache"
    # The LLM distiller without an endpoint fails when the stage builds it.
    config, pipeline = _configs(
        *TINY, f"pipeline.cache_dir={cache_dir}", "pipeline.distill.distiller=llm",
        "pipeline.distill.llm.base_url=null", "pipeline.distill.llm.model=null",
    )  # fmt: skip
    with pytest.raises(ValueError):
        run_pipeline(config, pipeline, console=QUIET)
    assert [p.parent.parent.name for p in cache_dir.rglob(STAGE_FILE)] == ["collect"]
    assert not (cache_dir / "distill").exists() or not any((cache_dir / "distill").iterdir())


def test_a_pipeline_section_that_sets_what_the_pipeline_sets_is_refused():
    raw = OmegaConf.to_container(_compose(), resolve=True)["pipeline"]
    raw["distill"]["data_dirs"] = ["data/vault"]
    with pytest.raises(ValidationError, match=r"pipeline.distill may not set \['data_dirs'\]"):
        PipelineConfig.model_validate(raw)
    raw = OmegaConf.to_container(_compose(), resolve=True)["pipeline"]
    raw["train_value"]["epochs"] = 0
    with pytest.raises(ValidationError, match="epochs"):
        PipelineConfig.model_validate(raw)
    raw = OmegaConf.to_container(_compose("agents@pipeline.collect.agents=[rules]"), resolve=True)
    with pytest.raises(ValidationError, match="collect with agents that need none"):
        PipelineConfig.model_validate(raw["pipeline"])


def test_an_agent_that_needs_what_was_not_trained_stops_with_a_clear_error(tmp_path):
    config, _ = _configs(*TINY)
    env = make_env("wmkit/Vault-v0", 20, {})
    try:
        with pytest.raises(ValueError, match="distilled rules and none were trained"):
            build_agent("rules", config.agents["rules"], env)
        rules = str(RuleSet([]).save(tmp_path / "rules.jsonl"))
        with pytest.raises(ValueError, match="value network and none was trained"):
            build_agent(
                "wm_agent", config.agents["wm_agent"], env, artifacts=Artifacts(rules=rules)
            )
    finally:
        env.close()
    with pytest.raises(ValueError, match="needs the rules trained for env 'vault'"):
        run_suite(config, tmp_path / "run", console=QUIET)
    assert not (tmp_path / "run" / "results.jsonl").exists()


def test_wmkit_eval_trains_then_evaluates_and_names_what_it_used(tmp_path):
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "wmkit.scripts.eval", *TINY, "agents=[rules,window]",
         f"pipeline.cache_dir={tmp_path / 'cache'}", f"hydra.run.dir={run_dir}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    used = json.loads((run_dir / "pipeline.json").read_text())
    # Only what an agent needs is trained: rules, not a value network.
    assert [(s["stage"], s["cached"]) for s in used["stages"]] == [
        ("collect", False), ("distill", False),
    ]  # fmt: skip
    assert used["artifacts"]["vault"]["checkpoint"] is None
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["agent"] for r in rows) == ["rules", "window"]
    assert "training stages" in proc.stderr and "| rules |" in proc.stdout


GAME = [
    "~env@envs.parcel", "~env@envs.smarthome", "~env@envs.booking", "~env@envs.vault",
    "~env@envs.textworld_cooking", "~env@envs.textworld_treasure",
    "agents=[rules_games,random_games,window]", "train_seeds=[100,101]",
    "pipeline.collect.horizons=[20]", "horizons=[20]", "seeds=[0,1]", "progress=false",
]  # fmt: skip


def test_a_game_no_collect_agent_plays_stops_with_a_clear_error(tmp_path):
    config, pipeline = _configs(
        *GAME, "agents@pipeline.collect.agents=[window]", f"pipeline.cache_dir={tmp_path}"
    )
    with pytest.raises(ValueError, match=r"no agent of pipeline.collect.agents \['window'\] "
                                         r"plays env 'textworld'"):  # fmt: skip
        run_pipeline(config, pipeline, console=QUIET)
    assert not any(tmp_path.iterdir())


@pytest.mark.textworld
def test_the_rules_are_learned_on_a_textworld_game_and_tracked_there(tmp_path):
    from wmkit.evals.records import read_record, record_path

    config, pipeline = _configs(*GAME, f"pipeline.cache_dir={tmp_path / 'cache'}")
    artifacts, runs = run_pipeline(config, pipeline, console=QUIET)
    assert [(r.stage, r.env) for r in runs] == [("collect", "textworld"), ("distill", "textworld")]
    collected = runs[0].path / "textworld"  # the collect agent that plays the game, only
    episodes = load_episodes(collected, cache_dir=tmp_path / "hf")["episode"]
    assert sorted(episodes) == ["random_games/h20/seed=100", "random_games/h20/seed=101"]
    out = tmp_path / "run"
    rows = [
        json.loads(line)
        for line in run_suite(config, out, console=QUIET, artifacts=artifacts)["results"]
        .read_text()
        .splitlines()
    ]
    # window needs a reader: the game's config leaves it out.
    assert sorted((r["agent"], r["seed"]) for r in rows) == [
        ("random_games", 0), ("random_games", 1), ("rules_games", 0), ("rules_games", 1),
    ]  # fmt: skip
    for seed in (0, 1):  # the same commands, so the rows differ in what is tracked only
        played = [
            [s.action for s in read_record(record_path(out, "textworld", 20, a, seed))[0].steps]
            for a in ("random_games", "rules_games")
        ]
        assert played[0] == played[1]
    drift = {r["agent"]: r["drift"]["mean"] for r in rows if r["seed"] == 0}
    assert drift["random_games"] == 1.0 > drift["rules_games"]
