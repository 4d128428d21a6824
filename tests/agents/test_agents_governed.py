"""Governed and plain-dict memory trackers on real stores, real Booking text and episodes."""

import os
import uuid

import pytest

from wmkit.agents.governed import DictTracker, GovernedTracker, Labels
from wmkit.agents.policies import BookingPolicy
from wmkit.agents.trackers import WindowTracker
from wmkit.agents.types import Agent
from wmkit.envs.booking import read
from wmkit.evals.runner import make_env, run_episode
from wmkit.memory import Authority, Lifecycle, ReleaseStatus, StateManager, fact_key
from wmkit.world.types import Claim, WorldState

POSTGRES_URL = os.environ.get("WMKIT_POSTGRES_URL")
BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

# Booking's own labels, as in configs/agents/governed.yaml.
BOOKING = dict(
    assumptions=["assumed_class"],
    releases=["released", "expired"],
    effects={
        "book": {"status": "booked"},
        "hold": {"status": "held", "quote": "valid"},
        "cancel": {"status": "offered", "quote": "expired"},
    },
)
OPENING = "\n".join(
    [
        "Ann is travelling; the first stop is Turin, 2 nights.",
        "Ann sets a budget of 11,000.",
        "No cabin class given for Ann; the desk assumes economy for now.",
        "Hotel Sable in Turin, beach: 60 a night, quote valid, not chosen.",
        "flight NO545 to Turin, economy: 340, quote valid, on offer.",
    ]
)


def lines(observation: str) -> list[Claim]:
    """A ten-line reader for unit cases: one ``subject relation object`` claim a line."""
    return [Claim(*line.split(" ", 2)) for line in observation.splitlines() if line.strip()]


@pytest.fixture(params=BACKENDS)
def memory(request, tmp_path):
    """A fresh, empty memory on each backend (a PostgreSQL schema dropped afterwards)."""
    if request.param == "sqlite":
        manager = StateManager.open(str(tmp_path / "memory.db"))
        yield manager
        manager.close()
        return
    if not POSTGRES_URL:
        pytest.skip('WMKIT_POSTGRES_URL is not set (start a server: eval "$(.ci/postgres.sh)")')
    schema = f"t_{uuid.uuid4().hex[:12]}"
    manager = StateManager.open(POSTGRES_URL, schema=schema)
    yield manager
    manager.store.drop()
    manager.close()


def _authority(memory, subject, relation):
    return memory.get_state(fact_key(subject, relation)).state.authority


def test_text_is_fact_and_the_desks_assumption_is_assumption(memory):
    tracker = GovernedTracker(read, memory, **BOOKING)
    tracker.reset(OPENING, {})
    assert tracker.state.value("trip:ann", "assumed_class") == "economy"
    assert tracker.state.value("hotel:sable", "quote") == "valid"
    assert _authority(memory, "trip:ann", "assumed_class") is Authority.ASSUMPTION
    assert _authority(memory, "trip:ann", "budget") is Authority.FACT
    assert memory.get_state(fact_key("trip:ann", "budget")).state.source == "obs:0"


def test_released_and_expired_values_are_never_served(memory):
    tracker = GovernedTracker(read, memory, **BOOKING)
    tracker.reset(OPENING, {})
    tracker.update("wait", "Ann: business class for me, please; drop the assumption.", {})
    tracker.update("wait", "The quote for Hotel Sable has expired.", {})
    assert tracker.state.value("trip:ann", "class") == "business"
    assert tracker.state.value("trip:ann", "assumed_class") == "released"
    assert tracker.state.value("hotel:sable", "quote") == "expired"
    for key, old in [(fact_key("trip:ann", "assumed_class"), "economy"),
                     (fact_key("hotel:sable", "quote"), "valid")]:  # fmt: skip
        first = memory.history(key)[0]
        assert first.value == old and first.lifecycle is Lifecycle.ARCHIVED
        assert first.note.startswith("released"), first.note
        assert memory.get_state(key).state.value != old
        # Both phases ran: logged with the text as reason, then committed by the governor.
        (entry,) = memory.releases(key=key)
        assert entry.status is ReleaseStatus.DONE and entry.reason.startswith("obs:")
    # The served state is the memory's: nothing released or superseded in it.
    served = {
        (s.key.split("|")[0], s.key.split("|")[1], s.value)
        for s in memory.live_states(Authority.ASSUMPTION)
    }
    assert served == set(tracker.state.facts)


