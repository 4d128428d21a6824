"""The evaluation suite: every agent on every env, horizon and seed, scored and ranked.

Library code takes the validated :class:`EvalConfig`, never a Hydra ``DictConfig``.
A run is resumable: episodes already in ``results.jsonl`` are skipped.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from pathlib import Path
from typing import Any

from hydra.utils import get_class, instantiate
from pydantic import BaseModel, ConfigDict, Field, field_validator
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from wmkit.agents.types import Agent
from wmkit.evals.isolation import EpisodeFailed, Heartbeat, run_isolated
from wmkit.evals.leaderboard import write_leaderboard
from wmkit.evals.results import ResultsFile, episode_key
from wmkit.evals.runner import make_env, run_episode

__all__ = ["AgentSpec", "EnvSpec", "EvalConfig", "run_suite"]

TARGET_PREFIX = "wmkit."


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnvSpec(_Strict):
    """An environment of the suite: a registered id and its constructor arguments.

    ``isolate`` runs each episode in a worker process watched by a heartbeat (see
    :mod:`wmkit.evals.isolation`): an emulator that crashes or hangs fails that episode,
    recorded with the reason, and the suite goes on. Real games want it; the pure-Python
    families do not need it.
    """

    id: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    isolate: bool = False
    heartbeat_timeout: float = Field(default=120.0, gt=0)


class AgentSpec(_Strict):
    """An agent of the suite: a tracker and a policy, each a Hydra ``_target_`` node."""

    tracker: dict[str, Any]
    policy: dict[str, Any]
    oracle: bool = False

    @field_validator("tracker", "policy")
    @classmethod
    def _own_target(cls, node: dict[str, Any]) -> dict[str, Any]:
        target = node.get("_target_")
        if not isinstance(target, str) or not target.startswith(TARGET_PREFIX):
            raise ValueError(f"_target_ must name a class under {TARGET_PREFIX!r}, got {target!r}")
        return node


class EvalConfig(_Strict):
    """The validated configuration of one ``wmkit-eval`` run."""

    envs: dict[str, EnvSpec] = Field(min_length=1)
    agents: dict[str, AgentSpec] = Field(min_length=1)
    horizons: list[int] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    resume: bool = True
    progress: bool = True


def _build_agent(name: str, spec: AgentSpec, env: Any) -> Agent:
    tracker_node = dict(spec.tracker)
    params = inspect.signature(get_class(tracker_node["_target_"])).parameters
    if "reader" in params and "reader" not in tracker_node:
        reader = getattr(env.unwrapped, "reader", None)
        if reader is None:
            raise ValueError(f"agent {name!r}: its tracker needs a reader and the env has none")
        tracker_node["reader"] = reader
    return Agent(
        name=name,
        tracker=instantiate(tracker_node),
        policy=instantiate(dict(spec.policy)),
        oracle=spec.oracle,
    )


def _episode(
    env_id: str,
    horizon: int,
    env_kwargs: dict[str, Any],
    agent_name: str,
    agent_spec: AgentSpec,
    seed: int,
    heartbeat: bool = False,
) -> tuple[dict[str, Any], bool]:
    """Build the env and agent and play one episode; runs in a worker when isolated."""
    env = make_env(env_id, horizon, env_kwargs)
    if heartbeat:
        env = Heartbeat(env)
    try:
        agent = _build_agent(agent_name, agent_spec, env)
        return run_episode(env, agent, seed), agent.oracle
    finally:
        env.close()


def _fingerprint(*specs: BaseModel) -> str:
    text = json.dumps([s.model_dump(mode="json") for s in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def run_suite(
    config: EvalConfig, out_dir: str | Path, *, variant: str = "", console: Console | None = None
) -> dict[str, Path]:
    """Run every (env, horizon, seed, agent) episode not yet in ``out_dir``, then rank.

    Args:
        config: the validated suite.
        out_dir: where ``results.jsonl``, ``leaderboard.md`` and the plot go.
        variant: a label for this run's settings (a sweep job's overrides), kept in every
            row so a merged sweep leaderboard keeps the jobs apart.
        console: rich console for progress (a quiet one when None).

    Returns:
        Paths of the written ``results`` file, ``markdown`` leaderboard and ``plot``.
    """
    out = Path(out_dir)
    results = ResultsFile(out / "results.jsonl")
    done: dict[tuple[str, int, str, int], str] = {}
    if config.resume:
        done = {episode_key(r): r["spec"] for r in results.rows()}
    specs = {
        (env_name, agent_name): _fingerprint(env_spec, agent_spec)
        for env_name, env_spec in config.envs.items()
        for agent_name, agent_spec in config.agents.items()
    }
    for (env_name, _, agent_name, _), spec in done.items():
        if specs.get((env_name, agent_name), spec) != spec:
            raise ValueError(
                f"{results.path} holds {env_name}/{agent_name} episodes run with other "
                "settings; resume only with the same configuration, or use a new run folder"
            )
    plan = [
        (env_name, horizon, seed, agent_name)
        for env_name in config.envs
        for horizon in config.horizons
        for seed in config.seeds
        for agent_name in config.agents
        if (env_name, horizon, agent_name, seed) not in done
    ]
    console = console or Console(quiet=not config.progress)
    if done:
        console.print(f"resuming: {len(done)} episodes already in {results.path}")
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, disable=not config.progress) as bar:
        task = bar.add_task("episodes", total=len(plan))
        for env_name, horizon, seed, agent_name in plan:
            bar.update(task, description=f"{env_name} h={horizon} seed={seed} {agent_name}")
            spec = config.envs[env_name]
            agent_spec = config.agents[agent_name]
            args = (spec.id, horizon, spec.kwargs, agent_name, agent_spec, seed)
            row: dict[str, Any]
            if spec.isolate:
                label = str(spec.kwargs.get("game", spec.id))
                try:
                    row, oracle = run_isolated(
                        _episode, *args, True,
                        label=label, heartbeat_timeout=spec.heartbeat_timeout,
                    )  # fmt: skip
                except EpisodeFailed as err:
                    console.print(f"[red]episode failed[/red] {env_name} seed={seed}: {err}")
                    row, oracle = {"failed": str(err)}, agent_spec.oracle
            else:
                row, oracle = _episode(*args)
            row.update(
                env=env_name,
                env_id=spec.id,
                horizon=horizon,
                seed=seed,
                agent=agent_name,
                oracle=oracle,
                variant=variant,
                spec=specs[(env_name, agent_name)],
            )
            results.append(row)
            bar.advance(task)
    paths = write_leaderboard(list(results.rows()), out)
    return {"results": results.path, **paths}
