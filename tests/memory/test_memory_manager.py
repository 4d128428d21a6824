"""StateManager behaviour, run against every backend (see conftest.py)."""

import threading

import pytest
import sqlalchemy as sa

from wmkit.memory import (
    Authority,
    Governor,
    Lifecycle,
    MissingStateError,
    ReleaseStatus,
    StateManager,
    Store,
    StoreError,
)
from wmkit.memory.store import meta, release_attempts

BUDGET, HOTEL, CRITERIA, FLIGHT = "user|budget", "hotel|choice", "hotel|criteria", "flight|no"


def put(memory, key, value, authority="FACT", step=1, **kw):
    return memory.set_state(key, value, source="test", authority=authority, step=step, **kw)


def committed_per_release(store):
    with store.read() as conn:
        rows = conn.execute(
            sa.select(release_attempts.c.release_id, sa.func.count())
            .where(release_attempts.c.outcome == "committed")
            .group_by(release_attempts.c.release_id)
        ).all()
    return dict(rows)


def test_authority_then_recency_decides_and_history_keeps_every_write(memory):
    assert put(memory, BUDGET, 10000, "ASSUMPTION", step=1).accepted
    fact = put(memory, BUDGET, 8000, "FACT", step=3)
    assert fact.accepted and fact.version == 2 and "outranks" in fact.reason
    lower = put(memory, BUDGET, 9000, "ASSUMPTION", step=4)
    assert not lower.accepted and lower.state.value == 8000 and lower.version == 3
    older = put(memory, BUDGET, 7000, "FACT", step=2)
    assert not older.accepted and "older" in older.reason
    newer = put(memory, BUDGET, 7500, "FACT", step=3)  # same step, later write wins
    assert newer.accepted

    assert memory.get_state(BUDGET).state.value == 7500
    history = memory.history(BUDGET)
    assert [(s.version, s.value, s.lifecycle) for s in history] == [
        (1, 10000, Lifecycle.ARCHIVED),
        (2, 8000, Lifecycle.ARCHIVED),
        (3, 9000, Lifecycle.ARCHIVED),
        (4, 7000, Lifecycle.ARCHIVED),
        (5, 7500, Lifecycle.ACTIVE),
    ]
    assert history[0].note == "superseded by v2"
    assert history[2].note.startswith("rejected")
    assert [s.id for s in history] == sorted(s.id for s in history)


def test_system_states_change_only_through_a_release(memory, governor):
    put(memory, "agent|role", "booking assistant", "SYSTEM")
    assert not put(memory, "agent|role", "poet", "SYSTEM", step=5).accepted
    assert not put(memory, "agent|role", "poet", "FACT", step=5).accepted
    memory.mark_for_release("agent|role", "ARCHIVE", "new role")
    governor.drain()
    assert put(memory, "agent|role", "poet", "SYSTEM", step=6).accepted


def test_min_authority_filters_what_is_served(memory):
    put(memory, BUDGET, 10000, "ASSUMPTION")
    assert memory.get_state(BUDGET, min_authority="ASSUMPTION").found
    low = memory.get_state(BUDGET, min_authority=Authority.FACT)
    assert low.state is None and low.reason == "below_authority"
    assert memory.get_state("nobody|knows").reason == "missing"


def test_temporary_states_are_never_persisted(memory, store):
    before = store.dump()
    result = put(memory, "search|query", "hotels in Lyon", "TEMPORARY", step=1)
    assert result.accepted and result.version is None
    assert memory.get_state("search|query").reason == "temporary"
    assert memory.get_state("search|query", min_authority="ASSUMPTION").state is None
    assert store.dump() == before  # nothing reached the store
    assert memory.history("search|query") == ()
    # Another manager on the same store (a restart) never sees it.
    assert StateManager(store).get_state("search|query").state is None
    # A persisted state outranks it and takes its place; later temporaries are refused.
    put(memory, "search|query", "hotels in Paris", "ASSUMPTION", step=2)
    assert memory.get_state("search|query").state.value == "hotels in Paris"
    refused = put(memory, "search|query", "x", "TEMPORARY", step=3)
    assert not refused.accepted and refused.state.value == "hotels in Paris"


def test_two_phase_release_never_serves_a_pending_or_released_state(memory, governor, store):
    put(memory, BUDGET, 8000)
    put(memory, HOTEL, "A", "ASSUMPTION", step=2)
    (entry,) = memory.mark_for_release(HOTEL, "ARCHIVE", "user_cancellation")
    assert entry.status is ReleaseStatus.PENDING and entry.key == HOTEL

    # Phase one alone: unusable, logged, and marking again is idempotent.
    lookup = memory.get_state(HOTEL)
    assert lookup.state is None and lookup.reason == "pending_release"
    assert memory.history(HOTEL)[-1].lifecycle is Lifecycle.PENDING_RELEASE
    assert memory.mark_for_release(HOTEL, "ARCHIVE", "again") == (entry,)
    assert memory.releases(status="PENDING") == [entry]

    report = governor.drain()
    assert report.released == 1 and report.dead == 0
    (done,) = memory.releases(key=HOTEL)
    assert done.status is ReleaseStatus.DONE and done.done_at is not None
    assert memory.history(HOTEL)[-1].lifecycle is Lifecycle.ARCHIVED
    assert memory.get_state(HOTEL).reason == "archived"
    assert committed_per_release(store) == {entry.id: 1}
    with pytest.raises(MissingStateError, match="hotel"):
        memory.mark_for_release(HOTEL, "ARCHIVE", "once more")
    assert memory.get_state(BUDGET).state.value == 8000


