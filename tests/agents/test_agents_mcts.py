"""MCTSPolicy, the one plain MCTS: over the live env's snapshots and over a rule model."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import WindowTracker
from wmkit.agents.types import Agent
from wmkit.envs.vault.naive_rules import NaiveVaultRules
from wmkit.evals.runner import make_env, run_episode
from wmkit.search import Budget, EnvSnapshotSimulator, Proposal, RulesSimulator, ucb1
from wmkit.search.rules_sim import RulesToken
from wmkit.search.values import HeuristicValue
from wmkit.world.types import WorldState

NOTHING = WorldState()


def test_mcts_earns_more_than_random_play_on_parcel():
    # Parcel pays +1 for a reroute to the requested address and -1 for a wrong one;
    # the exact simulator lets 40 simulations a step find the paying reroutes.
    for seed in range(3):
        returns = {}
        for name in ("mcts", "random"):
            env = gymnasium.make("wmkit/Parcel-v0", load=3, horizon=30)
            if name == "mcts":
                policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=40)
            else:
                policy = RandomPolicy()
            policy.reset(np.random.default_rng(seed))
            observation, info = env.reset(seed=seed)
            total = 0.0
            for _ in range(30):
                action = policy.act(observation, info, NOTHING)
                observation, reward, terminated, truncated, info = env.step(action)
                total += reward
                if terminated or truncated:
                    break
            returns[name] = total
        # Net positive: more paying reroutes than wrong ones, and better than chance.
        assert returns["mcts"] >= 3 and returns["mcts"] > returns["random"], returns


def test_policy_reuses_the_subtree_of_the_action_taken():
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40, ground_truth=True)
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=30)
    policy.reset(np.random.default_rng(0))
    observation, info = env.reset(seed=0)
    action = policy.act(observation, info, NOTHING)
    carried = policy.last.visits[action]
    observation, *_, info = env.step(action)
    policy.act(observation, info, NOTHING)
    tree = policy.last.tree
    assert tree.visits(tree.root) == carried + 30  # the old child's visits, plus this search
    assert tree.node(tree.root).token == env.unwrapped.snapshot()
    fresh = MCTSPolicy(EnvSnapshotSimulator(env), budget=30, reuse_tree=False)
    fresh.reset(np.random.default_rng(0))
    fresh.act(observation, info, NOTHING)
    assert fresh.last.tree.visits(fresh.last.tree.root) == 31


def test_policy_errors_are_clear():
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40)
    with pytest.raises(ValueError, match="simulations"):
        MCTSPolicy(EnvSnapshotSimulator(env), budget=0)
    with pytest.raises(TypeError, match="snapshot"):
        EnvSnapshotSimulator(object())
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=5, propose_fn=lambda t: Proposal(()))
    policy.reset(np.random.default_rng(0))
    observation, info = env.reset(seed=0)
    with pytest.raises(RuntimeError, match="no action"):
        policy.act(observation, info, NOTHING)
    assert env.unwrapped.snapshot().step == 0  # the env was put back all the same


def test_the_same_mcts_searches_a_rule_model_with_the_tracked_state():
    # Plain MCTS over the naive Vault rules (the mcts_rules baseline): the root is the
    # tracked state at the real step, the tree's tokens are the rule model's.
    simulator = RulesSimulator(NaiveVaultRules())
    policy = MCTSPolicy(
        simulator, budget=Budget(30, max_depth=10), value_fn=HeuristicValue(0.0, 0.1)
    )
    env = make_env("wmkit/Vault-v0", 20, {"load": 1})
    try:
        row = run_episode(env, Agent("x", WindowTracker(env.unwrapped.reader, k=None), policy), 0)
    finally:
        env.close()
    assert row["steps"] >= 1 and policy.step == row["steps"]
    root = policy.last.tree.token[policy.last.tree.root]
    assert isinstance(root, RulesToken) and root.step == policy.step - 1
    assert simulator.corrections == {}  # plain MCTS never teaches its model
    policy.reset(np.random.default_rng(0))
    assert policy.step == 0 and simulator.seen == set()  # a new episode forgets the old


def test_reset_forgets_the_kept_tree():
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40, ground_truth=True)
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=10, select_fn=ucb1(tie_break="first"))
    policy.reset(np.random.default_rng(0))
    observation, info = env.reset(seed=0)
    policy.act(observation, info, NOTHING)
    assert policy._tree is not None
    policy.reset(np.random.default_rng(0))
    assert policy._tree is None and policy.last is None
