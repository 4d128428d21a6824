"""Causal confusion: the agent's change split by cause against the true split, by hand.

Every expected number below is worked out from the facts of the case (signed facts:
``+`` added, ``-`` removed); the cases follow the definition in wmkit.evals.metrics.
"""

import math

import pytest

from wmkit.evals.metrics import (
    agent_change,
    confusion_scores,
    score_episode,
    split_change,
)
from wmkit.evals.records import EpisodeRecord, StepRecord
from wmkit.world.types import Delta, Fact, Probe

DOOR_OPEN = Fact("door", "open", "yes")
DOOR_SHUT = Fact("door", "open", "no")
CLOCK_8 = Fact("clock", "time", "8")
CLOCK_9 = Fact("clock", "time", "9")
CAT = Fact("cat", "mood", "angry")  # about nothing that changed
LAMP_3, LAMP_5, LAMP_6 = (Fact("lamp", "level", v) for v in "356")
NONE = Delta()


def d(added=(), removed=()):
    return Delta(tuple(sorted(added)), tuple(sorted(removed)))


def step(believed=NONE, action=NONE, event=NONE, predicted=None, probes=(), answers=()):
    return StepRecord(
        action="act",
        observation="",
        reward=0.0,
        believed=believed,
        predicted=predicted,
        truth=d(action.added + event.added, action.removed + event.removed),
        true_action=action,
        true_event=event,
        mentioned=(),
        probes=tuple(probes),
        answers=tuple(answers),
        score=0,
        max_score=0,
        terminated=False,
        truncated=False,
    )


def record(*steps, first=None):
    # Step 0 is the reset: its change (the whole initial state, in the event part of
    # most families) is never scored; here the agent gets it wrong on purpose.
    first = first or step(believed=d([CAT]), event=d([DOOR_SHUT, CLOCK_8]))
    return EpisodeRecord(seed=0, agent="a", oracle=False, steps=(first, *steps))


def scores(rec, **kw):
    return confusion_scores(rec, **kw)._asdict()


def test_empty_deltas_score_nothing_and_are_nan():
    c = scores(record(step(), step()))
    assert c["action_steps"] == c["event_steps"] == c["probes"] == 0
    for key in ("action_exact", "action_f1", "event_exact", "event_f1", "probe_accuracy"):
        assert math.isnan(c[key]), key


def test_an_episode_with_no_step_after_the_reset_is_nan():
    c = scores(record())
    assert (c["action_steps"], c["event_steps"]) == (0, 0)
    assert math.isnan(c["action_f1"]) and math.isnan(c["event_exact"])


def test_action_only():
    opened = d([DOOR_OPEN], [DOOR_SHUT])
    # Step 1 exact (+open -shut); step 2 misses the removal: tp 3, fp 0, fn 1 over both.
    c = scores(record(step(opened, action=opened), step(d([DOOR_OPEN]), action=opened)))
    assert c["action_steps"] == 2 and c["event_steps"] == 0
    assert c["action_exact"] == 0.5
    assert c["action_f1"] == pytest.approx(2 * 1.0 * 0.75 / 1.75)  # P 3/3, R 3/4
    assert math.isnan(c["event_exact"]) and math.isnan(c["event_f1"])


def test_event_only():
    ticked = d([CLOCK_9], [CLOCK_8])
    # Step 1: the agent saw the clock move; step 2: it saw nothing (tp 0, fn 2).
    c = scores(record(step(ticked, event=ticked), step(NONE, event=ticked)))
    assert c["event_steps"] == 2 and c["action_steps"] == 0
    assert c["event_exact"] == 0.5
    assert c["event_f1"] == pytest.approx(2 * 1.0 * 0.5 / 1.5)  # P 2/2, R 2/4
    assert math.isnan(c["action_f1"])


