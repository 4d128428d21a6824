"""A 2x2 debug sweep of wmkit-eval on each Hydra launcher: basic, joblib, ray, submitit_local.

Each sweep is the main job in small on one env and one agent (window, h=20, which needs
no training stage) over ``agents.window.tracker.k=2,4`` x ``seeds=[0],[1]``, tracked with
``logger=[wandb,tensorboard]``: four jobs, each with its own folder, results, log, offline
W&B run (one group for the sweep) and TensorBoard events, merged into one leaderboard
afterwards. Ray runs on a local instance this test starts (``ray.init(num_cpus=2)``: two
workers).
"""

import json
import os
import re
import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from wmkit.scripts.entry import LAUNCHERS, launcher_hint
from wmkit.tracking import wandb_runs

EVAL = [sys.executable, "-m", "wmkit.scripts.eval"]
OTHERS = ["booking", "smarthome", "vault", "textworld", "textworld_cooking", "textworld_treasure"]
TINY = ["experiment=debug", "agents=[window]", "horizons=[20]", *(f"~env@envs.{e}" for e in OTHERS)]
SWEEP = ["agents.window.tracker.k=2,4", "seeds=[0],[1]", "logger=[wandb,tensorboard]"]
LAUNCHER_ARGS = {
    "basic": [],
    "joblib": ["hydra.launcher.n_jobs=2"],
    "ray": [
        "+hydra.launcher.ray.init.num_cpus=2",
        "+hydra.launcher.ray.init.include_dashboard=false",
    ],
    "submitit_local": ["hydra.launcher.timeout_min=10"],
}


def _sweep(tmp_path, launcher):
    sweep_dir = tmp_path / "sweep"
    args = ["-m", f"hydra/launcher={launcher}", *LAUNCHER_ARGS[launcher], *TINY, *SWEEP]
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}  # offline
    proc = subprocess.run(
        [*EVAL, *args, f"hydra.sweep.dir={sweep_dir}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return sweep_dir, proc


@pytest.mark.parametrize("launcher", list(LAUNCHER_ARGS))
def test_a_2x2_debug_sweep_runs_on_the_launcher_and_merges(tmp_path, launcher):
    sweep_dir, proc = _sweep(tmp_path, launcher)
    jobs = sorted(p.parent for p in sweep_dir.glob("*/results.jsonl"))
    assert [job.name for job in jobs] == ["0", "1", "2", "3"]
    combos = set()
    for job in jobs:
        cfg = OmegaConf.load(job / ".hydra" / "config.yaml")
        rows = [json.loads(line) for line in (job / "results.jsonl").read_text().splitlines()]
        assert [(r["agent"], r["seed"], r["horizon"]) for r in rows] == [("window", *cfg.seeds, 20)]
        combos.add((cfg.agents.window.tracker.k, tuple(cfg.seeds)))
        log = (job / "eval.log").read_text()
        assert "episode 1/1 parcel h=20" in log and "leaderboard:" in log  # the run's log
    assert combos == {(2, (0,)), (2, (1,)), (4, (0,)), (4, (1,))}
    runs = wandb_runs(sweep_dir)  # one offline W&B run per job, all in the sweep's group
    assert sorted(r.path.parent.parent.name for r in runs) == ["0", "1", "2", "3"]
    assert {r.group for r in runs} == {sweep_dir.name} and {r.job_type for r in runs} == {"eval"}
    assert len({r.run_id for r in runs}) == 4 and all(r.exit_code == 0 for r in runs)
    assert all(list((job / "tensorboard").glob("events.out.tfevents.*")) for job in jobs)
    if launcher == "ray":  # the local instance ran the jobs in two worker processes
        assert len(set(re.findall(r"_run_job pid=(\d+)", proc.stdout + proc.stderr))) >= 2
    merged = subprocess.run(
        [sys.executable, "-m", "wmkit.evals.leaderboard", str(sweep_dir)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert merged.returncode == 0, merged.stderr[-3000:]
    assert "4 episodes from 4 files" in merged.stdout
    assert (sweep_dir / "leaderboard.md").exists()


def test_each_launcher_names_the_extra_that_installs_its_plugin(monkeypatch):
    assert launcher_hint(["experiment=debug"]) is None
    assert launcher_hint(["hydra/launcher=basic"]) is None  # Hydra's own
    assert launcher_hint(["hydra/launcher=nonesuch"]) is None  # Hydra lists its options
    for name in ("joblib", "ray", "submitit_local"):
        assert launcher_hint([f"hydra/launcher={name}"]) is None  # installed here (dev extra)
    for name, extra in [("joblib", "joblib"), ("ray", "ray"), ("submitit_local", "submitit")]:
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, LAUNCHERS[name][0], None)  # as if not installed
            hint = launcher_hint(["-m", f"hydra/launcher={name}", "seeds=[0]"])
        assert hint == f"hydra/launcher={name} needs: pip install 'wmkit[{extra}]'"


def test_wmkit_eval_stops_with_the_hint_before_hydra_runs(tmp_path):
    module = LAUNCHERS["ray"][0]
    code = (
        f"import sys; sys.modules[{module!r}] = None; "  # as if the plugin were not installed
        "from wmkit.scripts.eval import main; main()"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, "-m", "hydra/launcher=ray", *TINY],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "hydra/launcher=ray needs: pip install 'wmkit[ray]'" in proc.stderr  # brackets kept
    assert "Available options" not in proc.stderr  # Hydra's own answer never came
    assert not (tmp_path / "runs").exists()  # stopped before Hydra made anything
