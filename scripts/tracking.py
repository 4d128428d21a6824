"""Tracking for the entry points: the ``logger`` node, the run's identity, what the suite logs.

Every entry point (``wmkit-eval``, ``wmkit-collect``, ``wmkit-distill``,
``wmkit-train-value``) does the same three things:

1. :func:`pop_logger` takes the ``logger`` node (the Hydra group ``logger``) out of the
   resolved config and validates it, before the entry point validates the rest;
2. :func:`start_run` writes the resolved config with its secrets redacted to
   ``<run folder>/config.yaml`` (Hydra's ``.hydra/config.yaml`` keeps ``${oc.env:...}``
   placeholders, so it does not say which model or endpoint a run used) and opens the
   loggers, filed by the run's identity (:func:`run_info`: one run per sweep job,
   grouped by the sweep, ``job_type`` the entry point, named by the overrides the sweep
   varies);
3. it logs what it makes and leaves the ``with`` block, which finishes the run with
   its exit code.

``wmkit-eval`` also logs each episode as the suite finishes it (:func:`episode_logger`)
and the leaderboard (:func:`log_leaderboard`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from hydra.core.hydra_config import HydraConfig
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import ValidationError

from wmkit.evals.cells import episode_metrics as cell_metrics
from wmkit.evals.leaderboard import Summary, summarise
from wmkit.evals.stats import Aggregate
from wmkit.tracking import LoggerConfig, RunInfo, RunLogger, open_logger, redact

__all__ = [
    "CONFIG_FILE",
    "episode_logger",
    "episode_metrics",
    "leaderboard_table",
    "log_leaderboard",
    "pop_logger",
    "run_info",
    "start_run",
    "write_config",
]

CONFIG_FILE = "config.yaml"
"""In every run folder: the config the run used, resolved, secrets redacted."""


def pop_logger(resolved: Mapping[str, Any], app: str) -> tuple[LoggerConfig, dict[str, Any]]:
    """Split the validated ``logger`` node off a resolved config.

    Returns:
        The logger config and the rest of the config (a shallow copy, without ``logger``).

    Raises:
        SystemExit: the node is invalid (an unknown key, a bad value), saying where.
    """
    rest = dict(resolved)
    node = rest.pop("logger", None) or {}
    try:
        return LoggerConfig.model_validate(node), rest
    except ValidationError as err:
        raise SystemExit(f"{app}: invalid logger configuration (logger.*):\n{err}") from None


def run_info(job_type: str, folder: Path | None = None) -> RunInfo:
    """This job's identity: its folder, ``job_type``, the sweep as group, its overrides.

    Under Hydra the group is the sweep folder's name in a multirun (every job of a sweep
    shares it), else the run folder's; the name is the job's overrides (``hydra.*`` left
    out; in a sweep, those the sweep varies: :func:`_swept`), or the folder's name when
    there are none (``<sweep>/<job number>`` in a sweep), and the run writes in Hydra's output
    folder. Without Hydra (``run(compose(...))`` from Python) it writes in ``folder``,
    which names the group and the run.

    Raises:
        ValueError: no ``folder`` and no Hydra job.
    """
    if not HydraConfig.initialized():
        if folder is None:
            raise ValueError("no Hydra job to take the run folder from: give folder=")
        return RunInfo(dir=folder, job_type=job_type, group=folder.name, name=folder.name)
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    multirun = hydra_cfg.mode.name == "MULTIRUN"
    group = Path(hydra_cfg.sweep.dir).name if multirun else out.name
    overrides = [o for o in hydra_cfg.overrides.task if not o.startswith("hydra")]
    if multirun:
        overrides = _swept(overrides, Path(hydra_cfg.sweep.dir))
    name = ",".join(overrides) or (f"{group}/{out.name}" if multirun else out.name)
    return RunInfo(dir=out, job_type=job_type, group=group, name=name)


def _split(override: str) -> tuple[str, str]:
    key, _, value = override.partition("=")
    return key, value


def _swept(job: list[str], sweep_dir: Path) -> list[str]:
    """The overrides of a sweep job that its sweep varies (``k=2`` of ``k=2,20``).

    The sweep's own overrides are in ``<sweep dir>/multirun.yaml``; an override the job
    shares with every sibling, or a deletion (``~key``), tells nothing apart. Without
    that file, every override of the job.
    """
    try:
        given = dict(map(_split, OmegaConf.load(sweep_dir / "multirun.yaml").hydra.overrides.task))
    except (OSError, OmegaConfBaseException):
        return job
    return [o for o in job if not o.startswith("~") and given.get(_split(o)[0]) != _split(o)[1]]


def write_config(folder: Path, config: Mapping[str, Any]) -> Path:
    """Write ``config`` (already redacted) as ``<folder>/config.yaml``; return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CONFIG_FILE
    path.write_text(yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True))
    return path