def test_a_new_write_replaces_a_pending_release(memory, governor):
    put(memory, HOTEL, "A", step=1)
    memory.mark_for_release(HOTEL, "ARCHIVE", "user_cancellation")
    assert put(memory, HOTEL, "B", "ASSUMPTION", step=2).accepted
    governor.drain()
    assert memory.get_state(HOTEL).state.value == "B"


def test_fallback_walks_dependencies_to_a_stable_or_authoritative_state(memory):
    put(memory, BUDGET, 8000, "FACT", step=1)
    put(memory, CRITERIA, {"stars": 4}, "ASSUMPTION", step=2, dependencies=[BUDGET])
    put(memory, HOTEL, "A", "ASSUMPTION", step=3, dependencies=[CRITERIA])
    memory.mark_for_release(HOTEL, "ARCHIVE", "user_cancellation")

    # The unconfirmed assumption is walked through to the FACT it rests on.
    lookup = memory.get_state(HOTEL)
    assert lookup.fallback and lookup.source_key == BUDGET and lookup.state.value == 8000
    assert lookup.reason == "pending_release"
    # Once confirmed, the criteria are the nearest stable source.
    assert memory.stabilize(CRITERIA).lifecycle is Lifecycle.STABLE
    assert memory.get_state(HOTEL).source_key == CRITERIA
    assert memory.get_state(HOTEL, min_authority="FACT").source_key == BUDGET
    with pytest.raises(MissingStateError):
        memory.stabilize(HOTEL)


def test_ttl_expiry_hides_the_state_then_releases_it_through_the_governor(memory, governor):
    put(memory, "price|flight", 420, "FACT", step=1, ttl_steps=3)
    memory.advance(3)
    assert memory.get_state("price|flight").found
    assert memory.advance(4) == 4 and memory.advance(2) == 4  # the clock never goes back
    lookup = memory.get_state("price|flight")
    assert lookup.state is None and lookup.reason == "expired"
    assert memory.live_states() == []

    report = governor.drain()
    assert report.expired == 1 and report.released == 1
    (entry,) = memory.releases(key="price|flight")
    assert entry.reason == "ttl expired at step 4" and entry.status is ReleaseStatus.DONE
    assert memory.history("price|flight")[-1].lifecycle is Lifecycle.ARCHIVED


def test_downgrade_turns_a_fact_into_an_assumption(memory, governor):
    put(memory, BUDGET, 8000, "FACT")
    memory.mark_for_release(BUDGET, "DOWNGRADE", "user unsure")
    governor.drain()
    lookup = memory.get_state(BUDGET)
    assert lookup.state.authority is Authority.ASSUMPTION and lookup.state.value == 8000
    assert lookup.state.metadata["downgraded_from"] == "FACT"
    assert [s.lifecycle for s in memory.history(BUDGET)] == [Lifecycle.ARCHIVED, Lifecycle.ACTIVE]


def test_cascade_releases_everything_resting_on_the_key(memory, governor):
    put(memory, BUDGET, 8000)
    put(memory, CRITERIA, {"stars": 4}, step=2, dependencies=[BUDGET])
    put(memory, HOTEL, "A", step=3, dependencies=[CRITERIA])
    put(memory, FLIGHT, "LH123", step=3)
    entries = memory.mark_for_release(BUDGET, "ARCHIVE", "budget withdrawn", cascade=True)
    assert [e.key for e in entries] == [BUDGET, CRITERIA, HOTEL]
    governor.drain()
    assert [s.key for s in memory.live_states()] == [FLIGHT]


def test_rollback_restores_superseded_versions_and_invalidates_dependents(memory, governor):
    put(memory, BUDGET, 10000, "ASSUMPTION", step=2)
    put(memory, FLIGHT, "LH123", step=3)
    put(memory, BUDGET, 8000, "FACT", step=8)
    put(memory, HOTEL, "A", step=9, dependencies=[BUDGET])
    # Backdated (created at step 4) but written on top of budget v2: it must go too.
    put(memory, CRITERIA, {"stars": 4}, step=4, dependencies=[BUDGET])
    put(memory, "car|rental", "none", step=9)
    memory.mark_for_release("car|rental", "ARCHIVE", "user cancelled")
    governor.drain()

    result = memory.rollback(5)
    assert result.rolled_back == (HOTEL, BUDGET)
    assert result.invalidated == (CRITERIA,)
    assert result.restored == (BUDGET,)
    assert len(result.releases) == 3

    budget = memory.get_state(BUDGET)
    assert budget.state.value == 10000 and budget.state.version == 1
    assert memory.get_state(HOTEL).state is None
    assert memory.get_state(CRITERIA).state is None
    assert memory.get_state(FLIGHT).state.value == "LH123"
    assert memory.get_state("car|rental").state is None  # releases are never undone
    governor.drain()
    assert [s.key for s in memory.live_states()] == [FLIGHT, BUDGET]
    assert memory.rollback(5) == ((), (), (), ())


