"""The contract every diagnostic family keeps, checked the same way for each of them.

Parametrised over ``DIAGNOSTIC_IDS``, the four benchmark families and the reference
family a newcomer copies: Gymnasium's ``check_env``, determinism per seed, probes and
anchors in range, the full-memory reader invariant, the shape of the true delta (the
command's change, then the events'), solvability by the family's solver (where it has
one), and the difficulty property of DIAGNOSTICS.md (the window baseline's drift grows
with the horizon while the oracle's stays 0).
"""

from __future__ import annotations

import random

import gymnasium
import numpy as np
import pytest
from family_checks import assert_deterministic, play, probe_chains, replay_with_full_memory
from gymnasium.utils.env_checker import check_env

from wmkit.agents.trackers import OracleTracker, WindowTracker
from wmkit.envs import DIAGNOSTIC_IDS
from wmkit.envs.diagnostic import DiagnosticEnv, FamilyCore, FamilyParams, truth
from wmkit.envs.diagnostic.truth import NONCE_NAMES, fact_slot
from wmkit.evals.metrics import drift
from wmkit.world.types import Fact, WorldState


def make(env_id: str, **kwargs) -> DiagnosticEnv:
    return gymnasium.make(env_id, **kwargs).unwrapped


def random_action(rng: random.Random, info: dict) -> str:
    return rng.choice(info["admissible_actions"])


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_the_family_is_built_from_the_shared_core(env_id):
    env = make(env_id)
    assert isinstance(env, DiagnosticEnv)
    assert isinstance(env.core, FamilyCore)
    assert isinstance(env.params, FamilyParams)
    with pytest.raises(TypeError, match="horizon"):
        make(env_id, horizon="long")
    with pytest.raises(ValueError, match="distractors"):
        make(env_id, distractors=51)


@pytest.mark.parametrize("ground_truth", [False, True])
@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_check_env(env_id, ground_truth):
    check_env(make(env_id, ground_truth=ground_truth), skip_render_check=True)


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_deterministic_per_seed(env_id):
    assert_deterministic(
        lambda seed: play(make(env_id, ground_truth=True), seed, 40, random_action)
    )


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_probes_ask_about_mentioned_entities_with_anchors_in_range(env_id):
    env = make(env_id, ground_truth=True, horizon=300, probe_rate=0.5)
    chains, kinds = probe_chains(env, 5, 300, lambda rng, info, env: random_action(rng, info))
    assert len(chains) > 20 and min(chains) >= 0
    assert set(kinds) <= {"drift", "breakage", "confusion", "stale", "abstention"}


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_a_full_memory_reader_holds_the_true_state(env_id):
    reader = make(env_id).reader

    def build(**kwargs):
        return make(env_id, **kwargs)

    _, probes = replay_with_full_memory(
        build, reader, random_action, range(3), {}, (20, 80, 160), exact_anchors=False
    )
    assert probes > 0


def _one_value_per_slot(facts: set[Fact]) -> bool:
    slots = [fact_slot(f) for f in facts]
    return len(slots) == len(set(slots))


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_the_delta_is_the_command_then_the_events_each_a_whole_change(env_id):
    """``wm.delta`` is the command's change, then the events' (issue 14).

    Each part is a true change of the state it starts from (removes facts it holds, adds
    facts it lacks), the state between them is a state (one value per slot: no slot's
    change is cut across the parts), the two applied in order give ``wm.state``, and
    after ``wait`` the action part is empty: every event is in the event part. Where the
    parts share no slot (most steps) they are disjoint and their union is the diff; a
    slot both touch is one the command set and an event set again the same step.
    """
    waits = events = 0
    for seed in range(4):
        env = make(env_id, ground_truth=True, horizon=150)
        rng = random.Random(seed)
        _, info = env.reset(seed=seed)
        terminated = truncated = False
        while not (terminated or truncated):
            admissible = info["admissible_actions"]
            wait = "wait" in admissible and rng.random() < 0.3
            action = "wait" if wait else rng.choice(admissible)
            before = set(info["wm.state"])
            _, _, terminated, truncated, info = env.step(action)
            after, delta = set(info["wm.state"]), info["wm.delta"]
            (act_add, act_rem), (ev_add, ev_rem) = (
                (set(delta[name]["added"]), set(delta[name]["removed"]))
                for name in ("action", "event")
            )
            context = (seed, action, delta)
            assert act_rem <= before and not act_add & before, context
            between = (before - act_rem) | act_add
            assert ev_rem <= between and not ev_add & between, context
            assert (between - ev_rem) | ev_add == after, context
            assert _one_value_per_slot(before) and _one_value_per_slot(between), context
            action_slots = {fact_slot(f) for f in act_add | act_rem}
            event_slots = {fact_slot(f) for f in ev_add | ev_rem}
            if not action_slots & event_slots:
                assert act_add | ev_add == after - before, context
                assert act_rem | ev_rem == before - after, context
            events += bool(event_slots)
            if action == "wait":
                waits += 1
                assert not act_add and not act_rem, context
    assert waits > 20 and events > 0, (waits, events)


