"""Tests for wmkit/TextWorld-v0 and the tw-make game cache.

One small game (tw-simple, seed 1: nine-command walkthrough, eight points, a locked door
and containers) is generated once per session into a temporary cache.
"""

from __future__ import annotations

import os
import random
import re
import shutil
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

textworld = pytest.importorskip("textworld")

import wmkit.envs  # noqa: E402, F401  (registers wmkit/TextWorld-v0)
from wmkit.envs import twgames  # noqa: E402
from wmkit.envs.textworld_env import (  # noqa: E402
    LOCATIONS,
    TextWorldEnv,
    TextWorldSnapshot,
    _facts,
)
from wmkit.world.types import Fact, WorldState  # noqa: E402

pytestmark = pytest.mark.textworld

OPTIONS = {"seed": 1}  # challenge "simple", rewards dense, goal detailed


@pytest.fixture(scope="session")
def tw_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("twcache")


@pytest.fixture(scope="session")
def tw_game(tw_cache) -> Path:
    return twgames.make_game("simple", OPTIONS, cache_dir=tw_cache)


def make(tw_game: Path, **kwargs) -> TextWorldEnv:
    return gymnasium.make("wmkit/TextWorld-v0", game=str(tw_game), **kwargs).unwrapped


def random_walk(env: TextWorldEnv, seed: int, steps: int, junk: float = 0.1):
    """Yield ``(action, step result)`` along a seeded walk of admissible and junk commands.

    Stops early at the end of the episode.
    """
    rng = random.Random(seed)
    _, info = env.reset(seed=seed)
    for _ in range(steps):
        if rng.random() < junk:
            action = rng.choice(["dance", "look", "take sky", "", "go up", "open the open"])
        else:
            action = rng.choice(info["admissible_actions"])
        result = env.step(action)
        yield action, result
        info = result[-1]
        if result[2] or result[3]:
            return


# --- the game cache ----------------------------------------------------------------------


def test_game_is_generated_with_its_metadata(tw_game, tw_cache):
    assert tw_game.is_file() and tw_game.with_suffix(".json").is_file()
    assert tw_game.parent.parent == tw_cache
    assert tw_game.parent.name.startswith("simple-")
    assert not [p for p in tw_cache.iterdir() if p.name.startswith(".tmp-")]


def test_a_second_request_does_not_regenerate(tw_game, tw_cache, monkeypatch):
    calls = []
    monkeypatch.setattr(twgames, "_run_tw_make", lambda *a: calls.append(a))
    mtime = tw_game.stat().st_mtime_ns
    # Same game, spelled differently: key case, dashes, explicit defaults, a False flag.
    same = {"Seed": 1, "--rewards": "dense", "goal": "detailed", "test": False}
    assert twgames.make_game("simple", same, cache_dir=tw_cache) == tw_game
    env = gymnasium.make(
        "wmkit/TextWorld-v0", challenge="simple", options=OPTIONS, cache_dir=tw_cache, horizon=5
    ).unwrapped
    assert env.game_file == tw_game
    assert calls == [] and tw_game.stat().st_mtime_ns == mtime


