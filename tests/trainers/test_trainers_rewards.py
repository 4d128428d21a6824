"""The reward model: counted from logged transitions with the rules, saved with them, and
what the rules simulator's search does with it."""

import math

import gymnasium
import numpy as np
import pytest

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.self_correcting import SelfCorrectingPolicy
from wmkit.knowledge.recording import Recorder, record_random
from wmkit.knowledge.rewards import RewardEstimate, RewardGroup, RewardModel
from wmkit.knowledge.rules import Atom, Lexicon, Rule, RulesError, RuleSet
from wmkit.search.rules_sim import RulesSimulator
from wmkit.search.types import Budget
from wmkit.search.values import HeuristicValue
from wmkit.trainers.distill import CountingDistiller, split_episodes, transitions_from_rows
from wmkit.trainers.rewards import count_rewards, reward_error
from wmkit.world.types import Fact, WorldState


@pytest.fixture(scope="module")
def parcel_split():
    """Random Parcel play (seeds 0-7, 100 steps): rules and rewards from 6, 2 held out."""
    rows = []
    env = gymnasium.make("wmkit/Parcel-v0", ground_truth=True, horizon=100)
    record_random(Recorder(env, lambda e: rows.extend(e.steps), env_name="parcel"), range(8))
    train, test = split_episodes(list(transitions_from_rows(rows)), 0.25)
    return CountingDistiller().fit(train), test


def test_rewards_come_with_the_transitions(parcel_split):
    _, test = parcel_split
    rewards = {t.reward for t in test if t.action}
    assert rewards == {-1.0, 0.0, 1.0}  # random reroutes: right ones and wrong ones
    assert all(t.reward == 0.0 for t in test if t.action is None)


def test_a_penalised_reroute_is_predicted_negative_a_served_one_positive(parcel_split):
    rules, test = parcel_split
    reroutes = [t for t in test if t.action and t.action.startswith("reroute")]
    wrong = [t for t in reroutes if t.reward < 0]
    right = [t for t in reroutes if t.reward > 0]
    assert wrong and right
    assert all(rules.estimate_reward(t.before, t.action).mean < 0 for t in wrong)
    assert all(rules.estimate_reward(t.before, t.action).mean > 0 for t in right)
    # What decides: the requested address is the one rerouted to.
    found = rules.estimate_reward(right[0].before, right[0].action)
    assert found.conditions == (("{parcel}", "requested_address", "{v}"),)
    assert found.support >= 3 and found.sd == 0.0
    # Held out, it beats the neutral guess by far and gets the sign of every reward.
    scores = reward_error(rules, test)
    assert scores["mse"] < 0.2 * scores["mse_zero"] and scores["sign"] >= 0.95


def test_an_unseen_command_is_neutral(parcel_split):
    rules, test = parcel_split
    state = test[5].before
    assert rules.estimate_reward(state, "teleport px-0001 home") == RewardEstimate()
    assert rules.reward(state, "teleport px-0001 home") == 0.0
    assert rules.estimate_reward(state, None) == RewardEstimate()
    # A command always worth 0 is worth a sure 0, not a gamble.
    wait = rules.estimate_reward(state, "wait")
    assert wait.mean == 0.0 and wait.support >= 10 and wait.cautious == 0.0


def test_the_reward_model_is_saved_with_the_rules_and_read_back(parcel_split, tmp_path):
    rules, test = parcel_split
    path = rules.save(tmp_path / "rules.jsonl")
    back = RuleSet.load(path)
    assert list(back.rewards) == list(rules.rewards) and len(back) == len(rules)
    for t in test[:200]:
        if t.action:
            assert back.estimate_reward(t.before, t.action) == rules.estimate_reward(
                t.before, t.action
            )
    # Reward rows that are no decision list, or no reward group, are refused by line.
    header = path.read_text().splitlines()[0]
    rest = '{"source": "reward", "template": "wait", "conditions": [], "support": 3, '
    rest += '"mean": 0.0, "sd": 0.0}'
    after = rest.replace('"conditions": []', '"conditions": [["player", "at", "x"]]')
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([header, rest, after]) + "\n")
    with pytest.raises(RulesError, match="after its rest"):
        RuleSet.load(bad)
    bad.write_text("\n".join([header, rest.replace('"support": 3', '"support": 0')]) + "\n")
    with pytest.raises(RulesError, match=r"bad\.jsonl:2"):
        RuleSet.load(bad)


def _readings(n_good=20, n_bad=30, n_noise=3):
    """``reroute {parcel} to {v}``: +1 to the requested address, -1 elsewhere; some
    wrong reroutes of one parcel that happens to be delayed (a coincidence)."""
    good = [("{parcel}", "requested_address", "{v}"), ("{parcel}", "status", "in_transit")]
    bad = [("{parcel}", "status", "in_transit")]
    noise = [("{parcel}", "status", "delayed")]
    t = "reroute {parcel} to {v}"
    return (
        [(t, good, 1.0)] * n_good + [(t, bad, -1.0)] * n_bad + [(t, noise, -1.0)] * n_noise
        + [("wait", [], 0.0)] * 10
    )  # fmt: skip


