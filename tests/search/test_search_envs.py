"""The env_snapshot simulator (searched by MCTSPolicy) on real envs, and the value functions.

The central check: searching from the live env leaves the real episode exactly as it
would have been without any search (same observations, rewards, flags and info, ground
truth included) for a fixed sequence of actions.
"""

from __future__ import annotations

import json

import gymnasium
import numpy as np
import pytest

import wmkit.envs  # noqa: F401  (registers the wmkit/ ids)
from wmkit.agents.mcts import MCTSPolicy
from wmkit.search import (
    Budget,
    EnvSnapshotSimulator,
    HeuristicValue,
    HybridValue,
    Proposal,
    TokenKey,
    Transition,
    admissible_proposal,
    read_delta,
    search,
    truth_delta,
    truth_hash,
    ucb1,
)
from wmkit.search.values import visit_value
from wmkit.world.types import Delta, Fact, WorldState

NOTHING = WorldState()


def play(env, seed: int, actions: list[str] | None, steps: int, policy=None):
    """Run ``steps`` steps; return the records and the actions taken.

    Without ``actions`` the i-th step takes admissible action ``i % len``. With a
    policy, it is asked to act before each step (its answer is ignored).
    """
    records, taken = [], []
    observation, info = env.reset(seed=seed)
    records.append((observation, info))
    if policy is not None:
        policy.reset(np.random.default_rng(seed))
    for i in range(steps):
        if policy is not None:
            assert isinstance(policy.act(observation, info, NOTHING), str)
        if actions is None:
            admissible = info["admissible_actions"]
            action = admissible[(7 * i + 3) % len(admissible)]
        else:
            action = actions[i]
        taken.append(action)
        observation, reward, terminated, truncated, info = env.step(action)
        records.append((observation, reward, terminated, truncated, info))
        if terminated or truncated:
            break
    return records, taken


@pytest.mark.parametrize(
    ("env_id", "params"),
    [("wmkit/Vault-v0", {"load": 2}), ("wmkit/Parcel-v0", {"load": 3})],
)
def test_search_leaves_the_diagnostic_episode_unchanged(env_id, params):
    env = gymnasium.make(env_id, horizon=60, ground_truth=True, **params)
    expected, actions = play(env, 5, None, 12)
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=40)
    got, _ = play(env, 5, actions, len(actions), policy)
    assert got == expected
    assert policy.simulator.steps >= 12 * 30  # it did search (transpositions save steps)
    assert policy.last is not None and policy.last.simulations == 40


def test_simulator_keys_states_by_the_env_not_by_ground_truth():
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40, ground_truth=True)
    observation, info = env.reset(seed=0)
    sim = EnvSnapshotSimulator(env)
    root = sim.root(observation, info)
    # The key is the env's own state (its immutable snapshot), not wm.state_hash.
    assert isinstance(root.key, TokenKey) and root.key.token is root.token
    assert not any(k.startswith("wm.") for k in root.info)
    with sim.preserve():
        t = sim.step(root.token, info["admissible_actions"][0])
        again = sim.step(root.token, info["admissible_actions"][0])
        other = sim.step(root.token, "wait")
    assert isinstance(t, Transition) and t.key == again.key and t.key != other.key
    assert t.token is not again.token  # two snapshots of one state: one key
    assert not any(k.startswith("wm.") for k in t.info) and "admissible_actions" in t.info
    assert t.delta is None  # no reader, no predicted delta
    assert env.unwrapped.snapshot() == root.token  # preserve() put the env back
    # A reader gives the delta: what it reads in the predicted observation.
    reader = env.unwrapped.reader
    read = EnvSnapshotSimulator(env, reader=reader)
    with read.preserve():
        t = read.step(root.token, info["admissible_actions"][0])
    assert t.delta == read_delta(reader, t.observation) and t.delta.added
    assert all(isinstance(f.subject, str) for f in t.delta.added) and t.delta.removed == ()
    # Ground truth only on request (oracle configurations): the env's wm.* keys.
    oracle = EnvSnapshotSimulator(env, key_fn=truth_hash, delta_fn=truth_delta)
    with oracle.preserve():
        t = oracle.step(root.token, info["admissible_actions"][0])
        env.unwrapped.restore(root.token)
        *_, full = env.unwrapped.step(info["admissible_actions"][0])
    assert t.key == full["wm.state_hash"] and t.delta == truth_delta(full)
    assert oracle.root(observation, info).key == info["wm.state_hash"]
    # The same env without ground truth keys its states all the same.
    blind = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40)
    observation, info = blind.reset(seed=0)
    sim = EnvSnapshotSimulator(blind)
    t = sim.step(sim.root(observation, info).token, "look")
    assert t.key == TokenKey(blind.unwrapped.snapshot()) and t.delta is None
    with pytest.raises(TypeError, match="snapshot"):
        EnvSnapshotSimulator(object())
    with pytest.raises(RuntimeError, match="boom"), sim.preserve():
        blind.unwrapped.step("look")
        raise RuntimeError("boom")
    assert blind.unwrapped.snapshot().step == 1  # restored despite the error


