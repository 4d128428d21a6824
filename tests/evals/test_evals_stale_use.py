"""Stale use: the metric on hand-built cases, the runner on real Booking episodes, and the
suite's memory wiring (real configs, real SQLite files, PostgreSQL when available)."""

import json
import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from pydantic import ValidationError

from wmkit.agents.governed import DictTracker, GovernedTracker
from wmkit.agents.policies import BookingPolicy
from wmkit.agents.trackers import ClaimMemory
from wmkit.agents.types import Agent
from wmkit.evals.leaderboard import render_markdown, summarise
from wmkit.evals.metrics import StaleCounts, TruthHistory, names_entity, score_episode
from wmkit.evals.runner import make_env, run_episode
from wmkit.evals.suite import (
    EvalConfig,
    MemoryPlan,
    MemorySpec,
    _episode,
    build_agent,
    run_suite,
)
from wmkit.memory import StateManager
from wmkit.world.types import Fact, WorldState

POSTGRES_URL = os.environ.get("WMKIT_POSTGRES_URL")


def _compose(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        raw = OmegaConf.to_container(compose("eval", overrides=list(overrides)), resolve=True)
    return EvalConfig.model_validate(raw)


# --- the metric on hand-built cases ------------------------------------------------------


def test_superseded_and_released_values_are_stale_and_others_are_not():
    history = TruthHistory()
    history.observe([Fact("trip:ann", "budget", "10000"), Fact("hotel:a", "quote", "valid")])
    assert not history.is_stale("trip:ann", "budget", "10000")  # true now
    history.observe([Fact("trip:ann", "budget", "8000")])  # revised; the quote slot is gone
    assert history.is_stale("trip:ann", "budget", "10000")  # superseded
    assert history.is_stale("hotel:a", "quote", "valid")  # released
    assert not history.is_stale("trip:ann", "budget", "8000")  # current
    assert not history.is_stale("trip:ann", "budget", "9000")  # wrong, but never true
    assert not history.is_stale("trip:ann", "budget", None)  # no answer is not stale
    tracked = WorldState([("trip:ann", "budget", "10000"), ("trip:ann", "class", "economy")])
    assert history.stale_facts(tracked) == [Fact("trip:ann", "budget", "10000")]
    # A value that comes back is current again.
    history.observe([Fact("trip:ann", "budget", "10000")])
    assert not history.is_stale("trip:ann", "budget", "10000")


def test_multi_valued_slots_keep_every_current_object():
    history = TruthHistory()
    history.observe([Fact("room:r", "holds", "key"), Fact("room:r", "holds", "lamp")])
    history.observe([Fact("room:r", "holds", "lamp")])
    assert history.is_stale("room:r", "holds", "key")
    assert not history.is_stale("room:r", "holds", "lamp")


@pytest.mark.parametrize(
    ("command", "entity", "named"),
    [
        ("book hotel azure", "hotel:azure", True),
        ("BOOK Hotel Azure", "hotel:azure", True),
        ("book flight tp123", "flight:tp123", True),
        ("book hotel azurex", "hotel:azure", False),
        ("reroute px-1 to 5 oak rd", "parcel:px-1", True),
        ("take brass lamp", "item:brass lamp", True),
        ("take lamp", "item:brass lamp", False),
        ("wait", "trip:ann", False),
    ],
)
def test_a_command_names_an_entity_by_the_whole_name(command, entity, named):
    assert names_entity(command, entity) is named


def test_stale_use_share_counts_answers_and_decisions_together():
    assert StaleCounts(10, 1, 90, 4).share == pytest.approx(0.05)
    assert StaleCounts(3, 0, 7, 0).share == 0.0
    assert StaleCounts().share != StaleCounts().share  # NaN: nothing to count


# --- the runner on real Booking episodes -------------------------------------------------


class NeverReleases:
    """Reads every claim but those that release something (``expired``, ``released``):
    a memory that never lets go of a lapsed quote or a dropped assumption."""

    def __init__(self, reader):
        self.reader = reader
        self.memory = ClaimMemory()

    def reset(self, observation, info):
        self.memory = ClaimMemory()
        self.update("", observation, info)

    def update(self, action, observation, info):
        keep = [c for c in self.reader(observation) if c.object not in ("expired", "released")]
        self.memory.apply(keep)

    @property
    def state(self):
        return self.memory.state()


def test_the_runner_counts_stale_answers_and_decisions_from_ground_truth():
    env = make_env("wmkit/Booking-v0", 200, {})
    tracker = NeverReleases(env.unwrapped.reader)
    row = run_episode(env, Agent("never", tracker, BookingPolicy()), 2)
    stale = row["stale"]
    facts = [p for p in row["probes"] if p[2] != "abstention"]  # abstention: about no fact
    assert stale["answers"] == len(facts) < len(row["probes"]) and stale["decisions"] == 200
    # Lapsed quotes still read "valid": stale answers, and bookings on them that the desk
    # penalises (it re-quotes instead).
    assert stale["stale_answers"] > 0 and stale["stale_decisions"] > 0
    assert stale["stale_answers"] <= sum(not ok for _, ok, _ in row["probes"])
    assert row["stale_use"] == pytest.approx(
        (stale["stale_answers"] + stale["stale_decisions"]) / (stale["answers"] + 200)
    )
    # A tracker that reads everything holds nothing stale.
    plain = run_episode(env, Agent("dict", DictTracker(env.unwrapped.reader), BookingPolicy()), 2)
    assert plain["stale"]["stale_answers"] == plain["stale"]["stale_decisions"] == 0


LABELS = {
    "assumptions": ["assumed_class"],
    "releases": ["released", "expired"],
    "effects": {"hold": {"status": "held", "quote": "valid"}, "book": {"status": "booked"}},
}


def test_a_short_booking_episode_for_both_agents(tmp_path):
    env = make_env("wmkit/Booking-v0", 120, {})
    rows = {}
    for epsilon in (0.0, 0.1):
        with StateManager.open(str(tmp_path / f"m{epsilon}.db")) as memory:
            governed = GovernedTracker(env.unwrapped.reader, memory, **LABELS)
            rows["governed", epsilon] = run_episode(
                env, Agent("governed", governed, BookingPolicy(epsilon)), 1
            )
        plain = DictTracker(env.unwrapped.reader, **LABELS)
        rows["dict", epsilon] = run_episode(env, Agent("dict", plain, BookingPolicy(epsilon)), 1)
    # A policy that only sends commands the desk accepts: both memories read Booking's
    # text exactly, so neither holds anything stale.
    assert rows["governed", 0.0]["stale_use"] == rows["dict", 0.0]["stale_use"] == 0.0
    assert rows["governed", 0.0]["score"] == rows["dict", 0.0]["score"] > 0
    # Exploring, some commands are refused without a word on the predicted slots: the dict
    # keeps the prediction (a lapsed quote "valid" again) and uses it; governed memory
    # refused it against the observed fact.
    assert rows["governed", 0.1]["stale_use"] == 0.0
    assert rows["dict", 0.1]["stale_use"] > 0.0


# --- configs and the suite's memory wiring -----------------------------------------------


def test_the_stale_use_experiment_composes_to_booking_and_the_four_agents(tmp_path):
    config = _compose("experiment=stale_use")
    assert list(config.envs) == ["booking"]
    assert sorted(config.agents) == ["dict", "dict_explore", "governed", "governed_explore"]
    assert config.horizons == [100, 300] and config.seeds == [0, 1, 2, 3, 4]
    assert config.memory == MemorySpec()
    # Every variant reads with the same labels: they differ in memory and policy only.
    labels = [
        {k: v for k, v in spec.tracker.items() if k != "_target_"}
        for spec in config.agents.values()
    ]
    assert all(lab == labels[0] for lab in labels) and labels[0]["effects"]
    assert config.agents["dict_explore"].policy["epsilon"] == 0.1
    env = make_env("wmkit/Booking-v0", 20, {})
    assert isinstance(build_agent("dict", config.agents["dict"], env).tracker, DictTracker)
    with pytest.raises(ValueError, match="needs a memory store"):
        build_agent("governed", config.agents["governed"], env)
    with StateManager.open(str(tmp_path / "m.db")) as memory:
        agent = build_agent("governed_explore", config.agents["governed_explore"], env, memory)
        assert isinstance(agent.tracker, GovernedTracker) and agent.tracker.memory is memory
        assert agent.policy.epsilon == 0.1


def test_memory_postgres_needs_a_url(monkeypatch):
    monkeypatch.delenv("WMKIT_POSTGRES_URL", raising=False)
    with pytest.raises(ValidationError, match="needs a database URL"):
        _compose("memory=postgres")
    monkeypatch.setenv("WMKIT_POSTGRES_URL", "postgresql+psycopg://u@h/db")
    assert _compose("memory=postgres").memory.url == "postgresql+psycopg://u@h/db"


def _suite(tmp_path, memory, keep):
    config = _compose(
        "experiment=stale_use", "horizons=[20]", "seeds=[0]", "agents=[governed,dict]",
        "progress=false", f"memory={memory}", f"memory.keep={keep}",
    )  # fmt: skip
    run_suite(config, tmp_path)
    return [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]


def test_the_suite_gives_each_governed_episode_its_own_sqlite_file(tmp_path):
    rows = _suite(tmp_path, "sqlite", True)
    assert sorted(r["agent"] for r in rows) == ["dict", "governed"]
    # Silent quote lapses (the experiment's expiry_notice: false): the governed memory
    # lets a quote lapse with its stated validity, the dict books on it.
    stale = {r["agent"]: r["stale_use"] for r in rows}
    assert stale["governed"] == 0.0 < stale["dict"], stale
    files = sorted(p.name for p in (tmp_path / "memory").iterdir())
    assert files == ["booking__h20__governed__s0.db", "booking__h20__governed__s0.db.commits"]
    with StateManager.open(str(tmp_path / "memory" / files[0])) as memory:
        assert memory.step == 20 and memory.live_states()  # the episode's audit trail
    assert "stale use [95% CI]" in (tmp_path / "leaderboard.md").read_text()
    # Deleted afterwards when not kept; a leftover of a killed try is wiped first.
    spec = _compose("experiment=stale_use").agents["governed"]
    plan = MemoryPlan(str(tmp_path / "gone" / "e.db"), None, keep=False)
    Path(plan.url).parent.mkdir()
    with StateManager.open(plan.url) as leftover:
        leftover.set_state("x|y", "stale", source="t", authority="FACT", step=5)
    record = _episode("wmkit/Booking-v0", 20, {}, "governed", spec, 0, memory_plan=plan)
    assert score_episode(record)["drift"]["mean"] == 0.0
    assert list((tmp_path / "gone").iterdir()) == []


@pytest.mark.postgres
def test_the_suite_runs_governed_memory_on_postgres(tmp_path):
    if not POSTGRES_URL:
        pytest.skip('WMKIT_POSTGRES_URL is not set (start a server: eval "$(.ci/postgres.sh)")')
    rows = _suite(tmp_path, "postgres", False)
    stale = {r["agent"]: r["stale_use"] for r in rows}
    assert stale["governed"] == 0.0 < stale["dict"], stale
    assert not (tmp_path / "memory").exists()


def test_leaderboard_shows_stale_use_and_tolerates_rows_without_it():
    base = {"env": "booking", "horizon": 20, "drift": {"mean": 0.0}, "score": 1, "probes": []}
    rows = [
        {**base, "agent": "dict", "seed": 0, "stale_use": 0.25},
        {**base, "agent": "dict", "seed": 1, "stale_use": 0.25},
        {**base, "agent": "old", "seed": 0},  # written before stale use existed
    ]
    board = render_markdown(summarise(rows))
    assert "| 20 | dict | 2 |" in board and "0.250 [0.250, 0.250]" in board
    assert board.splitlines()[-1].count("–") >= 1
