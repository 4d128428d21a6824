"""The leaderboard's tables: Markdown, a CSV of the cells, and a tidy CSV of the episodes.

Every table marks its rows (:data:`~wmkit.evals.marks.ORACLE_MARK`,
:data:`~wmkit.evals.marks.PRIVILEGED_MARK`) and the Markdown explains the marks under
each table. The CSVs carry them in columns (``oracle``, ``privileged``, ``marks``);
empty fields are values nothing measured (pandas reads them as NaN), ``inf`` a
half-life never reached.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wmkit.evals.cells import LLM_METRICS, Cell, episode_metrics, finished
from wmkit.evals.marks import Summary, display_name, fmt, marks, marks_note
from wmkit.evals.stats import Aggregate, Improvement, Interval

__all__ = [
    "IMPROVEMENT_TITLES",
    "LLM_COLUMNS",
    "LLM_NOTE",
    "TIDY_COLUMNS",
    "cell_records",
    "half_life_text",
    "horizon_keys",
    "llm_cells",
    "llm_text",
    "render_markdown",
    "tidy_records",
    "write_cells_csv",
    "write_tidy_csv",
]

TIDY_COLUMNS = (
    "env", "horizon", "agent", "variant", "seed", "metric", "value", "oracle", "privileged",
    "label",
)  # fmt: skip
"""Columns of ``results_tidy.csv``: one row per episode x metric.

``agent`` and ``variant`` are the row's own (the agent's name, its job's overrides);
``label`` is the configuration's label in the leaderboard (``leaderboard.csv``'s
``agent``); ``privileged`` lists the parts joined by ``;``.
"""

INTRO = (
    "Drift = 1 - F1(tracked facts, true facts of entities mentioned so far), mean over "
    "steps. Breakage = share of probes answered wrong from the tracked state; half-life "
    "= shortest chain length (steps back to the anchor) whose breakage is >= 50%. "
    "Abstains = share of abstention probes (questions about an entity the episode "
    "never had; the right answer is unknown) answered unknown: a tracker that guesses "
    "scores low; breakage leaves them out. "
    "Stale use = share of answers and decisions relying on a released or superseded "
    "fact. Causal confusion: the agent's change at each step (its tracker's prediction "
    "where it makes one, else tracked_t minus tracked_t-1), split by (subject, "
    "relation) slot the way the true change splits into action-driven and "
    "event-driven parts (a change on a slot neither touches counts against both); "
    "action/event F1 = fact F1 of that part pooled over the steps whose true part is "
    "not empty, exact = share of those steps matched exactly; confusion probes = "
    "share of `confusion` probes answered right (wmkit.evals.metrics). "
    "Normalised score = score / the env's maximum for the episode. "
    "Values are IQM over seeds with 95% stratified-bootstrap CIs (the half-life's "
    "resamples episodes); – = nothing to measure."
)

OVERALL_NOTE = (
    "Each configuration over every task (env, horizon) it played x seed: IQM and mean "
    "with 95% stratified-bootstrap CIs (seeds resampled within each task). Ranked by "
    "drift IQM, lowest first. Configurations that played different tasks are ranked on "
    "different tasks (the tasks column)."
)


LLM_COLUMNS = {
    "llm_calls": ("LLM calls", "{:.1f}"),
    "llm_tokens_in": ("tokens in", "{:.0f}"),
    "llm_tokens_out": ("tokens out", "{:.0f}"),
    "llm_latency": ("s/call", "{:.3f}"),
    "llm_cost": ("cost", "{:.4g}"),
    "llm_valid_share": ("valid replies", "{:.3f}"),
    "llm_first_try_share": ("valid first try", "{:.3f}"),
}
"""Per :data:`~wmkit.evals.cells.LLM_METRICS` name, in its order: the column's header
and number format."""

LLM_NOTE = (
    "LLM usage, the mean per episode over seeds, for the configurations whose agent "
    "called a language model: LLM calls = requests answered (cache hits included); "
    "tokens in/out = prompt and completion tokens as the server reported them (none "
    "for a cache hit); s/call = seconds waiting for the server per request it "
    "answered; cost = the tokens at the configured prices (llm.client.price_in and "
    "price_out, per million tokens); valid replies = share of structured questions "
    "answered validly, the first time or after a repair; valid first try = share "
    "answered validly the first time."
)


def llm_cells(cells: Sequence[Summary]) -> list[Summary]:
    """The summaries with a language model's usage (:data:`LLM_METRICS` measured)."""
    return [s for s in cells if any(k in s and s[k].n for k in LLM_METRICS)]


