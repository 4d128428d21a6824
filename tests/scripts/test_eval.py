"""wmkit-eval end to end: real Hydra composition, real subprocess runs, kill and resume."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wmkit.evals.runner import make_env
from wmkit.evals.suite import EvalConfig, build_agent, plays
from wmkit.scripts.pipeline import PipelineConfig

EVAL = [sys.executable, "-m", "wmkit.scripts.eval"]
AGENTS = ["oracle", "window", "memory", "random"]  # default agents that need no training
TRAINED = ["rules", "wm_agent", "wm_no_value", "wm_no_correction", "wm_exact_sim"]
GAMES = ["random_games", "rules_games", "greedy_games"]  # the default agents of TextWorld
ENVS = ["booking", "parcel", "smarthome", "vault"]
TEXTWORLD = ["textworld", "textworld_cooking", "textworld_treasure"]  # AGENTS play none
DEBUG = ["experiment=debug", f"agents=[{','.join(AGENTS)}]"]  # no training stage runs
DEBUG_EPISODES = len(ENVS) * 2 * 2 * len(AGENTS)  # envs x horizons x seeds x agents


def _compose(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        return compose("eval", overrides=list(overrides))


def test_every_agent_option_composes_validates_and_builds():
    config = EvalConfig.model_validate(OmegaConf.to_container(_compose(), resolve=True))
    assert sorted(config.agents) == sorted(
        [*AGENTS, *TRAINED, *GAMES, "governed", "dict", "solver"]
    )
    assert config.agents["governed"].envs == config.agents["dict"].envs == ("booking",)
    env = make_env(config.envs["parcel"].id, 20, config.envs["parcel"].kwargs)
    for name in AGENTS:  # the trained ones build in tests/scripts/test_pipeline.py
        agent = build_agent(name, config.agents[name], env)
        assert agent.oracle == (name == "oracle")
    assert all(config.agents[name].needs.artifacts for name in [*TRAINED, "rules_games"])


def _players(config, env_name):
    env = config.envs[env_name]
    return sorted(a for a, spec in config.agents.items() if plays(a, spec, env_name, env))


def test_the_default_plays_the_games_agents_on_textworld_and_the_rest_on_the_families():
    config = EvalConfig.model_validate(OmegaConf.to_container(_compose(), resolve=True))
    assert sorted(config.envs) == sorted([*ENVS, *TEXTWORLD])
    assert {config.envs[name].id for name in TEXTWORLD} == {"wmkit/TextWorld-v0"}
    games = {tuple(sorted(config.envs[name].kwargs["options"].items())) for name in TEXTWORLD}
    assert len(games) == 3  # three games, not one game thrice
    for name in TEXTWORLD:  # no family reader or policy there: the games agents only
        assert _players(config, name) == sorted(GAMES)
    families = sorted(set(config.agents) - set(GAMES))
    assert _players(config, "parcel") == sorted(set(families) - {"governed", "dict"})
    assert _players(config, "booking") == families
    pipeline = PipelineConfig.model_validate(config.pipeline)
    collectors = pipeline.collect.agents  # the training episodes: the same rule

    def collect(env_name):
        env = config.envs[env_name]
        return sorted(a for a, spec in collectors.items() if plays(a, spec, env_name, env))

    assert collect("textworld") == ["random_games"]
    assert collect("vault") == ["random", "window"]


def test_the_default_booking_config_lets_quotes_lapse_silently():
    # Stale use separates plain memories from governed memory only if a lapse goes unsaid.
    config = EvalConfig.model_validate(OmegaConf.to_container(_compose(), resolve=True))
    spec = config.envs["booking"]
    assert spec.kwargs["expiry_notice"] is False
    env = make_env(spec.id, 200, spec.kwargs)
    obs, info = env.reset(seed=0)
    lapsed = 0
    for _ in range(200):
        before = {f[0] for f in info["wm.state"] if f[1:] == ("quote", "valid")}
        obs, _, done, cut, info = env.step("wait")
        now = {f[0] for f in info["wm.state"] if f[1:] == ("quote", "expired")}
        lapsed += len(before & now)
        assert "expired" not in obs.lower() and "no longer valid" not in obs.lower()
        if done or cut:
            break
    assert lapsed > 0  # quotes did lapse, and no observation said so
    assert "valid for" in env.reset(seed=0)[0]  # each quote states its validity instead


def test_debug_is_the_main_job_in_small_training_stages_included():
    config = EvalConfig.model_validate(
        OmegaConf.to_container(_compose("experiment=debug"), resolve=True)
    )
    default = EvalConfig.model_validate(OmegaConf.to_container(_compose(), resolve=True))
    assert config.envs == default.envs and config.agents == default.agents
    assert config.horizons == [20, 40] and config.seeds == [0, 1]
    assert config.train_seeds == [100, 101]
    pipeline = PipelineConfig.model_validate(config.pipeline)
    assert pipeline.collect.horizons == [20]
    assert pipeline.train_value_config(["x"], progress=False).epochs == 1
    full = PipelineConfig.model_validate(default.pipeline)
    assert full.collect.horizons == [200] and len(default.train_seeds) == 10
    assert full.train_value_config(["x"], progress=False).epochs > 1


def _run(*args, cwd, check=True):
    proc = subprocess.run([*EVAL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def test_debug_run_writes_results_and_leaderboard(tmp_path):
    run_dir = tmp_path / "run"
    proc = _run(*DEBUG, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    rows = _rows(run_dir)
    assert len(rows) == DEBUG_EPISODES
    assert sorted({r["env"] for r in rows}) == ENVS
    oracle = [r for r in rows if r["agent"] == "oracle"]
    window = [r for r in rows if r["agent"] == "window"]
    assert all(r["oracle"] for r in oracle) and not any(r["oracle"] for r in window)
    assert all(r["drift"]["mean"] == 0.0 for r in oracle)
    assert all(r["drift"]["mean"] > 0.0 for r in window if r["horizon"] == 40)
    board = (run_dir / "leaderboard.md").read_text()
    assert "oracle †" in board and "| window ‡ |" in board  # ‡: the env's own parser
    assert (run_dir / "leaderboard.png").stat().st_size > 10_000
    assert "wmkit leaderboard" in proc.stdout


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("horizonz=[5]", "horizonz"),
        ("horizons=[fifty]", "horizons"),
        ("+agents.evil.tracker._target_=os.system", "_target_ must name a class under"),
        ("agents=[windw]", "windw"),
    ],
)
def test_config_mistakes_stop_with_a_clear_error(tmp_path, override, message):
    proc = _run(*DEBUG, override, f"hydra.run.dir={tmp_path / 'r'}", cwd=tmp_path, check=False)
    assert proc.returncode != 0
    assert message in proc.stderr + proc.stdout
    assert not (tmp_path / "r" / "results.jsonl").exists()


def test_killed_run_resumes_without_losing_or_repeating_episodes(tmp_path):
    run_dir = tmp_path / "run"
    args = [*EVAL, *DEBUG, f"hydra.run.dir={run_dir}"]
    proc = subprocess.Popen(
        args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    results = run_dir / "results.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if results.exists() and results.read_bytes().count(b"\n") >= 3:
            break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = results.read_bytes().count(b"\n")
    assert 3 <= before < DEBUG_EPISODES, "kill landed outside the run"
    proc = _run(*DEBUG, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert f"resuming: {before} episodes" in proc.stderr
    rows = _rows(run_dir)
    keys = [(r["env"], r["horizon"], r["agent"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys)) == DEBUG_EPISODES
    assert Path(run_dir / "leaderboard.md").exists()


def test_sweep_on_the_joblib_launcher_merges_into_one_leaderboard(tmp_path):
    sweep_dir = tmp_path / "sweep"
    _run(
        "-m",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "experiment=debug",
        "agents=[window]",
        "agents.window.tracker.k=2,20",
        f"hydra.sweep.dir={sweep_dir}",
        cwd=tmp_path,
    )
    jobs = sorted(p.parent for p in sweep_dir.rglob("results.jsonl"))
    assert len(jobs) == 2
    ks = [OmegaConf.load(job / ".hydra" / "config.yaml").agents.window.tracker.k for job in jobs]
    assert sorted(ks) == [2, 20]
    drifts = {
        k: sum(r["drift"]["mean"] for r in _rows(job)) for k, job in zip(ks, jobs, strict=True)
    }
    assert drifts[2] > drifts[20]  # a shorter window forgets more
    merged = subprocess.run(
        [sys.executable, "-m", "wmkit.evals.leaderboard", str(sweep_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert f"{2 * DEBUG_EPISODES // len(AGENTS)} episodes from 2 files" in merged.stdout
    assert (sweep_dir / "leaderboard.md").exists()


def test_resuming_with_other_settings_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    _run(
        "experiment=debug", "agents=[window]", "seeds=[0]", f"hydra.run.dir={run_dir}", cwd=tmp_path
    )
    before = (run_dir / "results.jsonl").read_bytes()
    proc = _run(
        "experiment=debug",
        "agents=[window]",
        "seeds=[0]",
        "envs.parcel.kwargs.load=2",
        f"hydra.run.dir={run_dir}",
        cwd=tmp_path,
        check=False,
    )
    assert proc.returncode != 0
    assert "run with other settings" in proc.stderr
    assert (run_dir / "results.jsonl").read_bytes() == before


def test_help_lists_groups_and_examples(tmp_path):
    proc = _run("--help", cwd=tmp_path)
    assert "wmkit-eval: run agents" in proc.stdout
    listed = next(line for line in proc.stdout.splitlines() if line.startswith("agents: "))
    assert {*AGENTS, "governed", "dict"} <= set(listed.removeprefix("agents: ").split(", "))
    assert "memory: postgres, sqlite" in proc.stdout
    assert "experiment=stale_use" in proc.stdout
    assert "experiment=debug" in proc.stdout


def test_every_env_option_composes_and_validates():
    from wmkit.envs import ENV_IDS
    from wmkit.evals.suite import EnvSpec

    options = ["booking", "jericho", "parcel", "reference", "smarthome", "textworld", "vault"]
    overrides = [f"+env@envs.extra_{name}={name}" for name in options]
    config = EvalConfig.model_validate(OmegaConf.to_container(_compose(*overrides), resolve=True))
    ids = {config.envs[f"extra_{name}"].id for name in options}
    assert ids == set(ENV_IDS)
    assert all(isinstance(spec, EnvSpec) for spec in config.envs.values())
    assert config.envs["extra_jericho"].isolate and not config.envs["extra_parcel"].isolate


SCORE = [sys.executable, "-m", "wmkit.scripts.score"]
ONE_ENV = ["~env@envs.booking", "~env@envs.smarthome", "~env@envs.vault"]


def _score(*args, cwd, check=True, env=None):
    proc = subprocess.run(
        [*SCORE, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def test_a_recorded_run_is_rescored_by_wmkit_score_without_replaying(tmp_path):
    run_dir = tmp_path / "run"
    _run(*DEBUG, *ONE_ENV, "seeds=[0]", f"hydra.run.dir={run_dir}", cwd=tmp_path)
    rows = _rows(run_dir)
    assert len(rows) == 2 * len(AGENTS)  # horizons x agents
    assert len(list((run_dir / "records").glob("*.jsonl.gz"))) == len(rows)
    (run_dir / "results.jsonl").unlink()
    (run_dir / "leaderboard.md").unlink()
    proc = _score(str(run_dir), cwd=tmp_path)
    assert f"rescored {len(rows)} episodes" in proc.stdout
    key = lambda r: (r["horizon"], r["agent"])  # noqa: E731
    assert sorted(_rows(run_dir), key=key) == sorted(rows, key=key)
    assert "oracle †" in (run_dir / "leaderboard.md").read_text()
    # A new metric from a module of one's own, on every row.
    (tmp_path / "mymetrics.py").write_text(
        "from wmkit.evals.metrics import score_episode\n"
        "def score(record):\n"
        "    return score_episode(record) | {'observed_chars': "
        "sum(len(s.observation) for s in record.steps)}\n"
    )
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    _score(str(run_dir), "--scorer", "mymetrics:score", cwd=tmp_path, env=env)
    new = _rows(run_dir)
    assert len(new) == len(rows) and all(r["observed_chars"] > 0 for r in new)


def test_wmkit_score_explains_itself_and_its_errors(tmp_path):
    proc = _score("--help", cwd=tmp_path)
    assert "Rescore a finished wmkit-eval run" in proc.stdout
    assert "records=true" in proc.stdout and "--scorer MODULE:FUNCTION" in proc.stdout
    run_dir = tmp_path / "run"
    _run(
        "experiment=debug", *ONE_ENV, "agents=[window]", "seeds=[0]", "records=false",
        f"hydra.run.dir={run_dir}", cwd=tmp_path,
    )  # fmt: skip
    before = (run_dir / "results.jsonl").read_bytes()
    proc = _score(str(run_dir), cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert "has no episode records" in proc.stderr and "records=true" in proc.stderr
    assert (run_dir / "results.jsonl").read_bytes() == before
    proc = _score(str(run_dir), "--scorer", "nowhere:score", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "cannot load 'nowhere:score'" in proc.stderr
    proc = _score(str(tmp_path / "missing"), cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "no such run folder" in proc.stderr
