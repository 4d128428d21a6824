"""``leaderboard.html``: the leaderboard as one self-contained page.

Nothing is fetched from the network: the CSS and the sorting script are inline and the
plots are inline PNGs (``data:`` URIs). The page holds the overall ranking, the
probability-of-improvement matrices with their intervals, and per env a table of its
cells (every column sorts on a click of its header: numbers by value, "–" last), the
env's plots (:mod:`~wmkit.evals.plots`) and links to the episode records
(:mod:`~wmkit.evals.records`) that exist, by path relative to the page.
"""

from __future__ import annotations

import base64
import html
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from urllib.parse import quote

from wmkit.evals.cells import Cell
from wmkit.evals.marks import Summary, display_name, fmt, marks_note
from wmkit.evals.records import record_path
from wmkit.evals.stats import Aggregate, Improvement
from wmkit.evals.tables import (
    IMPROVEMENT_TITLES,
    INTRO,
    LLM_COLUMNS,
    LLM_NOTE,
    OVERALL_NOTE,
    half_life_text,
    horizon_keys,
    llm_cells,
    llm_text,
)

__all__ = ["render_html", "write_html"]

_CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 12px; }
th, td { border: 1px solid #ddd; padding: 3px 6px; text-align: right; white-space: nowrap; }
th { background: #f3f3f3; position: sticky; top: 0; }
table.sortable th { cursor: pointer; user-select: none; }
table.sortable th[aria-sort=ascending]::after { content: " \\25B2"; }
table.sortable th[aria-sort=descending]::after { content: " \\25BC"; }
td.name, th.name { text-align: left; }
td small { color: #777; }
p.note { color: #555; max-width: 70em; font-size: 12px; }
img.plot { max-width: 100%; display: block; margin: 0.8em 0; border: 1px solid #eee; }
td.records a { margin-right: 4px; }
"""

# Sorts a table by the clicked header: cells' data-v (numbers; "" = none, last) or text.
_JS = """
document.querySelectorAll("table.sortable").forEach(function (table) {
  table.querySelectorAll("thead th").forEach(function (th, col) {
    th.addEventListener("click", function () {
      var asc = th.getAttribute("aria-sort") !== "ascending";
      table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      function key(row) {
        var cell = row.cells[col];
        var v = cell.getAttribute("data-v");
        if (v === null) { return cell.textContent.trim().toLowerCase(); }
        return v === "" ? null : parseFloat(v);
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (x === null || y === null) { return x === y ? 0 : (x === null ? 1 : -1); }
        var c = x < y ? -1 : (x > y ? 1 : 0);
        return asc ? c : -c;
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _num(value: float) -> str:
    """A data-v attribute value: the number, "" for none (NaN), a large one for inf."""
    if math.isnan(value):
        return ""
    return "1e300" if math.isinf(value) else repr(float(value))


def _td(text: str, value: float | None = None, cls: str = "") -> str:
    attrs = f' class="{cls}"' if cls else ""
    if value is not None:
        attrs += f' data-v="{_num(value)}"'
    return f"<td{attrs}>{text}</td>"


def _agg(a: Aggregate, *, mean: bool = False) -> str:
    value = a.mean if mean else a.iqm
    text = fmt(a, mean=mean)
    if text != "–":
        low, high = (a.mean_ci_low, a.mean_ci_high) if mean else (a.ci_low, a.ci_high)
        text += f" <small>[{low:.3f}, {high:.3f}]</small>"
    return _td(text, value if a.n else math.nan)


def _seconds_td(s: Summary) -> str:
    """Wall seconds per step (the agent's thinking included); – for rows never timed."""
    return _agg(s["seconds_per_step"]) if "seconds_per_step" in s else _td("–", math.nan)


def _llm_td(s: Summary, metric: str) -> str:
    """A cell of an LLM usage column: the mean per episode (:func:`llm_text`), sortable."""
    found = s.get(metric)
    return _td(llm_text(s, metric), found.mean if found is not None and found.n else math.nan)


def _table(header: Sequence[str], rows: Sequence[str], table_id: str) -> str:
    head = "".join(
        f'<th class="name">{_e(h)}</th>' if i < 2 else f"<th>{_e(h)}</th>"
        for i, h in enumerate(header)
    )
    body = "".join(f"<tr>{r}</tr>" for r in rows)
    return (
        f'<table class="sortable" id="{table_id}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>' if text else ""


def _ranking(ranking: Sequence[Summary]) -> str:
    header = ["configuration", "rank", "tasks", "episodes", "drift IQM", "drift mean"]
    header += ["breakage IQM", "stale use IQM", "norm. score IQM", "norm. score mean"]
    rows = []
    for e in ranking:
        cells = [_td(_e(display_name(e)), cls="name"), _td(str(e["rank"]), e["rank"])]
        cells += [_td(str(len(e["tasks"])), len(e["tasks"]))]
        cells += [_td(str(e["episodes"]), e["episodes"])]
        cells += [_agg(e["drift"]), _agg(e["drift"], mean=True), _agg(e["breakage"])]
        cells += [_agg(e["stale_use"]), _agg(e["normalised_score"])]
        cells += [_agg(e["normalised_score"], mean=True)]
        rows.append("".join(cells))
    note = " ".join(filter(None, [OVERALL_NOTE, marks_note(ranking)]))
    return "<h2>Overall ranking</h2>" + _table(header, rows, "ranking") + _note(note)


def _matrix(
    ranking: Sequence[Summary], pairs: Mapping[str, Mapping[tuple[str, str], Improvement]]
) -> str:
    if len(ranking) < 2 or not any(pairs.values()):
        return ""
    out = [
        "<h2>Probability of improvement</h2>",
        _note(
            "P(row improves on column) over the tasks both played: per task the chance "
            "that a seed of the row beats a seed of the column (ties half), averaged "
            "over tasks, with its 95% stratified-bootstrap interval."
        ),
    ]
    names = [e["agent"] for e in ranking]
    for metric, found in pairs.items():
        title = IMPROVEMENT_TITLES.get(metric, metric)
        head = "".join(f"<th>{_e(display_name(e))}</th>" for e in ranking)
        body = []
        for x, entry in zip(names, ranking, strict=True):
            cells = [f'<td class="name">{_e(display_name(entry))}</td>']
            for y in names:
                p = found.get((x, y))
                if x == y or p is None:
                    cells.append("<td>·</td>" if x == y else "<td>–</td>")
                else:
                    ci = f"<small>[{p.ci_low:.2f}, {p.ci_high:.2f}]</small>"
                    cells.append(f"<td>{p.probability:.2f} {ci}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        out.append(f"<h3>{_e(title)}</h3>")
        out.append(
            f'<table class="matrix"><thead><tr><th class="name">{_e(title)}</th>{head}</tr>'
            f"</thead><tbody>{''.join(body)}</tbody></table>"
        )
        out.append(_note(marks_note(ranking)))
    return "".join(out)


def _links(cell: Cell, sources: Mapping[int, Path], page_dir: Path) -> str:
    links = []
    for row in cell.rows:
        run_dir = sources.get(id(row), page_dir)
        path = record_path(run_dir, cell.env, cell.horizon, row["agent"], int(row["seed"]))
        if "failed" not in row and path.is_file():
            href = quote(Path(os.path.relpath(path, page_dir)).as_posix())
            links.append(f'<a href="{href}">s{int(row["seed"])}</a>')
    return " ".join(links) or "–"


def _env_section(
    env: str,
    groups: Sequence[Cell],
    summaries: Sequence[Summary],
    pngs: Mapping[str, bytes],
    sources: Mapping[int, Path],
    page_dir: Path,
    index: int,
) -> str:
    cells = [s for s in summaries if s["env"] == env]
    by_key = {(c.env, c.horizon, c.agent): c for c in groups}
    horizons = horizon_keys(cells)
    header = ["agent", "horizon", "seeds", "drift"] + [f"drift@{k[9:]}" for k in horizons]
    header += ["slope /100", "breakage", "half-life", "stale use", "abstains", "score"]
    header += ["norm. score", "s/step"]
    header += ["action F1", "event F1", "confusion probes"]
    llm = bool(llm_cells(cells))  # the LLM usage columns, where an agent called a model
    header += [title for title, _ in LLM_COLUMNS.values()] if llm else []
    header += ["records"]
    rows = []
    for s in cells:
        half = s["half_life_ci"]
        row = [_td(_e(display_name(s)), cls="name"), _td(str(s["horizon"]), s["horizon"])]
        seeds = str(len(s["seeds"])) + (f" ({s['failed']} failed)" if s["failed"] else "")
        row += [_td(seeds, len(s["seeds"])), _agg(s["drift"])]
        row += [_agg(s[k]) if k in s else _td("–", math.nan) for k in horizons]
        row += [_agg(s["drift_slope"]), _agg(s["breakage"])]
        with_ci = bool(s["breakage_by_chain"])
        row += [_td(_e(half_life_text(half, with_ci)), half.value if with_ci else math.nan)]
        row += [_agg(s["stale_use"]), _agg(s["abstention"]), _agg(s["score"])]
        row += [_agg(s["normalised_score"]), _seconds_td(s)]
        row += [_agg(s[f"confusion_{k}"]) for k in ("action_f1", "event_f1", "probe_accuracy")]
        row += [_llm_td(s, k) for k in LLM_COLUMNS] if llm else []
        cell = by_key[(s["env"], s["horizon"], s["agent"])]
        row.append(_td(_links(cell, sources, page_dir), cls="records"))
        rows.append("".join(row))
    png = base64.b64encode(pngs[env]).decode("ascii")
    return (
        f'<h2 id="env-{_e(env)}">{_e(env)}</h2>'
        + _table(header, rows, f"env-table-{index}")
        + _note(" ".join(filter(None, [LLM_NOTE if llm else "", marks_note(cells)])))
        + f'<img class="plot" alt="{_e(env)} plots" src="data:image/png;base64,{png}">'
    )


def render_html(
    groups: Sequence[Cell],
    summaries: Sequence[Summary],
    ranking: Sequence[Summary],
    improvements: Mapping[str, Mapping[tuple[str, str], Improvement]],
    pngs: Mapping[str, bytes],
    *,
    page_dir: Path,
    sources: Mapping[int, Path] | None = None,
) -> str:
    """Return the page's HTML.

    Args:
        groups: the cells (:func:`~wmkit.evals.cells.cells`).
        summaries: their summaries (:func:`~wmkit.evals.leaderboard.summarise`).
        ranking: :func:`~wmkit.evals.leaderboard.overall`.
        improvements: ``{metric: pairs}`` of :func:`~wmkit.evals.leaderboard.improvements`.
        pngs: ``{env: PNG bytes}`` of its plots (:func:`~wmkit.evals.plots.env_pngs`).
        page_dir: the folder the page is written to (record links are relative to it).
        sources: by ``id(row)``, the run folder of each row's records (default
            ``page_dir``).
    """
    envs = sorted({c.env for c in groups})
    sections = [
        _env_section(env, groups, summaries, pngs, sources or {}, page_dir, i)
        for i, env in enumerate(envs)
    ]
    nav = " · ".join(f'<a href="#env-{_e(env)}">{_e(env)}</a>' for env in envs)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>wmkit leaderboard</title>"
        f"<style>{_CSS}</style></head><body>"
        f'<h1>wmkit leaderboard</h1><p class="note">{_e(INTRO)}</p><p>{nav}</p>'
        + (_ranking(ranking) if ranking else "")
        + _matrix(ranking, improvements)
        + "".join(sections)
        + f"<script>{_JS}</script></body></html>\n"
    )


def write_html(
    groups: Sequence[Cell],
    summaries: Sequence[Summary],
    ranking: Sequence[Summary],
    improvements: Mapping[str, Mapping[tuple[str, str], Improvement]],
    pngs: Mapping[str, bytes],
    path: str | Path,
    *,
    sources: Mapping[int, Path] | None = None,
) -> Path:
    """Write :func:`render_html` to ``path`` (``leaderboard.html``); return the path."""
    path = Path(path)
    text = render_html(
        groups, summaries, ranking, improvements, pngs, page_dir=path.parent, sources=sources
    )
    path.write_text(text, encoding="utf-8")
    return path
