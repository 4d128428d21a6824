"""The store of governed memory: tables, engines and the transactional steps, in SQLAlchemy Core.

Two backends share every statement: SQLite (the default: one WAL file, embedded) and
PostgreSQL. Tables (all prefixed ``wm_``):

- ``wm_states``: one row per version of a key. A partial unique index allows at most
  one live (ACTIVE or STABLE) version per key, so two racing writers cannot both win.
- ``wm_state_deps``: ``(state_id, dep_key)`` edges, indexed by ``dep_key``, so the
  dependents of a key are found in O(degree), not by scanning.
- ``wm_release_log``: the two-phase release log (PENDING -> DONE | DEAD), with attempt
  count, next attempt time and an optimistic ``row_version``.
- ``wm_release_attempts``: append-only audit of each commit, failure and give-up by a
  governor; exactly one ``committed`` row per DONE release is the no-double-release
  invariant the tests check.
- ``wm_meta``: the schema version, the memory clock (moved only by ``advance``), when
  the store was created, a random store id and (SQLite) the commit counter.

Locking: every write transaction on SQLite starts with ``BEGIN IMMEDIATE`` (the database
write lock is taken up front, so read-check-write sequences cannot interleave). On
PostgreSQL a governor claims a release with ``FOR UPDATE SKIP LOCKED`` (concurrent
governors take different entries) and expiry and rollback lock the rows they take;
on both, every state change is conditional on the lifecycle and ``row_version`` it
read, so a lost race is detected (``Conflict``) and the transaction retried rather
than applied twice, and the partial unique index refuses a second live version.
Times are integer microseconds since the epoch and steps are integers: the database
compares numbers, never date strings.

Integrity: a store is created only where none exists (a SQLite file is built aside and
linked into place whole); opening refuses what is not a store, checks the schema
version row and, on SQLite, runs ``PRAGMA quick_check`` and compares the commit
counter with ``<file>.commits`` (see ``Store``), so damage and lost commits are
reported before anything is read or written. Waits for a lock are bounded by the busy
timeout. Every failure is a ``StoreError`` subclass naming the store.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

from wmkit.memory.errors import (
    LostCommitsError,
    NotAStoreError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreMissingError,
    StoreUnavailableError,
    StoreVersionError,
)
from wmkit.memory.types import (
    Authority,
    GovernedState,
    Lifecycle,
    ReleaseEntry,
    ReleaseOperation,
    ReleaseStatus,
    StoredState,
)

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_S",
    "IS_LIVE",
    "IS_PENDING",
    "LIVE",
    "SCHEMA_VERSION",
    "Conflict",
    "Store",
    "advance_clock",
    "decode_release",
    "decode_state",
    "dependents",
    "encode_json",
    "from_us",
    "head_and_latest",
    "insert_state",
    "latest_version",
    "live_row",
    "live_row_with_clock",
    "live_rows",
    "metadata",
    "now_us",
    "prepare_release",
    "read_clock",
    "release_attempts",
    "release_log",
    "set_lifecycle",
    "sqlite_files",
    "state_deps",
    "state_row",
    "states",
]

SCHEMA_VERSION = 2
LIVE = (Lifecycle.ACTIVE.value, Lifecycle.STABLE.value)
# Notes on out-of-service versions start with one of these words; rollback restores
# only versions whose note says they were superseded.
NOTE_SUPERSEDED = "superseded"
NOTE_REJECTED = "rejected"
NOTE_RELEASED = "released"
NOTE_DOWNGRADED = "downgraded"

# SQLite makes an INTEGER PRIMARY KEY the rowid (autoincrementing); BIGINT would not be.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()

states = sa.Table(
    "wm_states",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(256), nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("source", sa.String(128), nullable=False),
    sa.Column("authority", sa.String(16), nullable=False),
    sa.Column("lifecycle", sa.String(16), nullable=False),
    sa.Column("created_step", sa.BigInteger, nullable=False),
    sa.Column("created_at_us", sa.BigInteger, nullable=False),
    sa.Column("ttl_steps", sa.BigInteger),
    sa.Column("expires_step", sa.BigInteger),
    sa.Column("dependencies", sa.Text, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),
    sa.Column("note", sa.Text),
    sa.Column("archived_step", sa.BigInteger),
    sa.Column("row_version", sa.Integer, nullable=False, server_default="1"),
    sa.UniqueConstraint("key", "version", name="uq_wm_states_key_version"),
)
# Filters on constants are written as SQL literals, not bound parameters: only then
# can SQLite (and PostgreSQL's generic plans) see that a query's WHERE implies a
# partial index's WHERE and use the index instead of scanning the table.
IS_LIVE = states.c.lifecycle.in_([sa.literal_column(f"'{v}'") for v in LIVE])
_live = IS_LIVE
sa.Index(
    "uq_wm_states_live_key",
    states.c.key,
    unique=True,
    sqlite_where=_live,
    postgresql_where=_live,
)
_expiring = sa.and_(_live, states.c.expires_step.is_not(None))
sa.Index(
    "ix_wm_states_expiry",
    states.c.expires_step,
    sqlite_where=_expiring,
    postgresql_where=_expiring,
)

state_deps = sa.Table(
    "wm_state_deps",
    metadata,
    sa.Column("state_id", _ID, sa.ForeignKey("wm_states.id"), primary_key=True),
    sa.Column("dep_key", sa.String(256), primary_key=True),
    sa.Index("ix_wm_state_deps_dep_key", "dep_key"),
)

release_log = sa.Table(
    "wm_release_log",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("state_id", _ID, sa.ForeignKey("wm_states.id"), nullable=False, index=True),
    sa.Column("key", sa.String(256), nullable=False),
    sa.Column("operation", sa.String(16), nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("requested_step", sa.BigInteger, nullable=False),
    sa.Column("requested_at_us", sa.BigInteger, nullable=False),
    sa.Column("status", sa.String(8), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_attempt_us", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("last_error", sa.Text),
    sa.Column("done_at_us", sa.BigInteger),
    sa.Column("worker", sa.String(128)),
    sa.Column("row_version", sa.Integer, nullable=False, server_default="1"),
)
IS_PENDING = release_log.c.status == sa.literal_column(f"'{ReleaseStatus.PENDING.value}'")
_pending = IS_PENDING
sa.Index(
    "ix_wm_release_log_pending",
    release_log.c.id,
    sqlite_where=_pending,
    postgresql_where=_pending,
)

release_attempts = sa.Table(
    "wm_release_attempts",
    metadata,
    sa.Column("id", _ID, primary_key=True, autoincrement=True),
    sa.Column("release_id", _ID, sa.ForeignKey("wm_release_log.id"), nullable=False, index=True),
    sa.Column("worker", sa.String(128), nullable=False),
    sa.Column("at_us", sa.BigInteger, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("error", sa.Text),
)

meta = sa.Table(
    "wm_meta",
    metadata,
    sa.Column("name", sa.String(32), primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
log = logging.getLogger(__name__)


class Conflict(Exception):
    """A conditional update found the row changed by another transaction: retry."""


def now_us() -> int:
    """Return the wall-clock time in integer microseconds since the epoch."""
    return time.time_ns() // 1000


def to_us(moment: datetime) -> int:
    """Return an aware datetime as integer microseconds since the epoch (exact)."""
    return (moment - _EPOCH) // timedelta(microseconds=1)


def from_us(us: int) -> datetime:
    """Return integer microseconds since the epoch as an aware UTC datetime (exact)."""
    return _EPOCH + timedelta(microseconds=us)


def encode_json(value: Any) -> str:
    """Encode a JSON value compactly; NaN and infinities are refused (``ValueError``)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


