"""Four writer processes on one key lose none of their writes (issue 16, failure 5).

Each writer is a real process (``spawn``: nothing inherited but the arguments) with
its own store, writing ``WRITES`` distinct values to the same key; a barrier starts
them together. Every write either lands as a version in the key's history or raises:
afterwards the history holds exactly all ``WRITERS * WRITES`` values, versions
1..n without a gap, and exactly one of them is live. And a write that cannot land
before its deadline raises: it never vanishes.
"""

import multiprocessing
import time
from collections import Counter

import pytest

from wmkit.memory import Lifecycle, StateManager, Store, StoreError, WriteConflictError

WRITERS = 4
WRITES = 1250  # 4 x 1250 = 5,000 writes in all
KEY = "user|budget"


def _writer(url, schema, name, n, barrier, queue):
    # A write that cannot land raises out of here: the exit code says so.
    with StateManager(Store.open(url, schema=schema, create=False)) as memory:
        barrier.wait(timeout=60)
        started = time.monotonic()
        for i in range(n):
            memory.set_state(KEY, f"{name}:{i}", source=name, authority="FACT", step=i)
        queue.put((name, time.monotonic() - started))


def test_four_writer_processes_on_one_key_lose_no_write(location):
    url, schema = location
    Store.open(url, schema=schema).close()  # create the tables once, before the race
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(WRITERS), ctx.Queue()
    names = [f"w{i}" for i in range(WRITERS)]
    procs = [
        ctx.Process(target=_writer, args=(url, schema, name, WRITES, barrier, queue))
        for name in names
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=300)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    seconds = dict(queue.get(timeout=5) for _ in procs)
    assert sorted(seconds) == names

    with StateManager.open(url, schema=schema) as memory:
        history = memory.history(KEY)
        live = [s for s in history if s.lifecycle in (Lifecycle.ACTIVE, Lifecycle.STABLE)]
        served = memory.get_state(KEY).state
    values = Counter(s.value for s in history)
    expected = {f"{name}:{i}" for name in names for i in range(WRITES)}
    assert len(history) == WRITERS * WRITES, f"{WRITERS * WRITES - len(history)} writes lost"
    assert set(values) == expected and set(values.values()) == {1}
    assert [s.version for s in history] == list(range(1, WRITERS * WRITES + 1))
    assert len(live) == 1 and served.value == live[0].value
    # Authority ties go to the larger step, so the live one is some writer's last value.
    assert served.value in {f"{name}:{WRITES - 1}" for name in names}


def test_a_write_that_cannot_land_raises_and_leaves_nothing(location):
    url, schema = location
    # Another connection holds the write lock for longer than both bounds: the store's
    # busy timeout (a lock wait) and the manager's write deadline (lost races).
    with Store.open(url, schema=schema, timeout_s=0.3) as store:
        memory = StateManager(store, write_timeout_s=0.3)
        memory.set_state(KEY, "before", source="test", authority="FACT", step=1)
        with Store.open(url, schema=schema) as holder, holder.write() as conn:
            if holder.dialect == "postgresql":  # SQLite's BEGIN IMMEDIATE already holds it
                conn.exec_driver_sql(f"LOCK TABLE {schema}.wm_states IN EXCLUSIVE MODE")
            started = time.monotonic()
            with pytest.raises((WriteConflictError, StoreError)) as info:
                memory.set_state(KEY, "blocked", source="test", authority="FACT", step=2)
            waited = time.monotonic() - started
        assert 0.25 < waited < 5, waited
        assert "0.3 s" in str(info.value), info.value
        assert [s.value for s in memory.history(KEY)] == ["before"]
        # The lock gone, the same write lands at once.
        assert memory.set_state(KEY, "after", source="test", authority="FACT", step=2).accepted
        assert [s.value for s in memory.history(KEY)] == ["before", "after"]
