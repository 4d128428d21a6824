"""Leaderboards: aggregate episode rows over seeds into a Markdown table and plots.

Usable on its own to merge the results of a sweep:
``python -m wmkit.evals.leaderboard runs/multirun/<date>/`` reads every ``results.jsonl``
below the folder and writes ``leaderboard.md`` and the plots there.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmkit.evals.metrics import (
    BREAKAGE_BINS,
    ProbeOutcome,
    breakage_by_chain,
    breakage_half_life,
)
from wmkit.evals.results import ResultsFile
from wmkit.evals.stats import Aggregate, aggregate

__all__ = [
    "CONFUSION_KEYS",
    "ORACLE_MARK",
    "PRIVILEGED_MARK",
    "PRIVILEGES",
    "Summary",
    "render_markdown",
    "summarise",
    "write_leaderboard",
]

ORACLE_MARK = "†"
"""Marks a configuration that reads ground truth (``oracle: true``): an upper bound."""

PRIVILEGED_MARK = "‡"
"""Marks a configuration with a part no real agent has (a row's ``privileged`` list)."""

PRIVILEGES = {
    "env_parser": "the env's own parser",
    "exact_simulator": "an exact simulator (the live env, restored from snapshots)",
}
"""What each privileged part a row may list is, in the leaderboard's words.

The parts are named by :attr:`wmkit.evals.suite.AgentSpec.privileged`; the note under
each table explains :data:`PRIVILEGED_MARK` with these words.
"""

CONFUSION_KEYS = ("action_f1", "action_exact", "event_f1", "event_exact", "probe_accuracy")
"""The per-episode causal-confusion scores aggregated over seeds (a row's ``confusion``)."""


Summary = dict[str, Any]
"""Aggregates of one (env, horizon, agent) cell over its seeds (see :func:`summarise`)."""


def _outcomes(rows: Iterable[dict[str, Any]]) -> list[ProbeOutcome]:
    return [ProbeOutcome(c, bool(ok), k) for row in rows for c, ok, k in row["probes"]]


def _label(row: dict[str, Any], several_variants: bool) -> str:
    # Rows of different sweep jobs (variants) stay apart, labelled by their overrides.
    return (
        f"{row['agent']} ({row.get('variant') or 'defaults'})" if several_variants else row["agent"]
    )


def _several_variants(rows: Sequence[dict[str, Any]]) -> bool:
    return len({row.get("variant", "") for row in rows}) > 1


def _finite(values: Iterable[Any]) -> list[float]:
    # A metric an episode had nothing to measure with is NaN (None once through JSON
    # tools that write null); an aggregate over seeds leaves those episodes out.
    return [float(v) for v in values if v is not None and not math.isnan(v)]


def summarise(rows: Sequence[dict[str, Any]]) -> list[Summary]:
    """Group episode rows by (env, horizon, agent) and aggregate each over seeds.

    Returns:
        One :class:`Summary` per group, sorted by env, horizon, then agent, with keys
        ``env, horizon, agent, oracle, privileged`` (the union of the rows' privileged
        parts, :data:`PRIVILEGES`; empty for rows written before it existed), ``seeds``,
        :class:`~wmkit.evals.stats.Aggregate` values ``drift`` (episode mean drift),
        ``drift_at_<h>``, ``drift_slope``, ``breakage`` (per-seed share of probes
        answered wrong), ``stale_use`` (per-seed share of answers and decisions relying
        on a released or superseded fact; rows written before it existed are left
        out), ``confusion_<key>`` for each of :data:`CONFUSION_KEYS` (per-seed causal
        confusion, :func:`~wmkit.evals.metrics.confusion_scores`; episodes with
        nothing to score there, NaN, and rows written before it existed are left out)
        and ``score``, plus ``confusion_steps`` (steps scored for the action and the
        event part, summed over seeds), pooled ``breakage_by_chain`` and
        ``half_life``, and ``failed``: how many episodes failed (a crashed or hung
        emulator); only finished episodes count in the aggregates, and ``seeds``
        lists those.
    """
    several = _several_variants(rows)
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["env"], int(row["horizon"]), _label(row, several))].append(row)
    out = []
    for (env, horizon, agent), group in sorted(groups.items()):
        members = sorted((r for r in group if "failed" not in r), key=lambda r: r["seed"])
        summary: Summary = dict(
            env=env,
            horizon=horizon,
            agent=agent,
            oracle=any(r.get("oracle") for r in group),
            privileged=sorted({p for r in group for p in r.get("privileged", ())}),
            failed=len(group) - len(members),
            seeds=[r["seed"] for r in members],
            drift=aggregate([[r["drift"]["mean"] for r in members]]),
            drift_slope=aggregate([[r["drift"].get("slope", math.nan) for r in members]]),
            score=aggregate([[r["score"] for r in members]]),
            stale_use=aggregate([[r["stale_use"] for r in members if "stale_use" in r]]),
        )
        confusion = [r["confusion"] for r in members if "confusion" in r]
        for key in CONFUSION_KEYS:
            summary[f"confusion_{key}"] = aggregate([_finite(c.get(key) for c in confusion)])
        summary["confusion_steps"] = tuple(
            sum(c.get(f"{part}_steps", 0) for c in confusion) for part in ("action", "event")
        )
        # Drift at step h exists for the episodes that lasted h steps (a won Vault ends early).
        for key in sorted({k for r in members for k in r["drift"] if k.startswith("at_")}):
            summary[f"drift_{key}"] = aggregate(
                [[r["drift"][key] for r in members if key in r["drift"]]]
            )
        shares = [
            sum(not ok for _, ok, _ in r["probes"]) / len(r["probes"])
            for r in members
            if r["probes"]
        ]
        summary["breakage"] = aggregate([shares])
        pooled = _outcomes(members)
        summary["breakage_by_chain"] = breakage_by_chain(pooled)
        summary["half_life"] = breakage_half_life(pooled)
        out.append(summary)
    return out


