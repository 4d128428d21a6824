"""Records of governed persistent memory (seed 002) and the values its API returns.

A ``GovernedState`` is one unit of agent memory bound to its source: who said it, with
what authority, at which step, for how long, and on which other states it rests.
Everything stored is a pydantic model (frozen, ``extra="forbid"``, strict numbers), so
a record an LLM emitted is validated before it reaches the store; the small in-process
results of the API (``SetResult``, ``Lookup``, ``RollbackResult``) are NamedTuples.

Authority orders conflicts: ``TEMPORARY < ASSUMPTION < FACT < SYSTEM``. TEMPORARY lives
in the process only (never persisted); SYSTEM outranks FACT and changes only through a
release (a write over a live SYSTEM state is refused, whatever its authority).

Lifecycle of a stored version: ``ACTIVE`` (written, in use) -> ``STABLE`` (confirmed;
a target for dependency fallback) -> ``PENDING_RELEASE`` (phase one of a release done:
unusable, waiting for the governor) -> ``ARCHIVED`` (released, superseded, rejected or
rolled back: history only). ``get_state`` only ever serves ACTIVE or STABLE versions.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from enum import Enum
from typing import Literal, NamedTuple

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    StrictInt,
    StrictStr,
    field_validator,
    model_validator,
)

from wmkit.memory.errors import InvalidRecordError, UnknownAuthorityError

__all__ = [
    "MAX_DEPENDENCIES",
    "MAX_KEY_LENGTH",
    "MAX_STEP",
    "Authority",
    "GovernedState",
    "Lifecycle",
    "Lookup",
    "LookupReason",
    "ReleaseEntry",
    "ReleaseOperation",
    "ReleaseStatus",
    "RollbackResult",
    "SetResult",
    "StoredState",
    "fact_key",
    "parse_enum",
]

MAX_KEY_LENGTH = 256
MAX_DEPENDENCIES = 64
# The largest step a store holds (a signed 64-bit column on both backends): a record
# past it could not be written, so it does not validate.
MAX_STEP = 2**63 - 1
# Printable, no surrounding whitespace: keys are identifiers, not prose.
_KEY_RE = re.compile(r"[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?")


class Authority(str, Enum):
    """How far a state may be trusted, lowest first (see the module docstring)."""

    TEMPORARY = "TEMPORARY"
    ASSUMPTION = "ASSUMPTION"
    FACT = "FACT"
    SYSTEM = "SYSTEM"

    @property
    def rank(self) -> int:
        """Position in the order ``TEMPORARY < ASSUMPTION < FACT < SYSTEM`` (0..3)."""
        return _RANK[self]


_RANK = {a: i for i, a in enumerate(Authority)}


class Lifecycle(str, Enum):
    """Where a stored version is in its life; only ACTIVE and STABLE are served."""

    ACTIVE = "ACTIVE"
    STABLE = "STABLE"
    PENDING_RELEASE = "PENDING_RELEASE"
    ARCHIVED = "ARCHIVED"


class ReleaseOperation(str, Enum):
    """What a committed release does to its state.

    ``ARCHIVE`` retires the state (history keeps it). ``DOWNGRADE`` retires a FACT or
    SYSTEM state and writes its value again as a new ASSUMPTION version, unless a newer
    version of the key was written meanwhile.
    """

    ARCHIVE = "ARCHIVE"
    DOWNGRADE = "DOWNGRADE"


class ReleaseStatus(str, Enum):
    """State of a release log entry: waiting, committed, or given up (dead letter)."""

    PENDING = "PENDING"
    DONE = "DONE"
    DEAD = "DEAD"


def parse_enum(kind: type[Enum], value: object) -> Enum:
    """Return ``value`` as a member of ``kind``, accepting members and their names.

    Raises:
        UnknownAuthorityError: ``value`` is not a member or member name of ``kind``.
    """
    if isinstance(value, kind):
        return value
    try:
        return kind(value)
    except ValueError:
        names = ", ".join(m.value for m in kind)
        raise UnknownAuthorityError(
            f"unknown {kind.__name__} {value!r}: expected one of {names}"
        ) from None


def _check_key(key: str) -> str:
    if not _KEY_RE.fullmatch(key):
        raise ValueError(
            f"key {key!r} must be printable text without control characters or "
            "surrounding whitespace"
        )
    return key


def _now() -> datetime:
    return datetime.now(timezone.utc)


class GovernedState(BaseModel):
    """One unit of memory, bound to its source and authority.

    Attributes:
        key: what the state is about, e.g. ``fact_key("person:ann", "budget")``;
            1..256 printable characters.
        value: any JSON value; its encoding is bounded by the manager's size limit.
        source: where it came from (``"user"``, ``"tool:search"``, ``"reasoning"``).
        authority: how far it may be trusted; decides conflicts.
        created_step: agent step at which the information was produced
            (0..``MAX_STEP``; the manager also bounds it by its clock).
        created_at: wall-clock time of creation, timezone-aware (UTC by default).
        ttl_steps: the state expires at ``created_step + ttl_steps`` (>= 1, at most
            ``MAX_STEP``) and is then released through the governor; None: no expiry.
        dependencies: keys this state rests on, unique, not its own key; each must
            have a usable persisted state when this one is written.
        metadata: free JSON details (tool call id, turn, sub-type of the source).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: StrictStr = Field(min_length=1, max_length=MAX_KEY_LENGTH)
    value: JsonValue
    source: StrictStr = Field(min_length=1, max_length=128)
    authority: Authority
    created_step: StrictInt = Field(ge=0, le=MAX_STEP)
    created_at: AwareDatetime = Field(default_factory=_now)
    ttl_steps: StrictInt | None = Field(default=None, ge=1, le=MAX_STEP)
    dependencies: tuple[StrictStr, ...] = Field(default=(), max_length=MAX_DEPENDENCIES)
    metadata: dict[StrictStr, JsonValue] = Field(default_factory=dict)

    @field_validator("key")
    @classmethod
    def _key_is_printable(cls, key: str) -> str:
        return _check_key(key)

    @field_validator("dependencies")
    @classmethod
    def _dependencies_are_keys(cls, deps: tuple[str, ...]) -> tuple[str, ...]:
        for dep in deps:
            if not 1 <= len(dep) <= MAX_KEY_LENGTH:
                raise ValueError(f"dependency {dep!r} must be 1..{MAX_KEY_LENGTH} characters")
            _check_key(dep)
        if len(set(deps)) != len(deps):
            raise ValueError(f"dependencies {list(deps)} repeat a key")
        return deps

    @model_validator(mode="after")
    def _not_own_dependency(self) -> GovernedState:
        # The smallest dependency cycle; longer ones need the store to see.
        if self.key in self.dependencies:
            raise ValueError(f"state {self.key!r} lists itself as a dependency")
        if self.ttl_steps is not None and self.created_step + self.ttl_steps > MAX_STEP:
            raise ValueError(
                f"created_step {self.created_step} + ttl_steps {self.ttl_steps} is past "
                f"the largest step a store holds ({MAX_STEP})"
            )
        return self

    @property
    def expires_step(self) -> int | None:
        """First step at which the state is expired, or None if it never expires."""
        return None if self.ttl_steps is None else self.created_step + self.ttl_steps


