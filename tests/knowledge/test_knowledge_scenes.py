"""Curiosity flags, scene packets, the scene log and the curiosity detector."""

import json
import warnings

import pytest
from pydantic import ValidationError

from wmkit.jsonl import TornLineWarning
from wmkit.knowledge.scenes import (
    Curiosity,
    CuriosityDetector,
    FactDelta,
    SceneLog,
    ScenePacket,
    TrueDelta,
    format_curiosity,
    parse_curiosity,
)
from wmkit.world.types import Delta, Fact, WorldState


def test_flag_text_round_trips_and_sits_among_other_output():
    flag = Curiosity("  the key turned but the door stayed shut ")
    assert flag.reason == "the key turned but the door stayed shut"
    text = format_curiosity(flag)
    assert text == (
        "FLAG_CURIOSITY: yes\nCURIOSITY_REASON: the key turned but the door stayed shut"
    )
    assert parse_curiosity(text) == flag
    reply = f"I will try the latch next.\n{text}\nACTION: lift latch"
    assert parse_curiosity(reply) == flag
    assert parse_curiosity("  FLAG_CURIOSITY :  YES\nCURIOSITY_REASON:odd") == Curiosity("odd")
    assert parse_curiosity(format_curiosity(None)) is None
    assert parse_curiosity("ACTION: open door") is None
    assert parse_curiosity("see FLAG_CURIOSITY: yes inline, not a flag line") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("FLAG_CURIOSITY: maybe\nCURIOSITY_REASON: x", "must be 'yes' or 'no', got 'maybe'"),
        ("FLAG_CURIOSITY: yes", "needs a non-empty CURIOSITY_REASON"),
        ("FLAG_CURIOSITY: yes\nCURIOSITY_REASON:   ", "needs a non-empty CURIOSITY_REASON"),
        ("FLAG_CURIOSITY: yes\nFLAG_CURIOSITY: no\nCURIOSITY_REASON: x", "more than once"),
        ("CURIOSITY_REASON: x", "without a FLAG_CURIOSITY line"),
    ],
)
def test_malformed_flags_are_clear_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_curiosity(text)


def test_a_reason_is_one_non_empty_line():
    with pytest.raises(ValueError, match="non-empty reason"):
        Curiosity(" ")
    with pytest.raises(ValueError, match="one line"):
        Curiosity("first\nFLAG_CURIOSITY: no")


def _packet(**overrides):
    fields = {
        "env": "vault",
        "episode": "window/h50/seed=0",
        "step": 7,
        "observation": "The key turns, but the door stays shut.",
        "action": "unlock door with key",
        "predicted_delta": FactDelta.of(Delta((Fact("door", "status", "unlocked"),), ())),
        "observed_delta": FactDelta(),
        "true_delta": TrueDelta(
            action=FactDelta(added=(Fact("key", "in", "lock"),)), event=FactDelta()
        ),
        "reason": "prediction failed: expected +(door, status, unlocked), saw no change",
        "graph_summary": "door -[containment]-> vault",
    }
    return ScenePacket(**{**fields, **overrides})


def test_packet_json_round_trip_and_identity():
    packet = _packet()
    row = json.loads(packet.model_dump_json())
    assert row["predicted_delta"] == {"added": [["door", "status", "unlocked"]], "removed": []}
    again = ScenePacket.model_validate(row)
    assert again == packet
    assert isinstance(again.predicted_delta.added[0], Fact)
    assert again.predicted_delta.to_delta() == Delta((Fact("door", "status", "unlocked"),), ())
    assert packet.key == ("vault", "window/h50/seed=0", 7)
    assert packet.scene_id == "vault/window/h50/seed=0@7"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"surprise": 1}, "surprise"),  # extra="forbid"
        ({"step": -1}, "step"),
        ({"reason": ""}, "reason"),
        ({"env": ""}, "env"),
        ({"action": None}, "only step 0"),
        ({"predicted_delta": {"added": [["door", "status"]], "removed": []}}, "predicted_delta"),
    ],
)
def test_bad_packets_are_refused_naming_the_field(change, field):
    row = {**json.loads(_packet().model_dump_json()), **change}
    with pytest.raises(ValidationError, match=field):
        ScenePacket.model_validate(row)


