"""Episode records: played once, scored as a pure function, written compactly, read back.

The reference is the runner as it was before play and scoring were split
(``_legacy_run_episode``, copied from it): the record path must give the same rows.
"""

import gzip
import json
import re

import gymnasium
import pytest

from wmkit.agents.governed import DictTracker
from wmkit.agents.policies import BookingPolicy, GreedyPolicy, RandomPolicy
from wmkit.agents.trackers import OracleTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.metrics import (
    ProbeOutcome,
    StaleCounts,
    TruthHistory,
    drift,
    drift_summary,
    names_entity,
    score_episode,
)
from wmkit.evals.records import (
    RecordError,
    episode_label,
    read_record,
    record_path,
    write_record,
)
from wmkit.evals.runner import make_env, play_episode, run_episode
from wmkit.world.types import UNKNOWN, Delta, Fact, Probe, WorldState

FAMILIES = ["Parcel", "SmartHome", "Booking", "Vault"]
BOOKING_LABELS = {
    "assumptions": ["assumed_class"],
    "releases": ["released", "expired"],
    "ttl_from": {"valid_for": "quote"},
    "lapses": {"quote": "expired"},
    "effects": {"hold": {"status": "held", "quote": "valid"}, "book": {"status": "booked"}},
}


def _legacy_run_episode(env, agent, seed):
    """The runner's play-and-score loop before records (evals/runner.py at 721414c)."""
    observation, info = env.reset(seed=seed)
    agent.tracker.reset(observation, agent.view(info))
    agent.policy.reset(__import__("numpy").random.default_rng(seed))
    mentioned = set()
    series = []
    outcomes = []
    history = TruthHistory()
    answers = stale_answers = stale_decisions = 0
    step = 0
    while True:
        mentioned.update(info["wm.mentioned"])
        tracked = agent.tracker.state
        truth = WorldState(info["wm.state"])
        history.observe(truth)
        series.append(drift(tracked, truth, mentioned))
        for probe in info["wm.probes"]:
            probe = Probe(*probe)
            answer = tracked.value(probe.subject, probe.relation)
            outcomes.append(
                ProbeOutcome(
                    chain=step - probe.anchor_step,
                    correct=(answer or UNKNOWN) == probe.answer,  # None: the tracker abstains
                    kind=probe.kind,
                )
            )
            if probe.kind != "abstention":  # about no fact: no answer to be stale
                answers += 1
                stale_answers += history.is_stale(probe.subject, probe.relation, answer)
        view = agent.view(info)
        action = agent.policy.act(observation, view, tracked)
        observation, reward, terminated, truncated, info = env.step(action)
        if reward < 0 and any(
            names_entity(action, fact.subject) for fact in history.stale_facts(tracked)
        ):
            stale_decisions += 1
        step += 1
        agent.tracker.update(action, observation, agent.view(info))
        if terminated or truncated:
            break
    mentioned.update(info["wm.mentioned"])
    series.append(drift(agent.tracker.state, WorldState(info["wm.state"]), mentioned))
    stale = StaleCounts(answers, stale_answers, step, stale_decisions)
    return {
        "steps": step,
        "score": int(info.get("score", 0)),
        "max_score": int(info.get("max_score", 0)),
        "drift": drift_summary(series),
        "drift_series": [round(d, 4) for d in series],
        "probes": [[o.chain, o.correct, o.kind] for o in outcomes],
        "stale": stale._asdict(),
        "stale_use": stale.share,
    }


AGENTS = {
    "oracle": lambda env: Agent("oracle", OracleTracker(), GreedyPolicy(), oracle=True),
    "window": lambda env: Agent("window", WindowTracker(env.unwrapped.reader, k=5), RandomPolicy()),
}


def _same(a, b):
    # NaN (stale use with nothing to count) is equal to itself here, as in JSON rows.
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_scoring_the_record_gives_the_legacy_row(family, agent):
    env = make_env(f"wmkit/{family}-v0", 60, {})
    for seed in (0, 3):
        legacy = _legacy_run_episode(env, AGENTS[agent](env), seed)
        record = play_episode(env, AGENTS[agent](env), seed)
        row = score_episode(record)
        assert "confusion" in row  # metrics the legacy runner did not compute
        assert row["seconds"] == record.seconds > 0
        new = {"confusion", "seconds"}
        assert _same({k: v for k, v in row.items() if k not in new}, legacy)
        assert record.length == legacy["steps"] == len(record.steps) - 1


def test_stale_decisions_and_answers_come_out_the_same_from_the_record():
    env = make_env("wmkit/Booking-v0", 200, {"expiry_notice": False})

    def agent():
        return Agent(
            "dict", DictTracker(env.unwrapped.reader, **BOOKING_LABELS), BookingPolicy(0.2)
        )

    legacy = _legacy_run_episode(env, agent(), 1)
    assert legacy["stale"]["stale_decisions"] > 0  # the case is one that counts
    row = run_episode(env, agent(), 1)
    assert _same({k: v for k, v in row.items() if k not in ("confusion", "seconds")}, legacy)


