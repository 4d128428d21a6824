"""The quick valid-action generator of wmkit/Jericho-v0 (``admissible_actions="quick"``).

Its contract: a subset of the full generator's outcomes from the same state, at most
``max_tries`` commands tried a state, cached by state hash across ``restore()``.
"""

from __future__ import annotations

from pathlib import Path

import gymnasium
import pytest
from hydra import compose, initialize_config_module

pytest.importorskip("jericho")

from jericho import defines
from jericho.util import verb_usage_count

import wmkit.envs  # noqa: F401  (registers the ids)
from wmkit.envs.jericho import QUICK_TRIES, JerichoEnv
from wmkit.envs.jericho.actions import Outcome, ValidActions

pytestmark = [pytest.mark.jericho, pytest.mark.filterwarnings("ignore::UserWarning")]


def at_walkthrough_step(games_dir: Path, game: str, steps: int) -> JerichoEnv:
    """An env without a generator of its own, ``steps`` walkthrough commands in."""
    env = JerichoEnv(game=games_dir / game, admissible_actions=False)
    env.reset(options={"walkthrough_seed": True})
    for action in env.frotz.get_walkthrough()[:steps]:
        env.step(action)
    return env


def generator(env: JerichoEnv, **kwargs) -> ValidActions:
    return ValidActions(env.frotz, env.templates, env._state_hash, env.frotz.get_score, **kwargs)


def changes(outcome: Outcome, state_hash: str, score: int) -> bool:
    return outcome.state_hash != state_hash or outcome.score != score or outcome.over


def informs(action: str) -> bool:
    """Whether ``action`` is one of the kept informative commands (these games' spelling)."""
    return action in ("look", "inventory") or action.startswith("examine ")


# acorncourt: every pair of its 12 nouns makes ~5,000 candidates (~10 s a state);
# held-only pairs (pair_budget=0) keep the full reference to a few seconds. The quick
# generator shares the candidate set, so the subset check holds all the same.
@pytest.mark.parametrize(
    ("game", "steps", "kwargs"),
    [("905.z5", 1, {}), ("acorncourt.z5", 2, {"pair_budget": 0})],
)
def test_quick_outcomes_are_a_subset_of_the_full_ones_at_bounded_cost(
    games_dir, game, steps, kwargs
):
    env = at_walkthrough_step(games_dir, game, steps)
    state_hash, score = env._state_hash(), env.frotz.get_score()
    nouns, held = env._scope_nouns()
    full = generator(env, **kwargs)
    every = full.outcomes(state_hash, nouns, held)
    assert env._state_hash() == state_hash  # the search put the emulator back
    found = {}
    for tries in (8, 60, 150):  # 8: the scope test itself is cut short
        quick = generator(env, max_tries=tries, **kwargs)
        found[tries] = quick.outcomes(state_hash, nouns, held)
        assert quick.quick and quick.tried == tries < full.tried
        assert set(found[tries].values()) <= set(every.values())
        assert env._state_hash() == state_hash
    # More tries go further down the same order: they keep what fewer tries found.
    assert set(found[8].values()) <= set(found[60].values()) <= set(found[150].values())
    changing = {o for o in found[150].values() if changes(o, state_hash, score)}
    assert len(changing) >= 3
    # The outcome limit stops the search early, after that many world changes.
    few = generator(env, max_outcomes=2, max_tries=10_000, **kwargs)
    stopped = few.outcomes(state_hash, nouns, held)
    assert few.tried < full.tried and set(stopped.values()) <= set(every.values())
    acting = [o for a, o in stopped.items() if not informs(a)]
    assert len(acting) == len(set(acting)) == 2
    assert all(changes(o, state_hash, score) for o in acting)


def test_movement_is_tried_first(games_dir):
    # balances.z5 starts in a room with an exit west: with only enough tries for the
    # scope test and the movement templates, the only acting commands are movements.
    env = at_walkthrough_step(games_dir, "balances.z5", 0)
    state_hash = env._state_hash()
    nouns, held = env._scope_nouns()
    informative = generator(env)._informative
    scope = sum(len(nouns) if "OBJ" in t else 1 for t in informative)
    moves = [t for t in env.templates if t in defines.BASIC_ACTIONS and t != "take all"]
    quick = generator(env, max_tries=scope + len(moves))
    found = quick.outcomes(state_hash, nouns, held)
    acting = [a for a in found if not informs(a)]
    assert acting and set(acting) <= set(moves), acting
    assert quick.tried == scope + len(moves)
    # The whole order: movement, then up to one noun, then two, each by verb usage.
    order = generator(env)._acting
    parts = [0 if t in moves else 1 if t.count("OBJ") < 2 else 2 for t in order]
    assert parts == sorted(parts) and parts[-1] == 2
    for part in (1, 2):
        usage = [verb_usage_count(t) for t, p in zip(order, parts, strict=True) if p == part]
        assert usage == sorted(usage, reverse=True)


