"""Recording trajectories: every step a row, every curious step a scene packet.

Three parts, each small:

* :class:`Recorder`, a ``gymnasium.Wrapper``, turns each ``reset``/``step`` into a
  trajectory row (env, episode, seed, step, observation, action, reward, admissible
  actions, true facts and true delta from ``info["wm.*"]`` when the env gives them).
  What only the agent knows (its tracked facts, its predicted delta, its search
  statistics, its curiosity) reaches the row through :meth:`Recorder.annotate`,
  called after each ``reset``/``step`` once the agent has taken in the result. A row
  carrying a curiosity flag also becomes a :class:`~wmkit.knowledge.scenes.ScenePacket`.
  When an episode is left (``reset`` or ``close``) it goes, whole, to a sink: any
  ``Callable[[RecordedEpisode], None]``.
* :class:`TrajectoryWriter`, the usual sink, owns one env's data folder
  (``data/<env_name>/``): ``trajectories/`` of parquet shards written through HF
  ``datasets`` and ``scenes.jsonl``. It buffers whole episodes and commits a shard
  when the buffer passes ``shard_rows`` rows or ``shard_bytes`` bytes: scenes first
  (one fsync'd batch), then the shard's ``steps.parquet`` and ``episodes.parquet``
  written into a hidden folder that is renamed into place in one atomic step. A killed
  writer loses at most its buffer, never leaves a half shard visible and never a part
  of an episode: a rerun of the lost episodes appends cleanly.
* :class:`RecordingTracker` wraps an agent's tracker so that any loop that drives the
  agent (the eval runner's, for one) annotates the recorder with the tracked state and
  a :class:`~wmkit.knowledge.scenes.CuriosityDetector`'s flag, from the agent's view.

Read back with :func:`load_trajectories` (one row per step) and :func:`load_episodes`
(one row per episode); both work offline. Facts are stored as ``[subject, relation,
object]`` string triples; the schema is fixed (:data:`STEP_FEATURES`,
:data:`EPISODE_FEATURES`) so every shard concatenates.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import datasets
import gymnasium
import numpy as np
import pyarrow as pa
from datasets import Features, List, Value

from wmkit.jsonl import fsync_path
from wmkit.knowledge.scenes import (
    SCENES_FILE,
    Curiosity,
    CuriosityDetector,
    FactDelta,
    SceneLog,
    ScenePacket,
    TrueDelta,
)
from wmkit.world.types import Delta, Fact, Tracker, WorldState

__all__ = [
    "EPISODE_FEATURES",
    "STEP_FEATURES",
    "TRAJECTORIES_DIR",
    "RecordedEpisode",
    "Recorder",
    "RecordingTracker",
    "SearchChild",
    "SearchStats",
    "TrajectoryWriter",
    "env_data_dir",
    "load_episodes",
    "load_trajectories",
    "record_random",
]

TRAJECTORIES_DIR = "trajectories"
"""The shard folder's name inside an env's data folder (``data/<env_name>/``)."""

_FACTS = List(List(Value("string"), length=3))  # [subject, relation, object] triples
_DELTA = {"added": _FACTS, "removed": _FACTS}

STEP_FEATURES = Features(
    {
        "env": Value("string"),
        "env_id": Value("string"),
        "episode": Value("string"),
        "seed": Value("int64"),
        "step": Value("int64"),
        "observation": Value("string"),
        "action": Value("string"),
        "reward": Value("float64"),
        "terminated": Value("bool"),
        "truncated": Value("bool"),
        "admissible_actions": List(Value("string")),
        "tracked_facts": _FACTS,
        "true_facts": _FACTS,
        "predicted_delta": _DELTA,
        "true_delta": {"action": _DELTA, "event": _DELTA},
        "search": {
            "simulations": Value("int64"),
            "nodes": Value("int64"),
            "max_depth": Value("int64"),
            "root_value": Value("float64"),
            "children": List(
                {"action": Value("string"), "visits": Value("int64"), "value": Value("float64")}
            ),
        },
        "curiosity": Value("string"),
    }
)
"""One row per step. Step 0 is the reset (``action`` null, ``reward`` 0); step t follows
the t-th command. ``search`` holds what the search the agent ran from this step's state
found (the one that chose command t+1: root visits per proposed command, the policy
target of ``wmkit-train-value``). Null means "not known": ``seed`` when reset unseeded,
``admissible_actions`` when the env gives none, ``true_facts``/``true_delta`` without
ground truth, ``tracked_facts``/``predicted_delta``/``search`` when the agent did not
annotate them, ``curiosity`` (the reason) when no flag was raised. Fact lists are sorted
(``true_*`` as the env gives them, sorted by the ``wm.*`` contract)."""

EPISODE_FEATURES = Features(
    {
        "env": Value("string"),
        "env_id": Value("string"),
        "episode": Value("string"),
        "agent": Value("string"),
        "seed": Value("int64"),
        "steps": Value("int64"),
        "total_reward": Value("float64"),
        "score": Value("int64"),
        "max_score": Value("int64"),
        "terminated": Value("bool"),
        "truncated": Value("bool"),
        "scenes": Value("int64"),
    }
)
"""One row per episode: ``steps`` commands taken, ``score``/``max_score`` from the last
``info`` (null when the env reports none), ``terminated``/``truncated`` as the last step
said (both false for an episode left early), ``scenes`` curiosity flags raised."""

_STEP_SCHEMA = STEP_FEATURES.arrow_schema
_EPISODE_SCHEMA = EPISODE_FEATURES.arrow_schema
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]*")
_SHARD = "shard-"
_SHARD_NAME = re.compile(r"shard-(\d+)-[0-9a-f]+")


class SearchChild(NamedTuple):
    """Search statistics of one child of the root: its action, visits and mean value."""

    action: str
    visits: int
    value: float


class SearchStats(NamedTuple):
    """What the search from a step's state found (logged as training targets).

    Attributes:
        simulations: simulations run.
        nodes: nodes in the tree when it stopped.
        max_depth: depth of the deepest node.
        root_value: the root's value estimate.
        children: the root's children (the visit distribution is the policy target).
    """

    simulations: int
    nodes: int
    max_depth: int
    root_value: float
    children: tuple[SearchChild, ...] = ()


class RecordedEpisode(NamedTuple):
    """A whole recorded episode, as a :class:`Recorder` hands it to its sink.

    Attributes:
        episode: the episode-table row (:data:`EPISODE_FEATURES`).
        steps: the step rows (:data:`STEP_FEATURES`), step 0 first.
        scenes: the scene packets of its curious steps, in step order.
    """

    episode: dict[str, Any]
    steps: list[dict[str, Any]]
    scenes: list[ScenePacket]


def env_data_dir(root: str | os.PathLike[str], env_name: str) -> Path:
    """Return ``root/<env_name>``, refusing names that are not one plain path part."""
    if not _NAME.fullmatch(env_name):
        raise ValueError(
            f"env name {env_name!r} cannot name a data folder: use letters, digits and "
            "'_.+-', starting with a letter or digit"
        )
    return Path(root) / env_name


def _delta_row(added: Iterable[Sequence[str]], removed: Iterable[Sequence[str]]) -> dict:
    return {"added": sorted(added), "removed": sorted(removed)}


class Recorder(gymnasium.Wrapper):
    """Records every step of the wrapped env; hands each finished episode to ``sink``.

    Usage, per step: ``env.step(action)``, let the agent take in the result, then
    ``recorder.annotate(...)`` with what the agent knows about that step. Every value
    passed to ``annotate`` describes the step just taken, including those the agent
    computed before it (the prediction and the search that chose its action).

    Episode ids are ``f"{episode_prefix}seed={seed}"`` (``run=<n>`` when reset
    unseeded); the prefix should keep episodes of one env's data apart (collection
    uses ``"<agent>/h<horizon>/"``).

    Args:
        env: the env to record; ground truth is recorded when its ``info`` has it.
        sink: receives each episode when it is left (by ``reset`` or ``close``),
            ended or not; e.g. :meth:`TrajectoryWriter.write` or ``list.append``.
        env_name: the env's name in the data (``data/<env_name>/``).
        agent: the agent's name, kept in the episode table.
        episode_prefix: prepended to episode ids.
    """

    def __init__(
        self,
        env: gymnasium.Env,
        sink: Callable[[RecordedEpisode], None],
        *,
        env_name: str,
        agent: str = "",
        episode_prefix: str = "",
    ) -> None:
        super().__init__(env)
        if not env_name:
            raise ValueError("Recorder needs an env_name (the data folder's name)")
        self._sink = sink
        self._env_name = env_name
        self._agent = agent
        self._prefix = episode_prefix
        spec = env.unwrapped.spec
        self._env_id = spec.id if spec is not None else type(env.unwrapped).__name__
        self._runs = 0
        self._head: dict[str, Any] = {}  # env, env_id, episode, seed of the current episode
        self._steps: list[dict[str, Any]] = []
        self._scenes: list[ScenePacket] = []
        self._last_info: Mapping[str, Any] = {}
        self._summary = ""
        self._tracked: WorldState | None = None  # annotated state of the last row
        self._tracked_before: WorldState | None = None  # ... and of the row before it

    @property
    def episode_id(self) -> str | None:
        """The id of the episode being recorded, None before the first reset."""
        return self._head.get("episode")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and start recording a new episode (handing over the last)."""
        self._finish()
        observation, info = self.env.reset(seed=seed, options=options)
        self._runs += 1
        tag = f"seed={seed}" if seed is not None else f"run={self._runs}"
        self._head = {
            "env": self._env_name,
            "env_id": self._env_id,
            "episode": f"{self._prefix}{tag}",
            "seed": seed,
        }
        self._tracked_before = self._tracked = None
        self._add_row(observation, None, 0.0, False, False, info)
        return observation, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        """Step the env and record the step as a row."""
        if not self._head:
            raise RuntimeError("Recorder.step before reset: call reset(seed=...) first")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._seal()
        self._add_row(observation, action, reward, terminated, truncated, info)
        return observation, reward, terminated, truncated, info

    def annotate(
        self,
        *,
        tracked: Iterable[Fact] | None = None,
        predicted_delta: Delta | None = None,
        search: SearchStats | None = None,
        curiosity: Curiosity | None = None,
        graph_summary: str | None = None,
    ) -> None:
        """Attach what the agent knows to the step just taken (or to the reset).

        Call after ``reset``/``step`` returned and the agent took in the result; a
        value given again for the same step replaces the earlier one.

        Args:
            tracked: the agent's tracked facts after the step.
            predicted_delta: the change the agent predicted for the step's action.
            search: statistics of the search run from the step's state (the one that
                chooses the next command).
            curiosity: a raised curiosity flag; the step becomes a scene packet.
            graph_summary: a summary of the agent's world graph, for the scene packet.
        """
        if not self._steps:
            raise RuntimeError("Recorder.annotate before reset: nothing to annotate yet")
        row = self._steps[-1]
        if tracked is not None:
            if not isinstance(tracked, WorldState):
                try:
                    tracked = WorldState(tracked)
                except TypeError as err:
                    raise ValueError(f"tracked facts must be (s, r, o) triples: {err}") from None
            self._tracked = tracked
            row["tracked_facts"] = self._tracked.to_list()
        if predicted_delta is not None:
            row["predicted_delta"] = _delta_row(predicted_delta.added, predicted_delta.removed)
        if search is not None:
            row["search"] = {
                "simulations": int(search.simulations),
                "nodes": int(search.nodes),
                "max_depth": int(search.max_depth),
                "root_value": float(search.root_value),
                "children": [
                    {"action": c.action, "visits": int(c.visits), "value": float(c.value)}
                    for c in search.children
                ],
            }
        if curiosity is not None:
            row["curiosity"] = curiosity.reason
        if graph_summary is not None:
            self._summary = graph_summary

    def close(self) -> None:
        """Hand over the episode being recorded, then close the env."""
        self._finish()
        super().close()

    def _add_row(
        self,
        observation: Any,
        action: Any,
        reward: Any,
        terminated: bool,
        truncated: bool,
        info: Mapping[str, Any],
    ) -> None:
        admissible = info.get("admissible_actions")
        true_facts = info.get("wm.state")
        true_delta = info.get("wm.delta")
        self._steps.append(
            {
                **self._head,
                "step": len(self._steps),
                "observation": str(observation),
                "action": None if action is None else str(action),
                "reward": float(reward),
                "terminated": bool(terminated),
                "truncated": bool(truncated),
                "admissible_actions": None if admissible is None else list(admissible),
                "tracked_facts": None,
                # wm.* fact lists come sorted (ARCHITECTURE §3): copied, not re-sorted,
                # since the true state is the bulk of a row and this is the step loop.
                "true_facts": None if true_facts is None else list(true_facts),
                "predicted_delta": None,
                "true_delta": None
                if true_delta is None
                else {
                    part: {"added": list(d["added"]), "removed": list(d["removed"])}
                    for part, d in true_delta.items()
                },
                "search": None,
                "curiosity": None,
            }
        )
        self._last_info = info
        self._summary = ""

    def _seal(self) -> None:
        """Close the annotations of the last row: a curious one becomes a scene."""
        row = self._steps[-1]
        if row["curiosity"] is not None:
            observed = None
            if self._tracked is not None and self._tracked_before is not None:
                observed = FactDelta.of(Delta.between(self._tracked_before, self._tracked))
            predicted = row["predicted_delta"]
            self._scenes.append(
                ScenePacket(
                    env=row["env"],
                    episode=row["episode"],
                    step=row["step"],
                    observation=row["observation"],
                    action=row["action"],
                    predicted_delta=None if predicted is None else FactDelta(**predicted),
                    observed_delta=observed,
                    true_delta=None
                    if row["true_delta"] is None
                    else TrueDelta.model_validate(row["true_delta"]),
                    reason=row["curiosity"],
                    graph_summary=self._summary,
                )
            )
        self._tracked_before, self._tracked = self._tracked, None

    def _finish(self) -> None:
        if not self._steps:
            return
        self._seal()
        last, info = self._steps[-1], self._last_info
        score, max_score = info.get("score"), info.get("max_score")
        episode = {
            **self._head,
            "agent": self._agent,
            "steps": len(self._steps) - 1,
            "total_reward": float(sum(r["reward"] for r in self._steps)),
            "score": None if score is None else int(score),
            "max_score": None if max_score is None else int(max_score),
            "terminated": last["terminated"],
            "truncated": last["truncated"],
            "scenes": len(self._scenes),
        }
        recorded = RecordedEpisode(episode, self._steps, self._scenes)
        self._steps, self._scenes, self._head = [], [], {}
        self._sink(recorded)


