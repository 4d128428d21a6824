"""Expert iteration: rounds of search, then training on what the search found.

With ``pipeline.expert_iteration`` set (:class:`ExpertIterationStage`; the preset
``wmkit-eval experiment=expert_iteration``), the main job's training stages go on past
the first network (trained on ``pipeline.collect``'s episodes) for ``rounds`` rounds,
per env whose agents need a ``checkpoint``; round ``r``:

1. ``collect@r``: the searching agents of ``pipeline.expert_iteration.agents`` (their
   value function takes the checkpoint: the network values the leaves and, with a
   policy head, gives the prior) play ``train_seeds`` with the network of round
   ``r - 1``; every step's root visit counts are recorded (the policy target);
2. ``train_value@r``: a network trained on the first episodes and every round's so far
   (value: the Monte-Carlo return; policy: the visit distribution);
3. ``evaluate@r`` (with ``eval_seeds``): the same agents with round ``r``'s network on
   held-out seeds (round 0: the first network), their scores kept.

Each is a cached stage (:mod:`wmkit.scripts.stages`), so a run stopped in round 3
resumes at round 3, and the agents of the suite get the last round's network. The run
folder gets ``expert_iteration.json`` (per env and round: the scores on the training
seeds and on ``eval_seeds``, the value's and the policy's validation scores, the loss
of every epoch) and ``expert_iteration.png`` (score and losses per round).

``python -m wmkit.scripts.expert_iteration <run folder>`` prints that table again and
redraws the plot (from ``pipeline.json`` and the stage folders).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from rich.console import Console
from rich.table import Table

from wmkit.evals.suite import AgentSpec
from wmkit.knowledge.recording import load_episodes
from wmkit.scripts.stages import StageRun
from wmkit.tracking import RunLogger

__all__ = [
    "PLOT_FILE",
    "REPORT_FILE",
    "ExpertIterationStage",
    "log_rounds",
    "main",
    "round_of",
    "rounds_report",
    "rounds_table",
    "write_rounds",
]

REPORT_FILE = "expert_iteration.json"
PLOT_FILE = "expert_iteration.png"


class ExpertIterationStage(BaseModel):
    """The ``pipeline.expert_iteration`` section: who searches, for how many rounds.

    Attributes:
        agents: the searching agents that collect each round; their value function
            takes the env's network (``needs: {value: [checkpoint]}``), and every env
            whose agents need a checkpoint must be played by one of them.
        rounds: rounds after the first network, >= 0 (0: none).
        horizons: episode lengths of the rounds' collection (on ``train_seeds``).
        eval_seeds: held-out seeds each round's network is scored on with the same
            agents and horizons (never ``train_seeds``; empty: the training seeds'
            scores only).
        budget_scale: the rounds' collection searches with this many times the
            agents' own simulations a step (the expert: the network's search given more
            time than it has when evaluated); evaluation uses their own budget.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    agents: dict[str, AgentSpec] = Field(min_length=1)
    rounds: int = Field(default=2, ge=0)
    horizons: list[int] = Field(min_length=1)
    eval_seeds: list[int] = Field(default_factory=list)
    budget_scale: int = Field(default=1, ge=1)

    @field_validator("agents")
    @classmethod
    def _takes_the_network(cls, agents: dict[str, AgentSpec]) -> dict[str, AgentSpec]:
        for name, spec in agents.items():
            budget = spec.policy.get("budget")
            if not (isinstance(budget, dict) and isinstance(budget.get("simulations"), int)):
                raise ValueError(
                    f"expert-iteration agent {name!r} has no policy.budget.simulations: "
                    "it must be a searching policy"
                )
            if "checkpoint" not in spec.needs.value:
                raise ValueError(
                    f"expert-iteration agent {name!r} does not take the network (its "
                    "needs.value lacks checkpoint): it would not search with what is trained"
                )
        return agents


    def collecting(self) -> dict[str, AgentSpec]:
        """The agents as the rounds' collection plays them: ``budget_scale`` x simulations."""
        out = {}
        for name, spec in self.agents.items():
            policy = dict(spec.policy)
            budget = dict(policy["budget"])
            budget["simulations"] *= self.budget_scale
            policy["budget"] = budget
            out[name] = spec.model_copy(update={"policy": policy})
        return out


def round_of(stage: str) -> int | None:
    """The round of a stage name (``train_value@2`` -> 2; ``train_value`` -> 0)."""
    name, _, number = stage.partition("@")
    if name not in ("collect", "train_value", "evaluate"):
        return None
    return int(number) if number else 0


def _scores(folder: Path, env: str) -> list[float]:
    data = folder / env
    if not data.is_dir():
        return []
    return [float(s) for s in load_episodes(data)["score"] if s is not None]


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def rounds_report(stages: Sequence[StageRun]) -> dict[str, list[dict[str, Any]]]:
    """Per env, one row per round from a run's stages (base collect and network = round 0).

    Each row: ``round``; ``train_score`` (mean score of the round's collected episodes:
    round 0's are ``pipeline.collect``'s agents', a baseline, not a search) and
    ``train_scores``; ``eval_score`` and ``eval_scores`` (``eval_seeds``, if any); the
    validation ``value`` scores (MSE, constant MSE, skill, Spearman) and ``policy``
    scores (cross-entropy, the uniform prior's, skill, top agreement) of the round's
    network, and its per-epoch ``history``. Empty when the run had no rounds.
    """
    rows: dict[str, dict[int, dict[str, Any]]] = {}
    for s in stages:
        r = round_of(s.stage)
        if r is None or s.stage == "distill":
            continue
        row = rows.setdefault(s.env, {}).setdefault(r, {"round": r})
        path = Path(s.path)
        kind = s.stage.partition("@")[0]
        if kind == "collect":
            row["train_scores"] = _scores(path, s.env)
            row["train_score"] = _mean(row["train_scores"])
        elif kind == "evaluate":
            row["eval_scores"] = _scores(path, s.env)
            row["eval_score"] = _mean(row["eval_scores"])
        else:
            report = json.loads((path / "report.json").read_text())
            ev = report["eval"]
            row["value"] = {k: ev.get(k) for k in ("mse", "constant_mse", "skill", "spearman")}
            row["policy"] = ev.get("policy")
            row["history"] = report.get("history", [])
    if not any(r > 0 for env in rows.values() for r in env):
        return {}
    return {env: [by_round[r] for r in sorted(by_round)] for env, by_round in rows.items()}


