"""The policy/value network: trained on logged search, used by the search as its prior.

Real recordings (MCTS on SmartHome, its visits logged by ``RecordingPolicy``), real
training, the numpy single-state forward pass against torch's, the one forward pass per
expansion, and exact resume with the policy head.
"""

import io

import gymnasium
import numpy as np
import pytest
import torch
from rich.console import Console

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.agents.recording import record_policy, search_stats
from wmkit.knowledge.recording import (
    Recorder,
    TrajectoryWriter,
    load_trajectories,
    record_random,
)
from wmkit.search.search import puct, search
from wmkit.search.simulators import EnvSnapshotSimulator, admissible_proposal
from wmkit.search.types import Budget, Proposal, Transition
from wmkit.search.value_net import (
    SingleStateForward,
    load_value_net,
    segment_log_softmax,
    value_input,
)
from wmkit.search.values import HeuristicValue, ValueNetValue
from wmkit.trainers.value import (
    LAST_FILE,
    TrainValueConfig,
    load_examples,
    policy_target,
    train_value,
    visit_shares,
)
from wmkit.world.types import WorldState

SMALL = {"features": {"buckets": 4096}, "model": {"dim": 16, "hidden": 32, "policy": True}}


def _quiet():
    return Console(file=io.StringIO())


@pytest.fixture(scope="module")
def smarthome_search(tmp_path_factory):
    """24 SmartHome episodes played by MCTS (UCB1, 24 simulations), visits recorded."""
    data = tmp_path_factory.mktemp("data") / "smarthome"
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=60)
    with TrajectoryWriter(data) as writer:
        recorder = Recorder(env, writer.write, env_name="smarthome", agent="mcts")
        policy = MCTSPolicy(EnvSnapshotSimulator(recorder), budget=Budget(24, max_depth=6))
        scores = record_policy(recorder, policy, range(24))
    assert len(scores) == 24 and max(scores) > 0
    return data


@pytest.fixture(scope="module")
def trained(smarthome_search, tmp_path_factory):
    out = tmp_path_factory.mktemp("net")
    config = TrainValueConfig(
        data_dirs=[str(smarthome_search)], progress=False, epochs=12, threads=1,
        visit_temperature=0.0, **SMALL,
    )  # fmt: skip
    return train_value(config, out, console=_quiet())


def test_the_search_behind_each_step_is_recorded_as_its_policy_target(smarthome_search):
    rows = load_trajectories(smarthome_search).to_list()
    searched = [r for r in rows if r["search"] is not None]
    # Every state an action was chosen from holds its search; the last state of an
    # episode chose nothing.
    assert len(searched) == sum(1 for r in rows if r["action"] is not None)
    row = searched[0]
    assert row["search"]["simulations"] == 24
    visits = {c["action"]: c["visits"] for c in row["search"]["children"]}
    assert set(visits) <= set(row["admissible_actions"]) and sum(visits.values()) >= 24
    commands, counts = policy_target(row["admissible_actions"], row["search"])
    assert commands[: len(row["admissible_actions"])] == tuple(row["admissible_actions"])
    assert sum(counts) == sum(visits.values())
    assert policy_target(row["admissible_actions"], None) is None
    examples = load_examples([smarthome_search], 0.95)
    assert sum(p is not None for p in examples.policies) == len(searched)


def test_visit_shares_sharpen_with_the_temperature():
    assert visit_shares([1, 3, 0], 1.0) == pytest.approx([0.25, 0.75, 0.0])
    assert visit_shares([1, 3, 3], 0.0) == pytest.approx([0.0, 0.5, 0.5])
    assert visit_shares([1, 2], 0.5) == pytest.approx([0.2, 0.8])


def test_search_stats_match_the_search_output():
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=20)
    observation, info = env.reset(seed=0)
    sim = EnvSnapshotSimulator(env)
    with sim.preserve():
        out = search(
            sim.root(observation, info), simulator=sim, propose_fn=admissible_proposal,
            value_fn=lambda t: 0.0, select_fn=puct(), budget=Budget(12),
            rng=np.random.default_rng(0),
        )  # fmt: skip
    stats = search_stats(out)
    assert stats.simulations == 12 and stats.nodes == len(out.tree)
    assert {c.action: c.visits for c in stats.children} == out.visits
    assert stats.max_depth >= 1 and stats.root_value == out.root_value


def test_segment_log_softmax_is_a_softmax_per_state():
    logits = torch.tensor([1.0, 2.0, 3.0, -1.0, 5.0])
    owner = torch.tensor([0, 0, 0, 1, 1])
    got = segment_log_softmax(logits, owner, 2)
    want = torch.cat([torch.log_softmax(logits[:3], 0), torch.log_softmax(logits[3:], 0)])
    assert torch.allclose(got, want, atol=1e-6)


def test_the_policy_learns_the_searchs_choice_and_the_value_its_returns(trained):
    policy = trained["eval"]["policy"]
    # Against the search's most visited command (temperature 0), held-out episodes.
    assert policy["cross_entropy"] < 0.9 * policy["uniform_cross_entropy"]
    assert policy["top_agrees"] > 0.5
    assert trained["eval"]["skill"] > 0 and trained["eval"]["spearman"] > 0.3
    history = trained["history"]
    assert history[-1]["losses/train_policy_ce"] < history[0]["losses/train_policy_ce"]
    assert all(h["eval/policy_ce"] is not None for h in history)


