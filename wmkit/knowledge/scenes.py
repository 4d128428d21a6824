"""Curiosity flags and the scene packets they produce (seed 001).

An agent asks for its world knowledge to be updated by writing a curiosity flag in its
output, two lines that sit beside its normal reply::

    FLAG_CURIOSITY: yes
    CURIOSITY_REASON: the key turned but the door stayed shut

:func:`parse_curiosity` reads such text into a :class:`Curiosity` and
:func:`format_curiosity` writes one back. Agents that do not speak text get a
:class:`CuriosityDetector`, which raises the flag from what the agent sees (its tracked
state and the visible admissible actions, never ground truth) when an unseen entity or
state appears, the set of command verbs changes, or a predicted change fails to happen.

Each flag becomes a :class:`ScenePacket` (what was seen, done, expected and observed,
and why it was interesting), appended to ``data/<env_name>/scenes.jsonl`` through a
:class:`SceneLog`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from wmkit.jsonl import JsonlLog
from wmkit.knowledge.types import Curiosity
from wmkit.world.types import Delta, Fact, WorldState

__all__ = [
    "FLAG_KEY",
    "REASON_KEY",
    "SCENES_FILE",
    "Curiosity",
    "CuriosityDetector",
    "FactDelta",
    "SceneLog",
    "ScenePacket",
    "TrueDelta",
    "format_curiosity",
    "parse_curiosity",
]

FLAG_KEY = "FLAG_CURIOSITY"
REASON_KEY = "CURIOSITY_REASON"
SCENES_FILE = "scenes.jsonl"
"""The scene log's file name inside an env's data folder (``data/<env_name>/``)."""

_LINE = re.compile(rf"^[ \t]*({FLAG_KEY}|{REASON_KEY})[ \t]*:[ \t]*(.*?)[ \t]*$", re.M)
_SHOWN = 5  # items named per list in a detector's reason; the rest are counted


def format_curiosity(curiosity: Curiosity | None) -> str:
    """Return the flag lines for ``curiosity`` (``FLAG_CURIOSITY: no`` for None)."""
    if curiosity is None:
        return f"{FLAG_KEY}: no"
    return f"{FLAG_KEY}: yes\n{REASON_KEY}: {curiosity.reason}"


def parse_curiosity(text: str) -> Curiosity | None:
    """Read a curiosity flag out of an agent's output.

    The flag lines may sit anywhere among other lines; keys are matched at the start of
    a line, case-sensitively, values case-insensitively (``yes``/``no``).

    Returns:
        The flag when ``FLAG_CURIOSITY: yes``; None when the flag is ``no`` or absent.

    Raises:
        ValueError: the flag is neither yes nor no, a key appears twice, or a raised
            flag has no reason (the seed asks every flag to say why).
    """
    found: dict[str, str] = {}
    for key, value in _LINE.findall(text):
        if key in found:
            raise ValueError(f"{key} appears more than once in the agent's output")
        found[key] = value
    flag = found.get(FLAG_KEY)
    if flag is None:
        if REASON_KEY in found:
            raise ValueError(f"{REASON_KEY} given without a {FLAG_KEY} line")
        return None
    if flag.lower() == "no":
        return None
    if flag.lower() != "yes":
        raise ValueError(f"{FLAG_KEY} must be 'yes' or 'no', got {flag!r}")
    if not found.get(REASON_KEY):
        raise ValueError(f"{FLAG_KEY}: yes needs a non-empty {REASON_KEY} line")
    return Curiosity(found[REASON_KEY])


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FactDelta(_Record):
    """A change of state in facts, as stored: facts added and facts removed."""

    added: tuple[Fact, ...] = ()
    removed: tuple[Fact, ...] = ()

    @classmethod
    def of(cls, delta: Delta) -> FactDelta:
        """Return the stored form of an in-process :class:`~wmkit.world.types.Delta`."""
        return cls(added=tuple(delta.added), removed=tuple(delta.removed))

    def to_delta(self) -> Delta:
        """Return the in-process :class:`~wmkit.world.types.Delta`, facts sorted."""
        return Delta(tuple(sorted(self.added)), tuple(sorted(self.removed)))


class TrueDelta(_Record):
    """The env's true change of a step (``info["wm.delta"]``), split by its cause."""

    action: FactDelta
    event: FactDelta