def record_random(recorder: Recorder, seeds: Iterable[int]) -> None:
    """Play one episode per seed with random admissible commands, recorded, then close.

    The commands come from a numpy generator seeded with the episode's seed, so the
    recording is reproducible; closing hands the last episode to the recorder's sink.
    """
    for seed in seeds:
        _, info = recorder.reset(seed=seed)
        rng = np.random.default_rng(seed)
        done = False
        while not done:
            actions = info["admissible_actions"]
            _, _, terminated, truncated, info = recorder.step(
                actions[int(rng.integers(len(actions)))]
            )
            done = terminated or truncated
    recorder.close()


class RecordingTracker:
    """A tracker that reports its state and curiosity to a :class:`Recorder`.

    It wraps the agent's own tracker and passes every call through; after each
    ``reset``/``update`` it annotates the recorder's latest row with the tracked state
    and, when its detector fires, a curiosity flag. The detector sees what the tracker
    sees (the agent's view of ``info``), so the flag never rests on ground truth.
    Plug it in as ``agent.tracker`` and any episode loop records the agent's side.

    Args:
        tracker: the agent's tracker.
        recorder: the recorder wrapped around the env the agent plays.
        detector: raises curiosity (a fresh :class:`CuriosityDetector` when None).
    """

    def __init__(
        self, tracker: Tracker, recorder: Recorder, detector: CuriosityDetector | None = None
    ) -> None:
        self.tracker = tracker
        self.recorder = recorder
        self.detector = detector if detector is not None else CuriosityDetector()

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self.tracker.reset(observation, info)
        state = self.tracker.state
        self.detector.reset(state, info.get("admissible_actions"))
        self.recorder.annotate(tracked=state)

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self.tracker.update(action, observation, info)
        state = self.tracker.state
        curiosity = self.detector.observe(state, info.get("admissible_actions"))
        self.recorder.annotate(tracked=state, curiosity=curiosity)

    @property
    def state(self) -> WorldState:  # noqa: D102
        return self.tracker.state


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # datasets draws a progress bar per parquet write and read; a shard is not a job.
    was_disabled = datasets.utils.are_progress_bars_disabled()
    datasets.utils.disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            datasets.utils.enable_progress_bars()


