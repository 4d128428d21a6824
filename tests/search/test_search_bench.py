"""Smoke runs of scripts/bench_search.py with tiny budgets (the numbers are not checked)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

BENCH = [sys.executable, "-m", "wmkit.scripts.bench_search"]


def run(*args: str, games_dir: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "WMKIT_GAMES_DIR"}
    if games_dir:
        env["WMKIT_GAMES_DIR"] = games_dir
    done = subprocess.run(
        [*BENCH, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_bench_runs_without_games():
    out = run(
        "--sims", "30", "--repeats", "1", "--mem-sizes", "300,600", "--cap-sims", "500",
        "--wide-actions", "200", "--wide-sims", "20",
    )  # fmt: skip
    assert "Vault-v0" in out and "search sims/s" in out
    assert "Wide" in out and "PUCT search, 200" in out
    assert "600 nodes" in out and "cap 300" in out
    assert "skipped" in out  # the Jericho rows say why they are missing


@pytest.mark.slow
@pytest.mark.jericho
def test_bench_runs_on_a_jericho_game(games_dir):
    out = run(
        "--sims", "20", "--repeats", "1", "--valid-sims", "1", "--copy-sims", "3",
        "--mem-sizes", "", games_dir=str(games_dir),
    )  # fmt: skip
    assert "905.z5" in out and "valid actions" in out and "speedup" in out
