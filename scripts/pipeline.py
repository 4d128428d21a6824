"""The main job's training stages, run before the evaluation and cached by fingerprint.

For every env of the suite whose agents need something trained (an agent whose ``needs``
list ``rules`` or ``checkpoint``, :class:`~wmkit.evals.suite.Needs`), ``wmkit-eval``
first runs, in this process and with the stages' own functions:

1. **collect** (:func:`wmkit.scripts.collect.collect`): ``pipeline.collect.agents`` play
   the env at ``pipeline.collect.horizons`` on ``train_seeds`` and are recorded;
2. **distill** (:func:`wmkit.scripts.distill.distill`): rules from those episodes,
   with ``pipeline.distill`` (``configs/stage/distill.yaml``), when an agent needs
   ``rules``;
3. **train_value** (:func:`wmkit.trainers.value.train_value`): the value network from
   the same episodes, with ``pipeline.train_value`` (``configs/stage/train_value.yaml``),
   when an agent needs ``checkpoint``;
4. with ``pipeline.expert_iteration``, its rounds (:mod:`wmkit.scripts.expert_iteration`:
   collect with a search over the last network, train on everything so far, evaluate);
   the agents get the last round's network.

Each stage of each env writes one folder, ``<cache_dir>/<stage>/<fingerprint>/``: its
output and ``stage.json`` (what it was made from, when, in how many seconds). The
fingerprint hashes everything the output depends on (:class:`StageKey`): the stage's
settings, the fingerprints of the stages it reads (distill and train_value read
collect's episodes, neither reads the other's), :data:`CACHE_VERSION` and the source of
the code the stage runs. A folder that is there is reused, so a rerun trains nothing, a
changed distill setting redistills the rules and retrains nothing else, and an edited
env recollects and retrains what depends on it. A folder is written under a temporary
name and renamed when whole: a killed stage leaves nothing a later run takes for done,
and two runs making the same folder at once keep one.

Training seeds are never evaluated: :class:`~wmkit.evals.suite.EvalConfig` refuses a
config whose ``seeds`` meet its ``train_seeds``.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from rich.console import Console

from wmkit.evals.suite import AgentSpec, Artifacts, EvalConfig, plays
from wmkit.scripts import distill as distill_script
from wmkit.scripts import train_value as train_value_script
from wmkit.scripts.collect import CollectConfig, collect
from wmkit.scripts.distill import DistillConfig
from wmkit.scripts.expert_iteration import ExpertIterationStage
from wmkit.scripts.stages import STAGE_FILE, StageKey, StageRun, cached, code_hash, stage_table
from wmkit.tracking import RunLogger
from wmkit.trainers.value import REPORT_FILE as VALUE_REPORT_FILE
from wmkit.trainers.value import VALUE_FILE, TrainValueConfig, train_value

__all__ = [
    "STAGE_FILE",
    "CollectStage",
    "PipelineConfig",
    "StageRun",
    "run_pipeline",
    "stage_table",
]

# Config keys the pipeline sets itself, or that do not change what a stage makes.
_DISTILL_RUN_ONLY = frozenset({"data_dirs", "out_dir", "progress"})
_VALUE_RUN_ONLY = frozenset({"data_dirs", "out_dir", "device", "threads", "resume", "progress"})
_PLACEHOLDER = ["<collected episodes>"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CollectStage(_Strict):
    """Who plays the training episodes, and how long they are (``pipeline.collect``).

    The envs are the suite's and the seeds its ``train_seeds``; the rest is
    :class:`~wmkit.scripts.collect.CollectConfig`'s.
    """

    agents: dict[str, AgentSpec] = Field(min_length=1)
    horizons: list[int] = Field(min_length=1)
    state_relations: list[str] | None = ["status"]
    shard_rows: int = Field(default=50_000, ge=1)
    shard_bytes: int = Field(default=128 << 20, ge=1)

    @field_validator("agents")
    @classmethod
    def _plays_untrained(cls, agents: dict[str, AgentSpec]) -> dict[str, AgentSpec]:
        for name, spec in agents.items():
            if spec.needs.artifacts:
                raise ValueError(
                    f"collect agent {name!r} needs {sorted(spec.needs.artifacts)}, which are "
                    "trained from the collected episodes: collect with agents that need none"
                )
        return agents


class PipelineConfig(_Strict):
    """The validated ``pipeline`` section of ``wmkit-eval``'s config.

    Attributes:
        cache_dir: where the stages' folders go (``<cache_dir>/<stage>/<fingerprint>/``).
        collect: the collect stage's settings (None: no stage may run; a config whose
            agents need nothing trained does without).
        distill: :class:`~wmkit.scripts.distill.DistillConfig`'s settings but
            ``data_dirs``, ``out_dir`` and ``progress`` (the pipeline sets them).
        train_value: :class:`~wmkit.trainers.value.TrainValueConfig`'s settings but
            ``data_dirs``, ``out_dir``, ``resume`` and ``progress``.
        expert_iteration: rounds of search and training after the first network
            (None: none; :class:`~wmkit.scripts.expert_iteration.ExpertIterationStage`).
    """

    cache_dir: str = Field(default="runs/cache", min_length=1)
    collect: CollectStage | None = None
    distill: dict[str, Any] = Field(default_factory=dict)
    train_value: dict[str, Any] = Field(default_factory=dict)
    expert_iteration: ExpertIterationStage | None = None

    @model_validator(mode="after")
    def _stage_settings_validate(self) -> PipelineConfig:
        for section, reserved in (
            ("distill", _DISTILL_RUN_ONLY),
            ("train_value", {"data_dirs", "out_dir", "resume", "progress"}),
        ):
            taken = sorted(set(getattr(self, section)) & reserved)
            if taken:
                raise ValueError(f"pipeline.{section} may not set {taken}: the pipeline does")
        self.distill_config(_PLACEHOLDER, progress=False)
        self.train_value_config(_PLACEHOLDER, progress=False)
        return self

    def distill_config(self, data_dirs: list[str], *, progress: bool) -> DistillConfig:
        """The distill stage's config for ``data_dirs``."""
        return DistillConfig(**self.distill, data_dirs=data_dirs, progress=progress)

    def train_value_config(self, data_dirs: list[str], *, progress: bool) -> TrainValueConfig:
        """The train_value stage's config for ``data_dirs`` (never resumed: each is new)."""
        return TrainValueConfig(
            **self.train_value, data_dirs=data_dirs, resume=False, progress=progress
        )


