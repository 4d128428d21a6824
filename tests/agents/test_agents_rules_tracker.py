"""The ``rules`` tracker: learned rules track the state, the reader's text overrides them."""

import gymnasium
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import RulesTracker, WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import make_env, run_episode
from wmkit.evals.suite import Artifacts, EvalConfig, build_agent
from wmkit.knowledge.recording import Recorder, record_random
from wmkit.knowledge.rules import Atom, Lexicon, Rule, RulesError, RuleSet
from wmkit.trainers.distill import CountingDistiller, transitions_from_rows
from wmkit.world.types import Fact

PARCEL = "wmkit/Parcel-v0"


@pytest.fixture(scope="module")
def parcel_rules(tmp_path_factory):
    """Rules distilled from six random Parcel episodes (seeds 0-5), saved to a file."""
    rows = []
    env = gymnasium.make(PARCEL, ground_truth=True, horizon=100)
    record_random(Recorder(env, lambda e: rows.extend(e.steps), env_name="parcel"), range(6))
    rules = CountingDistiller().fit(list(transitions_from_rows(rows)))
    return rules.save(tmp_path_factory.mktemp("rules") / "parcel" / "rules.jsonl")


def _drift(tracker, seed, horizon=100):
    env = make_env(PARCEL, horizon, {})
    return run_episode(env, Agent("t", tracker, RandomPolicy()), seed)["drift"]


def test_rules_alone_track_far_better_than_the_window(parcel_rules):
    reader = gymnasium.make(PARCEL).unwrapped.reader
    for seed in (100, 101):  # houses never seen in training
        rules = _drift(RulesTracker(parcel_rules), seed)
        window = _drift(WindowTracker(reader, 10), seed)
        assert rules["mean"] < 0.2 < window["mean"]
        assert rules["at_100"] < window["at_100"]


def test_with_the_reader_the_text_overrides_the_rules(parcel_rules):
    reader = gymnasium.make(PARCEL).unwrapped.reader
    drift = _drift(RulesTracker(parcel_rules, reader), 102)
    assert drift["mean"] <= 0.02


def test_a_claim_from_the_text_beats_a_wrong_prediction():
    # A wrong rule: the tracker would believe every tracked parcel is delivered; the
    # tracking reply states its status.
    wrong = Rule(
        "command", "track {parcel}", (), Atom("action", "set", "{parcel}", "status", "delivered")
    )
    lexicon = Lexicon(literals=frozenset({"delivered", "in_transit"}), styles={"parcel": ("name",)})
    rules = RuleSet([wrong], lexicon)
    env = gymnasium.make(PARCEL, ground_truth=True, horizon=30)
    observation, info = env.reset(seed=4)
    parcel = next(a.split()[1] for a in info["admissible_actions"] if a.startswith("track"))
    plain, read = RulesTracker(rules), RulesTracker(rules, env.unwrapped.reader)
    for tracker in (plain, read):
        tracker.reset(observation, info)
    observation, _, _, _, info = env.step(f"track {parcel}")
    for tracker in (plain, read):
        tracker.update(f"track {parcel}", observation, info)
    subject = f"parcel:{parcel}"
    assert plain.state.value(subject, "status") == "delivered"
    truth = {(f.subject, f.relation): f.object for f in map(Fact._make, info["wm.state"])}
    assert read.state.value(subject, "status") == truth[(subject, "status")] != "delivered"


def test_observation_off_predicts_from_the_command_alone(parcel_rules):
    env = gymnasium.make(PARCEL, ground_truth=True, horizon=30)
    observation, info = env.reset(seed=5)
    tracker = RulesTracker(parcel_rules, observation=False)
    tracker.reset(observation, info)
    assert len(tracker.state) == 0  # nothing is read from the text
    seeing = RulesTracker(parcel_rules)
    seeing.reset(observation, info)
    assert len(seeing.state) > 0


def test_bad_rules_paths_fail_clearly(tmp_path):
    with pytest.raises(FileNotFoundError):
        RulesTracker(tmp_path / "missing.jsonl")
    bad = tmp_path / "rules.jsonl"
    bad.write_text('{"not": "a header"}\n')
    with pytest.raises(RulesError, match="header"):
        RulesTracker(bad)


def test_the_rules_agent_config_builds_the_tracker_from_the_envs_rules(parcel_rules):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        config = compose("eval", overrides=["agents=[rules]"])
    spec = EvalConfig.model_validate(OmegaConf.to_container(config, resolve=True)).agents["rules"]
    env = gymnasium.make(PARCEL)
    # The env's distilled rules, as needs lists them (the main job trains them); no reader.
    trained = Artifacts(rules=str(parcel_rules))
    tracker = build_agent("rules", spec, env, artifacts=trained).tracker
    assert isinstance(tracker, RulesTracker) and len(tracker.rules) > 0
    assert tracker.observation is True and tracker.reader is None
    with_reader = spec.model_copy(
        update={"needs": spec.needs.model_copy(update={"tracker": ("rules", "reader")})}
    )
    tracker = build_agent("rules", with_reader, env, artifacts=trained).tracker
    assert tracker.reader is env.unwrapped.reader  # what the text states overrides the rules'
    with pytest.raises(ValueError, match="distilled rules and none were trained"):
        build_agent("rules", spec, env)
