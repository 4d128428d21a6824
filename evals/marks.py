"""The words every report shares: the marks of reference rows, and how a cell is named.

:mod:`~wmkit.evals.leaderboard` makes the summaries; the Markdown and CSV tables
(:mod:`~wmkit.evals.tables`), the plots (:mod:`~wmkit.evals.plots`) and the HTML page
(:mod:`~wmkit.evals.report_html`) all mark and explain rows the same way through here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from wmkit.evals.stats import Aggregate

__all__ = [
    "CONFUSION_KEYS",
    "ORACLE_MARK",
    "PRIVILEGED_MARK",
    "PRIVILEGES",
    "Summary",
    "display_name",
    "fmt",
    "legend_title",
    "marks",
    "marks_note",
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
"""Aggregates of one (env, horizon, configuration) cell over its seeds.

See :func:`wmkit.evals.leaderboard.summarise`; an overall entry
(:func:`wmkit.evals.leaderboard.overall`) has the same naming keys (``agent``,
``oracle``, ``privileged``).
"""


def marks(s: Summary) -> str:
    """The marks a summary carries: † ground truth, ‡ privileged parts ("" for none)."""
    return (ORACLE_MARK if s["oracle"] else "") + (PRIVILEGED_MARK if s["privileged"] else "")


def display_name(s: Summary) -> str:
    """The configuration's label with its marks."""
    m = marks(s)
    return f"{s['agent']} {m}" if m else s["agent"]


def fmt(a: Aggregate, ci: bool = False, *, mean: bool = False) -> str:
    """Format an aggregate's IQM (or mean) to 3 places, with its 95% CI; "–" without values."""
    value, low, high = (a.mean, a.mean_ci_low, a.mean_ci_high) if mean else a[:1] + a[2:4]
    if a.n == 0 or math.isnan(value):
        return "–"
    text = f"{value:.3f}"
    return f"{text} [{low:.3f}, {high:.3f}]" if ci else text


def marks_note(cells: Sequence[Summary]) -> str:
    """The sentences under a table that explain the marks its rows carry ("" for none)."""
    notes = []
    if any(s["oracle"] for s in cells):
        notes.append(f"{ORACLE_MARK} reads ground truth: an upper bound, not a competitor.")
    holders: dict[str, dict[str, None]] = defaultdict(dict)  # privileged part -> agents
    for s in cells:
        for part in s["privileged"]:
            holders[part][s["agent"]] = None
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
    return " ".join(notes)


def legend_title(cells: Iterable[Summary]) -> str | None:
    """The marks the plotted agents carry, explained in a word each (None without)."""
    cells = list(cells)
    found = [f"{ORACLE_MARK} ground truth"] if any(s["oracle"] for s in cells) else []
    if any(s["privileged"] for s in cells):
        found.append(f"{PRIVILEGED_MARK} env's parser / exact simulator")
    return ", ".join(found) or None
