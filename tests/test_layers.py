"""The import contracts: import-linter catches an upward import; the project keeps them.

CI runs them with ``python3 .ci/lint_imports.py``, over the package laid out as it
installs (``envs/`` as ``wmkit/envs/``, ...), which these tests use too.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
from importlinter import cli

REPO = Path(__file__).resolve().parents[1]
EXIT_OK, EXIT_BROKEN = 0, 1


def _load_ci_linter():
    path = REPO / ".ci" / "lint_imports.py"
    spec = importlib.util.spec_from_file_location("ci_lint_imports", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ci = _load_ci_linter()


# --- import-linter's API on a small fixture package ---------------------------------


def _fixture(root: Path, name: str, *, upward: bool) -> Path:
    """A package ``name`` with layers ``high`` > ``low``; ``low`` imports ``high`` if upward."""
    package = root / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "high.py").write_text(f"from {name} import low\n\nVALUE = low.VALUE + 1\n")
    low = f"import {name}.high  # upward: the bottom layer reaches up\n" if upward else ""
    (package / "low.py").write_text(low + "VALUE = 1\n")
    config = root / "pyproject.toml"
    config.write_text(
        textwrap.dedent(
            f"""
            [tool.importlinter]
            root_packages = ["{name}"]

            [[tool.importlinter.contracts]]
            name = "{name} layers"
            type = "layers"
            layers = ["{name}.high", "{name}.low"]
            """
        )
    )
    return config


@pytest.mark.parametrize(("upward", "status"), [(True, EXIT_BROKEN), (False, EXIT_OK)])
def test_the_layers_contract_catches_an_upward_import(
    tmp_path, monkeypatch, capsys, upward, status
):
    name = f"layers_fixture_{'up' if upward else 'down'}"
    config = _fixture(tmp_path, name, upward=upward)
    monkeypatch.chdir(tmp_path)  # lint-imports puts the working folder on sys.path
    monkeypatch.setattr(sys, "path", list(sys.path))  # and leaves it there: undo after
    assert cli.lint_imports(config_filename=str(config), no_cache=True) == status
    report = capsys.readouterr().out
    if upward:
        assert f"{name} layers BROKEN" in report
        assert f"{name}.low -> {name}.high (l.1)" in report
    else:
        assert f"{name} layers KEPT" in report


# --- the project's own contracts ------------------------------------------------------


def test_the_project_keeps_its_contracts():
    done = ci.lint(REPO)
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "Contracts: 2 kept, 0 broken." in done.stdout


def test_the_lint_sees_the_packages_installed_outside_wmkit(tmp_path):
    # Run from the repository, import-linter would see wmkit/ alone: the copy is laid
    # out as the package installs, envs/ as wmkit/envs/ and so on.
    tree = ci.installed_layout(REPO, tmp_path)
    for module in (
        "envs/vault/naive_rules.py",
        "evals/suite.py",
        "trainers/types.py",
        "scripts/eval.py",
    ):
        assert (tree / "wmkit" / module).is_file(), module
    assert not (tree / "envs").exists()


@pytest.mark.parametrize(
    ("importer", "imported", "broken"),
    [
        ("wmkit/search/tree.py", "wmkit.envs.vault.naive_rules", "wmkit.search.tree -> wmkit.envs"),
        ("wmkit/world/types.py", "wmkit.agents.types", "wmkit.world.types -> wmkit.agents"),
        ("wmkit/memory/store.py", "wmkit.world.types", "wmkit.memory.store -> wmkit.world"),
        (
            "envs/vault/naive_rules.py",
            "wmkit.evals.suite",
            "wmkit.envs.vault.naive_rules -> wmkit.evals",
        ),
        # search.search imports the tree: the tree importing it back is a cycle.
        ("wmkit/search/tree.py", "wmkit.search.search", "No cycles are allowed in wmkit.search"),
    ],
)
def test_the_project_contracts_catch_an_upward_import_or_a_cycle(
    tmp_path, importer, imported, broken
):
    tree = ci.installed_layout(REPO, tmp_path)
    module = tree / "wmkit" / importer.removeprefix("wmkit/")
    module.write_text(module.read_text() + f"\nimport {imported}  # the import under test\n")
    done = ci.lint_layout(tree, REPO / "pyproject.toml")
    assert done.returncode == EXIT_BROKEN, done.stdout
    assert "BROKEN" in done.stdout and broken in done.stdout  # named, with the import