def _public(config: BaseModel, leave_out: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in config.model_dump(mode="json").items() if k not in leave_out}


def _needed(config: EvalConfig) -> dict[str, frozenset[str]]:
    """Per env name, the artifacts its agents need (envs that need none left out)."""
    needed = {}
    for env_name, env in config.envs.items():
        wanted = frozenset().union(
            *(s.needs.artifacts for a, s in config.agents.items() if plays(a, s, env_name, env))
        )
        if wanted:
            needed[env_name] = wanted
    return needed


def run_pipeline(
    config: EvalConfig,
    pipeline: PipelineConfig,
    *,
    console: Console,
    logger: RunLogger | None = None,
) -> tuple[dict[str, Artifacts], list[StageRun]]:
    """Run (or find cached) the training stages the suite's agents need.

    With a ``logger``, the stages that run (not those found cached) log what they make:
    distill its report under ``distill/<env>/`` and the rules as the artifact
    ``rules-<env>``; train_value each training step and epoch under
    ``train_value/<env>/`` (expert iteration's rounds under ``train_value@<r>/<env>/``),
    its scores, and the network as the artifact ``value-<env>``.

    Returns:
        Per env name, what was trained for it (what :func:`~wmkit.evals.suite.run_suite`
        passes to the agents), and every stage of this run in order.

    Raises:
        ValueError: an agent needs something trained and ``train_seeds`` is empty, or a
            stage failed (a collected episode crashed, a data folder is empty, ...).
    """
    needed = _needed(config)
    if needed and not config.train_seeds:
        raise ValueError(
            f"agents need {sorted(set().union(*needed.values()))} trained for envs "
            f"{sorted(needed)}, and train_seeds is empty: give the training episodes' seeds"
        )
    if needed and pipeline.collect is None:
        raise ValueError(
            f"agents need {sorted(set().union(*needed.values()))} trained, and the config "
            "has no pipeline.collect section saying who plays the training episodes"
        )
    cache_dir = Path(pipeline.cache_dir)
    artifacts: dict[str, Artifacts] = {}
    runs: list[StageRun] = []
    for env_name, wanted in needed.items():
        collected = _collect_stage(config, pipeline.collect, env_name, cache_dir, console)
        runs.append(collected)
        rules = checkpoint = None
        if "rules" in wanted:
            runs.append(_distill_stage(config, pipeline, collected, cache_dir, console))
            rules = str(runs[-1].path / env_name / distill_script.RULES_FILE)
            if logger is not None and not runs[-1].cached:
                report = json.loads((runs[-1].path / distill_script.REPORT_FILE).read_text())
                distill_script.log_report(logger, report, runs[-1].path)
        if "checkpoint" in wanted:
            net = _value_stage(config, pipeline, [collected], cache_dir, console, logger)
            runs.append(net)
            if pipeline.expert_iteration is not None:
                rounds = _expert_rounds(
                    config, pipeline, env_name, collected, net, rules, cache_dir, console, logger
                )
                runs += rounds
                net = next((s for s in reversed(rounds) if s.stage.startswith("train_")), net)
            checkpoint = str(net.path / VALUE_FILE)
        artifacts[env_name] = Artifacts(rules=rules, checkpoint=checkpoint)
    return artifacts, runs


