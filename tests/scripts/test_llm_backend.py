"""The llm group, the llm_local preset, and the main job starting the local model itself."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from rich.console import Console

from wmkit.evals.suite import EvalConfig
from wmkit.scripts.llm_backend import LOG_FILE, chat_base_urls, serving

FAMILIES = ["booking", "parcel", "smarthome", "vault"]


def _config(*overrides) -> EvalConfig:
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        raw = compose("eval", overrides=list(overrides))
    return EvalConfig.model_validate(OmegaConf.to_container(raw, resolve=True))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_preset_compares_the_llm_agents_with_window_and_oracle_on_every_family(monkeypatch):
    monkeypatch.delenv("WMKIT_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("WMKIT_LLM_MODEL", raising=False)
    config = _config("experiment=llm_local")
    assert sorted(config.envs) == FAMILIES
    assert sorted(config.agents) == ["llm_structured", "llm_window", "oracle", "window"]
    assert len(config.seeds) >= 5
    client = config.agents["llm_window"].tracker["client"]
    assert client == config.agents["llm_structured"].tracker["client"]  # one model, both rows
    assert (client["base_url"], client["model"]) == ("http://127.0.0.1:8765/v1", "smollm2-135m")
    assert client["constrain"] == "json_object"
    assert config.llm.serve.model == "smollm2-135m"
    assert chat_base_urls(config) == {"http://127.0.0.1:8765/v1"}


def test_openai_compatible_reads_the_environment_and_serves_nothing(monkeypatch):
    monkeypatch.setenv("WMKIT_LLM_BASE_URL", "http://10.0.0.7:8000/v1")
    monkeypatch.setenv("WMKIT_LLM_MODEL", "qwen2.5-7b-instruct")
    config = _config("agents=[oracle,llm_window]")
    client = config.agents["llm_window"].tracker["client"]
    assert (client["base_url"], client["model"]) == (
        "http://10.0.0.7:8000/v1",
        "qwen2.5-7b-instruct",
    )
    assert client["constrain"] == "json_schema" and config.llm.serve is None
    with serving(config, Path("unused"), Console(quiet=True)):
        pass  # nothing to start, nothing checked: the server is the user's


def test_a_run_without_llm_agents_starts_nothing(tmp_path):
    config = _config("llm=local", "agents=[oracle,window]")
    assert chat_base_urls(config) == set()
    with serving(config, tmp_path, Console(quiet=True)):
        pass
    assert not (tmp_path / LOG_FILE).exists()


def test_serve_refuses_a_server_that_is_not_on_this_machine(monkeypatch, tmp_path):
    monkeypatch.setenv("WMKIT_LLM_BASE_URL", "http://192.0.2.1:9/v1")  # TEST-NET: no answer
    config = _config("llm=local", "agents=[llm_window]")
    refused = pytest.raises(ValueError, match=r"127\.0\.0\.1 only")
    with refused, serving(config, tmp_path, Console(quiet=True)):
        pass


@pytest.mark.llm
def test_the_main_job_serves_the_local_model_itself_and_accounts_for_it(
    monkeypatch, tmp_path, llm_server
):
    # Nothing answers at this port: wmkit-eval starts the packaged model there, plays the
    # LLM agent, and stops the server at the end.
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WMKIT_LLM_")}
    env["WMKIT_LLM_BASE_URL"] = f"http://127.0.0.1:{port}/v1"
    run = tmp_path / "run"
    command = [
        sys.executable, "-m", "wmkit.scripts.eval", "experiment=llm_local",
        "agents=[llm_window]", "~env@envs.booking", "~env@envs.smarthome",
        "~env@envs.vault", "seeds=[0]", "progress=false", f"hydra.run.dir={run}",
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"127.0.0.1:{port}" in done.stderr
    assert (run / LOG_FILE).stat().st_size > 0
    [row] = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    usage = row["llm"]
    assert usage["calls"] >= 21 and usage["tokens_in"] > 0 and usage["tokens_out"] > 0
    assert usage["valid"] + usage["repaired"] + usage["failed"] == usage["calls"]
    with socket.socket() as probe:  # the server is gone
        assert probe.connect_ex(("127.0.0.1", port)) != 0
