"""The recorder on real envs, the parquet shards, and a real collection killed mid-write."""

import os
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import OracleTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import make_env, run_episode
from wmkit.knowledge.recording import (
    EPISODE_FEATURES,
    STEP_FEATURES,
    Recorder,
    RecordingTracker,
    SearchChild,
    SearchStats,
    TrajectoryWriter,
    env_data_dir,
    load_episodes,
    load_trajectories,
)
from wmkit.knowledge.scenes import Curiosity, SceneLog
from wmkit.world.types import Delta, Fact, WorldState

PARCEL = "wmkit/Parcel-v0"


def _facts(facts):
    return None if facts is None else [list(f) for f in sorted(facts)]


def _delta(d):
    return {"added": _facts(d["added"]), "removed": _facts(d["removed"])}


def _play(env, seed, *, recorder=None, steps=None):
    """A plain loop: random admissible actions, a window tracker; returns what it saw."""
    tracker = WindowTracker(env.unwrapped.reader, k=5)
    rng = np.random.default_rng(seed)
    observation, info = env.reset(seed=seed)
    tracker.reset(observation, info)
    seen = [(observation, None, 0.0, False, False, info, tracker.state)]
    if recorder:
        recorder.annotate(tracked=tracker.state)
    t = 0
    while steps is None or t < steps:
        actions = info["admissible_actions"]
        action = actions[int(rng.integers(len(actions)))]
        observation, reward, terminated, truncated, info = env.step(action)
        tracker.update(action, observation, info)
        t += 1
        seen.append((observation, action, reward, terminated, truncated, info, tracker.state))
        if recorder:
            recorder.annotate(tracked=tracker.state)
        if terminated or truncated:
            break
    return seen


def test_a_parcel_episode_is_recorded_and_loaded_back_equal(tmp_path):
    raw = _play(make_env(PARCEL, 30, {}), seed=3)
    data_dir = tmp_path / "data" / "parcel"
    with TrajectoryWriter(data_dir) as writer:
        recorder = Recorder(
            make_env(PARCEL, 30, {}), writer.write, env_name="parcel", agent="rnd",
            episode_prefix="rnd/",
        )  # fmt: skip
        recorded = _play(recorder, seed=3, recorder=recorder)
        recorder.close()
    steps = load_trajectories(data_dir, cache_dir=tmp_path / "hf")
    assert steps.features == STEP_FEATURES
    assert len(steps) == len(raw) == len(recorded) == 31
    for t, (row, seen) in enumerate(zip(steps, raw, strict=True)):
        observation, action, reward, terminated, truncated, info, tracked = seen
        assert row == {
            "env": "parcel",
            "env_id": PARCEL,
            "episode": "rnd/seed=3",
            "seed": 3,
            "step": t,
            "observation": observation,
            "action": action,
            "reward": reward,
            "terminated": terminated,
            "truncated": truncated,
            "admissible_actions": list(info["admissible_actions"]),
            "tracked_facts": _facts(tracked),
            "true_facts": _facts(info["wm.state"]),
            "predicted_delta": None,
            "true_delta": {k: _delta(v) for k, v in info["wm.delta"].items()},
            "search": None,
            "curiosity": None,
        }
    episodes = load_episodes(data_dir, cache_dir=tmp_path / "hf")
    assert episodes.features == EPISODE_FEATURES
    assert episodes.to_list() == [
        {
            "env": "parcel",
            "env_id": PARCEL,
            "episode": "rnd/seed=3",
            "agent": "rnd",
            "seed": 3,
            "steps": 30,
            "total_reward": sum(s[2] for s in raw),
            "score": raw[-1][5]["score"],
            "max_score": raw[-1][5]["max_score"],
            "terminated": raw[-1][3],
            "truncated": raw[-1][4],
            "scenes": 0,
        }
    ]
    assert SceneLog(data_dir / "scenes.jsonl").packets() == []


