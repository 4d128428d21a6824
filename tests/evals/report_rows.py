"""Small episode rows shaped like the suite's, for the report tests (two envs, two horizons)."""

from __future__ import annotations

from typing import Any

import numpy as np

from wmkit.evals.records import EpisodeRecord, StepRecord, record_path, write_record
from wmkit.world.types import Delta

AGENTS = {  # agent -> (drift level, oracle, privileged parts)
    "oracle": (0.0, True, []),
    "memory": (0.0, False, ["env_parser"]),  # the same curves as the oracle's
    "window": (0.4, False, ["env_parser"]),
    "rules": (0.6, False, []),
}
ENVS = ("parcel", "vault")
HORIZONS = (20, 40)


def row(
    env: str, horizon: int, agent: str, seed: int, *, variant: str = "", spec: str = ""
) -> dict[str, Any]:
    """One finished episode's row; drift grows with the horizon, breakage with the chain."""
    level, oracle, privileged = AGENTS.get(agent, (0.3, False, []))
    rng = np.random.default_rng([seed, horizon, len(agent)])
    series = np.clip(level + 0.2 * level * np.linspace(0, 1, horizon + 1), 0, 1)
    series = series + (rng.normal(0, 0.01, horizon + 1) if level else 0)
    chains = rng.integers(0, horizon, 8)
    return dict(
        env=env,
        env_id=f"wmkit/{env}",
        horizon=horizon,
        seed=seed,
        agent=agent,
        oracle=oracle,
        privileged=privileged,
        variant=variant,
        spec=spec or f"{env}-{agent}",
        steps=horizon,
        score=int(10 * (1 - level)) - seed,
        max_score=10,
        drift={"mean": float(series.mean()), "at_10": float(series[10]), "slope": level / 5},
        drift_series=[round(float(d), 4) for d in series],
        probes=[[int(c), bool(level * c < 6), "drift"] for c in chains],
        stale_use=level / 10,
        confusion={
            "action_exact": 1 - level,
            "action_f1": 1 - level / 2,
            "event_exact": 1 - level,
            "event_f1": 1 - level,
            "probe_accuracy": 1 - level / 3,
            "action_steps": 4,
            "event_steps": 2,
            "probes": 3,
        },
    )


def rows(seeds: int = 2, **kwargs: Any) -> list[dict[str, Any]]:
    """Every agent on every env and horizon, ``seeds`` seeds each."""
    return [
        row(env, h, agent, seed, **kwargs)
        for env in ENVS
        for h in HORIZONS
        for agent in AGENTS
        for seed in range(seeds)
    ]


def write_records(run_dir: Any, episodes: list[dict[str, Any]]) -> list[Any]:
    """Write a one-step record file for each row, where the suite would; return the paths."""
    step = StepRecord(
        action=None, observation="start", reward=0.0, believed=Delta(), predicted=None,
        truth=Delta(), true_action=Delta(), true_event=Delta(), mentioned=(), probes=(),
        answers=(), score=0, max_score=10, terminated=False, truncated=False,
    )  # fmt: skip
    paths = []
    for r in episodes:
        where = record_path(run_dir, r["env"], r["horizon"], r["agent"], r["seed"])
        record = EpisodeRecord(seed=r["seed"], agent=r["agent"], oracle=r["oracle"], steps=(step,))
        paths.append(write_record(where, record, {"env": r["env"]}))
    return paths