def start_run(
    config: LoggerConfig,
    resolved: Mapping[str, Any],
    *,
    job_type: str,
    app: str,
    folder: Path | None = None,
) -> RunLogger:
    """Write ``config.yaml`` into this job's run folder and open its loggers.

    Args:
        config: the ``logger`` node (:func:`pop_logger`).
        resolved: the whole resolved config (``logger`` included); it is redacted
            (:func:`wmkit.tracking.redact`) before it is written or logged.
        job_type: the entry point (``eval``, ``collect``, ``distill``, ``train_value``).
        app: the command's name, for error messages.
        folder: the run folder when there is no Hydra job (:func:`run_info`).

    Raises:
        SystemExit: a backend's package is not installed (the message names the extra).
    """
    run = run_info(job_type, folder)
    public = redact(resolved)
    write_config(run.dir, public)
    try:
        return open_logger(config, run, public)
    except ModuleNotFoundError as err:
        raise SystemExit(f"{app}: {err}") from None


def episode_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """The per-episode numbers of a results row, as the tracking logs show them.

    The leaderboard's own (:func:`wmkit.evals.cells.episode_metrics`: ``drift``,
    ``drift_slope``, ``breakage``, ``stale_use``, ``score``, ``normalised_score``,
    ``confusion_<key>``, ``llm_<...>`` for an agent that called a language model
    (:data:`wmkit.evals.cells.LLM_METRICS`), ...), plus ``steps``; a ``failed`` row
    is ``{"failed": 1.0}``.
    """
    if "failed" in row:
        return {"failed": 1.0}
    out = cell_metrics(row)
    steps = row.get("steps")
    if isinstance(steps, int | float) and not isinstance(steps, bool) and math.isfinite(steps):
        out["steps"] = float(steps)
    return out


def episode_logger(logger: RunLogger) -> Callable[[dict[str, Any]], None]:
    """A ``run_suite(on_episode=...)`` callback that logs each finished episode.

    Metrics go under ``episode/<env>/h<horizon>/<agent>/``, at step n for the run's n-th
    episode (1, 2, ...).
    """
    count = itertools.count(1)

    def log(row: dict[str, Any]) -> None:
        where = f"{row['env']}/h{row['horizon']}/{row['agent']}"
        metrics = {f"{where}/{k}": v for k, v in episode_metrics(row).items()}
        logger.log_metrics(metrics, step=next(count), prefix="episode")

    return log


_AGGREGATE_PARTS = ("iqm", "mean", "ci_low", "ci_high")


def _number(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def leaderboard_table(summaries: Sequence[Summary]) -> tuple[list[str], list[list[Any]]]:
    """The leaderboard as one table: a row per (env, horizon, agent) summary.

    Columns: ``env``, ``horizon``, ``agent``, ``oracle``, ``privileged`` (its parts,
    comma-joined), ``seeds`` (finished episodes), ``failed``, ``half_life``, then for
    every aggregated metric of the summaries (:class:`~wmkit.evals.stats.Aggregate`
    values, in the order first seen) ``<metric>_iqm``, ``_mean``, ``_ci_low`` and
    ``_ci_high``. A metric a summary lacks, or could not measure, is None.
    """
    metrics: list[str] = []
    for s in summaries:
        metrics += [k for k, v in s.items() if isinstance(v, Aggregate) and k not in metrics]
    columns = ["env", "horizon", "agent", "oracle", "privileged", "seeds", "failed", "half_life"]
    columns += [f"{m}_{part}" for m in metrics for part in _AGGREGATE_PARTS]
    rows = []
    for s in summaries:
        row = [s["env"], s["horizon"], s["agent"], bool(s.get("oracle")),
               ",".join(s.get("privileged", ())), len(s.get("seeds", ())), s.get("failed", 0),
               _number(s.get("half_life"))]  # fmt: skip
        for m in metrics:
            agg = s.get(m)
            row += [_number(getattr(agg, p)) if agg else None for p in _AGGREGATE_PARTS]
        rows.append(row)
    return columns, rows


def log_leaderboard(
    logger: RunLogger, rows: Sequence[Mapping[str, Any]], paths: Mapping[str, Any]
) -> None:
    """Log the leaderboard of ``rows`` and the files ``write_leaderboard`` returned.

    The table (:func:`leaderboard_table`) as ``leaderboard``; each summary's IQMs as
    metrics under ``leaderboard/<env>/h<horizon>/<agent>/`` (the numbers a sweep's runs
    are compared by); every ``.png`` of ``paths`` as the image ``plots/<file stem>`` and
    every ``.html`` as the page ``pages/<file stem>`` (a value of ``paths`` may be a list
    of paths).
    """
    summaries = summarise(list(rows))
    columns, table = leaderboard_table(summaries)
    logger.log_table("leaderboard", columns, table)
    iqms = {
        f"{s['env']}/h{s['horizon']}/{s['agent']}/{k}": v.iqm
        for s in summaries
        for k, v in s.items()
        if isinstance(v, Aggregate)
    }
    logger.log_metrics(iqms, prefix="leaderboard")
    files = [Path(p) for v in paths.values() for p in (v if isinstance(v, list | tuple) else [v])]
    for path in files:
        if path.suffix == ".png":
            logger.log_image(f"plots/{path.stem}", path)
        elif path.suffix == ".html":
            logger.log_html(f"pages/{path.stem}", path)
