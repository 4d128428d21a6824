"""Runs agents on environments and scores every step against ground truth.

The env is always built with ``ground_truth=True``; the runner scores with it and hands
each agent only its :meth:`~wmkit.agents.types.Agent.view` of ``info``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium
import numpy as np

from wmkit.agents.types import Agent
from wmkit.evals.metrics import (
    ProbeOutcome,
    StaleCounts,
    TruthHistory,
    drift,
    drift_summary,
    names_entity,
)
from wmkit.world.types import Probe, WorldState

__all__ = ["make_env", "run_episode"]


def make_env(env_id: str, horizon: int, kwargs: Mapping[str, Any]) -> gymnasium.Env:
    """Build a registered env with ground truth on and the given horizon."""
    import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)

    return gymnasium.make(env_id, horizon=horizon, ground_truth=True, **kwargs)


def run_episode(env: gymnasium.Env, agent: Agent, seed: int) -> dict[str, Any]:
    """Play one episode to its end and score the agent's tracked state at every step.

    Step 0 is the state after ``reset``; step t follows the t-th command. At each step
    the runner records drift (ARCHITECTURE §4), answers every due probe from the
    tracked state, and counts stale use from the true state's history (answers and
    commands that rely on a released or superseded fact; see :mod:`~wmkit.evals.metrics`).

    Returns:
        A JSON-ready row: ``steps``, ``score``, ``max_score``, ``drift`` (summary),
        ``drift_series`` (per step, rounded), ``probes`` (``[chain, correct, kind]``
        triples), ``stale`` (the :class:`~wmkit.evals.metrics.StaleCounts` as a dict)
        and ``stale_use`` (their share).
    """
    observation, info = env.reset(seed=seed)
    agent.tracker.reset(observation, agent.view(info))
    agent.policy.reset(np.random.default_rng(seed))
    mentioned: set[str] = set()
    series: list[float] = []
    outcomes: list[ProbeOutcome] = []
    history = TruthHistory()
    stale_answers = stale_decisions = 0
    step = 0
    while True:
        mentioned.update(info["wm.mentioned"])
        tracked = agent.tracker.state
        truth = WorldState(info["wm.state"])
        history.observe(truth)
        series.append(drift(tracked, truth, mentioned))
        for probe in info["wm.probes"]:
            probe = Probe(*probe)
            answer = tracked.value(probe.subject, probe.relation)
            outcomes.append(
                ProbeOutcome(
                    chain=step - probe.anchor_step,
                    correct=answer == probe.answer,
                    kind=probe.kind,
                )
            )
            stale_answers += history.is_stale(probe.subject, probe.relation, answer)
        view = agent.view(info)
        action = agent.policy.act(observation, view, tracked)
        observation, reward, terminated, truncated, info = env.step(action)
        if reward < 0 and any(
            names_entity(action, fact.subject) for fact in history.stale_facts(tracked)
        ):
            stale_decisions += 1
        step += 1
        agent.tracker.update(action, observation, agent.view(info))
        if terminated or truncated:
            break
    # Score the final state too: the last command's effects count.
    mentioned.update(info["wm.mentioned"])
    series.append(drift(agent.tracker.state, WorldState(info["wm.state"]), mentioned))
    stale = StaleCounts(len(outcomes), stale_answers, step, stale_decisions)
    return {
        "steps": step,
        "score": int(info.get("score", 0)),
        "max_score": int(info.get("max_score", 0)),
        "drift": drift_summary(series),
        "drift_series": [round(d, 4) for d in series],
        "probes": [[o.chain, o.correct, o.kind] for o in outcomes],
        "stale": stale._asdict(),
        "stale_use": stale.share,
    }
