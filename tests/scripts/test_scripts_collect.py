"""wmkit-collect end to end: real Hydra composition, real subprocess runs, kill and resume."""

import os
import signal
import subprocess
import sys
import time

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from pydantic import ValidationError

from wmkit.knowledge.recording import load_episodes, load_trajectories
from wmkit.knowledge.scenes import SceneLog
from wmkit.scripts.collect import CollectConfig

COLLECT = [sys.executable, "-m", "wmkit.scripts.collect"]
TINY = ["experiment=debug", "agents=[window,random]"]  # 2 horizons x 2 seeds x 2 agents
EPISODES = 8


def _compose(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        return compose("collect", overrides=list(overrides))


def test_the_config_composes_and_validates_with_every_agent():
    config = CollectConfig.model_validate(
        OmegaConf.to_container(_compose("agents=[oracle,window,memory,random]"), resolve=True)
    )
    assert sorted(config.agents) == ["memory", "oracle", "random", "window"]
    assert list(config.envs) == ["parcel"] and config.data_dir is None
    assert _compose("experiment=debug").horizons == [20, 40]


def _run(*args, cwd, check=True):
    env = {**os.environ, "HF_DATASETS_CACHE": str(cwd / "hf")}
    proc = subprocess.run(
        [*COLLECT, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _check(data_dir, hf):
    """Return the committed episode ids; every one is whole, scenes and all."""
    episodes = load_episodes(data_dir, cache_dir=hf).to_list()
    steps = load_trajectories(data_dir, cache_dir=hf)
    packets = SceneLog(data_dir / "scenes.jsonl").packets()
    ids = [e["episode"] for e in episodes]
    assert len(ids) == len(set(ids))
    assert len(steps) == sum(e["steps"] + 1 for e in episodes)
    assert sorted(set(steps["episode"])) == sorted(ids)
    assert {p.episode for p in packets} <= set(ids)
    assert len(packets) == sum(e["scenes"] for e in episodes)
    assert sum(c is not None for c in steps["curiosity"]) == len(packets)
    return sorted(ids), episodes, steps, packets


def test_debug_collection_writes_trajectories_and_scenes_resumes_and_refuses_changes(tmp_path):
    run_dir = tmp_path / "run"
    proc = _run(*TINY, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    data_dir = run_dir / "data" / "parcel"
    ids, episodes, steps, packets = _check(data_dir, tmp_path / "hf")
    assert ids == sorted(
        f"{agent}/h{h}/seed={s}" for agent in ("window", "random") for h in (20, 40) for s in (0, 1)
    )
    assert {e["steps"] for e in episodes} == {20, 40}
    assert all(e["agent"] in ("window", "random") for e in episodes)
    assert all(facts is not None for facts in steps["tracked_facts"])  # the agent's side
    assert all(facts for facts in steps["true_facts"])  # ground truth, for training
    assert packets and all(p.reason for p in packets)
    assert f"{EPISODES} episodes recorded" in proc.stderr
    shards = sorted(p.name for p in (data_dir / "trajectories").iterdir())
    # Nothing left to do: a second run skips every episode and writes nothing.
    proc = _run(*TINY, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert f"resuming parcel: {EPISODES} episodes already in" in proc.stderr
    assert sorted(p.name for p in (data_dir / "trajectories").iterdir()) == shards
    assert _check(data_dir, tmp_path / "hf")[0] == ids
    # Other settings into the same folder are refused, and nothing is written.
    proc = _run(
        *TINY, "agents.window.tracker.k=3", f"hydra.run.dir={run_dir}", cwd=tmp_path, check=False
    )
    assert proc.returncode != 0
    assert "parcel/window episodes recorded with other settings" in proc.stderr
    assert sorted(p.name for p in (data_dir / "trajectories").iterdir()) == shards


def test_killed_collection_resumes_without_losing_or_repeating_episodes(tmp_path):
    data = tmp_path / "shared-data"
    args = [*TINY, "shard_rows=1", f"data_dir={data}", f"hydra.run.dir={tmp_path / 'run'}"]
    env = {**os.environ, "HF_DATASETS_CACHE": str(tmp_path / "hf")}
    proc = subprocess.Popen(
        [*COLLECT, *args], cwd=tmp_path, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    shards = data / "parcel" / "trajectories"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if shards.exists() and len(list(shards.glob("shard-*"))) >= 2:
            break
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before, *_ = _check(data / "parcel", tmp_path / "hf")
    assert 2 <= len(before) < EPISODES, "kill landed outside the run"
    proc = _run(*args, cwd=tmp_path)
    assert f"resuming parcel: {len(before)} episodes already in" in proc.stderr
    after, *_ = _check(data / "parcel", tmp_path / "hf")
    assert len(after) == EPISODES and set(before) <= set(after)


def test_an_isolated_env_records_through_its_worker(tmp_path):
    run_dir = tmp_path / "run"
    _run(
        "experiment=debug", "agents=[window]", "horizons=[20]", "seeds=[3]",
        "+envs.parcel.isolate=true", f"hydra.run.dir={run_dir}", cwd=tmp_path,
    )  # fmt: skip
    ids, episodes, *_ = _check(run_dir / "data" / "parcel", tmp_path / "hf")
    assert ids == ["window/h20/seed=3"] and episodes[0]["steps"] == 20


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("shard_rows=0", "shard_rows"),
        ("+agents.evil.tracker._target_=os.system", "_target_ must name a class under"),
        ("state_relations=status", "state_relations"),
        ("+colour=red", "colour"),
    ],
)
def test_config_mistakes_are_refused_naming_the_key(override, message):
    raw = OmegaConf.to_container(_compose(*TINY, override), resolve=True)
    with pytest.raises(ValidationError, match=message):
        CollectConfig.model_validate(raw)


def test_the_command_line_stops_on_a_mistake_before_writing_anything(tmp_path):
    proc = _run(*TINY, "shard_rows=0", f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert "wmkit-collect: invalid configuration" in proc.stderr and "shard_rows" in proc.stderr
    assert not (tmp_path / "r" / "data").exists()


def test_help_names_the_tool_and_its_groups(tmp_path):
    proc = _run("--help", cwd=tmp_path)
    assert "wmkit-collect: run agents" in proc.stdout
    groups = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert {"oracle", "window", "random"} <= set(groups["agents"].split(", "))