def llm_text(s: Summary, metric: str) -> str:
    """A summary's mean per episode of an :data:`LLM_METRICS` name; "–" without values."""
    found = s.get(metric)
    if found is None or found.n == 0 or math.isnan(found.mean):
        return "–"
    return LLM_COLUMNS[metric][1].format(found.mean)


def _half(value: float) -> str:
    return "∞" if math.isinf(value) else f"{value:.0f}"


def half_life_text(ci: Interval, with_ci: bool = True) -> str:
    """Format a half-life and its interval: ``20 [10, ∞]``."""
    text = _half(ci.value)
    return f"{text} [{_half(ci.ci_low)}, {_half(ci.ci_high)}]" if with_ci else text


def horizon_keys(cells: Sequence[Summary]) -> list[str]:
    """The ``drift_at_<h>`` keys the summaries carry, by step."""
    return sorted(
        {k for s in cells for k in s if k.startswith("drift_at_")},
        key=lambda k: int(k.rsplit("_", 1)[1]),
    )


def _steps(s: Summary) -> str:
    action, event = s["confusion_steps"]
    return f"{action}/{event}" if action or event else "–"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], note: str) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines + (["", note] if note else [])


def _overall_lines(ranking: Sequence[Summary]) -> list[str]:
    header = ["rank", "configuration", "tasks", "episodes", "drift IQM [95% CI]"]
    header += ["drift mean [95% CI]", "breakage IQM [95% CI]", "stale use IQM [95% CI]"]
    header += ["norm. score IQM [95% CI]", "norm. score mean [95% CI]"]
    rows = [
        [
            str(e["rank"]),
            display_name(e),
            str(len(e["tasks"])),
            str(e["episodes"]),
            fmt(e["drift"], ci=True),
            fmt(e["drift"], ci=True, mean=True),
            fmt(e["breakage"], ci=True),
            fmt(e["stale_use"], ci=True),
            fmt(e["normalised_score"], ci=True),
            fmt(e["normalised_score"], ci=True, mean=True),
        ]
        for e in ranking
    ]
    note = " ".join(filter(None, [OVERALL_NOTE, marks_note(ranking)]))
    return ["", "## Overall ranking", "", *_table(header, rows, note)]


IMPROVEMENT_TITLES = {
    "drift": "P(row drifts less than column)",
    "normalised_score": "P(row scores higher than column, normalised)",
}
"""Headings of the probability-of-improvement matrices, by metric."""


def _improvement_lines(
    ranking: Sequence[Summary], pairs: Mapping[str, Mapping[tuple[str, str], Improvement]]
) -> list[str]:
    if len(ranking) < 2 or not any(pairs.values()):
        return []
    lines = [
        "",
        "## Probability of improvement",
        "",
        "P(X improves on Y): per task both played, the chance that a seed of X beats a "
        "seed of Y (ties count half; Mann-Whitney U / nm), averaged over those tasks. "
        "Their 95% CIs (stratified bootstrap, X and Y resampled independently) are in "
        "leaderboard.html. – = no task in common.",
    ]
    names = [e["agent"] for e in ranking]
    for metric, found in pairs.items():
        if not found:
            continue
        header = [IMPROVEMENT_TITLES.get(metric, metric)] + [display_name(e) for e in ranking]
        rows = []
        for x, entry in zip(names, ranking, strict=True):
            row = [display_name(entry)]
            for y in names:
                p = found.get((x, y))
                row.append("·" if x == y else "–" if p is None else f"{p.probability:.2f}")
            rows.append(row)
        lines += ["", f"### {IMPROVEMENT_TITLES.get(metric, metric)}", ""]
        lines += _table(header, rows, marks_note(ranking))
    return lines