def test_unhashable_states_get_no_key():
    # SmartHome's state holds unhashable parts and the shell has no state_hash():
    # no transpositions rather than a key read from ground truth.
    env = gymnasium.make("wmkit/SmartHome-v0", horizon=20, ground_truth=True)
    observation, info = env.reset(seed=0)
    sim = EnvSnapshotSimulator(env)
    assert sim.root(observation, info).key is None
    root = sim.root(observation, info)
    with sim.preserve():
        assert sim.step(root.token, info["admissible_actions"][0]).key is None


def test_truth_delta_is_the_net_change():
    x, y, z = Fact("door", "state", "open"), Fact("key", "in", "player"), Fact("bar", "at", "x")
    raw = {
        "action": {"added": [x, y], "removed": [z]},
        "event": {"added": [z], "removed": [x]},  # the event undid both of the action's
    }
    assert truth_delta({"wm.delta": raw}) == Delta((y,), ())
    assert truth_delta({}) is None


@pytest.mark.jericho
def test_search_leaves_a_jericho_episode_unchanged(games_dir):
    # Valid-action generation is off (it costs seconds a state on 905): the search
    # proposes a fixed set of commands, as a cached proposer would.
    env = gymnasium.make(
        "wmkit/Jericho-v0",
        game=str(games_dir / "905.z5"),
        horizon=50,
        ground_truth=True,
        admissible_actions=False,
    )
    walkthrough = env.unwrapped.frotz.get_walkthrough()[:6]
    commands = ("look", "get up", "north", "south", "take wallet", "open dresser", "wait")
    expected, _ = play(env, 3, walkthrough, len(walkthrough))
    simulator = EnvSnapshotSimulator(env)
    policy = MCTSPolicy(simulator, budget=12, propose_fn=lambda t: Proposal(commands))
    got, _ = play(env, 3, walkthrough, len(walkthrough), policy)
    assert got == expected
    assert policy.simulator.steps > 6 * 6
    # Jericho's world hash leaves the move counter out: 'look' and 'wait' lead back to
    # the root's state, no-ops the search prunes there (stepped once, no node made).
    tree = policy.last.tree
    assert {"look", "wait"} <= set(tree.node(tree.root).pruned)
    assert tree.find(["look"]) is None and "look" not in policy.last.visits


@pytest.mark.jericho
def test_search_over_quick_valid_actions_on_jericho(games_dir):
    # admissible_actions="quick": the proposals are the env's bounded valid-action
    # lists, at most quick_tries commands tried per new state, each state searched
    # once (cached by state hash across the simulator's restores).
    def make():
        return gymnasium.make(
            "wmkit/Jericho-v0",
            game=str(games_dir / "905.z5"),
            horizon=50,
            ground_truth=True,
            admissible_actions="quick",
            quick_tries=60,
        )

    env = make()
    walkthrough = env.unwrapped.frotz.get_walkthrough()[:4]
    expected, _ = play(make(), 3, walkthrough, len(walkthrough))
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=8)
    got, _ = play(env, 3, walkthrough, len(walkthrough), policy)
    assert got == expected  # the searches changed nothing, the quick lists included
    quick = env.unwrapped.valid_actions
    tree = policy.last.tree
    states = {tree.slot[n] for n in tree.nodes()}
    assert 0 < quick.tried <= 60 * len(quick._cache)  # the bound, per state searched
    assert len(states) >= 3 and len(quick._cache) < policy.simulator.steps  # cache hits
    assert tree.node(tree.root).actions == tuple(got[-2][-1]["admissible_actions"])


