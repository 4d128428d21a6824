"""``wmkit-train-value``: train the search's value network offline from recorded trajectories.

Every step of the data folders (``data/<env_name>`` as ``wmkit-collect`` writes them) is
an example: what the agent saw there, and the discounted return-to-go of its episode
from that step. Episodes are split into train and validation (``held_out`` of them, by
``split_seed``); the network is trained for ``epochs`` and written to
``<out>/value.pt``, with ``<out>/last.pt`` after every epoch so that a rerun with the
same ``out_dir`` resumes where it stopped. ``<out>/report.json`` holds every number; the
table printed compares the validation MSE with the constant predictor's (the train
mean) and gives the Spearman rank correlation.

Examples:
    wmkit-train-value data_dirs=[data/vault]
    wmkit-train-value data_dirs=[data/vault,data/parcel] epochs=20 out_dir=runs/value/mix
    wmkit-train-value data_dirs=[data/vault] device=cpu threads=1 features.actions=false
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import ValidationError
from rich.table import Table

from wmkit.scripts.entry import hydra_entry, run_console
from wmkit.scripts.tracking import pop_logger, start_run
from wmkit.search.value_net import CheckpointError
from wmkit.tracking import RunLogger, flatten
from wmkit.trainers.value import VALUE_FILE, TrainValueConfig, train_value

__all__ = ["log_report", "main", "run", "table"]


def _cell(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(report: dict[str, Any]) -> Table:
    """The report as a table: validation scores overall and per env.

    ``mse`` is the network's, ``const`` the train-mean predictor's, ``skill`` is
    ``1 - mse / const`` (above 0: better than the constant), ``rho`` Spearman's.
    With a policy head, a last row gives the policy's validation cross-entropy against
    the search's visits (``mse`` column), the uniform prior's (``const``), its skill
    and, in ``rho``'s place, how often its top command is the most visited one.
    """
    grid = Table(title="validation: value network vs the constant (train-mean) predictor")
    for name in ("envs", "steps", "mse", "const", "skill", "rho"):
        grid.add_column(name, justify="left" if name == "envs" else "right")
    rows = [("all", report["eval"]), *report["eval"]["per_env"].items()]
    for name, s in rows:
        grid.add_row(
            name, str(s["examples"]), _cell(s["mse"]), _cell(s["constant_mse"]),
            _cell(s["skill"], 3), _cell(s["spearman"], 3),
        )  # fmt: skip
    policy = report["eval"].get("policy")
    if policy:
        grid.add_row(
            "policy (CE, uniform, skill, top)", str(policy["examples"]),
            _cell(policy["cross_entropy"]), _cell(policy["uniform_cross_entropy"]),
            _cell(policy["skill"], 3), _cell(policy["top_agrees"], 3),
        )  # fmt: skip
    return grid


def log_report(
    logger: RunLogger,
    report: dict[str, Any],
    out_dir: str | Path,
    *,
    prefix: str = "train_value",
    artifact: str = "value",
) -> None:
    """Log a :func:`~wmkit.trainers.value.train_value` report: its scores and the network.

    The final validation and training scores (``eval/mse``, ``eval/skill``,
    ``eval/spearman``, ``eval/per_env/<env>/...``, ``train/...``) go under
    ``<prefix>/final/``, and ``<out_dir>/value.pt`` is logged as the artifact
    ``artifact`` (type ``model``).
    """
    scores = {"eval": report["eval"], "train": report["train"]}
    logger.log_metrics(flatten(scores), prefix=f"{prefix}/final")
    logger.log_artifact(artifact, "model", Path(out_dir) / VALUE_FILE)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Validate the composed config, train, and print the table."""
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True)
        logger_config, raw = pop_logger(resolved, "wmkit-train-value")
        config = TrainValueConfig.model_validate(raw)
    except (ValidationError, OmegaConfBaseException) as err:  # e.g. data_dirs not given
        raise SystemExit(f"wmkit-train-value: invalid configuration:\n{err}") from None
    console = run_console(stderr=True)
    out = Path(config.out_dir) if config.out_dir else Path(HydraConfig.get().runtime.output_dir)
    tracked = start_run(
        logger_config, resolved, job_type="train_value", app="wmkit-train-value", folder=out
    )
    with tracked as logger:
        steps = functools.partial(logger.log_metrics, prefix="train_value")
        try:
            report = train_value(config, out, console=console, log_fn=steps)
        except (ValueError, FileNotFoundError) as err:  # CheckpointError is a ValueError
            kind = "checkpoint" if isinstance(err, CheckpointError) else "data"
            raise SystemExit(f"wmkit-train-value: {kind} problem: {err}") from None
        log_report(logger, report, out)
    run_console(width=120).print(table(report))
    console.print(f"value network: {report['value_path']} (report.json beside it)", markup=False)
    return report


@hydra_entry("train_value")
def main(cfg: DictConfig) -> None:
    """Train the value network (see ``wmkit-train-value --help``)."""
    run(cfg)


if __name__ == "__main__":
    main()
