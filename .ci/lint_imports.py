"""Check the import-linter contracts of pyproject.toml against the package as it installs.

``envs/``, ``trainers/``, ``evals/``, ``scripts/`` and ``configs/`` sit at the top of the
repository but install as ``wmkit.envs``, ... (``[tool.setuptools.package-dir]``).
import-linter (grimp) finds a package's modules by walking its folder, so run from the
repository it would see ``wmkit/`` alone and silently drop every import of
``wmkit.envs`` and the rest (an import of a module it cannot find is not in its graph):
the contracts about them could never fail. This script copies the sources into a
temporary folder laid out as they install (``wmkit/envs/...``), runs ``lint-imports``
there with the repository's pyproject.toml, and exits with its status.

Usage: ``python3 .ci/lint_imports.py [ROOT]`` (ROOT: a repository or a copy of one;
default: this script's repository).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest brings tomli on 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def installed_layout(root: Path, dest: Path) -> Path:
    """Copy the ``*.py`` files of ``root`` into ``dest`` as they install; return ``dest``.

    Every ``package-dir`` entry of ``root/pyproject.toml`` is copied, subfolders
    included, to the folder its dotted name installs in (``"wmkit.envs" = "envs"``:
    ``root/envs/x.py`` -> ``dest/wmkit/envs/x.py``).

    Raises:
        KeyError: the pyproject has no ``[tool.setuptools.package-dir]``.
    """
    with (root / "pyproject.toml").open("rb") as f:
        package_dirs = tomllib.load(f)["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(package_dirs.items()):
        source, target = root / folder, dest.joinpath(*package.split("."))
        for path in sorted(source.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            out = target / path.relative_to(source)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out)
    return dest


def lint_layout(tree: Path, config: Path) -> subprocess.CompletedProcess[str]:
    """Run ``lint-imports`` with the contracts of ``config`` over the sources in ``tree``.

    ``tree`` holds the packages as they install (:func:`installed_layout`); ``config``
    is copied into it as ``pyproject.toml``, where every import-linter 2 looks.
    ``lint-imports`` puts its working folder first on ``sys.path``, so run in ``tree``
    the copy is what ``import wmkit`` finds, not the editable install.
    """
    shutil.copyfile(config, tree / "pyproject.toml")
    command = ["lint-imports", "--no-cache"]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """Lint the repository ``root`` as it installs, with its own contracts."""
    with tempfile.TemporaryDirectory(prefix="wmkit-lint-") as tmp:
        return lint_layout(installed_layout(root, Path(tmp)), root / "pyproject.toml")


def main(argv: list[str] | None = None) -> int:
    """Lint ROOT (default: this repository); print the report; return its exit status."""
    args = sys.argv[1:] if argv is None else argv
    done = lint(Path(args[0]).resolve() if args else REPO)
    print(done.stdout, end="")
    print(done.stderr, end="", file=sys.stderr)
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