def test_observed_facts_override_rule_predictions_which_never_override_facts(memory):
    effects = {"tag": {"colour": "red"}, "paint": {"size": "small"}}
    governed = GovernedTracker(lines, memory, effects=effects)
    plain = DictTracker(lines, effects=effects)
    for tracker in (governed, plain):
        tracker.reset("box:b1 size big", {})
        # A prediction on a slot with no fact yet is an assumption until the reply speaks.
        tracker.update("tag box b1", "box:b1 colour blue", {})
        # A prediction the reply does not confirm, over an observed fact.
        tracker.update("paint box b1", "", {})
    history = memory.history(fact_key("box:b1", "colour"))
    assert [(v.authority, v.value) for v in history] == [
        (Authority.ASSUMPTION, "red"),
        (Authority.FACT, "blue"),
    ]
    assert history[0].lifecycle is Lifecycle.ARCHIVED
    assert governed.state.value("box:b1", "colour") == "blue"
    assert governed.state.value("box:b1", "size") == "big"  # the assumption was refused
    assert memory.history(fact_key("box:b1", "size"))[-1].note.startswith("rejected")
    # The plain dict cannot tell: last write wins, so the unconfirmed prediction stays.
    assert plain.state.value("box:b1", "size") == "small"


def test_predictions_only_for_known_entities_and_ruled_verbs(memory):
    tracker = GovernedTracker(read, memory, **BOOKING)
    tracker.reset(OPENING, {})
    assert [tuple(f) for f in tracker.predict("book hotel sable")] == [
        ("hotel:sable", "status", "booked")
    ]
    assert tracker.predict("book hotel nowhere") == []
    assert tracker.predict("search turin") == []
    assert tracker.predict("") == []


def test_temporary_scratch_never_reaches_the_store_nor_the_state(memory):
    governed = GovernedTracker(lines, memory)
    governed.reset("box:b1 size big", {})
    governed.scratch("box:b1", "plan", "open it")
    key = fact_key("box:b1", "plan")
    assert memory.get_state(key).reason == "temporary"
    assert memory.history(key) == ()
    assert not [row for row in memory.store.dump()["wm_states"] if key in row]
    assert governed.state.value("box:b1", "plan") is None
    # A scratch value under a persisted key is refused outright.
    governed.scratch("box:b1", "size", "tiny")
    assert governed.state.value("box:b1", "size") == "big"
    plain = DictTracker(lines)
    plain.reset("box:b1 size big", {})
    plain.scratch("box:b1", "plan", "open it")
    assert plain.state.value("box:b1", "plan") == "open it"


def test_a_validity_period_expires_through_the_governor(memory):
    tracker = GovernedTracker(lines, memory, ttl_steps={"quote": 2})
    tracker.reset("hotel:h1 quote valid\nhotel:h1 city lisbon", {})
    tracker.update("wait", "", {})
    assert tracker.state.value("hotel:h1", "quote") == "valid"
    tracker.update("wait", "", {})
    assert tracker.state.value("hotel:h1", "quote") is None
    assert tracker.state.value("hotel:h1", "city") == "lisbon"
    (entry,) = memory.releases(key=fact_key("hotel:h1", "quote"))
    assert entry.status is ReleaseStatus.DONE and "ttl" in entry.reason
    # A restated value starts a new period.
    tracker.update("wait", "hotel:h1 quote valid", {})
    assert tracker.state.value("hotel:h1", "quote") == "valid"


SILENT = dict(BOOKING, ttl_from={"valid_for": "quote"}, lapses={"quote": "expired"})


def test_a_stated_validity_lapses_to_expired_and_the_dict_keeps_valid(memory):
    governed, plain = GovernedTracker(read, memory, **SILENT), DictTracker(read, **SILENT)
    opening = OPENING + "\nHotel Sable: quote valid for 2 steps."
    for tracker in (governed, plain):
        tracker.reset(opening, {})
        assert tracker.state.value("hotel:sable", "quote") == "valid"
        assert tracker.state.value("hotel:sable", "valid_for") is None  # a TTL, no fact
        tracker.update("wait", "You wait.", {})
        assert tracker.state.value("hotel:sable", "quote") == "valid"
        tracker.update("wait", "You wait.", {})
    assert governed.state.value("hotel:sable", "quote") == "expired"
    assert plain.state.value("hotel:sable", "quote") == "valid"  # lapsed, still "valid"
    lookup = memory.get_state(fact_key("hotel:sable", "quote"))
    assert lookup.state.source == "ttl:2" and lookup.state.authority is Authority.FACT
    # The policy acts on it: the governed agent searches, the dict agent books (-1).
    info = {"admissible_actions": ["book hotel sable", "search turin", "wait"]}

    def wished(state: WorldState) -> WorldState:  # the traveller wants the hotel
        return WorldState(
            [f for f in state if f[1] != "wanted"] + [("hotel:sable", "wanted", "yes")]
        )

    assert BookingPolicy().act("", info, wished(governed.state)) == "search turin"
    assert BookingPolicy().act("", info, wished(plain.state)) == "book hotel sable"
    # A fresh quote with its period replaces the lapse; a booking fixes it for good.
    governed.update(
        "search turin",
        "Hotel Sable: 70 a night, quote valid.\nHotel Sable: quote valid for 3 steps.",
        {},
    )
    assert governed.state.value("hotel:sable", "quote") == "valid"
    governed.update(
        "book hotel sable",
        "Booked Hotel Sable.\nHotel Sable: the booked price is fixed; the quote no longer lapses.",
        {},
    )
    for _ in range(4):
        governed.update("wait", "You wait.", {})
    assert governed.state.value("hotel:sable", "quote") == "valid"
    assert governed.state.value("hotel:sable", "status") == "booked"