def test_agent_side_annotations_and_curiosity_make_rows_and_a_scene(tmp_path):
    episodes = []
    recorder = Recorder(make_env(PARCEL, 20, {}), episodes.append, env_name="parcel")
    recorder.reset(seed=0)
    before = WorldState([Fact("parcel:x", "status", "booked")])
    recorder.annotate(tracked=before)
    recorder.step("wait")
    guess = Delta(
        (Fact("parcel:x", "status", "delivered"),), (Fact("parcel:x", "status", "booked"),)
    )
    search = SearchStats(
        12, 30, 4, 0.25, (SearchChild("wait", 8, 0.5), SearchChild("track x", 4, 0.0))
    )
    recorder.annotate(predicted_delta=guess, search=search)
    after = [Fact("parcel:x", "status", "booked"), Fact("parcel:y", "status", "booked")]
    recorder.annotate(tracked=after, curiosity=Curiosity("saw parcel:y"), graph_summary="2 nodes")
    recorder.step("wait")  # seals step 1
    recorder.reset(seed=1)  # leaves episode 0 early, then starts another
    recorder.close()
    assert [e.episode["episode"] for e in episodes] == ["seed=0", "seed=1"]
    first = episodes[0]
    assert first.episode["steps"] == 2 and first.episode["scenes"] == 1
    assert not first.episode["terminated"] and not first.episode["truncated"]
    row = first.steps[1]
    assert row["tracked_facts"] == sorted(after)
    assert row["predicted_delta"] == {"added": list(guess.added), "removed": list(guess.removed)}
    assert row["search"]["children"] == [
        {"action": "wait", "visits": 8, "value": 0.5},
        {"action": "track x", "visits": 4, "value": 0.0},
    ]
    assert row["curiosity"] == "saw parcel:y"
    (scene,) = first.scenes
    assert (scene.step, scene.action, scene.reason, scene.graph_summary) == (
        1, "wait", "saw parcel:y", "2 nodes",
    )  # fmt: skip
    assert scene.predicted_delta.to_delta() == guess
    assert scene.observed_delta.added == (Fact("parcel:y", "status", "booked"),)
    assert scene.observed_delta.removed == ()
    assert scene.true_delta is not None
    assert first.steps[2]["tracked_facts"] is None and first.steps[2]["curiosity"] is None
    # Written and loaded: the annotations survive parquet.
    with TrajectoryWriter(tmp_path / "parcel") as writer:
        writer.write(first)
    loaded = load_trajectories(tmp_path / "parcel", cache_dir=tmp_path / "hf")[1]
    assert loaded["search"] == {**row["search"]}
    assert loaded["predicted_delta"] == {k: _facts(v) for k, v in row["predicted_delta"].items()}
    (back,) = SceneLog(tmp_path / "parcel" / "scenes.jsonl").packets()
    assert back == scene


def test_recording_tracker_records_the_agent_side_through_the_eval_runner(tmp_path):
    data_dir = tmp_path / "parcel"
    with TrajectoryWriter(data_dir, shard_rows=50) as writer:
        env = make_env(PARCEL, 40, {})
        recorder = Recorder(env, writer.write, env_name="parcel", agent="window")
        for seed in range(3):
            agent = Agent("window", WindowTracker(env.unwrapped.reader, k=10), RandomPolicy())
            agent.tracker = RecordingTracker(agent.tracker, recorder)
            result = run_episode(recorder, agent, seed)
            assert result["steps"] == 40
        recorder.close()
    shards = sorted(p.name for p in (data_dir / "trajectories").iterdir())
    # 41 rows an episode: cut at the first episode end past 50 rows (82), then at close.
    assert [s[: len("shard-00000")] for s in shards] == ["shard-00000", "shard-00001"]
    steps = load_trajectories(data_dir, cache_dir=tmp_path / "hf")
    assert len(steps) == 3 * 41
    assert steps["episode"] == [f"seed={s}" for s in range(3) for _ in range(41)]
    assert all(row is not None for row in steps["tracked_facts"])
    flagged = {(r["episode"], r["step"]): r for r in steps if r["curiosity"] is not None}
    packets = SceneLog(data_dir / "scenes.jsonl").packets()
    assert packets and len(packets) == len(flagged)
    episodes = load_episodes(data_dir, cache_dir=tmp_path / "hf")
    assert sum(episodes["scenes"]) == len(packets)
    previous = {(r["episode"], r["step"]): r for r in steps}
    for packet in packets:
        row = flagged[(packet.episode, packet.step)]
        assert (packet.reason, packet.observation, packet.action) == (
            row["curiosity"], row["observation"], row["action"],
        )  # fmt: skip
        old = WorldState(previous[(packet.episode, packet.step - 1)]["tracked_facts"])
        assert packet.observed_delta.to_delta() == Delta.between(
            old, WorldState(row["tracked_facts"])
        )