class ScenePacket(_Record):
    """One curious step, as sent to the knowledge distiller.

    Attributes:
        env: the env's name (the ``data/<env_name>/`` folder).
        episode: the episode id within that env's data.
        step: the step number (step t follows the t-th command; 0 is the reset).
        observation: what the env said after the action.
        action: the command sent (None at step 0).
        predicted_delta: the change the agent expected, when it made a prediction.
        observed_delta: the change in the agent's tracked state over the step, when
            the agent reported its state.
        true_delta: the env's true change, when the env gives ground truth (stored for
            offline training; the agent never saw it).
        reason: why the agent was curious.
        graph_summary: a summary of the agent's world graph at that moment.
    """

    env: str = Field(min_length=1)
    episode: str = Field(min_length=1)
    step: int = Field(ge=0)
    observation: str
    action: str | None
    predicted_delta: FactDelta | None = None
    observed_delta: FactDelta | None = None
    true_delta: TrueDelta | None = None
    reason: str = Field(min_length=1)
    graph_summary: str = ""

    @field_validator("action")
    @classmethod
    def _action_after_reset(cls, action: str | None, info: ValidationInfo) -> str | None:
        if action is None and info.data.get("step"):
            raise ValueError("only step 0 (the reset) may have no action")
        return action

    @property
    def key(self) -> tuple[str, str, int]:
        """The scene's identity: ``(env, episode, step)``."""
        return self.env, self.episode, self.step

    @property
    def scene_id(self) -> str:
        """The scene's id as world-graph evidence cites it: ``env/episode@step``."""
        return f"{self.env}/{self.episode}@{self.step}"


