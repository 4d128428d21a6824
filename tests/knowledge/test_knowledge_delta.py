"""Knowledge deltas: every rejection reason, references across parts, all-or-nothing merges."""

from __future__ import annotations

import json
from collections import Counter

import gymnasium
import pytest

import wmkit.envs  # noqa: F401  (registers the gym ids)
from wmkit.knowledge import (
    REASONS,
    DeltaEdge,
    DeltaEntity,
    DeltaRule,
    KnowledgeDelta,
    MergeError,
    WorldGraph,
    delta_from_facts,
    validate_delta,
)
from wmkit.world.types import Fact, WorldState

ROOM = {"name": "room:hall", "type": "room"}
DOOR = {"name": "door:oak", "type": "door", "properties": {"locked": True}}
RULE = {"condition": "door.locked == true", "action": "open_door_fail", "confidence": 0.9}


def held_graph() -> WorldGraph:
    """A graph holding room:hall (room) and door:oak (door), and one rule."""
    graph = WorldGraph("test")
    graph.merge({"entities": [ROOM, DOOR], "rules": [RULE]}, scene="s0")
    return graph


def test_a_valid_delta_keeps_every_part_in_every_input_form():
    raw = {
        "entities": [ROOM, DOOR],
        "states": [{"name": "door_open", "type": "door_state", "conditions": ["door.open"]}],
        "edges": [
            {"relation": "containment", "src_ref": "room:hall", "dst_ref": "door:oak"},
            {"relation": "episodic", "src_ref": "door_open", "dst_ref": "door:oak"},
        ],
        "rules": [{**RULE, "linked_nodes": ["door:oak"], "recovery": "use key"}],
    }
    forms = [raw, json.dumps(raw), json.dumps(raw).encode(), KnowledgeDelta.model_validate(raw)]
    results = [validate_delta(form, None, scene="s1") for form in forms]
    for result in results:
        assert result.rejections == ()
        assert [e.node_id for e in result.entities] == ["room:hall", "door:oak"]
        assert [s.node_id for s in result.states] == ["door_open"]
        assert len(result.edges) == 2
        assert result.rules[0].recovery == "use key"
        assert result.scene == "s1"
    assert all(r == results[0] for r in results)


def entity(**fields):
    return {**ROOM, **fields}


# (case id, raw delta, expected (group, index, reason) of the one rejected part)
CASES = [
    ("malformed_json", '{"entities": [', ("delta", -1, "malformed_json")),
    ("bad_structure", [ROOM], ("delta", -1, "bad_structure")),
    ("bad_structure_key", {"entities": [], "facts": []}, ("delta", -1, "bad_structure")),
    ("bad_structure_group", {"entities": {"name": "x"}}, ("delta", -1, "bad_structure")),
    ("missing_field", {"entities": [ROOM, {"name": "k"}]}, ("entities", 1, "missing_field")),
    (
        "missing_confidence",
        {"rules": [{"condition": "a", "action": "b"}]},
        ("rules", 0, "missing_field"),
    ),
    ("unknown_field", {"entities": [entity(colour="red")]}, ("entities", 0, "unknown_field")),
    ("bad_type", {"entities": [entity(properties={"x": [1]})]}, ("entities", 0, "bad_type")),
    ("bad_type_name", {"entities": [entity(name=5)]}, ("entities", 0, "bad_type")),
    ("bad_type_confidence", {"rules": [{**RULE, "confidence": "high"}]}, ("rules", 0, "bad_type")),
    ("bad_type_bool", {"rules": [{**RULE, "confidence": True}]}, ("rules", 0, "bad_type")),
    ("empty_name", {"entities": [entity(name="   ")]}, ("entities", 0, "empty_name")),
    (
        "unknown_relation",
        {
            "entities": [ROOM, DOOR],
            "edges": [{"relation": "adjacent", "src_ref": "room:hall", "dst_ref": "door:oak"}],
        },
        ("edges", 0, "unknown_relation"),
    ),
    (
        "self_loop",
        {
            "entities": [ROOM],
            "edges": [{"relation": "containment", "src_ref": "room:hall", "dst_ref": "room:hall"}],
        },
        ("edges", 0, "self_loop"),
    ),
    (
        "empty_condition",
        {"rules": [{**RULE, "condition": " .. ; "}]},
        ("rules", 0, "empty_condition"),
    ),
    ("empty_action", {"rules": [{**RULE, "action": "()"}]}, ("rules", 0, "empty_action")),
    (
        "trivial_rule",
        {"rules": [{**RULE, "condition": "door locked", "action": "Door_Locked"}]},
        ("rules", 0, "trivial_rule"),
    ),
    (
        "confidence_high",
        {"rules": [{**RULE, "confidence": 1.5}]},
        ("rules", 0, "confidence_out_of_range"),
    ),
    (
        "confidence_low",
        {"entities": [entity(confidence=-0.1)]},
        ("entities", 0, "confidence_out_of_range"),
    ),
    (
        "confidence_nan",
        {"rules": [{**RULE, "confidence": float("nan")}]},
        ("rules", 0, "confidence_out_of_range"),
    ),
    (
        "duplicate_node",
        {"entities": [ROOM, entity(type="room")]},
        ("entities", 1, "duplicate_in_delta"),
    ),
    (
        "duplicate_rule",
        {"rules": [RULE, {**RULE, "condition": "Door . Locked == TRUE", "confidence": 0.5}]},
        ("rules", 1, "duplicate_in_delta"),
    ),
    (
        "duplicate_edge",
        {"edges": [{"relation": "containment", "src_ref": "room:hall", "dst_ref": "door:oak"}] * 2},
        ("edges", 1, "duplicate_in_delta"),
    ),
    (
        "kind_conflict",
        {"states": [{"name": "door:oak", "type": "door"}]},
        ("states", 0, "kind_conflict"),
    ),
    (
        "type_conflict",
        {"entities": [{"name": "door:oak", "type": "room"}]},
        ("entities", 0, "type_conflict"),
    ),
    (
        "missing_endpoint",
        {"edges": [{"relation": "transition", "src_ref": "room:hall", "dst_ref": "room:ghost"}]},
        ("edges", 0, "missing_endpoint"),
    ),
    (
        "missing_link",
        {"rules": [{**RULE, "linked_nodes": ["key:ghost"]}]},
        ("rules", 0, "missing_link"),
    ),
    (
        "depends_on_rejected",
        {
            "entities": [{"name": "key:iron"}],
            "edges": [{"relation": "containment", "src_ref": "room:hall", "dst_ref": "key:iron"}],
        },
        ("edges", 0, "depends_on_rejected"),
    ),
]