def _fmt(a: Aggregate, ci: bool = False) -> str:
    if a.n == 0 or math.isnan(a.iqm):
        return "–"
    text = f"{a.iqm:.3f}"
    return f"{text} [{a.ci_low:.3f}, {a.ci_high:.3f}]" if ci else text


def _name(s: Summary) -> str:
    """The agent's label with its marks: † ground truth, ‡ privileged parts."""
    marks = (ORACLE_MARK if s["oracle"] else "") + (PRIVILEGED_MARK if s["privileged"] else "")
    return f"{s['agent']} {marks}" if marks else s["agent"]


def _marks_note(cells: Sequence[Summary]) -> list[str]:
    """The lines under a table that explain the marks its rows carry."""
    notes = []
    if any(s["oracle"] for s in cells):
        notes.append(f"{ORACLE_MARK} reads ground truth: an upper bound, not a competitor.")
    holders: dict[str, list[str]] = defaultdict(list)  # privileged part -> agents
    for s in cells:
        for part in s["privileged"]:
            holders[part].append(s["agent"])
    if holders:
        which = "; ".join(
            f"{PRIVILEGES.get(part, part)}: {', '.join(agents)}"
            for part, agents in sorted(holders.items())
        )
        notes.append(
            f"{PRIVILEGED_MARK} has a part no real agent has, so it is a reference, not a "
            "competitor. The env's own parser reads every observation perfectly: a tracker "
            "on it with a window of the last k observations (`window`) models perfect "
            "reading with bounded memory; with unbounded memory (`memory`) it is the "
            f"ceiling of reading. Parts here: {which}."
        )
    return ["", " ".join(notes)] if notes else []


def _steps(s: Summary) -> str:
    action, event = s["confusion_steps"]
    return f"{action}/{event}" if action or event else "–"