def test_the_numpy_forward_pass_is_torchs(trained):
    _, model, featurizer = load_value_net(trained["value_path"])
    single = SingleStateForward(model, featurizer)
    small = SingleStateForward(model, featurizer, max_commands=2)  # its table starts over
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=30)
    observation, info = env.reset(seed=40)
    for _ in range(5):
        x = value_input(observation, info)
        commands = tuple(info["admissible_actions"])
        z, logits = single(x, commands)
        with torch.inference_mode():
            tz, tl = model.evaluate(*featurizer.batch([x]), featurizer.candidates([commands]))
        assert z == pytest.approx(float(tz[0]), abs=1e-5)
        assert logits == pytest.approx(tl.numpy(), abs=1e-5)
        assert small(x, commands)[1] == pytest.approx(tl.numpy(), abs=1e-5)
        observation, *_, info = env.step(commands[-1])


def test_one_forward_pass_values_a_new_state_and_ranks_its_commands(trained):
    vn = ValueNetValue(trained["value_path"])
    assert vn.policy
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=30)
    observation, info = env.reset(seed=41)
    t = Transition(None, observation, 0.0, False, info)
    proposal = vn.propose(t)
    value = vn(t)  # the same state: no second pass
    assert vn.passes == 1 and vn.calls == 2
    assert proposal.actions == tuple(info["admissible_actions"])
    assert sum(proposal.priors) == pytest.approx(1.0) and len(set(proposal.priors)) > 1
    # The batched torch path gives the same numbers as the single-state path.
    ((batched_value, batched_proposal),) = vn.evaluate_batch([t])
    assert batched_value == pytest.approx(value, abs=1e-5)
    assert batched_proposal.priors == pytest.approx(proposal.priors, abs=1e-5)
    # A base prior can be mixed in.
    def flat(t):
        actions = tuple(t.info["admissible_actions"])
        return Proposal(actions, (1.0,) * len(actions))

    mixed = ValueNetValue(trained["value_path"], prior_mix=1.0, proposer=flat)
    n = len(proposal.actions)
    assert mixed.propose(t).priors == pytest.approx([1 / n] * n)


def test_mcts_takes_the_networks_prior_and_passes_once_per_new_state(trained):
    vn = ValueNetValue(trained["value_path"], cache_size=0)
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=30)
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=Budget(10), value_fn=vn, select_fn=puct())
    assert policy.propose_fn == vn.propose
    observation, info = env.reset(seed=42)
    policy.reset(np.random.default_rng(0))
    policy.act(observation, info, WorldState())
    tree = policy.last.tree
    new_states = len({tree.slot[n] for n in tree.nodes() if not tree.terminal[n]})
    assert vn.passes == new_states  # the root and each expansion: one pass each
    assert tree.node(tree.root).actions == tuple(info["admissible_actions"])
    assert len(set(tree.slot_priors[tree.slot[tree.root]])) > 1  # the network's, not uniform


def test_an_untrained_policy_head_is_not_used(tmp_path):
    data = tmp_path / "smarthome"
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=20)
    with TrajectoryWriter(data) as writer:
        record_random(Recorder(env, writer.write, env_name="smarthome"), range(4))
    config = TrainValueConfig(data_dirs=[str(data)], progress=False, epochs=1, **SMALL)
    report = train_value(config, tmp_path / "net", console=_quiet())
    assert "policy" in report["eval"] and report["eval"]["policy"] == {}
    vn = ValueNetValue(report["value_path"])
    assert vn.spec.data.policy_examples == 0 and not vn.policy
    observation, info = env.reset(seed=0)
    t = Transition(None, observation, 0.0, False, info)
    assert vn.propose(t) == admissible_proposal(t)  # the base proposer, untouched


def test_resume_with_the_policy_head_ends_with_the_same_weights(smarthome_search, tmp_path):
    def config(epochs, **kw):
        return TrainValueConfig(
            data_dirs=[str(smarthome_search)], progress=False, epochs=epochs, threads=1,
            visit_temperature=0.0, **SMALL, **kw,
        )  # fmt: skip

    whole = train_value(config(3), tmp_path / "whole", console=_quiet())
    train_value(config(2), tmp_path / "part", console=_quiet())
    assert (tmp_path / "part" / LAST_FILE).exists()
    resumed = train_value(config(3), tmp_path / "part", console=_quiet())
    a = torch.load(whole["value_path"], weights_only=True)["model"]
    b = torch.load(resumed["value_path"], weights_only=True)["model"]
    assert set(a) == set(b) and "command.weight" in a
    assert all(torch.equal(a[k], b[k]) for k in a)
    def losses(history):
        return [{k: v for k, v in h.items() if not k.startswith("charts/")} for h in history]

    assert losses(resumed["history"]) == losses(whole["history"])


def test_a_heuristic_adds_its_novelty_to_the_networks_value(trained):
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=30)
    observation, info = env.reset(seed=43)
    t = Transition(None, observation, 0.0, False, info)
    prior_only = ValueNetValue(trained["value_path"], scale=0.0, heuristic=HeuristicValue())
    assert prior_only(t) == pytest.approx(1.0)  # an unvisited state's novelty, no network
    prior_only.visit(t)
    assert prior_only(t) == pytest.approx(2**-0.5)
    prior_only.reset()  # a new episode: the visits are forgotten
    assert prior_only(t) == pytest.approx(1.0)
    plain = ValueNetValue(trained["value_path"])
    both = ValueNetValue(trained["value_path"], heuristic=HeuristicValue())
    assert both(t) == pytest.approx(plain(t) + 1.0)
    assert both.propose(t) == plain.propose(t)