def _collect_stage(
    config: EvalConfig, stage: CollectStage, env_name: str, cache_dir: Path, console: Console
) -> StageRun:
    """Record the training episodes of ``env_name`` (``<folder>/<env_name>/``).

    The collect agents that play the env (:func:`~wmkit.evals.suite.plays`) play them:
    the folder's fingerprint holds those only.
    """
    env = config.envs[env_name]
    players = {a: s for a, s in stage.agents.items() if plays(a, s, env_name, env)}
    if not players:
        raise ValueError(
            f"no agent of pipeline.collect.agents {sorted(stage.agents)} plays env "
            f"{env_name!r} (its agents: {list(env.agents) or 'any'}), whose agents need "
            "training: add one that does"
        )
    collect_config = CollectConfig(
        envs={env_name: env},
        agents=players,
        horizons=stage.horizons,
        seeds=config.train_seeds,
        shard_rows=stage.shard_rows,
        shard_bytes=stage.shard_bytes,
        state_relations=stage.state_relations,
        progress=config.progress,
    )
    key = StageKey(
        stage="collect", env=env_name, code=code_hash("collect"),
        settings=_public(collect_config, frozenset({"data_dir", "progress"})),
    )  # fmt: skip

    def make(out: Path) -> None:
        summary = collect(collect_config, out, console=console)[env_name]
        if summary["failed"]:
            raise ValueError(
                f"collect {env_name}: {summary['failed']} training episodes failed; "
                "nothing is kept (see the errors above)"
            )

    return cached(cache_dir, key, make, console=console)


def _distill_stage(
    config: EvalConfig, pipeline: PipelineConfig, collected: StageRun, cache_dir: Path,
    console: Console,
) -> StageRun:  # fmt: skip
    """Distil the rules of ``collected``'s env (``<folder>/<env_name>/rules.jsonl``)."""
    distill_config = pipeline.distill_config(
        [str(collected.path / collected.env)], progress=config.progress
    )
    unused = "llm" if distill_config.distiller == "counting" else "counting"
    key = StageKey(
        stage="distill", env=collected.env, code=code_hash("distill"),
        settings=_public(distill_config, _DISTILL_RUN_ONLY | {unused}),
        inputs={"collect": collected.fingerprint},
    )  # fmt: skip

    def make(out: Path) -> None:
        report = distill_script.distill(distill_config, out, console=console)
        console.print(distill_script.table(report))

    return cached(cache_dir, key, make, console=console)


