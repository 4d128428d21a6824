import pytest

from wmkit.world import (
    ConfidenceError,
    Edge,
    InvalidEdgeError,
    RelationGraph,
    UnknownEdgeError,
    UnknownEntityError,
)


def small() -> RelationGraph:
    g = RelationGraph(confidence_floor=0.5)
    g = g.add_edge("a", "likes", "b", confidence=0.9, step=1)
    g = g.add_edge("a", "owns", "c", step=1)
    return g.add_edge("d", "likes", "b", step=2, ttl=3)


def test_outgoing_and_incoming_with_relation_filter():
    g = small()
    assert [(e.relation, e.dst) for e in g.outgoing("a")] == [("likes", "b"), ("owns", "c")]
    assert [e.dst for e in g.outgoing("a", "owns")] == ["c"]
    assert [e.src for e in g.incoming("b")] == ["a", "d"]
    assert [e.src for e in g.incoming("b", "owns")] == []
    assert g.outgoing("nobody") == () and g.incoming("nobody") == ()
    assert g.edge("a", "likes", "b") == Edge("a", "likes", "b", 0.9, 1, None)
    assert len(g) == 3 and ("a", "owns", "c") in g and ("c", "owns", "a") not in g


def test_readd_replaces_and_does_not_double_count():
    g = small().add_edge("a", "likes", "b", confidence=0.6, step=5)
    assert len(g) == 3
    assert g.edge("a", "likes", "b").confidence == 0.6
    assert len(g.incoming("b", "likes")) == 2


def test_confidence_floor_rejects_and_never_clamps():
    g = small()
    with pytest.raises(ConfidenceError, match=r"0\.3 .*floor"):
        g.add_edge("a", "fears", "b", confidence=0.3)
    with pytest.raises(ConfidenceError):
        g.add_edge("a", "fears", "b", confidence=1.5)
    assert ("a", "fears", "b") not in g and len(g) == 3
    with pytest.raises(ConfidenceError):
        RelationGraph(confidence_floor=2)


def test_dangling_endpoints_refused_when_entities_given():
    with pytest.raises(UnknownEntityError, match="dangling dst 'zz'"):
        RelationGraph().add_edge("a", "r", "zz", entities={"a", "b"})
    with pytest.raises(UnknownEntityError, match="dangling src 'zz'"):
        RelationGraph().add_edge("zz", "r", "a", entities={"a", "b"})


def test_bad_relation_and_ttl():
    with pytest.raises(InvalidEdgeError, match="relation"):
        RelationGraph().add_edge("a", "", "b")
    with pytest.raises(InvalidEdgeError, match="ttl"):
        RelationGraph().add_edge("a", "r", "b", ttl=0)


def test_remove_edge_both_directions_and_persistence():
    g = small()
    smaller = g.remove_edge("a", "likes", "b")
    assert [e.src for e in smaller.incoming("b")] == ["d"]
    assert [e.dst for e in smaller.outgoing("a")] == ["c"]
    assert len(smaller) == 2 and len(g) == 3  # old version intact
    with pytest.raises(UnknownEdgeError, match="a -likes-> b"):
        smaller.remove_edge("a", "likes", "b")


def test_expire_removes_edges_from_both_indexes():
    g = small()  # d -likes-> b added at step 2 with ttl 3: live 2..4, expires at 5
    same, expired = g.expire(4)
    assert expired == () and same is g
    after, expired = g.expire(5)
    assert [(e.src, e.dst) for e in expired] == [("d", "b")]
    assert [e.src for e in after.incoming("b")] == ["a"]
    assert after.outgoing("d") == ()
    assert ("d", "likes", "b") not in after and len(after) == 2
    assert after.next_expiry() is None
    assert ("d", "likes", "b") in g  # old version intact


def test_expire_skips_stale_entries_lazily():
    g = RelationGraph().add_edge("a", "r", "b", step=0, ttl=2)
    g = g.remove_edge("a", "r", "b").add_edge("a", "r", "b", step=1, ttl=5)  # now expires at 6
    g2, expired = g.expire(3)
    assert expired == () and ("a", "r", "b") in g2
    g3, expired = g2.expire(6)
    assert len(expired) == 1 and len(g3) == 0
    # re-added without ttl: the old expiry is stale and must not remove it
    g4 = RelationGraph().add_edge("a", "r", "b", ttl=1).add_edge("a", "r", "b")
    assert g4.expire(10)[1] == () and ("a", "r", "b") in g4.expire(10)[0]


def test_expire_cost_follows_expired_edges_not_graph_size():
    edges = [Edge(f"n{i}", "r", f"n{i + 1}", 1.0, 0, None) for i in range(20000)]
    g = RelationGraph().add_edges(edges).add_edge("x", "r", "y", step=0, ttl=1)
    # only one heap entry exists, so expiry touches one edge however big the graph is
    g2, expired = g.expire(1)
    assert len(expired) == 1 and len(g2) == 20000


def test_add_edges_bulk_matches_single_adds_and_is_all_or_nothing():
    edges = [Edge("a", "r", "b", 1.0, 0, 3), Edge("b", "r", "c", 0.7, 1, None)]
    bulk = RelationGraph().add_edges(edges)
    single = (
        RelationGraph()
        .add_edge("a", "r", "b", ttl=3)
        .add_edge("b", "r", "c", confidence=0.7, step=1)
    )
    assert bulk == single and len(bulk) == 2
    base = RelationGraph(confidence_floor=0.8)
    with pytest.raises(ConfidenceError):
        base.add_edges(edges)
    assert len(base) == 0