def test_failures_back_off_then_dead_letter_and_requeue(memory, store):
    put(memory, HOTEL, "A")
    put(memory, FLIGHT, "LH123")

    def refuse_hotel(entry):
        if entry.key == HOTEL:
            raise RuntimeError("booking system unreachable")

    failing = Governor(store, max_attempts=3, backoff_s=0.0, before_commit_fn=refuse_hotel)
    memory.mark_for_release(HOTEL, "ARCHIVE", "cancel")
    memory.mark_for_release(FLIGHT, "ARCHIVE", "cancel")
    report = failing.drain(timeout_s=10)
    assert report == (0, 1, 2, 1)
    (dead,) = failing.dead_letters()
    assert dead.key == HOTEL and dead.attempts == 3 and "unreachable" in dead.last_error
    # Fail-closed: the dead letter's state is still unusable.
    assert memory.get_state(HOTEL).reason == "pending_release"
    assert memory.history(HOTEL)[-1].lifecycle is Lifecycle.PENDING_RELEASE
    with store.read() as conn:
        outcomes = conn.execute(
            sa.select(release_attempts.c.outcome)
            .where(release_attempts.c.release_id == dead.id)
            .order_by(release_attempts.c.id)
        ).scalars()
        assert list(outcomes) == ["failed", "failed", "dead"]

    assert failing.requeue() == 1
    report = Governor(store).drain(timeout_s=10)
    assert report.released == 1 and memory.releases(status="PENDING") == []
    assert committed_per_release(store) == {e.id: 1 for e in memory.releases()}


def test_backoff_delays_the_retry(memory, store):
    put(memory, HOTEL, "A")
    memory.mark_for_release(HOTEL, "ARCHIVE", "cancel")
    calls = []

    def fail_once(entry):
        calls.append(entry.id)
        if len(calls) == 1:
            raise RuntimeError("transient")

    gov = Governor(store, backoff_s=30.0, max_backoff_s=60.0, before_commit_fn=fail_once)
    assert gov.release_one().status is ReleaseStatus.PENDING
    assert gov.release_one() is None  # waiting out the backoff
    assert gov.pending() == 1 and len(calls) == 1


def test_governors_in_threads_commit_each_release_once(memory, store):
    for i in range(120):
        put(memory, f"k{i}", i)
        memory.mark_for_release(f"k{i}", "ARCHIVE", "bulk")
    reports = []

    def work(name):
        reports.append(Governor(store, worker=name).drain(timeout_s=60))

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(r.released for r in reports) == 120
    assert set(committed_per_release(store).values()) == {1}
    assert len(committed_per_release(store)) == 120


def test_run_loop_stops_on_request(memory, store):
    put(memory, HOTEL, "A")
    memory.mark_for_release(HOTEL, "ARCHIVE", "cancel")
    stop = threading.Event()
    gov = Governor(store)
    thread = threading.Thread(target=gov.run, kwargs={"poll_s": 0.01, "stop": stop})
    thread.start()
    for _ in range(500):
        if gov.pending() == 0:
            break
        stop.wait(0.01)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive() and gov.pending() == 0


def test_store_reopens_and_refuses_bad_locations(location, tmp_path):
    url, schema = location
    with StateManager.open(url, schema=schema) as memory:
        put(memory, BUDGET, 8000, step=7)
        memory.advance(7)  # only advance() moves the clock
    with StateManager.open(url, schema=schema) as memory:
        assert memory.get_state(BUDGET).state.value == 8000 and memory.step == 7
        with memory.store.write() as conn:
            conn.execute(sa.update(meta).where(meta.c.name == "schema_version").values(value=99))
    with pytest.raises(StoreError, match="schema version 99"):
        Store.open(url, schema=schema)
    with pytest.raises(StoreError, match="in-memory"):
        Store.open("sqlite://")
    with pytest.raises(StoreError, match="PostgreSQL"):
        Store.open(tmp_path / "other.db", schema="s")
    with pytest.raises(StoreError, match="unsupported"):
        Store.open("mysql://localhost/x")
    with pytest.raises(StoreError, match="no memory tables"):
        Store.open(tmp_path / "empty.db", create=False)


def test_rollback_invalidates_what_rests_on_a_superseded_rolled_back_version(memory):
    put(memory, BUDGET, 10000, step=2)
    put(memory, BUDGET, 9000, step=7)
    # Backdated to step 4, but written while budget v2 (step 7) was in force.
    put(memory, CRITERIA, {"stars": 4}, step=4, dependencies=[BUDGET])
    put(memory, HOTEL, "A", step=3)  # written later, resting on nothing
    put(memory, BUDGET, 8000, step=8)
    result = memory.rollback(5)
    assert result.rolled_back == (BUDGET,)
    assert result.invalidated == (CRITERIA,)
    assert memory.get_state(BUDGET).state.value == 10000
    assert memory.get_state(HOTEL).found
