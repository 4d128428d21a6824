"""A cache of chat completions keyed by the exact request.

Two requests are identical when their canonical JSON (``model``, ``messages`` and the
request ``params``, keys sorted) is identical; the key is its SHA-256. The cache keeps
at most ``max_entries`` replies in memory (least recently used go first) and, with a
``path``, also appends every new reply to a JSONL file that the next process loads.

JSONL rather than SQLite: an append-only log is one ``write`` per reply, readable with
any tool, and safe to share between processes that append (``O_APPEND``). A torn line
(a process killed mid-write) or any other malformed line is skipped on load and counted
in ``skipped``, never fatal. The file is never compacted: a key written twice is read
back with its last value.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wmkit.llm.types import Completion, Message

__all__ = ["ReplyCache", "request_key"]


def request_key(model: str, messages: Sequence[Message], params: Mapping[str, Any]) -> str:
    """Return the cache key of a request: SHA-256 hex of its canonical JSON.

    Raises:
        TypeError: a message or parameter value that is not JSON-serialisable.
    """
    try:
        text = json.dumps(
            {"model": model, "messages": list(messages), "params": dict(params)},
            sort_keys=True,
            ensure_ascii=False,
            separators=(",", ":"),
            allow_nan=False,
        )
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"request is not JSON-serialisable, so it cannot be cached: {err}"
        ) from None
    return hashlib.sha256(text.encode()).hexdigest()


class ReplyCache:
    """An LRU of completions, optionally persisted to an append-only JSONL file.

    Thread-safe. Each file line is ``{"key": ..., "text": ..., "finish_reason": ...,
    "model": ...}``.

    Args:
        path: the JSONL file to load and append to (created with its folder if
            missing), or None for a memory-only cache.
        max_entries: most replies held in memory; older ones are forgotten by this
            process (they stay in the file).

    Attributes:
        skipped: file lines that could not be read on load (torn or malformed).
        hits: lookups answered from the cache.
    """

    def __init__(self, path: str | Path | None = None, *, max_entries: int = 10_000) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be >= 1, got {max_entries}")
        self.path = Path(path) if path is not None else None
        self.max_entries = max_entries
        self.skipped = 0
        self.hits = 0
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, Completion] = OrderedDict()
        self._needs_newline = False  # the file ends in a torn line: start ours on a new one
        if self.path is not None:
            self._load(self.path)

    def _load(self, path: Path) -> None:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            return
        data = path.read_bytes()
        self._needs_newline = bool(data) and not data.endswith(b"\n")
        for line in data.splitlines():
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                key, completion = (
                    row["key"],
                    Completion(row["text"], row.get("finish_reason"), row.get("model", ""), True),
                )
                if not isinstance(key, str) or not isinstance(completion.text, str):
                    raise TypeError("key and text must be strings")
            except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
                self.skipped += 1
                continue
            self._remember(key, completion)

    def _remember(self, key: str, completion: Completion) -> None:
        self._entries[key] = completion
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Completion | None:
        """Return the cached completion for ``key`` (marked ``cached=True``), or None."""
        with self._lock:
            completion = self._entries.get(key)
            if completion is None:
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return completion

    def put(self, key: str, completion: Completion) -> None:
        """Store ``completion`` under ``key`` in memory and, with a path, in the file."""
        stored = completion._replace(cached=True)
        with self._lock:
            self._remember(key, stored)
            if self.path is None:
                return
            row = {
                "key": key,
                "text": stored.text,
                "finish_reason": stored.finish_reason,
                "model": stored.model,
            }
            line = json.dumps(row, ensure_ascii=False) + "\n"
            if self._needs_newline:
                line = "\n" + line
                self._needs_newline = False
            # One write on an O_APPEND descriptor: concurrent appenders never interleave
            # inside a line on a local file system.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                data = line.encode()
                while data:  # a regular file takes it all at once; the loop is for the rare rest
                    data = data[os.write(fd, data) :]
            finally:
                os.close(fd)
