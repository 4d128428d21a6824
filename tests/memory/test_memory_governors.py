"""Concurrent governor processes never commit a release twice."""

import json
import multiprocessing
import subprocess
import sys
from collections import Counter

import sqlalchemy as sa

from wmkit.memory import Governor, StateManager, Store
from wmkit.memory.store import release_attempts, release_log

RELEASES = 300


def pending_store(url, schema, n=RELEASES):
    with StateManager.open(url, schema=schema) as memory:
        for i in range(n):
            memory.set_state(f"k{i}", i, source="test", authority="FACT", step=1)
            memory.mark_for_release(f"k{i}", "ARCHIVE", "bulk")


def commits(url, schema):
    with Store.open(url, schema=schema) as store, store.read() as conn:
        per_release = Counter(
            conn.execute(
                sa.select(release_attempts.c.release_id).where(
                    release_attempts.c.outcome == "committed"
                )
            ).scalars()
        )
        workers = Counter(
            conn.execute(
                sa.select(release_log.c.worker).where(release_log.c.status == "DONE")
            ).scalars()
        )
        statuses = Counter(conn.execute(sa.select(release_log.c.status)).scalars())
    return per_release, workers, statuses


def _drain(url, schema, name, barrier, queue):
    store = Store.open(url, schema=schema, create=False)
    barrier.wait()
    queue.put(Governor(store, worker=name).drain(timeout_s=120).released)


def test_concurrent_governor_processes_never_double_release(backend, location):
    url, schema = location
    pending_store(url, schema)
    ctx = multiprocessing.get_context("fork")
    barrier, queue = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_drain, args=(url, schema, f"g{i}", barrier, queue)) for i in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
        assert p.exitcode == 0
    released = sorted(queue.get(timeout=5) for _ in procs)
    per_release, workers, statuses = commits(url, schema)
    assert sum(released) == RELEASES
    assert statuses == {"DONE": RELEASES}
    assert len(per_release) == RELEASES and set(per_release.values()) == {1}
    assert sum(workers.values()) == RELEASES
    if backend == "postgres":
        # SKIP LOCKED lets them work side by side: more than one did real work.
        assert sum(1 for n in released if n > 0) >= 2, released


def test_governor_cli_processes_drain_together(location):
    url, schema = location
    pending_store(url, schema, n=150)
    extra = ["--schema", schema] if schema else []
    cmd = [sys.executable, "-m", "wmkit.scripts.governor", url, *extra]
    procs = [
        subprocess.Popen(
            [*cmd, "--drain", "--worker", f"cli{i}"], stdout=subprocess.PIPE, text=True
        )
        for i in range(2)
    ]
    outputs = [json.loads(p.communicate(timeout=180)[0]) for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert sum(o["released"] for o in outputs) == 150
    assert all(o["pending"] == 0 and o["dead_letters"] == 0 for o in outputs)
    per_release, workers, _ = commits(url, schema)
    assert set(per_release.values()) == {1} and len(per_release) == 150
    assert set(workers) <= {"cli0", "cli1"}
    status = subprocess.run([*cmd, "--status"], capture_output=True, text=True, check=True)
    assert json.loads(status.stdout) == {
        "releases": {"DONE": 150},
        "states": {"ARCHIVED": 150},
    }
