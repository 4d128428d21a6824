"""The evaluation suite: every agent on every env, horizon and seed, scored and ranked.

Library code takes the validated :class:`EvalConfig`, never a Hydra ``DictConfig``.
A run is resumable: episodes already in ``results.jsonl`` are skipped, but for those whose
rows say they failed, which are played again (``retry_failed``) and their rows replaced.
With ``workers`` > 1 episodes are played in worker processes (:mod:`wmkit.evals.workers`),
the rows appended here as each finishes: the same rows, in another order.

A run may cap what its LLM agents spend (``config.llm.budget``, :class:`LLMBudget`:
tokens, calls, cost, summed over the ``llm`` of the run folder's rows, resumed ones
included). Before each episode starts the cap is checked; once reached, no episode
starts, those running finish and are written, the leaderboard is written of what
finished, and :func:`run_suite` says so (:class:`BudgetSpent`). The cap is no part of
any fingerprint: the same folder with a larger cap plays the rest.

What a config cannot hold comes from the episode, passed by name by one build step
(:func:`build_agent`) to the parts that list it in their agent's ``needs``
(:class:`Needs`): the env's text reader, the live env (an ``env_snapshot`` simulator),
a fresh :class:`~wmkit.memory.StateManager` for each episode (governed memory, seed
002), from the ``memory`` config (:class:`MemorySpec`): by default a SQLite file under
the run folder (``memory/<env>__h<horizon>__<agent>__s<seed>.db``), or a PostgreSQL
schema of its own; and what was trained for the episode's env (:class:`Artifacts`: the
distilled rules, the value network), which the main job's training stages make
(``wmkit.scripts.pipeline``) and :func:`run_suite` is given. The configuration models
live in :mod:`wmkit.evals.specs` and are re-exported here.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from hydra.utils import instantiate
from pydantic import BaseModel
from rich.console import Console
from rich.markup import escape

from wmkit.agents.types import Agent
from wmkit.evals.isolation import EpisodeFailed, Heartbeat
from wmkit.evals.leaderboard import write_leaderboard
from wmkit.evals.metrics import score_episode
from wmkit.evals.progress import episode_description, progress_bar
from wmkit.evals.records import EpisodeRecord, encode_record, record_path, write_record_file
from wmkit.evals.results import ResultsFile, episode_key
from wmkit.evals.runner import env_module, make_env, play_episode
from wmkit.evals.specs import (
    AgentSpec,
    Artifacts,
    EnvSpec,
    EvalConfig,
    LLMBudget,
    MemorySpec,
    Needs,
    plays,
)
from wmkit.evals.workers import Isolation, Task, run_tasks
from wmkit.memory import StateManager, sqlite_files
from wmkit.tracking import is_secret

__all__ = [
    "AgentSpec",
    "Artifacts",
    "BudgetSpent",
    "EnvSpec",
    "EvalConfig",
    "LLMBudget",
    "MemorySpec",
    "Needs",
    "build_agent",
    "fingerprint",
    "llm_spent",
    "plays",
    "run_suite",
]

_LOG = logging.getLogger(__name__)


class MemoryPlan(NamedTuple):
    """The store of one episode: where it is and whether it stays (picklable)."""

    url: str
    schema: str | None
    keep: bool


def _needs_memory(spec: AgentSpec) -> bool:
    return "memory" in spec.needs.tracker


def _memory_plan(
    memory: MemorySpec, out: Path, env: str, horizon: int, agent: str, seed: int
) -> MemoryPlan:
    label = re.sub(r"[^A-Za-z0-9_.-]", "_", f"{env}__h{horizon}__{agent}__s{seed}")
    if memory.backend == "sqlite":
        return MemoryPlan(str(out / memory.dir / f"{label}.db"), None, memory.keep)
    # One schema per (run folder, episode): reruns of an episode reuse and wipe it.
    digest = hashlib.sha256(f"{out.resolve()}|{label}".encode()).hexdigest()[:16]
    return MemoryPlan(str(memory.url), f"wm_{digest}", memory.keep)


def _open_memory(plan: MemoryPlan) -> StateManager:
    """Open an empty store for one episode, wiping what a killed earlier try left."""
    if plan.schema is None:
        for leftover in sqlite_files(plan.url):
            leftover.unlink(missing_ok=True)
    else:
        engine = sa.create_engine(plan.url)
        try:
            with engine.begin() as conn:
                conn.execute(sa.schema.DropSchema(plan.schema, cascade=True, if_exists=True))
        finally:
            engine.dispose()
    return StateManager.open(plan.url, schema=plan.schema)


def _close_memory(memory: StateManager, plan: MemoryPlan) -> None:
    if not plan.keep and plan.schema is not None:
        memory.store.drop()
    memory.close()
    if not plan.keep and plan.schema is None:
        for path in sqlite_files(plan.url):
            path.unlink(missing_ok=True)


def build_agent(
    name: str,
    spec: AgentSpec,
    env: Any,
    memory: StateManager | None = None,
    artifacts: Artifacts | None = None,
) -> Agent:
    """Build agent ``name`` from its spec for ``env``: the one build step.

    Runtime arguments enter here only, and only as ``spec.needs`` lists them: the
    policy's ``simulator`` node is built and completed with its listed arguments (the
    live ``env``, the env's ``reader``, the env's distilled ``rules``) and passed to the
    policy as ``simulator``; its ``value_fn`` node likewise (the env's value network,
    ``checkpoint``); the policy node itself with its own (the live ``env``, for an
    oracle; the env's registered ``env_id``); the tracker node with its own
    (``reader``, ``memory``, ``rules``).

    Args:
        name: the agent's name.
        spec: its spec.
        env: the episode's env.
        memory: the episode's fresh store (for a tracker that lists ``memory``).
        artifacts: what was trained for this env (for parts that list ``rules`` or
            ``checkpoint``).

    Raises:
        ValueError: a listed argument is not there (the env has no reader, no store
            was given, nothing was trained for the env).
        TypeError: a part does not take what its ``needs`` list.
    """
    trained = artifacts or Artifacts()
    given = {
        "env": env,
        "env_id": getattr(getattr(env.unwrapped, "spec", None), "id", None),
        "reader": getattr(env.unwrapped, "reader", None),
        "memory": memory,
        "rules": trained.rules,
        "checkpoint": trained.checkpoint,
    }
    policy_node = dict(spec.policy)
    for key, part, names in (
        ("simulator", "simulator", spec.needs.simulator),
        ("value_fn", "value", spec.needs.value),
    ):
        node = policy_node.pop(key, None)
        if node is not None:
            policy_node[key] = _build_part(name, part, node, names, given)
    return Agent(
        name=name,
        tracker=_build_part(name, "tracker", spec.tracker, spec.needs.tracker, given),
        policy=_build_part(name, "policy", policy_node, spec.needs.policy, given),
        oracle=spec.oracle,
    )


_ABSENT = {
    "reader": "a reader and the env has none",
    "memory": "a memory store and none was given",
    "env": "the live env and none was given",
    "env_id": "the env's registered id and the env has none (not made by gymnasium.make)",
    "rules": "the env's distilled rules and none were trained (wmkit-eval's training stages)",
    "checkpoint": "the env's value network and none was trained (wmkit-eval's training stages)",
}


def _build_part(
    agent: str, part: str, node: dict[str, Any], names: tuple[str, ...], given: dict[str, Any]
) -> Any:
    """Instantiate ``node``; a partial one is called with the ``names`` of ``given``."""
    built = instantiate(node)
    if node.get("_partial_") is not True:
        return built
    for arg in names:
        if given[arg] is None:
            raise ValueError(f"agent {agent!r}: its {part} needs {_ABSENT[arg]}")
    try:
        return built(**{arg: given[arg] for arg in names})
    except TypeError as err:
        raise TypeError(
            f"agent {agent!r}: its {part} ({node['_target_']}) was given {list(names)} "
            f"(needs.{part}): {err}"
        ) from err


def _episode(
    env_id: str,
    horizon: int,
    env_kwargs: dict[str, Any],
    agent_name: str,
    agent_spec: AgentSpec,
    seed: int,
    heartbeat: bool = False,
    memory_plan: MemoryPlan | None = None,
    artifacts: Artifacts | None = None,
) -> EpisodeRecord:
    """Build the env and agent and play one episode; runs in a worker when isolated.

    With a ``memory_plan`` the episode gets a fresh store there, closed afterwards;
    ``artifacts`` are what was trained for the env.
    """
    env = make_env(env_id, horizon, env_kwargs)
    if heartbeat:
        env = Heartbeat(env)
    memory = None if memory_plan is None else _open_memory(memory_plan)
    try:
        agent = build_agent(agent_name, agent_spec, env, memory, artifacts)
        return play_episode(env, agent, seed)
    finally:
        env.close()
        if memory is not None:
            _close_memory(memory, memory_plan)


class Played(NamedTuple):
    """A finished episode as its worker sends it back: its row and its record file's bytes.

    Both are small beside the pickled :class:`EpisodeRecord` (a 500-step episode pickles
    in about a third of the time it takes to play), so the worker scores and encodes.
    """

    row: dict[str, Any]
    record: bytes | None


def _play(episode: tuple, identity: dict[str, Any], records: bool) -> Played:
    """Play one episode (:func:`_episode` of ``episode``), score it and encode its record.

    Runs where the episode runs: in this process, a worker of ``workers``, or an isolated
    worker. ``identity`` is the episode's place in the suite (the record's meta);
    ``records`` False: no record is encoded.
    """
    record = _episode(*episode)
    return Played(score_episode(record), encode_record(record, identity) if records else None)


def fingerprint(*specs: BaseModel) -> str:
    """A short hash of the specs: a resumed run refuses rows made with other settings.

    Secrets (:func:`wmkit.tracking.is_secret`: ``api_key``, ``*_token``, ...) are left
    out, at any depth: a rotated credential is not a new setting.
    """

    def public(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: public(v) for k, v in value.items() if not is_secret(k)}
        if isinstance(value, list):
            return [public(v) for v in value]
        return value

    text = json.dumps([public(s.model_dump(mode="json")) for s in specs], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _check_artifacts(config: EvalConfig, artifacts: Mapping[str, Artifacts]) -> None:
    """Refuse to start when an agent needs something not trained for an env it runs on."""
    for agent_name, spec in config.agents.items():
        for env_name, env_spec in config.envs.items():
            if not plays(agent_name, spec, env_name, env_spec):
                continue
            have = artifacts.get(env_name, Artifacts())
            missing = sorted(a for a in spec.needs.artifacts if getattr(have, a) is None)
            if missing:
                raise ValueError(
                    f"agent {agent_name!r} needs the {' and '.join(missing)} trained for "
                    f"env {env_name!r} and none were given: wmkit-eval trains them first "
                    "(wmkit.scripts.pipeline); to call run_suite yourself, pass artifacts="
                )


def _log_episode(n: int, total: int, row: Mapping[str, Any]) -> None:
    """One line per finished episode in the run's log (INFO: the log file, not the terminal)."""
    where = f"{row['env']} h={row['horizon']} seed={row['seed']} {row['agent']}"
    if "failed" in row:
        _LOG.info("episode %d/%d %s failed: %s", n, total, where, row["failed"].splitlines()[0])
        return
    drift = row.get("drift", {}).get("mean")
    _LOG.info(
        "episode %d/%d %s: score %s/%s, %s steps, drift %s",
        n, total, where, row.get("score"), row.get("max_score"), row.get("steps"),
        "-" if drift is None else f"{drift:.3f}",
    )  # fmt: skip