# ----------------------------------------------------------------------------- rows


def state_row(
    record: GovernedState,
    *,
    version: int,
    lifecycle: Lifecycle,
    note: str | None = None,
    archived_step: int | None = None,
) -> dict[str, Any]:
    """Return the ``wm_states`` row (without ``id``) of one version of ``record``."""
    return {
        "key": record.key,
        "version": version,
        "value": encode_json(record.value),
        "source": record.source,
        "authority": record.authority.value,
        "lifecycle": lifecycle.value,
        "created_step": record.created_step,
        "created_at_us": to_us(record.created_at),
        "ttl_steps": record.ttl_steps,
        "expires_step": record.expires_step,
        "dependencies": encode_json(list(record.dependencies)),
        "meta": encode_json(record.metadata),
        "note": note,
        "archived_step": archived_step,
    }


def decode_state(row: Row | Mapping[str, Any]) -> StoredState:
    """Return a ``wm_states`` row as a ``StoredState``.

    Rows were validated when written, so they are rebuilt without validating again.
    """
    r = row._mapping if isinstance(row, Row) else row
    return StoredState.model_construct(
        key=r["key"],
        value=json.loads(r["value"]),
        source=r["source"],
        authority=Authority(r["authority"]),
        created_step=r["created_step"],
        created_at=from_us(r["created_at_us"]),
        ttl_steps=r["ttl_steps"],
        dependencies=tuple(json.loads(r["dependencies"])),
        metadata=json.loads(r["meta"]),
        id=r["id"],
        version=r["version"],
        lifecycle=Lifecycle(r["lifecycle"]),
        note=r["note"],
        archived_step=r["archived_step"],
    )


def decode_release(row: Row | Mapping[str, Any]) -> ReleaseEntry:
    """Return a ``wm_release_log`` row as a ``ReleaseEntry``."""
    r = row._mapping if isinstance(row, Row) else row
    return ReleaseEntry(
        id=r["id"],
        state_id=r["state_id"],
        key=r["key"],
        operation=ReleaseOperation(r["operation"]),
        reason=r["reason"],
        requested_step=r["requested_step"],
        requested_at=from_us(r["requested_at_us"]),
        status=ReleaseStatus(r["status"]),
        attempts=r["attempts"],
        last_error=r["last_error"],
        done_at=None if r["done_at_us"] is None else from_us(r["done_at_us"]),
        worker=r["worker"],
    )


