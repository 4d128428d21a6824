"""The state manager: the API an agent uses to remember, recall, release and roll back.

Every call is one database transaction, so an error or a crash leaves nothing
half-done. A transaction that loses a race with another writer (a conditional update
that matched nothing, a unique index refusing a version, a serialization failure or
deadlock) is rerun whole, with jittered exponential backoff, until ``write_timeout_s``
has passed; then ``WriteConflictError`` says the call was not made. Waiting for a
lock is bounded by the store's busy timeout instead (``StoreLockedError``). Either
way no write is ever dropped silently. On PostgreSQL a write first takes a
transaction-scoped advisory lock on its key, so writers of one key queue instead of
colliding; on SQLite ``BEGIN IMMEDIATE`` already serialises every writer.

The memory clock (TTLs count against it) moves only through ``advance``. A step in a
record (``created_step``, and ``created_step + ttl_steps``), or the step of a release,
is checked against it before anything is written: an int, >= 0, and at most
``max_step_skew`` ahead of the clock, so one hallucinated ``step=10**15`` in a record
a model emitted is refused (``ClockError``) instead of expiring every TTL at once.

What each call does:

- ``set_state`` / ``submit``: validate, resolve the conflict with the key's live
  version by authority, then recency (``created_step``; equal steps: the later write),
  and record the write as a new version whatever the outcome (history is kept).
  A SYSTEM state is never replaced by a write: release it first. TEMPORARY states stay
  in this process (never persisted), and only while no persisted state holds the key.
- ``get_state``: serve the key's live version if it is usable (ACTIVE or STABLE, not
  expired by the memory clock, authority high enough); otherwise fall back along its
  dependencies to the nearest one that is usable and either STABLE or at least FACT.
  A PENDING_RELEASE or ARCHIVED version is never served.
- ``mark_for_release``: phase one of a release (log entry + PENDING_RELEASE in one
  transaction); a ``Governor`` commits it later.
- ``rollback(to_step)``: put every live version created after ``to_step`` up for
  release, with what was written on top of it, and make live again the versions those
  had superseded. Releases are never undone: a released state does not come back.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import pydantic
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from wmkit.memory.errors import (
    ClockError,
    DanglingDependencyError,
    DependencyCycleError,
    InvalidRecordError,
    MissingStateError,
    NotReleasableError,
    OversizedValueError,
    WriteConflictError,
)
from wmkit.memory.store import (
    IS_LIVE,
    IS_PENDING,
    NOTE_REJECTED,
    NOTE_SUPERSEDED,
    Conflict,
    Store,
    advance_clock,
    decode_release,
    decode_state,
    dependents,
    encode_json,
    head_and_latest,
    insert_state,
    live_row,
    live_row_with_clock,
    live_rows,
    prepare_release,
    read_clock,
    release_log,
    set_lifecycle,
    states,
)
from wmkit.memory.types import (
    MAX_STEP,
    Authority,
    GovernedState,
    Lifecycle,
    Lookup,
    LookupReason,
    ReleaseEntry,
    ReleaseOperation,
    ReleaseStatus,
    RollbackResult,
    SetResult,
    StoredState,
    parse_enum,
)

__all__ = [
    "DEFAULT_MAX_STEP_SKEW",
    "DEFAULT_MAX_VALUE_BYTES",
    "DEFAULT_WRITE_TIMEOUT_S",
    "StateManager",
]

DEFAULT_MAX_VALUE_BYTES = 64 * 1024
DEFAULT_MAX_STEP_SKEW = 10_000
DEFAULT_WRITE_TIMEOUT_S = 30.0
# Retry delays: full jitter over an exponential window from 1 ms, capped at 50 ms (a
# write takes about a millisecond, so a larger window only idles).
_BACKOFF_BASE_S = 0.001
_BACKOFF_CAP_S = 0.05
# PostgreSQL only (see StateManager._lock_key).
_LOCK_KEY = sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:name, 0))")
_MAX_FALLBACK_DEPTH = 16
_T = TypeVar("_T")


class StateManager:
    """Governed memory over one ``Store``: the agent-facing API (see the module docstring).

    Args:
        store: where states live.
        max_value_bytes: largest UTF-8 JSON encoding of a value (and, separately, of
            metadata) that a write may carry.
        max_step_skew: how far ahead of the memory clock the step of a record or a
            release may be (>= 0); further is a ``ClockError``.
        write_timeout_s: how long a call that keeps losing races is retried before
            ``WriteConflictError`` (> 0). Lock waits are the store's busy timeout's.
    """

    def __init__(
        self,
        store: Store,
        *,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        max_step_skew: int = DEFAULT_MAX_STEP_SKEW,
        write_timeout_s: float = DEFAULT_WRITE_TIMEOUT_S,
    ) -> None:
        if max_value_bytes < 1:
            raise ValueError(f"max_value_bytes must be >= 1, got {max_value_bytes!r}")
        if not _is_step(max_step_skew):
            raise ValueError(f"max_step_skew must be an int >= 0, got {max_step_skew!r}")
        if not write_timeout_s > 0:
            raise ValueError(f"write_timeout_s must be > 0, got {write_timeout_s!r}")
        self.store = store
        self.max_value_bytes = max_value_bytes
        self.max_step_skew = max_step_skew
        self.write_timeout_s = write_timeout_s
        self._temporary: dict[str, GovernedState] = {}
        # Per-process jitter source: writers started together must not retry in step.
        self._jitter = random.Random()

    @classmethod
    def open(cls, url: str, *, schema: str | None = None, **kwargs: Any) -> StateManager:
        """Open a store (``Store.open(url, schema=schema)``) and manage it."""
        return cls(Store.open(url, schema=schema), **kwargs)

    def close(self) -> None:
        """Close the store's connections (TEMPORARY states are dropped)."""
        self._temporary.clear()
        self.store.close()

    def __enter__(self) -> StateManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------- writing

    def set_state(
        self,
        key: str,
        value: Any,
        *,
        source: str,
        authority: Authority | str,
        step: int,
        ttl_steps: int | None = None,
        dependencies: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
    ) -> SetResult:
        """Write ``value`` for ``key`` and resolve the conflict with its live version.

        Args:
            key: the state's key (see ``GovernedState``).
            value: any JSON value.
            source: where the information came from.
            authority: FACT, ASSUMPTION, TEMPORARY or SYSTEM (a member or its name).
            step: the agent step at which the information was produced: an int >= 0,
                at most ``max_step_skew`` ahead of the memory clock.
            ttl_steps: expire the state this many steps after ``step``.
            dependencies: keys this state rests on; each must be usable now.
            metadata: free JSON details.

        Returns:
            Whether the write won, and the state now in force.

        Raises:
            InvalidRecordError: a malformed record (UnknownAuthorityError,
                OversizedValueError and ClockError are kinds of it).
            DanglingDependencyError, DependencyCycleError: bad dependencies.
            WriteConflictError: concurrent writers kept winning the race until
                ``write_timeout_s`` passed; the write was not made.
        """
        return self.submit(
            {
                "key": key,
                "value": value,
                "source": source,
                "authority": parse_enum(Authority, authority),
                "created_step": step,
                "ttl_steps": ttl_steps,
                "dependencies": tuple(dependencies),
                "metadata": dict(metadata or {}),
            }
        )

    def submit(self, record: GovernedState | Mapping[str, Any]) -> SetResult:
        """Write a whole record, e.g. one a model emitted as structured output.

        A mapping is validated as a ``GovernedState`` first; otherwise as ``set_state``
        (its ``created_step`` is bounded by the clock; it does not move the clock).
        """
        record = self._validate(record)
        if record.authority is Authority.TEMPORARY:
            return self._set_temporary(record)
        result = self._transact(lambda conn: self._write(conn, record), key=record.key)
        if result.accepted:
            self._temporary.pop(record.key, None)
        return result

    def _validate(self, record: GovernedState | Mapping[str, Any]) -> GovernedState:
        if isinstance(record, Mapping):
            if "authority" in record:
                parse_enum(Authority, record["authority"])  # the specific error first
            _check_storable_steps(record)  # past 2**63 - 1: a ClockError, as any bad step
            try:
                record = GovernedState.model_validate(dict(record))
            except pydantic.ValidationError as exc:
                raise InvalidRecordError(f"invalid memory record: {exc}") from None
        elif not isinstance(record, GovernedState) or isinstance(record, StoredState):
            raise InvalidRecordError(
                f"expected a GovernedState or a mapping, got {type(record).__name__}"
            )
        for field, payload in (("value", record.value), ("metadata", record.metadata)):
            try:
                size = len(encode_json(payload).encode())
            except ValueError as exc:  # NaN or infinity
                raise InvalidRecordError(f"{field} of {record.key!r} is not JSON: {exc}") from None
            if size > self.max_value_bytes:
                raise OversizedValueError(
                    f"{field} of {record.key!r} is {size} bytes of JSON, "
                    f"over the limit of {self.max_value_bytes}"
                )
        return record

    def _write(self, conn: Connection, record: GovernedState) -> SetResult:
        clock = read_clock(conn)
        self._check_ahead(record.created_step, clock, f"created_step of {record.key!r}")
        if record.dependencies:
            self._check_dependencies(conn, record, clock)
        head, latest = head_and_latest(conn, record.key)
        version = latest + 1
        accepted, reason = _resolve(None if head is None else decode_state(head), record)
        if accepted:
            if head is not None:
                set_lifecycle(
                    conn,
                    head,
                    Lifecycle.ARCHIVED,
                    note=f"{NOTE_SUPERSEDED} by v{version}",
                    archived_step=record.created_step,
                )
            insert_state(conn, record, version=version, lifecycle=Lifecycle.ACTIVE)
            state: GovernedState = record
        else:
            insert_state(
                conn,
                record,
                version=version,
                lifecycle=Lifecycle.ARCHIVED,
                note=f"{NOTE_REJECTED}: {reason}",
                archived_step=record.created_step,
            )
            state = decode_state(head)
        return SetResult(accepted, state, version, reason)

    def _check_ahead(self, step: int, clock: int, what: str) -> None:
        # Steps in the past are old information, allowed; the future is bounded, since
        # a step far ahead would win every recency tie and (as a clock) expire every TTL.
        if step - clock > self.max_step_skew:
            raise ClockError(
                f"{what} is step {step}, {step - clock} steps ahead of the memory clock "
                f"({clock}); at most max_step_skew={self.max_step_skew} is allowed "
                "(move the clock with advance())"
            )

    def _check_dependencies(self, conn: Connection, record: GovernedState, clock: int) -> None:
        if not record.dependencies:
            return
        found = {r.key: r for r in live_rows(conn, record.dependencies)}
        for dep in record.dependencies:
            row = found.get(dep)
            if row is None:
                why = (
                    "is TEMPORARY (never persisted)"
                    if dep in self._temporary
                    else "has no live persisted state"
                )
                raise DanglingDependencyError(f"{record.key!r} depends on {dep!r}, which {why}")
            if row.expires_step is not None and row.expires_step <= clock:
                raise DanglingDependencyError(
                    f"{record.key!r} depends on {dep!r}, which expired at step {row.expires_step}"
                )
        # Walk the live dependency graph from the new dependencies: reaching the key
        # being written means the write would close a cycle.
        parent: dict[str, str] = {dep: record.key for dep in record.dependencies}
        frontier = list(found.values())
        while frontier:
            nxt = []
            for row in frontier:
                for dep in decode_state(row).dependencies:
                    if dep == record.key:
                        path = [dep, row.key]
                        while path[-1] != record.key:
                            path.append(parent[path[-1]])
                        raise DependencyCycleError(
                            "dependency cycle: " + " -> ".join(reversed(path))
                        )
                    if dep not in parent:
                        parent[dep] = row.key
                        nxt.append(dep)
            frontier = live_rows(conn, nxt)

    def _set_temporary(self, record: GovernedState) -> SetResult:
        with self.store.read() as conn:
            head = live_row(conn, record.key)
            clock = read_clock(conn)
        self._check_ahead(record.created_step, clock, f"created_step of {record.key!r}")
        if head is not None and not _expired(head.expires_step, clock):
            held = decode_state(head)
            why = f"{held.authority.value} v{held.version} outranks TEMPORARY"
            return SetResult(False, held, None, why)
        for dep in record.dependencies:
            if dep == record.key:
                raise DependencyCycleError(f"{record.key!r} depends on itself")
        self._temporary[record.key] = record
        return SetResult(True, record, None, "temporary: kept in this process only")

    def advance(self, step: int) -> int:
        """Move the memory clock to ``step`` (it never goes back); return the clock.

        TTLs count against this clock, and it is the only call that moves it: writes
        are checked against it but never advance it. It is the agent loop's own
        count, so it is not bounded by ``max_step_skew``.

        Raises:
            ClockError: ``step`` is not an int in 0..2**63 - 1.
        """
        _check_step(step, "step")

        def txn(conn: Connection) -> int:
            advance_clock(conn, step)
            return read_clock(conn)

        return self._transact(txn)

    @property
    def step(self) -> int:
        """The memory clock: the largest step ``advance`` was given."""
        with self.store.read() as conn:
            return read_clock(conn)

    def stabilize(self, key: str) -> StoredState:
        """Mark the key's live version STABLE (confirmed), making it a fallback target.

        Raises:
            MissingStateError: the key has no live persisted state.
        """

        def txn(conn: Connection) -> StoredState:
            row = live_row(conn, key)
            if row is None:
                raise MissingStateError(f"no live persisted state for {key!r} to stabilize")
            if row.lifecycle != Lifecycle.STABLE.value:
                set_lifecycle(conn, row, Lifecycle.STABLE)
            return decode_state(live_row(conn, key))

        return self._transact(txn, key=key)

    # ------------------------------------------------------------------- reading

    def get_state(self, key: str, min_authority: Authority | str = Authority.TEMPORARY) -> Lookup:
        """Return the key's usable state, or a fallback along its dependencies.

        Args:
            key: the key asked for.
            min_authority: the lowest authority acceptable (TEMPORARY: any).

        Returns:
            A ``Lookup``; ``lookup.found`` says whether ``key`` itself was served,
            ``lookup.fallback`` whether a dependency was served in its place.
        """
        floor = parse_enum(Authority, min_authority)
        with self.store.read() as conn:
            row = live_row_with_clock(conn, key)
            if row is not None:
                clock = row.clock
                if _expired(row.expires_step, clock):
                    reason: LookupReason = "expired"
                    temp = self._live_temporary(key, clock)
                    if temp is not None and floor is Authority.TEMPORARY:
                        return Lookup(key, temp, key, "temporary")
                elif Authority(row.authority).rank < floor.rank:
                    reason = "below_authority"
                else:
                    return Lookup(key, decode_state(row), key, "ok")
                deps = decode_state(row).dependencies
            else:
                clock = read_clock(conn)
                temp = self._live_temporary(key, clock)
                if temp is not None and floor is Authority.TEMPORARY:
                    return Lookup(key, temp, key, "temporary")
                latest = conn.execute(
                    sa.select(states)
                    .where(states.c.key == key)
                    .order_by(states.c.version.desc())
                    .limit(1)
                ).first()
                if latest is None:
                    return Lookup(key, None, None, "missing")
                reason = (
                    "pending_release"
                    if latest.lifecycle == Lifecycle.PENDING_RELEASE.value
                    else "archived"
                )
                deps = decode_state(latest).dependencies
            found = self._fallback(conn, key, deps, floor, clock)
        if found is None:
            return Lookup(key, None, None, reason)
        return Lookup(key, found, found.key, reason)

    def _fallback(
        self,
        conn: Connection,
        key: str,
        deps: tuple[str, ...],
        floor: Authority,
        clock: int,
    ) -> StoredState | None:
        # Breadth first, in declared order: the nearest dependency that is usable and
        # confirmed (STABLE) or authoritative (FACT or SYSTEM) answers; an unusable or
        # unconfirmed one is walked through to what it rests on.
        seen = {key, *deps}
        frontier = list(deps)
        for _ in range(_MAX_FALLBACK_DEPTH):
            if not frontier:
                return None
            rows = {r.key: r for r in live_rows(conn, frontier)}
            missing = [k for k in frontier if k not in rows]
            parents: dict[str, tuple[str, ...]] = {}
            if missing:  # walk through released versions to what they rested on
                latest = conn.execute(
                    sa.select(states.c.key, states.c.dependencies)
                    .where(states.c.key.in_(missing))
                    .order_by(states.c.key, states.c.version.desc())
                ).all()
                for r in latest:
                    parents.setdefault(r.key, tuple(json.loads(r.dependencies)))
            nxt: list[str] = []
            for k in frontier:
                row = rows.get(k)
                if row is not None:
                    state = decode_state(row)
                    usable = not _expired(row.expires_step, clock)
                    trusted = (
                        state.lifecycle is Lifecycle.STABLE
                        or state.authority.rank >= Authority.FACT.rank
                    )
                    if usable and trusted and state.authority.rank >= floor.rank:
                        return state
                    more = state.dependencies
                else:
                    more = parents.get(k, ())
                for dep in more:
                    if dep not in seen:
                        seen.add(dep)
                        nxt.append(dep)
            frontier = nxt
        return None

    def _live_temporary(self, key: str, clock: int) -> GovernedState | None:
        temp = self._temporary.get(key)
        if temp is not None and _expired(temp.expires_step, clock):
            del self._temporary[key]
            return None
        return temp

    def history(self, key: str) -> tuple[StoredState, ...]:
        """Return every persisted version of ``key`` (accepted or not), oldest first."""
        with self.store.read() as conn:
            rows = conn.execute(
                sa.select(states).where(states.c.key == key).order_by(states.c.version)
            )
            return tuple(decode_state(r) for r in rows)

    def live_states(
        self, min_authority: Authority | str = Authority.ASSUMPTION
    ) -> list[StoredState]:
        """Return every usable persisted state at or above ``min_authority``, by key.

        Use it to load an agent's context; TEMPORARY states are not included.
        """
        floor = parse_enum(Authority, min_authority)
        allowed = [a.value for a in Authority if a.rank >= floor.rank]
        with self.store.read() as conn:
            clock = read_clock(conn)
            rows = conn.execute(
                sa.select(states)
                .where(
                    IS_LIVE,
                    states.c.authority.in_(allowed),
                    sa.or_(states.c.expires_step.is_(None), states.c.expires_step > clock),
                )
                .order_by(states.c.key)
            )
            return [decode_state(r) for r in rows]

    def releases(
        self, *, key: str | None = None, status: ReleaseStatus | str | None = None
    ) -> list[ReleaseEntry]:
        """Return release log entries, oldest first, filtered by key and/or status."""
        query = sa.select(release_log).order_by(release_log.c.id)
        if key is not None:
            query = query.where(release_log.c.key == key)
        if status is not None:
            query = query.where(release_log.c.status == parse_enum(ReleaseStatus, status).value)
        with self.store.read() as conn:
            return [decode_release(r) for r in conn.execute(query)]

    # ------------------------------------------------------------------ releasing

    def mark_for_release(
        self,
        key: str,
        operation: ReleaseOperation | str = ReleaseOperation.ARCHIVE,
        reason: str = "released",
        *,
        step: int | None = None,
        cascade: bool = False,
    ) -> tuple[ReleaseEntry, ...]:
        """Phase one of a release: log it and make the state unusable, atomically.

        From the moment this returns, ``get_state(key)`` no longer serves the state;
        a ``Governor`` commits the release later. Marking a key that is already
        pending release returns its pending entries (idempotent). A TEMPORARY state
        is simply dropped (nothing to log) and ``()`` returned.

        Args:
            key: the key to release.
            operation: ARCHIVE, or DOWNGRADE (FACT and SYSTEM states only).
            reason: why, kept in the log (``"user_cancellation"``, ...).
            step: the agent step of the request (default: the memory clock); at
                most ``max_step_skew`` ahead of the clock.
            cascade: also release every live state resting on ``key``, transitively.

        Returns:
            The log entries written: ``key``'s first, then its dependents'.

        Raises:
            MissingStateError: nothing live or pending for ``key``.
            NotReleasableError: DOWNGRADE of a state below FACT.
            UnknownAuthorityError: an unknown operation name.
            ClockError: a bad ``step``.
        """
        op = parse_enum(ReleaseOperation, operation)
        if not isinstance(reason, str) or not reason.strip():
            raise InvalidRecordError("a release needs a non-empty reason")
        if step is not None:
            _check_step(step, "step")

        def txn(conn: Connection) -> tuple[ReleaseEntry, ...]:
            clock = read_clock(conn)
            if step is not None:
                self._check_ahead(step, clock, f"the release of {key!r}")
            at = clock if step is None else step
            head = live_row(conn, key)
            if head is None:
                pending = conn.execute(
                    sa.select(release_log).where(
                        release_log.c.key == key,
                        IS_PENDING,
                    )
                ).all()
                if pending:
                    return tuple(decode_release(r) for r in pending)
                if self._temporary.pop(key, None) is not None:
                    return ()
                raise MissingStateError(f"no live state for {key!r} to release")
            if op is ReleaseOperation.DOWNGRADE and Authority(head.authority).rank < 2:
                raise NotReleasableError(
                    f"only FACT or SYSTEM states can be downgraded; {key!r} is {head.authority}"
                )
            entries = [prepare_release(conn, head, op, reason, at)]
            if cascade:
                for row in dependents(conn, {key: 0}):
                    entries.append(
                        prepare_release(
                            conn, row, ReleaseOperation.ARCHIVE, f"rests on {key}: {reason}", at
                        )
                    )
            return tuple(entries)

        return self._transact(txn, key=key)

    def rollback(self, to_step: int, *, reason: str = "rollback") -> RollbackResult:
        """Undo the writes made after ``to_step`` (see the module docstring).

        Versions created after ``to_step`` and still live are put up for release
        (phase one, like ``mark_for_release``), and so is every live state written on
        top of one of them; a key whose rolled-back version had superseded a version
        created at or before ``to_step`` gets that version back. TEMPORARY states
        created after ``to_step`` are dropped. Cost: one pass over the live states
        (rollback is rare; everything else is an index lookup).
        """
        _check_step(to_step, "to_step")

        def txn(conn: Connection) -> RollbackResult:
            at = read_clock(conn)
            rolled = conn.execute(
                sa.select(states)
                .where(IS_LIVE, states.c.created_step > to_step)
                .order_by(states.c.id)
                .with_for_update()
            ).all()
            entries = [
                prepare_release(
                    conn, r, ReleaseOperation.ARCHIVE, f"{reason}: after step {to_step}", at
                )
                for r in rolled
            ]
            # What rests on a rolled-back key was written after its first version past
            # the step (a superseded one included); rejected writes never held the key.
            written_after = dict(
                conn.execute(
                    sa.select(states.c.key, sa.func.min(states.c.id))
                    .where(
                        states.c.key.in_([r.key for r in rolled]),
                        states.c.created_step > to_step,
                        sa.or_(
                            states.c.note.is_(None),
                            sa.not_(states.c.note.startswith(NOTE_REJECTED)),
                        ),
                    )
                    .group_by(states.c.key)
                ).all()
            )
            invalidated = []
            for row in dependents(conn, written_after):
                invalidated.append(row.key)
                entries.append(
                    prepare_release(
                        conn,
                        row,
                        ReleaseOperation.ARCHIVE,
                        f"{reason}: rests on a state rolled back to step {to_step}",
                        at,
                    )
                )
            restored = []
            for r in rolled:
                prev = conn.execute(
                    sa.select(states)
                    .where(
                        states.c.key == r.key,
                        states.c.version < r.version,
                        states.c.created_step <= to_step,
                    )
                    .order_by(states.c.version.desc())
                    .limit(1)
                ).first()
                if (
                    prev is not None
                    and prev.lifecycle == Lifecycle.ARCHIVED.value
                    and (prev.note or "").startswith(NOTE_SUPERSEDED)
                ):
                    set_lifecycle(conn, prev, Lifecycle.ACTIVE)
                    restored.append(r.key)
            return RollbackResult(
                tuple(sorted(written_after)),
                tuple(sorted(invalidated)),
                tuple(sorted(restored)),
                tuple(e.id for e in entries),
            )

        result = self._transact(txn)
        for key, temp in list(self._temporary.items()):
            if temp.created_step > to_step:
                del self._temporary[key]
        return result

    # ------------------------------------------------------------------ plumbing

    def _transact(self, fn: Callable[[Connection], _T], *, key: str | None = None) -> _T:
        # One transaction per call. A lost race (a conditional update that matched
        # nothing, a unique index refusing a second live version or version number, a
        # serialization failure, a deadlock) reruns it whole after a jittered backoff,
        # until the deadline; then the call fails loudly.
        deadline = time.monotonic() + self.write_timeout_s
        attempts = 0
        while True:
            try:
                with self.store.write() as conn:
                    if key is not None and self.store.dialect == "postgresql":
                        self._lock_key(conn, key)
                    return fn(conn)
            except Exception as exc:
                if not _retryable(exc):
                    raise
                last = exc
            attempts += 1
            left = deadline - time.monotonic()
            if left <= 0:
                raise WriteConflictError(
                    f"gave up after {attempts} conflicting attempts in "
                    f"{self.write_timeout_s:g} s{'' if key is None else f' on {key!r}'}: "
                    f"{type(last).__name__}: {last}"
                ) from last
            window = min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** min(attempts, 16))
            time.sleep(min(left, self._jitter.uniform(0.0, window)))

    def _lock_key(self, conn: Connection, key: str) -> None:
        # Writers of one key queue on a transaction-scoped advisory lock (released at
        # commit or rollback, or when a killed writer's connection drops) instead of
        # racing for the same version number. The store's lock_timeout bounds the wait.
        # The schema is part of the lock's name (a schema name holds no ':'): stores
        # sharing a database do not queue on each other's keys.
        conn.execute(_LOCK_KEY, {"name": f"{self.store.schema or ''}:{key}"})


