"""SelfCorrectingPolicy: a golden trace on a toy latch door, and on the real Vault.

Plain MCTS over the same rule model (the baseline) is the one MCTSPolicy.
"""

import json

import numpy as np
import pytest

from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.self_correcting import SelfCorrectingPolicy, compare
from wmkit.agents.trackers import WindowTracker
from wmkit.agents.types import Agent
from wmkit.envs.vault.naive_rules import NaiveVaultRules
from wmkit.evals.runner import make_env, run_episode
from wmkit.knowledge.scenes import parse_curiosity
from wmkit.search.rules_sim import RulesSimulator, RulesToken
from wmkit.search.search import ucb1
from wmkit.search.simulators import EnvSnapshotSimulator
from wmkit.search.types import Budget
from wmkit.search.values import HeuristicValue
from wmkit.world.types import Delta, Fact, WorldState

CLOSED = WorldState([Fact("door", "state", "closed"), Fact("door", "latch", "down")])


class NaiveDoor:
    """A newcomer's rules: the door opens when asked; the latch goes up when lifted."""

    def predict(self, state, action, observation=None):
        if action == "open door" and state.value("door", "state") == "closed":
            return Delta((Fact("door", "state", "open"),), (Fact("door", "state", "closed"),))
        if action == "lift latch" and state.value("door", "latch") == "down":
            return Delta((Fact("door", "latch", "up"),), (Fact("door", "latch", "down"),))
        return Delta()

    def actions(self, state):
        return ("lift latch", "open door", "wait")

    def reward(self, before, action, after, token):
        return float(after.value("door", "state") == "open")

    def terminal(self, state):
        return state.value("door", "state") == "open"


def real_step(state, action):
    """The hidden truth: the door only opens with its latch up."""
    facts = dict(((s, r), o) for s, r, o in state)
    if action == "lift latch":
        facts[("door", "latch")] = "up"
    elif action == "open door" and facts[("door", "latch")] == "up":
        facts[("door", "state")] = "open"
    return WorldState(Fact(s, r, o) for (s, r), o in facts.items())


def _settings():
    return dict(
        budget=Budget(30, max_depth=4),
        select_fn=ucb1(tie_break="first"),
        value_fn=HeuristicValue(0.0, 0.0),
        discount=0.9,
    )


def _policy(**kw):
    return SelfCorrectingPolicy(RulesSimulator(NaiveDoor()), **(_settings() | kw))


def _play(policy, steps):
    policy.reset(np.random.default_rng(0))
    state, actions, trees = CLOSED, [], []
    info = {"admissible_actions": ["lift latch", "open door", "wait"], "score": 0, "max_score": 1}
    for _ in range(steps):
        action = policy.act("", info, state)
        actions.append(action)
        trees.append(policy.last.tree)
        state = real_step(state, action)
        if state.value("door", "state") == "open":
            break
    policy.act("", info, state)  # verifies the last action
    return actions, trees


GOLDEN = [
    {
        "step": 0,
        "action": "open door",
        "predicted": {
            "added": [["door", "state", "open"]],
            "removed": [["door", "state", "closed"]],
        },
        "observed": {"added": [], "removed": []},
        "mismatch": True,
        "curiosity": "FLAG_CURIOSITY: yes\nCURIOSITY_REASON: 'open door' failed its "
        "prediction: expected -(door, state, closed) +(door, state, open)",
        "penalty": 1.0,
        "loop_penalty": 0.0,
        "correction": {"added": [], "removed": []},
        "backtrack": "sibling",
        "backtrack_depth": 1,
        "next_action": "lift latch",
    },
    {
        "step": 1,
        "action": "lift latch",
        "predicted": {"added": [["door", "latch", "up"]], "removed": [["door", "latch", "down"]]},
        "observed": {"added": [["door", "latch", "up"]], "removed": [["door", "latch", "down"]]},
        "mismatch": False,
        "curiosity": None,
        "penalty": 0.0,
        "loop_penalty": 0.0,
        "correction": None,
        "backtrack": None,
        "backtrack_depth": None,
        "next_action": None,
    },
    {
        "step": 2,
        "action": "open door",
        "predicted": {
            "added": [["door", "state", "open"]],
            "removed": [["door", "state", "closed"]],
        },
        "observed": {
            "added": [["door", "state", "open"]],
            "removed": [["door", "state", "closed"]],
        },
        "mismatch": False,
        "curiosity": None,
        "penalty": 0.0,
        "loop_penalty": 0.0,
        "correction": None,
        "backtrack": None,
        "backtrack_depth": None,
        "next_action": None,
    },
]


def test_golden_trace_penalty_curiosity_backtrack_to_sibling():
    policy = _policy()
    actions, trees = _play(policy, 6)
    assert actions == ["open door", "lift latch", "open door"]
    trace = policy.trace_json()
    assert trace == GOLDEN
    json.dumps(trace)  # JSON-serialisable as is
    # The flag text is the knowledge package's format, readable by its parser.
    flag = parse_curiosity(trace[0]["curiosity"])
    assert flag is not None and flag.reason.startswith("'open door' failed")
    assert [c.reason for c in policy.curiosities] == [flag.reason]
    # Backtracking went on with the very tree of step 0: the failed node is penalised.
    assert trees[1] is trees[0]
    tree = trees[1]
    failed = tree.child(tree.root, "open door")
    assert tree.penalty[failed] == 1.0
    # The exception is learned: the corrected model predicts no change for the same case.
    assert policy.simulator.predict(CLOSED, "open door") == Delta()
    assert policy.simulator.predict(real_step(CLOSED, "lift latch"), "open door") != Delta()