# ------------------------------------------------------------- transactional steps


# Hot-path statements are built once with bind parameters: building a statement costs
# more than running it on SQLite.
_CLOCK = sa.select(meta.c.value).where(meta.c.name == "step")
_ADVANCE = (
    sa.update(meta)
    .where(meta.c.name == "step", meta.c.value < sa.bindparam("step"))
    .values(value=sa.bindparam("step"))
)
_LIVE_ROW = sa.select(states).where(states.c.key == sa.bindparam("key"), _live)
_LIVE_ROWS = sa.select(states).where(states.c.key.in_(sa.bindparam("keys", expanding=True)), _live)
_LIVE_WITH_CLOCK = sa.select(states, _CLOCK.scalar_subquery().label("clock")).where(
    states.c.key == sa.bindparam("key"), _live
)
# The live version and the latest version of a key, in one statement (one or two rows).
_HEAD_AND_LATEST = sa.select(states).where(
    states.c.key == sa.bindparam("key"),
    sa.or_(
        _live,
        states.c.version
        == sa.select(sa.func.max(states.c.version))
        .where(states.c.key == sa.bindparam("key"))
        .scalar_subquery(),
    ),
)
_LATEST_VERSION = sa.select(sa.func.max(states.c.version)).where(
    states.c.key == sa.bindparam("key")
)
_INSERT_STATE = sa.insert(states)
_INSERT_DEPS = sa.insert(state_deps)
_SET_LIFECYCLE = (
    sa.update(states)
    .where(
        states.c.id == sa.bindparam("b_id"),
        states.c.lifecycle == sa.bindparam("b_lifecycle"),
        states.c.row_version == sa.bindparam("b_row_version"),
    )
    .values(
        lifecycle=sa.bindparam("b_new_lifecycle"),
        note=sa.bindparam("b_note"),
        archived_step=sa.bindparam("b_archived_step"),
        row_version=states.c.row_version + 1,
    )
)
_INSERT_RELEASE = sa.insert(release_log)


def read_clock(conn: Connection) -> int:
    """Return the memory clock: the step the last ``advance`` set (writes never move it)."""
    return conn.execute(_CLOCK).scalar_one()


def advance_clock(conn: Connection, step: int) -> None:
    """Raise the clock to ``step`` if it is behind (it never goes back)."""
    conn.execute(_ADVANCE, {"step": step})


def live_row(conn: Connection, key: str) -> Row | None:
    """Return the live (ACTIVE or STABLE) version of ``key``, or None."""
    return conn.execute(_LIVE_ROW, {"key": key}).first()


def live_row_with_clock(conn: Connection, key: str) -> Row | None:
    """Return the live version of ``key`` with the clock as an extra ``clock`` column."""
    return conn.execute(_LIVE_WITH_CLOCK, {"key": key}).first()


def live_rows(conn: Connection, keys: Iterable[str]) -> list[Row]:
    """Return the live versions of ``keys`` (at most one per key), in no set order."""
    keys = list(keys)
    if not keys:
        return []
    return list(conn.execute(_LIVE_ROWS, {"keys": keys}))


def head_and_latest(conn: Connection, key: str) -> tuple[Row | None, int]:
    """Return the live version of ``key`` (or None) and its highest version number (0: none)."""
    head, latest = None, 0
    for row in conn.execute(_HEAD_AND_LATEST, {"key": key}):
        if row.lifecycle in LIVE:
            head = row
        latest = max(latest, row.version)
    return head, latest


def latest_version(conn: Connection, key: str) -> int:
    """Return the highest version number of ``key`` so far (0 if it was never written)."""
    return conn.execute(_LATEST_VERSION, {"key": key}).scalar() or 0


def insert_state(
    conn: Connection,
    record: GovernedState,
    *,
    version: int,
    lifecycle: Lifecycle,
    note: str | None = None,
    archived_step: int | None = None,
) -> int:
    """Insert one version of ``record`` (and, if live, its dependency edges); return its id."""
    row = state_row(
        record, version=version, lifecycle=lifecycle, note=note, archived_step=archived_step
    )
    state_id = conn.execute(_INSERT_STATE, row).inserted_primary_key[0]
    if record.dependencies and lifecycle.value in LIVE:
        conn.execute(
            _INSERT_DEPS, [{"state_id": state_id, "dep_key": d} for d in record.dependencies]
        )
    return state_id


def set_lifecycle(
    conn: Connection,
    row: Row,
    lifecycle: Lifecycle,
    *,
    note: str | None = None,
    archived_step: int | None = None,
) -> None:
    """Move the version ``row`` to ``lifecycle``, if nobody changed it since it was read.

    Raises:
        Conflict: the row's lifecycle or ``row_version`` changed since ``row`` was read.
    """
    done = conn.execute(
        _SET_LIFECYCLE,
        {
            "b_id": row.id,
            "b_lifecycle": row.lifecycle,
            "b_row_version": row.row_version,
            "b_new_lifecycle": lifecycle.value,
            "b_note": note,
            "b_archived_step": archived_step,
        },
    )
    if done.rowcount != 1:
        raise Conflict(f"state {row.key!r} v{row.version} changed under this transaction")