def _resolve(head: StoredState | None, record: GovernedState) -> tuple[bool, str]:
    """Authority first, then recency: does ``record`` replace ``head``?"""
    if head is None:
        return True, "no live state"
    held = f"{head.authority.value} v{head.version}"
    if head.authority is Authority.SYSTEM:
        return False, f"{held} is live: SYSTEM states change only after a release"
    if record.authority.rank != head.authority.rank:
        if record.authority.rank > head.authority.rank:
            return True, f"{record.authority.value} outranks {held}"
        return False, f"{held} outranks {record.authority.value}"
    if record.created_step >= head.created_step:
        return True, f"newer than {held} (step {record.created_step} >= {head.created_step})"
    return False, f"older than {held} (step {record.created_step} < {head.created_step})"


def _expired(expires_step: int | None, clock: int) -> bool:
    return expires_step is not None and expires_step <= clock


# PostgreSQL: unique violation, serialization failure, deadlock; and lock not
# available, should a driver error reach here unwrapped by the store.
_RETRY_SQLSTATES = frozenset({"23505", "40001", "40P01", "55P03"})


def _retryable(exc: Exception) -> bool:
    """Whether ``exc`` means a lost race (rerun the transaction), not a refusal or a bug.

    A ``StoreError`` is the store's verdict (a lock waited out for its busy timeout,
    a damaged or unreachable store) and is passed on as it is, like every refusal.
    """
    if isinstance(exc, Conflict):
        return True
    if not isinstance(exc, sa.exc.DBAPIError):
        return False  # a refusal, the store's verdict, or a bug: rerunning cannot help
    if getattr(exc.orig, "sqlstate", None) in _RETRY_SQLSTATES:
        return True
    text = str(exc.orig).lower()
    if isinstance(exc, sa.exc.IntegrityError):
        return "unique constraint failed" in text  # SQLite's unique violation
    return isinstance(exc, sa.exc.OperationalError) and ("locked" in text or "busy" in text)


def _is_step(step: object) -> bool:
    return isinstance(step, int) and not isinstance(step, bool) and 0 <= step <= MAX_STEP


def _check_step(step: object, what: str) -> None:
    if not _is_step(step):
        raise ClockError(f"{what} must be an int in 0..{MAX_STEP} (2**63 - 1), got {step!r}")


def _check_storable_steps(record: Mapping[str, Any]) -> None:
    # Only the range is checked here (the types are the model's to check): a step
    # past what a store holds is the same ClockError as one too far ahead of the clock.
    step, ttl = record.get("created_step"), record.get("ttl_steps")
    ints = [v for v in (step, ttl) if isinstance(v, int) and not isinstance(v, bool)]
    if any(v > MAX_STEP for v in ints) or (len(ints) == 2 and step + ttl > MAX_STEP):
        raise ClockError(
            f"created_step {step!r} and ttl_steps {ttl!r} of {record.get('key')!r} reach "
            f"past the largest step a store holds ({MAX_STEP} = 2**63 - 1)"
        )
