"""Tests for the shared diagnostic shell, ``DiagnosticEnv``, through the Parcel family,
and for the helpers the families share (parameter checks, ``StepRng``, ``StepDraft``).
"""

from __future__ import annotations

import math

import gymnasium
import numpy as np
import pytest

import wmkit.envs  # noqa: F401  (registers wmkit/Parcel-v0)
from wmkit.envs.diagnostic import (
    CoreDefaults,
    DiagnosticEnv,
    StepDraft,
    StepRng,
    changes_delta,
    check_int,
    check_rate,
    fact_slot,
    split_by_counterfactual,
)
from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.envs.parcel import ParcelEnv, ParcelFuncEnv, ParcelState
from wmkit.world.types import Delta, Fact

VISIBLE = {"admissible_actions", "score", "max_score", "moves"}
TRUTH = {"wm.state", "wm.delta", "wm.probes", "wm.state_hash", "wm.mentioned"}


def make(**kwargs) -> ParcelEnv:
    return gymnasium.make("wmkit/Parcel-v0", **kwargs).unwrapped


# --- the shell ---------------------------------------------------------------------------


def test_parcel_is_a_diagnostic_env():
    env = make()
    assert isinstance(env, DiagnosticEnv)
    assert env.observation_space is env.core.observation_space
    assert env.action_space is env.core.action_space


@pytest.mark.parametrize("value", ["yes", 1, 0, None, 1.0])
def test_ground_truth_must_be_a_bool(value):
    with pytest.raises(TypeError, match=f"ground_truth must be a bool, got {value!r}"):
        ParcelEnv(ground_truth=value)


def test_unknown_and_bad_parameters_are_rejected_by_the_params_class():
    with pytest.raises(TypeError, match="bogus"):
        ParcelEnv(bogus=3)
    with pytest.raises(ValueError, match="horizon"):
        ParcelEnv(horizon=2)


@pytest.mark.parametrize("call", ["step", "snapshot"])
def test_step_and_snapshot_before_reset_raise(call):
    env = make()
    with pytest.raises(RuntimeError, match=r"call reset\(\) before"):
        env.step("wait") if call == "step" else env.snapshot()


@pytest.mark.parametrize("token", ["not a token", 7, None, (), ("params",), object()])
def test_restore_rejects_what_is_not_a_state(token):
    env = make()
    with pytest.raises(TypeError, match="restore"):
        env.restore(token)  # before reset: no state type to compare with yet
    env.reset(seed=0)
    with pytest.raises(TypeError, match=f"needs a ParcelState token, got {type(token).__name__}"):
        env.restore(token)


def test_restore_rejects_a_token_with_other_parameters_and_keeps_its_state():
    env = make(load=3)
    env.reset(seed=0)
    mine = env.snapshot()
    other = make(load=5)
    other.reset(seed=0)
    with pytest.raises(ValueError, match="parameters"):
        env.restore(other.snapshot())
    assert env.snapshot() is mine


def test_restore_works_before_reset_and_resumes_exactly():
    source = make(ground_truth=True)
    source.reset(seed=3)
    for _ in range(10):
        source.step("wait")
    token = source.snapshot()
    assert isinstance(token, ParcelState)
    expected = source.step("wait")

    fresh = make(ground_truth=True)
    fresh.restore(token)  # a planner may restore into an env it never reset
    got = fresh.step("wait")
    assert got[:4] == expected[:4]
    assert got[4]["wm.state_hash"] == expected[4]["wm.state_hash"]
    assert got[4]["wm.state"] == expected[4]["wm.state"]


def test_truncated_exactly_at_the_horizon_and_after_it():
    env = make(horizon=20)
    env.reset(seed=1)
    flags = [env.step("wait")[2:4] for _ in range(22)]
    assert flags[:19] == [(False, False)] * 19
    assert flags[19:] == [(False, True)] * 3  # stepping on past the horizon stays truncated
    env.reset()
    assert env.step("wait")[2:4] == (False, False)


