"""``wmkit-distill``: distil rules from recorded trajectories, score them on held-out episodes.

For each data folder (``data/<env_name>`` as ``wmkit-collect`` writes it) the episodes
are split (``held_out`` of them, by ``split_seed``), rules are distilled from the rest
(``distiller=counting|llm``) and written to ``<out>/<env_name>/rules.jsonl``, and the
held-out transitions score them: predicted vs true delta, split action-driven /
event-driven, once with the observation (a tracker's case) and once without (a
simulator's), and the rewards the rule set's reward model predicts (``rewards``:
its groups, the mean squared error beside predicting 0, the share of nonzero rewards
whose sign it gets right). ``<out>/report.json`` holds every number; the table is printed.

Examples:
    wmkit-distill data_dirs=[data/vault]
    wmkit-distill data_dirs=[data/parcel,data/vault] counting.min_confidence=0.9
    wmkit-distill data_dirs=[data/vault] distiller=llm llm.max_scenes=8
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Literal

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.table import Table

from wmkit.knowledge.recording import load_trajectories
from wmkit.llm import ChatClient
from wmkit.scripts.entry import hydra_entry, run_console
from wmkit.scripts.tracking import pop_logger, start_run
from wmkit.tracking import RunLogger, flatten
from wmkit.trainers.distill import (
    CountingDistiller,
    LLMDistiller,
    evaluate,
    split_episodes,
    transitions_from_dataset,
)
from wmkit.trainers.rewards import reward_error

__all__ = ["DistillConfig", "distill", "log_report", "main", "run", "table"]

REPORT_FILE = "report.json"
RULES_FILE = "rules.jsonl"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CountingSettings(_Strict):
    """Settings of the counting distiller (see ``CountingDistiller``)."""

    min_support: int = Field(default=3, ge=1)
    min_confidence: float = Field(default=0.8, gt=0.5, le=1.0)
    max_conditions: int = Field(default=2, ge=0, le=3)
    max_features: int = Field(default=24, ge=1)
    open_values: int = Field(default=20, ge=1)


class LLMSettings(_Strict):
    """Settings of the LLM distiller and its endpoint (see ``LLMDistiller``)."""

    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    timeout: float = Field(default=60.0, gt=0)
    batch: int = Field(default=4, ge=1)
    max_scenes: int = Field(default=32, ge=1)
    max_repairs: int = Field(default=1, ge=0)
    calibrate: bool = True
    min_support: int = Field(default=3, ge=1)
    min_confidence: float = Field(default=0.8, gt=0.5, le=1.0)
    params: dict[str, Any] = Field(default_factory=dict)


class DistillConfig(_Strict):
    """The validated configuration of one ``wmkit-distill`` run."""

    data_dirs: list[str] = Field(min_length=1)
    distiller: Literal["counting", "llm"] = "counting"
    held_out: float = Field(default=0.25, ge=0.0, lt=1.0)
    split_seed: int = 0
    out_dir: str | None = None
    progress: bool = True
    counting: CountingSettings = CountingSettings()
    llm: LLMSettings = LLMSettings()


def _distiller(config: DistillConfig) -> CountingDistiller | LLMDistiller:
    if config.distiller == "counting":
        return CountingDistiller(**config.counting.model_dump())
    s = config.llm
    client = ChatClient(s.base_url, s.model, s.api_key, timeout=s.timeout)
    return LLMDistiller(
        client,
        batch=s.batch,
        max_scenes=s.max_scenes,
        max_repairs=s.max_repairs,
        calibrate=s.calibrate,
        min_support=s.min_support,
        min_confidence=s.min_confidence,
        params=s.params,
    )


def distill(config: DistillConfig, out_dir: str | Path, *, console: Console) -> dict[str, Any]:
    """Distil and score every data folder of ``config``; write rules and the report.

    Returns:
        The report: per env name, the split, the rule counts, the distiller's timings
        or statistics, and ``observation``/``command_only`` delta accuracies.

    Raises:
        ValueError: a data folder holds no episodes, or two share an env name.
    """
    out = Path(out_dir)
    report: dict[str, Any] = {}
    for data_dir in config.data_dirs:
        ds = load_trajectories(data_dir)
        if len(ds) == 0:
            raise ValueError(f"{data_dir} holds no recorded episodes: run wmkit-collect first")
        transitions = transitions_from_dataset(ds)
        env = transitions[0].env
        if env in report:
            raise ValueError(f"two data folders hold env {env!r}; give each env once")
        train, test = split_episodes(transitions, config.held_out, seed=config.split_seed)
        if config.progress:
            console.print(f"{env}: distilling from {len(train)} transitions ({config.distiller})")
        distiller = _distiller(config)
        start = time.perf_counter()
        rules = distiller.fit(train)
        fit_s = time.perf_counter() - start
        path = rules.save(out / env / RULES_FILE)
        scores = {
            "observation": evaluate(rules, test, observation=True),
            "command_only": evaluate(rules, test, observation=False),
        }
        entry: dict[str, Any] = {
            "data_dir": str(data_dir),
            "rules_path": str(path),
            "episodes": {
                "train": len({t.episode for t in train}),
                "held_out": len({t.episode for t in test}),
            },
            "transitions": {"train": len(train), "held_out": len(test)},
            "rules": {
                "command": sum(r.source == "command" and r.predicts for r in rules),
                "failure": sum(not r.predicts for r in rules),
                "observation": sum(r.source == "observation" for r in rules),
            },
            "fit_s": round(fit_s, 3),
            **{k: v.as_dict() for k, v in scores.items()},
            "rewards": {"groups": len(rules.rewards), **_clean(reward_error(rules, test))},
        }
        if isinstance(distiller, CountingDistiller):
            entry["timings"] = {k: round(v, 4) for k, v in distiller.timings.items()}
        else:
            stats = distiller.stats
            entry["llm"] = {
                "requests": stats.requests, "ok": stats.ok, "repaired": stats.repaired,
                "failed": stats.failed, "request_errors": stats.request_errors,
                "rejections": dict(stats.rejections), "unparsed": stats.unparsed,
                "proposed": stats.proposed, "refuted": stats.refuted, "kept": stats.kept,
            }  # fmt: skip
        report[env] = entry
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return report


def _clean(numbers: dict[str, float | int]) -> dict[str, float | int | None]:
    """JSON-ready numbers: NaN as None, floats rounded to 6 places."""
    return {
        k: None if isinstance(v, float) and math.isnan(v) else round(v, 6)
        for k, v in numbers.items()
    }


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def table(report: dict[str, Any]) -> Table:
    """The report as a table: one row per env and mode.

    Modes: ``obs`` (with the observation) and ``cmd`` (the command alone). ``=`` is exact
    match, ``=|chg`` exact match on the transitions whose true part changed (their
    count in brackets), F1 over facts.
    """
    grid = Table(title="held-out delta accuracy, action-driven / event-driven")
    for name in (
        "env",
        "mode",
        "rules",
        "n",
        "act =",
        "act =|chg",
        "act F1",
        "evt =",
        "evt =|chg",
        "evt F1",
    ):
        grid.add_column(name, justify="left" if name in ("env", "mode") else "right")
    for env, entry in report.items():
        rules = sum(entry["rules"].values())
        for mode, label in (("observation", "obs"), ("command_only", "cmd")):
            acc = entry[mode]
            a, e = acc["action"], acc["event"]
            grid.add_row(
                env, label, str(rules), str(acc["transitions"]),
                _cell(a["exact"]), f"{_cell(a['exact_changed'])} ({a['changed']})", _cell(a["f1"]),
                _cell(e["exact"]), f"{_cell(e['exact_changed'])} ({e['changed']})", _cell(e["f1"]),
            )  # fmt: skip
    return grid


def log_report(logger: RunLogger, report: dict[str, Any], out_dir: str | Path) -> None:
    """Log a :func:`distill` report: each env's numbers and its rules.

    The numbers of ``report[env]`` go under ``distill/<env>/`` (``observation/action/f1``,
    ``rules/command``, ``fit_s``, ...), and ``<out_dir>/<env>/rules.jsonl`` is logged
    as the artifact ``rules-<env>`` (type ``rules``).
    """
    for env, entry in report.items():
        logger.log_metrics(flatten(entry), prefix=f"distill/{env}")
        logger.log_artifact(f"rules-{env}", "rules", Path(out_dir) / env / RULES_FILE)


def run(cfg: DictConfig) -> dict[str, Any]:
    """Validate the composed config, distil, log, and print the table."""
    try:
        resolved = OmegaConf.to_container(cfg, resolve=True)
        logger_config, raw = pop_logger(resolved, "wmkit-distill")
        config = DistillConfig.model_validate(raw)
    except (ValidationError, OmegaConfBaseException) as err:  # e.g. data_dirs not given
        raise SystemExit(f"wmkit-distill: invalid configuration:\n{err}") from None
    console = run_console(stderr=True)
    out = Path(config.out_dir) if config.out_dir else Path(HydraConfig.get().runtime.output_dir)
    tracked = start_run(
        logger_config, resolved, job_type="distill", app="wmkit-distill", folder=out
    )
    with tracked as logger:
        try:
            report = distill(config, out, console=console)
        except (ValueError, FileNotFoundError) as err:
            raise SystemExit(f"wmkit-distill: {err}") from None
        log_report(logger, report, out)
    run_console(width=120).print(table(report))
    console.print(f"rules and report: {out}", markup=False)
    return report


@hydra_entry("distill")
def main(cfg: DictConfig) -> None:
    """Distil rules and score them (see ``wmkit-distill --help``)."""
    run(cfg)


if __name__ == "__main__":
    main()