def test_the_reset_step_may_have_no_action():
    assert _packet(step=0, action=None).action is None


def test_scene_log_appends_batches_keeps_the_latest_copy_and_skips_a_torn_tail(tmp_path):
    log = SceneLog(tmp_path / "vault" / "scenes.jsonl")
    assert log.packets() == []
    first = [_packet(step=s) for s in (3, 7)]
    assert log.extend(first) == 2
    log.append(_packet(step=7, reason="a rerun of the episode saw it again"))
    with log.path.open("ab") as fh:
        fh.write(_packet(step=9).model_dump_json().encode()[:40])  # killed mid-write
    with pytest.warns(TornLineWarning, match="line 4 is torn"):
        packets = log.packets()
    assert [p.step for p in packets] == [3, 7]
    assert packets[1].reason == "a rerun of the episode saw it again"
    with pytest.warns(TornLineWarning, match="dropped a torn last line"):
        log.append(_packet(step=9))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [p.step for p in log] == [3, 7, 9]


def test_scene_log_names_a_row_that_is_not_a_packet(tmp_path):
    log = SceneLog(tmp_path / "scenes.jsonl")
    log.append(_packet())
    log._log.append({"env": "vault"})
    with pytest.raises(ValueError, match=r"row 2 is not a scene packet"):
        log.packets()


def _state(*facts):
    return WorldState(Fact(*f) for f in facts)


def test_detector_fires_on_unseen_entities_relations_states_and_verbs_only():
    detector = CuriosityDetector()
    start = _state(("parcel:a", "status", "booked"), ("parcel:a", "address", "1 elm st"))
    detector.reset(start, ["track a", "wait"])
    # A new address of a known parcel: news, not a surprise.
    moved = _state(("parcel:a", "status", "booked"), ("parcel:a", "address", "2 oak st"))
    assert detector.observe(moved, ["track a", "wait"]) is None
    # A new parcel with new commands of known verbs: the entity is unseen.
    both = _state(*moved, ("parcel:b", "status", "booked"))
    flag = detector.observe(both, ["track a", "track b", "wait"])
    assert flag == Curiosity("unseen entities: parcel:b")
    # A status value nobody held, a new relation and a new verb, all in one step.
    delayed = _state(
        ("parcel:a", "status", "delayed"),
        ("parcel:a", "address", "2 oak st"),
        ("parcel:a", "requested_address", "3 fir rd"),
        ("parcel:b", "status", "booked"),
    )
    flag = detector.observe(delayed, ["escalate a", "track a", "track b"])
    assert flag.reason == (
        "unseen relations: requested_address; unseen states: status=delayed; "
        "command verbs changed: +escalate -wait"
    )
    # Seen before: nothing fires again, even after being forgotten and re-learnt.
    assert detector.observe(both, ["escalate a", "track a", "track b"]) is None
    assert detector.observe(delayed, ["escalate a", "track a", "track b"]) is None
    # No admissible actions given: verbs are not judged.
    assert detector.observe(delayed, None) is None


def test_detector_fires_when_a_prediction_fails_and_not_when_it_holds():
    detector = CuriosityDetector()
    closed = _state(("door", "status", "locked"))
    detector.reset(closed, ["unlock door"])
    opened = _state(("door", "status", "unlocked"))
    guess = Delta((Fact("door", "status", "unlocked"),), (Fact("door", "status", "locked"),))
    flag = detector.observe(closed, ["unlock door"], predicted=guess)
    assert flag.reason == (
        "prediction failed: expected +(door, status, unlocked) -(door, status, locked), "
        "saw no change"
    )
    detector.reset(closed, ["unlock door"])  # a new episode: history is forgotten
    assert detector.observe(opened, ["unlock door"], predicted=guess) == Curiosity(
        "unseen states: status=unlocked"
    )  # the prediction held: only the new state is news


def test_detector_with_every_relation_as_state_and_long_lists_cut_short():
    detector = CuriosityDetector(state_relations=None)
    detector.reset(_state(("a", "at", "x")), [])
    many = _state(*[(f"e{i}", "at", "x") for i in range(8)], ("a", "at", "y"))
    flag = detector.observe(many, [])
    assert flag.reason == "unseen entities: e0, e1, e2, e3, e4 and 3 more; unseen states: at=y"
