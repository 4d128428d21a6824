"""A damaged, foreign or busy store is refused with a ``StoreError`` naming it, never used.

Each test makes the damage for real: an empty or foreign file, bytes overwritten in
the middle of a store, the ``-wal`` file deleted after a SIGKILL, a second process
holding the write lock, tables dropped under a running store.
"""

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
import sqlalchemy as sa

from wmkit.memory import (
    LostCommitsError,
    NotAStoreError,
    StateManager,
    Store,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreMissingError,
    StoreUnavailableError,
    StoreVersionError,
)
from wmkit.memory.store import SCHEMA_VERSION, meta, sqlite_files

POSTGRES_URL = os.environ.get("WMKIT_POSTGRES_URL")


def fingerprint(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def put(memory, i, value="v"):
    memory.set_state(f"fact|{i}", value, source="test", authority="FACT", step=i)


# --------------------------------------------------------- not a store: left as it is


def test_an_empty_file_is_refused_and_left_empty(tmp_path):
    path = tmp_path / "memory.db"
    path.touch()
    for opener in (Store.open, StateManager.open):
        with pytest.raises(NotAStoreError, match="empty") as err:
            opener(str(path))
        assert str(path) in str(err.value) and err.value.location == str(path)
    assert path.stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]


def test_a_foreign_sqlite_database_is_refused_untouched(tmp_path):
    path = tmp_path / "notes.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.executemany("INSERT INTO notes (body) VALUES (?)", [("a",), ("b",)])
    conn.close()
    before = fingerprint(path)
    with pytest.raises(NotAStoreError, match="only notes") as err:
        Store.open(path)
    assert str(path) in str(err.value)
    assert fingerprint(path) == before
    with sqlite3.connect(path) as conn:  # not converted to WAL either
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()


def test_a_garbage_file_is_refused_untouched(tmp_path):
    path = tmp_path / "memory.db"
    path.write_bytes(random.Random(0).randbytes(8192))
    before = fingerprint(path)
    with pytest.raises(NotAStoreError, match="not a SQLite database") as err:
        Store.open(path)
    assert str(path) in str(err.value) and fingerprint(path) == before


def test_creating_is_explicit_and_a_missing_store_is_not_made(tmp_path):
    path = tmp_path / "sub" / "memory.db"
    with pytest.raises(StoreMissingError, match="does not exist") as err:
        Store.open(path, create=False)
    assert str(path) in str(err.value) and not path.parent.exists()
    with Store.open(path) as store:  # create=True (the default) makes a new one
        assert store.store_id > 0 and store.created_at is not None
    assert sorted(p.name for p in path.parent.iterdir()) == ["memory.db", "memory.db.commits"]
    with Store.open(path, create=False) as store, store.read() as conn:
        found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
    assert found["schema_version"] == SCHEMA_VERSION and found["commits"] == 0


def test_concurrent_creators_all_open_the_same_store(tmp_path):
    path = tmp_path / "memory.db"
    code = textwrap.dedent(f"""
        from wmkit.memory import Store
        with Store.open({str(path)!r}) as store:
            print(store.store_id)
    """)
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    ids = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs) and len(ids) == 1
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".creating")]


# ----------------------------------------------------------------------- damage


def test_bytes_overwritten_mid_file_are_found_on_open_and_on_read(tmp_path):
    path = tmp_path / "memory.db"
    with StateManager.open(path) as memory:
        for i in range(2000):
            put(memory, i, f"marker-{i:05d}-" + "x" * 80)
    data = path.read_bytes()
    at = data.index(b"marker-01000-")  # a page of wm_states in the middle of the file
    assert len(data) // 4 < at < 3 * len(data) // 4
    page = at - at % 4096
    with path.open("r+b") as f:
        f.seek(page)
        f.write(random.Random(1).randbytes(64))  # its page header and cell pointers
    with pytest.raises(StoreCorruptError, match="damaged") as err:
        StateManager.open(path)
    assert str(path) in str(err.value)
    # Opened without the check, the damage surfaces on read as the store's own error.
    with Store.open(path, check=False) as store, pytest.raises(StoreCorruptError) as err:
        store.dump()
    assert str(path) in str(err.value) and isinstance(err.value.__cause__, sa.exc.DBAPIError)