def test_a_stated_validity_must_be_a_positive_number_of_steps(memory):
    tracker = GovernedTracker(read, memory, **SILENT)
    with pytest.raises(ValueError, match="validity period"):
        tracker.reset(OPENING + "\nHotel Sable: quote valid for 0 steps.", {})


def test_descriptions_resolve_against_the_served_state(memory):
    tracker = GovernedTracker(read, memory, **BOOKING)
    tracker.reset(OPENING, {})
    tracker.update("wait", "Ann: in Turin, I would like the hotel in the beach.", {})
    assert tracker.state.value("hotel:sable", "wanted") == "yes"
    tracker.update("wait", "Ann no longer wants the beach hotel in Turin.", {})
    assert tracker.state.value("hotel:sable", "wanted") == "no"


def test_one_memory_per_episode(memory):
    tracker = GovernedTracker(lines, memory)
    tracker.reset("box:b1 size big", {})
    with pytest.raises(RuntimeError, match="empty memory"):
        GovernedTracker(lines, memory).reset("box:b1 size big", {})
    with pytest.raises(TypeError, match="StateManager"):
        GovernedTracker(lines, str(memory))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"ttl_steps": {"quote": 0}}, ValueError, "ttl_steps"),
        ({"ttl_steps": {"quote": "2"}}, TypeError, "ttl_steps"),
        ({"assumptions": [3]}, TypeError, "assumption"),
        ({"effects": {"book": {"status": ""}}}, TypeError, "effects object"),
        ({"ttl_from": {"valid_for": 3}}, TypeError, "ttl_from relation"),
        ({"lapses": {"": "expired"}}, TypeError, "lapses key"),
    ],
)
def test_bad_labels_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        Labels.build(**kwargs)


def test_a_real_episode_serves_exactly_the_truth_and_what_get_state_returns(memory):
    env = make_env("wmkit/Booking-v0", 60, {})
    tracker = GovernedTracker(env.unwrapped.reader, memory, **BOOKING)
    row = run_episode(env, Agent("governed", tracker, BookingPolicy()), seed=3)
    assert row["drift"]["mean"] == 0.0 and row["score"] > 0
    keys = {r[1] for r in memory.store.dump()["wm_states"] if isinstance(r[1], str)}
    assert len(keys) > 20
    for key in keys:
        subject, relation = key.split("|")
        lookup = memory.get_state(key, Authority.ASSUMPTION)
        assert tracker.state.value(subject, relation) == (
            lookup.state.value if lookup.found else None
        )
    # The plain dict reads the same text to the same state (Booking states every change).
    plain = DictTracker(env.unwrapped.reader, **BOOKING)
    same = run_episode(env, Agent("dict", plain, BookingPolicy()), seed=3)
    assert plain.state == tracker.state and same["score"] == row["score"]


def test_without_predictions_the_dict_tracker_is_the_unbounded_window():
    env = make_env("wmkit/Booking-v0", 40, {})
    plain = DictTracker(env.unwrapped.reader)
    window = WindowTracker(env.unwrapped.reader, k=None)
    for tracker in (plain, window):
        run_episode(env, Agent("x", tracker, BookingPolicy(epsilon=0.3)), seed=1)
    assert plain.state == window.state != WorldState()


def test_booking_policy_books_wanted_items_and_explores_only_when_asked():
    tracked = WorldState(
        [
            ("trip:ann", "assumed_class", "economy"),
            ("flight:no545", "city", "turin"),
            ("flight:no545", "class", "economy"),
            ("flight:no545", "quote", "expired"),
            ("flight:no545", "status", "offered"),
            ("hotel:sable", "city", "turin"),
            ("hotel:sable", "quote", "valid"),
            ("hotel:sable", "status", "booked"),
            ("hotel:sable", "wanted", "no"),
        ]
    )
    admissible = sorted(
        ["wait", "confirm", "search turin", "cancel hotel sable", "book flight no545"]
    )
    info = {"admissible_actions": admissible}
    policy = BookingPolicy()
    assert policy.act("", info, tracked) == "cancel hotel sable"
    fixed = WorldState(f for f in tracked if f[0] != "hotel:sable")
    assert policy.act("", info, fixed) == "search turin"
    valid = WorldState(("flight:no545", "quote", "valid") if f[1] == "quote" else f for f in fixed)
    assert policy.act("", info, valid) == "book flight no545"
    booked = WorldState(
        ("flight:no545", "status", "booked") if f[1] == "status" else f for f in valid
    )
    assert policy.act("", info, booked) == "confirm"
    assert policy.act("", info, booked) == "wait"  # confirmed this version already
    with pytest.raises(ValueError, match="epsilon"):
        BookingPolicy(epsilon=1.5)
