import pytest

from wmkit.agents.trackers import ClaimMemory, OracleTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.world.types import Claim, Fact, WorldState, agent_view

ANN_TO_BO = (("sender", "person:ann"), ("receiver", "person:bo"))


def test_agent_view_strips_ground_truth_and_is_read_only():
    info = {"admissible_actions": ["wait"], "score": 1, "wm.state": [], "wm.probes": []}
    view = agent_view(info)
    assert dict(view) == {"admissible_actions": ["wait"], "score": 1}
    with pytest.raises(TypeError):
        view["wm.state"] = []  # type: ignore[index]


def test_only_oracle_agents_see_ground_truth():
    info = {"wm.state": [("a", "b", "c")], "score": 0}
    assert "wm.state" in Agent("o", OracleTracker(), None, oracle=True).view(info)  # type: ignore[arg-type]
    assert "wm.state" not in Agent("w", OracleTracker(), None).view(info)  # type: ignore[arg-type]


def test_claims_set_and_replace():
    memory = ClaimMemory().apply(
        [Claim("parcel:p1", "location", "hub:a"), Claim("parcel:p1", "location", "hub:b")]
    )
    assert memory.state() == WorldState([Fact("parcel:p1", "location", "hub:b")])


def test_description_resolves_to_unique_subject_only():
    memory = ClaimMemory().apply(
        [
            Claim("parcel:p1", "sender", "person:ann"),
            Claim("parcel:p1", "receiver", "person:bo"),
            Claim("parcel:p2", "sender", "person:ann"),
            Claim("parcel:p2", "receiver", "person:cy"),
            Claim(ANN_TO_BO, "requested_address", "5 oak rd"),
            Claim((("sender", "person:ann"),), "address", "ambiguous"),  # p1 or p2: dropped
            Claim((("sender", "person:zed"),), "address", "unknown"),  # nobody: dropped
        ]
    )
    state = memory.state()
    assert state.value("parcel:p1", "requested_address") == "5 oak rd"
    assert state.value("parcel:p2", "requested_address") is None
    assert all(f.object not in {"ambiguous", "unknown"} for f in state)


def test_description_follows_replaced_facts():
    memory = ClaimMemory().apply(
        [
            Claim("parcel:p1", "receiver", "person:bo"),
            Claim("parcel:p1", "receiver", "person:cy"),
            Claim((("receiver", "person:bo"),), "address", "stale"),
            Claim((("receiver", "person:cy"),), "address", "fresh"),
        ]
    )
    assert memory.state().value("parcel:p1", "address") == "fresh"


def _reader(text: str) -> list[Claim]:
    subject, relation, obj = text.split()
    return [Claim(subject, relation, obj)]


def test_window_tracker_forgets_what_scrolled_out():
    tracker = WindowTracker(_reader, k=2)
    tracker.reset("a color red", {})
    tracker.update("wait", "b color blue", {})
    assert tracker.state.value("a", "color") == "red"
    tracker.update("wait", "c color green", {})
    assert tracker.state.value("a", "color") is None
    assert len(tracker.state) == 2


def test_window_tracker_without_limit_remembers_everything():
    tracker = WindowTracker(_reader, k=None)
    tracker.reset("a color red", {})
    for i in range(50):
        tracker.update("wait", f"x{i} color blue", {})
    assert tracker.state.value("a", "color") == "red"
    assert len(tracker.state) == 51


def test_window_tracker_rejects_bad_k():
    with pytest.raises(ValueError, match="k >= 1"):
        WindowTracker(_reader, k=0)


def test_oracle_restricts_truth_to_mentioned_entities():
    info = {
        "wm.state": [("a", "color", "red"), ("b", "color", "blue")],
        "wm.mentioned": ["a"],
    }
    tracker = OracleTracker()
    tracker.reset("", info)
    assert tracker.state == WorldState([("a", "color", "red")])
    tracker.update("wait", "", {**info, "wm.mentioned": ["b"]})
    assert len(tracker.state) == 2


def test_oracle_without_ground_truth_fails_clearly():
    with pytest.raises(KeyError, match="ground_truth=True"):
        OracleTracker().reset("", agent_view({"wm.state": [], "wm.mentioned": []}))
