"""``wmkit-collect``: run agents and record trajectories and curiosity scenes.

Every (env, horizon, seed, agent) episode is played by the eval runner with the env
wrapped in a :class:`~wmkit.knowledge.recording.Recorder`, the agent's tracker in a
:class:`~wmkit.knowledge.recording.RecordingTracker` and its policy in a
:class:`~wmkit.agents.recording.RecordingPolicy` (a searching policy's visit counts
become each row's ``search``: the policy targets of ``wmkit-train-value``), and written to
``<data_dir>/<env_name>/`` (``trajectories/`` and ``scenes.jsonl``). A run resumes by
itself: episodes already committed to the data folder are skipped, and settings that
differ from those the folder's episodes were recorded with are refused.

Examples:
    wmkit-collect                                 # the default collection
    wmkit-collect experiment=debug                # a tiny run
    wmkit-collect agents=[window] data_dir=data   # into a data folder shared by runs
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from rich.console import Console
from rich.markup import escape

from wmkit.agents.recording import RecordingPolicy
from wmkit.evals.isolation import EpisodeFailed, Heartbeat, run_isolated
from wmkit.evals.progress import episode_description, progress_bar
from wmkit.evals.runner import env_module, make_env, run_episode
from wmkit.evals.specs import LLMSpec
from wmkit.evals.suite import AgentSpec, Artifacts, EnvSpec, build_agent, fingerprint, plays
from wmkit.jsonl import JsonlLog
from wmkit.knowledge.recording import (
    RecordedEpisode,
    Recorder,
    RecordingTracker,
    TrajectoryWriter,
    env_data_dir,
    load_episodes,
)
from wmkit.knowledge.scenes import CuriosityDetector
from wmkit.scripts.entry import check_failures, hydra_entry, run_console
from wmkit.scripts.tracking import pop_logger, start_run
from wmkit.tracking import RunLogger

__all__ = ["EVAL_ONLY", "CollectConfig", "collect", "log_summary", "main", "run"]

SPECS_FILE = "specs.jsonl"  # per env data folder: the settings each agent was recorded with
EVAL_ONLY = ("train_seeds", "pipeline")
"""Keys of wmkit-eval's training stages, which the experiments (``configs/experiment/``,
shared by both) may set and wmkit-collect leaves alone: it has no training stages."""


class CollectConfig(BaseModel):
    """The validated configuration of one ``wmkit-collect`` run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    envs: dict[str, EnvSpec] = Field(min_length=1)
    agents: dict[str, AgentSpec] = Field(min_length=1)
    horizons: list[int] = Field(min_length=1)
    seeds: list[int] = Field(min_length=1)
    data_dir: str | None = None
    shard_rows: int = Field(default=50_000, ge=1)
    shard_bytes: int = Field(default=128 << 20, ge=1)
    state_relations: list[str] | None = ["status"]
    tag: str = Field(default="", pattern=r"^[A-Za-z0-9_.@+-]*/?$")
    """Put before every episode id (``<tag><agent>/h<horizon>/seed=<seed>``): folders
    collected by the same agents (expert iteration's rounds) stay apart in training."""
    progress: bool = True
    llm: LLMSpec = Field(default_factory=LLMSpec)
    """The ``llm`` group: the model LLM agents interpolate (``${llm.client}``)."""


def _episode_prefix(agent: str, horizon: int, tag: str = "") -> str:
    return f"{tag}{agent}/h{horizon}/"