def prepare_release(
    conn: Connection,
    row: Row,
    operation: ReleaseOperation,
    reason: str,
    step: int,
) -> ReleaseEntry:
    """Phase one of a release: log it and make the version unusable, in ``conn``'s transaction.

    The caller's transaction makes the two changes atomic: either the version is
    PENDING_RELEASE with a PENDING log entry, or neither happened.

    Returns:
        The release log entry written.

    Raises:
        Conflict: the version changed since ``row`` was read.
    """
    set_lifecycle(
        conn, row, Lifecycle.PENDING_RELEASE, note=f"pending release: {reason}", archived_step=step
    )
    params = {
        "state_id": row.id,
        "key": row.key,
        "operation": operation.value,
        "reason": reason,
        "requested_step": step,
        "requested_at_us": now_us(),
        "status": ReleaseStatus.PENDING.value,
        "attempts": 0,
        "next_attempt_us": 0,
        "last_error": None,
        "done_at_us": None,
        "worker": None,
    }
    release_id = conn.execute(_INSERT_RELEASE, params).inserted_primary_key[0]
    return decode_release({**params, "id": release_id})


def dependents(conn: Connection, written_after: Mapping[str, int]) -> list[Row]:
    """Return the live states resting, directly or not, on the given keys.

    A state rests on key ``k`` if it lists ``k`` among its dependencies and was written
    after version id ``written_after[k]`` (pass 0 for "any time"); what rests on a
    dependent rests on ``k`` too. The keys themselves are never returned.
    """
    seen = set(written_after)
    frontier = dict(written_after)
    found: list[Row] = []
    while frontier:
        rows = conn.execute(
            sa.select(states, state_deps.c.dep_key)
            .join(state_deps, state_deps.c.state_id == states.c.id)
            .where(state_deps.c.dep_key.in_(list(frontier)), _live)
            .order_by(states.c.id)
        ).all()
        nxt: dict[str, int] = {}
        for row in rows:
            if row.key in seen or row.id <= frontier[row.dep_key]:
                continue
            seen.add(row.key)
            found.append(row)
            nxt[row.key] = 0  # anything on a dependent's key, live now, rests on it
        frontier = nxt
    return found


# ---------------------------------------------------------------------------- store

DEFAULT_BUSY_TIMEOUT_S = 5.0
_SQLITE_MAGIC = b"SQLite format 3\x00"
# Outcomes of a race that callers retry, not failures of the store: passed on as they
# are (a unique index refusing a second live version; PostgreSQL serialization failure
# and deadlock).
_RACE_SQLSTATES = frozenset({"40001", "40P01"})
# Run on the driver connection (SQLite only, where tables have no schema): a fifth of
# the cost of the same statement through SQLAlchemy, on every write transaction.
_BUMP_SQL = "UPDATE wm_meta SET value = value + 1 WHERE name = 'commits' RETURNING value"


def _is_sqlite_path(url: str) -> bool:
    return "://" not in url


