"""Tests for wmkit/Jericho-v0 on the free games in $WMKIT_GAMES_DIR."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

jericho = pytest.importorskip("jericho")

import wmkit.envs  # noqa: E402, F401  (registers the ids)
from wmkit.envs.jericho import (  # noqa: E402
    PLAYER,
    REFUSED,
    EmulatorHalted,
    JerichoEnv,
    JerichoToken,
    check_story,
)
from wmkit.envs.jericho.actions import Outcome, ValidActions, get_state, set_state  # noqa: E402
from wmkit.envs.jericho.story import _layout, _names  # noqa: E402
from wmkit.evals.isolation import EpisodeFailed, Heartbeat, run_isolated  # noqa: E402
from wmkit.evals.results import ResultsFile  # noqa: E402
from wmkit.world.types import Fact, Probe  # noqa: E402

pytestmark = [pytest.mark.jericho, pytest.mark.filterwarnings("ignore::UserWarning")]


def make(games_dir: Path, name: str, **kwargs) -> JerichoEnv:
    kwargs.setdefault("admissible_actions", False)
    return gymnasium.make("wmkit/Jericho-v0", game=str(games_dir / name), **kwargs).unwrapped


def raw_replay(path: Path) -> tuple[list[str], int, bool]:
    """Jericho's own replay of the walkthrough, with the walkthrough's seed."""
    frotz = jericho.FrotzEnv(str(path))
    observation, _ = frotz.reset()
    observations, done = [observation], False
    for action in frotz.get_walkthrough():
        observation, _, done, _ = frotz.step(action)
        observations.append(observation)
        if done:
            break
    return observations, frotz.get_score(), done


def clean(text: str) -> str:
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f\xad]", "", text.replace("\xa0", " "))


# --- Gymnasium API ---------------------------------------------------------------------------


def test_check_env_without_ground_truth(games_dir):
    check_env(make(games_dir, "acorncourt.z5"))


@pytest.mark.slow
def test_check_env_with_ground_truth_and_admissible_actions(games_dir):
    check_env(make(games_dir, "905.z5", ground_truth=True, admissible_actions=True))


def test_runner_kwargs_horizon_and_the_end_of_an_episode(games_dir):
    env = gymnasium.make(
        "wmkit/Jericho-v0", horizon=3, ground_truth=True, game=str(games_dir / "905.z5")
    )
    env.unwrapped.valid_actions = None  # the search is tested below; keep this one fast
    _, info = env.reset(seed=0)
    assert {"admissible_actions", "score", "max_score", "moves", "wm.state"} <= set(info)
    flags = [env.step("wait")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("wait")


def test_no_ground_truth_keys_without_ground_truth(games_dir):
    env = make(games_dir, "905.z5")
    _, info = env.reset(seed=0)
    info2 = env.step("look")[-1]
    assert set(info) == set(info2) == {"admissible_actions", "score", "max_score", "moves"}
    assert info["admissible_actions"] == []  # admissible_actions=False
    assert info["max_score"] == 1


@pytest.mark.parametrize(
    ("game", "ground_truth", "wins"),
    [
        ("905.z5", True, True),
        ("acorncourt.z5", True, True),
        ("snacktime.z8", True, True),
        ("lostpig.z8", False, False),
    ],
)
def test_walkthrough_replay_reaches_the_recorded_score(games_dir, game, ground_truth, wins):
    recorded, score, done = raw_replay(games_dir / game)
    env = make(games_dir, game, ground_truth=ground_truth, horizon=10_000)
    observation, info = env.reset(options={"walkthrough_seed": True})
    observations, rewards = [observation], 0.0
    for action in env.frotz.get_walkthrough():
        observation, reward, terminated, _, info = env.step(action)
        observations.append(observation)
        rewards += reward
        assert env.observation_space.contains(observation)
        if terminated:
            break
    assert observations == [clean(o) for o in recorded]
    assert info["score"] == score == rewards
    assert terminated == done
    if wins:
        assert terminated and score == info["max_score"] > 0


def test_seed_zero_is_a_seed_and_seeding_is_deterministic(games_dir):
    # sherbet.z5 draws random numbers from the start (its walkthrough seed is 0).
    def play(seed, ground_truth=False):
        env = make(games_dir, "sherbet.z5", ground_truth=ground_truth)
        out = [env.reset(seed=seed)]
        out += [env.step(action) for action in ["wait"] * 30]
        return out, env

    a, env = play(0)
    assert env._seed >= 1000 and env._seed != env.frotz.bindings["seed"]
    b, _ = play(0)
    assert data_equivalence(a, b, exact=True)
    c, _ = play(1)
    assert [step[0] for step in c] != [step[0] for step in a]
    walkthrough_env = make(games_dir, "sherbet.z5")
    walkthrough = [walkthrough_env.reset(options={"walkthrough_seed": True})[0]]
    walkthrough += [walkthrough_env.step("wait")[0] for _ in range(30)]
    assert walkthrough != [step[0] for step in a]
    # Ground truth's counterfactual probing leaves the trajectory as it was.
    d, _ = play(0, ground_truth=True)
    assert [step[0] for step in d] == [step[0] for step in a]
    # reset() without a seed goes on with the env's generator: a new emulator seed.
    first = env._seed
    env.reset()
    assert env._seed != first


def test_snapshot_and_restore_continue_identically(games_dir):
    env = make(games_dir, "905.z5", ground_truth=True, probe_rate=1.0)
    env.reset(options={"walkthrough_seed": True})
    walkthrough = env.frotz.get_walkthrough()
    for action in walkthrough[:3]:
        env.step(action)
    token = env.snapshot()
    assert isinstance(token, JerichoToken) and token.step == 3
    first = [env.step(action) for action in walkthrough[3:9]]
    env.restore(token)
    second = [env.step(action) for action in walkthrough[3:9]]
    assert data_equivalence(first, second, exact=True)
    env.restore(token)  # a token can be restored again
    assert env.step(walkthrough[3])[-1]["wm.state_hash"] == first[0][-1]["wm.state_hash"]

    other = make(games_dir, "acorncourt.z5")
    other.reset(seed=0)
    with pytest.raises(ValueError, match="token is from"):
        other.restore(token)
    with pytest.raises(TypeError, match="JerichoToken"):
        env.restore(env.frotz.get_state())
    plain = make(games_dir, "905.z5")
    plain.reset(seed=0)
    with pytest.raises(ValueError, match="without ground truth"):
        env.restore(plain.snapshot())


def test_fast_state_copies_match_jerichos(games_dir):
    frotz = jericho.FrotzEnv(str(games_dir / "lostpig.z8"))
    frotz.reset()
    for action in frotz.get_walkthrough()[:5]:
        frotz.step(action)

    def same(a, b):
        return all(
            (x == y).all() if hasattr(x, "shape") else x == y for x, y in zip(a, b, strict=True)
        )

    ours = get_state(frotz)
    assert same(ours, frotz.get_state())
    after = frotz.step("north")[0]
    set_state(frotz, ours)
    assert same(frotz.get_state(), ours) and frotz.step("north")[0] == after


# --- ground truth ----------------------------------------------------------------------------


def test_facts_from_the_object_tree_and_the_action_delta(games_dir):
    env = make(games_dir, "905.z5", ground_truth=True)
    _, info = env.reset(options={"walkthrough_seed": True})
    state = info["wm.state"]
    assert state == sorted(state) and all(isinstance(f, Fact) for f in state)
    assert Fact(PLAYER, "in", "bed") in state
    _, _, _, _, info = env.step("stand up")
    delta = info["wm.delta"]
    assert delta["action"]["removed"] == [Fact(PLAYER, "in", "bed")]
    [added] = delta["action"]["added"]
    assert added.subject == PLAYER and added.object.startswith("bedroom")
    assert delta["event"] == {"added": [], "removed": []}
    assert added in info["wm.state"] and Fact(PLAYER, "in", "bed") not in info["wm.state"]
    # A command the parser rejects changes nothing, and the hash says so.
    before = info["wm.state_hash"]
    info = env.step("xyzzy plugh")[-1]
    assert info["wm.state_hash"] == before
    assert info["wm.delta"]["action"] == {"added": [], "removed": []}


def test_events_are_the_changes_waiting_would_have_made_too(games_dir):
    # night.z5: the grey mouse wanders about the maze on its own.
    env = make(games_dir, "night.z5", ground_truth=True, horizon=10_000)
    env.reset(options={"walkthrough_seed": True})
    events = []
    for action in env.frotz.get_walkthrough()[:45]:
        info = env.step(action)[-1]
        event = info["wm.delta"]["event"]
        if event["added"] or event["removed"]:
            events.append((action, event, info["wm.delta"]["action"]))
    assert events, "the mouse never moved on its own"
    mouse = [e for e in events if any(f.subject == "little grey mouse" for f in e[1]["added"])]
    assert mouse and mouse[0][0] in {"z", "wait"}  # waiting: every change is an event
    assert mouse[0][2] == {"added": [], "removed": []}


def test_mentioned_objects_are_named_in_the_observation(games_dir):
    env = make(games_dir, "905.z5", ground_truth=True)
    observation, info = env.reset(options={"walkthrough_seed": True})
    assert {"dresser", "bed"} <= set(info["wm.mentioned"])  # the bedroom's description
    for action in [None, *env.frotz.get_walkthrough()[:8]]:
        if action is not None:
            observation, *_, info = env.step(action)
        for entity in info["wm.mentioned"]:
            name = re.escape(entity.split("#")[0])
            assert re.search(rf"(?<!\w){name}(?!\w)", observation.lower()), entity


def test_probes_ask_where_things_were_last_seen(games_dir):
    env = make(games_dir, "905.z5", ground_truth=True, probe_rate=1.0, horizon=100)
    observation, info = env.reset(options={"walkthrough_seed": True})
    history = [(observation, info)]
    probes = []
    for action in env.frotz.get_walkthrough()[:12]:
        observation, *_, info = env.step(action)
        history.append((observation, info))
        probes += [(len(history) - 1, Probe(*p)) for p in info["wm.probes"]]
    assert len(probes) >= 8
    for step, probe in probes:
        assert probe.relation == "in" and probe.kind == "breakage"
        assert 0 <= probe.anchor_step < step
        fact = Fact(probe.subject, "in", probe.answer)
        assert fact in history[step][1]["wm.state"]
        # The answer held at the anchor, where the text named the object (or the
        # player's parent), and the object has not moved since.
        for _, seen in history[probe.anchor_step : step + 1]:
            assert fact in seen["wm.state"]
        named = probe.answer if probe.subject == PLAYER else probe.subject
        assert named.split("#")[0] in history[probe.anchor_step][0].lower()


def test_object_names_match_jericho_where_jericho_gets_them_right(games_dir):
    for game in ("905.z5", "acorncourt.z5", "balances.z5"):
        path = games_dir / game
        names = _names(check_story(path), _layout(check_story(path)))
        frotz = jericho.FrotzEnv(str(path))
        for obj in list(frotz.get_world_objects())[1:]:
            if 0 < len(obj.name) < 60:  # Jericho truncates longer names
                assert names[obj.num] == obj.name, (game, obj.num)


def test_any_z_machine_file_even_one_jericho_does_not_know(games_dir, tmp_path):
    data = bytearray((games_dir / "905.z5").read_bytes())
    data[0x12] ^= 1  # another serial number: Jericho's per-game tables no longer apply
    path = tmp_path / "unknown.z5"
    path.write_bytes(bytes(data))
    env = JerichoEnv(game=path, ground_truth=True)
    known = make(games_dir, "905.z5", ground_truth=True)
    assert not env.frotz.is_fully_supported
    # Names are decoded from the file; only the player is Jericho's guess (object 20).
    pairs = enumerate(zip(env.entity_ids, known.entity_ids, strict=True))
    differ = {i for i, (a, b) in pairs if a != b}
    assert differ == {env.player, known.player} and env.player == 20
    _, info = env.reset(seed=0)
    assert info["score"] == info["max_score"] == 0 and info["wm.state"]
    assert env.step("look")[-1]["moves"] == 1  # Jericho cannot read them: steps counted
    assert "look" in info["admissible_actions"]  # generic templates, tree nouns


# --- valid actions ---------------------------------------------------------------------------


def test_valid_actions_change_the_world_or_inform(games_dir):
    env = make(games_dir, "905.z5", admissible_actions=True, ground_truth=True)
    _, info = env.reset(options={"walkthrough_seed": True})
    actions = info["admissible_actions"]
    assert actions == sorted(set(actions)) and "look" in actions and "inventory" in actions
    token, before = env.snapshot(), info["wm.state_hash"]
    tried = env.valid_actions.tried
    checker = make(games_dir, "905.z5", ground_truth=True)  # no search of its own
    for action in actions:
        checker.restore(token)
        _, reward, terminated, _, after = checker.step(action)
        informs = action in ("look", "inventory") or action.startswith("examine ")
        assert informs or after["wm.state_hash"] != before or reward or terminated, action
    env.restore(token)
    assert env._info()["admissible_actions"] == actions
    assert env.valid_actions.tried == tried  # the second ask came from the cache
    # The searches put the emulator back: the walkthrough plays on as without them.
    env.valid_actions = None
    plain = make(games_dir, "905.z5")
    plain.reset(options={"walkthrough_seed": True})
    walkthrough = env.frotz.get_walkthrough()[:4]
    assert [env.step(a)[0] for a in walkthrough] == [plain.step(a)[0] for a in walkthrough]


def test_the_pair_budget_limits_two_noun_commands_to_carried_things(games_dir):
    env = make(games_dir, "acorncourt.z5", ground_truth=True)
    env.reset(options={"walkthrough_seed": True})
    for action in env.frotz.get_walkthrough()[:2]:  # now carrying a tennis ball
        env.step(action)
    nouns, held = env._scope_nouns()
    assert held == {"ball"} and {"machine", "tree", "ball"} <= set(nouns)
    every_pair = ValidActions(env.frotz, env.templates, env._state_hash, env.frotz.get_score)
    carried = ValidActions(
        env.frotz, env.templates, env._state_hash, env.frotz.get_score, pair_budget=0
    )
    state_hash = env._state_hash()
    wide, narrow = every_pair(state_hash, nouns, held), carried(state_hash, nouns, held)
    assert carried.tried < every_pair.tried
    # Neither the machine nor its target is carried: only every-pair finds these.
    assert "point machine at net" in wide and "plug bucket with acorn" in wide
    assert "point machine at net" not in narrow and "plug bucket with acorn" not in narrow
    assert "put ball in machine" in narrow and "put ball in machine" in wide
    assert env._state_hash() == state_hash  # both searches left the emulator as it was
    with pytest.raises(ValueError, match="pair_budget must be >= 0"):
        ValidActions(env.frotz, env.templates, env._state_hash, env.frotz.get_score, pair_budget=-1)


def test_a_games_own_hint_verbs_are_not_templates(games_dir):
    # night.z5's "allhints" opens a hint menu that swallows every later command; Jericho
    # drops only the exact word "hint".
    env = make(games_dir, "night.z5")
    assert {"allhints", "hints on"} <= set(env.frotz.act_gen.templates)
    assert not [t for t in env.templates if "hint" in t]
    assert "northeast" in env.templates and "look" in env.templates


@pytest.mark.slow
def test_valid_actions_cover_the_walkthrough_by_effect(games_dir):
    env = make(games_dir, "905.z5", admissible_actions=True, horizon=100)
    _, info = env.reset(options={"walkthrough_seed": True})
    covered = changing = 0
    for action in env.frotz.get_walkthrough():
        outcomes = set(env.valid_actions.outcomes(env._state_hash(), *env._scope_nouns()).values())
        before, score = env._state_hash(), info["score"]
        _, _, terminated, _, info = env.step(action)
        outcome = Outcome(env._state_hash(), info["score"], terminated)
        if outcome.state_hash != before or outcome.score != score or terminated:
            changing += 1
            covered += outcome in outcomes
        if terminated:
            break
    assert changing >= 15 and covered / changing >= 0.75


# --- bad input -------------------------------------------------------------------------------


def test_files_that_are_not_stories_are_refused_by_name(games_dir, tmp_path):
    text = tmp_path / "notes.z5"
    text.write_text("this is a text file, not a story\n" * 10)
    with pytest.raises(ValueError, match=r"notes\.z5 is not a z-machine story file: version"):
        JerichoEnv(game=text)
    truncated = tmp_path / "short.z5"
    truncated.write_bytes((games_dir / "905.z5").read_bytes()[:30_000])
    with pytest.raises(ValueError, match=r"short\.z5 .*truncated"):
        JerichoEnv(game=truncated)
    tiny = tmp_path / "tiny.z8"
    tiny.write_bytes(b"\x08" * 10)
    with pytest.raises(ValueError, match="shorter than the 64-byte header"):
        JerichoEnv(game=tiny)
    with pytest.raises(FileNotFoundError, match=r"nope\.z5"):
        JerichoEnv(game=tmp_path / "nope.z5")


def test_bare_names_are_looked_up_in_the_games_dir(games_dir, monkeypatch):
    monkeypatch.setenv("WMKIT_GAMES_DIR", str(games_dir))
    env = JerichoEnv(game="905.z5", admissible_actions=False)
    assert env.game == (games_dir / "905.z5").resolve()
    with pytest.raises(FileNotFoundError, match=r"'missing\.z5' not found, nor in"):
        JerichoEnv(game="missing.z5")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"horizon": 0}, ValueError, "horizon must be >= 1"),
        ({"horizon": 2.5}, TypeError, "horizon must be an int"),
        ({"ground_truth": "yes"}, TypeError, "ground_truth must be a bool"),
        ({"admissible_actions": 1}, TypeError, "must be True, False, .quick. or .candidates."),
        ({"probe_rate": 1.5}, ValueError, r"probe_rate must be in \[0, 1\]"),
    ],
)
def test_bad_parameters(games_dir, kwargs, error, match):
    with pytest.raises(error, match=match):
        JerichoEnv(game=games_dir / "905.z5", **kwargs)


def test_bad_actions_and_options(games_dir, tmp_path):
    env = make(games_dir, "905.z5")
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="must be a str"):
        env.step(3)
    with pytest.raises(ValueError, match="one line"):
        env.step("look\nquit")
    with pytest.raises(ValueError, match="at most 198 bytes"):
        env.step("x" * 199)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"seed": 3})
    data = bytearray((games_dir / "905.z5").read_bytes())
    data[0x12] ^= 1
    (tmp_path / "unknown.z5").write_bytes(bytes(data))
    unknown = JerichoEnv(game=tmp_path / "unknown.z5", admissible_actions=False)
    with pytest.raises(ValueError, match="no walkthrough seed"):
        unknown.reset(options={"walkthrough_seed": True})


def test_file_commands_are_refused_and_touch_no_file(games_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the interpreter would save into the working directory
    env = make(games_dir, "905.z5", ground_truth=True, horizon=5)
    _, info = env.reset(seed=0)
    for command in ("save", "look. SAVE", "restore", "script on", "recording", "replay"):
        observation, reward, terminated, _, after = env.step(command)
        assert observation == REFUSED and reward == 0 and not terminated
        assert after["wm.state_hash"] == info["wm.state_hash"]
        if env._over:
            break
    assert list(tmp_path.iterdir()) == []
    assert env._step == 5  # refused commands still spend moves (and hit the horizon)


# --- isolation with real emulator failures ----------------------------------------------------


def hang_story() -> bytes:
    """A tiny valid version-5 story whose first instruction jumps to itself forever."""
    data = bytearray(0x800)
    data[0] = 5
    for offset, value in (
        (0x04, 0x600),  # high memory
        (0x06, 0x600),  # first instruction
        (0x08, 0x400),  # dictionary
        (0x0A, 0x100),  # object table
        (0x0C, 0x200),  # globals
        (0x0E, 0x400),  # static memory
        (0x18, 0x040),  # abbreviations
        (0x1A, 0x800 // 4),  # file length / 4
    ):
        data[offset : offset + 2] = value.to_bytes(2, "big")
    data[0x401] = 9  # dictionary: no separators, 9-byte entries, none of them
    data[0x600:0x603] = bytes([0x8C, 0xFF, 0xFF])  # jump -1: to itself
    return bytes(data)


def play(game: str, steps: int = 5) -> int:
    """An episode as the suite would run it in a worker: returns the final score."""
    env = Heartbeat(gymnasium.make("wmkit/Jericho-v0", game=game, admissible_actions=False))
    _, info = env.reset(seed=0)
    for _ in range(steps):
        info = env.step("wait")[-1]
    return info["score"]


def raw_frotz(game: str, action: str | None = None) -> str:
    """Jericho without our checks: what a crash or hang does to the process."""
    frotz = jericho.FrotzEnv(game)
    return frotz.step(action)[0] if action else frotz.reset()[0]


def test_a_truncated_file_fails_its_episode_and_the_caller_goes_on(games_dir, tmp_path):
    truncated = tmp_path / "cut.z5"
    truncated.write_bytes((games_dir / "905.z5").read_bytes()[:30_000])
    with pytest.raises(
        EpisodeFailed, match=r"episode .*cut\.z5 failed: raised ValueError.*truncated"
    ):
        run_isolated(play, str(truncated), label=str(truncated))
    # Without the header check the emulator calls exit(1): the worker dies, we do not.
    with pytest.raises(EpisodeFailed, match="exited with code 1") as failed:
        run_isolated(raw_frotz, str(truncated), label=str(truncated), heartbeat_timeout=30)
    assert "Story file read error" in failed.value.output
    assert run_isolated(play, str(games_dir / "905.z5"), label="905.z5") == 0


def test_a_corrupted_story_fails_with_a_clear_error(games_dir, tmp_path):
    data = bytearray((games_dir / "905.z5").read_bytes())
    rng = random.Random(0)
    for i in range(0x3000, len(data)):  # leave the header and tables, garble the code
        if rng.random() < 0.3:
            data[i] = rng.randrange(256)
    corrupted = tmp_path / "garbled.z5"
    corrupted.write_bytes(bytes(data))
    with pytest.raises(EpisodeFailed, match=r"garbled\.z5") as failed:
        run_isolated(play, str(corrupted), label=str(corrupted), heartbeat_timeout=30)
    assert "EmulatorHalted" in failed.value.reason or failed.value.exitcode


def test_an_emulator_hang_is_killed_on_a_missing_heartbeat(games_dir, tmp_path):
    looping = tmp_path / "loop.z5"
    looping.write_bytes(hang_story())
    check_story(looping)  # a valid story: the header check cannot catch this one
    with pytest.raises(EpisodeFailed, match=r"loop\.z5 failed: hung: no heartbeat for 2 s"):
        run_isolated(play, str(looping), label=str(looping), heartbeat_timeout=2)
    # Frotz's own front end loops forever on a command line starting with "\help".
    with pytest.raises(EpisodeFailed, match="hung"):
        run_isolated(raw_frotz, str(games_dir / "905.z5"), "\\help", heartbeat_timeout=2)
    # Through the env the same command is plain text for the game's parser.
    assert run_isolated(step_once, str(games_dir / "905.z5"), "\\help", heartbeat_timeout=30)


def step_once(game: str, action: str) -> str:
    env = JerichoEnv(game=game, admissible_actions=False)
    env.reset(seed=0)
    return env.step(action)[0]


def test_halted_emulator_raises_emulator_halted(games_dir, tmp_path):
    data = bytearray((games_dir / "905.z5").read_bytes())
    rng = random.Random(0)
    for i in range(0x3000, len(data)):
        if rng.random() < 0.3:
            data[i] = rng.randrange(256)
    corrupted = tmp_path / "halts.z5"
    corrupted.write_bytes(bytes(data))
    # Runs in a worker: a garbled story may as well segfault.
    with pytest.raises(EpisodeFailed, match=r"EmulatorHalted|crashed"):
        run_isolated(halt_in_reset, str(corrupted), heartbeat_timeout=30)


def halt_in_reset(game: str) -> None:
    env = JerichoEnv(game=game, admissible_actions=False)
    try:
        env.reset(seed=0)
        for _ in range(5):
            env.step("look")
    except EmulatorHalted as error:
        assert game in str(error)
        raise


# --- TextWorld ---------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.textworld
def test_textworld_games_run_with_the_tree_as_ground_truth(tmp_path):
    if shutil.which("tw-make") is None:
        pytest.skip("tw-make (TextWorld) is not installed")
    path = tmp_path / "tw-test.z8"  # Jericho reads TextWorld's score only from tw-* files
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        subprocess.run(
            ["tw-make", "custom", "--world-size", "2", "--nb-objects", "3", "--quest-length",
             "2", "--seed", "1", "--output", str(path), "-f", "--silent"],
            check=True, capture_output=True, timeout=300,
        )  # fmt: skip
    import json

    walkthrough = json.loads(path.with_suffix(".json").read_text())["metadata"]["walkthrough"]
    env = JerichoEnv(game=path, ground_truth=True, horizon=20)
    observation, info = env.reset(seed=0)
    assert "TextWorld" in observation and info["max_score"] >= 1
    assert any(fact.subject.startswith("#") for fact in info["wm.state"])  # no names
    assert info["wm.mentioned"] == [] and info["wm.probes"] == []
    assert any(a in info["admissible_actions"] for a in ("north", "south", "east", "west"))
    for action in walkthrough:
        observation, _, terminated, _, info = env.step(action)
    assert terminated and info["score"] == info["max_score"]


@pytest.mark.slow
def test_the_suite_records_failed_game_episodes_and_goes_on(games_dir, tmp_path):
    """A truncated file and a hanging story fail their episodes; the rest of the run goes on."""
    from wmkit.evals.suite import EvalConfig, run_suite

    truncated = tmp_path / "cut.z5"
    truncated.write_bytes((games_dir / "905.z5").read_bytes()[:30_000])
    looping = tmp_path / "loop.z5"
    looping.write_bytes(hang_story())

    def game(path):
        return {
            "id": "wmkit/Jericho-v0",
            "kwargs": {"game": str(path)},
            "isolate": True,
            "heartbeat_timeout": 20,
        }

    config = EvalConfig.model_validate({
        "envs": {"cut": game(truncated), "loop": game(looping),
                 "nine05": game(games_dir / "905.z5")},
        "agents": {"oracle": {"tracker": {"_target_": "wmkit.agents.trackers.OracleTracker"},
                              "policy": {"_target_": "wmkit.agents.policies.GreedyPolicy"},
                              "oracle": True}},
        "horizons": [3], "seeds": [0], "progress": False,
    })  # fmt: skip
    paths = run_suite(config, tmp_path / "run")
    rows = {r["env"]: r for r in ResultsFile(paths["results"]).rows()}
    assert "cut.z5" in rows["cut"]["failed"] and "truncated" in rows["cut"]["failed"]
    assert "loop.z5" in rows["loop"]["failed"] and "hung" in rows["loop"]["failed"]
    assert "failed" not in rows["nine05"] and rows["nine05"]["steps"] == 3
    board = paths["markdown"].read_text()
    assert board.count("0 (1 failed)") == 2
