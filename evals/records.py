"""Episode records: everything an episode showed, kept so it can be scored later.

:func:`~wmkit.evals.runner.play_episode` plays an episode and returns an
:class:`EpisodeRecord`; every metric (:mod:`~wmkit.evals.metrics`) is a pure function
of one. Step 0 is the state after ``reset``; step t follows the t-th command.

On disk (``wmkit-eval records=true``) a record is one gzip'd JSONL file per episode,
``<run folder>/records/<env>__h<horizon>__<agent>__s<seed>.jsonl.gz``: a header line
(:class:`RecordHeader`) then one line per step (:class:`StepLine`). A file is written
whole to a temporary name and renamed, so a killed run leaves the complete record or none.

States are diff-encoded, in memory as on disk: a step holds the facts added and removed
since the step before (step 0: since the empty state), and :meth:`EpisodeRecord.states`
rebuilds the states in order. A 500-step episode whose state barely moves then costs
little more than its text, and a record in memory keeps a few objects per step rather
than every fact of every state (which Python's cyclic GC would rescan again and again).

A tracker that predicts the change of a step before it reads the observation may say
so through an attribute ``last_prediction``: a :class:`~wmkit.world.types.Delta` (or
None) for the step it last took in. The runner records it as :attr:`StepRecord.
predicted`; trackers without the attribute get None there.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from wmkit.jsonl import fsync_path
from wmkit.llm.types import Usage
from wmkit.world.types import Delta, Fact, Probe, ProbeKind, WorldState

__all__ = [
    "FORMAT",
    "RECORDS_DIR",
    "RECORD_SUFFIX",
    "USAGE_KEYS",
    "Change",
    "EpisodeRecord",
    "RecordError",
    "RecordHeader",
    "StepLine",
    "StepRecord",
    "encode_record",
    "episode_label",
    "read_record",
    "record_path",
    "record_paths",
    "write_record",
    "write_record_file",
]

RECORDS_DIR = "records"
"""The folder of a run's records, under the run folder."""

RECORD_SUFFIX = ".jsonl.gz"

USAGE_KEYS = tuple(field.name for field in dataclasses.fields(Usage))
"""The keys of an episode's ``usage`` (:class:`~wmkit.llm.types.Usage`'s counters)."""

FORMAT = 1
"""Version of the on-disk layout; a reader refuses other versions by name."""