def test_quick_env_option_caps_tries_and_caches_across_restore(games_dir):
    env = gymnasium.make(
        "wmkit/Jericho-v0",
        game=str(games_dir / "905.z5"),
        admissible_actions="quick",
        quick_tries=80,
        quick_outcomes=6,
    ).unwrapped
    quick = env.valid_actions
    assert (quick.max_tries, quick.max_outcomes) == (80, 6)
    _, first = env.reset(seed=0)
    token, spent = env.snapshot(), quick.tried
    assert 0 < spent <= 80 and first["admissible_actions"]
    lists = [first["admissible_actions"]]
    for action in ("get up", "south", "north"):
        *_, info = env.step(action)
        lists.append(info["admissible_actions"])
    assert quick.tried <= 80 * len(lists)  # at most quick_tries per new state
    seen = quick.tried
    env.restore(token)  # back to a state already searched: the cache answers
    assert env._info()["admissible_actions"] == lists[0]
    assert quick.tried == seen
    # Every agent reads the same list from info: stepping from the restored state
    # gives what the first pass gave, still without a new search.
    assert env.step("get up")[-1]["admissible_actions"] == lists[1]
    assert quick.tried == seen


def test_the_jericho_env_config_is_quick_and_builds(games_dir):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("env/jericho")
    kwargs = dict(cfg.env.kwargs)
    assert kwargs["admissible_actions"] == "quick"
    kwargs["game"] = str(games_dir / kwargs["game"])
    env = gymnasium.make(cfg.env.id, **kwargs).unwrapped
    assert env.valid_actions.max_tries == kwargs["quick_tries"] == QUICK_TRIES
    _, info = env.reset(seed=0)
    assert info["admissible_actions"] and env.valid_actions.tried <= QUICK_TRIES


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"admissible_actions": "fast"}, TypeError, "True, False, 'quick' or 'candidates'"),
        ({"admissible_actions": "quick", "quick_tries": 0}, ValueError, "quick_tries must be >= 1"),
        ({"quick_outcomes": 2.5}, TypeError, "quick_outcomes must be an int"),
        ({"quick_outcomes": True}, TypeError, "quick_outcomes must be an int"),
    ],
)
def test_bad_quick_parameters(games_dir, kwargs, error, match):
    with pytest.raises(error, match=match):
        JerichoEnv(game=games_dir / "905.z5", **kwargs)


def test_bad_generator_limits(games_dir):
    env = JerichoEnv(game=games_dir / "905.z5", admissible_actions=False)
    with pytest.raises(ValueError, match="max_tries must be >= 1"):
        generator(env, max_tries=0)
    with pytest.raises(TypeError, match="max_outcomes must be an int or None"):
        generator(env, max_outcomes="8")
    assert not generator(env).quick


def test_informative_commands_can_be_left_out(games_dir):
    env = at_walkthrough_step(games_dir, "905.z5", 1)
    state_hash, score = env._state_hash(), env.frotz.get_score()
    nouns, held = env._scope_nouns()
    every = generator(env, max_tries=150).outcomes(state_hash, nouns, held)
    acting = generator(env, max_tries=150, informative=False).outcomes(state_hash, nouns, held)
    assert acting == {a: o for a, o in every.items() if not informs(a)}
    assert acting and all(changes(o, state_hash, score) for o in acting.values())
    # Where no command changes the world (here: only the scope test was tried), the
    # informative ones stay: the list is never empty for leaving them out.
    scope_only = generator(env, max_tries=5, informative=False).outcomes(state_hash, nouns, held)
    assert scope_only and all(informs(a) for a in scope_only)
    quick = JerichoEnv(
        game=games_dir / "905.z5", admissible_actions="quick", informative_actions=False
    )
    _, info = quick.reset(seed=0)
    assert info["admissible_actions"] and not [a for a in info["admissible_actions"] if informs(a)]
    with pytest.raises(TypeError, match="informative_actions must be a bool"):
        JerichoEnv(game=games_dir / "905.z5", informative_actions="no")
    with pytest.raises(TypeError, match="informative must be a bool"):
        generator(env, informative=None)
