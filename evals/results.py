"""The results store: one JSON row per finished episode, appended to ``results.jsonl``.

A :class:`ResultsFile` is a :class:`~wmkit.jsonl.JsonlLog` appended row by row (each
row flushed and fsync'd), so a killed run loses at most the episode it was in. A torn
last line (the process died mid-write) is reported and skipped on read; every complete
row is kept, and the next run appends after it cleanly.
"""

from __future__ import annotations

from typing import Any

from wmkit.jsonl import JsonlLog, TornLineWarning

__all__ = ["ResultsFile", "TornLineWarning", "episode_key"]


def episode_key(row: dict[str, Any]) -> tuple[str, int, str, int]:
    """Return the identity of an episode row: (env, horizon, agent, seed)."""
    return row["env"], int(row["horizon"]), row["agent"], int(row["seed"])


class ResultsFile(JsonlLog):
    """Append-only JSONL of episode rows (see :class:`~wmkit.jsonl.JsonlLog`).

    Args:
        path: the file; its directory is created when missing.
    """