class SceneLog:
    """The append-only ``scenes.jsonl`` of one env, on :class:`~wmkit.jsonl.JsonlLog`.

    Appends are fsync'd per batch; a torn last line is reported and skipped on read.
    A scene is identified by ``(env, episode, step)``: when an episode cut off by a
    killed run is played again, its scenes are appended again, and :meth:`packets`
    keeps the latest copy of each.

    Args:
        path: the file (conventionally ``data/<env_name>/scenes.jsonl``).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._log = JsonlLog(path)

    @property
    def path(self) -> Path:
        """The file."""
        return self._log.path

    def extend(self, packets: Iterable[ScenePacket]) -> int:
        """Append packets durably, one write and one fsync; return how many."""
        return self._log.extend(p.model_dump(mode="json") for p in packets)

    def append(self, packet: ScenePacket) -> None:
        """Append one packet durably."""
        self.extend((packet,))

    def packets(self) -> list[ScenePacket]:
        """Return every complete packet: the latest copy of each scene, in first-seen order.

        Raises:
            ValueError: a line in the middle is corrupt (naming the line) or a row is
                not a valid packet (naming the row, blank lines not counted).
        """
        latest: dict[tuple[str, str, int], ScenePacket] = {}
        for number, row in enumerate(self._log.rows(), start=1):
            try:
                packet = ScenePacket.model_validate(row)
            except ValueError as err:
                raise ValueError(f"{self.path}: row {number} is not a scene packet: {err}") from err
            latest[packet.key] = packet
        return list(latest.values())

    def __iter__(self) -> Iterator[ScenePacket]:
        return iter(self.packets())


def _verb(action: str) -> str:
    return action.split(maxsplit=1)[0].lower() if action.strip() else ""


def _named(items: Iterable[Any]) -> str:
    items = sorted(items)
    shown = ", ".join(str(i) if isinstance(i, str) else "=".join(i) for i in items[:_SHOWN])
    more = len(items) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def _fmt_delta(delta: Delta) -> str:
    parts = [f"+({', '.join(f)})" for f in delta.added[:_SHOWN]]
    parts += [f"-({', '.join(f)})" for f in delta.removed[:_SHOWN]]
    more = len(delta.added) + len(delta.removed) - len(parts)
    return (" ".join(parts) or "no change") + (f" and {more} more" if more > 0 else "")


class CuriosityDetector:
    """Raises curiosity from what the agent sees, for agents that do not flag it.

    It fires, per step, when (any of):

    * an entity appears in the tracked state that it never held this episode;
    * a relation appears that no tracked fact used before (``requested_address``);
    * a state appears: a value of a state relation (``status`` by default) that no
      entity held before (``status=delayed`` the first time a parcel is delayed).
      Values of other relations (addresses, locations) are open-ended, and a new one
      is news, not a surprise;
    * the command verbs change: a verb (first word) of the visible admissible actions
      comes or goes. New objects in the same commands (``take lamp`` beside ``take
      key``) are not a change of the command set: new entities cover those;
    * a prediction fails: the agent predicted a change and its tracked state changed
      otherwise.

    Nothing here reads ground truth: it sees the tracked state and ``info`` as the
    agent does.

    Args:
        state_relations: relations whose values are states; None makes every
            ``(relation, object)`` pair a state.
    """

    def __init__(self, state_relations: Collection[str] | None = ("status",)) -> None:
        self.state_relations = None if state_relations is None else frozenset(state_relations)
        self._entities: set[str] = set()
        self._relations: set[str] = set()
        self._states: set[tuple[str, str]] = set()
        self._verbs: frozenset[str] = frozenset()
        self._tracked = WorldState()

    def _states_of(self, facts: Iterable[Fact]) -> set[tuple[str, str]]:
        keep = self.state_relations
        return {(r, o) for _, r, o in facts if keep is None or r in keep}

    def reset(self, tracked: WorldState, admissible: Sequence[str] | None) -> None:
        """Start an episode from the first tracked state: what it holds is seen."""
        self._entities = set(tracked.subjects())
        self._relations = {r for _, r, _ in tracked}
        self._states = self._states_of(tracked)
        self._verbs = frozenset(_verb(a) for a in admissible or ())
        self._tracked = tracked

    def observe(
        self,
        tracked: WorldState,
        admissible: Sequence[str] | None,
        predicted: Delta | None = None,
    ) -> Curiosity | None:
        """Take in the state after a step; return a flag when something is new.

        Args:
            tracked: the agent's tracked state after the step.
            admissible: the admissible actions the agent sees now (None: not given).
            predicted: the change the agent expected from its action, if it predicted.
        """
        reasons = []
        # Only facts new since the last step can hold anything unseen: the rest were
        # taken in then. The set difference runs in C; the loops below see few facts.
        added = tracked.facts - self._tracked.facts
        entities = {s for s, _, _ in added} - self._entities
        if entities:
            reasons.append(f"unseen entities: {_named(entities)}")
        relations = {r for _, r, _ in added} - self._relations
        if relations:
            reasons.append(f"unseen relations: {_named(relations)}")
        states = self._states_of(added) - self._states
        if states:
            reasons.append(f"unseen states: {_named(states)}")
        if admissible is not None:
            verbs = frozenset(_verb(a) for a in admissible)
            gained, lost = verbs - self._verbs, self._verbs - verbs
            if gained or lost:
                change = [f"+{v}" for v in sorted(gained)] + [f"-{v}" for v in sorted(lost)]
                reasons.append(f"command verbs changed: {' '.join(change)}")
            self._verbs = verbs
        if predicted is not None:
            observed = Delta.between(self._tracked, tracked)
            if set(predicted.added) != set(observed.added) or set(predicted.removed) != set(
                observed.removed
            ):
                reasons.append(
                    f"prediction failed: expected {_fmt_delta(predicted)}, "
                    f"saw {_fmt_delta(observed)}"
                )
        self._entities |= entities
        self._relations |= relations
        self._states |= states
        self._tracked = tracked
        return Curiosity("; ".join(reasons)) if reasons else None