def test_normalise_fills_defaults_and_orders_options():
    spec = twgames.normalise("simple", {"Goal": "brief", "test": True, "open": False})
    assert spec == twgames.GameSpec(
        "simple", (("goal", "brief"), ("rewards", "dense"), ("seed", 0), ("test", True))
    )
    assert spec.argv() == [
        "tw-simple", "--goal", "brief", "--rewards", "dense", "--seed", "0", "--test"
    ]  # fmt: skip
    assert twgames.normalise("custom", {"world_size": 3}).argv() == [
        "custom", "--seed", "0", "--world-size", "3"
    ]  # fmt: skip
    keys = {
        twgames.normalise("coin_collector", {"level": 1}).key,
        twgames.normalise("coin_collector", {"level": 2}).key,
        twgames.normalise("coin_collector", {"level": 1, "seed": 1}).key,
        twgames.normalise("treasure_hunter", {"level": 1}).key,
    }
    assert len(keys) == 4
    assert (
        twgames.normalise("coin_collector").key
        == twgames.normalise("coin_collector", {"level": 1, "seed": 0}).key
    )


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("WMKIT_CACHE_DIR", str(tmp_path))
    assert twgames.default_cache_dir() == tmp_path / "textworld"
    monkeypatch.delenv("WMKIT_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert twgames.default_cache_dir() == tmp_path / "home" / ".cache" / "wmkit" / "textworld"


@pytest.mark.parametrize(
    ("challenge", "options", "error", "match"),
    [
        ("zork", {}, ValueError, "unknown challenge 'zork'"),
        ("simple", {"output": "/tmp/x"}, ValueError, "option 'output' is set by wmkit"),
        ("simple", {"level": 1.5}, TypeError, "option 'level' must be an int, str or bool"),
        ("simple", {"seed": -1}, ValueError, "option 'seed' must be an int"),
        ("simple", {"bad name": 1}, ValueError, "bad option name"),
        ("simple", [("seed", 1)], TypeError, "options must be a mapping"),
    ],
)
def test_bad_options_are_rejected_before_running_tw_make(
    challenge, options, error, match, tmp_path, monkeypatch
):
    monkeypatch.setattr(twgames, "_run_tw_make", lambda *a: pytest.fail("tw-make ran"))
    with pytest.raises(error, match=match):
        twgames.make_game(challenge, options, cache_dir=tmp_path)


@pytest.mark.parametrize(
    ("challenge", "options", "match"),
    [
        ("coin_collector", {"bogus": 3}, r"unrecognized arguments: --bogus 3"),
        ("coin_collector", {"level": 0}, r"level to be within \[1-300\]"),
        ("simple", {"rewards": "lots"}, r"invalid choice: 'lots'"),
    ],
)
def test_options_tw_make_rejects_give_a_clear_error(challenge, options, match, tmp_path):
    with pytest.raises(ValueError, match=match) as caught:
        twgames.make_game(challenge, options, cache_dir=tmp_path)
    assert f"challenge={challenge!r}" in str(caught.value)
    assert os.listdir(tmp_path) == []  # nothing cached, no temp folder left


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(cmdline.parent.name)
        except OSError:
            pass
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to look for processes")
def test_a_timed_out_generation_is_killed_and_leaves_nothing(tmp_path):
    options = {"level": 25, "seed": 11}  # 4-25 s, as loaded: killed while it generates
    with pytest.raises(twgames.GameGenerationError, match=r"timed out after 1 s.*'level': 25"):
        twgames.make_game("treasure_hunter", options, cache_dir=tmp_path, timeout=1.0)
    assert os.listdir(tmp_path) == []
    assert _processes_mentioning(str(tmp_path)) == []


# --- construction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"horizon": 0}, ValueError, "horizon must be >= 1, got 0"),
        ({"horizon": 2.5}, TypeError, "horizon must be an int"),
        ({"horizon": True}, TypeError, "horizon must be an int"),
        ({"probe_rate": 1.5}, ValueError, r"probe_rate must be in \[0, 1\]"),
        ({"ground_truth": "yes"}, TypeError, "ground_truth must be a bool"),
        ({"challenge": "simple"}, ValueError, "either game= or challenge="),
    ],
)
def test_bad_arguments(tw_game, kwargs, error, match):
    with pytest.raises(error, match=match):
        TextWorldEnv(game=tw_game, **kwargs)