# Measured on 180 default-benchmark records (38 MB of JSONL): level 1 gives 4.2 MB in
# 0.2 s, 6 gives 2.6 MB in 0.4 s, 9 gives 2.5 MB in 1.2 s.
_COMPRESS_LEVEL = 6


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What one step of an episode showed: the agent's side and the truth's.

    Attributes:
        action: the command that led here; None at step 0.
        observation: the text the agent got.
        reward: the env's reward for ``action`` (0.0 at step 0).
        believed: the change the agent's tracked state shows: its state after taking
            in ``observation`` minus its state at the step before.
        predicted: the change the tracker predicted for this step
            (``last_prediction``), or None when it makes no prediction.
        truth: the change of the true state (``info["wm.state"]``) since the step before.
        true_action: the action-driven part of the true change (``info["wm.delta"]``).
        true_event: the event-driven part of the true change.
        mentioned: entity ids mentioned at this step (``info["wm.mentioned"]``).
        probes: the probes due at this step, in the env's order.
        answers: the tracked state's answer to each probe (``tracked.value``), or None.
        score: the env's cumulative score (``info["score"]``, 0 when absent).
        max_score: the env's maximum score (0 when absent).
        terminated: the episode ended here (won or lost).
        truncated: the episode was cut here (step limit).
    """

    action: str | None
    observation: str
    reward: float
    believed: Delta
    predicted: Delta | None
    truth: Delta
    true_action: Delta
    true_event: Delta
    mentioned: tuple[str, ...]
    probes: tuple[Probe, ...]
    answers: tuple[str | None, ...]
    score: int
    max_score: int
    terminated: bool
    truncated: bool


@dataclass(frozen=True)
class EpisodeRecord:
    """One played episode, step by step (index = step; step 0 is after ``reset``).

    Attributes:
        seed: the seed ``reset`` got.
        agent: the agent's name.
        oracle: whether the agent read ground truth.
        steps: one :class:`StepRecord` per step, at least one.
        usage: what the agent's language models cost in the episode
            (:meth:`wmkit.llm.types.Usage.as_dict`: calls, cached, tokens_in,
            tokens_out, seconds, cost, valid, repaired, failed); None without one.
        seconds: wall seconds the episode took, from reset to its last step, the
            agent's own thinking (its searches) included; None when not timed.
    """

    seed: int
    agent: str
    oracle: bool
    steps: tuple[StepRecord, ...]
    usage: dict[str, float] | None = None
    seconds: float | None = None

    @property
    def length(self) -> int:
        """The number of commands sent (``len(steps) - 1``)."""
        return len(self.steps) - 1

    def states(self) -> Iterator[tuple[WorldState, WorldState]]:
        """Yield ``(tracked, truth)`` at every step, in step order, rebuilt from the changes."""
        tracked = truth = WorldState()
        for step in self.steps:
            tracked = _apply(tracked, step.believed)
            truth = _apply(truth, step.truth)
            yield tracked, truth


# --- the on-disk layout ------------------------------------------------------------------


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


FactList = list[tuple[str, str, str]]


class Change(_Line):
    """Facts added and removed, as JSON lists of ``[subject, relation, object]``."""

    added: FactList = []
    removed: FactList = []


class RecordHeader(_Line):
    """The first line of a record file.

    Attributes:
        format: the layout version (:data:`FORMAT`).
        seed, agent, oracle: as in :class:`EpisodeRecord`.
        steps: how many step lines follow (``length + 1``).
        meta: what the suite knows of the episode and the record does not (``env``,
            ``env_id``, ``horizon``, ``variant``, ``spec``): merged into its row when
            the run is rescored.
        usage: as in :class:`EpisodeRecord` (its keys :data:`USAGE_KEYS`); absent
            from the line, and None, when the agent called no language model (and in
            records written before it existed).
        seconds: as in :class:`EpisodeRecord`; absent (None) in records written
            before it existed.
    """

    kind: Literal["episode"] = "episode"
    format: int
    seed: int
    agent: str
    oracle: bool
    steps: int
    meta: dict[str, Any] = {}
    usage: dict[str, int | float] | None = None  # counts stay ints, as written
    seconds: float | None = None

    @field_validator("usage")
    @classmethod
    def _usage_keys(cls, usage: dict[str, float] | None) -> dict[str, float] | None:
        return None if usage is None else _checked_usage(usage)


def _checked_usage(usage: Mapping[str, float]) -> dict[str, float]:
    """``usage`` as a dict, if its keys are :data:`USAGE_KEYS` (ValueError otherwise)."""
    if sorted(usage) != sorted(USAGE_KEYS):
        raise ValueError(f"usage has keys {sorted(usage)}, expected {sorted(USAGE_KEYS)}")
    return dict(usage)


class StepLine(_Line):
    """One step of a record file; states are diffs against the step before."""

    kind: Literal["step"] = "step"
    action: str | None
    observation: str
    reward: float
    believed: Change
    predicted: Change | None
    truth: Change
    true_action: Change
    true_event: Change
    mentioned: list[str]
    probes: list[tuple[str, str, str, int, ProbeKind]]
    answers: list[str | None]
    score: int
    max_score: int
    terminated: bool
    truncated: bool


class RecordError(ValueError):
    """A record file is missing, torn, corrupt or of another format (the message names it)."""


def episode_label(env: str, horizon: int, agent: str, seed: int) -> str:
    """Return the file-name-safe label of an episode: ``<env>__h<h>__<agent>__s<seed>``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"{env}__h{horizon}__{agent}__s{seed}")


def record_path(
    run_dir: str | os.PathLike[str], env: str, horizon: int, agent: str, seed: int
) -> Path:
    """Return where the record of an episode of the run in ``run_dir`` lives."""
    label = episode_label(env, horizon, agent, seed)
    return Path(run_dir) / RECORDS_DIR / f"{label}{RECORD_SUFFIX}"


