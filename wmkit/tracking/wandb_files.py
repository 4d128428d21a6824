"""Read W&B runs back from their files: what an offline run recorded, without the server.

A run folder (``offline-run-<time>-<id>/`` or ``run-<time>-<id>/``) holds
``run-<id>.wandb``, the run's transaction log: W&B's ``Record`` protobufs
(:mod:`wandb.proto.wandb_internal_pb2`) in LevelDB's log format (32 KiB blocks; each
chunk a 7-byte header: CRC-32 of its type byte and data, length, type: full, first,
middle, last) behind a 7-byte file header (``:W&B``, magic ``0xBEE1``, version 0).
W&B 0.31 reads it in Go only, so this module reads it itself; ``wandb`` is needed for
the protobuf schema alone.

:func:`wandb_runs` lists every run under a folder (a run folder, a sweep folder), e.g.
to check that a sweep made one run per job, all in one group.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wmkit.tracking.wandb_logger import import_wandb

__all__ = ["WandbRun", "read_records", "read_run", "wandb_runs"]

_BLOCK = 32 * 1024
_HEADER = struct.Struct("<IHB")  # crc32, length, type
_FILE_HEADER = struct.Struct("<4sHB")  # ":W&B", 0xBEE1, version
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


@dataclass
class WandbRun:
    """What one W&B run's transaction log holds.

    Attributes:
        path: the run's folder.
        run_id, project, group, job_type, name: the run's identity.
        tags: its tags.
        config: the run's config (its last value of every key; W&B's own ``_wandb``
            left out).
        summary: the last value of every summary key (``_``-prefixed keys left out).
        history: one dict per ``log`` call, in order (``_``-prefixed keys left out).
        artifacts: ``(name, type, [file paths inside it])`` per logged artifact.
        exit_code: the exit code the run finished with (None: it did not finish).
    """

    path: Path
    run_id: str = ""
    project: str = ""
    group: str = ""
    job_type: str = ""
    name: str = ""
    tags: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    artifacts: list[tuple[str, str, list[str]]] = field(default_factory=list)
    exit_code: int | None = None


def read_records(path: str | Path) -> Iterator[bytes]:
    """The serialised records of a ``.wandb`` transaction log, in order.

    Raises:
        ValueError: not a W&B transaction log, or a damaged chunk (bad CRC, a
            continuation without its start).
    """
    data = Path(path).read_bytes()
    if len(data) < _FILE_HEADER.size:
        raise ValueError(f"{path}: too short for a W&B transaction log")
    ident, magic, version = _FILE_HEADER.unpack_from(data)
    if ident != b":W&B" or magic != 0xBEE1 or version != 0:
        raise ValueError(f"{path}: not a W&B transaction log (header {data[:7]!r})")
    pos, pending = _FILE_HEADER.size, None
    while pos + _HEADER.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER.size:  # a block's tail too short for a header is padding
            pos += left
            continue
        crc, length, kind = _HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zero padding to the block's end
            pos += left
            continue
        chunk = data[pos + _HEADER.size : pos + _HEADER.size + length]
        if len(chunk) < length:
            break  # a torn last record (the writer was killed)
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            raise ValueError(f"{path}: damaged record at byte {pos} (CRC mismatch)")
        pos += _HEADER.size + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind in (_MIDDLE, _LAST):
            if pending is None:
                raise ValueError(f"{path}: record continued at byte {pos} without its start")
            pending += chunk
            if kind == _LAST:
                yield pending
                pending = None
        else:
            raise ValueError(f"{path}: unknown chunk type {kind} at byte {pos}")


def _key(item: Any) -> str:
    return item.key or item.nested_key[0]


def _put(target: dict[str, Any], item: Any) -> None:
    """Set ``item``'s value in ``target``: under its key, or along its nested key.

    W&B writes a media value (a table, an image) as one item per field, each with a
    nested key (``["leaderboard", "path"]``); the value is rebuilt as a dict.
    """
    value = json.loads(item.value_json)
    if item.key or len(item.nested_key) < 2:
        target[_key(item)] = value
        return
    *parents, last = item.nested_key
    for name in parents:
        target = target.setdefault(name, {})
    target[last] = value


def read_run(folder: str | Path) -> WandbRun:
    """Read the W&B run in ``folder`` (the folder that holds ``run-<id>.wandb``).

    Raises:
        FileNotFoundError: no ``run-*.wandb`` in the folder.
        ModuleNotFoundError: wandb is not installed (its protobuf schema is needed).
    """
    folder = Path(folder)
    logs = sorted(folder.glob("run-*.wandb"))
    if not logs:
        raise FileNotFoundError(f"no run-*.wandb transaction log in {folder}")
    import_wandb()
    from wandb.proto import wandb_internal_pb2 as pb

    run = WandbRun(path=folder)
    for raw in read_records(logs[0]):
        record = pb.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            r = record.run
            run.run_id, run.project, run.group = r.run_id, r.project, r.run_group
            run.job_type, run.name, run.tags = r.job_type, r.display_name, list(r.tags)
            for item in r.config.update:
                _put(run.config, item)
        elif kind == "config":
            for item in record.config.update:
                _put(run.config, item)
            for item in record.config.remove:
                run.config.pop(_key(item), None)
        elif kind == "history":
            row: dict[str, Any] = {}
            for item in record.history.item:
                if not _key(item).startswith("_"):
                    _put(row, item)
            run.history.append(row)
        elif kind == "summary":
            for item in record.summary.update:
                if not _key(item).startswith("_"):
                    _put(run.summary, item)
        elif kind == "artifact":
            a = record.artifact
            run.artifacts.append((a.name, a.type, [m.path for m in a.manifest.contents]))
        elif kind == "exit":
            run.exit_code = record.exit.exit_code
    run.config.pop("_wandb", None)
    return run


def wandb_runs(folder: str | Path) -> list[WandbRun]:
    """Every W&B run under ``folder`` (any depth), sorted by path.

    A run folder holds one per time it ran (a resumed run folder, more); a sweep
    folder one per job: ``{r.group for r in runs}`` is the sweep's one group, and
    ``r.job_type`` the entry point of each.
    """
    folders = sorted(
        {
            p.parent
            for p in Path(folder).rglob("run-*.wandb")
            if p.parent.name.startswith(("offline-run-", "run-"))
        }
    )
    return [read_run(f) for f in folders]