def test_bad_game_files(tw_game, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TextWorldEnv(game=tmp_path / "missing.z8")
    with pytest.raises(ValueError, match="Glulx"):
        TextWorldEnv(game=tmp_path / "old.ulx")
    with pytest.raises(ValueError, match=r"expected a TextWorld \.z8"):
        TextWorldEnv(game=tmp_path / "zork1.z5")
    lone = tmp_path / "lone.z8"
    shutil.copy(tw_game, lone)
    with pytest.raises(FileNotFoundError, match="wmkit/Jericho-v0"):
        TextWorldEnv(game=lone)


def test_make_rejects_unknown_kwarg(tw_game):
    with pytest.raises(TypeError, match="bogus"):
        gymnasium.make("wmkit/TextWorld-v0", game=str(tw_game), bogus=1)


# --- Gymnasium API -----------------------------------------------------------------------


@pytest.mark.parametrize("ground_truth", [False, True])
def test_check_env(tw_game, ground_truth):
    check_env(make(tw_game, ground_truth=ground_truth))


def test_the_runner_way_of_making_it(tw_game, tw_cache):
    env = gymnasium.make(
        "wmkit/TextWorld-v0",
        horizon=7,
        ground_truth=True,
        challenge="simple",
        options=OPTIONS,
        cache_dir=str(tw_cache),
    )
    _, info = env.reset(seed=0)
    assert env.unwrapped.game_file == tw_game and env.unwrapped.horizon == 7
    assert "wm.state" in info


def test_walkthrough_rewards_sum_to_the_final_score_and_win_terminates(tw_game):
    env = make(tw_game, ground_truth=True)
    obs, info = env.reset(seed=3)
    walkthrough = env.walkthrough
    assert walkthrough == textworld.Game.load(str(tw_game.with_suffix(".json"))).walkthrough
    assert len(walkthrough) >= 5 and info["score"] == 0 and info["max_score"] > 1
    total, score = 0.0, 0
    for i, command in enumerate(walkthrough):
        assert command in info["admissible_actions"]
        obs, reward, terminated, truncated, info = env.step(command)
        assert reward == info["score"] - score  # per step, not cumulative
        score = info["score"]
        total += reward
        assert terminated is (i == len(walkthrough) - 1) and truncated is False
    assert total == info["score"] == info["max_score"]
    assert "The End" in obs
    with pytest.raises(RuntimeError, match="game is over"):
        env.step("look")
    _, info = env.reset(seed=3)  # a new episode after a won one starts from the beginning
    assert info["score"] == 0 and env.step(walkthrough[0])[1] == 1.0


def test_truncation_at_horizon(tw_game):
    env = make(tw_game, horizon=3)
    env.reset(seed=0)
    for t in range(1, 4):
        _, reward, terminated, truncated, info = env.step("look")
        assert (reward, terminated, truncated, info["moves"]) == (0.0, False, t == 3, t)


def test_misuse_is_a_clear_error(tw_game):
    env = make(tw_game)
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")
    with pytest.raises(RuntimeError, match="reset"):
        env.snapshot()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="action must be a str"):
        env.step(3)


def test_no_ground_truth_keys_without_ground_truth(tw_game):
    env = make(tw_game)
    infos = [step[-1][-1] for step in random_walk(env, 1, 25)]
    for info in infos:
        assert set(info) == {"admissible_actions", "score", "max_score", "moves"}


def trajectory(tw_game: Path, seed: int, steps: int, **kwargs) -> list:
    env = make(tw_game, ground_truth=True, **kwargs)
    out = [env.reset(seed=seed)]
    out += [result for _, result in random_walk(env, seed, steps)]
    return out


def test_same_seed_same_episode(tw_game):
    a, b = trajectory(tw_game, 5, 40, probe_rate=1.0), trajectory(tw_game, 5, 40, probe_rate=1.0)
    assert data_equivalence(a, b, exact=True)
    # The game is fixed by its options; the episode seed moves the probe schedule.
    env_a, env_b = make(tw_game, ground_truth=True), make(tw_game, ground_truth=True)
    assert env_a.reset(seed=1)[0] == env_b.reset(seed=2)[0]
    probes_a = [env_a.step("look")[-1]["wm.probes"] for _ in range(30)]
    probes_b = [env_b.step("look")[-1]["wm.probes"] for _ in range(30)]
    assert probes_a != probes_b


def test_observations_are_clean_and_fit_the_space(tw_game, capfd):
    env = make(tw_game)
    first, _ = env.reset(seed=0)
    steps = [result for _, result in random_walk(env, 2, 60, junk=0.3)]
    steps.append(env.step("take \\help\tthe\nkey ~ \x00 é"))
    for obs in [first] + [s[0] for s in steps]:
        assert obs in env.observation_space
        assert not re.search(r"\[[^\]]*succeeded\]|<score>|</moves>|-= \w+ =-\d+/\d+$", obs)
        assert not obs.endswith(">") and obs == obs.strip()
    # Backslashes are not passed on: the emulator would print escape help on stdout.
    assert "DUMB-FROTZ" not in "".join(capfd.readouterr())


# --- ground truth --------------------------------------------------------------------------


def test_fact_mapping_on_the_walkthrough(tw_game):
    env = make(tw_game, ground_truth=True)
    _, info = env.reset(seed=0)
    state = set(info["wm.state"])
    assert Fact("player", "at", "bedroom") in state
    assert Fact("antique trunk", "state", "closed") in state
    assert Fact("old key", "in", "antique trunk") in state
    assert Fact("wooden door", "state", "locked") in state
    assert {Fact("wooden door", "link", "bedroom"), Fact("wooden door", "link", "kitchen")} <= state
    assert Fact("milk", "on", "couch") in state and Fact("milk", "edible", "true") in state

    _, _, _, _, info = env.step("open antique trunk")
    assert info["wm.delta"]["action"] == {
        "added": [Fact("antique trunk", "state", "open")],
        "removed": [Fact("antique trunk", "state", "closed")],
    }
    _, _, _, _, info = env.step("take old key from antique trunk")
    assert Fact("old key", "in", "inventory") in info["wm.delta"]["action"]["added"]
    for command in env.walkthrough[2:]:
        _, _, _, _, info = env.step(command)
    assert Fact("milk", "on", "stove") in info["wm.state"]
    assert Fact("player", "at", "kitchen") in info["wm.state"]


