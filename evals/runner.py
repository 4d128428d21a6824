"""Runs agents on environments and records every step beside the ground truth.

The env is always built with ``ground_truth=True``; the runner records the truth next
to what the agent did and tracked, and hands each agent only its
:meth:`~wmkit.agents.types.Agent.view` of ``info``. Playing and scoring are apart:
:func:`play_episode` returns an :class:`~wmkit.evals.records.EpisodeRecord` and
:func:`~wmkit.evals.metrics.score_episode` makes the results row from it;
:func:`run_episode` does both.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from wmkit.agents.types import Agent
from wmkit.evals.metrics import score_episode
from wmkit.evals.records import EpisodeRecord, StepRecord
from wmkit.world.types import Delta, Fact, Probe, Tracker, WorldState

__all__ = ["env_module", "make_env", "play_episode", "run_episode"]


def make_env(env_id: str, horizon: int, kwargs: Mapping[str, Any]) -> gymnasium.Env:
    """Build a registered env with ground truth on and the given horizon."""
    import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)

    return gymnasium.make(env_id, horizon=horizon, ground_truth=True, **kwargs)


def env_module(env_id: str) -> str:
    """Import the module of a registered env's class and return its name.

    A run checks its envs with it before anything starts (an env whose extra is not
    installed stops the run at once, not after the stages before it), and an isolated
    env's workers start from a process that has imported it
    (:func:`~wmkit.evals.isolation.run_isolated`'s ``preload``).

    Raises:
        ValueError: the id is not registered, or the module needs a package that is not
            installed (the message names the extra to install).
    """
    import wmkit.envs

    try:
        entry = gymnasium.spec(env_id).entry_point
    except gymnasium.error.Error as err:
        raise ValueError(f"env id {env_id!r} is not registered: {err}") from None
    name = entry.split(":")[0] if isinstance(entry, str) else entry.__module__
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as err:
        if (err.name or "wmkit").split(".")[0] == "wmkit":
            raise  # our own code is broken: not a missing install
        extra = wmkit.envs.EXTRAS.get(env_id)
        hint = f"pip install 'wmkit[{extra}]'" if extra else "install what it needs"
        raise ValueError(
            f"env {env_id} needs the package {err.name!r}, which is not installed: {hint}, "
            "or leave the env out (~env@envs.<name>)"
        ) from None
    return name


def _delta(part: Mapping[str, Any]) -> Delta:
    return Delta(
        tuple(Fact(*f) for f in part.get("added", ())),
        tuple(Fact(*f) for f in part.get("removed", ())),
    )


def _prediction(tracker: Tracker) -> Delta | None:
    predicted = getattr(tracker, "last_prediction", None)
    if predicted is None:
        return None
    added, removed = predicted
    return Delta(tuple(sorted(map(Fact._make, added))), tuple(sorted(map(Fact._make, removed))))


class _Recorder:
    """Makes the :class:`StepRecord` of each step, remembering the states of the last."""

    __slots__ = ("tracked", "truth")

    def __init__(self) -> None:
        self.tracked = WorldState()
        self.truth = WorldState()

    def record(
        self,
        action: str | None,
        observation: str,
        reward: float,
        info: Mapping[str, Any],
        tracker: Tracker,
        terminated: bool = False,
        truncated: bool = False,
    ) -> StepRecord:
        tracked, truth = tracker.state, WorldState(info["wm.state"])
        probes = tuple(Probe(*p) for p in info.get("wm.probes", ()))
        answer = getattr(tracker, "answer", None)
        # A tracker that answers questions itself (an LLM reading its window) is asked
        # them: the subject and relation only, never the answer. The final step's
        # probes are not scored (metrics.probe_outcomes), so they are not asked.
        if answer is not None and probes and not (terminated or truncated):
            answers = tuple(answer([(p.subject, p.relation) for p in probes]))
        else:
            answers = tuple(tracked.value(p.subject, p.relation) for p in probes)
        delta = info.get("wm.delta", {})
        step = StepRecord(
            action=action,
            observation=observation,
            reward=float(reward),
            believed=Delta.between(self.tracked, tracked),
            predicted=_prediction(tracker),
            truth=Delta.between(self.truth, truth),
            true_action=_delta(delta.get("action", {})),
            true_event=_delta(delta.get("event", {})),
            mentioned=tuple(info.get("wm.mentioned", ())),
            probes=probes,
            answers=answers,
            score=int(info.get("score", 0)),
            max_score=int(info.get("max_score", 0)),
            terminated=bool(terminated),
            truncated=bool(truncated),
        )
        self.tracked, self.truth = tracked, truth
        return step


def play_episode(env: gymnasium.Env, agent: Agent, seed: int) -> EpisodeRecord:
    """Play one episode to its end and record every step; no scoring happens here.

    Step 0 is the state after ``reset``; step t follows the t-th command. The policy
    acts on the tracked state of the step it is at. The record's ``usage`` is what the
    agent's language models cost during the episode (None without one).
    """
    spent = agent.usage()
    began = time.perf_counter()
    observation, info = env.reset(seed=seed)
    agent.tracker.reset(observation, agent.view(info))
    agent.policy.reset(np.random.default_rng(seed))
    recorder = _Recorder()
    steps = [recorder.record(None, observation, 0.0, info, agent.tracker)]
    while True:
        action = agent.policy.act(observation, agent.view(info), recorder.tracked)
        observation, reward, terminated, truncated, info = env.step(action)
        agent.tracker.update(action, observation, agent.view(info))
        steps.append(
            recorder.record(action, observation, reward, info, agent.tracker, terminated, truncated)
        )
        if terminated or truncated:
            break
    usage = agent.usage()
    if usage is not None and spent is not None:
        usage = usage - spent
    return EpisodeRecord(
        seed=seed,
        agent=agent.name,
        oracle=agent.oracle,
        steps=tuple(steps),
        usage=None if usage is None else usage.as_dict(),
        seconds=round(time.perf_counter() - began, 3),
    )


def run_episode(env: gymnasium.Env, agent: Agent, seed: int) -> dict[str, Any]:
    """Play one episode and score it: ``score_episode(play_episode(env, agent, seed))``.

    Returns:
        The JSON-ready row of :func:`~wmkit.evals.metrics.score_episode`.
    """
    return score_episode(play_episode(env, agent, seed))
