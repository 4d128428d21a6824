"""The results store: one JSON row per finished episode, appended to ``results.jsonl``.

Appends are flushed and fsync'd row by row, so a killed run loses at most the episode
it was in. A torn last line (the process died mid-write) is reported and skipped on
read; every complete row is kept, and the next run appends after it cleanly.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["ResultsFile", "TornLineWarning", "episode_key"]


class TornLineWarning(UserWarning):
    """A results file ended in an incomplete line, which was skipped."""


def episode_key(row: dict[str, Any]) -> tuple[str, int, str, int]:
    """Return the identity of an episode row: (env, horizon, agent, seed)."""
    return row["env"], int(row["horizon"]), row["agent"], int(row["seed"])


class ResultsFile:
    """Append-only JSONL of episode rows.

    Args:
        path: the file; its directory is created when missing.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def rows(self) -> Iterator[dict[str, Any]]:
        """Yield every complete row; a torn last line is skipped with a warning.

        Raises:
            ValueError: a line other than the last is not valid JSON (the file was
                edited or corrupted, not merely cut short), naming the line number.
        """
        if not self.path.exists():
            return
        lines = self.path.read_bytes().split(b"\n")
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                row = json.loads(raw)
            except json.JSONDecodeError as err:
                if number == len(lines):  # no newline after it: cut off mid-write
                    warnings.warn(
                        f"{self.path}: line {number} is torn (the writer was killed "
                        f"mid-write); skipped {len(raw)} bytes",
                        TornLineWarning,
                        stacklevel=2,
                    )
                    return
                raise ValueError(f"{self.path}: line {number} is not valid JSON: {err}") from err
            yield row

    def append(self, row: dict[str, Any]) -> None:
        """Append one row durably (flush and fsync before returning)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._drop_torn_tail()
        with self.path.open("ab") as fh:
            fh.write(json.dumps(row, sort_keys=True).encode() + b"\n")
            fh.flush()
            os.fsync(fh.fileno())

    def _drop_torn_tail(self) -> None:
        # A torn last line has no newline; cut it so the next row starts on its own line.
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with self.path.open("rb+") as fh:
            data = fh.read()
            if data.endswith(b"\n"):
                return
            fh.truncate(data.rfind(b"\n") + 1)
