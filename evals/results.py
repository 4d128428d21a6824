"""The results store: one JSON row per finished episode, appended to ``results.jsonl``.

A :class:`ResultsFile` is a :class:`~wmkit.jsonl.JsonlLog` appended row by row (each
row flushed and fsync'd), so a killed run loses at most the episode it was in. A torn
last line (the process died mid-write) is reported and skipped on read; every complete
row is kept, and the next run appends after it cleanly. :meth:`ResultsFile.rewrite`
replaces the file whole (``wmkit-score`` rescoring a run).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from wmkit.jsonl import JsonlLog, TornLineWarning, fsync_path

__all__ = ["ResultsFile", "TornLineWarning", "episode_key"]


def episode_key(row: dict[str, Any]) -> tuple[str, int, str, int]:
    """Return the identity of an episode row: (env, horizon, agent, seed)."""
    return row["env"], int(row["horizon"]), row["agent"], int(row["seed"])


class ResultsFile(JsonlLog):
    """Append-only JSONL of episode rows (see :class:`~wmkit.jsonl.JsonlLog`).

    Args:
        path: the file; its directory is created when missing.
    """

    def rewrite(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Replace the whole file with ``rows`` atomically; return how many were written.

        The rows go to a temporary file beside it, fsync'd, then renamed over it, so a
        killed rewrite leaves the old file whole. Every row is encoded first: one that
        is not JSON-serialisable raises and changes nothing.
        """
        temp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temp.unlink(missing_ok=True)
        try:
            count = JsonlLog(temp).extend(rows)
            if not count:
                temp.touch()
            os.replace(temp, self.path)
        finally:
            temp.unlink(missing_ok=True)
        fsync_path(self.path.parent)
        return count