@pytest.mark.jericho
def test_jericho_state_hash_is_the_truth_hash_without_ground_truth(games_dir):
    # The key the simulator uses without ground truth is the one wm.state_hash gives.
    game = str(games_dir / "905.z5")
    truth = gymnasium.make(
        "wmkit/Jericho-v0", game=game, ground_truth=True, admissible_actions=False
    )
    blind = gymnasium.make("wmkit/Jericho-v0", game=game, admissible_actions=False)
    with pytest.raises(RuntimeError, match="reset"):
        blind.unwrapped.state_hash()
    _, info = truth.reset(seed=0)
    blind.reset(seed=0)
    hashes = {info["wm.state_hash"]}
    for action in ("get up", "look", "north"):
        *_, info = truth.step(action)
        blind.step(action)
        assert blind.unwrapped.state_hash() == info["wm.state_hash"]
        hashes.add(info["wm.state_hash"])
    assert len(hashes) >= 2  # it does tell states apart
    sim = EnvSnapshotSimulator(blind)
    assert sim.state_key() == blind.unwrapped.state_hash()


@pytest.mark.jericho
def test_lazy_snapshots_give_the_same_tree_and_states(games_dir):
    # Lazy tokens (snapshot on first use, by replaying one step) against eager ones:
    # the same search, the same tree, and a restored lazy token is the exact state.
    env = gymnasium.make(
        "wmkit/Jericho-v0", game=str(games_dir / "905.z5"), admissible_actions=False
    )
    observation, info = env.reset(seed=1)
    commands = Proposal(("look", "get up", "north", "south", "take wallet", "inventory"))
    trees, sims = [], []
    for lazy in (True, False):
        sim = EnvSnapshotSimulator(env, lazy=lazy)
        with sim.preserve():
            out = search(
                sim.root(observation, info),
                simulator=sim,
                propose_fn=lambda t: commands,
                value_fn=HeuristicValue(),
                select_fn=ucb1(),
                budget=40,
                rng=np.random.default_rng(0),
            )
        trees.append(out.tree)
        sims.append(sim)
    lazy_tree, eager_tree = trees
    assert sims[0].lazy is True and sims[0].replays > 0 and sims[1].replays == 0
    # Jericho's state_hash() keys states (no ground truth needed): both trees share
    # transpositions alike, and lazy costs exactly its replays on top.
    assert sims[0].steps == sims[1].steps + sims[0].replays
    nodes = {tuple(lazy_tree.path(n)): n for n in lazy_tree.nodes()}
    assert nodes.keys() == {tuple(eager_tree.path(n)) for n in eager_tree.nodes()}
    for path, n in nodes.items():
        m = eager_tree.find(list(path))
        assert lazy_tree.observation[n] == eager_tree.observation[m]
        assert lazy_tree.reward[n] == eager_tree.reward[m]
    deep = max(nodes, key=len)
    states = []
    for tree, sim in zip(trees, sims, strict=True):
        with sim.preserve():
            sim.restore(tree.token[tree.find(list(deep))])
            states.append(env.unwrapped.step("inventory")[0])
    assert states[0] == states[1]


def test_tokens_are_env_snapshots_unless_lazy():
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40)
    observation, info = env.reset(seed=0)
    sim = EnvSnapshotSimulator(env)
    t = sim.step(sim.root(observation, info).token, "look")
    assert t.token == env.unwrapped.snapshot()  # the env is where the step left it
    lazy = EnvSnapshotSimulator(env, lazy=True)
    root = lazy.root(observation, info)
    t = lazy.step(root.token, "look")
    assert t.token != env.unwrapped.snapshot() and lazy.replays == 0
    lazy.step(t.token, "wait")  # stepping from it snapshots it, by replaying "look"
    assert lazy.replays == 1 and lazy.steps == 3
    lazy.restore(t.token)
    assert env.unwrapped.snapshot().step == root.token.step + 1


@pytest.mark.slow
@pytest.mark.textworld
def test_search_leaves_a_textworld_episode_unchanged(tmp_path):
    pytest.importorskip("textworld")
    from wmkit.envs import twgames

    game = twgames.make_game("simple", {"seed": 1}, cache_dir=tmp_path)
    env = gymnasium.make("wmkit/TextWorld-v0", game=str(game), horizon=30, ground_truth=True)
    expected, actions = play(env, 2, None, 8)
    policy = MCTSPolicy(EnvSnapshotSimulator(env), budget=20)
    got, _ = play(env, 2, actions, len(actions), policy)
    assert got == expected
    # The key without ground truth is the env's state_hash(), which wm.state_hash is.
    assert env.unwrapped.state_hash() == got[-1][-1]["wm.state_hash"]
    tree = policy.last.tree
    assert tree.slot_key[tree.slot[tree.root]] == got[-2][-1]["wm.state_hash"]