@pytest.mark.parametrize("env_id", [i for i in DIAGNOSTIC_IDS if hasattr(make(i), "solver")])
def test_the_solver_wins_every_point(env_id):
    for seed in range(4):
        env = make(env_id, horizon=150)
        _, info = env.reset(seed=seed)
        truncated = terminated = False
        while not (terminated or truncated):
            _, _, terminated, truncated, info = env.step(env.solver(env.snapshot()))
        assert info["max_score"] > 0
        assert info["score"] == info["max_score"], seed


def _mean_drift(env_id: str, tracker, horizon: int, seeds: range) -> float:
    means = []
    for seed in seeds:
        env = make(env_id, ground_truth=True, horizon=horizon)
        rng = random.Random(seed)
        obs, info = env.reset(seed=seed)
        tracker.reset(obs, info)
        mentioned, series = set(), []
        while True:
            mentioned.update(info["wm.mentioned"])
            series.append(drift(tracker.state, WorldState(info["wm.state"]), mentioned))
            if len(series) > horizon:
                break
            action = random_action(rng, info)
            obs, _, terminated, _, info = env.step(action)
            tracker.update(action, obs, info)
            if terminated:
                break
        means.append(np.mean(series))
    return float(np.mean(means))


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_difficulty_bites_the_window_grows_with_the_horizon_and_the_oracle_stays_exact(env_id):
    reader = make(env_id).reader
    short = _mean_drift(env_id, WindowTracker(reader, k=10), 50, range(3))
    long = _mean_drift(env_id, WindowTracker(reader, k=10), 300, range(3))
    assert long > short > 0, (short, long)
    assert _mean_drift(env_id, OracleTracker(), 300, range(2)) == 0


def test_no_family_names_an_entity_with_an_abstention_word():
    # The abstention probes' invented names must be names no episode can have.
    import re
    from pathlib import Path

    import wmkit.envs as envs

    root = Path(envs.__file__).parent
    texts = [p.read_text().lower() for p in root.rglob("*.py") if p.name != "truth.py"]
    for word in NONCE_NAMES:
        assert not any(re.search(rf"\b{word}\b", t) for t in texts), word


@pytest.mark.parametrize("env_id", DIAGNOSTIC_IDS)
def test_abstention_probes_change_nothing_else(env_id, monkeypatch):
    # The same episode with the abstention probes left out is the same episode: they
    # draw from no generator of the family.
    def steps(env):
        rng, out, asked = random.Random(5), [], 0
        obs, info = env.reset(seed=5)
        for _ in range(60):
            probes = info["wm.probes"]
            asked += sum(p.kind == "abstention" for p in probes)
            out.append((obs, [p for p in probes if p.kind != "abstention"], info["wm.state"]))
            obs, _, terminated, truncated, info = env.step(random_action(rng, info))
            if terminated or truncated:
                break
        return out, asked

    with_them, asked = steps(make(env_id, ground_truth=True, probe_rate=1.0))
    monkeypatch.setattr(truth, "abstention_probes", lambda *args: [])
    without, none = steps(make(env_id, ground_truth=True, probe_rate=1.0))
    assert with_them == without and asked > 0 and none == 0