class Store:
    """A database holding governed memory, reached through one SQLAlchemy engine.

    Open one with ``Store.open``; it is safe to share between threads, and each
    process opens its own (engines must not cross ``fork``). Every database failure
    in ``open``, ``write`` and ``read`` is raised as a ``StoreError`` subclass naming
    the store, except the outcomes of a lost race that callers retry (``IntegrityError``
    from a unique index; PostgreSQL serialization failures and deadlocks).

    On SQLite every write transaction that changed something also raises the
    ``commits`` counter in ``wm_meta``, and after its commit the count is recorded in
    ``<file>.commits`` beside the database; opening refuses a store whose counter is
    behind that record (``LostCommitsError``: committed transactions are gone, as when
    the ``-wal`` file was deleted). The record is written after the commit and only
    ever raised, so it is never ahead of what was committed; it is not fsynced, so it
    guards against a lost or deleted WAL while the OS stays up, and after an OS crash
    reports what the database lost only if the record reached the disk.

    Attributes:
        engine: the SQLAlchemy engine (for tests and benchmarks that attach events).
        dialect: ``"sqlite"`` or ``"postgresql"``.
        schema: the PostgreSQL schema holding the tables, or None for the default.
        location: the store, as error messages name it (file path, or URL and schema).
        busy_timeout_s: how long a writer waits for a lock before ``StoreLockedError``.
        store_id: a random number drawn when the store was created (0 until opened).
        created_at: when the store was created (None until opened).
    """

    def __init__(
        self,
        engine: Engine,
        *,
        schema: str | None = None,
        location: str | None = None,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
    ) -> None:
        self._base_engine = engine
        self.engine = (
            engine
            if schema is None
            else engine.execution_options(schema_translate_map={None: schema})
        )
        self.dialect = engine.dialect.name
        self.schema = schema
        self.location = location or _describe(engine.url, schema)
        self.busy_timeout_s = busy_timeout_s
        self.store_id = 0
        self.created_at: datetime | None = None
        self._commit_log: _CommitLog | None = None

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str],
        *,
        schema: str | None = None,
        create: bool = True,
        timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        check: bool = True,
    ) -> Store:
        """Open a store, creating it only where none exists.

        Opening checks the tables and the ``wm_meta`` row of the schema version, on
        SQLite runs ``PRAGMA quick_check`` and compares the commit counter with the
        record beside the file. Anything that exists but is not a store (an empty
        file, another program's database, garbage) is refused and left untouched.

        Args:
            url: a SQLAlchemy URL (``sqlite:///run/memory.db``,
                ``postgresql+psycopg://user@host/db``) or a file path, taken as SQLite.
            schema: PostgreSQL only: the schema to keep the tables in, so several
                stores can share one database.
            create: make a new store if there is none: a SQLite file that does not
                exist (built aside and moved into place whole, so nobody sees it half
                made), or a PostgreSQL schema or database without memory tables
                (created in one transaction). With False a missing store is an error.
            timeout_s: the busy timeout: how long a writer waits for another's lock
                (SQLite's write lock; PostgreSQL's ``lock_timeout``) before
                ``StoreLockedError``.
            check: SQLite only: run ``PRAGMA quick_check`` (reads the whole file:
                ~0.04 s per 100k states).

        Raises:
            StoreMissingError: no store there and ``create`` is False.
            NotAStoreError: the file exists but holds no store (empty, foreign, garbage).
            StoreVersionError: tables of another schema version.
            StoreCorruptError: the quick check failed, tables or meta rows are missing.
            LostCommitsError: fewer commits in the database than recorded beside it.
            StoreLockedError: the busy timeout passed while creating or upgrading.
            StoreUnavailableError: the database cannot be reached or read.
            StoreError: an unsupported or in-memory URL, or a schema on SQLite.
        """
        text = os.fspath(url)
        if _is_sqlite_path(text):
            path = Path(text).expanduser().resolve()
            text = f"sqlite:///{path}"
        try:
            parsed = sa.make_url(text)
        except sa.exc.ArgumentError as exc:
            raise StoreError(f"not a store URL: {text!r} ({exc})") from None
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            if schema is not None:
                raise StoreError("schema= is for PostgreSQL; a SQLite store is one file")
            path = _sqlite_path(parsed)
            _sqlite_file(path, create)
            engine = _sqlite_engine(path, timeout_s)
        elif backend == "postgresql":
            engine = _postgres_engine(parsed, schema, timeout_s)
        else:
            raise StoreError(f"unsupported memory backend {backend!r}: use sqlite or postgresql")
        store = cls(engine, schema=schema, busy_timeout_s=timeout_s)
        try:
            store._prepare(create, check)
        except BaseException:
            store.close()
            raise
        return store

    # ---------------------------------------------------------------- opening

    def _prepare(self, create: bool, check: bool) -> None:
        with self._translated():
            if self.dialect == "postgresql":
                self._prepare_postgres(create)
            else:
                self._prepare_sqlite(check)

    def _prepare_sqlite(self, check: bool) -> None:
        with self.read() as conn:
            found = self._read_meta(conn)
            if check:
                rows = [r[0] for r in conn.exec_driver_sql("PRAGMA quick_check(8)")]
                if rows != ["ok"]:
                    problems = "; ".join(line for r in rows for line in r.splitlines())
                    raise StoreCorruptError(
                        f"memory store {self.location} is damaged (PRAGMA quick_check: "
                        f"{problems[:400]})",
                        location=self.location,
                    )
        if found["schema_version"] != SCHEMA_VERSION:
            self._upgrade()
        with self.engine.connect() as conn:
            # Persistent in the file, so a no-op after creation; set only now that the
            # file is known to be a store (on a foreign database it would convert it),
            # and on the driver connection: it cannot change inside a transaction.
            conn.connection.dbapi_connection.execute("PRAGMA journal_mode=WAL").fetchall()
        self._commit_log = _CommitLog(Path(f"{self.engine.url.database}.commits"))
        self._commit_log.reconcile(self)

    def _prepare_postgres(self, create: bool) -> None:
        for attempt in range(2):
            try:
                with self.engine.begin() as conn:
                    self._create_postgres(conn, create)
                break
            except (sa.exc.IntegrityError, sa.exc.ProgrammingError):
                # Two processes creating the same store at once: one transaction fails
                # on the catalog's unique index; the second look finds the tables.
                if attempt or not create:
                    raise
        with self.read() as conn:
            found = self._read_meta(conn)
        if found["schema_version"] != SCHEMA_VERSION:
            self._upgrade()

    def _create_postgres(self, conn: Connection, create: bool) -> None:
        # Create the store (schema, tables and meta rows, all in conn's transaction) if
        # there is none.
        if self.schema is not None:
            exists = conn.execute(
                sa.text("SELECT 1 FROM information_schema.schemata WHERE schema_name = :s"),
                {"s": self.schema},
            ).first()
            if exists is None and not create:
                raise StoreMissingError(
                    f"memory store {self.location}: no memory tables (no schema "
                    f"{self.schema!r}; open with create=True to make a new store)",
                    location=self.location,
                )
            if exists is None:
                conn.execute(sa.schema.CreateSchema(self.schema, if_not_exists=True))
        tables = set(sa.inspect(conn).get_table_names(schema=self.schema))
        if tables & set(metadata.tables):
            return
        if not create:
            raise StoreMissingError(
                f"memory store {self.location}: no memory tables (open with create=True "
                "to make a new store)",
                location=self.location,
            )
        metadata.create_all(conn)
        conn.execute(sa.insert(meta), _meta_rows(commits=False))

    def _read_meta(self, conn: Connection) -> dict[str, int]:
        # The tables and the meta rows of a store this wmkit reads (or can upgrade).
        tables = set(sa.inspect(conn).get_table_names(schema=self.schema))
        ours = set(metadata.tables)
        if not tables & ours:
            raise NotAStoreError(
                f"memory store {self.location}: no memory tables: this "
                f"{'file' if self.dialect == 'sqlite' else 'database'} holds "
                f"{'no tables' if not tables else 'only ' + ', '.join(sorted(tables)[:5])}, "
                "not a wmkit store (it was left as it is)",
                location=self.location,
            )
        if missing := ours - tables:
            raise StoreCorruptError(
                f"memory store {self.location} is incomplete: tables "
                f"{', '.join(sorted(missing))} are missing",
                location=self.location,
            )
        found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
        version = found.get("schema_version")
        if version is None:
            raise StoreCorruptError(
                f"memory store {self.location} has memory tables but no schema version "
                "row in wm_meta",
                location=self.location,
            )
        if version not in (1, SCHEMA_VERSION):
            raise StoreVersionError(
                f"memory store {self.location}: store has schema version {version}, "
                f"this wmkit reads {SCHEMA_VERSION}",
                location=self.location,
            )
        required = {"step"} | (set() if version == 1 else {"created_us", "store_id"})
        if self.dialect == "sqlite" and version != 1:
            required.add("commits")
        if missing_rows := required - set(found):
            raise StoreCorruptError(
                f"memory store {self.location}: wm_meta lacks the rows "
                f"{', '.join(sorted(missing_rows))}",
                location=self.location,
            )
        self.store_id = found.get("store_id", 0)
        self.created_at = from_us(found["created_us"]) if "created_us" in found else None
        return found

    def _upgrade(self) -> None:
        # Version 1 had no created time, store id or commit counter: add them.
        with self.write() as conn:
            found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
            if found.get("schema_version") == 1:
                rows = _meta_rows(commits=self.dialect == "sqlite")
                conn.execute(sa.insert(meta), [r for r in rows if r["name"] not in found])
                conn.execute(
                    sa.update(meta)
                    .where(meta.c.name == "schema_version")
                    .values(value=SCHEMA_VERSION)
                )
            found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
        self.store_id = found["store_id"]
        self.created_at = from_us(found["created_us"])

    # ------------------------------------------------------------ transactions

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on any exception.

        On SQLite it starts with ``BEGIN IMMEDIATE``: the write lock is held from the
        first statement, so what the transaction reads cannot change before it writes;
        a transaction that changed something raises the commit counter.

        Raises:
            StoreLockedError: the busy timeout passed waiting for another writer.
            StoreError: any other database failure (see the class docstring).
        """
        log = self._commit_log
        committed = None
        with self._translated(), self.engine.connect() as conn:
            conn.execution_options(wmkit_write=True)
            with conn.begin():
                if log is None:
                    yield conn
                else:
                    raw = conn.connection.dbapi_connection
                    before = raw.total_changes
                    yield conn
                    if raw.total_changes != before:
                        rows = raw.execute(_BUMP_SQL).fetchall()  # all: the statement ends
                        committed = rows[0][0] if rows else None
        if committed is not None:
            log.record(self.store_id, committed)

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction (on SQLite a consistent snapshot; never takes the write lock).

        Raises:
            StoreError: a database failure (see the class docstring).
        """
        with self._translated(), self.engine.connect() as conn, conn.begin():
            yield conn

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except sa.exc.DBAPIError as exc:
            error = _store_failure(exc, self.location, self.busy_timeout_s)
            if error is None:
                raise
            raise error from exc

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Return every row of every memory table, sorted: for comparing before/after."""
        with self.read() as conn:
            return {
                table.name: sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)
                for table in metadata.sorted_tables
            }

    def drop(self) -> None:
        """Drop the memory tables (and the PostgreSQL schema, if the store has one).

        A SQLite file left without its tables is no longer a store: opening it again
        is refused (``NotAStoreError``); delete the file to start afresh.
        """
        with self._translated():
            metadata.drop_all(self.engine)
            if self.dialect == "postgresql" and self.schema is not None:
                with self._base_engine.begin() as conn:
                    conn.execute(sa.schema.DropSchema(self.schema, cascade=True, if_exists=True))

    def close(self) -> None:
        """Close every pooled connection (and the commit record)."""
        self._base_engine.dispose()
        if self._commit_log is not None:
            self._commit_log.close()
            self._commit_log = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sqlite_files(path: str | os.PathLike[str]) -> tuple[Path, ...]:
    """Return the files of the SQLite store at ``path``: the database and its companions.

    Delete all of them to remove a store: a ``-wal`` left behind would be replayed
    into a new database, and ``.commits`` holds the commit record.
    """
    base = os.fspath(path)
    return tuple(Path(f"{base}{suffix}") for suffix in ("", "-wal", "-shm", ".commits"))


def _describe(url: sa.URL, schema: str | None) -> str:
    if url.get_backend_name() == "sqlite":
        return str(url.database)
    text = url.render_as_string(hide_password=True)
    return text if schema is None else f"{text} (schema {schema})"


def _meta_rows(*, commits: bool) -> list[dict[str, Any]]:
    # The meta rows of a new store; the store id tells one store's commit record from
    # another's left at the same path.
    rows = [
        {"name": "schema_version", "value": SCHEMA_VERSION},
        {"name": "step", "value": 0},
        {"name": "created_us", "value": now_us()},
        {"name": "store_id", "value": secrets.randbits(62) + 1},
    ]
    if commits:
        rows.append({"name": "commits", "value": 0})
    return rows


def _store_failure(exc: sa.exc.DBAPIError, location: str, timeout_s: float) -> StoreError | None:
    """Return the ``StoreError`` for a driver error, or None for a race callers retry."""
    orig = exc.orig
    code = getattr(orig, "sqlstate", None)
    if isinstance(exc, sa.exc.IntegrityError) or code in _RACE_SQLSTATES:
        return None
    detail = (str(orig) if orig is not None else str(exc)).strip().splitlines()
    detail_text = detail[0] if detail else type(exc).__name__
    name = getattr(orig, "sqlite_errorname", "") or ""
    low = detail_text.lower()
    where = f"memory store {location}"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")) or code == "55P03" or (
        not name and not code and "database is locked" in low
    ):
        return StoreLockedError(
            f"{where} is locked: another connection held the lock for more than the "
            f"{timeout_s:g} s busy timeout (Store.open(timeout_s=...)); {detail_text}",
            location=location,
        )
    if name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or code in ("XX001", "XX002") or (
        not name and ("malformed" in low or "not a database" in low)
    ):
        return StoreCorruptError(f"{where} is damaged: {detail_text}", location=location)
    if isinstance(exc, sa.exc.OperationalError) or exc.connection_invalidated:
        return StoreUnavailableError(f"{where} failed: {detail_text}", location=location)
    return StoreError(f"{where}: database error: {detail_text}", location=location)


class _CommitLog:
    """``<file>.commits``: how many write transactions a SQLite store has committed.

    One fixed-width line, ``wmkit-commits 1 <store id> <count>``, rewritten in place
    (one ``pwrite``: a killed process leaves the old line or the new one). Updates
    take an ``flock`` and only raise the count, so the processes sharing a store keep
    it monotone whatever order their commits finish in.
    """

    _WIDTH = len(f"wmkit-commits 1 {0:020d} {0:020d}\n")

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise StoreUnavailableError(
                f"memory store {path.with_suffix('')}: cannot open its commit record "
                f"{path}: {exc.strerror}",
                location=str(path.with_suffix("")),
            ) from exc
        self._lock = threading.Lock()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _read(self) -> tuple[int, int] | None:
        data = os.pread(self._fd, self._WIDTH + 1, 0)
        if not data:
            return None
        parts = data.decode("ascii", "replace").split()
        if len(data) != self._WIDTH or parts[:2] != ["wmkit-commits", "1"] or len(parts) != 4:
            raise StoreCorruptError(
                f"memory store {self.path.with_suffix('')}: its commit record {self.path} is "
                f"unreadable ({data[:60]!r}); delete it to accept the database as it is",
                location=str(self.path.with_suffix("")),
            )
        return int(parts[2]), int(parts[3])

    def _write(self, store_id: int, count: int) -> None:
        os.pwrite(self._fd, f"wmkit-commits 1 {store_id:020d} {count:020d}\n".encode(), 0)

    def record(self, store_id: int, count: int) -> None:
        """Record that the store has committed ``count`` write transactions (if higher)."""
        try:
            with self._locked():
                held = self._read()
                if held is None or held[0] != store_id or held[1] < count:
                    self._write(store_id, count)
        except (OSError, StoreCorruptError) as exc:
            # The commit stands; only the detection of its later loss is weakened.
            log.warning("memory store: could not update %s: %s", self.path, exc)

    def reconcile(self, store: Store) -> None:
        """Refuse ``store`` if it holds fewer commits than recorded; else bring the record up.

        The record is read before the database, under the lock every update takes, so
        a commit finishing meanwhile can only make the database look further ahead.

        Raises:
            LostCommitsError: the database is behind the record.
            StoreCorruptError: the record is unreadable.
        """
        with self._locked():
            held = self._read()
            with store.read() as conn:
                found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
            store_id, count = found["store_id"], found["commits"]
            if held is not None and held[0] == store_id and held[1] > count:
                raise LostCommitsError(
                    f"memory store {store.location} lost {held[1] - count} committed "
                    f"transactions: {self.path} records {held[1]}, the database holds "
                    f"{count} (was its -wal file deleted or not copied?); restore the "
                    f"missing file, or delete {self.path.name} to accept the database "
                    "as it is",
                    location=store.location,
                    recorded=held[1],
                    found=count,
                )
            if held is None and count > 0:
                log.warning(
                    "memory store %s: no commit record beside it; losses before now "
                    "cannot be detected",
                    store.location,
                )
            elif held is not None and held[0] != store_id:
                log.warning(
                    "memory store %s: %s belonged to another store; replaced",
                    store.location,
                    self.path,
                )
            if held != (store_id, count):
                self._write(store_id, count)

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


def _sqlite_path(url: sa.URL) -> Path:
    if url.database in (None, "", ":memory:") or url.database.startswith("file::memory:"):
        raise StoreError("an in-memory SQLite store is not persistent: give a file path")
    return Path(url.database).expanduser().resolve()


def _sqlite_file(path: Path, create: bool) -> None:
    """Make sure ``path`` is a SQLite file, creating a new store there if it is absent.

    Nothing that exists is written to before it is known to be a store: an empty or
    foreign file is refused as it is.
    """
    try:
        st = path.stat()
    except FileNotFoundError:
        if not create:
            raise StoreMissingError(
                f"memory store {path}: no memory tables: the file does not exist (open "
                "with create=True to make a new store)",
                location=str(path),
            ) from None
        _create_sqlite(path)
        return
    except OSError as exc:
        raise StoreUnavailableError(
            f"memory store {path}: {exc.strerror}", location=str(path)
        ) from exc
    if not stat.S_ISREG(st.st_mode):
        raise NotAStoreError(f"memory store {path}: not a regular file", location=str(path))
    if st.st_size == 0:
        raise NotAStoreError(
            f"memory store {path}: the file is empty (0 bytes), not a store; it was left "
            "as it is (delete it to create a new store there)",
            location=str(path),
        )
    with path.open("rb") as f:
        head = f.read(len(_SQLITE_MAGIC))
    if head != _SQLITE_MAGIC:
        raise NotAStoreError(
            f"memory store {path}: not a SQLite database (starts with {head[:8]!r}); it "
            "was left as it is",
            location=str(path),
        )


def _create_sqlite(path: Path) -> None:
    # Build the whole store in a private file, then link it into place: a second
    # process creating the same store, or a kill half way, never leaves a file that
    # exists without its tables (which would be refused as not a store).
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.creating")
    try:
        engine = sa.create_engine(f"sqlite:///{tmp}", poolclass=sa.pool.NullPool)
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")
            with engine.begin() as conn:
                metadata.create_all(conn)
                conn.execute(sa.insert(meta), _meta_rows(commits=True))
        finally:
            engine.dispose()  # the last connection checkpoints and removes the WAL
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another process created it first: open that one
        except OSError:  # a file system without hard links: copy, never overwriting
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                return
            with os.fdopen(fd, "wb") as out:
                out.write(tmp.read_bytes())
                out.flush()
                os.fsync(out.fileno())
    except sa.exc.DBAPIError as exc:
        raise StoreUnavailableError(
            f"memory store {path}: cannot create it: {exc.orig}", location=str(path)
        ) from exc
    finally:
        for leftover in sqlite_files(tmp):
            leftover.unlink(missing_ok=True)


def _sqlite_engine(path: Path, timeout_s: float) -> Engine:
    engine = sa.create_engine(f"sqlite:///{path}", connect_args={"timeout": timeout_s})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN below start transactions, not pysqlite's implicit one
        # (which begins late, deferred, and cannot take the write lock up front).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        # WAL (set when the store is made) + NORMAL: a killed process loses nothing
        # committed (an OS crash may lose the last transactions, never consistency).
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("wmkit_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _postgres_engine(url: sa.URL, schema: str | None, timeout_s: float) -> Engine:
    if schema is not None and not schema.isidentifier():
        raise StoreError(f"schema {schema!r} must be a plain identifier")
    # lock_timeout bounds a wait for a row or table lock, as the busy timeout does on
    # SQLite; it is no statement timeout.
    options = f"-c lock_timeout={max(1, round(timeout_s * 1000))}"
    return sa.create_engine(url, pool_pre_ping=True, connect_args={"options": options})