def test_fact_mapping_by_arity():
    def prop(name, *args):
        return textworld.logic.Proposition(name, [textworld.logic.Variable(a, "t") for a in args])

    ids = {"P": "player", "I": "inventory", "c_0": "chest", "r_0": "hall", "r_1": "den"}
    ids["d_0"] = "door"
    assert _facts(prop("open", "c_0"), ids) == (Fact("chest", "state", "open"),)
    assert _facts(prop("sliced", "c_0"), ids) == (Fact("chest", "cut", "sliced"),)
    assert _facts(prop("fried", "c_0"), ids) == (Fact("chest", "cooking", "fried"),)
    assert _facts(prop("edible", "c_0"), ids) == (Fact("chest", "edible", "true"),)
    assert _facts(prop("in", "c_0", "I"), ids) == (Fact("chest", "in", "inventory"),)
    assert _facts(prop("at", "P", "r_0"), ids) == (Fact("player", "at", "hall"),)
    assert _facts(prop("link", "r_0", "d_0", "r_1"), ids) == (
        Fact("door", "link", "hall"),
        Fact("door", "link", "den"),
    )


def test_info_shapes_and_the_delta_explains_every_change(tw_game):
    env = make(tw_game, ground_truth=True, horizon=200)
    _, info = env.reset(seed=4)
    state = set(info["wm.state"])
    steps = 0
    for _, (_, _, _, _, info) in random_walk(env, 4, 120, junk=0.2):
        steps += 1
        assert info["admissible_actions"] == sorted(set(info["admissible_actions"]))
        assert info["wm.state"] == sorted(info["wm.state"])
        assert all(isinstance(f, Fact) for f in info["wm.state"])
        assert info["wm.mentioned"] == sorted(info["wm.mentioned"])
        assert re.fullmatch(r"[0-9a-f]{16}", info["wm.state_hash"])
        delta = info["wm.delta"]
        assert delta["event"] == {"added": [], "removed": []}  # no daemons in TextWorld
        after = set(info["wm.state"])
        assert (state - set(delta["action"]["removed"])) | set(delta["action"]["added"]) == after
        truth = WorldState(after)
        for subject in truth.subjects():  # at most one place each (rooms, doors: none)
            assert len([o for r in LOCATIONS for o in truth.objects(subject, r)]) <= 1
        state = after
    assert steps > 50


@pytest.mark.filterwarnings("ignore::jericho.UnsupportedGameWarning")
def test_matches_textworlds_own_state_tracking(tw_game):
    """Our tracking against TextWorld's wrappers: same facts, commands, score and end."""
    env = make(tw_game, ground_truth=True)
    requested = textworld.EnvInfos(facts=True, admissible_commands=True, score=True, won=True)
    reference = textworld.start(str(tw_game), requested)
    try:
        for seed in range(3):
            rng = random.Random(seed)
            _, info = env.reset(seed=seed)
            ref = reference.reset()
            for _ in range(60):
                assert info["admissible_actions"] == ref["admissible_commands"]
                assert env.snapshot().turn.node.props == set(ref["_facts"])
                assert info["score"] == ref["score"]
                action = rng.choice(info["admissible_actions"] + ["dance", "look"])
                _, _, terminated, _, info = env.step(action)
                ref, _, done = reference.step(action)
                assert terminated == done
                if terminated:
                    break
    finally:
        reference.close()


def test_probes_are_true_and_anchored_where_the_object_was_seen(tw_game):
    env = make(tw_game, ground_truth=True, probe_rate=1.0, horizon=200)
    _, info = env.reset(seed=6)
    mentioned_at = {0: set(info["wm.mentioned"])}
    seen: set[str] = set(info["wm.mentioned"])
    kinds, chains = set(), []
    rng = random.Random(6)
    for _ in range(150):
        _, _, terminated, _, info = env.step(rng.choice(info["admissible_actions"]))
        step = info["moves"]
        mentioned_at[step] = set(info["wm.mentioned"])
        seen |= mentioned_at[step]
        truth = WorldState(info["wm.state"])
        assert info["wm.probes"]  # rate 1 and objects seen since reset
        for probe in info["wm.probes"]:
            assert probe.subject in seen and probe.relation in LOCATIONS
            assert truth.value(probe.subject, probe.relation) == probe.answer
            assert probe.subject in mentioned_at[probe.anchor_step]
            assert 0 <= probe.anchor_step <= step
            kinds.add(probe.kind)
            chains.append(step - probe.anchor_step)
        if terminated:
            break
    assert kinds == {"drift", "breakage"}
    assert min(chains) == 0 and max(chains) >= 10


