"""The rules simulator: naive Vault rules on real Vault states, exceptions, RuleSet files."""

import pytest

from wmkit.agents.trackers import WindowTracker
from wmkit.envs.vault.naive_rules import NaiveVaultRules
from wmkit.evals.runner import make_env
from wmkit.knowledge.rules import Atom, Rule, RuleSet
from wmkit.search.rules_sim import RulesSimulator, RulesToken, apply_delta
from wmkit.world.types import Delta, Fact, WorldState


@pytest.fixture
def vault():
    env = make_env("wmkit/Vault-v0", 60, {"load": 2})
    observation, info = env.reset(seed=2)
    tracker = WindowTracker(env.unwrapped.reader, k=None)
    tracker.reset(observation, info)
    yield env, tracker, observation, info
    env.close()


def _step(env, tracker, action):
    observation, _, _, _, info = env.step(action)
    tracker.update(action, observation, info)
    return observation, info


def test_naive_rules_agree_with_vault_where_the_newcomer_is_right(vault):
    env, tracker, _, info = vault
    rules = NaiveVaultRules()
    # Every action the naive model proposes at the start is admissible there.
    proposed = rules.actions(tracker.state)
    assert set(proposed) <= set(info["admissible_actions"]) and "wait" in proposed
    checked = 0
    for action in ("open blue door", "open bronze door", "go east"):
        before = tracker.state
        predicted = rules.predict(before, action)
        _step(env, tracker, action)
        observed = Delta.between(before, tracker.state)
        assert set(predicted.added) <= set(observed.added), action
        assert set(predicted.removed) <= set(observed.removed), action
        checked += bool(predicted.added)
    assert checked == 3


def test_simulator_steps_rewards_and_learns_an_exception(vault):
    _, tracker, observation, info = vault
    sim = RulesSimulator(NaiveVaultRules())
    root = sim.root(observation, info, tracker.state)
    assert isinstance(root.token, RulesToken) and root.key == tracker.state
    t = sim.step(root.token, "open blue door")
    assert Fact("door:blue", "state", "open") in t.token.state
    assert t.reward == 1.0 and t.delta.added == (Fact("door:blue", "state", "open"),)
    # The token sums the predicted rewards; what a value function reads is the root's
    # real score and text (a rule model predicts neither).
    assert t.token.score == info["score"] + 1.0
    assert t.info["score"] == info["score"] and t.observation == observation
    assert "go south" in t.info["admissible_actions"]
    # Opening it again on this imagined path earns nothing more.
    again = sim.step(sim.step(t.token, "wait").token, "wait")
    assert again.reward == 0.0
    # Teach an exception: in this situation the door does not open.
    kept = sim.correct(tracker.state, "open blue door", Delta())
    assert kept == Delta()
    assert sim.step(root.token, "open blue door").delta == Delta()
    assert sim.hits == 1
    # The exception is keyed by the door's and the player's facts, not by the rest.
    elsewhere = apply_delta(tracker.state, Delta((Fact("note:x", "in", "room:y"),)))
    assert sim.signature(elsewhere, "open blue door") == sim.signature(
        tracker.state, "open blue door"
    )
    assert sim.predict(elsewhere, "open blue door") == Delta()
    sim.reset()
    assert sim.step(root.token, "open blue door").reward == 1.0


def test_wrong_key_on_the_real_vault_is_a_mismatch_the_exception_fixes():
    env = make_env("wmkit/Vault-v0", 60, {"load": 2})
    try:
        observation, info = env.reset(seed=2)
        tracker = WindowTracker(env.unwrapped.reader, k=None)
        tracker.reset(observation, info)
        rules = NaiveVaultRules()
        sim = RulesSimulator(rules)
        # Seed 2: the pewter key lies south of the start, behind the blue door (on a
        # spring: it shuts during the try of the key); it fits no door.
        walk = ("open blue door", "go south", "take pewter key", "go north")
        for action in walk:
            _step(env, tracker, action)
        assert tracker.state.value("key:pewter", "in") == "player"
        doors = [a for a in rules.actions(tracker.state) if a.startswith("unlock")]
        wrong = next(a for a in doors if "pewter key" in a)
        before = tracker.state
        assert sim.predict(before, wrong) != Delta()  # the newcomer thinks it fits
        _step(env, tracker, wrong)
        observed = Delta.between(before, tracker.state)
        door = "door:" + wrong.split()[1]
        assert tracker.state.value(door, "state") == "locked"  # the pewter key fits nothing
        # Only the command's part is learned: a spring door shutting meanwhile is not.
        assert sim.correct(before, wrong, observed) == Delta()
        assert sim.predict(before, wrong) == Delta()
    finally:
        env.close()


def test_a_ruleset_file_drives_the_simulator(tmp_path):
    rule = Rule(
        "command",
        "open {obj}",
        (("{obj}", "state", "closed"),),
        Atom("action", "set", "{obj}", "state", "open"),
        support=3,
        hits=3,
    )
    path = RuleSet([rule]).save(tmp_path / "rules.jsonl")
    sim = RulesSimulator.load(path)
    state = WorldState([Fact("box", "state", "closed"), Fact("player", "at", "room")])
    root = sim.root("", {"admissible_actions": ["open box", "wait"]}, state)
    t = sim.step(root.token, "open box")
    assert Fact("box", "state", "open") in t.token.state
    # Without proposals of its own, the rule set proposes the root's actions everywhere.
    assert t.info["admissible_actions"] == ["open box", "wait"]
    assert t.reward == 0.0 and not t.terminal


def test_a_predictor_is_required():
    with pytest.raises(TypeError, match="has no predict"):
        RulesSimulator(object())
