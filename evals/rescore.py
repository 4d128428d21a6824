"""Rescore a finished run from its episode records, without replaying any episode.

A run made with ``records=true`` keeps one record per finished episode under
``<run folder>/records/`` (:mod:`~wmkit.evals.records`). :func:`rescore_run` scores
every record again with a scoring function (by default
:func:`~wmkit.evals.metrics.score_episode`, the one ``wmkit-eval`` uses), rewrites
``results.jsonl`` atomically and redraws the leaderboard. A new metric is a new scoring
function: ``rescore_run(run, lambda r: score_episode(r) | {"mine": mine(r)})``.

Which rows come out: every recorded episode's, in the order of the old
``results.jsonl`` (records it lacks, from a run killed between the record and its row,
come after, by file name), and the rows of failed episodes, which have no record, as
they were. A finished row without a record (part of the run was made with
``records=false``) is an error: the rewritten file would mix old and new scores.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wmkit.evals.leaderboard import write_leaderboard
from wmkit.evals.metrics import ScoreFn, score_episode
from wmkit.evals.records import RECORDS_DIR, read_record, record_paths
from wmkit.evals.results import ResultsFile, episode_key

__all__ = ["Rescored", "rescore_run"]


@dataclass(frozen=True)
class Rescored:
    """What :func:`rescore_run` did.

    Attributes:
        rescored: episodes scored from their records.
        failed: rows of failed episodes kept as they were.
        paths: the written ``results`` file, ``markdown`` leaderboard and ``plot``.
    """

    rescored: int
    failed: int
    paths: dict[str, Path]


def _scored(path: Path, score_fn: ScoreFn) -> dict[str, Any]:
    record, identity = read_record(path)
    row = score_fn(record)
    if not isinstance(row, dict):
        raise TypeError(f"the scoring function returned {type(row).__name__}, not a dict row")
    return row | identity  # the record's identity in its suite: env, horizon, agent, seed, ...


def rescore_run(run_dir: str | os.PathLike[str], score_fn: ScoreFn = score_episode) -> Rescored:
    """Score every recorded episode of the run in ``run_dir`` again; rewrite its results.

    Args:
        run_dir: a ``wmkit-eval`` run folder (it holds ``results.jsonl`` and ``records/``).
        score_fn: record -> JSON-ready row (metrics only; the identity keys ``env``,
            ``horizon``, ``agent``, ``seed``, ... come from the record file).

    Returns:
        What was rescored and written (:class:`Rescored`).

    Raises:
        FileNotFoundError: ``run_dir`` is not a folder.
        ValueError: the run has no records (they are kept with ``records=true``), or a
            finished row has none; :class:`~wmkit.evals.records.RecordError` (a
            ``ValueError``) when a record file is corrupt, naming it. Nothing is
            written then.
    """
    run = Path(run_dir)
    if not run.is_dir():
        raise FileNotFoundError(f"{run}: no such run folder")
    paths = record_paths(run)
    if not paths:
        raise ValueError(
            f"{run} has no episode records ({RECORDS_DIR}/ is missing or empty): a run keeps "
            "them when made with records=true (wmkit-eval records=true ...); rerun it so"
        )
    fresh: dict[tuple[str, int, str, int], dict[str, Any]] = {}
    for path in paths:
        row = _scored(path, score_fn)
        fresh[episode_key(row)] = row
    results = ResultsFile(run / "results.jsonl")
    rows: list[dict[str, Any]] = []
    unrecorded: list[tuple[str, int, str, int]] = []
    seen: set[tuple[str, int, str, int]] = set()
    failed = 0
    for old in results.rows():
        key = episode_key(old)
        if key in fresh:
            rows.append(fresh.pop(key))
        elif "failed" in old:
            rows.append(old)
            failed += 1
        elif key not in seen:  # a repeated row (a run with resume=false) is rescored once
            unrecorded.append(key)
        seen.add(key)
    if unrecorded:
        env, horizon, agent, seed = unrecorded[0]
        raise ValueError(
            f"{len(unrecorded)} finished episodes in {results.path} have no record in "
            f"{run / RECORDS_DIR} (first: {env} h={horizon} {agent} seed={seed}; part of the "
            "run was made with records=false?): rescoring would mix old and new scores"
        )
    rows.extend(fresh.values())  # recorded, but killed before their row was written
    results.rewrite(rows)
    board = write_leaderboard(rows, run)
    return Rescored(len(rows) - failed, failed, {"results": results.path, **board})
