import pytest
from tiny_world import HALL, LAMP, LIVING, SON

from wmkit.world import (
    AddRelation,
    CancelEvent,
    Fact,
    Query,
    RemoveRelation,
    ScheduleEvent,
    UnknownEntityError,
    UnknownFieldError,
    UpdateEntity,
    World,
    WorldState,
    advance,
    apply,
    parse_action,
    register,
)


def dim(level=30):
    return UpdateEntity(entity_id=LAMP, attributes={"brightness": level}, reason="too bright")


def son_in(room=LIVING, ttl=None):
    return AddRelation(src=SON, relation="at", dst=room, ttl=ttl, reason="he came in")


def brighten_when_son_home(delay=2, retry=10):
    return ScheduleEvent(
        event_id="brighten",
        delay=delay,
        condition=f"has('{SON}', 'at', '{LIVING}')",
        retry_steps=retry,
        actions=[UpdateEntity(entity_id=LAMP, attributes={"brightness": 60}, reason="son is home")],
        reason="later, when my son is back, make it brighter",
    )


def test_facts_speak_the_shared_vocabulary(world):
    facts = apply(world, son_in()).world.facts()
    assert isinstance(facts, WorldState)
    assert Fact(LAMP, "brightness", "80") in facts
    assert Fact(LAMP, "status", "on") in facts
    assert Fact(SON, "at", LIVING) in facts
    assert not any(f.relation == "last_updated" for f in facts)
    assert len(facts) == 6  # 5 attribute facts + 1 edge


def test_apply_is_pure(world):
    before = world.facts()
    result = apply(world, dim())
    assert result.world is not world and result.violations == ()
    assert world.facts() == before  # the old world is untouched
    assert result.world.facts().value(LAMP, "brightness") == "30"
    assert result.world.registry.get(LAMP).last_updated == world.step
    assert result.world.timeline is world.timeline  # untouched parts are shared, not copied
    assert result.world.graph is world.graph


def test_add_and_remove_relation(world):
    w = apply(world, son_in()).world
    assert w.objects(SON, "at") == (LIVING,)
    w2 = apply(w, RemoveRelation(src=SON, relation="at", dst=LIVING, reason="left")).world
    assert w2.objects(SON, "at") == ()
    assert w.objects(SON, "at") == (LIVING,)


INVALID = {
    "dangling dst": AddRelation(src=SON, relation="at", dst="room:nowhere", reason="x"),
    "dangling src": AddRelation(src="person:ghost", relation="at", dst=LIVING, reason="x"),
    "below confidence floor": AddRelation(
        src=SON, relation="at", dst=LIVING, confidence=0.2, reason="x"
    ),
    "unknown field": UpdateEntity(entity_id=LAMP, attributes={"wattage": 60}, reason="x"),
    "bad status": UpdateEntity(entity_id=LAMP, attributes={"status": "dim"}, reason="x"),
    "unknown entity": UpdateEntity(entity_id="lamp:ghost", attributes={"status": "on"}, reason="x"),
    "remove missing edge": RemoveRelation(src=SON, relation="at", dst=HALL, reason="x"),
    "cancel unknown event": CancelEvent(event_id="never", reason="x"),
    "query unknown entity": Query(subject="lamp:ghost", reason="x"),
    "hostile condition": ScheduleEvent.model_construct(
        kind="schedule_event",
        event_id="evil",
        delay=1,
        condition="__import__('os').system('id')",
        retry_steps=0,
        actions=(),
        reason="x",
    ),
}


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_action_returns_violation_and_the_same_world(world, name):
    before = world.facts()
    result = apply(world, INVALID[name])
    assert result.world is world
    assert len(result.violations) == 1
    assert result.violations[0].error.endswith("Error")
    assert result.world.facts() == before
    assert len(result.world.timeline) == 0


def test_violation_messages_name_the_problem(world):
    (v,) = apply(world, INVALID["unknown field"]).violations
    assert v.error == "UnknownFieldError" and "'wattage'" in v.message and "brightness" in v.message
    (v,) = apply(world, INVALID["dangling dst"]).violations
    assert v.error == "UnknownEntityError" and "room:nowhere" in v.message
    (v,) = apply(world, INVALID["hostile condition"]).violations
    assert v.error == "ConditionError" and "__import__" in v.message


def test_strict_raises_and_changes_nothing(world):
    before = world.facts()
    with pytest.raises(UnknownFieldError):
        apply(world, INVALID["unknown field"], strict=True)
    with pytest.raises(UnknownEntityError):
        apply(world, INVALID["dangling src"], strict=True)
    assert world.facts() == before


def test_query_answers_without_changing_anything(world):
    w = apply(world, son_in()).world
    result = apply(w, Query(subject=SON, reason="where is he?"))
    assert result.world is w
    assert result.answer == (Fact(SON, "at", LIVING), Fact(SON, "status", "away"))
    assert apply(w, Query(subject=SON, relation="at", reason="x")).answer == (
        Fact(SON, "at", LIVING),
    )


