r"""Append-only JSONL logs that survive a writer killed mid-write.

One JSON object per line. :meth:`JsonlLog.extend` writes its batch as one buffer, with
one ``write`` (``O_APPEND``) and one ``fsync``. That alone does not make a batch atomic:
a ``write`` that a ``SIGKILL`` interrupts keeps the pages it had copied in (measured on
ext4: 25 of 30 kills left part of a batch of up to 512 KB). So every line of a batch but
its last ends in a tab before its newline (``{...}\t\n``: still JSON Lines, a tab is
whitespace), and a batch is whole once a line without the tab closes it. A killed writer
leaves at most one unfinished batch, always at the end; readers skip it with a
:class:`TornLineWarning`, and the next append cuts it off first. That repair reads the
last two bytes (O(1)) and, only when the file does not end in a closing line, scans back
over the unfinished batch (O(its size)).

A bad line anywhere else is corruption (the file was edited or damaged, not cut short):
:meth:`JsonlLog.rows` raises a ``ValueError`` naming file and line, and
:meth:`JsonlLog.salvage` (or ``rows(salvage=True)``) skips and reports each bad line and
keeps every other complete row.

One writer per file: the repair assumes nobody else is writing the file at that moment.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CorruptLineWarning",
    "DamagedLines",
    "JsonlLog",
    "Salvaged",
    "TornLineWarning",
    "fsync_path",
]

_CHUNK = 1 << 16  # bytes read per step when scanning back for a newline
_MORE = b"\t"  # ends every line of a batch but its last: "the batch goes on"
_MORE_NEWLINE = _MORE + b"\n"
_EXCERPT = 60  # bytes of a damaged line quoted in reports


class TornLineWarning(UserWarning):
    """A JSONL file ended in a torn line or an unfinished batch (its writer was killed)."""


class CorruptLineWarning(UserWarning):
    """A salvage read skipped a corrupt line in the middle of a JSONL file."""


@dataclass(frozen=True)
class DamagedLines:
    """Lines a read skipped.

    Attributes:
        path: the file.
        line: the number of the first line skipped (1-based, blank lines counted).
        count: how many lines were skipped together (an unfinished batch: all of it).
        size: how many bytes they hold.
        problem: what is wrong, in words.
        excerpt: the start of the first skipped line, as ``repr`` shows it.
        torn: True for the end of the file, cut short by a killed writer; False for
            corruption in the middle (the file was edited or damaged).
    """

    path: Path
    line: int
    count: int
    size: int
    problem: str
    excerpt: str
    torn: bool

    def __str__(self) -> str:
        return f"{self.where} {self.problem} ({self.size} bytes: {self.excerpt})"

    @property
    def where(self) -> str:
        """File and line(s): ``"log.jsonl: line 3"`` or ``"log.jsonl: lines 3-9"``."""
        if self.count == 1:
            return f"{self.path}: line {self.line}"
        return f"{self.path}: lines {self.line}-{self.line + self.count - 1}"


@dataclass(frozen=True)
class Salvaged:
    """What :meth:`JsonlLog.salvage` could read.

    Attributes:
        rows: every complete row, in file order.
        damaged: what was skipped, in file order: corrupt lines, then a torn end.
    """

    rows: list[dict[str, Any]]
    damaged: tuple[DamagedLines, ...]


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

    def rows(self, *, salvage: bool = False) -> Iterator[dict[str, Any]]:
        """Yield every complete row in file order, streaming (a batch once it closes).

        A last line without its newline is kept when it is a whole JSON object that
        closes its batch (the writer died between the object and the newline). A torn
        last line, or a batch its writer did not finish, is skipped with a
        :class:`TornLineWarning` naming its lines.

        Args:
            salvage: skip each corrupt line in the middle with a
                :class:`CorruptLineWarning` naming file, line and an excerpt, and read
                on; by default the first one raises.

        Raises:
            ValueError: (unless ``salvage``) a line other than the last is not a JSON
                object, naming the file, the line number and the salvage read.
        """
        for item in self._scan():
            if isinstance(item, dict):
                yield item
            elif item.torn:
                warnings.warn(
                    f"{item.where} {item.problem}; skipped {item.size} bytes",
                    TornLineWarning,
                    stacklevel=2,
                )
            elif salvage:
                warnings.warn(f"{item}; skipped", CorruptLineWarning, stacklevel=2)
            else:
                raise ValueError(
                    f"{item}. To skip corrupt lines and keep every other row, read it with "
                    f"JsonlLog({str(self.path)!r}).salvage() or .rows(salvage=True)"
                )

    def salvage(self) -> Salvaged:
        """Read every complete row, skipping damaged lines, and say which were skipped.

        Nothing is written: the file stays as it is, for a person to look at. Unlike
        :meth:`rows` this warns of nothing; the skipped lines are in the result. The
        whole rows of a batch that holds a corrupt line are kept.
        """
        rows: list[dict[str, Any]] = []
        damaged: list[DamagedLines] = []
        for item in self._scan():
            if isinstance(item, dict):
                rows.append(item)
            else:
                damaged.append(item)
        return Salvaged(rows, tuple(damaged))

    def _scan(self) -> Iterator[dict[str, Any] | DamagedLines]:
        """Yield the rows, and a :class:`DamagedLines` for each stretch that is not rows."""
        if not self.path.exists():
            return
        batch: list[dict[str, Any]] = []  # rows of a batch not closed yet
        first = start = offset = 0  # where that batch began: line number, byte offset
        head = b""  # and its first line
        with self.path.open("rb") as fh:
            for number, raw in enumerate(fh, start=1):
                line_start, offset = offset, offset + len(raw)
                if not raw.strip():
                    continue  # a blank line, inside a batch or not
                row, problem = _parse(raw)  # JSON allows the tab and the newline around it
                if not batch:
                    first, start, head = number, line_start, raw
                if not raw.endswith(b"\n"):  # this is the last line
                    if row is not None and not raw.endswith(_MORE):  # lost its newline only
                        yield from batch
                        yield row
                        return
                    if not batch and row is None:
                        problem = "is torn (its writer was killed mid-write)"
                    else:
                        problem = "are a batch its writer did not finish (killed mid-write)"
                    count = number - first + 1
                    yield DamagedLines(
                        self.path, first, count, offset - start, problem, _excerpt(head), True
                    )
                    return
                if row is None:
                    yield from batch  # the whole rows of a damaged batch are kept
                    batch = []
                    yield DamagedLines(
                        self.path, number, 1, len(raw), problem, _excerpt(raw), False
                    )
                elif raw.endswith(_MORE_NEWLINE):
                    batch.append(row)
                else:
                    yield from batch
                    batch = []
                    yield row
        if batch:  # the last lines said "more to come", and none came
            count = number - first + 1
            problem = "are a batch its writer did not finish (killed mid-write)"
            yield DamagedLines(
                self.path, first, count, offset - start, problem, _excerpt(head), True
            )

    def append(self, row: Mapping[str, Any]) -> None:
        """Append one row durably: flushed and fsync'd before this returns."""
        self._write((row,))

    def extend(self, rows: Iterable[Mapping[str, Any]]) -> int:
        """Append a batch of rows atomically, with one write and one fsync; return how many.

        Every row is encoded before anything is written, so a row that is not
        JSON-serialisable raises (``TypeError``/``ValueError``) and writes nothing.
        A torn tail left by an earlier writer is repaired first (see :meth:`repair`).
        If the writer is killed while this runs, readers see the whole batch or none.
        """
        return self._write(rows)

    def _write(self, rows: Iterable[Mapping[str, Any]]) -> int:
        lines = [_encode(row) for row in rows]
        if not lines:
            return 0
        # Each line but the last says "more to come", so that a batch cut short shows.
        data = _MORE_NEWLINE.join(lines) + b"\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        created = not self.path.exists()
        with self.path.open("a+b") as fh:  # O_APPEND: every write lands at the end
            self._repair(fh, stacklevel=4)  # warn at the caller of append/extend
            _write_all(fh.fileno(), data)
            os.fsync(fh.fileno())
        if created:  # make the new directory entry durable too
            fsync_path(self.path.parent)
        return len(lines)

    def repair(self) -> int:
        """Make the file end with a whole batch; return the bytes removed (0 if none).

        O(1) when the file ends in a line that closes its batch: two bytes are read.
        Otherwise it scans back over the unfinished batch: a last line that is a whole
        JSON object closing its batch only lacked its newline, which is added; anything
        else (a torn line, a batch whose closing line never came) is cut off with a
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
        fh.seek(max(0, size - 2))
        tail = fh.read()
        if tail.endswith(b"\n") and not tail[:-1].isspace():
            return 0  # the last line has its newline and closes its batch
        cut, lines = size, 0  # cut the file at `cut`, dropping `lines` lines
        for start, raw in _lines_backward(fh, size):
            body = raw[:-1] if raw.endswith(b"\n") else raw
            if not body.strip():
                continue  # a blank line
            if body.endswith(_MORE) or (body is raw and _parse(body)[0] is None):
                cut, lines = start, lines + 1  # torn, or in a batch that never closed
                continue
            if body is raw:  # a whole object closing its batch, only its newline lost
                fh.write(b"\n")
            break
        if cut < size:
            fh.truncate(cut)
        fh.flush()
        os.fsync(fh.fileno())
        removed = size - cut
        if removed:
            what = "a torn last line" if lines == 1 else f"an unfinished batch of {lines} lines"
            warnings.warn(
                f"{self.path}: dropped {what} ({removed} bytes at byte offset {cut}) "
                "left by a writer killed mid-write",
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
    """One row as one line, without its newline."""
    if not isinstance(row, Mapping):
        raise TypeError(f"a JSONL row must be a mapping, got {type(row).__name__}")
    # json.dumps escapes newlines and tabs inside strings, so a row is exactly one line
    # and never ends in a tab of its own.
    return json.dumps(row, sort_keys=True).encode()


def _excerpt(line: bytes) -> str:
    body = line.rstrip(b"\n")
    text = body[:_EXCERPT].decode("utf-8", errors="backslashreplace")
    return repr(text) + ("..." if len(body) > _EXCERPT else "")


def _write_all(fd: int, data: bytes) -> None:
    """Write ``data`` in one ``write`` call, looping only if the kernel takes less."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _lines_backward(fh: Any, size: int) -> Iterator[tuple[int, bytes]]:
    """Yield ``(offset, line)`` for the lines of the first ``size`` bytes, last first.

    It reads ``_CHUNK`` bytes at a time from the end, only as far back as the caller
    goes (unbuffered: a buffered read would fetch a whole buffer per short line).
    """
    fd = fh.fileno()
    limit = size - 1 if os.pread(fd, 1, size - 1) == b"\n" else size  # its own newline
    chunk, chunk_start, end = b"", size, size
    while end > 0:
        while True:  # the last newline before `limit` ends the line before this one
            found = chunk.rfind(b"\n", 0, limit - chunk_start) if chunk_start < limit else -1
            if found >= 0 or chunk_start == 0:
                start = chunk_start + found + 1
                break
            new_start = max(0, chunk_start - _CHUNK)
            chunk, chunk_start = os.pread(fd, chunk_start - new_start, new_start), new_start
        if end <= chunk_start + len(chunk):  # the line lies in this chunk
            yield start, chunk[start - chunk_start : end - chunk_start]
        else:  # a line longer than what is left of the chunk
            yield start, os.pread(fd, end - start, start)
        end, limit = start, start - 1


def fsync_path(path: str | os.PathLike[str]) -> None:
    """Flush a file or a folder to disk (a folder: so a rename or a new entry in it lasts)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