def render_markdown(summaries: Sequence[Summary]) -> str:
    """Render summaries as two Markdown tables per env (IQM over seeds, 95% CI).

    The first holds drift, breakage, stale use and score; the second causal confusion.
    Under each table a note explains the marks of its rows (:data:`ORACLE_MARK`,
    :data:`PRIVILEGED_MARK`).
    """
    lines = ["# wmkit leaderboard", ""]
    lines.append(
        "Drift = 1 - F1(tracked facts, true facts of entities mentioned so far), mean over "
        "steps. Breakage = share of probes answered wrong from the tracked state; half-life "
        "= shortest chain length (steps back to the anchor) whose breakage is >= 50%. "
        "Stale use = share of answers and decisions relying on a released or superseded "
        "fact. Causal confusion: the agent's change at each step (its tracker's prediction "
        "where it makes one, else tracked_t minus tracked_t-1), split by (subject, "
        "relation) slot the way the true change splits into action-driven and "
        "event-driven parts (a change on a slot neither touches counts against both); "
        "action/event F1 = fact F1 of that part pooled over the steps whose true part is "
        "not empty, exact = share of those steps matched exactly; confusion probes = "
        "share of `confusion` probes answered right (wmkit.evals.metrics). "
        "Values are IQM over seeds with 95% stratified-bootstrap CIs; – = nothing to "
        "measure."
    )
    by_env: dict[str, list[Summary]] = defaultdict(list)
    for s in summaries:
        by_env[s["env"]].append(s)
    for env, cells in by_env.items():
        horizons = sorted(
            {k for s in cells for k in s if k.startswith("drift_at_")},
            key=lambda k: int(k.rsplit("_", 1)[1]),
        )
        lines += ["", f"## {env}", ""]
        header = ["horizon", "agent", "seeds", "drift [95% CI]"]
        header += [f"drift@{k.rsplit('_', 1)[1]}" for k in horizons]
        header += ["slope /100 steps", "breakage [95% CI]", "half-life", "stale use [95% CI]"]
        header += ["score"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for s in cells:
            seeds = str(len(s["seeds"])) + (f" ({s['failed']} failed)" if s["failed"] else "")
            row = [str(s["horizon"]), _name(s), seeds, _fmt(s["drift"], ci=True)]
            row += [_fmt(s[k]) if k in s else "–" for k in horizons]
            half = "∞" if math.isinf(s["half_life"]) else f"{s['half_life']:.0f}"
            row += [_fmt(s["drift_slope"]), _fmt(s["breakage"], ci=True), half]
            row += [_fmt(s["stale_use"], ci=True), _fmt(s["score"])]
            lines.append("| " + " | ".join(row) + " |")
        lines += _marks_note(cells)
        lines += ["", f"### {env}: causal confusion", ""]
        header = ["horizon", "agent", "action F1 [95% CI]", "action exact"]
        header += ["event F1 [95% CI]", "event exact", "confusion probes [95% CI]"]
        header += ["steps action/event"]
        lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for s in cells:
            row = [str(s["horizon"]), _name(s)]
            row += [_fmt(s["confusion_action_f1"], ci=True), _fmt(s["confusion_action_exact"])]
            row += [_fmt(s["confusion_event_f1"], ci=True), _fmt(s["confusion_event_exact"])]
            row += [_fmt(s["confusion_probe_accuracy"], ci=True), _steps(s)]
            lines.append("| " + " | ".join(row) + " |")
        lines += _marks_note(cells)
    return "\n".join(lines) + "\n"


def _legend_title(cells: Iterable[Summary]) -> str | None:
    """The marks the plotted agents carry, explained in a word each (None without)."""
    cells = list(cells)
    marks = [f"{ORACLE_MARK} ground truth"] if any(s["oracle"] for s in cells) else []
    if any(s["privileged"] for s in cells):
        marks.append(f"{PRIVILEGED_MARK} env's parser / exact simulator")
    return ", ".join(marks) or None


def _plot(
    rows: Sequence[dict[str, Any]], summaries: Sequence[Summary], out_dir: Path
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = sorted({r["env"] for r in rows})
    several = _several_variants(rows)
    fig, axes = plt.subplots(2, len(envs), figsize=(6 * len(envs), 8), squeeze=False)
    for col, env in enumerate(envs):
        horizon = max(int(r["horizon"]) for r in rows if r["env"] == env)
        by_agent: dict[str, list[list[float]]] = defaultdict(list)
        for r in rows:
            if r["env"] == env and int(r["horizon"]) == horizon and "failed" not in r:
                by_agent[_label(r, several)].append(r["drift_series"])
        cells = {s["agent"]: s for s in summaries if s["env"] == env and s["horizon"] == horizon}
        ax = axes[0][col]
        for agent, series in sorted(by_agent.items()):
            length = min(len(s) for s in series)
            oracle = cells[agent]["oracle"]
            ax.plot(
                np.mean([s[:length] for s in series], axis=0),
                label=_name(cells[agent]),
                linestyle="--" if oracle else "-",
            )
        ax.set(
            title=f"{env}: drift per step (horizon {horizon})",
            xlabel="step",
            ylabel="drift (mean over seeds)",
            ylim=(-0.02, 1.02),
        )
        ax.legend(title=_legend_title(cells.values()))
        ax = axes[1][col]
        for s in cells.values():
            if s["breakage_by_chain"]:
                edges = list(s["breakage_by_chain"])
                ax.plot(
                    [BREAKAGE_BINS.index(e) for e in edges],
                    [s["breakage_by_chain"][e][0] for e in edges],
                    marker="o",
                    label=_name(s),
                    linestyle="--" if s["oracle"] else "-",
                )
        ax.set_xticks(range(len(BREAKAGE_BINS)), [f"{e}+" for e in BREAKAGE_BINS])
        ax.axhline(0.5, color="grey", linestyle=":")
        ax.set(
            title=f"{env}: breakage by chain length",
            xlabel="chain length (steps)",
            ylabel="share answered wrong",
            ylim=(-0.02, 1.02),
        )
        ax.legend(title=_legend_title(cells.values()))
    fig.tight_layout()
    path = out_dir / "leaderboard.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_leaderboard(rows: Sequence[dict[str, Any]], out_dir: str | Path) -> dict[str, Path]:
    """Write ``leaderboard.md`` and ``leaderboard.png`` for ``rows`` into ``out_dir``.

    Returns:
        ``{"markdown": path, "plot": path}``.
    """
    out = Path(out_dir)
    summaries = summarise(rows)
    md = out / "leaderboard.md"
    md.write_text(render_markdown(summaries))
    return {"markdown": md, "plot": _plot(rows, summaries, out)}


def main(argv: Sequence[str] | None = None) -> None:
    """Merge every ``results.jsonl`` under a folder into one leaderboard there."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("folder", type=Path, help="a run or sweep folder")
    args = parser.parse_args(argv)
    files = sorted(args.folder.rglob("results.jsonl"))
    if not files:
        parser.error(f"no results.jsonl under {args.folder}")
    rows = [row for f in files for row in ResultsFile(f).rows()]
    paths = write_leaderboard(rows, args.folder)
    print(f"{len(rows)} episodes from {len(files)} files -> {paths['markdown']}")


if __name__ == "__main__":
    main()
