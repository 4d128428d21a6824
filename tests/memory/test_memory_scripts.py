"""Smoke runs of the memory scripts with tiny budgets (numbers are not asserted)."""

import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def run(script, *args, env_url=None):
    extra = ["--postgres-url", env_url] if env_url else []
    return subprocess.run(
        [sys.executable, str(SCRIPTS / script), *args, *extra],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_bench_memory_smoke(backend, location):
    url, _ = location
    name = "sqlite" if backend == "sqlite" else "postgres"
    out = run(
        "bench_memory.py",
        "--backend",
        name,
        "--sizes",
        "50,200",
        "--ops",
        "20",
        "--releases",
        "10",
        env_url=None if backend == "sqlite" else url,
    )
    assert out.returncode == 0, out.stderr
    assert f"governed memory vs raw SQLAlchemy — {name}" in out.stdout
    assert "× vs 50" in out.stdout and "200" in out.stdout


def test_fault_memory_smoke_and_bad_arguments(tmp_path):
    out = run("fault_memory.py", "--backend", "sqlite", "--trials", "2", "--ops", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "fault trials — sqlite (2 trials" in out.stdout
    assert "trials violating 'double'" in out.stdout
    bad = run("fault_memory.py", "--backend", "postgres", "--trials", "1", "--postgres-url", "")
    assert bad.returncode == 2 and "WMKIT_POSTGRES_URL" in bad.stderr