def render_markdown(
    summaries: Sequence[Summary],
    *,
    ranking: Sequence[Summary] | None = None,
    improvements: Mapping[str, Mapping[tuple[str, str], Improvement]] | None = None,
) -> str:
    """Render the Markdown leaderboard.

    The overall ranking (when given, :func:`~wmkit.evals.leaderboard.overall`) and the
    probability-of-improvement matrices (``{metric: pairs}``,
    :func:`~wmkit.evals.leaderboard.improvements`) come first; then two tables per
    env, one of drift, breakage, stale use and score, one of causal confusion, and a
    third of LLM usage (:data:`LLM_COLUMNS`) where an agent called a language model.
    Under each table a note explains the marks of its rows.
    """
    lines = ["# wmkit leaderboard", "", INTRO]
    if ranking:
        lines += _overall_lines(ranking)
        lines += _improvement_lines(ranking, improvements or {})
    by_env: dict[str, list[Summary]] = defaultdict(list)
    for s in summaries:
        by_env[s["env"]].append(s)
    for env, cells in by_env.items():
        horizons = horizon_keys(cells)
        header = ["horizon", "agent", "seeds", "drift [95% CI]"]
        header += [f"drift@{k.rsplit('_', 1)[1]}" for k in horizons]
        header += ["slope /100 steps", "breakage [95% CI]", "half-life [95% CI]"]
        header += ["stale use [95% CI]", "abstains [95% CI]", "score", "norm. score [95% CI]"]
        header += ["s/step"]
        rows = []
        for s in cells:
            seeds = str(len(s["seeds"])) + (f" ({s['failed']} failed)" if s["failed"] else "")
            row = [str(s["horizon"]), display_name(s), seeds, fmt(s["drift"], ci=True)]
            row += [fmt(s[k]) if k in s else "–" for k in horizons]
            row += [fmt(s["drift_slope"]), fmt(s["breakage"], ci=True)]
            row += [half_life_text(s["half_life_ci"], with_ci=bool(s["breakage_by_chain"]))]
            row += [fmt(s["stale_use"], ci=True), fmt(s["abstention"], ci=True), fmt(s["score"])]
            row += [fmt(s["normalised_score"], ci=True), _seconds(s)]
            rows.append(row)
        lines += ["", f"## {env}", "", *_table(header, rows, marks_note(cells))]
        header = ["horizon", "agent", "action F1 [95% CI]", "action exact"]
        header += ["event F1 [95% CI]", "event exact", "confusion probes [95% CI]"]
        header += ["steps action/event"]
        rows = []
        for s in cells:
            row = [str(s["horizon"]), display_name(s)]
            row += [fmt(s["confusion_action_f1"], ci=True), fmt(s["confusion_action_exact"])]
            row += [fmt(s["confusion_event_f1"], ci=True), fmt(s["confusion_event_exact"])]
            row += [fmt(s["confusion_probe_accuracy"], ci=True), _steps(s)]
            rows.append(row)
        lines += ["", f"### {env}: causal confusion", ""]
        lines += _table(header, rows, marks_note(cells))
        lines += _llm_lines(env, cells)
    return "\n".join(lines) + "\n"


def _seconds(s: Summary) -> str:
    """Mean wall seconds per step (the agent's thinking included), or – when not timed."""
    found = s.get("seconds_per_step")
    return "–" if found is None or not found.n else f"{found.mean:.3g}"


def _llm_lines(env: str, cells: Sequence[Summary]) -> list[str]:
    """The env's LLM usage table (:data:`LLM_COLUMNS`); none when no agent called a model."""
    used = llm_cells(cells)
    if not used:
        return []
    header = ["horizon", "agent"] + [title for title, _ in LLM_COLUMNS.values()]
    rows = [
        [str(s["horizon"]), display_name(s)] + [llm_text(s, k) for k in LLM_COLUMNS] for s in used
    ]
    note = " ".join(filter(None, [LLM_NOTE, marks_note(used)]))
    return ["", f"### {env}: LLM usage", "", *_table(header, rows, note)]