def test_info_keys_follow_ground_truth():
    plain, truth = make(), make(ground_truth=True)
    for env, keys in ((plain, VISIBLE), (truth, VISIBLE | TRUTH)):
        _, info = env.reset(seed=2)
        assert set(info) == keys
        assert set(env.step("wait")[-1]) == keys


def test_visible_info_is_the_same_with_and_without_ground_truth():
    plain, truth = make(), make(ground_truth=True)
    a, b = plain.reset(seed=4), truth.reset(seed=4)
    for _ in range(30):
        assert a[:-1] == b[:-1]  # observation (reward, flags)
        assert {k: b[-1][k] for k in VISIBLE} == a[-1]
        action = a[-1]["admissible_actions"][-2]  # a track command
        a, b = plain.step(action), truth.step(action)


def test_info_values_are_fresh_containers():
    # Caches inside the state must not leak out: a caller mutating info changes nothing.
    env = make(ground_truth=True)
    _, info = env.reset(seed=5)
    token = env.snapshot()
    first = env.step("wait")[-1]
    for key in ("admissible_actions", "wm.state", "wm.probes", "wm.mentioned"):
        first[key].append("junk")
    first["wm.delta"]["action"]["added"].append("junk")
    info["admissible_actions"].clear()
    env.restore(token)
    again = env.step("wait")[-1]
    assert "junk" not in again["admissible_actions"] and "wait" in again["admissible_actions"]
    assert "junk" not in again["wm.state"] and "junk" not in again["wm.mentioned"]
    assert "junk" not in again["wm.delta"]["action"]["added"]
    assert env.core.state_info(token)["admissible_actions"] == sorted(
        env.core.state_info(token)["admissible_actions"]
    )
    assert "wait" in env.core.state_info(token)["admissible_actions"]


@pytest.mark.parametrize("env_id", ["wmkit/Parcel-v0", "wmkit/Booking-v0", "wmkit/SmartHome-v0"])
def test_the_inline_step_path_equals_the_core_calls(env_id):
    # Cores that keep CoreDefaults' step methods are stepped with their code inline;
    # with that path turned off, every step must come out the same.
    fused = gymnasium.make(env_id, horizon=150, ground_truth=True).unwrapped
    plain = gymnasium.make(env_id, horizon=150, ground_truth=True).unwrapped
    assert fused._fused
    plain._fused = False
    rng = np.random.default_rng(3)
    first = fused.reset(seed=3)
    assert first == plain.reset(seed=3)
    info = first[1]
    for _ in range(150):
        actions = info["admissible_actions"]
        action = actions[int(rng.integers(len(actions)))]
        got, expected = fused.step(action), plain.step(action)
        assert got == expected
        assert all(type(a) is type(b) for a, b in zip(got, expected, strict=True))
        info = got[-1]
    assert got[3]  # truncated at the horizon, on both paths


def test_families_with_their_own_step_methods_keep_the_core_calls():
    for env_id in ("wmkit/Vault-v0",):
        assert not gymnasium.make(env_id).unwrapped._fused


def test_reward_and_moves_are_plain_python_numbers():
    env = make()
    env.reset(seed=6)
    _, reward, terminated, truncated, info = env.step("wait")
    assert type(reward) is float and type(terminated) is bool and type(truncated) is bool
    assert all(type(info[k]) is int for k in ("score", "max_score", "moves"))


# --- shared helpers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "low", "high", "error", "match"),
    [
        (5, 20, 1000, ValueError, r"^n must be in \[20, 1000\], got 5$"),
        (0, 1, None, ValueError, r"^n must be >= 1, got 0$"),
        (True, 0, 9, TypeError, "n must be an int, got bool True"),
        (2.0, 0, 9, TypeError, "n must be an int, got float 2.0"),
    ],
)
def test_check_int_rejects_with_a_message_naming_the_problem(value, low, high, error, match):
    with pytest.raises(error, match=match):
        check_int("n", value, low, high)


@pytest.mark.parametrize("value", [0, 7, np.int64(9), 10**9])
def test_check_int_accepts_ints_in_range(value):
    check_int("n", value, 0, None if value == 10**9 else 9)