def test_shards_concatenate_and_load_offline_in_a_fresh_process(tmp_path):
    data_dir = tmp_path / "parcel"
    with TrajectoryWriter(data_dir, shard_rows=1) as writer:
        recorder = Recorder(make_env(PARCEL, 20, {}), writer.write, env_name="parcel")
        for seed in range(3):
            _play(recorder, seed, recorder=recorder)
        recorder.close()
    assert len(list((data_dir / "trajectories").iterdir())) == 3
    code = textwrap.dedent(
        f"""
        from wmkit.knowledge.recording import load_trajectories, load_episodes
        steps = load_trajectories({str(data_dir)!r})
        print(len(steps), sorted(set(steps["episode"])), len(load_episodes({str(data_dir)!r})))
        """
    )
    offline = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    env = {**os.environ, **offline, "HF_DATASETS_CACHE": str(tmp_path / "hf")}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split("\n")[0] == "63 ['seed=0', 'seed=1', 'seed=2'] 3"


def test_an_empty_data_folder_loads_empty_and_a_missing_one_is_an_error(tmp_path):
    assert len(load_trajectories(tmp_path)) == 0
    assert load_episodes(tmp_path).features == EPISODE_FEATURES
    with pytest.raises(FileNotFoundError, match="no data folder"):
        load_trajectories(tmp_path / "nope")


def test_bad_rows_and_misuse_are_clear_errors(tmp_path):
    episodes = []
    recorder = Recorder(make_env(PARCEL, 20, {}), episodes.append, env_name="parcel")
    with pytest.raises(RuntimeError, match="before reset"):
        recorder.step("wait")
    with pytest.raises(RuntimeError, match="before reset"):
        recorder.annotate(tracked=[])
    recorder.reset(seed=0)
    with pytest.raises(ValueError, match=r"tracked facts must be \(s, r, o\) triples"):
        recorder.annotate(tracked=[("a", "b")])
    recorder.close()
    episodes[0].steps[0]["true_facts"] = [["a", "b"]]  # a sink that changed a row
    writer = TrajectoryWriter(tmp_path / "parcel")
    with pytest.raises(ValueError, match="episode 'seed=0' does not fit the trajectory schema"):
        writer.write(episodes[0])
    writer.close()
    assert list((tmp_path / "parcel" / "trajectories").iterdir()) == []
    with pytest.raises(ValueError, match="cannot name a data folder"):
        env_data_dir(tmp_path, "../escape")
    assert env_data_dir(tmp_path, "parcel-2") == tmp_path / "parcel-2"
    with pytest.raises(ValueError, match="needs an env_name"):
        Recorder(make_env(PARCEL, 20, {}), episodes.append, env_name="")
    with pytest.raises(ValueError, match="must be >= 1"):
        TrajectoryWriter(tmp_path / "x", shard_rows=0)


@pytest.mark.jericho
def test_a_short_jericho_episode_records_true_facts_and_deltas(games_dir, tmp_path):
    pytest.importorskip("jericho")
    kwargs = {"game": str(games_dir / "905.z5"), "admissible_actions": False}
    with TrajectoryWriter(tmp_path / "905") as writer:
        recorder = Recorder(make_env("wmkit/Jericho-v0", 3, kwargs), writer.write, env_name="905")
        agent = Agent("oracle", OracleTracker(), RandomPolicy(), oracle=True)
        recorder.reset(seed=0)
        for action in ["stand up", "north", "look"]:
            *_, info = recorder.step(action)
            agent.tracker.update(action, "", info)
            recorder.annotate(tracked=agent.tracker.state)
        recorder.close()
    steps = load_trajectories(tmp_path / "905", cache_dir=tmp_path / "hf")
    assert steps["action"] == [None, "stand up", "north", "look"]
    assert steps["truncated"] == [False, False, False, True]
    assert all(len(facts) > 50 for facts in steps["true_facts"])
    assert ["player", "in", "bedroom#25"] in steps[1]["true_delta"]["action"]["added"]
    assert steps["admissible_actions"][0] == []


