"""The distribution installs one top-level package, and the library stays layered."""

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_holds_only_the_wmkit_namespace(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        check=True,
    )
    (wheel,) = tmp_path.glob("wmkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/", 1)[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"wmkit"}
    for sub in ("envs", "evals", "trainers", "scripts", "configs"):
        assert f"wmkit/{sub}/__init__.py" in names
    assert "wmkit/configs/eval.yaml" in names
    assert "wmkit/configs/agents/window.yaml" in names


def test_library_never_imports_the_outer_packages():
    outer = ("wmkit.envs", "wmkit.evals", "wmkit.trainers", "wmkit.scripts")
    offenders = []
    for path in (ROOT / "wmkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path}: {n}" for n in names if n.startswith(outer)]
    assert offenders == []