def test_conditional_future_instruction_fires_when_condition_holds(world):
    # "dim the lamp now; later, when my son is back, make it brighter"
    w = apply(world, dim()).world
    w = apply(w, brighten_when_son_home()).world
    assert "brighten" in w.timeline
    quiet = advance(w, 5)
    assert quiet.events == () and quiet.world.step == 5
    assert quiet.world.objects(LAMP, "brightness") == ("30",)
    home = apply(quiet.world, son_in()).world
    fired = advance(home, 1)
    assert [e.event_id for e in fired.events] == ["brighten"]
    assert fired.world.objects(LAMP, "brightness") == ("60",)
    assert fired.world.registry.get(LAMP).last_updated == 6
    assert "brighten" not in fired.world.timeline
    assert home.objects(LAMP, "brightness") == ("30",)  # advance is pure too


def test_event_dropped_at_deadline_is_reported(world):
    w = apply(world, brighten_when_son_home(delay=1, retry=2)).world
    result = advance(w, 10)
    assert result.events == ()
    (v,) = result.violations
    assert v.error == "EventDropped" and "'brighten'" in v.message and "step 3" in v.message
    assert len(result.world.timeline) == 0


def test_cancel_event(world):
    w = apply(world, brighten_when_son_home(delay=1, retry=0)).world
    w = apply(w, CancelEvent(event_id="brighten", reason="never mind")).world
    w = apply(w, son_in()).world
    assert advance(w, 3).events == ()


def test_event_actions_are_all_or_nothing(world):
    event = ScheduleEvent(
        event_id="both",
        delay=1,
        actions=[
            UpdateEntity(entity_id=LAMP, attributes={"brightness": 5}, reason="a"),
            UpdateEntity(entity_id=LAMP, attributes={"wattage": 5}, reason="b"),
        ],
        reason="two changes",
    )
    result = advance(apply(world, event).world, 1)
    assert [e.event_id for e in result.events] == ["both"]
    (v,) = result.violations
    assert v.error == "UnknownFieldError" and "'both'" in v.message
    assert result.world.objects(LAMP, "brightness") == ("80",)


def test_advance_expires_ttl_edges(world):
    w = apply(world, son_in(ttl=3)).world  # added at step 0, live for steps 0..2
    assert advance(w, 2).world.objects(SON, "at") == (LIVING,)
    gone = advance(w, 3).world
    assert gone.objects(SON, "at") == ()
    assert gone.graph.incoming(LIVING) == () and gone.graph.outgoing(SON) == ()
    assert w.objects(SON, "at") == (LIVING,)


def test_expiry_happens_before_conditions_are_checked(world):
    w = apply(world, son_in(ttl=2)).world
    w = apply(w, brighten_when_son_home(delay=2, retry=0)).world
    result = advance(w, 2)
    assert result.events == () and result.violations[0].error == "EventDropped"


def test_advance_long_quiet_stretch_is_cheap_and_exact(world):
    w = apply(world, brighten_when_son_home(delay=10**9, retry=0)).world
    w = apply(w, son_in()).world
    result = advance(w, 10**9)  # one busy step: the loop skips the quiet ones
    assert [e.due for e in result.events] == [10**9]
    assert result.world.step == 10**9


def test_advance_rejects_going_back(world):
    with pytest.raises(ValueError, match="forward"):
        advance(world, -1)


def test_world_from_json_actions(world):
    text = (
        f'{{"kind": "add_relation", "src": "{SON}", "relation": "at", "dst": "{HALL}",'
        ' "confidence": 0.75, "reason": "heard the door"}'
    )
    w = apply(world, parse_action(text)).world
    assert w.graph.edge(SON, "at", HALL).confidence == 0.75


def test_register_and_create():
    w = World.create([], confidence_floor=0.1)
    with pytest.raises(ValueError, match="unknown entity type"):
        register(w, "lamp", "x", {"status": "on"})
    assert len(w.registry) == 0 and w.graph.confidence_floor == 0.1


def test_hot_paths_never_walk_every_entity_or_edge(world, monkeypatch):
    from wmkit.world import EntityRegistry, RelationGraph

    def refuse(self):
        raise AssertionError("a hot path walked the whole structure")

    w = apply(world, brighten_when_son_home(delay=1, retry=3)).world
    monkeypatch.setattr(RelationGraph, "edges", refuse)
    monkeypatch.setattr(EntityRegistry, "__iter__", refuse)
    w = apply(w, son_in(ttl=2)).world
    w = apply(w, dim()).world
    w = apply(w, RemoveRelation(src=SON, relation="at", dst=LIVING, reason="x")).world
    w = apply(w, son_in()).world
    w = apply(w, son_in(HALL, ttl=1)).world
    assert apply(w, Query(subject=SON, reason="x")).answer
    result = advance(w, 5)
    assert [e.event_id for e in result.events] == ["brighten"]
    assert result.world.objects(SON, "at") == (LIVING,)  # the hall edge expired