def _collect_episode(
    env_name: str,
    spec: EnvSpec,
    horizon: int,
    agent_name: str,
    agent_spec: AgentSpec,
    seed: int,
    state_relations: list[str] | None,
    artifacts: Artifacts | None = None,
    tag: str = "",
    heartbeat: bool = False,
) -> RecordedEpisode:
    """Play and record one episode; runs in a worker when the env is isolated.

    The episode is returned, not written, so that only whole episodes that finished
    without error reach the data folder (a failure discards the partial recording).
    """
    recorded: list[RecordedEpisode] = []
    env = make_env(spec.id, horizon, spec.kwargs)
    if heartbeat:
        env = Heartbeat(env)
    recorder = Recorder(
        env,
        recorded.append,
        env_name=env_name,
        agent=agent_name,
        episode_prefix=_episode_prefix(agent_name, horizon, tag),
    )
    try:
        agent = build_agent(agent_name, agent_spec, recorder, artifacts=artifacts)
        detector = CuriosityDetector(state_relations)
        agent.tracker = RecordingTracker(agent.tracker, recorder, detector)
        agent.policy = RecordingPolicy(agent.policy, recorder)
        run_episode(recorder, agent, seed)
    finally:
        recorder.close()
    return recorded[0]


def _check_specs(data_dir: Path, env_name: str, config: CollectConfig, players: list[str]) -> None:
    """Refuse agents whose settings differ from those already recorded; note new ones."""
    log = JsonlLog(data_dir / SPECS_FILE)
    known = {row["agent"]: row["spec"] for row in log.rows()}
    new = []
    for agent_name in players:
        spec = fingerprint(config.envs[env_name], config.agents[agent_name])
        if known.get(agent_name, spec) != spec:
            raise ValueError(
                f"{data_dir} holds {env_name}/{agent_name} episodes recorded with other "
                "settings; collect only with the same configuration, or use a new data_dir"
            )
        if agent_name not in known:
            new.append({"agent": agent_name, "spec": spec})
    log.extend(new)


def collect(
    config: CollectConfig,
    data_root: str | os.PathLike[str],
    *,
    console: Console,
    artifacts: Mapping[str, Artifacts] | None = None,
) -> dict:
    """Play and record every episode of ``config`` not yet in ``data_root``.

    An agent records the envs it plays (:func:`~wmkit.evals.suite.plays`: its ``envs``,
    the env's ``agents``). ``artifacts`` gives, per env name, what was trained for it
    (the parts whose ``needs`` list ``rules`` or ``checkpoint`` get those paths: the
    expert-iteration rounds collect with the last round's network).

    Returns:
        Per env name: ``{"dir": Path, "episodes": recorded now, "skipped": already
        there, "failed": isolated episodes that crashed, "steps": rows, "scenes": ...}``.
    """
    summary: dict[str, dict[str, Any]] = {}
    plan = []
    modules = {name: env_module(spec.id) for name, spec in config.envs.items()}
    for env_name, env_spec in config.envs.items():
        players = [a for a, spec in config.agents.items() if plays(a, spec, env_name, env_spec)]
        if not players:
            raise ValueError(
                f"no agent of {sorted(config.agents)} plays env {env_name!r} (its agents: "
                f"{list(env_spec.agents) or 'any'}): collect with one that does"
            )
        data_dir = env_data_dir(data_root, env_name)
        data_dir.mkdir(parents=True, exist_ok=True)
        _check_specs(data_dir, env_name, config, players)
        done = set(load_episodes(data_dir)["episode"])
        todo = [
            (env_name, horizon, seed, agent_name)
            for horizon in config.horizons
            for seed in config.seeds
            for agent_name in players
            if f"{_episode_prefix(agent_name, horizon, config.tag)}seed={seed}" not in done
        ]
        plan += todo
        skipped = len(config.horizons) * len(config.seeds) * len(players) - len(todo)
        summary[env_name] = {
            "dir": data_dir, "episodes": 0, "skipped": skipped, "failed": 0,
            "steps": 0, "scenes": 0,
        }  # fmt: skip
        if skipped:
            console.print(f"resuming {env_name}: {skipped} episodes already in {data_dir}")
    writers = {
        name: TrajectoryWriter(
            s["dir"], shard_rows=config.shard_rows, shard_bytes=config.shard_bytes
        )
        for name, s in summary.items()
    }
    try:
        with progress_bar(console, disable=not config.progress) as bar:
            # Progress counts steps (an episode weighs its horizon): the ETA means something.
            task = bar.add_task("collect", total=sum(h for _, h, _, _ in plan))
            for i, (env_name, horizon, seed, agent_name) in enumerate(plan, start=1):
                bar.update(
                    task,
                    description=episode_description(
                        "collect", i, len(plan), env_name, horizon, seed, agent_name
                    ),
                )
                spec = config.envs[env_name]
                args = (env_name, spec, horizon, agent_name, config.agents[agent_name], seed)
                args += (config.state_relations, (artifacts or {}).get(env_name), config.tag)
                try:
                    if spec.isolate:
                        label = str(spec.kwargs.get("game", spec.id))
                        episode = run_isolated(
                            _collect_episode, *args, True, label=label,
                            heartbeat_timeout=spec.heartbeat_timeout, preload=[modules[env_name]],
                        )  # fmt: skip
                    else:
                        episode = _collect_episode(*args)
                except EpisodeFailed as err:
                    console.print(
                        f"[red]episode failed[/red] {env_name} seed={seed}: {escape(str(err))}"
                    )
                    summary[env_name]["failed"] += 1
                else:
                    writers[env_name].write(episode)
                    summary[env_name]["episodes"] += 1
                    summary[env_name]["steps"] += len(episode.steps)
                    summary[env_name]["scenes"] += len(episode.scenes)
                bar.advance(task, horizon)
    finally:
        # Buffered episodes are whole and finished, so they are committed even when
        # the run stops on an error.
        for writer in writers.values():
            writer.close()
    return summary