def test_no_probes_when_the_rate_is_zero(tw_game):
    env = make(tw_game, ground_truth=True, probe_rate=0.0)
    for _, result in random_walk(env, 3, 30):
        assert result[-1]["wm.probes"] == []


def test_player_is_mentioned_when_the_room_is_named(tw_game):
    env = make(tw_game, ground_truth=True)
    _, info = env.reset(seed=0)
    assert {"player", "bedroom", "antique trunk"} <= set(info["wm.mentioned"])
    info = env.step("examine king-size bed")[-1]
    assert "player" not in info["wm.mentioned"]


def test_state_hash_follows_the_state_not_the_step(tw_game):
    env = make(tw_game, ground_truth=True)
    _, info = env.reset(seed=0)
    start = info["wm.state_hash"]
    assert env.step("look")[-1]["wm.state_hash"] == start
    assert env.step("examine antique trunk")[-1]["wm.state_hash"] == start
    opened = env.step("open antique trunk")[-1]["wm.state_hash"]
    assert opened != start
    assert make(tw_game, ground_truth=True).reset(seed=9)[1]["wm.state_hash"] == start


# --- snapshot / restore --------------------------------------------------------------------


def test_snapshot_restore_round_trips(tw_game):
    env = make(tw_game, ground_truth=True, probe_rate=1.0)
    _, info = env.reset(seed=8)
    for command in env.walkthrough[:3]:
        _, _, _, _, info = env.step(command)
    token = env.snapshot()
    assert data_equivalence(env._info(), info, exact=True)
    first = [env.step(command) for command in env.walkthrough[3:]]
    assert first[-1][2] is True  # won
    env.restore(token)
    assert data_equivalence(env._info(), info, exact=True)  # facts, score, probes
    again = [env.step(command) for command in env.walkthrough[3:]]
    assert data_equivalence(first, again, exact=True)

    # Into another env on the same tw_game, even a fresh one.
    other = make(tw_game, ground_truth=True, probe_rate=1.0)
    other.restore(token)
    assert data_equivalence([other.step(c) for c in env.walkthrough[3:]], first, exact=True)


def test_restore_branches_match_fresh_play(tw_game):
    env = make(tw_game, ground_truth=True)
    env.reset(seed=0)
    env.step("open antique trunk")
    token = env.snapshot()
    for action in env._info()["admissible_actions"]:
        env.restore(token)
        branch = env.step(action)
        fresh = make(tw_game, ground_truth=True)
        fresh.reset(seed=0)
        fresh.step("open antique trunk")
        assert data_equivalence(branch, fresh.step(action), exact=True), action


def test_restore_rejects_foreign_tokens(tw_game):
    env = make(tw_game)
    env.reset(seed=0)
    token = env.snapshot()
    with pytest.raises(TypeError, match="TextWorldSnapshot"):
        env.restore("not a token")
    with pytest.raises(ValueError, match="token is from game /elsewhere"):
        env.restore(TextWorldSnapshot("/elsewhere/game.z8", token.frotz, token.turn))


# --- commands --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["quit", "restart", "UNDO", "save", "restore", "tw-trace-actions", "look. undo", "q"],
)
def test_meta_commands_are_answered_and_not_sent(tw_game, command):
    env = make(tw_game, ground_truth=True)
    _, before = env.reset(seed=0)
    obs, reward, terminated, truncated, after = env.step(command)
    assert "is not available" in obs
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert after["wm.state"] == before["wm.state"] and after["moves"] == 1
    for step in env.walkthrough:  # the game still runs as before
        *_, terminated, _, info = env.step(step)
    assert terminated and info["score"] == info["max_score"]


def test_several_commands_on_one_line_score_and_track_each(tw_game):
    env = make(tw_game, ground_truth=True)
    env.reset(seed=0)
    _, reward, _, _, info = env.step("open antique trunk. take old key from antique trunk")
    assert reward == 2.0 and info["score"] == 2
    assert Fact("old key", "in", "inventory") in info["wm.state"]