def record_paths(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Return every record file of the run in ``run_dir``, sorted (empty when none)."""
    folder = Path(run_dir) / RECORDS_DIR
    return sorted(folder.glob(f"*{RECORD_SUFFIX}")) if folder.is_dir() else []


def _change(added: Any, removed: Any) -> dict[str, list[Fact]]:
    return {"added": list(added), "removed": list(removed)}


def _delta(change: Change) -> Delta:
    return Delta(tuple(Fact(*f) for f in change.added), tuple(Fact(*f) for f in change.removed))


def _encode(record: EpisodeRecord, meta: Mapping[str, Any]) -> Iterator[bytes]:
    header = {
        "kind": "episode",
        "format": FORMAT,
        "seed": record.seed,
        "agent": record.agent,
        "oracle": record.oracle,
        "steps": len(record.steps),
        "meta": dict(meta),
    }
    if record.usage is not None:  # a record without one reads as before it existed
        header["usage"] = _checked_usage(record.usage)
    if record.seconds is not None:
        header["seconds"] = record.seconds
    yield json.dumps(header, sort_keys=True).encode() + b"\n"
    for step in record.steps:
        line = {
            "kind": "step",
            "action": step.action,
            "observation": step.observation,
            "reward": step.reward,
            "believed": _change(*step.believed),  # a Delta is (added, removed)
            "predicted": None if step.predicted is None else _change(*step.predicted),
            "truth": _change(*step.truth),
            "true_action": _change(*step.true_action),
            "true_event": _change(*step.true_event),
            "mentioned": list(step.mentioned),
            "probes": [list(p) for p in step.probes],
            "answers": list(step.answers),
            "score": step.score,
            "max_score": step.max_score,
            "terminated": step.terminated,
            "truncated": step.truncated,
        }
        yield json.dumps(line, sort_keys=True).encode() + b"\n"


def write_record(
    path: str | os.PathLike[str], record: EpisodeRecord, meta: Mapping[str, Any] | None = None
) -> Path:
    """Write ``record`` to ``path`` atomically: a temporary file, fsync'd, then renamed.

    Args:
        path: the record file (``.jsonl.gz``); its folder is created when missing.
        record: the episode.
        meta: JSON-ready identity of the episode in its suite (see
            :attr:`RecordHeader.meta`).

    Returns:
        The path written.

    Raises:
        TypeError: ``meta`` is not JSON-serialisable (nothing is written).
        ValueError: the record's ``usage`` has other keys than :data:`USAGE_KEYS`
            (nothing is written).
    """
    return write_record_file(path, encode_record(record, meta))


def encode_record(record: EpisodeRecord, meta: Mapping[str, Any] | None = None) -> bytes:
    """The bytes of ``record``'s file (what :func:`write_record` writes).

    A worker process encodes its episode and sends these bytes, a fraction of the
    pickled record, for the caller to write (:func:`write_record_file`).

    Raises:
        TypeError: ``meta`` is not JSON-serialisable.
        ValueError: the record's ``usage`` has other keys than :data:`USAGE_KEYS`.
    """
    # mtime=0: the same episode gives the same bytes.
    return gzip.compress(b"".join(_encode(record, meta or {})), _COMPRESS_LEVEL, mtime=0)


def write_record_file(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write a record file's bytes (:func:`encode_record`) to ``path`` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with temp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    fsync_path(path.parent)
    return path


def read_record(path: str | os.PathLike[str]) -> tuple[EpisodeRecord, dict[str, Any]]:
    """Read a record file back.

    Returns:
        The :class:`EpisodeRecord` and the header's ``meta``.

    Raises:
        RecordError: the file is missing, not gzip, cut short, not a record, of another
            format version, or its step count disagrees with its header; the message
            names the file (and the line, where there is one).
    """
    path = Path(path)
    try:
        lines = gzip.decompress(path.read_bytes()).splitlines()
    except FileNotFoundError:
        raise RecordError(f"{path}: no such record file") from None
    except (OSError, EOFError, zlib.error) as err:
        raise RecordError(f"{path}: not a readable gzip record file ({err})") from None
    if not lines:
        raise RecordError(f"{path}: empty record file")
    try:
        header = RecordHeader.model_validate_json(lines[0])
    except ValidationError as err:
        raise RecordError(f"{path}: line 1 is not a record header: {err}") from None
    if header.format != FORMAT:
        raise RecordError(
            f"{path}: record format {header.format}, this wmkit reads format {FORMAT}"
        )
    if len(lines) - 1 != header.steps:
        raise RecordError(
            f"{path}: the header says {header.steps} steps, the file holds {len(lines) - 1}"
        )
    steps = []
    for number, raw in enumerate(lines[1:], start=2):
        try:
            line = StepLine.model_validate_json(raw)
        except ValidationError as err:
            raise RecordError(f"{path}: line {number} is not a step: {err}") from None
        steps.append(
            StepRecord(
                action=line.action,
                observation=line.observation,
                reward=line.reward,
                believed=_delta(line.believed),
                predicted=None if line.predicted is None else _delta(line.predicted),
                truth=_delta(line.truth),
                true_action=_delta(line.true_action),
                true_event=_delta(line.true_event),
                mentioned=tuple(line.mentioned),
                probes=tuple(Probe(*p) for p in line.probes),
                answers=tuple(line.answers),
                score=line.score,
                max_score=line.max_score,
                terminated=line.terminated,
                truncated=line.truncated,
            )
        )
    if not steps:
        raise RecordError(f"{path}: a record needs at least step 0")
    record = EpisodeRecord(
        header.seed, header.agent, header.oracle, tuple(steps), header.usage, header.seconds
    )
    return record, dict(header.meta)


def _apply(state: WorldState, change: Delta) -> WorldState:
    if not change.added and not change.removed:
        return state  # states are immutable: an unchanged one is shared
    return state.apply(change)
