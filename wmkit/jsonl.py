"""Append-only JSONL logs that survive a writer killed mid-write.

One JSON object per line. Each :meth:`JsonlLog.extend` writes its batch with one
``write`` and one ``fsync``, so a killed writer loses at most the batch it was writing
and leaves at most one torn line, always the last. Readers report a torn last line
with a :class:`TornLineWarning` and skip it; a bad line anywhere else is corruption
(the file was edited or damaged, not cut short) and raises a ``ValueError`` naming it.
Before each batch a log repairs a torn tail: it reads the last byte (O(1)) and, only
when that is not a newline, scans back to the previous one (O(length of that line)).

One writer per file: the repair assumes nobody else is writing the file at that moment.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["JsonlLog", "TornLineWarning", "fsync_path"]

_CHUNK = 1 << 16  # bytes read per step when scanning back for the last newline


class TornLineWarning(UserWarning):
    """A JSONL file ended in an incomplete line (its writer was killed mid-write)."""


class JsonlLog:
    """An append-only file of JSON objects, one per line.

    Args:
        path: the file; it and its directory are created on the first append.

    Attributes:
        path: the file.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r})"

    def rows(self) -> Iterator[dict[str, Any]]:
        """Yield every complete row in file order, streaming.

        A last line without its newline is kept when it is a whole JSON object (the
        writer died between the object and the newline) and otherwise skipped with a
        :class:`TornLineWarning` naming its line number.

        Raises:
            ValueError: a line other than the last is not a JSON object, naming the
                file and line number.
        """
        if not self.path.exists():
            return
        with self.path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                if not raw.strip():
                    continue
                row, problem = _parse(raw)
                if row is not None:
                    yield row
                elif raw.endswith(b"\n"):
                    raise ValueError(f"{self.path}: line {number} {problem}")
                else:  # only the last line can lack its newline
                    warnings.warn(
                        f"{self.path}: line {number} is torn (the writer was killed "
                        f"mid-write); skipped {len(raw)} bytes",
                        TornLineWarning,
                        stacklevel=2,
                    )

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row durably: flushed and fsync'd before this returns."""
        self._write((row,))

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append a batch of rows with one write and one fsync; return how many.

        Every row is encoded before anything is written, so a row that is not
        JSON-serialisable raises (``TypeError``/``ValueError``) and writes nothing.
        A torn tail left by an earlier writer is repaired first (see :meth:`repair`).
        """
        return self._write(rows)

    def _write(self, rows: Iterable[Mapping[str, Any]]) -> int:
        data = b"".join(_encode(row) for row in rows)
        if not data:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with self.path.open("a+b") as fh:  # O_APPEND: every write lands at the end
            self._repair(fh, stacklevel=4)  # warn at the caller of append/extend
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if created:  # make the new directory entry durable too
            fsync_path(self.path.parent)
        return data.count(b"\n")

    def repair(self) -> int:
        """Make the file end at a line boundary; return the bytes removed (0 if none).

        O(1) when the file ends in a newline: one byte is read. Otherwise it scans back
        to the previous newline: a tail that is a whole JSON object only lacked its
        newline, which is added; anything else is a torn line, cut off with a
        :class:`TornLineWarning`. :meth:`extend` calls this before every batch.
        """
        if not self.path.exists():
            return 0
        with self.path.open("a+b") as fh:
            return self._repair(fh, stacklevel=3)

    def _repair(self, fh: Any, stacklevel: int) -> int:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        start = _line_start(fh, size)
        fh.seek(start)
        if _parse(fh.read(size - start))[0] is not None:
            fh.write(b"\n")
            removed = 0
        else:
            fh.truncate(start)
            removed = size - start
        fh.flush()
        os.fsync(fh.fileno())
        if removed:
            warnings.warn(
                f"{self.path}: dropped a torn last line ({removed} bytes at byte offset "
                f"{start}) left by a writer killed mid-write",
                TornLineWarning,
                stacklevel=stacklevel,
            )
        return removed


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    """Return ``(row, "")`` for a JSON object, else ``(None, what is wrong)``."""
    try:
        value = json.loads(raw)
    except ValueError as err:  # JSONDecodeError, or UnicodeDecodeError on bad bytes
        return None, f"is not valid JSON: {err}"
    if not isinstance(value, dict):
        return None, f"is not a JSON object (got {type(value).__name__})"
    return value, ""


def _encode(row: Mapping[str, Any]) -> bytes:
    if not isinstance(row, Mapping):
        raise TypeError(f"a JSONL row must be a mapping, got {type(row).__name__}")
    # json.dumps escapes newlines inside strings, so a row is always exactly one line.
    return json.dumps(row, sort_keys=True).encode() + b"\n"


def _line_start(fh: Any, size: int) -> int:
    """Return the offset just after the last newline before ``size`` (0 if none)."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        fh.seek(start)
        found = fh.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file or a folder to disk (a folder: so a rename or a new entry in it lasts)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
