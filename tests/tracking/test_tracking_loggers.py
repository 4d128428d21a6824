"""The loggers, each read back with the reader of its own format: JSONL rows, TensorBoard's
EventAccumulator, W&B's transaction log; redaction; the logger config; missing extras."""

import json
import os
import struct
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from pydantic import ValidationError

from wmkit.jsonl import JsonlLog
from wmkit.tracking import (
    REDACTED,
    FanOutLogger,
    JsonlLogger,
    LoggerConfig,
    NullLogger,
    RunInfo,
    RunLogger,
    TensorBoardLogger,
    WandbLogger,
    is_secret,
    open_logger,
    read_records,
    redact,
    wandb_runs,
)


def _event_accumulator():
    """TensorBoard's own reader (the tensorboard extra; CI installs it)."""
    module = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    return module.EventAccumulator


def _png(path):
    fig, ax = plt.subplots(figsize=(2, 1.5), dpi=50)
    ax.plot([0, 1], [1, 0])
    fig.savefig(path)
    plt.close(fig)
    return path


def _run(tmp_path, **kw):
    return RunInfo(dir=tmp_path, job_type=kw.get("job_type", "eval"), group="g", name="k=2")


# --- redaction ------------------------------------------------------------------------


def test_secrets_are_redacted_at_any_depth_and_urls_lose_their_password():
    config = {
        "llm": {"api_key": "sk-1", "model": "m", "base_url": "http://h/v1"},
        "agents": [{"tracker": {"hf_token": "t", "Token": "T", "db_password": "p"}}],
        "memory": {"url": "postgresql+psycopg://me:s3cret@db:5432/x", "keep": True},
        "unset": {"api_key": None},
        "sort_by": "drift",
    }
    out = redact(config)
    assert out["llm"] == {"api_key": REDACTED, "model": "m", "base_url": "http://h/v1"}
    assert out["agents"][0]["tracker"] == {"hf_token": REDACTED, "Token": REDACTED,
                                           "db_password": REDACTED}  # fmt: skip
    assert out["memory"]["url"] == f"postgresql+psycopg://me:{REDACTED}@db:5432/x"
    assert out["unset"] == {"api_key": None}  # nothing set: nothing to hide
    assert out["sort_by"] == "drift"
    assert config["llm"]["api_key"] == "sk-1"  # the input is left alone
    assert "s3cret" not in json.dumps(out) and "sk-1" not in json.dumps(out)
    assert not any(is_secret(k) for k in ("keys", "monkey", "tokens_seen", "max_tokens"))


def test_the_suite_fingerprint_ignores_the_same_secrets():
    from wmkit.evals.suite import AgentSpec, fingerprint

    def spec(**secret):
        tracker = {"_target_": "wmkit.agents.WindowTracker", **secret}
        return AgentSpec(tracker=tracker, policy={"_target_": "wmkit.agents.RandomPolicy"})

    assert fingerprint(spec()) == fingerprint(spec(api_key="a")) == fingerprint(spec(x_token="b"))
    assert fingerprint(spec()) != fingerprint(spec(k=3))


# --- the logger config ------------------------------------------------------------------


