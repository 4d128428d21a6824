"""The player's room and the candidates mode of wmkit/Jericho-v0 (issue 17, item 4).

The room: Inform games keep rooms at the top of the object tree, Infocom's story files
put every room in one container object; none of the free games has that layout, so it
is checked on a synthetic tree. The candidates mode (``admissible_actions="candidates"``)
tries no command: templates x nouns in scope, sorted, with a counted prior aligned in
``info["action_priors"]``, cached by state hash.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

pytest.importorskip("jericho")

from jericho import defines

import wmkit.envs  # noqa: F401  (registers the ids)
from wmkit.envs.jericho import JerichoEnv, player_room
from wmkit.envs.jericho.actions import (
    INFO_VERBS,
    Candidates,
    Outcome,
    get_state,
    prior_weight,
    set_state,
)

pytestmark = [pytest.mark.jericho, pytest.mark.filterwarnings("ignore::UserWarning")]


# --- the player's room, on synthetic object trees ---------------------------------------------


def infocom_tree() -> tuple[list[int], dict[str, int]]:
    """A ZIL-style tree: 30 rooms in ROOMS, globals apart, the player in a room.

    Object numbers: 1 ROOMS, 2 GLOBAL-OBJECTS, 3-6 top-level objects out of play,
    7-36 rooms (in ROOMS), 37 the player (in room 7), 38 a lamp (in room 7), 39 a
    mailbox (in room 7), 40 a leaflet (in the mailbox), 41 a boat (in room 8), 42 a
    wall (a global), 43 a sword (in room 8).
    """
    parents = [0] * 43
    rooms = list(range(7, 37))
    for room in rooms:
        parents[room - 1] = 1
    for num, parent in {37: 7, 38: 7, 39: 7, 40: 39, 41: 8, 42: 2, 43: 8}.items():
        parents[num - 1] = parent
    return parents, {"player": 37, "first room": 7, "boat": 41, "boat's room": 8}


def test_the_room_inside_a_container_of_rooms_is_the_players_room():
    parents, num = infocom_tree()
    assert player_room(parents, num["player"]) == num["first room"]  # not ROOMS (1)
    # In a vehicle inside a room: still the room, never the vehicle nor ROOMS.
    parents[num["player"] - 1] = num["boat"]
    assert player_room(parents, num["player"]) == num["boat's room"]
    assert player_room(np.asarray(parents), num["player"]) == num["boat's room"]


def test_inform_rooms_stay_at_the_top_with_or_without_a_vehicle():
    # acorncourt.z5's shape: one room holding 17 things among 11 top-level objects
    # (the library's own objects), the player in a chair there.
    parents = [0] * 40
    for num in range(12, 29):  # 17 things in room 11
        parents[num - 1] = 11
    player, chair = 30, 12
    parents[player - 1] = 11
    assert player_room(parents, player) == 11
    parents[player - 1] = chair
    assert player_room(parents, player) == 11
    # A many-room Inform game: rooms are top-level, a player on a bed in one of them.
    parents = [0] * 120
    for num in range(61, 100):  # things spread over the rooms 1..39
        parents[num - 1] = (num - 61) % 39 + 1
    player, bed = 110, 70
    parents[player - 1] = bed
    assert player_room(parents, player) == parents[bed - 1]


def test_no_room_for_a_player_out_of_the_tree_or_a_damaged_one():
    parents, num = infocom_tree()
    parents[num["player"] - 1] = 0
    assert player_room(parents, num["player"]) == 0
    assert player_room(parents, 0) == 0
    assert player_room(parents, 99) == 0
    looped = [2, 3, 1, 1]  # 1 -> 2 -> 3 -> 1: no top-level ancestor
    assert player_room(looped, 4) == 0


def tree_env(parents: list[int], player: int, nouns: list[str]) -> JerichoEnv:
    """A JerichoEnv shell reading a synthetic tree: only what the scope methods use."""
    count = len(parents)
    children, siblings = [0] * count, [0] * count
    for num in range(count, 0, -1):  # each parent's first child, then the chain
        parent = parents[num - 1]
        if parent:
            siblings[num - 1] = children[parent - 1]
            children[parent - 1] = num
    env = JerichoEnv.__new__(JerichoEnv)
    links = tuple(np.asarray(a, dtype=np.int64) for a in (parents, siblings, children))
    env.player, env._nouns, env._table = player, ["", *nouns], None
    env._layout = SimpleNamespace(count=count)
    env._read_ram = lambda: None
    env._links = lambda rows: links
    return env


def test_scope_is_the_players_room_on_the_infocom_layout():
    parents, num = infocom_tree()
    nouns = ["rooms", "globals", "x", "x", "x", "x"] + [f"room{i}" for i in range(7, 37)]
    nouns += ["self", "lamp", "mailbox", "leaflet", "boat", "wall", "sword"]
    env = tree_env(parents, num["player"], nouns)
    assert sorted(env._scope(None)) == [7, 38, 39, 40]  # the room, its things, the leaflet
    assert env._scope_nouns() == (["lamp", "leaflet", "mailbox", "room7"], set())
    parents[38 - 1] = num["player"]  # the player takes the lamp
    env = tree_env(parents, num["player"], nouns)
    assert env._scope_nouns() == (["lamp", "leaflet", "mailbox", "room7"], {"lamp"})
    parents[num["player"] - 1] = num["boat"]  # into the boat, in room 8
    env = tree_env(parents, num["player"], nouns)
    assert env._scope_nouns() == (["boat", "lamp", "room8", "sword"], {"lamp"})


# --- the candidates mode ---------------------------------------------------------------------


def candidates_env(games_dir: Path, game: str, **kwargs) -> JerichoEnv:
    return gymnasium.make(
        "wmkit/Jericho-v0", game=str(games_dir / game), admissible_actions="candidates", **kwargs
    ).unwrapped


def prior_order(info: dict) -> list[str]:
    actions, priors = info["admissible_actions"], info["action_priors"]
    return [actions[i] for i in np.argsort(-np.asarray(priors), kind="stable")]


def test_candidates_are_sorted_with_aligned_normalised_priors_and_cost_no_tries(games_dir):
    env = candidates_env(games_dir, "905.z5")
    _, info = env.reset(options={"walkthrough_seed": True})
    actions, priors = info["admissible_actions"], info["action_priors"]
    assert list(info) == ["admissible_actions", "action_priors", "score", "max_score", "moves"]
    assert actions == sorted(set(actions)) and len(actions) > 1000
    assert len(priors) == len(actions) and all(p > 0 for p in priors)
    assert math.isclose(math.fsum(priors), 1.0, rel_tol=1e-9)
    assert {"look", "inventory", "north", "take all"} <= set(actions)
    assert env.valid_actions.tried == 0 and env.frotz.get_moves() == 0  # nothing was tried
    # The order the prior gives: basic actions, then by verb usage, looking commands last.
    order = prior_order(info)
    basic = [a for a in order if a in defines.BASIC_ACTIONS]
    assert order[: len(basic)] == basic and basic[0] == "north"
    looking = [a for a in order if a.split()[0] in INFO_VERBS]
    assert order[-len(looking) :] == looking and "examine watch" in looking
    weight = dict(zip(actions, priors, strict=True))
    assert weight["take watch"] > weight["wait"] > weight["wear watch"]  # by usage
    assert weight["put watch on table"] < weight["put on watch"]  # two nouns: lower
    assert weight["look"] < weight["put watch on table"]


def test_the_walkthroughs_first_command_is_among_the_candidates_of_905(games_dir):
    env = candidates_env(games_dir, "905.z5")
    _, info = env.reset(options={"walkthrough_seed": True})
    first = env.frotz.get_walkthrough()[0]
    assert first == "answer phone"  # the phone's noun in the tree is "telephone"
    assert "answer telephone" in info["admissible_actions"]
    start = get_state(env.frotz)
    outcomes = {}
    for command in (first, "answer telephone"):
        set_state(env.frotz, start)
        env.frotz.step(command)
        outcomes[command] = Outcome(env.state_hash(), env.frotz.get_score(), False)
    assert outcomes[first] == outcomes["answer telephone"]
    set_state(env.frotz, start)
    assert outcomes[first].state_hash != env.state_hash()  # a world-changing command


def test_two_noun_candidates_on_a_game_whose_templates_have_them(games_dir):
    env = candidates_env(games_dir, "acorncourt.z5")
    _, info = env.reset(options={"walkthrough_seed": True})
    assert sum(t.count("OBJ") == 2 for t in env.templates) > 10
    walkthrough = env.frotz.get_walkthrough()
    assert walkthrough[0] == "point machine at tree" in info["admissible_actions"]
    for command in walkthrough[:2]:  # now carrying the tennis ball
        *_, info = env.step(command)
    assert walkthrough[2] == "put ball in machine" in info["admissible_actions"]
    two = [a for a in info["admissible_actions"] if a.startswith("put ball in ")]
    assert len(two) > 5  # every pair within the budget: the ball in anything
    weight = dict(zip(info["admissible_actions"], info["action_priors"], strict=True))
    assert weight["put ball in machine"] < weight["take ball"]


def test_candidates_are_cached_by_state_hash(games_dir, monkeypatch):
    env = candidates_env(games_dir, "905.z5")
    _, first = env.reset(options={"walkthrough_seed": True})
    calls = []
    scope = env._scope_nouns
    monkeypatch.setattr(env, "_scope_nouns", lambda: calls.append(1) or scope())
    token, state_hash = env.snapshot(), env.state_hash()
    # "look" changes nothing: the same state hash, the list and priors from the cache.
    *_, info = env.step("look")
    assert env.state_hash() == state_hash and not calls
    assert info["admissible_actions"] == first["admissible_actions"]
    assert info["action_priors"] == first["action_priors"]
    env.step("answer phone")  # a new state: its scope is read, once
    assert len(calls) == 1 and len(env.valid_actions._cache) == 2
    env.restore(token)
    assert env._info()["admissible_actions"] == first["admissible_actions"] and len(calls) == 1
    # The cache is an LRU of cache_size states.
    small = Candidates(env.templates, cache_size=2)
    for key in ("a", "b", "a", "c"):
        small.propose(key, lambda: (["bed"], set()))
    assert list(small._cache) == ["a", "c"]


def test_informative_actions_false_leaves_the_informing_commands_out(games_dir):
    env = candidates_env(games_dir, "905.z5", informative_actions=False)
    _, info = env.reset(seed=0)
    actions = info["admissible_actions"]
    # The commands that only inform, as the flag means for every mode: look, inventory,
    # examine X. The other looking ones ("look under X" may find something) stay.
    only_inform = [a for a in actions if a in ("look", "inventory") or a.startswith("examine ")]
    assert actions and not only_inform and "look under bed" in actions
    assert "north" in actions and len(info["action_priors"]) == len(actions)


def test_the_prior_formula():
    # (usage + 1) * factor: basic actions x100, two nouns x0.01, looking x1e-7.
    assert prior_weight("north") == 11614 * 100
    assert prior_weight("take OBJ") == 8910
    assert prior_weight("put OBJ in OBJ") == pytest.approx(6060 * 0.01)
    assert prior_weight("examine OBJ") == pytest.approx(39659e-7)
    assert prior_weight("xyzzyq OBJ") == 1
    assert min(prior_weight(a) for a in defines.BASIC_ACTIONS) > prior_weight("take OBJ")
    assert prior_weight("examine OBJ") < prior_weight("frobnicate OBJ with OBJ")
    with pytest.raises(ValueError, match="cache_size must be >= 1"):
        Candidates(["look"], cache_size=0)
    with pytest.raises(TypeError, match="informative must be a bool"):
        Candidates(["look"], informative=None)


def test_a_finished_episode_has_no_candidates(games_dir):
    env = candidates_env(games_dir, "905.z5", horizon=1)
    env.reset(seed=0)
    *_, truncated, info = env.step("wait")
    assert truncated and info["admissible_actions"] == [] and info["action_priors"] == []


def test_check_env_in_the_candidates_mode(games_dir):
    check_env(candidates_env(games_dir, "905.z5", ground_truth=True))
    check_env(candidates_env(games_dir, "acorncourt.z5"))


@pytest.mark.parametrize("mode", [True, "quick", False])
def test_only_the_candidates_mode_gives_priors(games_dir, mode):
    env = JerichoEnv(game=games_dir / "905.z5", admissible_actions=mode, quick_tries=20)
    _, info = env.reset(seed=0)
    assert list(info) == ["admissible_actions", "score", "max_score", "moves"]
    assert not isinstance(env.valid_actions, Candidates)


def test_the_coverage_report_runs(games_dir, tmp_path, monkeypatch):
    from wmkit.scripts import compare_valid_actions as script

    monkeypatch.setenv("WMKIT_GAMES_DIR", str(games_dir))
    out = tmp_path / "coverage.json"
    script.main(["coverage", "--games", "905.z5,sherbet.z5", "--steps", "3", "--json", str(out)])
    rows = {row["game"]: row for row in json.loads(out.read_text())["rows"]}
    assert rows["sherbet.z5"]["states"] == 0  # no walkthrough
    row = rows["905.z5"]
    assert row["states"] == 3 and row["changing"] == 3  # answer phone, stand up, s
    assert row["reached"] == {"full": 3, "quick": 3, "candidates": 3}
    assert len(row["ranks"]) == 3 and all(rank >= 1 for rank in row["ranks"])
    script.main(["rooms", "--games", "905.z5"])
