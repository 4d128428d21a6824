import numpy as np
import pytest

from wmkit.agents.policies import GreedyPolicy, RandomPolicy
from wmkit.world.types import WorldState

INFO = {"admissible_actions": ["reroute PX-1 to 5 oak rd", "track PX-1", "wait"]}


def test_greedy_serves_a_tracked_open_request():
    tracked = WorldState(
        [("parcel:px-1", "address", "1 elm st"), ("parcel:px-1", "requested_address", "5 oak rd")]
    )
    assert GreedyPolicy().act("", INFO, tracked) == "reroute PX-1 to 5 oak rd"


def test_greedy_waits_when_request_is_served_or_unknown():
    served = WorldState(
        [("parcel:px-1", "address", "5 oak rd"), ("parcel:px-1", "requested_address", "5 oak rd")]
    )
    assert GreedyPolicy().act("", INFO, served) == "wait"
    assert GreedyPolicy().act("", INFO, WorldState()) == "wait"


def test_random_policy_is_seeded_and_admissible():
    picks = []
    for _ in range(2):
        policy = RandomPolicy()
        policy.reset(np.random.default_rng(7))
        picks.append([policy.act("", INFO, WorldState()) for _ in range(20)])
    assert picks[0] == picks[1]
    assert set(picks[0]) <= set(INFO["admissible_actions"])
    assert len(set(picks[0])) > 1


def test_policies_need_admissible_actions():
    with pytest.raises(KeyError, match="admissible_actions"):
        RandomPolicy().act("", {}, WorldState())