@pytest.mark.parametrize(
    ("value", "error"),
    [(1.5, ValueError), (-0.1, ValueError), (float("nan"), ValueError), (False, TypeError)],
)
def test_check_rate_rejects(value, error):
    with pytest.raises(error, match="rate must be"):
        check_rate("rate", value)


@pytest.mark.parametrize("value", [0, 1, 0.5, np.float32(0.25)])
def test_check_rate_accepts_numbers_in_the_unit_interval(value):
    check_rate("rate", value)


def test_step_rng_is_seeded_by_seed_and_step_and_stays_in_range():
    def draws(seed, step):
        rng = StepRng(seed, step)
        return [rng.random() for _ in range(5)] + [rng.below(7) for _ in range(50)]

    assert draws(3, 4) == draws(3, 4)
    assert draws(3, 4) != draws(3, 5) and draws(3, 4) != draws(4, 4)
    values = draws(11, -1)
    assert all(0.0 <= x < 1.0 for x in values[:5])
    assert set(values[5:]) <= set(range(7)) and len(set(values[5:])) > 3
    rng = StepRng(1, 2)
    assert all(0 <= rng.bits() < 2**48 for _ in range(20))
    assert rng.choice("abc") in "abc"


def test_step_rng_variant_is_one_draw_canonical_at_one_minus_rate_else_uniform():
    rng, twin = StepRng(5, 6), StepRng(5, 6)
    picks = [rng.variant(3, 0.4) for _ in range(30_000)]
    for _ in picks:
        twin.random()
    assert rng.x == twin.x  # one draw a call, like random()
    counts = [picks.count(v) for v in range(4)]
    assert sum(counts) == len(picks) and abs(counts[0] / len(picks) - 0.6) < 0.01
    assert all(abs(c / (0.4 * len(picks)) - 1 / 3) < 0.02 for c in counts[1:])
    assert {StepRng(1, k).variant(2, 0.0) for k in range(200)} == {0}
    assert {StepRng(1, k).variant(2, 1.0) for k in range(200)} == {1, 2}
    assert {StepRng(1, k).variant(0, 0.5) for k in range(200)} == {0}
    # A draw just under the rate still picks a paraphrase in range (rounding).
    u = StepRng(9, 9).random()
    assert 1 <= StepRng(9, 9).variant(3, math.nextafter(u, 1.0)) <= 3


def test_changes_delta_sorts_and_drops_new_facts_from_removed():
    assert changes_delta(()) == Delta()
    delta = changes_delta((("b", "r", None, "x"), ("a", "r", "old", "new")))
    assert delta.added == (Fact("a", "r", "new"), Fact("b", "r", "x"))
    assert delta.removed == (Fact("a", "r", "old"),)


def test_the_counterfactual_split_goes_by_slot():
    assert fact_slot(Fact("d", "in", "hall")) == ("d", "in", None)
    assert fact_slot(Fact("d", "attr", "3"), ("attr",)) == ("d", "attr", "3")
    before = {Fact("dwarf", "in", "hall"), Fact("me", "in", "hall"), Fact("lamp", "attr", "1")}
    after = {Fact("dwarf", "in", "cave"), Fact("me", "in", "cave"), Fact("lamp", "attr", "2")}
    # Waiting moves the dwarf elsewhere and clears the lamp's attribute 1 (not 2).
    waited = {Fact("dwarf", "in", "pit"), Fact("me", "in", "hall")}
    action, event = split_by_counterfactual(before, after, waited, ("attr",))
    # The dwarf's move is one event though the runs disagree on his room; attribute 1,
    # cleared by both runs, is an event; attribute 2 is a slot of its own that only the
    # command set, like the player's move.
    assert event == Delta(
        (Fact("dwarf", "in", "cave"),), (Fact("dwarf", "in", "hall"), Fact("lamp", "attr", "1"))
    )
    assert action == Delta(
        (Fact("lamp", "attr", "2"), Fact("me", "in", "cave")), (Fact("me", "in", "hall"),)
    )
    assert split_by_counterfactual(before, before, waited) == (Delta(), Delta())
    # Without set-valued relations the lamp's attributes are one slot waiting changed.
    action, event = split_by_counterfactual(before, after, waited)
    assert Fact("lamp", "attr", "2") in event.added


