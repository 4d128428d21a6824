"""The shared vocabulary of wmkit: facts, world states, deltas, probes, and the contracts.

Everything that compares state speaks facts (ARCHITECTURE §3): env ground truth, the
agent's tracked state, rule predictions and the drift metrics. These are in-process
values, so they are NamedTuples and frozen classes, not pydantic models.

The contracts that several layers use sit here too, at the bottom: a :data:`Reader`
(text -> claims), a :class:`Tracker` (text -> world state), a :class:`Policy` (-> the
next command) and :func:`agent_view`, which strips the ground-truth ``wm.*`` keys an
agent must not see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "GROUND_TRUTH_PREFIX",
    "UNKNOWN",
    "Claim",
    "Delta",
    "Fact",
    "Policy",
    "Probe",
    "ProbeKind",
    "Reader",
    "Tracker",
    "WorldState",
    "agent_view",
    "delta_info",
    "facts_from_mapping",
]


class Fact(NamedTuple):
    """A ``(subject, relation, object)`` triple of canonical strings.

    Attributes are facts too: ``Fact("lamp", "brightness", "30")``. Facts are plain
    tuples, so they hash, compare and sort fast and serialise to JSON as 3-lists.
    """

    subject: str
    relation: str
    object: str


ProbeKind = Literal["drift", "breakage", "confusion", "stale", "abstention"]

UNKNOWN = "unknown"
"""The answer of an abstention probe (a question about something never stated), and
what a tracker answers when it does not hold the fact."""


class Probe(NamedTuple):
    """A question due now: what is ``relation`` of ``subject``?

    Attributes:
        subject: entity id asked about.
        relation: the attribute or relation asked for.
        answer: the true object at the step the probe is asked.
        anchor_step: the step of the observation that last established the answer;
            the probe's chain length is ``probe step - anchor_step``.
        kind: which failure the probe measures.
    """

    subject: str
    relation: str
    answer: str
    anchor_step: int
    kind: ProbeKind


class Delta(NamedTuple):
    """A change between two states: facts added and facts removed, each sorted."""

    added: tuple[Fact, ...] = ()
    removed: tuple[Fact, ...] = ()

    @classmethod
    def between(cls, before: WorldState, after: WorldState) -> Delta:
        """Return the change that turns ``before`` into ``after``."""
        added, removed = before.diff(after)
        return cls(tuple(sorted(added)), tuple(sorted(removed)))


class Claim(NamedTuple):
    """One statement read from an observation: set ``relation`` of a subject to ``object``.

    The subject is either an entity id, or a description that identifies it through
    facts the reader must already hold (indirection: "the parcel Ann sent to Bo" is
    ``(("sender", "person:ann"), ("receiver", "person:bo"))``). Claims are *set*
    operations: a claim replaces any earlier object of ``(subject, relation)``.
    """

    subject: str | tuple[tuple[str, str], ...]
    relation: str
    object: str


class WorldState:
    """An immutable set of facts with an index by ``(subject, relation)``.

    Equality and hashing follow the set of facts. ``value`` and ``objects`` answer in
    O(1) through an index built once, lazily.
    """

    __slots__ = ("_facts", "_index")

    def __init__(self, facts: Iterable[Fact] = ()) -> None:
        # Facts pass through as they are; only plain sequences (e.g. from JSON) are wrapped.
        self._facts: frozenset[Fact] = frozenset(f if type(f) is Fact else Fact(*f) for f in facts)
        self._index: dict[tuple[str, str], tuple[str, ...]] | None = None

    def apply(self, delta: Delta) -> WorldState:
        """Return this state with ``delta`` applied: ``removed`` taken out, then ``added``.

        The facts of a delta are ``Fact`` values already, so nothing is re-checked: this
        is the cheap way to rebuild a sequence of states from their step-to-step changes.
        """
        out = WorldState.__new__(WorldState)
        out._facts = self._facts.difference(delta.removed).union(delta.added)
        out._index = None
        return out

    @property
    def facts(self) -> frozenset[Fact]:
        """The facts, as a frozenset."""
        return self._facts

    def __iter__(self) -> Iterator[Fact]:
        return iter(self._facts)

    def __len__(self) -> int:
        return len(self._facts)

    def __contains__(self, fact: object) -> bool:
        return fact in self._facts

    def __eq__(self, other: object) -> bool:
        if isinstance(other, WorldState):
            return self._facts == other._facts
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._facts)

    def __repr__(self) -> str:
        return f"WorldState({sorted(self._facts)!r})"

    def _lookup(self) -> dict[tuple[str, str], tuple[str, ...]]:
        if self._index is None:
            index: dict[tuple[str, str], list[str]] = {}
            for s, r, o in self._facts:
                index.setdefault((s, r), []).append(o)
            self._index = {k: tuple(sorted(v)) for k, v in index.items()}
        return self._index

    def objects(self, subject: str, relation: str) -> tuple[str, ...]:
        """Return every object of ``(subject, relation)``, sorted; empty if none."""
        return self._lookup().get((subject, relation), ())

    def value(self, subject: str, relation: str) -> str | None:
        """Return the single object of ``(subject, relation)``, or None.

        Returns None too when the state holds several objects for the pair, since then
        the state does not give one answer.
        """
        found = self.objects(subject, relation)
        return found[0] if len(found) == 1 else None

    def subjects(self) -> frozenset[str]:
        """Return the set of subjects that have at least one fact."""
        return frozenset(s for s, _, _ in self._facts)

    def restrict(self, subjects: frozenset[str] | set[str]) -> WorldState:
        """Return the facts whose subject is in ``subjects``."""
        return WorldState(f for f in self._facts if f.subject in subjects)

    def diff(self, other: WorldState) -> tuple[frozenset[Fact], frozenset[Fact]]:
        """Return ``(added, removed)``: the change that turns ``self`` into ``other``."""
        return other._facts - self._facts, self._facts - other._facts

    def to_list(self) -> list[Fact]:
        """Return the facts sorted, the form used in ``info['wm.state']``."""
        return sorted(self._facts)


def delta_info(action: Delta, event: Delta) -> dict[str, dict[str, list[Fact]]]:
    """Build the ``info['wm.delta']`` value from the action- and event-driven parts.

    Returns:
        ``{"action": {"added": [...], "removed": [...]}, "event": {...}}`` with sorted
        fact lists, so that ``info`` is deterministic for a seed.
    """
    return {
        "action": {"added": list(action.added), "removed": list(action.removed)},
        "event": {"added": list(event.added), "removed": list(event.removed)},
    }


def facts_from_mapping(values: Mapping[tuple[str, str], str]) -> WorldState:
    """Build a state from a ``{(subject, relation): object}`` mapping."""
    return WorldState(Fact(s, r, o) for (s, r), o in values.items())


# --- contracts every layer shares (agents, search, knowledge, envs) ---------------------

GROUND_TRUTH_PREFIX = "wm."

Reader = Callable[[str], list[Claim]]
"""Reads one observation into claims, from the text alone."""


def agent_view(info: Mapping[str, Any]) -> Mapping[str, Any]:
    """Return a read-only copy of ``info`` without the ground-truth ``wm.*`` keys."""
    return MappingProxyType(
        {k: v for k, v in info.items() if not k.startswith(GROUND_TRUTH_PREFIX)}
    )


class Tracker(Protocol):
    """Keeps a world state from observations: text -> claims -> facts.

    Probes are answered from ``state`` (``state.value(subject, relation)``), unless the
    tracker has a method ``answer(questions: Sequence[tuple[str, str]]) -> list[str |
    None]``: the evaluation then asks it the due probes' ``(subject, relation)`` (never
    their answers) and scores what it says, None meaning unknown (a language model
    reading its window answers so: ``wmkit.agents.llm_agents.LLMWindowTracker``).
    """

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:
        """Start a new episode from its first observation."""

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:
        """Take in the command just sent and the observation it produced."""

    @property
    def state(self) -> WorldState:
        """The tracked state now."""


class Policy(Protocol):
    """Picks the next command from the observation, the visible info and tracked state."""

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode; all randomness comes from ``rng``."""

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Return the next command."""
