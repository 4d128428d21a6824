import json

import pytest
from pydantic import ValidationError

from wmkit.world import (
    ActionParseError,
    AddRelation,
    CancelEvent,
    Query,
    RemoveRelation,
    ScheduleEvent,
    UpdateEntity,
    parse_action,
    parse_actions,
)
from wmkit.world.actions import MAX_TEXT_CHARS

EXAMPLES = [
    UpdateEntity(entity_id="lamp:1", attributes={"brightness": 30, "on": True}, reason="dim"),
    AddRelation(src="a", relation="in", dst="b", confidence=0.9, ttl=4, reason="seen"),
    RemoveRelation(src="a", relation="in", dst="b", reason="left"),
    ScheduleEvent(
        event_id="later",
        delay=3,
        condition="has('a', 'in', 'b')",
        retry_steps=2,
        actions=[UpdateEntity(entity_id="lamp:1", attributes={"brightness": 60}, reason="x")],
        reason="when the son is back",
    ),
    CancelEvent(event_id="later", reason="plans changed"),
    Query(subject="a", relation="in", reason="where is a?"),
]


@pytest.mark.parametrize("action", EXAMPLES, ids=lambda a: a.kind)
def test_round_trip_through_json(action):
    assert parse_action(action.model_dump_json()) == action


def test_parse_actions_list():
    text = json.dumps([json.loads(a.model_dump_json()) for a in EXAMPLES])
    assert parse_actions(text) == tuple(EXAMPLES)


def test_actions_are_frozen():
    with pytest.raises(ValidationError):
        EXAMPLES[1].confidence = 0.1


def bad(text: str, *fragments: str) -> None:
    with pytest.raises(ActionParseError) as err:
        parse_action(text)
    for fragment in fragments:
        assert fragment in str(err.value)


def test_malformed_json():
    bad('{"kind": "query", "subject": "a"', "Invalid JSON")
    bad("not json at all", "Invalid JSON")
    bad("", "Invalid JSON")


def test_unknown_or_missing_kind():
    bad('{"kind": "teleport", "reason": "x"}', "'teleport'", "update_entity")
    bad('{"reason": "x", "subject": "a"}', "discriminator 'kind'")


def test_unknown_fields_are_named():
    bad('{"kind": "query", "subject": "a", "reason": "x", "sudo": true}', "query.sudo", "Extra")
    bad(
        '{"kind": "schedule_event", "event_id": "e", "delay": 1, "reason": "x",'
        ' "actions": [{"kind": "cancel_event", "event_id": "f", "reason": "y", "force": 1}]}',
        "schedule_event.actions.0.cancel_event.force",
    )


def test_wrong_types_are_strict():
    base = {"kind": "add_relation", "src": "a", "relation": "r", "dst": "b", "reason": "x"}
    bad(json.dumps({**base, "confidence": "0.9"}), "add_relation.confidence")
    bad(json.dumps({**base, "confidence": 1.5}), "less than or equal to 1")
    bad(json.dumps({**base, "ttl": 0}), "add_relation.ttl")
    bad(json.dumps({**base, "ttl": 2.5}), "add_relation.ttl")
    bad(json.dumps({**base, "src": 7}), "add_relation.src")
    bad(json.dumps({**base, "src": ""}), "add_relation.src")
    bad('["not", "an", "object"]', "object")
    nested = {"kind": "schedule_event", "event_id": "e", "delay": 1, "reason": "x"}
    inner = {**base, "confidence": "0.9"}
    bad(json.dumps({**nested, "actions": [inner]}), "actions.0.add_relation.confidence")
    bad(json.dumps({**nested, "delay": "1"}), "schedule_event.delay")


def test_reason_is_required_and_not_blank():
    bad('{"kind": "query", "subject": "a"}', "query.reason", "Field required")
    bad('{"kind": "query", "subject": "a", "reason": "   "}', "query.reason")


def test_schedule_event_refuses_hostile_condition_and_nested_scheduling():
    bad(
        json.dumps(
            {
                "kind": "schedule_event",
                "event_id": "e",
                "delay": 1,
                "condition": "__import__('os').system('id')",
                "reason": "x",
            }
        ),
        "schedule_event.condition",
        "__import__",
    )
    outer = {"kind": "schedule_event", "event_id": "e", "delay": 1, "reason": "x"}
    nested = {"kind": "schedule_event", "event_id": "f", "delay": 1, "reason": "y"}
    bad(json.dumps({**outer, "actions": [nested]}), "'schedule_event'")
    bad(json.dumps({**outer, "retry_steps": 2}), "needs a condition")


def test_update_entity_needs_attributes_of_scalar_values():
    update = {"kind": "update_entity", "entity_id": "a", "reason": "x"}
    bad(json.dumps({**update, "attributes": {}}), "update_entity.attributes")
    bad(json.dumps({**update, "attributes": {"k": None}}), "update_entity.attributes.k")


def test_non_text_and_oversized_input():
    with pytest.raises(ActionParseError, match="expected JSON text"):
        parse_action({"kind": "query"})
    with pytest.raises(ActionParseError, match="limit"):
        parse_action(" " * (MAX_TEXT_CHARS + 1))


def test_parse_actions_is_all_or_nothing_and_points_at_the_item():
    good = EXAMPLES[5].model_dump_json()
    with pytest.raises(ActionParseError, match=r"1\.query\.subject"):
        parse_actions(f'[{good}, {{"kind": "query", "reason": "x"}}]')
    with pytest.raises(ActionParseError):
        parse_actions(good)  # an object, not a list
