"""Leaderboards: episode rows aggregated per cell and per configuration, written as reports.

A *cell* is one (env, horizon, configuration); a *task* is one (env, horizon), the
stratum of the overall aggregates; a *configuration* is an agent, labelled in a merged
sweep by the overrides that differ between the jobs and act on it
(:mod:`~wmkit.evals.variants`). :func:`write_leaderboard` writes the reports:
``leaderboard.md``, ``leaderboard.csv`` and ``results_tidy.csv``
(:mod:`~wmkit.evals.tables`), ``leaderboard.png`` (:mod:`~wmkit.evals.plots`) and a
self-contained ``leaderboard.html`` (:mod:`~wmkit.evals.report_html`).

Usable on its own to merge the results of a sweep:
``python -m wmkit.evals.leaderboard runs/multirun/<date>/`` reads every ``results.jsonl``
below the folder and writes the reports there.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wmkit.evals import plots, report_html, tables
from wmkit.evals.cells import Cell, cells, episode_metrics, finished
from wmkit.evals.marks import CONFUSION_KEYS, ORACLE_MARK, PRIVILEGED_MARK, PRIVILEGES, Summary
from wmkit.evals.metrics import ProbeOutcome, breakage_by_chain, breakage_intervals
from wmkit.evals.results import ResultsFile
from wmkit.evals.stats import REPS, Improvement, aggregate, probability_of_improvement
from wmkit.evals.tables import render_markdown

__all__ = [
    "CONFUSION_KEYS",
    "IMPROVEMENT_METRICS",
    "ORACLE_MARK",
    "OVERALL_METRICS",
    "PRIVILEGED_MARK",
    "PRIVILEGES",
    "Cell",
    "Summary",
    "cells",
    "episode_metrics",
    "improvements",
    "overall",
    "render_markdown",
    "summarise",
    "write_leaderboard",
]

OVERALL_METRICS = {
    "drift": False,
    "breakage": False,
    "stale_use": False,
    "normalised_score": True,
}
"""Metrics of the overall aggregate, each in [0, 1], and whether higher is better."""

IMPROVEMENT_METRICS = ("drift", "normalised_score")
"""The metrics the reports compare every two configurations on (:func:`improvements`)."""

_ALWAYS = ("drift", "drift_slope", "breakage", "abstention", "stale_use", "score")
_ALWAYS += ("normalised_score",)


def _summarise(cell: Cell, reps: int) -> Summary:
    members = finished(cell)
    metrics = [episode_metrics(r) for r in members]
    summary: Summary = dict(
        env=cell.env,
        horizon=cell.horizon,
        agent=cell.agent,
        base_agent=cell.base_agent,
        variant=cell.variant,
        oracle=any(r.get("oracle") for r in cell.rows),
        privileged=sorted({p for r in cell.rows for p in r.get("privileged", ())}),
        failed=len(cell.rows) - len(members),
        seeds=[r["seed"] for r in members],
    )
    names = dict.fromkeys(_ALWAYS + tuple(f"confusion_{k}" for k in CONFUSION_KEYS))
    names |= dict.fromkeys(sorted({k for m in metrics for k in m}))
    for name in names:
        summary[name] = aggregate([[m[name] for m in metrics if name in m]], reps=reps)
    confusion = [r["confusion"] for r in members if "confusion" in r]
    summary["confusion_steps"] = tuple(
        sum(c.get(f"{part}_steps", 0) for c in confusion) for part in ("action", "event")
    )
    episodes = [  # chains: abstention probes measure guessing, not memory
        [ProbeOutcome(c, bool(ok), k) for c, ok, k in r["probes"] if k != "abstention"]
        for r in members
    ]
    summary["breakage_by_chain"] = breakage_by_chain([o for e in episodes for o in e])
    by_bin, half_life = breakage_intervals(episodes, reps=reps)
    summary["breakage_by_chain_ci"] = by_bin
    summary["half_life"] = half_life.value
    summary["half_life_ci"] = half_life
    return summary


def summarise(rows: Sequence[dict[str, Any]], *, reps: int = REPS) -> list[Summary]:
    """Aggregate each cell (:func:`cells`) over its seeds.

    Returns:
        One :class:`Summary` per cell, sorted by env, horizon, then label, with keys
        ``env, horizon, agent`` (the label), ``base_agent``, ``variant``, ``oracle``,
        ``privileged`` (the union of the rows' privileged parts, :data:`PRIVILEGES`;
        empty for rows written before it existed), ``seeds`` (of the finished
        episodes, the only ones aggregated), ``failed`` (episodes that failed: a
        crashed or hung emulator); an :class:`~wmkit.evals.stats.Aggregate` (IQM and
        mean with 95% bootstrap CIs over seeds) per metric of
        :func:`episode_metrics` (``drift``, ``drift_slope``, ``breakage``,
        ``stale_use``, ``score``, ``normalised_score`` and each ``confusion_<key>``
        always, with ``n == 0`` where nothing was measured; ``drift_at_<h>`` for the
        steps some episode lasted); ``confusion_steps`` (steps scored for the action
        and the event part, summed over seeds); pooled ``breakage_by_chain``
        (``{bin: (share, probes)}``) with ``breakage_by_chain_ci`` (``{bin:
        Interval}``, resampling episodes); ``half_life`` and its ``half_life_ci``.
    """
    return [_summarise(cell, reps) for cell in cells(rows)]


def _by_configuration(groups: Sequence[Cell]) -> dict[str, list[Cell]]:
    out: dict[str, list[Cell]] = defaultdict(list)
    for cell in groups:
        out[cell.agent].append(cell)
    return dict(sorted(out.items()))


def _task_values(group: Sequence[Cell], metric: str) -> dict[tuple[str, int], list[float]]:
    values = {}
    for cell in group:
        found = [m[metric] for m in map(episode_metrics, finished(cell)) if metric in m]
        if found:
            values[(cell.env, cell.horizon)] = found
    return values


def _rank_key(entry: Summary) -> tuple[float, str]:
    value = entry["drift"].iqm
    return (math.inf if math.isnan(value) else value, entry["agent"])


def overall(
    rows: Sequence[dict[str, Any]], *, reps: int = REPS, groups: Sequence[Cell] | None = None
) -> list[Summary]:
    """Aggregate each configuration across tasks x seeds (rliable's protocol).

    Scores are normalised per episode by the env's own maximum (``normalised_score``);
    drift, breakage and stale use are shares already. Each metric of
    :data:`OVERALL_METRICS` gets the IQM and mean over every (task, seed) value with
    95% stratified-bootstrap CIs, the strata being the tasks (env, horizon).

    Args:
        rows: the episode rows.
        reps: bootstrap replicates.
        groups: the rows' :func:`cells`, when the caller has them already.

    Returns:
        One entry per configuration, ranked by drift IQM (lowest first; none last):
        ``rank``, ``agent`` (the label), ``base_agent``, ``variant``, ``oracle``,
        ``privileged``, ``tasks`` (the (env, horizon) pairs it played), ``episodes``
        and an :class:`~wmkit.evals.stats.Aggregate` per metric. Configurations that
        played different tasks are ranked on different tasks: ``tasks`` says which.
    """
    groups = cells(rows) if groups is None else groups
    out = []
    for label, group in _by_configuration(groups).items():
        entry: Summary = dict(
            agent=label,
            base_agent=group[0].base_agent,
            variant=group[0].variant,
            oracle=any(r.get("oracle") for c in group for r in c.rows),
            privileged=sorted({p for c in group for r in c.rows for p in r.get("privileged", ())}),
            tasks=[(c.env, c.horizon) for c in group],
            episodes=sum(len(finished(c)) for c in group),
        )
        for metric in OVERALL_METRICS:
            entry[metric] = aggregate(list(_task_values(group, metric).values()), reps=reps)
        out.append(entry)
    out.sort(key=_rank_key)
    for rank, entry in enumerate(out, start=1):
        entry["rank"] = rank
    return out


def improvements(
    rows: Sequence[dict[str, Any]],
    metric: str = "drift",
    *,
    reps: int = REPS,
    groups: Sequence[Cell] | None = None,
) -> dict[tuple[str, str], Improvement]:
    """Probability that each configuration improves on each other one, on one metric.

    Over the tasks both played (:func:`~wmkit.evals.stats.probability_of_improvement`;
    lower is better for the metrics :data:`OVERALL_METRICS` says so of).

    Args:
        rows: the episode rows.
        metric: a name of :func:`episode_metrics`.
        reps: bootstrap replicates.
        groups: the rows' :func:`cells`, when the caller has them already.

    Returns:
        ``{(x, y): Improvement}`` for every ordered pair of distinct labels with a task
        in common (``P(x improves on y)``).
    """
    groups = cells(rows) if groups is None else groups
    values = {label: _task_values(g, metric) for label, g in _by_configuration(groups).items()}
    higher = OVERALL_METRICS.get(metric, True)
    out = {}
    for x, xs in values.items():
        for y, ys in values.items():
            common = sorted(xs.keys() & ys.keys())
            if x != y and common:
                out[(x, y)] = probability_of_improvement(
                    [xs[t] for t in common],
                    [ys[t] for t in common],
                    higher_is_better=higher,
                    reps=reps,
                )
    return out


def write_leaderboard(
    rows: Sequence[dict[str, Any]],
    out_dir: str | Path,
    *,
    run_dirs: Sequence[str | Path] | None = None,
    reps: int = REPS,
) -> dict[str, Path]:
    """Write every report for ``rows`` into ``out_dir``.

    Args:
        rows: the episode rows.
        out_dir: where the reports go.
        run_dirs: for each row, the run folder holding its episode records
            (``records/``), which the HTML page links; default ``out_dir`` for all.
        reps: bootstrap replicates.

    Returns:
        ``{"markdown", "plot", "csv", "tidy", "html"}``: the paths of ``leaderboard.md``,
        ``leaderboard.png``, ``leaderboard.csv``, ``results_tidy.csv`` and
        ``leaderboard.html``.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if run_dirs is not None and len(run_dirs) != len(rows):
        raise ValueError(f"{len(run_dirs)} run_dirs for {len(rows)} rows: give one per row")
    groups = cells(rows)
    summaries = [_summarise(cell, reps) for cell in groups]
    ranking = overall(rows, reps=reps, groups=groups)
    pairs = {m: improvements(rows, m, reps=reps, groups=groups) for m in IMPROVEMENT_METRICS}
    md = out / "leaderboard.md"
    md.write_text(tables.render_markdown(summaries, ranking=ranking, improvements=pairs))
    pngs = plots.env_pngs(groups, summaries)
    paths = {
        "markdown": md,
        "plot": plots.write_png(pngs, out / "leaderboard.png"),
        "csv": tables.write_cells_csv(summaries, out / "leaderboard.csv"),
        "tidy": tables.write_tidy_csv(groups, out / "results_tidy.csv"),
    }
    sources = {id(row): Path(d) for row, d in zip(rows, run_dirs or [out] * len(rows), strict=True)}
    paths["html"] = report_html.write_html(
        groups, summaries, ranking, pairs, pngs, out / "leaderboard.html", sources=sources
    )
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    """Merge every ``results.jsonl`` under a folder into one leaderboard there."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folder", type=Path, help="a run or sweep folder")
    args = parser.parse_args(argv)
    files = sorted(args.folder.rglob("results.jsonl"))
    if not files:
        parser.error(f"no results.jsonl under {args.folder}")
    rows, run_dirs = [], []
    for f in files:
        for row in ResultsFile(f).rows():
            rows.append(row)
            run_dirs.append(f.parent)
    paths = write_leaderboard(rows, args.folder, run_dirs=run_dirs)
    print(f"{len(rows)} episodes from {len(files)} files -> {paths['markdown']}")
    print(f"html: {paths['html']}")


if __name__ == "__main__":
    main()