def llm_spent(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """What the rows' LLM agents spent in all: ``tokens`` (in + out), ``calls``, ``cost``.

    Rows without ``llm`` (agents that called no model, failed episodes) add nothing.
    """
    spent = {"tokens": 0.0, "calls": 0.0, "cost": 0.0}
    for row in rows:
        _add_spent(spent, row)
    return spent


def _add_spent(spent: dict[str, float], row: Mapping[str, Any]) -> None:
    usage = row.get("llm")
    if usage is not None:
        spent["tokens"] += usage["tokens_in"] + usage["tokens_out"]
        spent["calls"] += usage["calls"]
        spent["cost"] += usage["cost"]


class BudgetSpent(NamedTuple):
    """A run stopped by its LLM budget (:class:`LLMBudget`) before its plan was played.

    Attributes:
        cap: the cap reached: ``max_tokens``, ``max_calls`` or ``max_cost``.
        spent: what the run folder's rows had spent of it when the check stopped the run.
        limit: the cap's value.
        unplayed: the episodes of the plan never started.
    """

    cap: str
    spent: float
    limit: float
    unplayed: int

    @property
    def message(self) -> str:
        """The sentence ``wmkit-eval`` ends on: what was spent, what is left, what to do."""
        amount = {
            "max_tokens": f"{self.spent:.0f} tokens",
            "max_calls": f"{self.spent:.0f} calls",
            "max_cost": f"a cost of {self.spent:.4g}",
        }[self.cap]
        episodes = "episode" if self.unplayed == 1 else "episodes"
        return (
            f"LLM budget spent: {amount} of {self.cap}={self.limit:g}; {self.unplayed} "
            f"{episodes} not played; rerun the same command with a larger llm.budget to go on"
        )


def run_suite(
    config: EvalConfig,
    out_dir: str | Path,
    *,
    variant: str = "",
    console: Console | None = None,
    artifacts: Mapping[str, Artifacts] | None = None,
    on_episode: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run every (env, horizon, seed, agent) episode not yet in ``out_dir``, then rank.

    An agent plays the envs :func:`plays` allows (its ``envs``, the env's ``agents``).
    Progress counts steps (an episode weighs its horizon), so the time left is estimated
    from the steps played. Before each episode starts, the rows so far (resumed ones
    included) are checked against ``config.llm.budget``: once a cap is reached no more
    start, those running finish and are written, and the leaderboard is written of what
    finished (see the module docstring).

    Args:
        config: the validated suite.
        out_dir: where ``results.jsonl``, ``leaderboard.md``, the plot and (with
            ``config.records``) the episode records (``records/``) go.
        variant: a label for this run's settings (a sweep job's overrides), kept in every
            row so a merged sweep leaderboard keeps the jobs apart.
        console: rich console for progress (a quiet one when None).
        artifacts: per env name, what was trained for it (the agents whose ``needs``
            list ``rules`` or ``checkpoint`` are given these paths). They are part of
            the agent's settings: a resumed run trained anew refuses its old rows.
        on_episode: called with each episode's results row (a ``failed`` one too) once
            it is written, e.g. to log it (``wmkit.scripts.tracking.episode_logger``).

    Returns:
        Paths of the written ``results`` file and leaderboard (``markdown``, ``plot``,
        ``csv``, ``tidy``, ``html``: :func:`~wmkit.evals.leaderboard.write_leaderboard`);
        and, only when the LLM budget stopped the run before its plan was played,
        ``budget``: the :class:`BudgetSpent` (its ``message`` is printed, too).

    Raises:
        ValueError: an agent needs an artifact not given for an env it runs on, an env
            needs a package that is not installed, or the run folder holds rows made
            with other settings.
    """
    out = Path(out_dir)
    artifacts = dict(artifacts or {})
    _check_artifacts(config, artifacts)
    modules = {name: env_module(spec.id) for name, spec in config.envs.items()}
    results = ResultsFile(out / "results.jsonl")
    rows = list(results.rows()) if config.resume else []
    done = {episode_key(r): r["spec"] for r in rows}

    def trained(env_name: str, spec: AgentSpec) -> Artifacts | None:
        return artifacts.get(env_name, Artifacts()) if spec.needs.artifacts else None

    specs = {
        (env_name, agent_name): fingerprint(
            env_spec, agent_spec, *filter(None, [trained(env_name, agent_spec)])
        )
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
        for env_name, env_spec in config.envs.items()
        for horizon in config.horizons
        for seed in config.seeds
        for agent_name, agent_spec in config.agents.items()
        if plays(agent_name, agent_spec, env_name, env_spec)
    ]
    console = console or Console(quiet=not config.progress)
    if config.retry_failed:  # a failed row of this plan is replaced, not repeated
        planned = {(env, horizon, agent, seed) for env, horizon, seed, agent in plan}
        retry = [r for r in rows if "failed" in r and episode_key(r) in planned]
        if retry:
            rows = [r for r in rows if not ("failed" in r and episode_key(r) in planned)]
            results.rewrite(rows)
            done = {episode_key(r): r["spec"] for r in rows}
            console.print(f"retrying {len(retry)} failed episodes (retry_failed=false keeps them)")
    plan = [(e, h, s, a) for e, h, s, a in plan if (e, h, a, s) not in done]
    for agent_name, agent_spec in config.agents.items():
        if agent_spec.envs:
            console.print(f"{agent_name} plays {', '.join(agent_spec.envs)} only (its envs)")
    for env_name, env_spec in config.envs.items():
        if env_spec.agents:
            console.print(f"{env_name} is played by {', '.join(env_spec.agents)} only (its agents)")
    if done:
        console.print(f"resuming: {len(done)} episodes already in {results.path}", markup=False)

    def identity_of(env_name: str, horizon: int, seed: int, agent_name: str) -> dict[str, Any]:
        agent_spec = config.agents[agent_name]
        return dict(
            env=env_name,
            env_id=config.envs[env_name].id,
            horizon=horizon,
            seed=seed,
            agent=agent_name,
            oracle=agent_spec.oracle,
            privileged=list(agent_spec.privileged),
            variant=variant,
            spec=specs[(env_name, agent_name)],
        )

    def task_of(n: int, item: tuple[str, int, int, str]) -> Task:
        env_name, horizon, seed, agent_name = item
        spec, agent_spec = config.envs[env_name], config.agents[agent_name]
        plan_memory = (
            _memory_plan(config.memory, out, env_name, horizon, agent_name, seed)
            if _needs_memory(agent_spec)
            else None
        )
        episode = (spec.id, horizon, spec.kwargs, agent_name, agent_spec, seed)
        episode += (spec.isolate, plan_memory, trained(env_name, agent_spec))
        args = (episode, identity_of(*item), config.records)
        isolate = None
        if spec.isolate:
            isolate = Isolation(str(spec.kwargs.get("game", spec.id)), spec.heartbeat_timeout)
        return Task((n, item), _play, args, isolate)

    spent = llm_spent(rows)
    stopped: list[BudgetSpent] = []

    def tasks() -> Iterator[Task]:
        # run_tasks takes the next task only as a worker is free, after the rows of the
        # episodes finished so far were written: each is checked against the cap then.
        for n, item in enumerate(plan, start=1):
            reached = config.llm.budget.reached(spent)
            if reached is not None:
                stopped.append(BudgetSpent(*reached, unplayed=len(plan) - n + 1))
                console.print(stopped[0].message, style="yellow", markup=False)
                return
            yield task_of(n, item)

    with progress_bar(console, disable=not config.progress) as bar:
        task = bar.add_task("evaluate", total=sum(horizon for _, horizon, _, _ in plan))

        def describe(job: Task) -> None:
            n, (env_name, horizon, seed, agent_name) = job.key
            bar.update(
                task,
                description=episode_description(
                    "evaluate", n, len(plan), env_name, horizon, seed, agent_name
                ),
            )

        finished = run_tasks(
            tasks(), workers=config.workers, preload=sorted(set(modules.values())), started=describe
        )
        for job, outcome in finished:
            n, (env_name, horizon, seed, agent_name) = job.key
            identity = job.args[1]
            where = record_path(out, env_name, horizon, agent_name, seed)
            if isinstance(outcome, EpisodeFailed):
                console.print(
                    f"[red]episode failed[/red] {env_name} seed={seed}: {escape(str(outcome))}"
                )
                row: dict[str, Any] = {"failed": str(outcome)}
                where.unlink(missing_ok=True)  # a finished earlier try's record is not this row's
            else:
                row = outcome.row
                if outcome.record is not None:  # before the row: every finished row has its record
                    write_record_file(where, outcome.record)
            results.append(row | identity)
            _add_spent(spent, row)
            _log_episode(n, len(plan), row | identity)
            if on_episode is not None:
                on_episode(row | identity)
            bar.advance(task, horizon)
    paths: dict[str, Any] = {
        "results": results.path,
        **write_leaderboard(list(results.rows()), out),
    }
    if stopped:
        paths["budget"] = stopped[0]
    return paths