def _number(value: float) -> float | str:
    return "" if math.isnan(value) else value


def cell_records(summaries: Sequence[Summary]) -> list[dict[str, Any]]:
    """Flatten summaries into one flat record per cell: the rows of ``leaderboard.csv``.

    Keys: ``env, horizon, agent`` (the label), ``base_agent, variant, oracle,
    privileged`` (``;``-joined), ``marks, seeds`` (how many finished), ``failed``;
    per aggregate ``<metric>_iqm, _ci_low, _ci_high, _mean, _mean_ci_low,
    _mean_ci_high, _n``; ``half_life`` with ``_ci_low, _ci_high``; per chain-length
    bin ``breakage_chain_<bin>`` with its ``_ci_low, _ci_high``;
    ``confusion_steps_action``, ``confusion_steps_event``. Every record has the same
    keys (empty string for what a cell lacks), JSON-ready but for NaN as "".
    """
    records = []
    for s in summaries:
        rec: dict[str, Any] = dict(
            env=s["env"],
            horizon=s["horizon"],
            agent=s["agent"],
            base_agent=s["base_agent"],
            variant=s["variant"],
            oracle=bool(s["oracle"]),
            privileged=";".join(s["privileged"]),
            marks=marks(s),
            seeds=len(s["seeds"]),
            failed=s["failed"],
        )
        for key, value in s.items():
            if isinstance(value, Aggregate):
                for field in ("iqm", "ci_low", "ci_high", "mean", "mean_ci_low", "mean_ci_high"):
                    rec[f"{key}_{field}"] = _number(getattr(value, field))
                rec[f"{key}_n"] = value.n
        half = s["half_life_ci"]
        rec |= {"half_life": half.value, "half_life_ci_low": half.ci_low}
        rec["half_life_ci_high"] = half.ci_high
        for edge, interval in s["breakage_by_chain_ci"].items():
            rec[f"breakage_chain_{edge}"] = interval.value
            rec[f"breakage_chain_{edge}_ci_low"] = interval.ci_low
            rec[f"breakage_chain_{edge}_ci_high"] = interval.ci_high
        rec["confusion_steps_action"], rec["confusion_steps_event"] = s["confusion_steps"]
        records.append(rec)
    keys = list(dict.fromkeys(k for rec in records for k in rec))
    return [{k: rec.get(k, "") for k in keys} for rec in records]


def _write_csv(path: Path, columns: Sequence[str], records: Sequence[Mapping[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(records)
    return path


def write_cells_csv(summaries: Sequence[Summary], path: str | Path) -> Path:
    """Write :func:`cell_records` to ``path`` (``leaderboard.csv``); return the path."""
    records = cell_records(summaries)
    columns = list(records[0]) if records else ["env", "horizon", "agent"]
    return _write_csv(Path(path), columns, records)


def tidy_records(groups: Sequence[Cell]) -> list[dict[str, Any]]:
    """One record per finished episode x metric of :func:`~wmkit.evals.cells.episode_metrics`.

    The episodes are those the leaderboard aggregates (one per seed and configuration);
    a metric an episode did not measure has no record. Keys: :data:`TIDY_COLUMNS`.
    """
    out = []
    for cell in groups:
        for row in finished(cell):
            common = dict(
                env=cell.env,
                horizon=cell.horizon,
                agent=row["agent"],
                variant=row.get("variant", ""),
                seed=int(row["seed"]),
                oracle=bool(row.get("oracle")),
                privileged=";".join(row.get("privileged", ())),
                label=cell.agent,
            )
            for metric, value in episode_metrics(row).items():
                out.append(common | {"metric": metric, "value": value})
    return out


def write_tidy_csv(groups: Sequence[Cell], path: str | Path) -> Path:
    """Write :func:`tidy_records` to ``path`` (``results_tidy.csv``); return the path."""
    return _write_csv(Path(path), TIDY_COLUMNS, tidy_records(groups))