def _logger_node(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("eval", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True).get("logger", {})


def test_the_logger_group_takes_one_name_or_a_list_and_defaults_to_none():
    assert LoggerConfig.model_validate(_logger_node()).backends == []
    assert LoggerConfig.model_validate(_logger_node("logger=wandb")).backends == ["wandb"]
    several = LoggerConfig.model_validate(_logger_node("logger=[wandb,tensorboard,jsonl]"))
    assert several.backends == ["jsonl", "tensorboard", "wandb"]
    assert several.wandb.project == "wmkit" and several.tensorboard.dir == "tensorboard"
    for app in ("collect", "distill", "train_value"):
        with initialize_config_module("wmkit.configs", version_base="1.3"):
            cfg = compose(app, overrides=["logger=[jsonl,tensorboard]"])
        assert LoggerConfig.model_validate(OmegaConf.to_container(cfg.logger)).backends == [
            "jsonl",
            "tensorboard",
        ]


def test_a_typo_in_the_logger_node_is_a_clear_error():
    node = _logger_node("logger=wandb", "+logger.wandb.projct=x")
    with pytest.raises(ValidationError, match=r"wandb\.projct"):
        LoggerConfig.model_validate(node)
    with pytest.raises(ValidationError, match="mode"):
        LoggerConfig.model_validate({"wandb": {"mode": "offlin"}})
    with pytest.raises(ValidationError, match="tensorbord"):
        LoggerConfig.model_validate({"tensorbord": {}})


def test_no_backend_is_a_null_logger_and_several_fan_out(tmp_path):
    assert isinstance(open_logger(LoggerConfig(), _run(tmp_path)), NullLogger)
    config = LoggerConfig.model_validate({"jsonl": {}, "tensorboard": {}})
    both = open_logger(config, _run(tmp_path))
    assert isinstance(both, FanOutLogger) and len(both.loggers) == 2
    both.finish()


# --- JSONL ----------------------------------------------------------------------------------


def test_jsonl_rows_hold_every_call_and_skip_what_is_not_a_number(tmp_path):
    image = _png(tmp_path / "p.png")
    with JsonlLogger(tmp_path / "metrics.jsonl") as logger:
        logger.log_config({"a": 1})
        logger.log_metrics({"drift": 0.25, "nan": float("nan"), "none": None, "text": "x"}, 3,
                           prefix="episode")  # fmt: skip
        logger.log_metrics({"loss": 1.0}, prefix="train")
        logger.log_metrics({"loss": 0.5}, prefix="train")
        logger.log_table("board", ["agent", "drift"], [["window", 0.5], ["oracle", float("nan")]])
        logger.log_image("plot", image)
        logger.log_artifact("rules-parcel", "rules", tmp_path)
    rows = list(JsonlLog(tmp_path / "metrics.jsonl").rows())
    assert [r["kind"] for r in rows] == ["config", "metrics", "metrics", "metrics", "table",
                                         "image", "artifact", "finish"]  # fmt: skip
    assert rows[1]["step"] == 3 and rows[1]["metrics"] == {"episode/drift": 0.25}
    assert [r["step"] for r in rows[2:4]] == [0, 1]  # no step: the prefix's next
    assert rows[4]["rows"] == [["window", 0.5], ["oracle", None]]
    assert rows[6] == {"kind": "artifact", "name": "rules-parcel", "type": "rules",
                       "path": str(tmp_path)}  # fmt: skip
    assert rows[-1]["exit_code"] == 0


def test_leaving_the_block_on_an_error_finishes_with_a_nonzero_exit_code(tmp_path):
    path = tmp_path / "m.jsonl"
    with pytest.raises(RuntimeError), JsonlLogger(path):
        raise RuntimeError("boom")
    with pytest.raises(SystemExit), JsonlLogger(path):
        raise SystemExit(3)
    with pytest.raises(SystemExit), JsonlLogger(path):
        raise SystemExit("wmkit-eval: bad")
    codes = [r["exit_code"] for r in JsonlLog(path).rows() if r["kind"] == "finish"]
    assert codes == [1, 3, 1]


def test_a_fan_out_finishes_every_logger_when_one_fails(tmp_path):
    class Broken(NullLogger):
        def finish(self, exit_code=0):
            raise OSError("disk full")

    log = JsonlLogger(tmp_path / "m.jsonl")
    with pytest.raises(OSError, match="disk full"):
        FanOutLogger([Broken(), log]).finish(exit_code=0)
    assert list(JsonlLog(log.path).rows())[-1]["kind"] == "finish"


# --- TensorBoard ------------------------------------------------------------------------


def test_tensorboard_scalars_images_and_text_read_back_with_its_own_reader(tmp_path):
    logger = TensorBoardLogger(tmp_path / "tb")
    for step in range(3):
        logger.log_metrics({"drift": 0.1 * step, "bad": float("inf")}, step, prefix="episode")
    logger.log_metrics({"loss": 2.0}, prefix="train_value")
    logger.log_config({"seeds": [0, 1]})
    logger.log_table("leaderboard", ["agent", "drift"], [["window", 0.5]])
    logger.log_image("leaderboard/plot", _png(tmp_path / "p.png"))
    logger.log_artifact("value-parcel", "model", tmp_path / "value.pt")
    logger.finish()
    acc = _event_accumulator()(str(tmp_path / "tb"), size_guidance={"tensors": 0, "images": 0})
    acc.Reload()
    assert set(acc.Tags()["scalars"]) == {"episode/drift", "train_value/loss"}
    events = acc.Scalars("episode/drift")
    assert [e.step for e in events] == [0, 1, 2]
    assert [round(e.value, 6) for e in events] == [0.0, 0.1, 0.2]
    assert acc.Tags()["images"] == ["leaderboard/plot"]
    assert acc.Images("leaderboard/plot")[0].width == 100
    texts = {tag: acc.Tensors(tag)[0].tensor_proto.string_val[0].decode() for tag in
             acc.Tags()["tensors"]}  # fmt: skip
    assert '"seeds"' in texts["config/text_summary"]
    assert "| window | 0.5 |" in texts["leaderboard/text_summary"]
    assert "model" in texts["artifacts/value-parcel/text_summary"]


def test_a_missing_tensorboard_or_wandb_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'wmkit\[tensorboard\]'"):
        TensorBoardLogger(tmp_path / "tb")
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'wmkit\[wandb\]'"):
        open_logger(LoggerConfig.model_validate({"jsonl": {}, "wandb": {}}), _run(tmp_path))
    rows = list(JsonlLog(tmp_path / "metrics.jsonl").rows())
    assert rows[-1] == {"kind": "finish", "exit_code": 1, "time": rows[-1]["time"]}


# --- W&B ----------------------------------------------------------------------------------


@pytest.fixture
def clean_wandb_env(monkeypatch):
    pytest.importorskip("wandb")  # the wandb extra; CI installs it
    for var in ("WANDB_MODE", "WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR",
                "WANDB_CONFIG_DIR"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)


def test_an_offline_wandb_run_reads_back_from_its_files(tmp_path, clean_wandb_env):
    run_dir = tmp_path / "sweep" / "0"
    run_dir.mkdir(parents=True)
    page = tmp_path / "board.html"
    page.write_text("<html><body><table><tr><td>window</td></tr></table></body></html>")
    rules = tmp_path / "rules.jsonl"
    rules.write_text('{"kind": "rule"}\n')
    big = {f"key_{i}": "x" * 100 for i in range(800)}  # ~90 KB: spans several log blocks
    info = RunInfo(dir=run_dir, job_type="distill", group="sweep", name="k=2")
    logger = WandbLogger(info, tags=["t"])
    assert os.environ["WANDB_DIR"] == str(run_dir.resolve())
    logger.log_config({"seeds": [0, 1], "llm": {"api_key": REDACTED}, "big": big})
    for step in (1, 2):
        logger.log_metrics({"parcel/drift": 0.5 / step}, step, prefix="episode")
    logger.log_metrics({"losses/mse": 0.3}, 7, prefix="train_value/parcel")
    logger.log_table("leaderboard", ["agent", "drift"], [["window", 0.5], ["oracle", float("nan")]])
    logger.log_image("leaderboard/plot", _png(tmp_path / "p.png"))
    logger.log_html("leaderboard/page", page)
    logger.log_artifact("rules-parcel", "rules", rules)
    folder = tmp_path / "stage"
    folder.mkdir()
    (folder / "a.json").write_text("{}")
    (folder / "b.json").write_text("[]")
    logger.log_artifact("a folder/with spaces", "results", folder)
    logger.finish(exit_code=0)
    assert "WANDB_DIR" not in os.environ  # put back for the next job of a worker

    (run,) = wandb_runs(tmp_path / "sweep")
    assert run.path.parent == run_dir / "wandb" and run.path.name.startswith("offline-run-")
    assert (run.group, run.job_type, run.name, run.project) == ("sweep", "distill", "k=2", "wmkit")
    assert run.tags == ["t"] and run.exit_code == 0
    assert run.config["seeds"] == [0, 1] and run.config["llm"] == {"api_key": REDACTED}
    assert run.config["big"] == big
    episodes = [h for h in run.history if "episode/parcel/drift" in h]
    steps = [(h["episode/step"], h["episode/parcel/drift"]) for h in episodes]
    assert steps == [(1, 0.5), (2, 0.25)]
    assert run.summary["train_value/parcel/losses/mse"] == 0.3
    assert run.summary["train_value/parcel/step"] == 7
    assert run.summary["leaderboard"]["_type"] == "table-file"
    table = json.loads((run.path / "files" / run.summary["leaderboard"]["path"]).read_text())
    assert table["columns"] == ["agent", "drift"]
    assert table["data"] == [["window", 0.5], ["oracle", None]]
    assert (run.path / "files" / run.summary["leaderboard/plot"]["path"]).suffix == ".png"
    html = run.path / "files" / run.summary["leaderboard/page"]["path"]
    assert "window" in html.read_text()
    assert ("rules-parcel", "rules", ["rules.jsonl"]) in run.artifacts
    assert ("a-folder-with-spaces", "results", ["a.json", "b.json"]) in run.artifacts


def test_wandb_mode_is_respected_and_the_users_folders_are_kept(tmp_path, clean_wandb_env,
                                                                monkeypatch):  # fmt: skip
    mine = tmp_path / "mine"
    monkeypatch.setenv("WANDB_DATA_DIR", str(mine))
    monkeypatch.setenv("WANDB_MODE", "disabled")
    logger = WandbLogger(_run(tmp_path / "r"))
    assert os.environ["WANDB_DATA_DIR"] == str(mine)
    logger.log_metrics({"x": 1.0}, 1)
    logger.finish()
    assert os.environ["WANDB_DATA_DIR"] == str(mine) and "WANDB_DIR" not in os.environ
    assert wandb_runs(tmp_path / "r") == []  # disabled: nothing written


def test_a_damaged_transaction_log_is_refused(tmp_path, clean_wandb_env):
    logger = WandbLogger(_run(tmp_path))
    logger.log_metrics({"x": 1.0}, 1)
    logger.finish()
    (run,) = wandb_runs(tmp_path)
    log = next(run.path.glob("run-*.wandb"))
    assert len(list(read_records(log))) > 3
    data = bytearray(log.read_bytes())
    data[7 + struct.calcsize("<IHB") + 2] ^= 0xFF  # a byte of the first record
    log.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="CRC mismatch"):
        list(read_records(log))
    log.write_bytes(b"not a log")
    with pytest.raises(ValueError, match="not a W&B transaction log"):
        list(read_records(log))


def test_every_backend_implements_the_interface():
    for cls in (JsonlLogger, TensorBoardLogger, WandbLogger, FanOutLogger, NullLogger):
        assert issubclass(cls, RunLogger)
        assert not getattr(cls, "__abstractmethods__", None)
