"""The event timeline: pending events in a persistent heap keyed by ``(due, seq)``.

``seq`` is a counter that breaks ties, so events due at the same step fire in the
order they were scheduled. The timeline is a persistent value: ``schedule``,
``cancel`` and ``drain`` return a new timeline and leave the old one intact.

Cancelling deletes the event from the ``pending`` map at once (O(log n)) and leaves
its heap entry behind; ``drain`` skips entries whose ``(event_id, seq)`` is no longer
pending (lazy deletion).

Condition policy: when an event is due, its condition is evaluated against the facts
as they are at the start of that step (every event due at one step sees the same
facts). True: the event fires. False (or a condition that fails to evaluate, e.g.
``num()`` of a missing fact): the event is re-armed for the next step while that step
is ``<= deadline``, and dropped otherwise; ``drain`` reports dropped events and why.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import immutables
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from wmkit.world import _pheap
from wmkit.world.actions import EffectAction, Name, Reason
from wmkit.world.conditions import FactLookup, compile_condition, evaluate
from wmkit.world.errors import ConditionError, DuplicateEventError, UnknownEventError

__all__ = ["Drained", "Dropped", "EventTimeline", "ScheduledEvent"]


class ScheduledEvent(BaseModel):
    """An event in the timeline.

    Attributes:
        event_id: unique among pending events.
        due: the first step at which it may fire.
        deadline: the last step at which a false condition is re-checked (>= due).
        condition: an expression of ``wmkit.world.conditions``, or None (always fires).
        actions: applied in order when it fires.
        reason: the human reason given when it was scheduled.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    event_id: Name
    due: int
    deadline: int
    condition: str | None = None
    actions: tuple[EffectAction, ...] = Field((), strict=False)  # a list is fine here
    reason: Reason = Field(description="Why the event was scheduled.")

    @field_validator("condition")
    @classmethod
    def _compiles(cls, condition: str | None) -> str | None:
        if condition is not None:
            compile_condition(condition)
        return condition

    @model_validator(mode="after")
    def _check(self) -> ScheduledEvent:
        if self.deadline < self.due:
            raise ValueError(f"deadline {self.deadline} is before due step {self.due}")
        return self


class Dropped(NamedTuple):
    """An event that was due, whose condition never held by its deadline."""

    event: ScheduledEvent
    why: str


class Drained(NamedTuple):
    """What ``EventTimeline.drain`` returns.

    Attributes:
        timeline: the timeline without the fired and dropped events.
        fired: events whose condition held, in ``(due, seq)`` order.
        dropped: events dropped at their deadline, with the reason.
    """

    timeline: EventTimeline
    fired: tuple[ScheduledEvent, ...]
    dropped: tuple[Dropped, ...]


class EventTimeline:
    """A persistent priority queue of ``ScheduledEvent`` by ``(due, seq)``."""

    __slots__ = ("_heap", "_pending", "_seq")

    def __init__(self) -> None:
        """Create an empty timeline."""
        self._heap: _pheap.Heap = None  # entries ((due, seq), event_id)
        self._pending: immutables.Map[str, tuple[int, ScheduledEvent]] = immutables.Map()
        self._seq = 0

    def _with(self, heap: _pheap.Heap, pending: immutables.Map, seq: int) -> EventTimeline:
        new = object.__new__(EventTimeline)
        new._heap, new._pending, new._seq = heap, pending, seq
        return new

    def __len__(self) -> int:
        """The number of pending events."""
        return len(self._pending)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._pending

    def __eq__(self, other: object) -> bool:
        # The heap is an index with stale entries: equal pending events, equal timelines.
        if isinstance(other, EventTimeline):
            return self.events() == other.events()
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EventTimeline({len(self)} pending)"

    def get(self, event_id: str) -> ScheduledEvent:
        """Return the pending event ``event_id``.

        Raises:
            UnknownEventError: no such pending event.
        """
        entry = self._pending.get(event_id)
        if entry is None:
            raise UnknownEventError(f"no pending event {event_id!r}")
        return entry[1]

    def events(self) -> tuple[ScheduledEvent, ...]:
        """Return every pending event in ``(due, seq)`` order (O(n log n))."""
        return tuple(event for _, event in sorted(self._pending.values(), key=_order))

    def next_due(self) -> int | None:
        """Return the earliest step with a heap entry (maybe stale), or None if empty.

        Only a lower bound on the next firing, which is all ``advance`` needs to skip
        quiet steps.
        """
        return None if self._heap is None else self._heap[1][0]

    def schedule(self, event: ScheduledEvent) -> EventTimeline:
        """Return a timeline that also holds ``event``.

        Raises:
            DuplicateEventError: an event with that id is already pending.
            ConditionError: the condition is outside the language (checked here too,
                so that a model built without validation cannot smuggle one in).
        """
        return self.schedule_many([event])

    def schedule_many(self, events: Iterable[ScheduledEvent]) -> EventTimeline:
        """Return a timeline that also holds ``events``; all or nothing; one batch."""
        seq = self._seq
        entries = []
        with self._pending.mutate() as pending:
            for event in events:
                if event.condition is not None:
                    compile_condition(event.condition)
                if event.event_id in pending:
                    raise DuplicateEventError(f"event {event.event_id!r} is already pending")
                pending[event.event_id] = (seq, event)
                entries.append(((event.due, seq), event.event_id))
                seq += 1
            pending_map = pending.finish()
        entries.sort()
        return self._with(_pheap.merge(self._heap, _pheap.from_sorted(entries)), pending_map, seq)

    def cancel(self, event_id: str) -> EventTimeline:
        """Return a timeline without the pending event ``event_id``.

        Raises:
            UnknownEventError: no such pending event (never scheduled, fired, dropped
                or already cancelled).
        """
        self.get(event_id)
        return self._with(self._heap, self._pending.delete(event_id), self._seq)

    def drain(self, step: int, lookup: FactLookup) -> Drained:
        """Take out every live event with ``due <= step`` and decide it (module docs).

        Args:
            step: the current step; also the value of ``step`` in conditions.
            lookup: facts to evaluate conditions against.
        """
        heap, pending, seq = self._heap, self._pending, self._seq
        fired: list[ScheduledEvent] = []
        dropped: list[Dropped] = []
        while heap is not None and heap[1][0] <= step:
            (_, entry_seq), event_id, heap = _pheap.pop(heap)
            entry = pending.get(event_id)
            if entry is None or entry[0] != entry_seq:
                continue  # cancelled, or superseded by a re-arm: lazy deletion
            event = entry[1]
            why = _holds(event, lookup, step)
            if why is None:
                fired.append(event)
                pending = pending.delete(event_id)
            elif step + 1 <= event.deadline:
                pending = pending.set(event_id, (seq, event))
                heap = _pheap.push(heap, (step + 1, seq), event_id)
                seq += 1
            else:
                dropped.append(Dropped(event, why))
                pending = pending.delete(event_id)
        if heap is self._heap:
            return Drained(self, (), ())
        return Drained(self._with(heap, pending, seq), tuple(fired), tuple(dropped))


def _holds(event: ScheduledEvent, lookup: FactLookup, step: int) -> str | None:
    """Return None if the event may fire now, else why not."""
    if event.condition is None:
        return None
    try:
        if evaluate(event.condition, lookup, step=step):
            return None
        return f"condition {event.condition!r} was false at step {step}"
    except ConditionError as err:
        return str(err)


def _order(entry: tuple[int, ScheduledEvent]) -> tuple[int, int]:
    seq, event = entry
    return event.due, seq