class StoredState(GovernedState):
    """A persisted version of a state: the record plus its place in the key's history.

    Attributes:
        id: store-wide write order (larger = written later).
        version: 1, 2, ... per key, in write order; every write gets one, kept or not.
        lifecycle: where the version is in its life.
        note: why an ARCHIVED (or PENDING_RELEASE) version is out of service.
        archived_step: the step at which it went out of service, if it did.
    """

    id: StrictInt
    version: StrictInt = Field(ge=1)
    lifecycle: Lifecycle
    note: str | None = None
    archived_step: StrictInt | None = None


class ReleaseEntry(BaseModel):
    """One row of the release log: a two-phase release of one stored version.

    Attributes:
        id: log order.
        state_id: the ``StoredState.id`` being released.
        key: its key.
        operation: what the commit does.
        reason: why it was asked for (``"user_cancellation"``, ``"ttl"``, ...).
        requested_step: agent step of the request.
        requested_at: wall-clock time of the request.
        status: PENDING until committed (DONE) or given up (DEAD).
        attempts: failed commit attempts so far.
        last_error: the last failure, if any.
        done_at: wall-clock time of the commit.
        worker: the governor that committed (or gave up on) it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: StrictInt
    state_id: StrictInt
    key: StrictStr
    operation: ReleaseOperation
    reason: StrictStr
    requested_step: StrictInt
    requested_at: AwareDatetime
    status: ReleaseStatus
    attempts: StrictInt = 0
    last_error: str | None = None
    done_at: AwareDatetime | None = None
    worker: str | None = None


class SetResult(NamedTuple):
    """The outcome of a write.

    Attributes:
        accepted: whether the written record is now the key's state.
        state: the key's state after the write: the new record if accepted, else the
            one that won the conflict.
        version: the version number given to the write (None for TEMPORARY writes,
            which are never persisted).
        reason: a short phrase saying why it was accepted or refused.
    """

    accepted: bool
    state: GovernedState
    version: int | None
    reason: str


LookupReason = Literal[
    "ok", "temporary", "missing", "pending_release", "archived", "expired", "below_authority"
]


class Lookup(NamedTuple):
    """The answer of ``get_state``.

    Attributes:
        key: the key asked for.
        state: the state served, or None. When ``source_key != key`` it is the state of
            a dependency of ``key`` (fallback), not a value of ``key``.
        source_key: the key whose state is served, None when nothing is.
        reason: why ``key`` itself was served (``"ok"``, ``"temporary"``) or not.
    """

    key: str
    state: GovernedState | None
    source_key: str | None
    reason: LookupReason

    @property
    def found(self) -> bool:
        """Whether ``key`` itself was served (not a fallback, not nothing)."""
        return self.state is not None and self.source_key == self.key

    @property
    def fallback(self) -> bool:
        """Whether a dependency of ``key`` was served instead of ``key``."""
        return self.state is not None and self.source_key != self.key


class RollbackResult(NamedTuple):
    """What ``rollback`` did, each tuple sorted.

    Attributes:
        rolled_back: keys whose versions written after the step were put up for
            release.
        invalidated: keys of states that depended on a rolled-back version, put up for
            release with it.
        restored: keys whose version from at or before the step is live again.
        releases: ids of the release log entries written.
    """

    rolled_back: tuple[str, ...]
    invalidated: tuple[str, ...]
    restored: tuple[str, ...]
    releases: tuple[int, ...]


def fact_key(subject: str, relation: str) -> str:
    """Return the memory key of the fact slot ``(subject, relation)``: ``"subject|relation"``.

    Raises:
        InvalidRecordError: ``subject`` contains ``|`` or either part is empty.
    """
    if not subject or not relation or "|" in subject:
        raise InvalidRecordError(
            f"fact key parts must be non-empty and the subject free of '|': "
            f"{subject!r}, {relation!r}"
        )
    return f"{subject}|{relation}"
