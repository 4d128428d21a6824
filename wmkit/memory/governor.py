"""The governor: phase two of every release, and TTL expiry, as a worker.

A ``Governor`` commits the release log, one entry per transaction: it claims the oldest
due PENDING entry (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, so concurrent governors
take different entries; the whole transaction under ``BEGIN IMMEDIATE`` on SQLite),
applies the operation to the state, marks the entry DONE and writes one ``committed``
audit row, then commits. If the process dies mid-way the database rolls the
transaction back and the entry stays PENDING for the next worker. If applying fails,
the attempt is recorded in its own transaction and the entry retried with exponential
backoff; after ``max_attempts`` failures it becomes DEAD (a dead letter): its state
stays PENDING_RELEASE, unusable (fail-closed), until ``requeue`` puts it back.

TTL expiry takes the same path: ``expire`` runs phase one for every live state whose
``expires_step`` the memory clock has reached, and the commits follow as above.

Run it in-process (``Governor(store).run(stop=event)`` in a thread, or ``drain()``) or
as a process: ``wmkit-governor URL`` (``wmkit.scripts.governor``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Row

from wmkit.memory.errors import StoreLockedError, StoreUnavailableError
from wmkit.memory.store import (
    IS_LIVE,
    IS_PENDING,
    NOTE_DOWNGRADED,
    NOTE_RELEASED,
    Conflict,
    Store,
    decode_release,
    decode_state,
    insert_state,
    latest_version,
    live_row,
    now_us,
    prepare_release,
    read_clock,
    release_attempts,
    release_log,
    states,
)
from wmkit.memory.types import (
    Authority,
    Lifecycle,
    ReleaseEntry,
    ReleaseOperation,
    ReleaseStatus,
)

__all__ = ["Governor", "GovernorReport"]

log = logging.getLogger(__name__)


# The statements of phase two, built once (building costs more than running them).
_PENDING = IS_PENDING
# The oldest due entry; SKIP LOCKED makes concurrent governors take different ones
# (SQLite ignores the clause: BEGIN IMMEDIATE already serialises the transactions).
_CLAIM = (
    sa.select(release_log)
    .where(_PENDING, release_log.c.next_attempt_us <= sa.bindparam("now"))
    .order_by(release_log.c.id)
    .limit(1)
    .with_for_update(skip_locked=True)
)
_STATE_BY_ID = sa.select(states).where(states.c.id == sa.bindparam("b_id"))
_ARCHIVE_PENDING = (
    sa.update(states)
    .where(
        states.c.id == sa.bindparam("b_id"),
        states.c.lifecycle == Lifecycle.PENDING_RELEASE.value,
    )
    .values(
        lifecycle=Lifecycle.ARCHIVED.value,
        note=sa.bindparam("b_note"),
        row_version=states.c.row_version + 1,
    )
)
_MARK_DONE = (
    sa.update(release_log)
    .where(
        release_log.c.id == sa.bindparam("b_id"),
        _PENDING,
        release_log.c.row_version == sa.bindparam("b_row_version"),
    )
    .values(
        status=ReleaseStatus.DONE.value,
        done_at_us=sa.bindparam("b_at"),
        worker=sa.bindparam("b_worker"),
        row_version=release_log.c.row_version + 1,
    )
)
_AUDIT = sa.insert(release_attempts)
_EXPIRED = (
    sa.select(states)
    .where(
        IS_LIVE,
        states.c.expires_step.is_not(None),
        states.c.expires_step <= sa.bindparam("clock"),
    )
    .order_by(states.c.id)
    .limit(sa.bindparam("n"))
    .with_for_update(skip_locked=True)
)


class GovernorReport(NamedTuple):
    """Counts of what a governor did.

    Attributes:
        expired: states put up for release because their TTL ran out.
        released: releases committed.
        failed: failed commit attempts (to be retried).
        dead: releases given up on (dead letters).
    """

    expired: int = 0
    released: int = 0
    failed: int = 0
    dead: int = 0

    def __add__(self, other: tuple) -> GovernorReport:  # type: ignore[override]
        return GovernorReport(*(a + b for a, b in zip(self, other, strict=True)))


class Governor:
    """A worker that commits pending releases and expires states (module docstring).

    Args:
        store: the store to govern.
        worker: name written to the log and audit (default ``host:pid``).
        max_attempts: failed attempts before a release becomes a dead letter.
        backoff_s: delay before the first retry; doubles per failure.
        max_backoff_s: cap of the retry delay.
        batch: most releases committed (and states expired) per ``run_once``.
        before_commit_fn: called with the entry inside each release transaction,
            just before it commits; raising fails the attempt (fault injection in
            tests, or a last veto).
    """

    def __init__(
        self,
        store: Store,
        *,
        worker: str | None = None,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 60.0,
        batch: int = 500,
        before_commit_fn: Callable[[ReleaseEntry], None] | None = None,
    ) -> None:
        if max_attempts < 1 or batch < 1 or backoff_s < 0 or max_backoff_s < backoff_s:
            raise ValueError(
                "need max_attempts >= 1, batch >= 1 and 0 <= backoff_s <= max_backoff_s"
            )
        self.store = store
        self.worker = worker or f"{socket.gethostname()}:{os.getpid()}"
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.batch = batch
        self.before_commit_fn = before_commit_fn

    # ------------------------------------------------------------------ phase one

    def expire(self) -> int:
        """Put up for release (phase one) every live state past its TTL; return how many."""
        with self.store.write() as conn:
            clock = read_clock(conn)
            rows = conn.execute(_EXPIRED, {"clock": clock, "n": self.batch}).all()
            for row in rows:
                reason = f"ttl expired at step {row.expires_step}"
                prepare_release(conn, row, ReleaseOperation.ARCHIVE, reason, clock)
        return len(rows)

    # ------------------------------------------------------------------ phase two

    def release_one(self) -> ReleaseEntry | None:
        """Commit the oldest due release, in its own transaction.

        Returns:
            The entry after the attempt (status DONE, or PENDING with one more failed
            attempt, or DEAD), or None when no release is due.
        """
        claimed: Row | None = None
        try:
            with self.store.write() as conn:
                claimed = conn.execute(_CLAIM, {"now": now_us()}).first()
                if claimed is None:
                    return None
                entry = self._commit(conn, claimed)
                if self.before_commit_fn is not None:
                    self.before_commit_fn(entry)
            return entry
        except Conflict:
            return None  # another worker changed it first; nothing was applied here
        except Exception as exc:
            if claimed is None or (
                isinstance(exc, sa.exc.DBAPIError) and exc.connection_invalidated
            ):
                raise  # no entry claimed, or the database is gone: nothing to record
            return self._record_failure(claimed, exc)

    def _commit(self, conn: Connection, entry: Row) -> ReleaseEntry:
        op = ReleaseOperation(entry.operation)
        state = None
        if op is ReleaseOperation.DOWNGRADE:
            state = conn.execute(_STATE_BY_ID, {"b_id": entry.state_id}).first()
        word = NOTE_RELEASED if op is ReleaseOperation.ARCHIVE else NOTE_DOWNGRADED
        archived = conn.execute(
            _ARCHIVE_PENDING, {"b_id": entry.state_id, "b_note": f"{word}: {entry.reason}"}
        )
        if archived.rowcount != 1:
            found = conn.execute(_STATE_BY_ID, {"b_id": entry.state_id}).first()
            raise RuntimeError(
                f"release {entry.id}: state {entry.state_id} is "
                f"{'missing' if found is None else found.lifecycle}, not PENDING_RELEASE"
            )
        if state is not None and live_row(conn, state.key) is None:
            # A newer version written while this one was pending wins over the copy.
            old = decode_state(state)
            copy = old.model_copy(
                update={
                    "authority": Authority.ASSUMPTION,
                    "metadata": {
                        **old.metadata,
                        "downgraded_from": old.authority.value,
                        "release_id": entry.id,
                    },
                }
            )
            version = latest_version(conn, state.key) + 1
            insert_state(conn, copy, version=version, lifecycle=Lifecycle.ACTIVE)
        at = now_us()
        done = conn.execute(
            _MARK_DONE,
            {
                "b_id": entry.id,
                "b_row_version": entry.row_version,
                "b_at": at,
                "b_worker": self.worker,
            },
        )
        if done.rowcount != 1:
            raise Conflict(f"release {entry.id} changed under this transaction")
        conn.execute(
            _AUDIT,
            {"release_id": entry.id, "worker": self.worker, "at_us": at, "outcome": "committed"},
        )
        return decode_release(
            {
                **entry._mapping,
                "status": ReleaseStatus.DONE.value,
                "done_at_us": at,
                "worker": self.worker,
            }
        )

    def _record_failure(self, entry_row: Row, exc: Exception) -> ReleaseEntry | None:
        attempts = entry_row.attempts + 1
        dead = attempts >= self.max_attempts
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempts - 1))
        error = f"{type(exc).__name__}: {exc}"[:1000]
        at = now_us()
        with self.store.write() as conn:
            done = conn.execute(
                sa.update(release_log)
                .where(
                    release_log.c.id == entry_row.id,
                    release_log.c.status == ReleaseStatus.PENDING.value,
                    release_log.c.row_version == entry_row.row_version,
                )
                .values(
                    attempts=attempts,
                    last_error=error,
                    next_attempt_us=at + int(delay * 1e6),
                    status=(ReleaseStatus.DEAD if dead else ReleaseStatus.PENDING).value,
                    worker=self.worker,
                    row_version=release_log.c.row_version + 1,
                )
            )
            if done.rowcount != 1:
                return None  # someone else moved it on meanwhile
            conn.execute(
                sa.insert(release_attempts).values(
                    release_id=entry_row.id,
                    worker=self.worker,
                    at_us=at,
                    outcome="dead" if dead else "failed",
                    error=error,
                )
            )
            row = conn.execute(sa.select(release_log).where(release_log.c.id == entry_row.id)).one()
        (log.error if dead else log.warning)(
            "release %s of %r failed (attempt %d): %s", entry_row.id, entry_row.key, attempts, error
        )
        return decode_release(row)

    # -------------------------------------------------------------------- loops

    def run_once(self) -> GovernorReport:
        """Expire what is due, then commit up to ``batch`` due releases."""
        report = GovernorReport(expired=self.expire())
        for _ in range(self.batch):
            entry = self.release_one()
            if entry is None:
                break
            report += (
                0,
                entry.status is ReleaseStatus.DONE,
                entry.status is ReleaseStatus.PENDING,
                entry.status is ReleaseStatus.DEAD,
            )
        return report

    def drain(self, *, timeout_s: float = 60.0) -> GovernorReport:
        """Work until no release is PENDING and nothing is due to expire, or time runs out.

        Waits out retry backoff. Dead letters do not count as pending. Check
        ``pending()`` afterwards to tell a timeout from a finished drain.
        """
        deadline = time.monotonic() + timeout_s
        report = GovernorReport()
        while True:
            step = self.run_once()
            report += step
            if step != GovernorReport():
                continue
            waiting = self.pending()
            if waiting == 0 or time.monotonic() >= deadline:
                return report
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def run(
        self,
        *,
        poll_s: float = 0.5,
        stop: threading.Event | None = None,
        max_s: float | None = None,
    ) -> GovernorReport:
        """Work until ``stop`` is set (or ``max_s`` passes), polling every ``poll_s``.

        Database errors (server restarting, lock timeouts) are logged and retried
        after a poll interval rather than ending the loop.
        """
        stop = stop or threading.Event()
        deadline = None if max_s is None else time.monotonic() + max_s
        report = GovernorReport()
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            try:
                step = self.run_once()
            except (sa.exc.DBAPIError, StoreLockedError, StoreUnavailableError) as exc:
                log.warning("governor %s: database error, retrying: %s", self.worker, exc)
                stop.wait(poll_s)
                continue
            report += step
            if step.expired == 0 and step.released == 0 and step.failed == 0:
                stop.wait(poll_s)
        return report

    # -------------------------------------------------------------- operations

    def pending(self) -> int:
        """Return how many releases are PENDING (due now or waiting out a backoff)."""
        with self.store.read() as conn:
            return conn.execute(sa.select(sa.func.count()).where(IS_PENDING)).scalar_one()

    def dead_letters(self) -> list[ReleaseEntry]:
        """Return the releases given up on, oldest first."""
        with self.store.read() as conn:
            rows = conn.execute(
                sa.select(release_log)
                .where(release_log.c.status == ReleaseStatus.DEAD.value)
                .order_by(release_log.c.id)
            )
            return [decode_release(r) for r in rows]

    def requeue(self, release_id: int | None = None) -> int:
        """Put dead letters back to PENDING with a fresh attempt count; return how many.

        Args:
            release_id: one entry to requeue; None requeues every dead letter.
        """
        query = (
            sa.update(release_log)
            .where(release_log.c.status == ReleaseStatus.DEAD.value)
            .values(
                status=ReleaseStatus.PENDING.value,
                attempts=0,
                next_attempt_us=0,
                row_version=release_log.c.row_version + 1,
            )
        )
        if release_id is not None:
            query = query.where(release_log.c.id == release_id)
        with self.store.write() as conn:
            return conn.execute(query).rowcount
