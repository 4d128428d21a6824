"""Test helpers shared by the diagnostic families' tests (parcel, smarthome, booking, vault).

Test files import it as ``from family_checks import ...``: pytest's default ``prepend``
import mode puts ``tests/envs/`` on ``sys.path`` (there is no ``__init__.py``), and so
does running a test file as a script (``python tests/envs/test_parcel.py``).

Holds the full-memory reader's tracker, the Gymnasium-contract checks every family
passes the same way, and the golden-file record/compare plumbing; each test file keeps
its own family-specific assertions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from gymnasium.utils.env_checker import data_equivalence

from wmkit.agents.trackers import ClaimMemory
from wmkit.evals.metrics import drift
from wmkit.world.types import UNKNOWN, Claim, Fact, WorldState

__all__ = [
    "AGENT_KEYS",
    "FullMemoryTracker",
    "assert_agent_info_only",
    "assert_deterministic",
    "assert_every_admissible_accepted",
    "assert_matches_golden",
    "assert_no_task_at_the_horizon",
    "assert_rejected_without_change",
    "assert_snapshot_restore_reproduces",
    "assert_state_hash_follows_the_world",
    "assert_truncates_at_horizon",
    "canonical_json",
    "check_claim_memory_reads_everything",
    "golden_main",
    "play",
    "probe_chains",
    "replay_with_full_memory",
    "sha",
    "write_golden",
]


class FullMemoryTracker:
    """Applies every claim since reset; resolves descriptions against its own facts.

    Remembers the step each ``(subject, relation)`` was last stated, to check anchors.
    """

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], str] = {}
        self.stated_at: dict[tuple[str, str], int | None] = {}

    def resolve(self, subject):
        if isinstance(subject, str):
            return subject
        matches = {
            s
            for (s, r), o in self.values.items()
            if all(self.values.get((s, rel)) == obj for rel, obj in subject)
        }
        assert len(matches) == 1, f"description {subject} is ambiguous or unknown: {matches}"
        return matches.pop()

    def apply(self, claims: list[Claim], step: int | None = None) -> None:
        for claim in claims:
            key = (self.resolve(claim.subject), claim.relation)
            self.values[key] = claim.object
            self.stated_at[key] = step

    def facts(self) -> set[Fact]:
        return {Fact(s, r, o) for (s, r), o in self.values.items()}


# --- the Gymnasium contract ------------------------------------------------------------

AGENT_KEYS = frozenset({"admissible_actions", "score", "max_score", "moves"})


def play(env: Any, seed: int, steps: int, pick: Callable[[random.Random, dict], str]) -> list:
    """Reset ``env`` with ``seed`` and take up to ``steps`` steps chosen by ``pick``.

    ``pick`` gets a ``random.Random(seed)`` and the latest info. Returns
    ``[(obs, info), step results...]``, stopping early at a terminal step.
    """
    rng = random.Random(seed)
    obs, info = env.reset(seed=seed)
    out = [(obs, info)]
    for _ in range(steps):
        out.append(env.step(pick(rng, info)))
        info = out[-1][-1]
        if out[-1][2]:
            break
    return out


def assert_deterministic(trajectory: Callable[[int], list]) -> None:
    """Seed 7 twice gives the same episode; seed 8 a different first and later text."""
    a, b = trajectory(7), trajectory(7)
    assert data_equivalence(a, b, exact=True)
    other = trajectory(8)
    assert other[0][0] != a[0][0]
    assert [step[0] for step in other] != [step[0] for step in a]


def assert_truncates_at_horizon(env: Any) -> None:
    """``env`` has ``horizon=20`` and never ends by waiting: truncated at step 20 only."""
    env.reset(seed=0)
    for t in range(1, 21):
        _, _, terminated, truncated, info = env.step("wait")
        assert terminated is False
        assert truncated is (t == 20)
        assert info["moves"] == t


def assert_agent_info_only(infos: list[dict]) -> None:
    """Infos without ground truth: exactly the agent-visible keys, no ``wm.*`` key."""
    for info in infos:
        assert not [k for k in info if k.startswith("wm.")]
        assert set(info) == AGENT_KEYS


NO_DELTA = {"action": {"added": [], "removed": []}, "event": {"added": [], "removed": []}}


def assert_rejected_without_change(
    env: Any, seed: int, command: str, read: Callable[[str], list]
) -> tuple[str, dict, dict]:
    """Step a rejected ``command`` after a reset: only a reply, and nothing else happens.

    ``env`` has ground truth on. Returns ``(obs, info before, info after)`` for the
    family's own checks of the reply text.
    """
    _, before = env.reset(seed=seed)
    obs, reward, terminated, truncated, after = env.step(command)
    assert obs.count("\n") == 0, obs  # only the reply: the world did not move
    assert read(obs) == []
    assert reward == 0 and not terminated and not truncated
    assert after["wm.state"] == before["wm.state"]
    assert after["wm.delta"] == NO_DELTA
    assert after["moves"] == 1
    return obs, before, after


def assert_every_admissible_accepted(
    env: Any, seed: int, steps: int, rejections: tuple[str, ...], pick: Callable
) -> None:
    """Over ``steps`` steps, every admissible action's first line is no rejection.

    ``pick(rng, info, token)`` chooses the step taken from each state; stops at a
    terminal step.
    """
    rng = random.Random(seed)
    _, info = env.reset(seed=seed)
    for _ in range(steps):
        token = env.snapshot()
        for action in info["admissible_actions"]:
            obs = env.step(action)[0]
            assert not any(r in obs.split("\n")[0] for r in rejections), (action, obs)
            env.restore(token)
        _, _, terminated, _, info = env.step(pick(rng, info, token))
        if terminated:
            break


def assert_snapshot_restore_reproduces(
    make: Callable[..., Any],
    pick: Callable,
    state_name: str,
    carry: Callable[[Any], Any] = lambda token: token,
) -> None:
    """A snapshot taken 25 steps in replays the next step, here and in another env.

    ``pick(rng, info, env)`` chooses the steps; ``carry`` moves the token to the other
    env (e.g. a pickle round trip). Restoring into other parameters or from a non-state
    is refused.
    """
    env = make(ground_truth=True)
    rng = random.Random(4)
    _, info = env.reset(seed=4)
    for _ in range(25):
        _, _, _, _, info = env.step(pick(rng, info, env))
    token = env.snapshot()
    action = info["admissible_actions"][-1]
    first = env.step(action)
    env.step("wait")
    env.restore(token)
    assert data_equivalence(env.step(action), first, exact=True)

    other = make(ground_truth=True)
    other.reset(seed=99)
    other.restore(carry(token))
    assert data_equivalence(other.step(action), first, exact=True)
    with pytest.raises(ValueError, match="parameters"):
        make(load=5).restore(token)
    with pytest.raises(TypeError, match=state_name):
        env.restore("not a token")


def probe_chains(env: Any, seed: int, steps: int, pick: Callable) -> tuple[list[int], Counter]:
    """Play ``steps`` with ``pick(rng, info, env)`` and check every probe on the way.

    Each probe must ask about a mentioned entity, carry the true answer and an anchor in
    ``[0, moves]``; an abstention probe, about an entity neither mentioned nor in the
    true state, with the answer ``UNKNOWN``, anchored now (it is no chain). Returns the
    chain lengths and a count of the probe kinds, for the family's own assertions about
    what its probes cover.
    """
    rng = random.Random(seed)
    _, info = env.reset(seed=seed)
    mentioned: set[str] = set(info["wm.mentioned"])
    chains: list[int] = []
    kinds: Counter = Counter()
    for _ in range(steps):
        _, _, terminated, _, info = env.step(pick(rng, info, env))
        mentioned.update(info["wm.mentioned"])
        truth = WorldState(info["wm.state"])
        for probe in info["wm.probes"]:
            kinds[probe.kind] += 1
            if probe.kind == "abstention":  # about an entity the episode never had
                assert probe.subject not in mentioned and probe.answer == UNKNOWN
                assert not truth.restrict({probe.subject}).facts
                assert probe.anchor_step == info["moves"]
                continue
            assert probe.subject in mentioned
            assert truth.value(probe.subject, probe.relation) == probe.answer
            assert 0 <= probe.anchor_step <= info["moves"]
            chains.append(info["moves"] - probe.anchor_step)
        if terminated:
            break
    return chains, kinds


def assert_no_task_at_the_horizon(make: Callable[..., Any], horizon: int, seeds: range) -> None:
    """Check that the horizon's step brings no new task (``max_score`` does not grow).

    A task given at the last step leaves no step to carry it out, so ``max_score``
    would count a point nobody can earn. The same episodes with a longer horizon are
    the same step for step up to the horizon (randomness is drawn by step, not by
    horizon), and bring a task at that step for some seed: proof that the rule, not
    chance, kept it out. The family's solver plays both and wins every point.
    """
    suppressed = 0
    for seed in seeds:
        short, longer = make(horizon=horizon), make(horizon=horizon + 10)
        _, info = short.reset(seed=seed)
        longer.reset(seed=seed)
        for _ in range(horizon):
            action = short.solver(short.snapshot())
            before = info["max_score"]
            _, _, _, truncated, info = short.step(action)
            *_, other = longer.step(action)
            if not truncated:
                assert other == info, (seed, info["moves"])
        assert truncated and info["moves"] == horizon
        assert info["max_score"] == before, seed
        assert info["score"] == info["max_score"], seed
        suppressed += other["max_score"] > before
    assert suppressed > 0, "no seed would have brought a task at the horizon: widen seeds"


def assert_state_hash_follows_the_world(env: Any, change: Callable[[Any, dict], str]) -> None:
    """The hash repeats for the same step from the same state and moves with the world.

    ``change(token, info)`` names a command (from the reset state ``token``) that
    changes the world, where ``wait`` from the same state does not change it the same way.
    """
    _, info = env.reset(seed=13)
    token = env.snapshot()
    a = env.step("wait")[-1]["wm.state_hash"]
    env.restore(token)
    b = env.step("wait")[-1]["wm.state_hash"]
    env.restore(token)
    c = env.step(change(token, info))[-1]["wm.state_hash"]
    assert a == b != c
    assert info["wm.state_hash"] != a


# --- golden records --------------------------------------------------------------------


def canonical_json(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha(info: dict) -> str:
    return hashlib.sha256(canonical_json(info).encode()).hexdigest()[:16]


def assert_matches_golden(path: Path, case: int, got: dict) -> None:
    """Compare one replayed golden record with case ``case`` of the file at ``path``."""
    golden = json.loads(path.read_text())[case]
    assert (got["seed"], got["params"]) == (golden["seed"], golden["params"])
    assert len(got["steps"]) == len(golden["steps"])
    for i, (mine, theirs) in enumerate(zip(got["steps"], golden["steps"], strict=True)):
        assert mine == theirs, f"case {case}: row {i} differs from the golden record"
    assert got["infos"] == golden["infos"]


def write_golden(path: Path, records: list[dict]) -> None:
    """Write golden records to ``path``, one row per line (re-recordings diff readably)."""
    path.parent.mkdir(exist_ok=True)
    lines = []
    for record in records:
        rows = ",\n".join(canonical_json(row) for row in record["steps"])
        infos = ",\n".join(
            f"{canonical_json(k)}:{canonical_json(v)}" for k, v in record["infos"].items()
        )
        lines.append(
            f'{{"seed":{record["seed"]},"params":{canonical_json(record["params"])},\n'
            f'"steps":[\n{rows}],\n"infos":{{\n{infos}}}}}'
        )
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n")
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def golden_main(doc: str, path: Path, record: Callable[[], list[dict]]) -> None:
    """The ``--update-golden`` command line of a family's test file, run by hand only."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument(
        "--update-golden", action="store_true", help=f"re-record golden/{path.name}"
    )
    if parser.parse_args().update_golden:
        write_golden(path, record())
    else:
        parser.print_help()


