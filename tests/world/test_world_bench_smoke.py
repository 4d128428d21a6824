import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_world.py"


def test_bench_world_smoke_runs_with_a_tiny_budget():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "50,200", "--ops", "20", "--repeat", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    for row in ("registry register+lookup", "graph expire (per edge)", "timeline schedule+drain"):
        assert row in out
    assert "× vs 50" in out