def test_the_record_holds_what_the_metrics_need():
    truths = []  # the true states the env gave, step by step

    class Spy(gymnasium.Wrapper):
        def reset(self, **kwargs):
            observation, info = self.env.reset(**kwargs)
            truths.append(WorldState(info["wm.state"]))
            return observation, info

        def step(self, action):
            out = self.env.step(action)
            truths.append(WorldState(out[-1]["wm.state"]))
            return out

    env = Spy(make_env("wmkit/SmartHome-v0", 40, {}))
    record = play_episode(env, AGENTS["window"](env), 2)
    first, later = record.steps[0], record.steps[1:]
    assert first.action is None and first.reward == 0.0 and first.truth.added
    assert all(isinstance(s.action, str) for s in later)
    assert record.steps[-1].truncated and not any(s.truncated for s in record.steps[:-1])
    states = list(record.states())
    assert len(states) == len(record.steps) == 41
    assert [truth for _, truth in states] == truths
    before = WorldState()
    for step, (tracked, _) in zip(record.steps, states, strict=True):
        # The believed change is the tracked state's step-to-step difference.
        assert step.believed == Delta.between(before, tracked)
        assert step.answers == tuple(tracked.value(p.subject, p.relation) for p in step.probes)
        assert step.predicted is None  # window trackers make no prediction
        # The true change, split action/event, adds up to the state's change.
        added = set(step.true_action.added) | set(step.true_event.added)
        assert set(step.truth.added) <= added
        before = tracked
    # Events land in the event part of the true change (SmartHome's rules fire alone).
    assert any(s.true_event.added for s in later)
    assert any(s.true_action.added for s in later)


class Predicting(WindowTracker):
    """A window tracker that says what it expected each command to do."""

    def update(self, action, observation, info):
        self.last_prediction = Delta((Fact("x:a", "saw", action),), ())
        super().update(action, observation, info)


def test_a_tracker_prediction_is_recorded_apart_from_the_believed_change(tmp_path):
    env = make_env("wmkit/Parcel-v0", 20, {})
    record = play_episode(env, Agent("p", Predicting(env.unwrapped.reader), RandomPolicy()), 0)
    assert record.steps[0].predicted is None
    assert [s.predicted.added[0].object for s in record.steps[1:]] == [
        s.action for s in record.steps[1:]
    ]
    back, _ = read_record(write_record(tmp_path / "p.jsonl.gz", record))
    assert back == record


@pytest.mark.parametrize("family", FAMILIES)
def test_a_written_record_reads_back_equal_and_scores_the_same(tmp_path, family):
    env = make_env(f"wmkit/{family}-v0", 80, {})
    record = play_episode(env, AGENTS["window"](env), 1)
    meta = {"env": family.lower(), "horizon": 80, "variant": ""}
    path = write_record(record_path(tmp_path, family.lower(), 80, "window", 1), record, meta)
    assert path.name == f"{family.lower()}__h80__window__s1.jsonl.gz"
    back, meta_back = read_record(path)
    assert back == record and meta_back == meta
    assert _same(score_episode(back), score_episode(record))
    # Diff-encoded: no step line repeats the whole true state.
    lines = gzip.decompress(path.read_bytes()).splitlines()
    steps = [json.loads(line) for line in lines[1:]]
    assert len(steps) == 81
    full = len(record.steps[0].truth.added)
    assert full and len(steps[0]["truth"]["added"]) == full
    assert sum(len(s["truth"]["added"]) for s in steps[1:]) < 80 * full / 4
    # The same episode gives the same bytes; nothing is left beside the file.
    assert write_record(tmp_path / "again.jsonl.gz", record, meta).read_bytes() == path.read_bytes()
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_a_corrupt_record_is_a_clear_error_naming_the_file(tmp_path):
    env = make_env("wmkit/Booking-v0", 20, {})
    path = write_record(tmp_path / "r.jsonl.gz", play_episode(env, AGENTS["oracle"](env), 0))
    data = path.read_bytes()
    torn = tmp_path / "torn.jsonl.gz"
    torn.write_bytes(data[: len(data) // 2])
    with pytest.raises(RecordError, match=re.escape("torn.jsonl.gz: not a readable gzip")):
        read_record(torn)
    plain = tmp_path / "plain.jsonl.gz"
    plain.write_bytes(b'{"kind": "episode"}\n')
    with pytest.raises(RecordError, match=re.escape("plain.jsonl.gz: not a readable gzip")):
        read_record(plain)
    lines = gzip.decompress(data).splitlines()
    short = tmp_path / "short.jsonl.gz"
    short.write_bytes(gzip.compress(b"\n".join(lines[:-3]) + b"\n"))
    with pytest.raises(
        RecordError, match=re.escape("short.jsonl.gz: the header says 21 steps, the file holds 18")
    ):
        read_record(short)
    edited = tmp_path / "edited.jsonl.gz"
    edited.write_bytes(gzip.compress(b"\n".join([*lines[:5], b'{"kind": "step"}', *lines[6:]])))
    with pytest.raises(RecordError, match=re.escape("edited.jsonl.gz: line 6 is not a step")):
        read_record(edited)
    newer = tmp_path / "newer.jsonl.gz"
    header = json.loads(lines[0]) | {"format": 99}
    newer.write_bytes(gzip.compress(b"\n".join([json.dumps(header).encode(), *lines[1:]])))
    with pytest.raises(RecordError, match="record format 99"):
        read_record(newer)
    with pytest.raises(RecordError, match=re.escape("missing.jsonl.gz: no such record file")):
        read_record(tmp_path / "missing.jsonl.gz")


def test_episode_labels_are_file_name_safe():
    assert episode_label("jericho", 50, "mcts/k=2", 3) == "jericho__h50__mcts_k_2__s3"