def test_heuristic_value_scores_and_novelty():
    value = HeuristicValue(score_weight=2.0, novelty_weight=1.0)
    scored = Transition(None, "hall", 0.0, False, {"score": 3, "max_score": 6})
    assert value(scored) == pytest.approx(2.0 * 0.5 + 1.0)
    # Looking at a state (a search's evaluation) is no visit: it stays as novel.
    assert value(scored) == pytest.approx(2.0 * 0.5 + 1.0)
    visit_value(value, scored)
    assert value(scored) == pytest.approx(1.0 + 1.0 / np.sqrt(2))  # visited once
    # A state counts as its text: under another key it is the same, and other text is new.
    assert value(scored._replace(key="k")) == pytest.approx(1.0 + 1.0 / np.sqrt(2))
    assert value(scored._replace(observation="other text")) == pytest.approx(2.0)
    unbounded = Transition(None, "yard", 0.0, False, {"score": 3, "max_score": 0})
    assert value(unbounded) == pytest.approx(2.0 * 3 + 1.0)
    value.reset()
    assert value(scored) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="finite"):
        HeuristicValue(novelty_weight=float("nan"))


def test_hybrid_value_spends_the_costly_call_only_on_promising_states():
    def cheap(t):
        return t.reward

    def costly(t):
        return 100.0 + t.reward

    value = HybridValue(cheap, costly, threshold=0.5)
    low, high = (Transition(None, "", r, False, {}) for r in (0.1, 0.9))
    assert value(low) == 0.1 and value(high) == 100.9
    assert (value.cheap_calls, value.costly_calls) == (2, 1)


def test_search_over_a_live_env_with_a_cached_proposer():
    # The search itself, without the policy: a fixed proposal, an exact simulator.
    env = gymnasium.make("wmkit/Vault-v0", load=1, horizon=40, ground_truth=True)
    observation, info = env.reset(seed=0)
    sim = EnvSnapshotSimulator(env)
    proposal = admissible_proposal(sim.root(observation, info))
    with sim.preserve():
        out = search(
            sim.root(observation, info),
            simulator=sim,
            propose_fn=lambda t: proposal,
            value_fn=HeuristicValue(),
            select_fn=ucb1(),
            budget=Budget(50, max_nodes=20),
            rng=np.random.default_rng(0),
        )
    assert out.action in proposal.actions and len(out.tree) <= 20
    assert sum(out.visits.values()) <= 50


@pytest.mark.jericho
def test_games_experiment_runs_on_quick_actions_and_resumes(
    games_dir, tmp_path, monkeypatch, capsys
):
    # scripts/search_experiments.py games, tiny: every agent on the env's quick list,
    # rows with their budget, and a second run over the same file plays nothing again.
    from wmkit.scripts.search_experiments import main

    monkeypatch.setenv("WMKIT_GAMES_DIR", str(games_dir))
    out = tmp_path / "rows.jsonl"
    argv = ["games", "--games", "905.z5", "--steps", "2", "--sims", "2", "--seeds", "2",
            "--quick-tries", "50", "--out", str(out)]  # fmt: skip
    main(argv)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["agent"], r["seed"]) for r in rows) == sorted(
        (a, s) for a in ("mcts", "random", "greedy") for s in (0, 1)
    )
    for row in rows:
        assert row["actions"] == "quick" and row["quick_tries"] == 50 and row["steps"] == 2
        assert 0 < row["tries"] <= 50 * (1 + 2 * (1 + 2))  # states: root + sims + steps
    table = capsys.readouterr().out
    assert "| jericho:905.z5 | mcts |" in table and "quick (50 tries" in table
    main(argv)
    assert len(out.read_text().splitlines()) == len(rows)  # all six reused
    assert capsys.readouterr().out.count("| jericho:905.z5 |") == 3
    main([*argv[:-2], "--quick-tries", "40", "--agents", "greedy", "--out", str(out)])
    assert len(out.read_text().splitlines()) == len(rows) + 2  # another budget: played
    main([*argv[:-2], "--no-informative", "--agents", "random", "--out", str(out)])
    last = [json.loads(line) for line in out.read_text().splitlines()][len(rows) + 2 :]
    assert [(r["agent"], r["informative"]) for r in last] == [("random", False)] * 2