def test_a_deleted_wal_after_a_kill_is_reported_as_lost_commits(tmp_path):
    path = tmp_path / "memory.db"
    writes = 300
    code = textwrap.dedent(f"""
        import os, signal
        from wmkit.memory import StateManager
        memory = StateManager.open({str(path)!r})
        for i in range({writes}):
            memory.set_state(f"fact|{{i}}", "v" * 200, source="t", authority="FACT", step=i)
        os.kill(os.getpid(), signal.SIGKILL)  # no checkpoint, no clean close
    """)
    proc = subprocess.run([sys.executable, "-c", code], timeout=120)
    assert proc.returncode == -signal.SIGKILL
    wal = sqlite_files(path)[1]
    assert wal.stat().st_size > 0
    wal.unlink()
    with pytest.raises(LostCommitsError) as err:
        StateManager.open(path)
    lost = err.value
    assert lost.recorded == writes and 0 < lost.missing <= writes
    assert f"lost {lost.missing} committed transactions" in str(lost) and str(path) in str(lost)
    # Refused again, until the record is deleted: then the database is taken as it is,
    # and it holds exactly the commits it said it held (one FACT each).
    with pytest.raises(LostCommitsError):
        Store.open(path)
    sqlite_files(path)[3].unlink()
    with StateManager.open(path) as memory:
        assert len(memory.live_states()) == lost.found == writes - lost.missing


def test_the_commit_record_follows_every_writer_and_only_rises(tmp_path):
    path = tmp_path / "memory.db"
    record = sqlite_files(path)[3]
    with StateManager.open(path) as a, StateManager.open(path) as b:
        for i in range(5):
            put(a, i)
            put(b, 100 + i)
        a.get_state("fact|1")  # reads and refusals commit nothing
        with pytest.raises(StoreError), a.store.write() as conn:
            conn.execute(sa.update(meta).where(meta.c.name == "step").values(value=9))
            raise StoreError("abandon this transaction")
    assert record.read_text().split()[-1] == f"{10:020d}"
    with Store.open(path) as store, store.read() as conn:
        commits = conn.execute(sa.select(meta.c.value).where(meta.c.name == "commits"))
        assert commits.scalar_one() == 10


def test_a_commit_record_left_by_another_store_is_replaced(tmp_path):
    path = tmp_path / "memory.db"
    with StateManager.open(path) as memory:
        for i in range(3):
            put(memory, i)
    for leftover in sqlite_files(path)[:3]:  # a caller wiping the store, not its record
        leftover.unlink(missing_ok=True)
    with StateManager.open(path) as memory:
        assert memory.live_states() == []
        put(memory, 1)
    with Store.open(path) as store:
        assert store.store_id > 0


def test_an_unreadable_commit_record_is_refused(tmp_path):
    path = tmp_path / "memory.db"
    Store.open(path).close()
    sqlite_files(path)[3].write_text("half a line")
    with pytest.raises(StoreCorruptError, match="commit record") as err:
        Store.open(path)
    assert str(path) in str(err.value)


# ------------------------------------------------------------------- busy store


def test_a_store_locked_by_another_process_waits_the_busy_timeout_then_says_so(tmp_path):
    path = tmp_path / "memory.db"
    with Store.open(path) as store:
        assert store.busy_timeout_s == 5.0
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE'); print('held', flush=True); time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with Store.open(path, timeout_s=0.5) as store:  # opening only reads
            began = time.monotonic()
            with (
                pytest.raises(StoreLockedError, match="busy timeout") as err,
                store.write() as conn,
            ):
                conn.execute(sa.update(meta).where(meta.c.name == "step").values(value=1))
            waited = time.monotonic() - began
            assert 0.4 <= waited < 5.0, waited
            assert str(path) in str(err.value)
            holder.kill()
            holder.wait(timeout=10)
            with store.write() as conn:  # the lock died with its holder
                conn.execute(sa.update(meta).where(meta.c.name == "step").values(value=1))
    finally:
        holder.kill()
        holder.wait(timeout=10)


# ------------------------------------------------------- the boundary's own errors


def test_database_failures_in_use_are_store_errors_naming_the_file(tmp_path):
    path = tmp_path / "memory.db"
    with StateManager.open(path) as memory:
        put(memory, 1)
        with sqlite3.connect(path) as conn:
            conn.execute("DROP TABLE wm_states")
        conn.close()
        with pytest.raises(StoreUnavailableError, match="no such table") as err:
            put(memory, 2)
        assert str(path) in str(err.value)
    with pytest.raises(StoreCorruptError, match="wm_states are missing"):
        Store.open(path)


def test_an_unreachable_server_is_a_store_error_without_the_password():
    url = "postgresql+psycopg://wmkit:s3cret@127.0.0.1:1/none"
    with pytest.raises(StoreUnavailableError, match=r"127\.0\.0\.1:1") as err:
        Store.open(url, schema="s")
    assert "s3cret" not in str(err.value)


