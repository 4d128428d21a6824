"""What every Hydra entry point shares (``wmkit-eval``, -collect, -distill, -train-value).

:func:`hydra_entry` replaces ``@hydra.main``. Before Hydra runs it checks that a
``hydra/launcher=X`` on the command line names a launcher whose plugin is installed
(a plain install answers Hydra's "Available options in 'hydra/launcher': basic"; this
says which extra brings it). Around the task it

- copies what the rich console prints into the job's log file (``<run>/<job>.log``,
  Hydra's ``file`` handler): a :func:`run_console` logs every line it prints to the
  ``wmkit.console`` logger, which writes to the job's file handlers only (the terminal
  has the console's own output). The library's own loggers (``wmkit.evals.suite``: a
  line per episode) reach the file at INFO and the terminal from WARNING up
  (``configs/hydra/job_logging/wmkit.yaml``);
- logs an error the entry point explained (``SystemExit("wmkit-eval: ...")``) and, when
  the run wrote nothing but Hydra's own files (``.hydra/``, the log) and the entry
  point's ``scratch`` files (and the resolved ``config.yaml``), removes the run folder
  Hydra made for it: a mistyped override leaves no empty run behind.

Exit codes (:data:`EXIT_CODES`; the same for every entry point that plays episodes):
0 every episode finished; 1 a usage, configuration or run error (the message says
which); 2 every episode of the run failed; 3 some episodes failed (the others are
in the results); 4 the LLM budget (``llm.budget``) was spent before every episode was
played (the leaderboard is of those that finished; the same command with a larger
budget plays the rest), which goes before 2 and 3. In a sweep (``-m``) a job whose
episodes all failed is a failed job: the launcher runs the others and Hydra exits 1 at
the end; a job stopped by its budget says so and ends normally.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import logging
import os
import shutil
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig
from rich.console import Console
from rich.control import Control

from wmkit.scripts.tracking import CONFIG_FILE

__all__ = [
    "CONSOLE_LOGGER",
    "EXIT_ALL_FAILED",
    "EXIT_BUDGET_SPENT",
    "EXIT_CODES",
    "EXIT_ERROR",
    "EXIT_OK",
    "EXIT_SOME_FAILED",
    "LAUNCHERS",
    "EpisodesFailed",
    "check_budget",
    "check_failures",
    "hydra_entry",
    "launcher_hint",
    "run_console",
]

EXIT_OK, EXIT_ERROR, EXIT_ALL_FAILED, EXIT_SOME_FAILED, EXIT_BUDGET_SPENT = 0, 1, 2, 3, 4
EXIT_CODES = {
    EXIT_OK: "every episode finished",
    EXIT_ERROR: "a usage, configuration or run error (the message says which)",
    EXIT_ALL_FAILED: "every episode of the run failed",
    EXIT_SOME_FAILED: "some episodes failed; the others are in the results",
    EXIT_BUDGET_SPENT: "the LLM budget was spent before every episode was played; "
    "rerun with a larger one to go on",
}

LAUNCHERS = {
    "joblib": ("hydra_plugins.hydra_joblib_launcher", "joblib"),
    "ray": ("hydra_plugins.hydra_ray_launcher", "ray"),
    "ray_aws": ("hydra_plugins.hydra_ray_launcher", "ray"),
    "submitit_local": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
    "submitit_slurm": ("hydra_plugins.hydra_submitit_launcher", "submitit"),
}
"""``hydra/launcher`` option -> (the plugin's module, the wmkit extra that installs it).
``basic`` is Hydra's own."""

CONSOLE_LOGGER = "wmkit.console"
"""The logger :func:`run_console` copies its lines to (the job log file takes it)."""

_LOG = logging.getLogger(CONSOLE_LOGGER)
_LAUNCHER_KEYS = ("hydra/launcher=", "override hydra/launcher=")


def launcher_hint(argv: Sequence[str]) -> str | None:
    """The install hint for a ``hydra/launcher=X`` in ``argv`` whose plugin is missing.

    Returns None when no launcher is chosen, the chosen one is installed, or it is not
    one wmkit knows (Hydra then lists the options it has).
    """
    for arg in argv:
        name = next((arg.split("=", 1)[1] for k in _LAUNCHER_KEYS if arg.startswith(k)), None)
        if name is None or name not in LAUNCHERS:
            continue
        module, extra = LAUNCHERS[name]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"hydra/launcher={name} needs: pip install 'wmkit[{extra}]'"
    return None


class _LoggedConsole(Console):
    """A rich console that also logs each printed line, as plain text, at INFO."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        super().print(*objects, **kwargs)
        if not objects or all(isinstance(o, Control) for o in objects):
            return  # a live display's refresh, not a line of the run's
        if not _LOG.isEnabledFor(logging.INFO):
            return
        plain = Console(
            file=io.StringIO(),
            width=kwargs.pop("width", None) or self.width,
            color_system=None,
            markup=self._markup,
            emoji=False,
            highlight=False,
            soft_wrap=True,
        )
        kwargs.pop("soft_wrap", None)
        plain.print(*objects, soft_wrap=True, **kwargs)
        for line in plain.file.getvalue().rstrip("\n").splitlines():
            _LOG.info(line.rstrip())


def run_console(**kwargs: Any) -> Console:
    """A rich :class:`~rich.console.Console` (``kwargs`` as for it) whose lines are logged.

    Every line it prints goes to the :data:`CONSOLE_LOGGER` logger too, as plain text:
    in a Hydra run, into the job's log file (``eval.log``).
    """
    return _LoggedConsole(**kwargs)


class EpisodesFailed(RuntimeError):
    """Every episode of a sweep job failed: the job fails, the sweep goes on."""


def check_failures(app: str, total: int, failed: int, console: Console) -> None:
    """Say how many episodes failed, and end the run with its exit code if any did.

    Args:
        app: the entry point's name, for the message.
        total: the run's episodes (finished or failed, resumed ones included).
        failed: how many of them failed.
        console: where the summary goes.

    Raises:
        SystemExit: :data:`EXIT_ALL_FAILED` or :data:`EXIT_SOME_FAILED` (a single run).
        EpisodesFailed: a sweep job whose episodes all failed.
    """
    if not failed:
        return
    if failed < total:
        console.print(
            f"{app}: {failed} of {total} episodes failed (their rows say why); "
            f"exit code {EXIT_SOME_FAILED}",
            style="yellow",
            markup=False,
        )
        if not _multirun():
            raise SystemExit(EXIT_SOME_FAILED)
        return
    message = f"{app}: every episode failed ({failed} of {total}; their rows say why)"
    console.print(message, style="red", markup=False)
    if _multirun():
        raise EpisodesFailed(message)
    raise SystemExit(EXIT_ALL_FAILED)


def check_budget(app: str, message: str | None, console: Console) -> None:
    """End a run its LLM budget stopped with :data:`EXIT_BUDGET_SPENT`, saying why.

    Args:
        app: the entry point's name, for the message.
        message: what the suite said it stopped on
            (:attr:`wmkit.evals.suite.BudgetSpent.message`); None: it was not stopped.
        console: where the line goes.

    Raises:
        SystemExit: :data:`EXIT_BUDGET_SPENT`, unless in a sweep (the job ends normally).
    """
    if message is None:
        return
    console.print(f"{app}: {message}; exit code {EXIT_BUDGET_SPENT}", style="yellow", markup=False)
    if not _multirun():
        raise SystemExit(EXIT_BUDGET_SPENT)


def _multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode.name == "MULTIRUN"


def _attach_console_log() -> list[logging.Handler]:
    """Hand the console's logger the job's log file handlers (the root's file handlers).

    It does not propagate: the terminal shows the console itself, not its log records.
    """
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    _LOG.propagate = False
    _LOG.setLevel(logging.INFO)
    for handler in files:
        _LOG.addHandler(handler)
    return files


def _remove_if_empty(out: Path, job_name: str, scratch: Iterable[str]) -> None:
    """Remove the run folder ``out`` if it holds only Hydra's files, the config and ``scratch``.

    Hydra's: ``.hydra/`` (its three files) and the job log; the config: the resolved
    ``config.yaml`` every run writes first (:mod:`wmkit.scripts.tracking`).
    """
    ours = {".hydra", f"{job_name}.log", CONFIG_FILE, *scratch}
    try:
        entries = set(os.listdir(out))
        hydra_files = set(os.listdir(out / ".hydra")) if (out / ".hydra").is_dir() else set()
    except OSError:
        return
    if not entries <= ours or not hydra_files <= {"config.yaml", "hydra.yaml", "overrides.yaml"}:
        return
    log = logging.getLogger()
    for handler in list(log.handlers):
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).parent == out:
            handler.close()
    shutil.rmtree(out, ignore_errors=True)


def hydra_entry(
    config_name: str, *, scratch: Iterable[str] = ()
) -> Callable[[Callable[[DictConfig], Any]], Callable[[], None]]:
    """``@hydra.main`` over ``pkg://wmkit.configs`` with the checks in the module doc.

    Args:
        config_name: the primary config (``eval`` for ``configs/eval.yaml``).
        scratch: files the entry point writes before its work starts (``pipeline.json``):
            a run that stops on an error with nothing else written is removed whole.

    Returns:
        A decorator of the task function; the result is the console script's ``main()``.
    """
    scratch = tuple(scratch)

    def decorate(task: Callable[[DictConfig], Any]) -> Callable[[], None]:
        @functools.wraps(task)
        def job(cfg: DictConfig) -> Any:
            handlers = _attach_console_log()
            try:
                return task(cfg)
            except SystemExit as stop:
                if isinstance(stop.code, str):  # an error the entry point explained
                    _LOG.error(stop.code)
                    hydra_cfg = HydraConfig.get()
                    out = Path(hydra_cfg.runtime.output_dir)
                    _remove_if_empty(out, hydra_cfg.job.name, scratch)
                raise
            finally:
                for handler in handlers:
                    _LOG.removeHandler(handler)

        hydra_main = hydra.main(
            version_base="1.3", config_path="pkg://wmkit.configs", config_name=config_name
        )(job)

        @functools.wraps(task)
        def main() -> None:
            hint = launcher_hint(sys.argv[1:])
            if hint is not None:
                print(hint, file=sys.stderr)
                raise SystemExit(EXIT_ERROR)
            hydra_main()

        return main

    return decorate