@pytest.mark.parametrize(("raw", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_bad_part_is_dropped_with_its_reason(raw, expected):
    result = validate_delta(raw, held_graph(), scene="s1")
    assert result.rejections[-1][:3] == expected
    # One rejection, but for the part whose drop causes it.
    assert len(result.rejections) == (2 if expected[2] == "depends_on_rejected" else 1)
    assert result.counts[expected[2]] == 1
    assert all(r.detail for r in result.rejections)
    if expected[0] == "delta":  # the whole delta is dropped
        assert result.nodes == result.edges == result.rules == ()


def test_the_cases_cover_every_reason():
    assert {c[2][2] for c in CASES} == set(REASONS)


def test_good_parts_survive_beside_bad_ones_and_counts_add_up():
    raw = {
        "entities": [ROOM, {"name": "lamp:1", "type": "lamp", "properties": {"lit": None}}],
        "edges": [
            {"relation": "containment", "src_ref": "room:hall", "dst_ref": "door:oak"},
            {"relation": "containment", "src_ref": "room:hall", "dst_ref": "lamp:1"},
            {"relation": "portal", "src_ref": "room:hall", "dst_ref": "door:oak"},
        ],
        "rules": [RULE, {**RULE, "action": "open_door_works", "linked_nodes": ["lamp:1"]}],
    }
    result = validate_delta(raw, held_graph(), scene="s1")
    assert [e.node_id for e in result.entities] == ["room:hall"]
    assert [e.dst_ref for e in result.edges] == ["door:oak"]  # held in the graph
    assert [r.action for r in result.rules] == ["open_door_fail"]
    assert result.counts == Counter(bad_type=1, depends_on_rejected=2, unknown_relation=1)


def test_a_part_rejected_for_a_conflict_takes_its_references_with_it():
    # door:oak is held (a door); the delta calls it a room, so its own edge to it goes too.
    raw = {
        "entities": [{"name": "door:oak", "type": "room"}, {"name": "key:1", "type": "key"}],
        "edges": [{"relation": "containment", "src_ref": "door:oak", "dst_ref": "key:1"}],
    }
    result = validate_delta(raw, held_graph(), scene="s1")
    assert [r.reason for r in result.rejections] == ["type_conflict", "depends_on_rejected"]
    assert [e.node_id for e in result.entities] == ["key:1"]


def test_without_a_graph_references_resolve_within_the_delta_only():
    edge = {"relation": "containment", "src_ref": "room:hall", "dst_ref": "door:oak"}
    assert validate_delta({"entities": [ROOM, DOOR], "edges": [edge]}, scene="s").rejections == ()
    lonely = validate_delta({"edges": [edge]}, scene="s")
    assert [r.reason for r in lonely.rejections] == ["missing_endpoint"]


def test_names_are_stripped_and_ids_default_to_names():
    result = validate_delta(
        {"entities": [{"name": "  Oak door ", "type": " door", "id": "door:oak"}, ROOM]},
        None,
        scene="s",
    )
    oak, hall = result.entities
    assert (oak.name, oak.type, oak.node_id) == ("Oak door", "door", "door:oak")
    assert hall.node_id == "room:hall"


@pytest.mark.parametrize("scene", ["", "  ", None, 7])
def test_a_scene_id_is_required(scene):
    with pytest.raises(ValueError, match="scene"):
        validate_delta({}, None, scene=scene)


def test_models_refuse_bad_values_when_built_in_code():
    with pytest.raises(ValueError):
        DeltaEdge(relation="near", src_ref="a", dst_ref="b")
    with pytest.raises(ValueError):
        DeltaRule(condition="x", action="y", confidence=2.0)
    with pytest.raises(ValueError):
        DeltaEntity(name="a", type="b", extra=1)


def snapshot(graph: WorldGraph):
    return graph.records(), graph.stats, graph.rejections, graph.has_scene("s2")


def test_a_merge_that_fails_midway_leaves_the_graph_exactly_as_before():
    # Validated against a graph that holds room:hall, merged into one that does not:
    # the new key and the rule are staged before the edge fails; none of it may land.
    other = held_graph()
    delta = validate_delta(
        {
            "entities": [{"name": "key:1", "type": "key", "properties": {"bent": True}}],
            "edges": [{"relation": "containment", "src_ref": "room:hall", "dst_ref": "key:1"}],
            "rules": [{**RULE, "linked_nodes": ["key:1"]}],
        },
        other,
        scene="s2",
    )
    assert delta.rejections == ()
    graph = WorldGraph("test")
    graph.merge({"entities": [{"name": "key:1", "type": "key"}]}, scene="s1")
    before = snapshot(graph)
    with pytest.raises(MergeError, match="room:hall"):
        graph.merge(delta)
    assert snapshot(graph) == before
    # Validated against this graph instead, the edge is dropped and the rest merges.
    again = graph.merge(
        {
            "entities": [{"name": "key:1", "type": "key", "properties": {"bent": True}}],
            "edges": [{"relation": "containment", "src_ref": "room:hall", "dst_ref": "key:1"}],
        },
        scene="s2",
    )
    assert again.rejections == {"missing_endpoint": 1} and again.nodes_updated == 1
    assert graph.node("key:1").properties == {"bent": True}


def test_a_merge_with_a_node_of_another_type_fails_whole():
    delta = validate_delta(
        {"entities": [ROOM, {"name": "door:oak", "type": "room"}]}, None, scene="s9"
    )
    graph = held_graph()
    before = snapshot(graph)
    with pytest.raises(MergeError, match="door:oak"):
        graph.merge(delta)
    assert snapshot(graph) == before and not graph.has_scene("s9")


def test_a_rejected_delta_still_counts_its_scene_and_reasons():
    graph = held_graph()
    report = graph.merge("not json", scene="s1")
    assert report.rejections == {"malformed_json": 1}
    assert graph.has_scene("s1") and graph.rejections == Counter(malformed_json=1)
    assert graph.stats.nodes == 2


def test_delta_from_facts_builds_entities_properties_and_containment():
    facts = WorldState(
        [
            Fact("key:1", "in", "room:hall"),
            Fact("key:1", "attr", "7"),
            Fact("key:1", "attr", "3"),
            Fact("lamp", "brightness", "30"),
            Fact("player", "at", "room:hall"),
        ]
    )
    delta = delta_from_facts(facts, types={"player": "person"})
    by_id = {e.node_id: e for e in delta.entities}
    assert set(by_id) == {"key:1", "room:hall", "lamp", "player"}
    assert by_id["key:1"].type == "key" and by_id["key:1"].properties == {"attr": "3,7"}
    assert by_id["lamp"].type == "thing" and by_id["lamp"].properties == {"brightness": "30"}
    assert by_id["player"].type == "person"
    assert {(e.src_ref, e.dst_ref) for e in delta.edges} == {
        ("room:hall", "key:1"),
        ("room:hall", "player"),
    }
    assert all(e.relation == "containment" for e in delta.edges)


def test_ground_truth_of_a_real_env_merges_cleanly():
    env = gymnasium.make("wmkit/Vault-v0", ground_truth=True)
    _, info = env.reset(seed=3)
    graph = WorldGraph("wmkit/Vault-v0")
    report = graph.merge(delta_from_facts(info["wm.state"]), scene="vault/ep0@0")
    assert report.rejections == {}
    rooms = {n.id for n in graph.nodes() if n.type == "room"}
    assert rooms and all(r.startswith("room:") for r in rooms)
    inside = {(f.object, f.subject) for f in info["wm.state"] if f.relation in ("at", "in")}
    assert inside == {(e.src_ref, e.dst_ref) for e in graph.edges()}
    assert graph.node("door:" + info["wm.state"][0].subject.split(":")[1]) is not None
    # The next step's state merges as more evidence for the same nodes.
    _, _, _, _, info = env.step("look")
    again = graph.merge(delta_from_facts(info["wm.state"]), scene="vault/ep0@1")
    assert again.nodes_added == 0 and again.nodes_updated == report.nodes_added
    env.close()