def test_loop_penalty_charges_imagined_returns_to_visited_states():
    up = WorldState([Fact("door", "state", "closed"), Fact("door", "latch", "up")])
    policy = _policy(loop_penalty=0.25)
    policy.reset(np.random.default_rng(0))
    info = {"admissible_actions": ["lift latch", "open door", "wait"]}
    policy.act("", info, up)  # the latch-up state is visited once
    policy.act("", info, CLOSED)
    tree = policy.last.tree
    # "lift latch" leads into the state the episode has been in: -0.25.
    assert tree.reward[tree.child(tree.root, "lift latch")] == pytest.approx(-0.25)
    # "wait" stays where it is: no loop, a no-op the search prunes.
    assert "wait" in tree.node(tree.root).pruned
    assert policy._visits[up] == policy._visits[CLOSED] == 1


def test_plain_mcts_over_the_same_rules_never_corrects():
    # The baseline is the one plain MCTS over the same rule model: what the
    # self-correcting policy fixed in one step, it repeats (the same actions the old
    # SelfCorrectingPolicy(correct=False) took here).
    simulator = RulesSimulator(NaiveDoor())
    policy = MCTSPolicy(simulator, **_settings())
    actions, _ = _play(policy, 4)
    assert actions == ["open door"] * 4  # it never learns the latch
    assert simulator.corrections == {}


def test_no_backtrack_searches_afresh():
    policy = _policy(max_backtrack=0)
    actions, trees = _play(policy, 6)
    assert actions == ["open door", "lift latch", "open door"]
    assert policy.trace[0].backtrack == "none"
    assert trees[1] is not trees[0]


def test_compare_missing_surprising_and_unknown():
    before = WorldState([Fact("a", "state", "x"), Fact("n", "in", "r")])
    after = WorldState([Fact("a", "state", "y"), Fact("n", "code", "1234"), Fact("n", "in", "r")])
    predicted = Delta((Fact("n", "code", "?"),))
    missing, surprising = compare(predicted, before, after)
    assert missing == [] and surprising == [Fact("a", "state", "x")]
    predicted = Delta((Fact("a", "state", "z"),), (Fact("a", "state", "x"),))
    assert compare(predicted, before, after) == ([Fact("a", "state", "z")], [])


def test_bad_settings_fail_clearly():
    sim = RulesSimulator(NaiveVaultRules())
    with pytest.raises(TypeError, match="predict"):
        RulesSimulator(object())
    with pytest.raises(FileNotFoundError):
        RulesSimulator.load("no/such/rules.jsonl")
    with pytest.raises(ValueError, match="loop_penalty"):
        SelfCorrectingPolicy(sim, loop_penalty=-1)
    with pytest.raises(ValueError, match="mismatch_penalty"):
        SelfCorrectingPolicy(sim, mismatch_penalty=float("nan"))
    with pytest.raises(ValueError, match="max_backtrack"):
        SelfCorrectingPolicy(sim, max_backtrack=-1)
    with pytest.raises(ValueError, match="simulations"):
        SelfCorrectingPolicy(sim, budget=0)


def _vault(policy, seed, steps=60):
    env = make_env("wmkit/Vault-v0", steps, {"load": 2})
    try:
        agent = Agent("x", WindowTracker(env.unwrapped.reader, k=None), policy)
        return run_episode(env, agent, seed)
    finally:
        env.close()


def test_on_vault_mismatches_are_corrected_and_the_vault_is_reached():
    # Seed 0 hides a key that fits one door only, and a note that opens the keypad.
    budget = Budget(60, max_depth=10)
    value = HeuristicValue(0.0, 0.1)
    policy = SelfCorrectingPolicy(RulesSimulator(NaiveVaultRules()), budget=budget, value_fn=value)
    row = _vault(policy, 0)
    assert row["score"] >= 10, policy.trace_json()
    corrected = [r for r in policy.trace if r.mismatch]
    assert corrected and all(r.curiosity and r.backtrack for r in corrected)
    assert isinstance(policy.trace[0].step, int)
    token = policy.last.tree.token[policy.last.tree.root]
    assert isinstance(token, RulesToken)


def test_env_snapshot_simulator_works_in_the_policy():
    env = make_env("wmkit/Parcel-v0", 20, {})
    try:
        # Predicted deltas are what the env's reader reads in the predicted text.
        simulator = EnvSnapshotSimulator(env, reader=env.unwrapped.reader)
        policy = SelfCorrectingPolicy(simulator, budget=8)
        agent = Agent("x", WindowTracker(env.unwrapped.reader, k=None), policy)
        row = run_episode(env, agent, 0)
    finally:
        env.close()
    assert row["steps"] == 20
    assert len(policy.trace) == 19  # the last action is verified at a next step that never comes
    assert all(r.correction is None for r in policy.trace)  # the live env learns nothing
