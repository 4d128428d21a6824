"""The memory clock cannot be poisoned by one bad step (issue 16, failure 4).

Only ``advance`` moves the clock. A step in a record (``created_step``, and where it
expires, ``created_step + ttl_steps``) or in a release is an int >= 0 and at most
``max_step_skew`` ahead of the clock; anything else is a ``ClockError`` (an
``InvalidRecordError``), raised before anything is written. Each refusal is checked
against a dump of every table, clock included.
"""

import pydantic
import pytest

from wmkit.memory import (
    DEFAULT_MAX_STEP_SKEW,
    ClockError,
    GovernedState,
    InvalidRecordError,
    StateManager,
)
from wmkit.memory.types import MAX_STEP

TTL_KEYS = [f"quote|{i}" for i in range(5)]
HUGE = [10**15, 2**63 - 1, 2**63, 2**64, 10**30]


@pytest.fixture
def timed(memory):
    """Five FACTs with TTLs of 5..9 steps written at step 10, the clock at 10."""
    memory.advance(10)
    for i, key in enumerate(TTL_KEYS):
        memory.set_state(key, i, source="test", authority="FACT", step=10, ttl_steps=5 + i)
    memory.set_state("user|name", "ann", source="test", authority="FACT", step=10)
    return memory


def record(**changes):
    base = {"key": "user|budget", "value": 1, "source": "llm", "authority": "FACT"}
    return {**base, "created_step": 11, **changes}


def assert_all_served(memory):
    assert memory.step == 10
    for i, key in enumerate(TTL_KEYS):
        lookup = memory.get_state(key)
        assert lookup.found and lookup.state.value == i, (key, lookup)
    assert [s.key for s in memory.live_states()] == sorted([*TTL_KEYS, "user|name"])


@pytest.mark.parametrize("step", HUGE)
def test_a_hallucinated_step_is_refused_and_every_ttl_stays_intact(timed, store, governor, step):
    before = store.dump()
    with pytest.raises(ClockError, match="created_step") as info:
        timed.submit(record(created_step=step))
    assert isinstance(info.value, InvalidRecordError)
    assert str(step) in str(info.value)
    with pytest.raises(ClockError):
        timed.set_state("user|budget", 1, source="llm", authority="FACT", step=step)
    with pytest.raises(ClockError):  # not persisted, but held against the same clock
        timed.set_state("scratch|x", 1, source="llm", authority="TEMPORARY", step=step)
    assert store.dump() == before
    assert timed.get_state("scratch|x").reason == "missing"
    # The governor finds nothing expired, and the TTLs still run from step 10.
    assert governor.drain().expired == 0
    assert_all_served(timed)
    timed.advance(15)
    assert [timed.get_state(k).found for k in TTL_KEYS] == [False, True, True, True, True]


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"ttl_steps": 2**63}, "ttl_steps"),
        ({"ttl_steps": MAX_STEP}, "ttl_steps"),  # expires past what a store holds
        ({"created_step": 2**63, "ttl_steps": 1}, "created_step"),
    ],
)
def test_steps_past_what_a_store_holds_are_clock_errors_not_overflows(
    timed, store, changes, fragment
):
    before = store.dump()
    with pytest.raises(ClockError, match=fragment):
        timed.submit(record(**changes))
    assert store.dump() == before
    assert_all_served(timed)


def test_a_hallucinated_release_step_advance_or_rollback_is_refused(timed, store):
    before = store.dump()
    with pytest.raises(ClockError, match="ahead of the memory clock"):
        timed.mark_for_release(TTL_KEYS[0], "ARCHIVE", "llm said so", step=10**15)
    for bad in (2**63, -1, 1.5, "12", True, None):
        with pytest.raises(ClockError, match="step"):
            timed.advance(bad)
        with pytest.raises(ClockError, match="to_step"):
            timed.rollback(bad)
        if bad is not None:  # None is the default: the clock
            with pytest.raises(ClockError, match="step"):
                timed.mark_for_release(TTL_KEYS[0], "ARCHIVE", "r", step=bad)
    assert store.dump() == before
    assert_all_served(timed)


@pytest.mark.parametrize("bad", [1.5, "12", True, -1, None])
def test_steps_that_are_not_ints_at_or_above_zero_are_refused(timed, store, bad):
    before = store.dump()
    with pytest.raises(InvalidRecordError, match="created_step"):
        timed.submit(record(created_step=bad))
    assert store.dump() == before


def test_only_advance_moves_the_clock(memory):
    assert memory.step == 0
    memory.set_state("a", 1, source="test", authority="FACT", step=40, ttl_steps=3)
    memory.set_state("b", 1, source="test", authority="ASSUMPTION", step=60)
    memory.mark_for_release("b", "ARCHIVE", "r", step=70)
    assert memory.step == 0
    assert memory.get_state("a").found  # expires at 43, the clock is at 0
    assert memory.advance(42) == 42 and memory.get_state("a").found
    assert memory.advance(43) == 43 and memory.get_state("a").reason == "expired"


def test_the_skew_bound_is_configurable_and_moves_with_the_clock(store):
    memory = StateManager(store, max_step_skew=5)
    assert StateManager(store).max_step_skew == DEFAULT_MAX_STEP_SKEW == 10_000
    assert memory.set_state("k", 1, source="t", authority="FACT", step=5).accepted
    with pytest.raises(ClockError, match="6 steps ahead of the memory clock \\(0\\)"):
        memory.set_state("k", 2, source="t", authority="FACT", step=6)
    memory.advance(100)
    assert memory.set_state("k", 3, source="t", authority="FACT", step=105).accepted
    assert memory.set_state("old", 4, source="t", authority="FACT", step=0).accepted  # past: fine
    with pytest.raises(ClockError):
        memory.set_state("k", 5, source="t", authority="FACT", step=106)
    assert [s.value for s in memory.history("k")] == [1, 3]
    for bad in (-1, 1.5, True, 2**63):
        with pytest.raises(ValueError, match="max_step_skew"):
            StateManager(store, max_step_skew=bad)


def test_records_validate_step_types_and_range_themselves():
    base = {"key": "k", "value": 1, "source": "s", "authority": "FACT"}
    assert GovernedState(**base, created_step=MAX_STEP).created_step == MAX_STEP
    for bad in (2**63, -1, 1.0, True, "3"):
        with pytest.raises(pydantic.ValidationError, match="created_step"):
            GovernedState(**base, created_step=bad)
    with pytest.raises(pydantic.ValidationError, match="largest step"):
        GovernedState(**base, created_step=MAX_STEP - 1, ttl_steps=2)
    assert GovernedState(**base, created_step=MAX_STEP - 2, ttl_steps=2).expires_step == MAX_STEP
