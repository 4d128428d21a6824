"""The world graph: merge strategies, evidence, rule similarity, persistence, compaction."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from wmkit.jsonl import TornLineWarning
from wmkit.knowledge import (
    GraphError,
    WorldGraph,
    property_confidence,
    rule_similarity,
    validate_delta,
)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_knowledge.py"


def door(locked: bool, confidence: float = 1.0) -> dict:
    part = {"name": "door:oak", "type": "door", "properties": {"locked": locked}}
    return {"entities": [{**part, "confidence": confidence}]}


def rule(condition: str, action: str, confidence: float = 1.0, **more) -> dict:
    return {"rules": [{"condition": condition, "action": action, "confidence": confidence, **more}]}


def scene_delta(i: int) -> dict:
    """A small deterministic world: 6 rooms in a ring, 12 objects, 8 rules in 3 wordings."""
    rng = random.Random(i)
    room, r = rng.randrange(6), rng.randrange(8)
    obj = room + 6 * rng.randrange(2)  # lamp o lies in room o % 6
    nxt = (room + 1) % 6
    condition = f"lever{r}.up == {'true' if r % 2 else 'false'}"
    if rng.random() < 0.3:
        condition = "the " + condition
    return {
        "entities": [
            {"name": f"room:{room}", "type": "room"},
            {"name": f"room:{nxt}", "type": "room"},
            {"name": f"lamp:{obj}", "type": "lamp", "properties": {"lit": rng.random() < 0.7}},
        ],
        "edges": [
            {"relation": "containment", "src_ref": f"room:{room}", "dst_ref": f"lamp:{obj}"},
            {
                "relation": "transition",
                "src_ref": f"room:{room}",
                "dst_ref": f"room:{nxt}",
                "trigger": "go east",
            },
        ],
        "rules": [
            {
                "condition": condition,
                "action": f"pull lever{r} {'opens' if r % 3 else 'jams'}",
                "confidence": round(rng.uniform(0.5, 1.0), 2),
                "linked_nodes": [f"lamp:{obj}"],
            }
        ],
    }


def merged(n: int, start: int = 0, graph: WorldGraph | None = None, **settings) -> WorldGraph:
    graph = graph if graph is not None else WorldGraph("test", **settings)
    for i in range(start, n):
        graph.merge(scene_delta(i), scene=f"s{i}")
    return graph


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# --- merge strategies ---------------------------------------------------------------


def test_new_nodes_then_more_evidence_raise_confidence_by_the_formula():
    graph = WorldGraph()
    first = graph.merge({"entities": [{"name": "room:hall", "type": "room"}]}, scene="a")
    assert (first.nodes_added, first.nodes_updated) == (1, 0)
    assert graph.node("room:hall").confidence == pytest.approx(2 / 3)  # (1+1)/(2+1)
    graph.merge({"entities": [{"name": "room:hall", "type": "room", "confidence": 0.5}]}, scene="b")
    hall = graph.node("room:hall")
    assert (hall.support, hall.weight, hall.evidence) == (2, 1.5, ("a", "b"))
    assert hall.confidence == pytest.approx(2.5 / 4)  # (1+1.5)/(2+2)


def test_a_conflict_is_decided_by_evidence_and_the_loser_keeps_its_own():
    graph = WorldGraph()
    graph.merge(door(True), scene="s1")
    graph.merge(door(True), scene="s2")
    report = graph.merge(door(False), scene="s3")
    assert report.conflicts == 1
    node = graph.node("door:oak")
    assert node.properties == {"locked": True}
    winner, loser = node.claims["locked"]
    assert (winner.value, winner.evidence, winner.support) == (True, ("s1", "s2"), 2)
    assert (loser.value, loser.evidence, loser.support) == (False, ("s3",), 1)
    assert property_confidence(node, "locked") == pytest.approx(3 / 5)  # (1+2)/(2+2+1)
    assert node.confidence == pytest.approx(3 / 5)  # its weakest property
    # Equal evidence: the value reported last wins. More evidence: it stays ahead.
    graph.merge(door(False), scene="s4")
    assert graph.node("door:oak").properties == {"locked": False}
    graph.merge(door(True), scene="s5")
    node = graph.node("door:oak")
    assert node.properties == {"locked": True}
    assert [c.support for c in node.claims["locked"]] == [3, 2]


def test_evidence_weight_is_confidence_not_a_count_of_reports():
    graph = WorldGraph()
    graph.merge(door(True, 0.3), scene="s1")
    graph.merge(door(True, 0.3), scene="s2")
    graph.merge(door(False, 0.9), scene="s3")
    node = graph.node("door:oak")
    assert node.properties == {"locked": False}  # 0.9 > 0.3 + 0.3
    assert property_confidence(node, "locked") == pytest.approx((1 + 0.9) / (2 + 1 + 0.6))


def test_true_and_one_are_different_values():
    graph = WorldGraph()
    graph.merge({"entities": [{"name": "x", "type": "t", "properties": {"v": True}}]}, scene="a")
    report = graph.merge(
        {"entities": [{"name": "x", "type": "t", "properties": {"v": 1}}]}, scene="b"
    )
    assert report.conflicts == 1 and len(graph.node("x").claims["v"]) == 2


def test_duplicate_edges_merge_their_evidence_and_triggers_keep_edges_apart():
    graph = WorldGraph()
    rooms = [{"name": "room:a", "type": "room"}, {"name": "room:b", "type": "room"}]
    east = {
        "relation": "transition",
        "src_ref": "room:a",
        "dst_ref": "room:b",
        "trigger": "go east",
    }
    graph.merge({"entities": rooms, "edges": [east]}, scene="s1")
    report = graph.merge({"edges": [{**east, "conditions": ["door open"]}]}, scene="s2")
    assert (report.edges_added, report.edges_merged) == (0, 1)
    edge = graph.edge("room:a", "transition", "room:b", "go east")
    assert (edge.support, edge.evidence, edge.conditions) == (2, ("s1", "s2"), ("door open",))
    graph.merge({"edges": [{**east, "trigger": "climb"}]}, scene="s3")
    assert [e.trigger for e in graph.edges_from("room:a")] == ["climb", "go east"]
    assert graph.edges_from("room:a", "containment") == []


def test_evidence_lists_are_capped_but_support_counts_every_scene():
    graph = WorldGraph(evidence_cap=3)
    for i in range(5):
        graph.merge(door(True), scene=f"s{i}")
    node = graph.node("door:oak")
    assert node.evidence == ("s2", "s3", "s4") and node.support == 5
    assert node.claims["locked"][0].evidence == ("s2", "s3", "s4")


def test_a_scene_merges_once():
    graph = WorldGraph()
    graph.merge(door(True), scene="s1")
    before = graph.records()
    report = graph.merge(door(False), scene="s1")
    assert report.duplicate and graph.records() == before and graph.stats.scenes == 1


def test_merge_needs_a_scene_for_raw_input_and_the_same_one_for_a_validated_delta():
    graph = WorldGraph()
    with pytest.raises(ValueError, match="scene"):
        graph.merge(door(True))
    with pytest.raises(ValueError, match="differs"):
        graph.merge(validate_delta(door(True), graph, scene="a"), scene="b")


# --- rules --------------------------------------------------------------------------


def test_rules_merge_at_or_above_the_threshold_and_not_below():
    base = ("door.locked == true", "open_door_fail")
    near = ("the door.locked == true", "open_door_fail")  # one extra token of 8
    sim = rule_similarity(base, near)
    assert sim == pytest.approx(7 / 8)
    for threshold, expect_rules in ((sim, 1), (sim + 0.01, 2)):
        graph = WorldGraph(rule_threshold=threshold)
        graph.merge(rule(*base, 0.9), scene="s1")
        report = graph.merge(rule(*near, 0.5, recovery="use key"), scene="s2")
        assert graph.stats.rules == expect_rules
        assert report.rules_merged == (expect_rules == 1)
    merged_rule = WorldGraph(rule_threshold=sim)
    merged_rule.merge(rule(*base, 0.9), scene="s1")
    merged_rule.merge(rule(*near, 0.5, recovery="use key"), scene="s2")
    (only,) = merged_rule.rules()
    assert (only.condition, only.recovery, only.support) == (base[0], "use key", 2)
    assert only.confidence == pytest.approx((1 + 1.4) / (2 + 2))


def test_operators_and_buckets_keep_contrary_rules_apart():
    assert rule_similarity(("x == 1", "open box"), ("x != 1", "open box")) < 0.8
    # Same words, other first action token: other bucket, never merged.
    assert rule_similarity(("box shut", "open box now"), ("box shut", "now open box")) == 0.0
    graph = WorldGraph(rule_threshold=0.1)
    graph.merge(rule("box shut", "open box now"), scene="s1")
    graph.merge(rule("box shut", "now open box"), scene="s2")
    assert graph.stats.rules == 2


def test_similar_rules_in_one_delta_merge_with_each_other():
    graph = WorldGraph()
    delta = {
        "rules": [
            {"condition": "door.locked == true", "action": "open_door_fail", "confidence": 1.0},
            {"condition": "the door.locked == true", "action": "open_door_fail", "confidence": 1.0},
        ]
    }
    report = graph.merge(delta, scene="s1")
    assert (report.rules_added, report.rules_merged) == (1, 1)
    (only,) = graph.rules()
    assert only.support == 1  # one scene counts once


def brute_best(graph: WorldGraph, condition: str, action: str):
    scored = [
        (rule_similarity((r.condition, r.action), (condition, action)), r.id) for r in graph.rules()
    ]
    scored = [(s, i) for s, i in scored if s >= graph.rule_threshold - 1e-12]
    return None if not scored else min(scored, key=lambda p: (-p[0], p[1]))


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 1.0])
def test_indexed_rule_lookup_finds_what_an_all_pairs_scan_finds(threshold):
    rng = random.Random(threshold)
    words = ["door", "box", "key", "==", "!=", "true", "false", "red", "blue", "lever"]
    verbs = ["open", "pull", "take"]

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k))

    graph = WorldGraph(rule_threshold=threshold)
    for i in range(150):
        graph.merge(rule(text(rng.randint(1, 5)), rng.choice(verbs) + " " + text(2)), scene=f"{i}")
    assert graph.stats.rules > 20
    for _ in range(150):
        condition, action = text(rng.randint(1, 5)), rng.choice(verbs) + " " + text(2)
        found = graph.find_rule(condition, action)
        expected = brute_best(graph, condition, action)
        assert (found and (pytest.approx(found[1]), found[0].id)) == (
            expected and (pytest.approx(expected[0]), expected[1])
        )


# --- persistence --------------------------------------------------------------------


def test_save_and_load_round_trip_everything(tmp_path):
    graph = merged(40, rule_threshold=0.7, evidence_cap=4)
    graph.merge("{broken", scene="bad")
    graph.save(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "edges.jsonl",
        "merged.jsonl",
        "meta.json",
        "nodes.jsonl",
        "rules.jsonl",
    ]
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["stats"] == {"nodes": 18, "edges": 18, "rules": graph.stats.rules, "scenes": 41}
    assert meta["env_name"] == "test" and meta["rejections"] == {"malformed_json": 1}
    assert meta["last_updated"].endswith("Z") and meta["version"] == 1
    loaded = WorldGraph.load(tmp_path)
    assert loaded.records() == graph.records()
    assert (loaded.rule_threshold, loaded.evidence_cap) == (0.7, 4)
    assert loaded.rejections == graph.rejections and loaded.has_scene("s39")
    assert loaded.stats == graph.stats
    # One row per line, readable: the node row of the seed's format.
    row = lines(tmp_path / "nodes.jsonl")[0]
    assert {"id", "type", "name", "properties", "evidence", "confidence"} <= set(row)


def test_flush_appends_only_what_changed(tmp_path):
    graph = merged(30)
    graph.save(tmp_path)
    before = {f: len(lines(tmp_path / f)) for f in ("nodes.jsonl", "edges.jsonl", "rules.jsonl")}
    graph.merge({"entities": [{"name": "room:0", "type": "room"}]}, scene="new")
    assert graph.flush() == 2  # the room, and the scene in merged.jsonl
    after = {f: len(lines(tmp_path / f)) for f in before}
    assert after == {**before, "nodes.jsonl": before["nodes.jsonl"] + 1}
    assert lines(tmp_path / "nodes.jsonl")[-1]["id"] == "room:0"
    assert graph.flush() == 0
    assert WorldGraph.load(tmp_path).records() == graph.records()


def test_incremental_updates_give_the_graph_a_rebuild_gives(tmp_path):
    graph = WorldGraph("test")
    graph.save(tmp_path)
    for stop in (25, 60, 61, 100):
        graph = WorldGraph.load(tmp_path)
        merged(stop, start=graph.stats.scenes, graph=graph)
        graph.flush()
    assert WorldGraph.load(tmp_path).records() == merged(100).records()


def test_a_torn_last_line_is_skipped_and_repaired(tmp_path):
    graph = merged(20)
    graph.save(tmp_path)
    with (tmp_path / "nodes.jsonl").open("a") as fh:
        fh.write('{"id": "room:9", "kind": "ent')  # a writer killed mid-line
    (tmp_path / "meta.json").unlink()  # and no commit record to lean on
    with pytest.warns(TornLineWarning):
        loaded = WorldGraph.load(tmp_path)
    assert loaded.records() == graph.records()
    merged(25, start=20, graph=loaded)
    with pytest.warns(TornLineWarning):  # the torn tail is cut before appending
        loaded.flush()
    assert WorldGraph.load(tmp_path).records() == merged(25).records()


def test_rows_past_the_last_commit_are_ignored(tmp_path):
    graph = merged(20)
    graph.save(tmp_path)
    # A flush that appended a row and died before rewriting meta.json.
    row = lines(tmp_path / "edges.jsonl")[0]
    row["support"] = 999
    with (tmp_path / "edges.jsonl").open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    loaded = WorldGraph.load(tmp_path)
    assert loaded.records() == graph.records()
    merged(22, start=20, graph=loaded)
    loaded.flush()  # rewrites the files, so the stray row cannot come back
    assert all(r["support"] != 999 for r in lines(tmp_path / "edges.jsonl"))
    assert WorldGraph.load(tmp_path).records() == merged(22).records()


def test_a_flush_that_fails_before_its_commit_is_redone_cleanly(tmp_path):
    graph = merged(20)
    graph.save(tmp_path)
    merged(30, start=20, graph=graph)
    meta = tmp_path / "meta.json"
    meta.unlink()
    (meta / "blocker").mkdir(parents=True)  # the commit (rename onto meta.json) fails
    with pytest.raises(OSError):
        graph.flush()
    assert len(lines(tmp_path / "merged.jsonl")) == 30  # appended, but not committed
    (meta / "blocker").rmdir()
    meta.rmdir()
    graph.flush()  # cuts the uncommitted rows, appends them again, commits
    assert len(lines(tmp_path / "merged.jsonl")) == 30
    assert WorldGraph.load(tmp_path).records() == merged(30).records()


def test_damage_before_the_last_line_is_an_error(tmp_path):
    merged(10).save(tmp_path)
    text = (tmp_path / "rules.jsonl").read_text().splitlines()
    (tmp_path / "rules.jsonl").write_text("\n".join(["{oops", *text]) + "\n")
    with pytest.raises(ValueError, match="line 1"):
        WorldGraph.load(tmp_path)
    merged(10).save(tmp_path)
    bad = lines(tmp_path / "nodes.jsonl")
    bad[0]["confidence"] = 7
    (tmp_path / "nodes.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    with pytest.raises(GraphError, match=r"nodes\.jsonl"):
        WorldGraph.load(tmp_path)


def test_compaction_keeps_the_graph_and_leaves_one_row_per_id(tmp_path):
    graph = WorldGraph("test", compact_factor=None)
    graph.save(tmp_path)
    for stop in range(10, 80, 10):
        merged(stop, start=graph.stats.scenes, graph=graph)
        graph.flush()
    journal = lines(tmp_path / "nodes.jsonl")
    assert len(journal) > len({r["id"] for r in journal})  # updates were appended
    before = WorldGraph.load(tmp_path).records()
    graph.compact()
    compacted = lines(tmp_path / "nodes.jsonl")
    assert len(compacted) == len({r["id"] for r in compacted}) == graph.stats.nodes
    assert len(lines(tmp_path / "edges.jsonl")) == graph.stats.edges
    assert WorldGraph.load(tmp_path).records() == before == graph.records()
    assert not list(tmp_path.glob(".*.tmp"))


def test_flush_compacts_by_itself_when_the_journal_outgrows_the_graph(tmp_path):
    graph = WorldGraph("test", compact_factor=2.0, compact_min_rows=10)
    graph.save(tmp_path)
    sizes = []
    for i in range(40):  # each scene rewrites some of the same few rows
        graph.merge(scene_delta(i % 5), scene=f"s{i}")
        graph.flush()
        sizes.append(
            sum(len(lines(tmp_path / f)) for f in ("nodes.jsonl", "edges.jsonl", "rules.jsonl"))
        )
        live = graph.stats.nodes + graph.stats.edges + graph.stats.rules
        assert sizes[-1] <= 2.0 * live + 10
    assert any(b < a for a, b in itertools.pairwise(sizes))  # it did compact
    assert WorldGraph.load(tmp_path).records() == graph.records()


def test_load_create_and_bad_settings(tmp_path):
    with pytest.raises(FileNotFoundError):
        WorldGraph.load(tmp_path / "none")
    empty = WorldGraph.load(tmp_path / "new", create=True, env_name="wmkit/Vault-v0")
    assert empty.stats.nodes == 0 and empty.env_name == "wmkit/Vault-v0"
    empty.merge(door(True), scene="s1")
    empty.flush()
    assert WorldGraph.load(tmp_path / "new").node("door:oak") is not None
    (tmp_path / "new" / "meta.json").write_text(json.dumps({"format": "other/9"}))
    with pytest.raises(GraphError, match="format"):
        WorldGraph.load(tmp_path / "new")
    with pytest.raises(GraphError, match="directory"):
        WorldGraph().flush()
    for bad in ({"rule_threshold": 0.0}, {"evidence_cap": 0}, {"compact_factor": 0.5},
                {"compact_min_rows": -1}):  # fmt: skip
        with pytest.raises(GraphError):
            WorldGraph(**bad)


def test_summary_names_the_best_supported_knowledge():
    text = merged(30).summary(limit=3)
    assert text.splitlines()[0].startswith("world graph test")
    assert len(text.splitlines()) == 7 and "rule " in text and "conf=" in text


def test_the_benchmark_runs_with_a_tiny_budget():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "200,400", "--flush-every", "100",
         "--incremental-size", "300"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout  # fmt: skip
    assert "merge: n scenes" in out and "× raw" in out
    assert "incremental graph == rebuilt graph: True" in out
    skipped = subprocess.run(
        [sys.executable, str(SCRIPT), "--sizes", "100", "--skip", "incremental"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert "merge: n scenes" in skipped and "incremental" not in skipped
