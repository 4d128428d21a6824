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
- ``wm_meta``: the schema version and the memory clock (largest agent step seen).

Locking: every write transaction on SQLite starts with ``BEGIN IMMEDIATE`` (the database
write lock is taken up front, so read-check-write sequences cannot interleave). On
PostgreSQL a governor claims a release with ``FOR UPDATE SKIP LOCKED`` (concurrent
governors take different entries) and expiry and rollback lock the rows they take;
on both, every state change is conditional on the lifecycle and ``row_version`` it
read, so a lost race is detected (``Conflict``) and the transaction retried rather
than applied twice, and the partial unique index refuses a second live version.
Times are integer microseconds since the epoch and steps are integers: the database
compares numbers, never date strings.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

from wmkit.memory.errors import StoreError
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
    "state_deps",
    "state_row",
    "states",
]

SCHEMA_VERSION = 1
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
    """Return the memory clock: the largest agent step any writer has reported."""
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


def _is_sqlite_path(url: str) -> bool:
    return "://" not in url


class Store:
    """A database holding governed memory, reached through one SQLAlchemy engine.

    Open one with ``Store.open``; it is safe to share between threads, and each
    process opens its own (engines must not cross ``fork``).

    Attributes:
        engine: the SQLAlchemy engine (for tests and benchmarks that attach events).
        dialect: ``"sqlite"`` or ``"postgresql"``.
        schema: the PostgreSQL schema holding the tables, or None for the default.
    """

    def __init__(self, engine: Engine, *, schema: str | None = None) -> None:
        self._base_engine = engine
        self.engine = (
            engine
            if schema is None
            else engine.execution_options(schema_translate_map={None: schema})
        )
        self.dialect = engine.dialect.name
        self.schema = schema

    @classmethod
    def open(
        cls,
        url: str | os.PathLike[str],
        *,
        schema: str | None = None,
        create: bool = True,
        timeout_s: float = 30.0,
    ) -> Store:
        """Open (and by default create) a store.

        Args:
            url: a SQLAlchemy URL (``sqlite:///run/memory.db``,
                ``postgresql+psycopg://user@host/db``) or a file path, taken as SQLite.
            schema: PostgreSQL only: the schema to keep the tables in (created if
                missing), so several stores can share one database.
            create: create missing tables; otherwise a store without them is an error.
            timeout_s: how long a SQLite writer waits for the write lock.

        Raises:
            StoreError: an unsupported or in-memory URL, a schema on SQLite, or tables
                of another schema version.
        """
        text = os.fspath(url)
        if _is_sqlite_path(text):
            path = Path(text).expanduser().resolve()
            text = f"sqlite:///{path}"
        parsed = sa.make_url(text)
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            if schema is not None:
                raise StoreError("schema= is for PostgreSQL; a SQLite store is one file")
            engine = _sqlite_engine(parsed, timeout_s)
        elif backend == "postgresql":
            engine = _postgres_engine(parsed, schema)
        else:
            raise StoreError(f"unsupported memory backend {backend!r}: use sqlite or postgresql")
        store = cls(engine, schema=schema)
        try:
            store._prepare(create)
        except BaseException:
            engine.dispose()
            raise
        return store

    def _prepare(self, create: bool) -> None:
        if self.dialect == "postgresql" and self.schema is not None:
            with self._base_engine.begin() as conn:
                conn.execute(sa.schema.CreateSchema(self.schema, if_not_exists=True))
        if create:
            metadata.create_all(self.engine)
        with self.write() as conn:
            try:
                found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
            except sa.exc.ProgrammingError as exc:  # PostgreSQL: no such table
                raise StoreError(f"no memory tables in this store ({exc.orig})") from None
            except sa.exc.OperationalError as exc:  # SQLite: no such table
                raise StoreError(f"no memory tables in this store ({exc.orig})") from None
            version = found.get("schema_version")
            if version is None:
                conn.execute(
                    sa.insert(meta),
                    [
                        {"name": "schema_version", "value": SCHEMA_VERSION},
                        {"name": "step", "value": 0},
                    ],
                )
            elif version != SCHEMA_VERSION:
                raise StoreError(
                    f"store has schema version {version}, this wmkit reads {SCHEMA_VERSION}"
                )

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A write transaction: committed on success, rolled back on any exception.

        On SQLite it starts with ``BEGIN IMMEDIATE``: the write lock is held from the
        first statement, so what the transaction reads cannot change before it writes.
        """
        with self.engine.connect() as conn:
            conn.execution_options(wmkit_write=True)
            with conn.begin():
                yield conn

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read transaction (on SQLite a consistent snapshot; never takes the write lock)."""
        with self.engine.connect() as conn, conn.begin():
            yield conn

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Return every row of every memory table, sorted: for comparing before/after."""
        with self.read() as conn:
            return {
                table.name: sorted((tuple(r) for r in conn.execute(sa.select(table))), key=repr)
                for table in metadata.sorted_tables
            }

    def drop(self) -> None:
        """Drop the memory tables (and the PostgreSQL schema, if the store has one)."""
        metadata.drop_all(self.engine)
        if self.dialect == "postgresql" and self.schema is not None:
            with self._base_engine.begin() as conn:
                conn.execute(sa.schema.DropSchema(self.schema, cascade=True, if_exists=True))

    def close(self) -> None:
        """Close every pooled connection."""
        self._base_engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sqlite_engine(url: sa.URL, timeout_s: float) -> Engine:
    if url.database in (None, "", ":memory:") or url.database.startswith("file::memory:"):
        raise StoreError("an in-memory SQLite store is not persistent: give a file path")
    Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    engine = sa.create_engine(url, connect_args={"timeout": timeout_s})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Let SQLAlchemy's BEGIN below start transactions, not pysqlite's implicit one
        # (which begins late, deferred, and cannot take the write lock up front).
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # WAL + NORMAL: a killed process loses nothing committed (an OS crash may lose
        # the last transactions, never consistency).
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("wmkit_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def _postgres_engine(url: sa.URL, schema: str | None) -> Engine:
    if schema is not None and not schema.isidentifier():
        raise StoreError(f"schema {schema!r} must be a plain identifier")
    return sa.create_engine(url, pool_pre_ping=True)
