"""Every entry point logs through the logger group, read back for real: a tiny wmkit-eval
with logger=[wandb,tensorboard,jsonl] (config redacted, episodes, leaderboard table), the
main job's training stages (steps, reports, artifacts), and the stage scripts alone."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from rich.console import Console

from wmkit.evals.suite import EvalConfig
from wmkit.jsonl import JsonlLog
from wmkit.scripts.pipeline import PipelineConfig, run_pipeline
from wmkit.tracking import REDACTED, JsonlLogger, wandb_runs


def _event_accumulator():
    """TensorBoard's own reader (the tensorboard extra; CI installs it)."""
    module = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    return module.EventAccumulator


SECRET = "sk-test-0123456789-not-a-real-key"
PARCEL_ONLY = [
    "~env@envs.smarthome", "~env@envs.booking", "~env@envs.vault", "~env@envs.textworld",
    "~env@envs.textworld_cooking", "~env@envs.textworld_treasure",
]  # fmt: skip
TINY_EVAL = ["experiment=debug", "agents=[window,random]", "horizons=[20]", "seeds=[0]",
             *PARCEL_ONLY]  # fmt: skip


def _env():
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    return env | {"WMKIT_LLM_API_KEY": SECRET}


def _wmkit(module, *args, cwd, check=True):
    proc = subprocess.run(
        [sys.executable, "-m", f"wmkit.scripts.{module}", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300, env=_env(),
    )  # fmt: skip
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _scalars(folder):
    acc = _event_accumulator()(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_a_tiny_eval_logs_config_episodes_and_leaderboard_to_every_backend(tmp_path):
    pytest.importorskip("wandb")
    run_dir = tmp_path / "run"
    _wmkit("eval", *TINY_EVAL, "logger=[wandb,tensorboard,jsonl]", f"hydra.run.dir={run_dir}",
           f"pipeline.cache_dir={tmp_path / 'cache'}", cwd=tmp_path)  # fmt: skip
    rows = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    assert sorted(r["agent"] for r in rows) == ["random", "window"]
    drift = {r["agent"]: r["drift"]["mean"] for r in rows}

    # The resolved config, secrets redacted; Hydra's own copy keeps the placeholder.
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["pipeline"]["distill"]["llm"]["api_key"] == REDACTED
    assert config["horizons"] == [20] and sorted(config["agents"]) == ["random", "window"]
    assert "${oc.env:WMKIT_LLM_API_KEY" in (run_dir / ".hydra" / "config.yaml").read_text()
    leaked = [p for p in run_dir.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == []

    # W&B: one offline run, filed by the run folder, episodes and the leaderboard in it.
    (run,) = wandb_runs(run_dir)
    assert run.path.name.startswith("offline-run-") and run.exit_code == 0
    assert (run.group, run.job_type) == ("run", "eval")
    assert "agents=[window,random]" in run.name
    assert run.config["pipeline"]["distill"]["llm"]["api_key"] == REDACTED
    episodes = [h for h in run.history if "episode/step" in h]
    assert [h["episode/step"] for h in episodes] == [1, 2]
    logged = {k.split("/")[3]: v for h in episodes for k, v in h.items() if k.endswith("/drift")}
    assert logged == pytest.approx(drift)
    table_file = run.path / "files" / run.summary["leaderboard"]["path"]
    table = json.loads(table_file.read_text())
    col = {name: i for i, name in enumerate(table["columns"])}
    assert {r[col["agent"]]: r[col["drift_iqm"]] for r in table["data"]} == pytest.approx(drift)
    assert {r[col["env"]] for r in table["data"]} == {"parcel"}
    assert run.summary["leaderboard/parcel/h20/window/drift"] == pytest.approx(drift["window"])
    image = run.summary["plots/leaderboard"]
    assert image["_type"] == "image-file" and (run.path / "files" / image["path"]).is_file()
    if "pages/leaderboard" in run.summary:  # once write_leaderboard returns leaderboard.html
        page = run.path / "files" / run.summary["pages/leaderboard"]["path"]
        assert "window" in page.read_text()

    # TensorBoard: the same episodes, read with tensorboard's reader.
    scalars = _scalars(run_dir / "tensorboard")
    for agent, value in drift.items():
        ((step, got),) = scalars[f"episode/parcel/h20/{agent}/drift"]
        assert got == pytest.approx(value, abs=1e-6) and step in (1, 2)

    # JSONL: every call, then the exit code.
    log = list(JsonlLog(run_dir / "metrics.jsonl").rows())
    assert log[0]["kind"] == "config" and log[-1] == {**log[-1], "kind": "finish", "exit_code": 0}
    assert [r["step"] for r in log if r["kind"] == "metrics" and "episode/" in str(r)] == [1, 2]
    assert {r["kind"] for r in log} >= {"table", "image"}


def test_a_logger_typo_or_unknown_backend_stops_the_run_with_a_clear_error(tmp_path):
    proc = _wmkit("eval", *TINY_EVAL, "logger=wandb", "+logger.wandb.projct=x",
                  f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, check=False)  # fmt: skip
    assert proc.returncode != 0
    assert "invalid logger configuration" in proc.stderr and "projct" in proc.stderr
    assert not (tmp_path / "r" / "results.jsonl").exists()
    proc = _wmkit("eval", *TINY_EVAL, "logger=wandbb", cwd=tmp_path, check=False)
    assert proc.returncode != 0 and "wandbb" in proc.stderr


TRAINED = [
    "~env@envs.parcel", "~env@envs.smarthome", "~env@envs.booking", "~env@envs.textworld",
    "~env@envs.textworld_cooking", "~env@envs.textworld_treasure",
    "agents=[rules,wm_no_correction]", "agents@pipeline.collect.agents=[random]",
    "train_seeds=[100,101]", "pipeline.collect.horizons=[20]", "pipeline.train_value.epochs=2",
    "horizons=[20]", "seeds=[0]", "progress=false",
]  # fmt: skip


def test_the_main_jobs_stages_log_steps_reports_and_artifacts_once(tmp_path):
    pytest.importorskip("wandb")
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("eval", overrides=[*TRAINED, f"pipeline.cache_dir={tmp_path / 'cache'}"])
    config = EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True))
    pipeline = PipelineConfig.model_validate(config.pipeline)
    quiet = Console(quiet=True)
    with JsonlLogger(tmp_path / "first.jsonl") as logger:
        artifacts, stages = run_pipeline(config, pipeline, console=quiet, logger=logger)
    rows = list(JsonlLog(tmp_path / "first.jsonl").rows())
    metrics = [r for r in rows if r["kind"] == "metrics"]
    steps = [r for r in metrics if "train_value/vault/losses/batch_mse_std" in r["metrics"]]
    epochs = [r for r in metrics if "train_value/vault/epoch" in r["metrics"]]
    value = next(s for s in stages if s.stage == "train_value")
    report = json.loads((value.path / "report.json").read_text())
    assert [r["step"] for r in steps] == list(range(1, len(steps) + 1)) and len(steps) >= 2
    assert [r["metrics"]["train_value/vault/epoch"] for r in epochs] == [1, 2]
    assert epochs[-1]["metrics"]["train_value/vault/eval/mse"] == pytest.approx(
        report["history"][-1]["eval/mse"]
    )
    (final,) = [r for r in metrics if "train_value/vault/final/eval/mse" in r["metrics"]]
    mse = final["metrics"]["train_value/vault/final/eval/mse"]
    assert mse == pytest.approx(report["eval"]["mse"])
    assert any("distill/vault/observation/action/f1" in r["metrics"] for r in metrics)
    logged = {r["name"]: r["path"] for r in rows if r["kind"] == "artifact"}
    assert logged == {"rules-vault": artifacts["vault"].rules,
                      "value-vault": artifacts["vault"].checkpoint}  # fmt: skip
    assert all(os.path.isfile(p) for p in logged.values())  # the stage folders, not temporaries

    with JsonlLogger(tmp_path / "again.jsonl") as logger:  # cached: nothing made, nothing logged
        run_pipeline(config, pipeline, console=quiet, logger=logger)
    assert [r["kind"] for r in JsonlLog(tmp_path / "again.jsonl").rows()] == ["finish"]

    # The stage scripts alone, each one W&B run of its job type, and TensorBoard steps.
    data = next(s for s in stages if s.stage == "collect").path / "vault"
    _wmkit("distill", f"data_dirs=[{data}]", "logger=wandb", "progress=false",
           f"hydra.run.dir={tmp_path / 'distill'}", cwd=tmp_path)  # fmt: skip
    _wmkit("train_value", f"data_dirs=[{data}]", "logger=[wandb,tensorboard]", "epochs=1",
           "device=cpu", "progress=false", f"hydra.run.dir={tmp_path / 'value'}",
           cwd=tmp_path)  # fmt: skip
    (distilled,) = wandb_runs(tmp_path / "distill")
    assert (distilled.job_type, distilled.exit_code) == ("distill", 0)
    assert [a[:2] for a in distilled.artifacts] == [("rules-vault", "rules")]
    assert distilled.summary["distill/vault/rules/command"] >= 0
    assert distilled.config["llm"]["api_key"] == REDACTED  # from $WMKIT_LLM_API_KEY
    (trained,) = wandb_runs(tmp_path / "value")
    assert (trained.job_type, trained.group) == ("train_value", "value")
    assert ("value", "model", ["value.pt"]) in trained.artifacts
    scalars = _scalars(tmp_path / "value" / "tensorboard")
    losses = scalars["train_value/losses/batch_mse_std"]
    assert [s for s, _ in losses] == list(range(1, len(losses) + 1))
    assert [s for s, _ in scalars["train_value/eval/mse"]] == [losses[-1][0]]  # one epoch
    assert "train_value/final/eval/skill" in scalars
    assert (tmp_path / "distill" / "config.yaml").is_file()


def test_a_sweep_jobs_run_is_named_by_the_overrides_its_sweep_varies(tmp_path):
    from wmkit.scripts.tracking import _swept

    (tmp_path / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": [
        "experiment=debug", "agents.window.tracker.k=2,20", "~env@envs.vault", "+x=1,2",
    ]}}}))  # fmt: skip
    job = ["experiment=debug", "agents.window.tracker.k=20", "~env@envs.vault=null", "+x=1"]
    assert _swept(job, tmp_path) == ["agents.window.tracker.k=20", "+x=1"]
    assert _swept(job, tmp_path / "elsewhere") == job  # no multirun.yaml: all of them