def test_counting_makes_a_decision_list_with_the_rest_last():
    model = count_rewards(_readings())
    groups = model.templates["reroute {parcel} to {v}"]
    assert [g.conditions for g in groups] == [
        (("{parcel}", "requested_address", "{v}"),),
        (),
    ]
    assert groups[0] == RewardGroup(
        "reroute {parcel} to {v}", (("{parcel}", "requested_address", "{v}"),), 20, 1.0, 0.0
    )
    # The rest is what the first group left: every other reroute, all penalised.
    assert groups[1].support == 33 and groups[1].mean == -1.0
    assert model.estimate("reroute {parcel} to {v}", {("{parcel}", "status", "delayed")}).mean == -1
    assert model.estimate("wait", ()) == RewardEstimate(0.0, 10, (), 0.0)
    assert model.estimate("fly", ()) == RewardEstimate()
    # Without conditions a template is its mean, the +1s watering the penalty down.
    flat = count_rewards(_readings(), max_conditions=0)
    assert flat.estimate("reroute {parcel} to {v}", ()).mean == pytest.approx(-13 / 53)


def test_a_cut_that_is_not_significant_makes_no_group():
    # Two +1 among many mixed rewards under one precondition: chance, not a rule.
    t = "book {hotel}"
    readings = [(t, [("{hotel}", "area", "beach")], 1.0)] * 3
    readings += [(t, [], r) for r in (1.0, -1.0) * 10]
    model = count_rewards(readings)
    assert [g.conditions for g in model.templates[t]] == [()]
    assert model.templates[t][0].support == 23


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="min_support"):
        count_rewards([], min_support=0)
    with pytest.raises(ValueError, match="max_conditions"):
        count_rewards([], max_conditions=4)
    with pytest.raises(ValueError, match="finite"):
        count_rewards([("wait", [], math.nan)])
    with pytest.raises(ValueError, match="no conditions"):
        RewardModel([RewardGroup("wait", (("player", "at", "x"),), 3, 0.0, 0.0)])
    with pytest.raises(ValueError, match="after its rest"):
        RewardModel(
            [
                RewardGroup("wait", (), 3, 0.0, 0.0),
                RewardGroup("wait", (("player", "at", "x"),), 3, 0.0, 0.0),
            ]
        )
    with pytest.raises(ValueError, match="support"):
        RewardModel([RewardGroup("wait", (), 0, 0.0, 0.0)])


# --- the search, given a reward model -----------------------------------------------------

LIT = WorldState([Fact("lamp", "colour", "off")])
ACTIONS = ["press red", "press green", "wait"]


def _lamp_rules(rewards: dict[str, float] | None) -> RuleSet:
    """Both buttons change the lamp; ``rewards``: what each command was logged earning."""
    rules = [
        Rule("command", f"press {c}", (), Atom("action", "set", "lamp", "colour", c), True, 9, 9)
        for c in ("red", "green")
    ]
    groups = [RewardGroup(a, (), 12, r, 0.0) for a, r in (rewards or {}).items()]
    lexicon = Lexicon(literals=frozenset({"off", "red", "green"}))
    return RuleSet(rules, lexicon, rewards=RewardModel(groups))


def _choices(policy, steps=8, seeds=range(6)):
    chosen = []
    for seed in seeds:
        policy.reset(np.random.default_rng(seed))
        for _ in range(steps):
            chosen.append(policy.act("The lamp is off.", {"admissible_actions": ACTIONS}, LIT))
    return chosen


def _policies(rules):
    settings = dict(budget=Budget(8, max_depth=3), value_fn=HeuristicValue(novelty_weight=0.1))
    yield SelfCorrectingPolicy(RulesSimulator(rules), **settings)
    yield MCTSPolicy(RulesSimulator(rules), **settings)


def test_the_search_avoids_a_command_the_model_knows_is_penalised():
    known = _lamp_rules({"press red": -1.0, "press green": 0.0, "wait": 0.0})
    for policy in _policies(known):
        assert "press red" not in _choices(policy), type(policy).__name__
    # Without a reward model pressing red looks as good as anything: it is chosen.
    for policy in _policies(_lamp_rules(None)):
        assert "press red" in _choices(policy), type(policy).__name__


def test_where_every_change_costs_the_search_stays_put():
    costly = _lamp_rules({"press red": -1.0, "press green": -0.5, "wait": 0.0})
    for policy in _policies(costly):
        assert set(_choices(policy, steps=4)) == {"wait"}, type(policy).__name__
    # A command worth +1 is taken.
    for policy in _policies(_lamp_rules({"press green": 1.0, "wait": 0.0})):
        assert _choices(policy, steps=1)[0] == "press green", type(policy).__name__