def test_a_version_1_store_is_upgraded_in_place(location):
    url, schema = location
    with StateManager.open(url, schema=schema) as memory:
        put(memory, 1)
        with memory.store.write() as conn:
            conn.execute(
                sa.delete(meta).where(meta.c.name.in_(["created_us", "store_id", "commits"]))
            )
            conn.execute(sa.update(meta).where(meta.c.name == "schema_version").values(value=1))
    with StateManager.open(url, schema=schema) as memory:
        assert memory.get_state("fact|1").state.value == "v"
        assert memory.store.store_id > 0
        with memory.store.read() as conn:
            found = dict(conn.execute(sa.select(meta.c.name, meta.c.value)).all())
        assert found["schema_version"] == SCHEMA_VERSION and "created_us" in found


# ------------------------------------------------------------------ PostgreSQL


@pytest.fixture
def pg_schema():
    if not POSTGRES_URL:
        pytest.skip("WMKIT_POSTGRES_URL is not set")
    schema = f"t_{os.urandom(6).hex()}"
    yield schema
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        conn.execute(sa.schema.DropSchema(schema, cascade=True, if_exists=True))
    engine.dispose()


def _pg_exec(schema, *statements):
    engine = sa.create_engine(POSTGRES_URL)
    with engine.begin() as conn:
        for statement in statements:
            conn.exec_driver_sql(statement.format(s=schema))
    engine.dispose()


@pytest.mark.postgres
def test_postgres_creation_is_explicit(pg_schema):
    with pytest.raises(StoreMissingError, match=pg_schema):
        Store.open(POSTGRES_URL, schema=pg_schema, create=False)
    engine = sa.create_engine(POSTGRES_URL)
    assert pg_schema not in sa.inspect(engine).get_schema_names()
    engine.dispose()
    with Store.open(POSTGRES_URL, schema=pg_schema) as store:
        assert store.store_id > 0 and store.created_at is not None
    Store.open(POSTGRES_URL, schema=pg_schema, create=False).close()


@pytest.mark.postgres
def test_postgres_foreign_partial_and_versionless_schemas_are_refused(pg_schema):
    _pg_exec(pg_schema, "CREATE SCHEMA {s}", "CREATE TABLE {s}.invoices (id int)")
    with pytest.raises(StoreMissingError, match="no memory tables"):
        Store.open(POSTGRES_URL, schema=pg_schema, create=False)
    _pg_exec(pg_schema, "CREATE TABLE {s}.wm_states (id int)")
    with pytest.raises(StoreCorruptError, match="incomplete") as err:
        Store.open(POSTGRES_URL, schema=pg_schema)
    assert pg_schema in str(err.value)
    _pg_exec(pg_schema, "DROP TABLE {s}.wm_states")
    Store.open(POSTGRES_URL, schema=pg_schema).close()  # beside foreign tables: fine
    _pg_exec(pg_schema, "DELETE FROM {s}.wm_meta WHERE name = 'schema_version'")
    with pytest.raises(StoreCorruptError, match="no schema version"):
        Store.open(POSTGRES_URL, schema=pg_schema)
    _pg_exec(pg_schema, "INSERT INTO {s}.wm_meta VALUES ('schema_version', 99)")
    with pytest.raises(StoreVersionError, match="schema version 99"):
        Store.open(POSTGRES_URL, schema=pg_schema)


@pytest.mark.postgres
def test_postgres_locked_table_waits_the_busy_timeout_then_says_so(pg_schema):
    Store.open(POSTGRES_URL, schema=pg_schema).close()
    dsn = sa.make_url(POSTGRES_URL).set(drivername="postgresql").render_as_string(False)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import psycopg, time\n"
            f"c = psycopg.connect({dsn!r})\n"
            f"c.execute('LOCK TABLE {pg_schema}.wm_meta IN EXCLUSIVE MODE')\n"
            "print('held', flush=True); time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with Store.open(POSTGRES_URL, schema=pg_schema, timeout_s=0.5) as store:
            began = time.monotonic()
            with (
                pytest.raises(StoreLockedError, match="busy timeout") as err,
                store.write() as conn,
            ):
                conn.execute(sa.update(meta).where(meta.c.name == "step").values(value=1))
            assert 0.4 <= time.monotonic() - began < 5.0
            assert pg_schema in str(err.value)
    finally:
        holder.kill()
        holder.wait(timeout=10)