def test_both_parts_on_one_step():
    opened, ticked = d([DOOR_OPEN], [DOOR_SHUT]), d([CLOCK_9], [CLOCK_8])
    both = d([DOOR_OPEN, CLOCK_9], [DOOR_SHUT, CLOCK_8])
    c = scores(record(step(both, action=opened, event=ticked)))
    assert (c["action_exact"], c["action_f1"], c["event_exact"], c["event_f1"]) == (1, 1, 1, 1)
    # Seeing only the clock move: right in the event part, the door missed in the
    # action part (nothing claimed there: precision 1, recall 0).
    c = scores(record(step(ticked, action=opened, event=ticked)))
    assert (c["action_exact"], c["action_f1"]) == (0.0, 0.0)  # P 1 (nothing), R 0
    assert (c["event_exact"], c["event_f1"]) == (1.0, 1.0)


def test_a_change_that_did_not_happen_counts_against_both_parts():
    opened, ticked = d([DOOR_OPEN]), d([CLOCK_9])
    believed = d([DOOR_OPEN, CLOCK_9, CAT])
    c = scores(record(step(believed, action=opened, event=ticked)))
    # Each part: tp 1 (its own fact), fp 1 (the cat): P 1/2, R 1 -> F1 2/3, not exact.
    assert c["action_exact"] == c["event_exact"] == 0.0
    assert c["action_f1"] == pytest.approx(2 / 3) and c["event_f1"] == pytest.approx(2 / 3)
    # On a step with no true event, the event part is not scored at all.
    c = scores(record(step(d([DOOR_OPEN, CAT]), action=opened)))
    assert c["action_f1"] == pytest.approx(2 / 3) and c["event_steps"] == 0


def test_a_slot_both_parts_touch():
    # The command lowers the lamp from 3 (removing 3), an event sets it to 6.
    action, event = d(removed=[LAMP_3]), d([LAMP_6])
    believed = d([LAMP_6, LAMP_5], [LAMP_3])
    mine_action, mine_event = split_change(believed, action, event)
    # -3 is the action's fact, +6 the event's; +5 is neither's: the action part's.
    assert mine_action == d([LAMP_5], [LAMP_3]) and mine_event == d([LAMP_6])
    c = scores(record(step(believed, action=action, event=event)))
    assert c["action_exact"] == 0.0 and c["action_f1"] == pytest.approx(2 / 3)
    assert c["event_exact"] == 1.0 and c["event_f1"] == 1.0
    # A fact both true parts hold goes to both.
    assert split_change(d([LAMP_6]), d([LAMP_6]), d([LAMP_6])) == (d([LAMP_6]), d([LAMP_6]))


def test_signs_matter_adding_is_not_removing():
    c = scores(record(step(d(removed=[DOOR_OPEN]), action=d([DOOR_OPEN]))))
    assert c["action_exact"] == 0.0 and c["action_f1"] == 0.0


def test_the_prediction_is_preferred_over_the_believed_change():
    opened = d([DOOR_OPEN])
    rec = record(step(NONE, action=opened, predicted=opened), step(NONE, action=opened))
    assert agent_change(rec.steps[1]) == opened and agent_change(rec.steps[2]) == NONE
    c = scores(rec)  # step 1 by its prediction (right), step 2 by its tracked state
    assert c["action_exact"] == 0.5 and c["action_f1"] == pytest.approx(2 / 3)
    tracked = scores(rec, predictions=False)
    assert tracked["action_exact"] == 0.0 and tracked["action_f1"] == 0.0
    row = score_episode(rec)["confusion"]
    assert row["action_exact"] == 0.5 and row["tracked"]["action_exact"] == 0.0
    assert "probe_accuracy" not in row["tracked"]  # probes are answered from the state
    assert "tracked" not in score_episode(record(step(NONE, action=opened)))["confusion"]


def test_probe_accuracy_counts_due_confusion_probes_only():
    ask = Probe("lamp", "level", "6", 0, "confusion")
    other = Probe("lamp", "level", "6", 0, "drift")
    rec = record(
        step(probes=[ask, other], answers=["6", "5"]),  # confusion right, drift wrong
        step(probes=[ask], answers=["5"]),  # confusion wrong
        step(probes=[ask], answers=["6"]),  # the final step's probes are never asked
        first=step(probes=[ask], answers=["6"]),  # the reset's are: right
    )
    c = scores(rec)
    assert c["probes"] == 3 and c["probe_accuracy"] == pytest.approx(2 / 3)
