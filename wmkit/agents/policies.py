"""Command policies: random, greedy, one-step lookahead greedy, the env's scripted solver.

The lookahead greedy policy is the baseline for games; the solver policy is the upper
bound of a diagnostic family (an oracle); the greedy and Booking policies are Parcel's
and Booking's tracked-state policies (the other families' and their dispatch by env id
are in :mod:`wmkit.agents.tracked`); the tree searches are in
:mod:`wmkit.agents.mcts` and :mod:`wmkit.agents.self_correcting`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from wmkit.search.simulators import admissible_proposal
from wmkit.search.types import EpisodeSimulator, ProposeFn
from wmkit.world.types import WorldState

__all__ = ["BookingPolicy", "GreedyPolicy", "LookaheadGreedyPolicy", "RandomPolicy", "SolverPolicy"]


def _admissible(info: Mapping[str, Any]) -> list[str]:
    actions = info.get("admissible_actions")
    if not actions:
        raise KeyError("the env gave no admissible_actions in info; these policies need them")
    return actions


class RandomPolicy:
    """Picks a uniformly random admissible command."""

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        self._rng = rng

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        actions = _admissible(info)
        return actions[int(self._rng.integers(len(actions)))]


class GreedyPolicy:
    """Serves the open requests it can see in its tracked state, else waits.

    An open request is a subject whose ``requested_address`` differs from its
    ``address``; the policy sends ``reroute <id> to <address>`` when the env admits it.
    Its success therefore depends on what the tracker remembers: with the oracle
    tracker it is the scripted solver's upper bound. It is Parcel's tracked-state policy
    (:class:`~wmkit.agents.tracked.TrackedPolicy` plays it there).

    Args:
        fallback: command sent when nothing is to be done.
    """

    def __init__(self, fallback: str = "wait") -> None:
        self.fallback = fallback

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        pass

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        admissible = {a.lower(): a for a in _admissible(info)}
        for subject, relation, wanted in sorted(tracked):
            if relation != "requested_address" or tracked.value(subject, "address") == wanted:
                continue
            command = f"reroute {subject.split(':', 1)[-1]} to {wanted}"
            if command in admissible:
                return admissible[command]
        return self.fallback if self.fallback in admissible else next(iter(admissible.values()))


class BookingPolicy:
    """Books the trip its tracked state describes (``wmkit/Booking-v0``), else waits.

    It reads only the tracked state, so whatever stale fact the tracker holds becomes a
    stale decision. Items are the subjects with a ``status``; the wanted flight of a
    city is the one in the traveller's ``class``, or in the ``assumed_class`` while
    none is stated and the assumption is not ``released``; other items are wanted when
    ``wanted`` is ``yes``. Each step it sends the first of:

    1. ``cancel`` a booked item that is not wanted;
    2. ``book`` a wanted item whose quote is ``valid`` (none of its kind booked in its
       city);
    3. ``search`` the city of a wanted, unbooked item whose quote is not valid;
    4. ``confirm`` once per version of the tracked wishes and bookings, when they match;
    5. ``wait``.

    A command the env does not admit is skipped. With ``epsilon`` > 0 it explores: with
    that probability a step sends a uniformly random admissible command instead (an
    agent that sometimes sends commands the desk refuses).

    Args:
        epsilon: probability of a random command per step, in [0, 1].

    Raises:
        ValueError: ``epsilon`` is outside [0, 1].
    """

    def __init__(self, epsilon: float = 0.0) -> None:
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        self.epsilon = epsilon
        self._rng = np.random.default_rng(0)
        self._confirmed: tuple | None = None

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        self._rng = rng
        self._confirmed = None

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        actions = _admissible(info)
        if self.epsilon and self._rng.random() < self.epsilon:
            return actions[int(self._rng.integers(len(actions)))]
        admissible = {a.lower(): a for a in actions}
        trip: dict[str, str] = {}
        facts: dict[str, dict[str, str]] = {}
        for subject, relation, obj in tracked:
            if subject.startswith("trip:"):
                trip[relation] = obj
            else:
                facts.setdefault(subject, {})[relation] = obj
        items = {s: f for s, f in sorted(facts.items()) if "status" in f}
        cabin = trip.get("class") or trip.get("assumed_class")
        cabin = None if cabin == "released" else cabin
        want = {
            s: (f.get("class") == cabin if s.startswith("flight:") else f.get("wanted") == "yes")
            for s, f in items.items()
        }
        slots = {_slot(s, f) for s, f in items.items() if f["status"] == "booked"}
        todo = [f"cancel {s}" for s, f in items.items() if f["status"] == "booked" and not want[s]]
        open_items = [(s, f) for s, f in items.items() if want[s] and f["status"] != "booked"]
        todo += [
            f"book {s}"
            for s, f in open_items
            if f.get("quote") == "valid" and _slot(s, f) not in slots
        ]
        todo += [
            f"search {f['city']}"
            for s, f in open_items
            if f.get("quote") != "valid" and f.get("city")
        ]
        for command in todo:
            found = admissible.get(command.replace(":", " ", 1))
            if found:
                return found
        version = (
            tuple(sorted(trip.items())),
            tuple((s, f["status"], want[s]) for s, f in items.items()),
        )
        if (
            cabin
            and items
            and not open_items
            and version != self._confirmed
            and "confirm" in admissible
        ):
            self._confirmed = version
            return admissible["confirm"]
        return admissible.get("wait") or next(iter(admissible.values()))


def _slot(subject: str, facts: Mapping[str, str]) -> tuple[str, str | None]:
    """An item's kind and city: one booking of each per city (a second one is a double)."""
    return subject.split(":", 1)[0], facts.get("city")


