"""The training stages' cache: one folder per stage, named by a fingerprint of its inputs.

Every stage of :mod:`wmkit.scripts.pipeline` (collect, distill, train_value) and of
:mod:`wmkit.scripts.expert_iteration` (the rounds' collect, train_value and evaluate)
writes one folder, ``<cache_dir>/<stage>/<fingerprint>/``, through :func:`cached`: its
output and ``stage.json`` (what it was made from, when, in how many seconds). The
fingerprint hashes everything the output depends on (:class:`StageKey`): the stage's
settings, the fingerprints of the stage folders it reads, :data:`CACHE_VERSION` and the
source of the code the stage runs. A folder that is there is reused; a folder is
written under a temporary name and renamed when whole, so a killed stage leaves nothing
a later run takes for done, and two runs making the same folder at once keep one.
"""

from __future__ import annotations

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

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from wmkit.evals.suite import fingerprint

__all__ = [
    "CACHE_VERSION",
    "STAGE_FILE",
    "StageKey",
    "StageRun",
    "cached",
    "code_hash",
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
    # Expert iteration's rounds: collect with the last round's network, then train;
    # the evaluation of a round plays episodes (the collect stage's code).
    "search_collect": ("wmkit", "wmkit.envs", "wmkit.evals.runner", "wmkit.evals.suite",
                       "wmkit.evals.isolation", "wmkit.scripts.collect"),
}  # fmt: skip


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StageKey(_Strict):
    """Everything a stage folder's content depends on; its fingerprint names the folder.

    Attributes:
        stage: ``collect``, ``distill``, ``train_value`` (expert iteration: their
            rounds, ``collect@<round>``, ``train_value@<round>``, ``evaluate@<round>``).
        env: the suite's env name.
        version: :data:`CACHE_VERSION`.
        code: the hash of the stage's source (:func:`code_hash`).
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
def code_hash(stage: str) -> str:
    """SHA-256 over the source files of the modules and packages the stage runs."""
    h = hashlib.sha256()
    for name in _CODE[stage.split("@")[0]]:
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


def cached(
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


def stage_table(runs: list[StageRun]) -> Table:
    """The stages of a run: env, stage, made now or found cached, seconds, folder."""
    grid = Table(title="training stages (cached: found, not rerun)")
    for name in ("env", "stage", "status", "seconds", "folder"):
        grid.add_column(name, justify="right" if name == "seconds" else "left")
    for r in runs:
        status = "cached" if r.cached else "made"
        grid.add_row(r.env, r.stage, status, f"{r.seconds:.1f}", str(r.path))
    return grid