def replay_with_full_memory(
    make: Callable[..., Any],
    read: Callable[[str], list[Claim]],
    pick_action: Callable[[random.Random, dict], str],
    seeds: range,
    config: dict[str, Any],
    horizons: tuple[int, ...] = (20, 80, 160, 300),
    exact_anchors: bool = True,
) -> tuple[int, int]:
    """Play random episodes and check a perfect-memory reader against the truth each step.

    At every step the reader's facts must equal the true facts of the entities mentioned
    so far, and every due probe must be answered by the tracker; with ``exact_anchors``
    the anchor must be exactly the step that last stated the answer (families whose
    anchors are the statement a probe depends on, such as a booking, pass False).

    Returns:
        ``(described, probes)``: claims whose subject was a description, probes checked.
    """
    described = probes = abstentions = 0
    for seed in seeds:
        env = make(ground_truth=True, horizon=horizons[seed % len(horizons)], **config)
        rng = random.Random(seed)
        tracker, mentioned = FullMemoryTracker(), set()
        obs, info = env.reset(seed=seed)
        truncated = False
        while True:
            claims = read(obs)
            described += sum(not isinstance(c.subject, str) for c in claims)
            tracker.apply(claims, info["moves"])
            mentioned.update(info["wm.mentioned"])
            truth = WorldState(info["wm.state"])
            assert tracker.facts() == truth.restrict(mentioned).facts, (seed, info["moves"], obs)
            for probe in info["wm.probes"]:
                key = (probe.subject, probe.relation)
                if probe.kind == "abstention":  # never stated: perfect memory holds nothing
                    assert probe.answer == UNKNOWN and key not in tracker.values, probe
                    assert probe.subject not in mentioned, probe
                    abstentions += 1
                    continue
                assert tracker.values[key] == probe.answer
                assert not exact_anchors or tracker.stated_at[key] == probe.anchor_step, probe
                probes += 1
            if truncated:
                break
            obs, _, _, truncated, info = env.step(pick_action(rng, info))
    assert abstentions > 0, "the family asks no abstention probe"
    return described, probes


def check_claim_memory_reads_everything(
    make: Callable[..., Any], read: Callable[[str], list[Claim]], config: dict[str, Any]
) -> None:
    """Assert ``ClaimMemory`` has zero drift over a 1000-step random episode (seed 41).

    ClaimMemory is what the leaderboard's "memory" row (``WindowTracker(k=None)``)
    keeps: over the longest horizon every value must stay readable.
    """
    env = make(ground_truth=True, horizon=1000, **config)
    rng = random.Random(41)
    memory = ClaimMemory()
    obs, info = env.reset(seed=41)
    mentioned: set[str] = set()
    for step in range(1001):
        memory.apply(read(obs))
        mentioned.update(info["wm.mentioned"])
        if step % 25 == 0 or step == 1000:
            assert drift(memory.state(), WorldState(info["wm.state"]), mentioned) == 0, step
        if step < 1000:
            obs, _, _, _, info = env.step(rng.choice(info["admissible_actions"]))