class LookaheadGreedyPolicy:
    """The greedy baseline for games: the command with the best immediate reward (a Policy).

    Each :meth:`act` tries every proposed command once with the simulator (from the
    real state, inside :meth:`EpisodeSimulator.preserve`: a live env is restored) and
    plays one with the highest reward; among equals it prefers one after which the
    episode goes on, then one that changes the state (its transposition key differs
    from the current one's), drawn uniformly: with no reward in sight it wanders instead
    of repeating a no-op.

    Args:
        simulator: what the commands are tried with (``configs/simulator/``; for games
            the live env's snapshots, ``env_snapshot``).
        propose_fn: commands to try (default: the state's ``admissible_actions``).
    """

    def __init__(self, simulator: EpisodeSimulator, *, propose_fn: ProposeFn | None = None) -> None:
        self.simulator = simulator
        self.propose_fn = propose_fn or admissible_proposal
        self._rng = np.random.default_rng(0)
        self._step = 0

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode; ties are drawn from ``rng``."""
        self._rng = rng
        self._step = 0
        self.simulator.reset()

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Return a proposed command with the highest one-step reward.

        Raises:
            RuntimeError: nothing is proposed here.
        """
        sim = self.simulator
        root = sim.root(observation, info, tracked, step=self._step)
        actions = self.propose_fn(root).actions
        if not actions:
            raise RuntimeError(
                "LookaheadGreedyPolicy found no action to take: nothing is proposed here"
            )
        with sim.preserve():
            # Per command: its reward, then whether the episode goes on, then whether the
            # state changes (ties broken in that order).
            scored = []
            for action in actions:
                t = sim.step(root.token, action)
                scored.append((t.reward, not t.terminal, t.key is None or t.key != root.key))
        best = max(scored)
        ties = [a for a, s in zip(actions, scored, strict=True) if s == best]
        self._step += 1
        return ties[int(self._rng.integers(len(ties)))]


class SolverPolicy:
    """Plays the env's scripted solver on the env's true state: an oracle (a Policy).

    Each :meth:`act` returns ``solver(snapshot())`` of the live env (unwrapped): a
    diagnostic family's ``solver`` reads the immutable true state and returns one
    admissible command, and playing it every step wins every point the family counts
    (``max_score``). It ignores what it is shown and tracks nothing, so its score is the
    family's upper bound, printed beside the oracle tracker's; its agent must be marked
    ``oracle`` (it reads ground truth), and the suite hands it the env
    (``needs: {policy: [env]}``).

    Args:
        env: the episode's env (or a wrapper of it) with a ``solver`` and ``snapshot()``.

    Raises:
        TypeError: the env has no scripted solver, or no ``snapshot()``.
    """

    def __init__(self, env: Any) -> None:
        core = getattr(env, "unwrapped", env)
        solver = getattr(core, "solver", None)
        if not callable(solver) or not callable(getattr(core, "snapshot", None)):
            raise TypeError(
                f"{type(core).__name__} has no scripted solver (a `solver` attribute and "
                "snapshot()): the solver agent plays only the families that have one; list "
                "them in its config's envs"
            )
        self._env = core
        self._solver = solver

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        pass

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        return self._solver(self._env.snapshot())
