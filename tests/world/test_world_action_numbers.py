"""Issue 16, failure 8: non-finite numbers, float steps and relation/attribute collisions.

Each test below failed on the code before the fix: NaN/Infinity were accepted as
attribute values, ``advance(world, 1.5)`` returned a world at step 1.5, and an edge
named like an attribute made ``fact()`` give None (two objects) instead of a value.
"""

import dataclasses
import json
import math

import numpy as np
import pytest
from tiny_world import LAMP, LIVING, SON

from wmkit.world import (
    ActionParseError,
    AddRelation,
    ConditionError,
    EntityContract,
    EntityRegistry,
    InvalidEdgeError,
    UnknownFieldError,
    UpdateEntity,
    World,
    WorldError,
    advance,
    apply,
    compile_condition,
    evaluate,
    parse_action,
    register,
)
from wmkit.world.errors import StepError

NON_FINITE_JSON = ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"]


def update_text(value: str) -> str:
    return (
        f'{{"kind": "update_entity", "entity_id": "{LAMP}", "attributes": '
        f'{{"brightness": {value}}}, "reason": "r"}}'
    )


@pytest.mark.parametrize("value", NON_FINITE_JSON)
def test_non_finite_attribute_value_is_refused_when_parsed(value):
    with pytest.raises(ActionParseError, match=r"'brightness': .*not a finite number"):
        parse_action(update_text(value))


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_attribute_value_is_refused_when_built(value):
    with pytest.raises(ValueError, match="not a finite number"):
        UpdateEntity(entity_id=LAMP, attributes={"brightness": value}, reason="r")


def test_int_attribute_outside_64_bits_is_refused():
    with pytest.raises(ActionParseError, match=r"outside ±\(2\*\*63 - 1\)"):
        parse_action(update_text(str(2**63)))
    assert parse_action(update_text(str(2**63 - 1))).attributes["brightness"] == 2**63 - 1


def test_finite_values_and_number_like_strings_still_parse():
    assert parse_action(update_text("1e300")).attributes["brightness"] == 1e300
    # Strings are text: "NaN" is a value like any other; only num() reads numbers.
    action = parse_action(update_text('"NaN"'))
    assert action.attributes["brightness"] == "NaN"


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_confidence_is_refused_with_a_clear_message(value):
    text = (
        '{"kind": "add_relation", "src": "a", "relation": "in", "dst": "b", '
        f'"confidence": {value}, "reason": "r"}}'
    )
    # Before: NaN was reported as "should be less than or equal to 1".
    with pytest.raises(ActionParseError, match="confidence: Input should be a finite number"):
        parse_action(text)


@pytest.mark.parametrize("field", ["delay", "retry_steps"])
@pytest.mark.parametrize("value", ["1.5", "2.0", "true", str(2**63)])
def test_schedule_steps_must_be_ints_in_range(field, value):
    fields = {"delay": "2", "retry_steps": "1", field: value}
    text = (
        '{"kind": "schedule_event", "event_id": "e", "condition": "step > 0", '
        f'"delay": {fields["delay"]}, "retry_steps": {fields["retry_steps"]}, "reason": "r"}}'
    )
    with pytest.raises(ActionParseError, match=field):
        parse_action(text)


def test_registry_refuses_non_finite_values_from_any_caller(world):
    # register() and update() are not only reached through actions (envs call them).
    with pytest.raises(UnknownFieldError, match="nan is not a finite number"):
        register(world, "lamp", "desk-lamp", {"status": "on", "brightness": math.nan})
    with pytest.raises(UnknownFieldError, match="inf is not a finite number"):
        world.registry.update(LAMP, {"brightness": math.inf}, step=0)


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "1e309"])
def test_non_finite_condition_literal_is_refused(literal):
    with pytest.raises(ConditionError, match="not finite"):
        compile_condition(f"step < {literal}")
    text = json.dumps(
        {
            "kind": "schedule_event",
            "event_id": "e",
            "delay": 1,
            "condition": f"step < {literal}",
            "reason": "r",
        }
    )
    with pytest.raises(ActionParseError, match="not finite"):
        parse_action(text)


@pytest.mark.parametrize(
    "condition", ["1e308 * 10 > 0", "0 - 1e308 * 10 < 0", "1e308 + 1e308 == 1e308 + 1e308"]
)
def test_arithmetic_overflow_fails_to_evaluate(condition):
    # Before: 1e308 * 10 was inf and inf - inf was nan, which compares false to all.
    with pytest.raises(ConditionError, match="not finite"):
        evaluate(condition, lambda s, r: (), step=0)


@pytest.mark.parametrize("text", ["nan", "NaN", "inf", "-Infinity", "1e400"])
def test_num_of_non_finite_text_fails_to_evaluate(text):
    # A guard, not a regression: num() refused these already; now the rest agrees.
    with pytest.raises(ConditionError, match="not finite"):
        evaluate("num(fact('x', 'level')) < 50", lambda s, r: (text,), step=0)


