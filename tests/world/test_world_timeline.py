import pytest

from wmkit.world import (
    ConditionError,
    DuplicateEventError,
    EventTimeline,
    ScheduledEvent,
    UnknownEventError,
)


def event(event_id, due, condition=None, deadline=None):
    return ScheduledEvent(
        event_id=event_id,
        due=due,
        deadline=due if deadline is None else deadline,
        condition=condition,
        reason="test",
    )


def nothing(subject, relation):
    return ()


def test_drain_fires_in_due_then_schedule_order():
    tl = EventTimeline()
    for e in (event("c", 5), event("a", 3), event("b", 3), event("d", 9)):
        tl = tl.schedule(e)
    drained = tl.drain(5, nothing)
    assert [e.event_id for e in drained.fired] == ["a", "b", "c"]
    assert [e.event_id for e in drained.timeline.events()] == ["d"]
    assert len(tl) == 4  # persistent: the old timeline still holds all four


def test_nothing_due_returns_the_same_timeline():
    tl = EventTimeline().schedule(event("a", 3))
    drained = tl.drain(2, nothing)
    assert drained.timeline is tl and drained.fired == () and drained.dropped == ()


def test_cancel_is_lazy_but_final():
    tl = EventTimeline().schedule(event("a", 3)).schedule(event("b", 3))
    cancelled = tl.cancel("a")
    assert "a" not in cancelled and len(cancelled) == 1
    assert [e.event_id for e in cancelled.drain(3, nothing).fired] == ["b"]
    with pytest.raises(UnknownEventError, match="'a'"):
        cancelled.cancel("a")
    with pytest.raises(UnknownEventError, match="'zzz'"):
        tl.cancel("zzz")


def test_reschedule_after_cancel_uses_the_new_due_step():
    tl = EventTimeline().schedule(event("a", 3)).cancel("a").schedule(event("a", 8))
    assert tl.drain(5, nothing).fired == ()
    assert [e.due for e in tl.drain(8, nothing).fired] == [8]


def test_duplicate_pending_id_refused():
    tl = EventTimeline().schedule(event("a", 3))
    with pytest.raises(DuplicateEventError, match="'a'"):
        tl.schedule(event("a", 4))


def test_false_condition_without_retry_is_dropped_with_reason():
    tl = EventTimeline().schedule(event("a", 3, condition="has('kid', 'home')"))
    drained = tl.drain(3, nothing)
    assert drained.fired == ()
    assert [d.event.event_id for d in drained.dropped] == ["a"]
    assert "was false at step 3" in drained.dropped[0].why
    assert len(drained.timeline) == 0


def test_false_condition_is_rechecked_each_step_until_deadline():
    tl = EventTimeline().schedule(event("a", 3, condition="has('kid', 'home')", deadline=5))
    home = {("kid", "home"): ("yes",)}

    def at_home(s, r):
        return home.get((s, r), ())

    step3 = tl.drain(3, nothing)
    assert step3.fired == () and step3.dropped == () and "a" in step3.timeline
    assert step3.timeline.next_due() == 4
    step4 = step3.timeline.drain(4, at_home)
    assert [e.event_id for e in step4.fired] == ["a"]
    # never true: dropped after its last check at the deadline
    timeline = step3.timeline
    for step in (4, 5):
        drained = timeline.drain(step, nothing)
        timeline = drained.timeline
    assert [d.event.event_id for d in drained.dropped] == ["a"] and len(timeline) == 0


def test_condition_error_counts_as_false_and_is_reported():
    tl = EventTimeline().schedule(event("a", 1, condition="num(fact('x', 'y')) > 1"))
    drained = tl.drain(1, nothing)
    assert "num(None)" in drained.dropped[0].why


def test_condition_uses_the_drain_step():
    tl = EventTimeline().schedule(event("a", 1, condition="step >= 4", deadline=10))
    timeline, fired_at = tl, None
    for step in range(1, 11):
        drained = timeline.drain(step, nothing)
        timeline = drained.timeline
        if drained.fired:
            fired_at = step
            break
    assert fired_at == 4


def test_hostile_condition_refused_at_schedule_time_even_without_validation():
    sneaky = ScheduledEvent.model_construct(
        event_id="x", due=1, deadline=1, condition="().__class__", actions=(), reason="r"
    )
    tl = EventTimeline()
    with pytest.raises(ConditionError, match="__class__"):
        tl.schedule(sneaky)
    assert len(tl) == 0
    with pytest.raises(ValueError, match="__import__"):  # a validated event checks it too
        event("y", 1, condition="__import__('os')")


def test_deadline_before_due_refused():
    with pytest.raises(ValueError, match="before due"):
        event("a", 5, deadline=4)


def test_schedule_many_is_all_or_nothing():
    tl = EventTimeline().schedule(event("a", 1))
    with pytest.raises(DuplicateEventError):
        tl.schedule_many([event("b", 2), event("a", 3)])
    assert len(tl) == 1
    assert [e.event_id for e in tl.schedule_many([event("c", 2), event("b", 2)]).events()] == [
        "a",
        "c",
        "b",
    ]
