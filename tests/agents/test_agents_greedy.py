"""LookaheadGreedyPolicy on a real env: the best one-step reward, the episode untouched."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.policies import LookaheadGreedyPolicy
from wmkit.search import EnvSnapshotSimulator, Proposal
from wmkit.world.types import WorldState


def one_step_rewards(env, actions):
    """Each action's reward from the live state, by the env's own snapshot/restore."""
    core = env.unwrapped
    token = core.snapshot()
    rewards = {}
    for action in actions:
        core.restore(token)
        rewards[action] = core.step(action)[1]
    core.restore(token)
    return rewards


def test_greedy_plays_a_best_rewarded_command_and_leaves_the_episode_as_it_was():
    env = gymnasium.make("wmkit/Parcel-v0", horizon=60, load=3)
    policy = LookaheadGreedyPolicy(EnvSnapshotSimulator(env))
    observation, info = env.reset(seed=5)
    policy.reset(np.random.default_rng(5))
    earned, best_total, chosen = 0.0, 0.0, set()
    for _ in range(60):
        rewards = one_step_rewards(env, info["admissible_actions"])
        before = env.unwrapped.snapshot()
        action = policy.act(observation, info, WorldState())
        assert env.unwrapped.snapshot() == before  # the search restored the live env
        assert rewards[action] == max(rewards.values())
        chosen.add(action)
        observation, reward, terminated, truncated, info = env.step(action)
        assert reward == rewards[action]
        earned += reward
        best_total += max(rewards.values())
        if terminated or truncated:
            break
    assert earned == best_total and earned > 0 and len(chosen) > 5


def test_greedy_with_nothing_proposed_says_so():
    env = gymnasium.make("wmkit/Parcel-v0", horizon=20)
    policy = LookaheadGreedyPolicy(EnvSnapshotSimulator(env), propose_fn=lambda t: Proposal(()))
    observation, info = env.reset(seed=0)
    with pytest.raises(RuntimeError, match="no action"):
        policy.act(observation, info, WorldState())


@pytest.mark.jericho
def test_greedy_avoids_no_ops_on_a_jericho_game(games_dir):
    env = gymnasium.make(
        "wmkit/Jericho-v0", game=str(games_dir / "905.z5"), admissible_actions=False
    )
    commands = ("look", "wait", "inventory", "get up")
    simulator = EnvSnapshotSimulator(env)
    policy = LookaheadGreedyPolicy(simulator, propose_fn=lambda t: Proposal(commands))
    observation, info = env.reset(seed=0)
    for seed in range(5):
        policy.reset(np.random.default_rng(seed))
        # 'look', 'wait' and 'inventory' leave the world as it is; 'get up' does not.
        assert policy.act(observation, info, WorldState()) == "get up"
    env.close()