class _Params:
    paraphrase_rate = 1.0


class _Draft(StepDraft):
    __slots__ = ("changes", "lines", "mentioned", "params", "rng")
    voice = Voice(
        TextBook(
            (
                MessageKind(
                    "seen",
                    ("{thing} is {state}.", "Now {thing} is {state}."),
                    (ClaimSpec("thing", "state", "state"),),
                ),
            ),
            {
                "thing": SlotType(r"[a-z]+", str, str, entity=True),
                "state": SlotType(r"[a-z]+", str, str),
            },
        )
    )

    def __init__(self) -> None:
        self.rng, self.params = StepRng(0, 0), _Params()
        self.lines, self.mentioned, self.changes = [], {}, {}


def test_step_draft_says_paraphrases_notes_entities_and_nets_changes():
    d = _Draft()
    d.say("seen", thing="lamp", state="on")
    assert d.lines == ["Now lamp is on."]  # paraphrase_rate 1: never the canonical one
    assert list(d.mentioned) == ["lamp"]
    d.note("lamp", "state", "off", "on")
    d.note("lamp", "state", "on", "dim")  # the first ``before`` is kept
    d.note("door", "state", "shut", "open")
    d.note("door", "state", "open", "shut")  # back where it was: no net change
    assert d.take_changes() == (("lamp", "state", "off", "dim"),)
    assert d.take_changes() == ()


def test_core_defaults_come_before_func_env():
    assert ParcelFuncEnv.__mro__.index(CoreDefaults) < ParcelFuncEnv.__mro__.index(
        gymnasium.experimental.functional.FuncEnv
    )
    core = make().core
    assert core.get_default_params() is core._params


def test_voice_compiles_one_form_per_kind_in_the_declared_order():
    book = TextBook(
        [
            MessageKind("moved", ("{box} went to {shelf}.", "To {shelf} went {box}.")),
            MessageKind("idle", ("Nothing.",)),
        ],
        {
            "box": SlotType(r"\w+", str.upper, str.lower, entity=True),
            "shelf": SlotType(r"\w+", str, str),
        },
    )
    voice = Voice(book, orders={"moved": "shelf box"})
    moved = voice.forms["moved"]
    assert moved.order == ("shelf", "box") and moved.entities == (1,) and moved.paraphrases == 1
    assert (
        moved.render(0, ("a", "x")) == "X went to a."
        and moved.render(1, ("a", "x")) == "To a went X."
    )
    assert voice.forms["idle"].line(0, ()) == "Nothing."
    with pytest.raises(ValueError, match="does not fit"):
        Voice(book, orders={"moved": "box"})
    with pytest.raises(ValueError, match="unknown kinds"):
        Voice(book, orders={"nope": "box"})


def test_step_rng_line_is_the_form_line_of_the_variant_drawn_in_one_call():
    book = TextBook(
        [
            MessageKind("moved", ("{box} went to {shelf}.", "To {shelf} went {box}.")),
            MessageKind("idle", ("Nothing.",)),
        ],
        {"box": SlotType(r"\w+", str, str), "shelf": SlotType(r"\w+", str, str)},
    )
    voice = Voice(book, orders={"moved": "shelf box"})
    moved, idle = voice.forms["moved"], voice.forms["idle"]
    lines = set()
    for step in range(200):
        a, b = StepRng(3, step), StepRng(3, step)
        line = a.line(moved, 0.5, ("a", "X"))
        assert line == moved.line(b.variant(moved.paraphrases, 0.5), ("a", "X"))
        assert a.x == b.x  # the same one draw
        lines.add(line)
        c = StepRng(3, step)
        assert c.line(idle, 0.5, ()) == "Nothing." and c.x == StepRng(3, step).x  # no draw
    assert lines == {"X went to a.", "To a went X."}