_COLLECTOR = """
import sys
from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import make_env, run_episode
from wmkit.knowledge.recording import Recorder, RecordingTracker, TrajectoryWriter, load_episodes

data_dir, seeds, megabytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
SUMMARY = "g" * (megabytes << 20)  # a big world-graph summary: scene batches of many MB


class Summarising(RecordingTracker):
    def update(self, action, observation, info):
        super().update(action, observation, info)
        self.recorder.annotate(graph_summary=SUMMARY)


done = set(load_episodes(data_dir)["episode"]) if len(sys.argv) > 4 else set()
writer = TrajectoryWriter(data_dir, shard_rows=1)  # a shard per episode
env = make_env("wmkit/Parcel-v0", 20, {})
recorder = Recorder(env, writer.write, env_name="parcel", agent="random")
for seed in range(seeds):
    if f"seed={seed}" not in done:
        agent = Agent("random", WindowTracker(env.unwrapped.reader, k=10), RandomPolicy())
        agent.tracker = Summarising(agent.tracker, recorder)
        run_episode(recorder, agent, seed)
recorder.close()
writer.close()
print("done", flush=True)
"""


def _size(path):
    return path.stat().st_size if path.exists() else 0


def _check_committed(data_dir, hf):
    """Every committed episode is whole: its rows, and its scenes in the scene log."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        packets = SceneLog(data_dir / "scenes.jsonl").packets()
    episodes = load_episodes(data_dir, cache_dir=hf).to_list()
    steps = load_trajectories(data_dir, cache_dir=hf)
    by_episode = {}
    for row in steps.select_columns(["episode", "step", "curiosity"]):
        by_episode.setdefault(row["episode"], []).append(row)
    assert sorted(by_episode) == sorted(e["episode"] for e in episodes)  # no stray rows
    for episode in episodes:
        rows = by_episode[episode["episode"]]
        assert [r["step"] for r in rows] == list(range(episode["steps"] + 1))
        flagged = {r["step"]: r["curiosity"] for r in rows if r["curiosity"] is not None}
        mine = {p.step: p.reason for p in packets if p.episode == episode["episode"]}
        assert mine == flagged and len(mine) == episode["scenes"]
    return episodes, packets, [str(w.message) for w in caught]


SEEDS = 8  # episodes in all; each kill comes after at most two more


def test_collection_killed_mid_write_keeps_every_complete_scene_and_row(tmp_path):
    data_dir, hf = tmp_path / "parcel", tmp_path / "hf"
    env = {**os.environ, "HF_DATASETS_CACHE": str(hf)}
    script = [sys.executable, "-c", textwrap.dedent(_COLLECTOR), str(data_dir), str(SEEDS), "1"]
    scenes, shards = data_dir / "scenes.jsonl", data_dir / "trajectories"
    torn = 0
    for attempt in range(3):
        proc = subprocess.Popen([*script, *["resume"] * attempt], env=env)
        try:
            committed = len(list(shards.glob("shard-*"))) if shards.exists() else 0
            while proc.poll() is None and (
                not shards.exists() or len(list(shards.glob("shard-*"))) < committed + 1
            ):
                pass
            size = _size(scenes)
            while proc.poll() is None and _size(scenes) == size:
                pass  # the next scene batch starts landing: kill it in the middle
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        assert proc.returncode == -signal.SIGKILL, "the collection ended before the kill"
        data = scenes.read_bytes()
        episodes, packets, warned = _check_committed(data_dir, hf)
        assert len(episodes) >= attempt + 1
        # Every complete line is a packet (an episode re-played after a kill may
        # append its scenes twice; the log keeps one copy of each).
        assert len(packets) <= data.count(b"\n")
        assert len({(p.episode, p.step) for p in packets}) == len(packets)
        if not data.endswith(b"\n"):
            torn += 1
            assert any("killed mid-write" in w for w in warned)  # a torn line or batch
        if torn:
            break
    assert torn, "no kill landed mid-write in 3 tries"
    # The next run repairs the torn tail, skips the committed episodes, appends cleanly.
    proc = subprocess.run([*script, "resume"], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "left by a writer killed mid-write" in proc.stderr  # a torn line or batch, cut
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        episodes, packets, _ = _check_committed(data_dir, hf)
    assert sorted(e["episode"] for e in episodes) == sorted(f"seed={s}" for s in range(SEEDS))
    assert scenes.read_bytes().endswith(b"\n")
    assert not [p for p in shards.iterdir() if p.name.startswith(".")]  # no half shard left
