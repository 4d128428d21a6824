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
   when an agent needs ``checkpoint``.

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
import hashlib
import importlib.util
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from rich.console import Console
from rich.table import Table

from wmkit.evals.suite import AgentSpec, Artifacts, EvalConfig, fingerprint, plays
from wmkit.scripts import distill as distill_script
from wmkit.scripts import train_value as train_value_script
from wmkit.scripts.collect import CollectConfig, collect
from wmkit.scripts.distill import DistillConfig
from wmkit.tracking import RunLogger
from wmkit.trainers.value import REPORT_FILE as VALUE_REPORT_FILE
from wmkit.trainers.value import VALUE_FILE, TrainValueConfig, train_value

__all__ = [
    "CACHE_VERSION",
    "STAGE_FILE",
    "CollectStage",
    "PipelineConfig",
    "StageKey",
    "StageRun",
    "run_pipeline",
    "stage_table",
]

CACHE_VERSION = 1
"""Part of every fingerprint: bump it when what a stage writes changes in a way its
source hash would not show (a dependency's behaviour, the cache layout)."""
STAGE_FILE = "stage.json"
"""In every stage folder: the key it was made from, when, and in how many seconds."""

# The code each stage runs, whose source goes into its fingerprint: an edit retrains.
_CODE = {
    "collect": ("wmkit", "wmkit.envs", "wmkit.evals.runner", "wmkit.evals.suite",
                "wmkit.evals.isolation", "wmkit.scripts.collect"),
    "distill": ("wmkit.knowledge", "wmkit.llm", "wmkit.world", "wmkit.trainers.distill",
                "wmkit.trainers.rewards", "wmkit.trainers.types", "wmkit.scripts.distill"),
    "train_value": ("wmkit.knowledge.recording", "wmkit.search.value_net",
                    "wmkit.trainers.value", "wmkit.trainers.distill"),
}  # fmt: skip
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
    """

    cache_dir: str = Field(default="runs/cache", min_length=1)
    collect: CollectStage | None = None
    distill: dict[str, Any] = Field(default_factory=dict)
    train_value: dict[str, Any] = Field(default_factory=dict)

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


class StageKey(_Strict):
    """Everything a stage folder's content depends on; its fingerprint names the folder.

    Attributes:
        stage: ``collect``, ``distill`` or ``train_value``.
        env: the suite's env name.
        version: :data:`CACHE_VERSION`.
        code: the hash of the stage's source (:func:`_code_hash`).
        settings: the stage's settings, without those that change nothing it makes.
        inputs: the fingerprints of the stage folders it reads, by stage.
    """

    stage: str
    env: str
    version: int = CACHE_VERSION
    code: str
    settings: dict[str, Any]
    inputs: dict[str, str] = Field(default_factory=dict)


class StageRun(NamedTuple):
    """One stage of one env in this run: where its folder is and whether it was there."""

    stage: str
    env: str
    fingerprint: str
    path: Path
    cached: bool
    seconds: float


@cache
def _code_hash(stage: str) -> str:
    """SHA-256 over the source files of the modules and packages the stage runs."""
    h = hashlib.sha256()
    for name in _CODE[stage]:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            raise RuntimeError(f"cannot find module {name} to fingerprint stage {stage}")
        if spec.submodule_search_locations:
            root = Path(next(iter(spec.submodule_search_locations)))
            files = sorted(root.rglob("*.py"))
        else:
            root, files = Path(spec.origin).parent, [Path(spec.origin)]
        for path in files:
            h.update(f"{name}:{path.relative_to(root).as_posix()}\0".encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def _cached(
    cache_dir: Path, key: StageKey, make: Callable[[Path], None], *, console: Console
) -> StageRun:
    """The stage folder of ``key``: reused when it is there, else made by ``make(tmp)``.

    ``make`` writes into an empty temporary folder, renamed to the stage folder when it
    returns; if it raises, the temporary folder is removed.
    """
    fp = fingerprint(key)
    final = cache_dir / key.stage / fp
    if (final / STAGE_FILE).is_file():
        console.print(f"{key.stage} {key.env}: cached ({final})")
        return StageRun(key.stage, key.env, fp, final, True, 0.0)
    _remove_orphans(final)
    tmp = final.with_name(f".{fp}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.mkdir(parents=True)
    began = time.perf_counter()
    try:
        make(tmp)
        seconds = time.perf_counter() - began
        record = {"fingerprint": fp, "key": key.model_dump(mode="json"),
                  "seconds": round(seconds, 3), "created": time.time()}  # fmt: skip
        (tmp / STAGE_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        try:
            tmp.rename(final)
        except OSError:  # another run made it meanwhile: keep theirs
            if not (final / STAGE_FILE).is_file():
                raise
            shutil.rmtree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    console.print(f"{key.stage} {key.env}: done in {seconds:.1f}s ({final})")
    return StageRun(key.stage, key.env, fp, final, False, seconds)


def _remove_orphans(final: Path) -> None:
    """Remove the temporary folders of ``final`` left by runs that were killed."""
    if not final.parent.is_dir():
        return
    for tmp in final.parent.glob(f".{final.name}.tmp-*"):
        pid = tmp.name.rsplit("-", 2)[-2]
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except (ValueError, PermissionError):  # not our naming, or another user's run
            continue


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
    ``train_value/<env>/``, its scores, and the network as the artifact ``value-<env>``.

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
            prefix = f"train_value/{env_name}"
            steps = None if logger is None else functools.partial(logger.log_metrics, prefix=prefix)
            runs.append(_value_stage(config, pipeline, collected, cache_dir, console, steps))
            checkpoint = str(runs[-1].path / VALUE_FILE)
            if logger is not None and not runs[-1].cached:
                report = json.loads((runs[-1].path / VALUE_REPORT_FILE).read_text())
                train_value_script.log_report(
                    logger, report, runs[-1].path, prefix=prefix, artifact=f"value-{env_name}"
                )
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
        stage="collect", env=env_name, code=_code_hash("collect"),
        settings=_public(collect_config, frozenset({"data_dir", "progress"})),
    )  # fmt: skip

    def make(out: Path) -> None:
        summary = collect(collect_config, out, console=console)[env_name]
        if summary["failed"]:
            raise ValueError(
                f"collect {env_name}: {summary['failed']} training episodes failed; "
                "nothing is kept (see the errors above)"
            )

    return _cached(cache_dir, key, make, console=console)


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
        stage="distill", env=collected.env, code=_code_hash("distill"),
        settings=_public(distill_config, _DISTILL_RUN_ONLY | {unused}),
        inputs={"collect": collected.fingerprint},
    )  # fmt: skip

    def make(out: Path) -> None:
        report = distill_script.distill(distill_config, out, console=console)
        console.print(distill_script.table(report))

    return _cached(cache_dir, key, make, console=console)


def _value_stage(
    config: EvalConfig, pipeline: PipelineConfig, collected: StageRun, cache_dir: Path,
    console: Console, log_fn: Callable[[dict[str, float], int], None] | None = None,
) -> StageRun:  # fmt: skip
    """Train the value network of ``collected``'s env (``<folder>/value.pt``).

    ``log_fn`` gets the training steps' metrics (``train_value``'s).
    """
    value_config = pipeline.train_value_config(
        [str(collected.path / collected.env)], progress=config.progress
    )
    key = StageKey(
        stage="train_value", env=collected.env, code=_code_hash("train_value"),
        settings=_public(value_config, _VALUE_RUN_ONLY),
        inputs={"collect": collected.fingerprint},
    )  # fmt: skip

    def make(out: Path) -> None:
        report = train_value(value_config, out, console=console, log_fn=log_fn)
        console.print(train_value_script.table(report))

    return _cached(cache_dir, key, make, console=console)


def stage_table(runs: list[StageRun]) -> Table:
    """The stages of a run: env, stage, made now or found cached, seconds, folder."""
    grid = Table(title="training stages (cached: found, not rerun)")
    for name in ("env", "stage", "status", "seconds", "folder"):
        grid.add_column(name, justify="right" if name == "seconds" else "left")
    for r in runs:
        status = "cached" if r.cached else "made"
        grid.add_row(r.env, r.stage, status, f"{r.seconds:.1f}", str(r.path))
    return grid