# --- the clock ----------------------------------------------------------------------


@pytest.mark.parametrize("steps", [1.5, 2.0, 0.0, True, False, "1", None, -1, -(2**70)])
def test_advance_refuses_non_int_and_negative_steps(world, steps):
    with pytest.raises(StepError, match="cannot advance"):
        advance(world, steps)


def test_advance_error_is_a_world_error(world):
    with pytest.raises(WorldError):
        advance(world, 1.5)


def test_advance_by_int_and_numpy_int(world):
    assert advance(world, 3).world.step == 3
    after = advance(world, np.int64(2)).world
    assert after.step == 2 and type(after.step) is int
    assert advance(world, 0).world.step == 0


def test_advance_past_the_largest_step_is_refused(world):
    far = advance(world, 2**63 - 1).world
    assert far.step == 2**63 - 1
    with pytest.raises(StepError, match="would pass"):
        advance(far, 1)


@pytest.mark.parametrize("step", [1.5, True, -1])
def test_world_step_must_be_a_non_negative_int(world, step):
    with pytest.raises(StepError, match="world step must be an int"):
        World(world.registry, world.graph, world.timeline, step)


# --- relation names vs attribute names ------------------------------------------------


def test_relation_named_like_a_set_attribute_is_refused(world):
    # Before: this edge was added, and fact(LAMP, 'brightness') went from '80' to None.
    add = AddRelation(src=LAMP, relation="brightness", dst=LIVING, reason="r")
    result = apply(world, add)
    assert result.world is world
    assert [v.error for v in result.violations] == ["InvalidEdgeError"]
    assert "'brightness' is an attribute of type 'lamp'" in result.violations[0].message
    assert evaluate(f"fact('{LAMP}', 'brightness') == '80'", world.objects, step=0)
    with pytest.raises(InvalidEdgeError, match="fact\\(\\) would be ambiguous"):
        apply(world, add, strict=True)


@pytest.mark.parametrize("relation", ["status", "color"])
def test_relation_named_like_any_attribute_of_the_type_is_refused(world, relation):
    # "color" is allowed by the lamp contract but not set yet: still refused, so that
    # setting it later cannot make the name ambiguous.
    result = apply(world, AddRelation(src=LAMP, relation=relation, dst=LIVING, reason="r"))
    assert [v.error for v in result.violations] == ["InvalidEdgeError"]


def test_attribute_names_of_other_types_stay_free_as_relations(world):
    # "brightness" is a lamp attribute, not a person one: son -brightness-> room is fine.
    result = apply(world, AddRelation(src=SON, relation="brightness", dst=LIVING, reason="r"))
    assert result.violations == ()
    assert result.world.objects(SON, "brightness") == (LIVING,)


def test_attribute_named_like_an_existing_edge_is_refused():
    # A contract that grows after an edge exists (LLMTracker widens them, re-registering
    # every entity) must not let an attribute land on a name that is already an edge
    # relation of that entity.
    world = World.create([EntityContract("person"), EntityContract("room")])
    world = register(world, "person", "son", {"status": "away"})
    world = register(world, "room", "living", {"status": "ok"})
    world = apply(world, AddRelation(src=SON, relation="mood", dst=LIVING, reason="r")).world
    wider = EntityRegistry([EntityContract("person", {"mood"}), EntityContract("room")])
    wider = wider.register_many(
        ((e.entity_type, e.raw_id, e.attributes) for e in world.registry), step=world.step
    )
    world = dataclasses.replace(world, registry=wider)
    assert world.objects(SON, "mood") == (LIVING,)
    result = apply(world, UpdateEntity(entity_id=SON, attributes={"mood": "glad"}, reason="r"))
    assert result.world is world
    assert [v.error for v in result.violations] == ["UnknownFieldError"]
    assert "relation of an edge leaving it" in result.violations[0].message
    assert world.objects(SON, "mood") == (LIVING,)


def test_facts_never_hold_an_attribute_and_an_edge_under_one_name(world):
    world = apply(world, AddRelation(src=SON, relation="in", dst=LIVING, reason="r")).world
    world = apply(world, AddRelation(src=LAMP, relation="in", dst=LIVING, reason="r")).world
    attributes = {(e.id, name) for e in world.registry for name in e.attributes}
    edges = {(e.src, e.relation) for e in world.graph.edges()}
    assert attributes and edges and not attributes & edges
    for subject, relation in attributes:
        assert len(world.objects(subject, relation)) == 1


def test_contracts_without_the_name_still_accept_it_as_a_relation():
    w = World.create([EntityContract("box"), EntityContract("room")])
    w = register(w, "box", "b", {"status": "closed"})
    w = register(w, "room", "r", {"status": "ok"})
    box, room = (e.id for e in sorted(w.registry, key=lambda e: e.entity_type))
    result = apply(w, AddRelation(src=box, relation="in", dst=room, reason="r"))
    assert result.violations == () and len(result.world.graph) == 1
