"""Cells: the episode rows of one (env, horizon, configuration), and an episode's metrics.

:func:`cells` groups rows the way every report does (labels from
:mod:`~wmkit.evals.variants`, one row per seed); :func:`episode_metrics` reads the
metrics of one row by name. The leaderboard aggregates them, the tables, plots and
HTML page draw them.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from wmkit.evals.marks import CONFUSION_KEYS
from wmkit.evals.variants import Labeller

__all__ = ["LLM_METRICS", "Cell", "cells", "episode_metrics", "finished"]

LLM_METRICS = (
    "llm_calls",
    "llm_tokens_in",
    "llm_tokens_out",
    "llm_latency",
    "llm_cost",
    "llm_valid_share",
    "llm_first_try_share",
)
"""The per-episode numbers of a row's ``llm`` (what its language models cost), in order.

``llm_calls``, ``llm_tokens_in``, ``llm_tokens_out`` and ``llm_cost`` are the row's
own; ``llm_latency`` = seconds waiting for the server per request it answered (cache
hits take none; absent without one); ``llm_valid_share`` = structured replies valid
at last (first time or after a repair) / structured questions, ``llm_first_try_share``
= valid the first time / structured questions (both absent without a question).
"""


class Cell(NamedTuple):
    """The episode rows of one (env, horizon, configuration).

    Attributes:
        env, horizon: the task.
        agent: the configuration's label (:meth:`~wmkit.evals.variants.Labeller.label`).
        base_agent: the agent's name in the rows.
        variant: the overrides that set this configuration apart ("" for none).
        rows: one row per seed, the finished one where a seed has several (a merge of
            jobs that ran it alike, a failed try retried), sorted by seed.
    """

    env: str
    horizon: int
    agent: str
    base_agent: str
    variant: str
    rows: tuple[dict[str, Any], ...]


def _finite(value: Any) -> bool:
    # A metric an episode had nothing to measure with is NaN (None once through JSON
    # tools that write null); aggregates leave those episodes out.
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def episode_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """Return one finished episode's metrics by name, leaving out what it did not measure.

    Names: ``drift`` (episode mean), ``drift_at_<h>``, ``drift_slope``, ``breakage``
    (share of probes answered wrong, abstention probes left out), ``abstention`` (share
    of abstention probes answered unknown), ``stale_use``, ``score``, ``max_score``,
    ``normalised_score`` (``score / max_score`` where the env states a maximum > 0),
    ``seconds_per_step`` (wall seconds of the episode, the agent's own thinking included,
    per step, for rows that timed it), and ``confusion_<key>`` for each of
    :data:`CONFUSION_KEYS`; for a row with ``llm``
    (its agent called a language model), :data:`LLM_METRICS`. The leaderboard's
    aggregates, the CSV, the tidy table and the tracking logs all read these.
    """
    drift = row.get("drift", {})
    out = {"drift": drift.get("mean"), "drift_slope": drift.get("slope")}
    out |= {f"drift_{k}": v for k, v in drift.items() if k.startswith("at_")}
    probes = row.get("probes") or ()
    chains = [ok for _, ok, kind in probes if kind != "abstention"]
    if chains:
        out["breakage"] = sum(not ok for ok in chains) / len(chains)
    abstained = [ok for _, ok, kind in probes if kind == "abstention"]
    if abstained:
        out["abstention"] = sum(abstained) / len(abstained)
    out["stale_use"] = row.get("stale_use")
    out["score"] = row.get("score")
    most = row.get("max_score")
    out["max_score"] = most
    if _finite(most) and most > 0 and _finite(row.get("score")):
        out["normalised_score"] = row["score"] / most
    if _finite(row.get("seconds")) and row.get("steps"):
        out["seconds_per_step"] = row["seconds"] / row["steps"]
    confusion = row.get("confusion") or {}
    out |= {f"confusion_{k}": confusion.get(k) for k in CONFUSION_KEYS}
    if row.get("llm") is not None:
        out |= _llm_metrics(row["llm"])
    return {k: float(v) for k, v in out.items() if _finite(v)}


def _llm_metrics(usage: Mapping[str, float]) -> dict[str, float | None]:
    """:data:`LLM_METRICS` of one episode's usage (None: nothing to measure it by)."""
    answered = usage["calls"] - usage["cached"]
    asked = usage["valid"] + usage["repaired"] + usage["failed"]
    return {
        "llm_calls": usage["calls"],
        "llm_tokens_in": usage["tokens_in"],
        "llm_tokens_out": usage["tokens_out"],
        "llm_latency": usage["seconds"] / answered if answered > 0 else None,
        "llm_cost": usage["cost"],
        "llm_valid_share": (usage["valid"] + usage["repaired"]) / asked if asked else None,
        "llm_first_try_share": usage["valid"] / asked if asked else None,
    }


def _pick(rows: Iterable[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """One row per seed: the first finished one, else the first failed one."""
    best: dict[int, dict[str, Any]] = {}
    for row in rows:
        seed = int(row["seed"])
        if seed not in best or ("failed" in best[seed] and "failed" not in row):
            best[seed] = row
    return tuple(best[s] for s in sorted(best))


def cells(rows: Sequence[dict[str, Any]]) -> list[Cell]:
    """Group rows into cells, sorted by env, horizon, then label.

    Rows whose labels agree but whose settings fingerprints (``spec``) differ stay
    apart, the fingerprint added to their variant: nothing merges that ran differently.
    """
    labeller = Labeller(rows)
    groups: dict[tuple[str, int, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["env"], int(row["horizon"]), labeller.label(row))].append(row)
    out = []
    for (env, horizon, _), group in sorted(groups.items()):
        specs = sorted({str(r.get("spec", "")) for r in group})
        for spec in specs:
            members = [r for r in group if str(r.get("spec", "")) == spec]
            variant = labeller.variant(members[0])
            if len(specs) > 1:
                variant = ", ".join(filter(None, [variant, f"spec={spec or 'none'}"]))
            agent = members[0]["agent"]
            label = f"{agent} ({variant})" if variant else agent
            out.append(Cell(env, horizon, label, agent, variant, _pick(members)))
    return sorted(out, key=lambda c: (c.env, c.horizon, c.agent))


def finished(cell: Cell) -> list[dict[str, Any]]:
    """The cell's finished episodes (those without ``failed``)."""
    return [r for r in cell.rows if "failed" not in r]