def _value_stage(
    config: EvalConfig, pipeline: PipelineConfig, collected: list[StageRun], cache_dir: Path,
    console: Console, logger: RunLogger | None, round_: int = 0,
) -> StageRun:  # fmt: skip
    """Train the network of an env on ``collected``'s episodes (``<folder>/value.pt``).

    With a ``logger``, a stage that runs logs every training step and epoch under
    ``train_value/<env>`` (``train_value@<round>/<env>`` for expert iteration's), its
    scores, and the network as the artifact ``value-<env>``.
    """
    env_name = collected[0].env
    value_config = pipeline.train_value_config(
        [str(c.path / env_name) for c in collected], progress=config.progress
    )
    stage = f"train_value@{round_}" if round_ else "train_value"
    prefix = f"{stage}/{env_name}"
    log_fn = None if logger is None else functools.partial(logger.log_metrics, prefix=prefix)
    key = StageKey(
        stage=stage, env=env_name, code=code_hash("train_value"),
        settings=_public(value_config, _VALUE_RUN_ONLY),
        inputs={c.stage: c.fingerprint for c in collected},
    )  # fmt: skip

    def make(out: Path) -> None:
        report = train_value(value_config, out, console=console, log_fn=log_fn)
        console.print(train_value_script.table(report))

    run = cached(cache_dir, key, make, console=console)
    if logger is not None and not run.cached:
        report = json.loads((run.path / VALUE_REPORT_FILE).read_text())
        train_value_script.log_report(
            logger, report, run.path, prefix=prefix, artifact=f"value-{env_name}"
        )
    return run


def _expert_rounds(
    config: EvalConfig, pipeline: PipelineConfig, env_name: str, collected: StageRun,
    first: StageRun, rules: str | None, cache_dir: Path, console: Console,
    logger: RunLogger | None,
) -> list[StageRun]:  # fmt: skip
    """Expert iteration's rounds for one env (:mod:`wmkit.scripts.expert_iteration`).

    Returns the stages in order: ``evaluate@0``, then per round ``collect@r``,
    ``train_value@r`` and ``evaluate@r`` (the evaluations only with ``eval_seeds``).
    """
    ei = pipeline.expert_iteration
    assert ei is not None
    env = config.envs[env_name]
    collecting = ei.collecting()
    players = {a: s for a, s in ei.agents.items() if plays(a, s, env_name, env)}
    if not players:
        raise ValueError(
            f"no agent of pipeline.expert_iteration.agents {sorted(ei.agents)} plays env "
            f"{env_name!r}, whose agents need a network: add one that does"
        )
    overlap = sorted(set(ei.eval_seeds) & set(config.train_seeds))
    if overlap:
        raise ValueError(f"pipeline.expert_iteration.eval_seeds meet train_seeds: {overlap}")

    def search(net: StageRun, stage: str, seeds: list[int]) -> StageRun:
        """Play ``players`` on ``seeds`` with ``net``'s network, recording the search.

        The rounds' collection searches with ``budget_scale`` times the simulations;
        their evaluation with the agents' own.
        """
        agents = players if stage.startswith("evaluate") else {a: collecting[a] for a in players}
        collect_config = CollectConfig(
            envs={env_name: env}, agents=agents, horizons=ei.horizons, seeds=seeds,
            tag=f"{stage}/", state_relations=pipeline.collect.state_relations,  # type: ignore[union-attr]
            progress=config.progress,
        )  # fmt: skip
        trained = {env_name: Artifacts(rules=rules, checkpoint=str(net.path / VALUE_FILE))}
        key = StageKey(
            stage=stage, env=env_name, code=code_hash("search_collect"),
            settings=_public(collect_config, frozenset({"data_dir", "progress"})),
            inputs={"train_value": net.fingerprint, "rules": rules or ""},
        )  # fmt: skip

        def make(out: Path) -> None:
            summary = collect(collect_config, out, console=console, artifacts=trained)[env_name]
            if summary["failed"]:
                raise ValueError(f"{stage} {env_name}: {summary['failed']} episodes failed")

        return cached(cache_dir, key, make, console=console)

    runs: list[StageRun] = []
    data, net = [collected], first
    for r in range(ei.rounds + 1):
        if r:
            data.append(search(net, f"collect@{r}", config.train_seeds))
            net = _value_stage(config, pipeline, data, cache_dir, console, logger, r)
            runs += [data[-1], net]
        if ei.eval_seeds:
            runs.append(search(net, f"evaluate@{r}", ei.eval_seeds))
    return runs