def _fmt(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def rounds_table(report: dict[str, list[dict[str, Any]]]) -> Table:
    """The per-round table: scores, value skill, policy cross-entropy and agreement."""
    table = Table(title="expert iteration: per round (round 0: the first network)")
    columns = ("env", "round", "score (train seeds)", "score (eval seeds)", "value skill",
               "value Spearman", "policy CE", "uniform CE", "top agrees")  # fmt: skip
    for c in columns:
        table.add_column(c, justify="left" if c == "env" else "right")
    for env, rows in report.items():
        for row in rows:
            value, policy = row.get("value") or {}, row.get("policy") or {}
            table.add_row(
                env,
                str(row["round"]),
                _fmt(row.get("train_score"), 2) + (" (base)" if row["round"] == 0 else ""),
                _fmt(row.get("eval_score"), 2),
                _fmt(value.get("skill")),
                _fmt(value.get("spearman")),
                _fmt(policy.get("cross_entropy")),
                _fmt(policy.get("uniform_cross_entropy")),
                _fmt(policy.get("top_agrees")),
            )
    return table


def plot_rounds(report: dict[str, list[dict[str, Any]]], path: Path) -> Path:
    """Score per round (held-out and training seeds) and the losses per round, one PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), constrained_layout=True)
    for env, rows in report.items():
        rounds = [r["round"] for r in rows]
        (line,) = axes[0].plot(
            rounds, [r.get("eval_score") for r in rows], marker="o", label=f"{env} (eval seeds)"
        )
        axes[0].plot(
            rounds[1:], [r.get("train_score") for r in rows[1:]], marker="x", linestyle="--",
            color=line.get_color(), label=f"{env} (train seeds)",
        )  # fmt: skip
        axes[1].plot(
            rounds, [(r.get("value") or {}).get("mse") for r in rows], marker="o",
            color=line.get_color(), label=f"{env} value MSE",
        )  # fmt: skip
        axes[2].plot(
            rounds, [(r.get("policy") or {}).get("cross_entropy") for r in rows], marker="o",
            color=line.get_color(), label=f"{env} policy CE",
        )  # fmt: skip
        axes[2].plot(
            rounds, [(r.get("policy") or {}).get("uniform_cross_entropy") for r in rows],
            linestyle=":", color=line.get_color(), label=f"{env} uniform prior",
        )  # fmt: skip
    titles = ("score per episode", "value: validation MSE", "policy: validation cross-entropy")
    for ax, title in zip(axes, titles, strict=True):
        ax.set_title(title)
        ax.set_xlabel("round")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_rounds(stages: Sequence[StageRun], out: Path) -> dict[str, list[dict[str, Any]]]:
    """Write ``expert_iteration.json`` and ``.png`` into ``out`` when the run had rounds."""
    report = rounds_report(stages)
    if report:
        (out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n")
        plot_rounds(report, out / PLOT_FILE)
    return report


def log_rounds(logger: RunLogger, report: dict[str, list[dict[str, Any]]], out: Path) -> None:
    """Log the rounds: ``expert_iteration/<env>/...`` at step = round, the table, the plot."""
    rows = []
    for env, env_rows in report.items():
        for row in env_rows:
            value, policy = row.get("value") or {}, row.get("policy") or {}
            metrics = {
                "train_score": row.get("train_score") if row["round"] else None,
                "eval_score": row.get("eval_score"),
                "value_mse": value.get("mse"),
                "value_skill": value.get("skill"),
                "policy_ce": policy.get("cross_entropy"),
                "policy_top_agrees": policy.get("top_agrees"),
            }
            logger.log_metrics(metrics, step=row["round"], prefix=f"expert_iteration/{env}")
            rows.append([env, row["round"], *metrics.values()])
    columns = ["env", "round", "train_score", "eval_score", "value_mse", "value_skill",
               "policy_ce", "policy_top_agrees"]  # fmt: skip
    logger.log_table("expert_iteration", columns, rows)
    if (out / PLOT_FILE).is_file():
        logger.log_image("expert_iteration", out / PLOT_FILE)


def main(argv: Sequence[str] | None = None) -> None:
    """Print a run folder's expert-iteration rounds and redraw their plot."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a wmkit-eval run folder (with pipeline.json)")
    args = parser.parse_args(argv)
    record = args.run / "pipeline.json"
    if not record.is_file():
        raise SystemExit(f"{record} is missing: not a wmkit-eval run folder")
    stages = [StageRun(**s) for s in json.loads(record.read_text())["stages"]]
    report = write_rounds(stages, args.run)
    console = Console()
    if not report:
        raise SystemExit(f"{args.run} had no expert-iteration rounds (pipeline.expert_iteration)")
    console.print(rounds_table(report))
    console.print(f"plot: {args.run / PLOT_FILE}", markup=False)


if __name__ == "__main__":
    main()