def _table(rows: list[dict[str, Any]], schema: pa.Schema, what: str) -> pa.Table:
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise ValueError(f"{what} does not fit the trajectory schema: {err}") from err


class TrajectoryWriter:
    """Writes recorded episodes into one env's data folder; see the module docstring.

    Layout: ``<data_dir>/trajectories/shard-<n>-<token>/{steps,episodes}.parquet`` and
    ``<data_dir>/scenes.jsonl``. One writer per data folder at a time: on opening it
    removes hidden half-written shard folders left by a killed writer.

    Args:
        data_dir: the env's data folder (see :func:`env_data_dir`).
        shard_rows: commit a shard once the buffer holds this many step rows.
        shard_bytes: ... or this many bytes of Arrow data (compressed parquet on disk
            is smaller). Shards hold whole episodes, so a shard overshoots by at most
            one episode.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        shard_rows: int = 50_000,
        shard_bytes: int = 128 << 20,
    ) -> None:
        if shard_rows < 1 or shard_bytes < 1:
            raise ValueError(
                f"shard_rows and shard_bytes must be >= 1, got {shard_rows}, {shard_bytes}"
            )
        self.data_dir = Path(data_dir)
        self.shards_dir = self.data_dir / TRAJECTORIES_DIR
        self.scenes = SceneLog(self.data_dir / SCENES_FILE)
        self.shard_rows = shard_rows
        self.shard_bytes = shard_bytes
        self._buffer: list[tuple[pa.Table, dict[str, Any], list[ScenePacket]]] = []
        self._rows = self._bytes = 0
        self.shards_dir.mkdir(parents=True, exist_ok=True)
        for leftover in self.shards_dir.glob(f".{_SHARD}*"):
            shutil.rmtree(leftover)
        self._next = 1 + max((_shard_number(p) for p in _shards(self.shards_dir)), default=-1)

    def write(self, episode: RecordedEpisode) -> None:
        """Buffer an episode; commit a shard when the buffer is full.

        Raises:
            ValueError: a row does not fit :data:`STEP_FEATURES`, naming the episode.
        """
        what = f"episode {episode.episode.get('episode')!r}"
        steps = _table(episode.steps, _STEP_SCHEMA, what)
        _table([episode.episode], _EPISODE_SCHEMA, what)  # fail now, not at commit
        self._buffer.append((steps, episode.episode, list(episode.scenes)))
        self._rows += steps.num_rows
        self._bytes += steps.nbytes
        if self._rows >= self.shard_rows or self._bytes >= self.shard_bytes:
            self.flush()

    def flush(self) -> Path | None:
        """Commit the buffered episodes as one shard; return its folder (None if empty)."""
        if not self._buffer:
            return None
        # Scenes first: a kill before the shard lands re-runs those episodes, whose
        # scenes are then appended again and read back once (SceneLog keeps the latest).
        self.scenes.extend(p for _, _, scenes in self._buffer for p in scenes)
        steps = pa.concat_tables([t for t, _, _ in self._buffer])
        episodes = _table([e for _, e, _ in self._buffer], _EPISODE_SCHEMA, "the episode table")
        name = f"{_SHARD}{self._next:05d}-{secrets.token_hex(3)}"
        tmp = self.shards_dir / f".{name}"
        tmp.mkdir()
        with _quiet():
            for table, features, file in (
                (steps, STEP_FEATURES, "steps.parquet"),
                (episodes, EPISODE_FEATURES, "episodes.parquet"),
            ):
                info = datasets.DatasetInfo(features=features)
                # A fingerprint given spares datasets hashing the whole table to make one.
                shard = datasets.Dataset(table, info=info, fingerprint=f"{name}-{file}")
                shard.to_parquet(str(tmp / file))
                fsync_path(tmp / file)
        fsync_path(tmp)
        final = self.shards_dir / name
        os.rename(tmp, final)  # atomic: the shard is there whole or not at all
        fsync_path(self.shards_dir)
        self._next += 1
        self._buffer, self._rows, self._bytes = [], 0, 0
        return final

    def close(self) -> None:
        """Commit what is buffered."""
        self.flush()

    def __enter__(self) -> TrajectoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _shards(shards_dir: Path) -> list[Path]:
    """Committed shard folders, in the order they were written."""
    found = [(_SHARD_NAME.fullmatch(p.name), p) for p in shards_dir.iterdir() if p.is_dir()]
    return [p for m, p in sorted((int(m[1]), p) for m, p in found if m)]


def _shard_number(path: Path) -> int:
    return int(_SHARD_NAME.fullmatch(path.name)[1])


def _load(
    data_dir: str | os.PathLike[str], file: str, features: Features, **kwargs: Any
) -> datasets.Dataset:
    if not Path(data_dir).is_dir():
        raise FileNotFoundError(f"no data folder at {data_dir}")
    shards_dir = Path(data_dir) / TRAJECTORIES_DIR
    files = [str(p / file) for p in _shards(shards_dir)] if shards_dir.is_dir() else []
    with _quiet():
        if not files:
            empty = pa.Table.from_pylist([], schema=features.arrow_schema)
            info = datasets.DatasetInfo(features=features)
            return datasets.Dataset(empty, info=info, fingerprint=f"empty-{file}")
        return datasets.Dataset.from_parquet(files, features=features, **kwargs)


def load_trajectories(
    data_dir: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    keep_in_memory: bool = False,
) -> datasets.Dataset:
    """Load every committed step row of an env's data folder, shard by shard.

    Works offline (local parquet through ``datasets``). Rows come in shard order, and
    within a shard in the order the episodes were written.

    Args:
        data_dir: the env's data folder (``data/<env_name>``).
        cache_dir: where ``datasets`` keeps its Arrow cache (its default when None).
        keep_in_memory: load into memory instead of memory-mapping the cache.

    Returns:
        A dataset with :data:`STEP_FEATURES` (empty when nothing was committed).

    Raises:
        FileNotFoundError: ``data_dir`` is not a folder.
    """
    return _load(
        data_dir,
        "steps.parquet",
        STEP_FEATURES,
        cache_dir=cache_dir,
        keep_in_memory=keep_in_memory,
    )


def load_episodes(
    data_dir: str | os.PathLike[str],
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    keep_in_memory: bool = False,
) -> datasets.Dataset:
    """Load the episode table of an env's data folder (see :func:`load_trajectories`).

    Returns:
        A dataset with :data:`EPISODE_FEATURES`, one row per committed episode.
    """
    return _load(
        data_dir,
        "episodes.parquet",
        EPISODE_FEATURES,
        cache_dir=cache_dir,
        keep_in_memory=keep_in_memory,
    )