def log_summary(logger: RunLogger, summary: dict[str, dict[str, Any]]) -> None:
    """Log a :func:`collect` summary: per env, ``collect/<env>/episodes``, ``steps``, ..."""
    for env_name, s in summary.items():
        counts = {k: s[k] for k in ("episodes", "skipped", "failed", "steps", "scenes")}
        logger.log_metrics(counts, prefix=f"collect/{env_name}")


def run(cfg: DictConfig) -> dict:
    """Validate the composed config and collect into the data folder."""
    resolved = OmegaConf.to_container(cfg, resolve=True)
    logger_config, raw = pop_logger(resolved, "wmkit-collect")
    for key in EVAL_ONLY:  # an experiment's settings of wmkit-eval's training stages
        raw.pop(key, None)
    try:
        config = CollectConfig.model_validate(raw)
    except ValidationError as err:
        raise SystemExit(f"wmkit-collect: invalid configuration:\n{err}") from None
    with start_run(logger_config, resolved, job_type="collect", app="wmkit-collect") as logger:
        return _collect_run(config, logger)


def _collect_run(config: CollectConfig, logger: RunLogger) -> dict:
    """The validated run: collect, log, report."""
    console = run_console(stderr=True)
    out = Path(HydraConfig.get().runtime.output_dir)
    data_root = Path(config.data_dir) if config.data_dir is not None else out / "data"
    try:
        summary = collect(config, data_root, console=console)
    except ValueError as err:
        raise SystemExit(f"wmkit-collect: {err}") from None
    log_summary(logger, summary)
    for env_name, s in summary.items():
        console.print(
            f"{env_name}: {s['episodes']} episodes recorded ({s['steps']} steps, "
            f"{s['scenes']} scenes), {s['skipped']} already there, {s['failed']} failed "
            f"-> {s['dir']}",
            markup=False,
        )
    total = sum(s["episodes"] + s["skipped"] + s["failed"] for s in summary.values())
    check_failures("wmkit-collect", total, sum(s["failed"] for s in summary.values()), console)
    return summary


@hydra_entry("collect")
def main(cfg: DictConfig) -> None:
    """Record trajectories and scenes (see ``wmkit-collect --help``)."""
    run(cfg)


if __name__ == "__main__":
    main()
