"""The pure transition engine: ``apply(world, action)`` and ``advance(world, steps)``.

A ``World`` is a value: registry, graph, timeline and the current step. ``apply`` and
``advance`` return a new ``World`` and never touch the one they were given. Purity
does not copy anything: the three parts are persistent structures (HAMT maps and a
leftist heap), so a transition costs O(log n) and shares all untouched structure with
the world before it; keeping every past world (for search or undo) costs only the
nodes that changed.

The rule for invalid input: ``apply`` returns the *same* world object, no events, and
one ``Violation`` that names the problem. ``strict=True`` raises the ``WorldError``
instead. Either way nothing changes. Like gymnasium's ``FuncEnv``, a stateful env or
tracker is a thin shell that keeps the latest world; a planner keeps many.

Names: for any subject, a name is an attribute or an edge relation, never both (see
``World.facts``), so a fact lookup never mixes an attribute value with edge targets.
Steps are Python ints: ``advance`` refuses a float, a bool or a negative count.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from wmkit.world.actions import (
    MAX_STEP,
    AddRelation,
    AtomicAction,
    CancelEvent,
    Query,
    RemoveRelation,
    ScheduleEvent,
    UpdateEntity,
)
from wmkit.world.conditions import compile_condition
from wmkit.world.errors import (
    InvalidEdgeError,
    StepError,
    UnknownEntityError,
    UnknownFieldError,
    WorldError,
)
from wmkit.world.graph import RelationGraph
from wmkit.world.registry import EntityContract, EntityRegistry, Scalar
from wmkit.world.timeline import EventTimeline, ScheduledEvent
from wmkit.world.types import Fact, WorldState

__all__ = ["TransitionResult", "Violation", "World", "advance", "apply", "register"]


@dataclasses.dataclass(frozen=True)
class World:
    """The structured world state at one step.

    Attributes:
        registry: entities and their attributes.
        graph: relations between entities.
        timeline: pending events.
        step: the current step (an integer count, never wall time): an int >= 0.

    Raises:
        StepError: ``step`` is not an int (a float or a bool) or is negative.
    """

    registry: EntityRegistry
    graph: RelationGraph
    timeline: EventTimeline
    step: int = 0

    def __post_init__(self) -> None:
        # Cheap (every transition builds a World): a float step would leak into every
        # edge's expiry and every entity's last_updated.
        if type(self.step) is not int or self.step < 0:
            raise StepError(f"world step must be an int >= 0, not {self.step!r}")

    @classmethod
    def create(cls, contracts: Iterable[EntityContract], *, confidence_floor: float = 0.0) -> World:
        """Return an empty world at step 0 that accepts the given entity types."""
        graph = RelationGraph(confidence_floor=confidence_floor)
        return cls(EntityRegistry(contracts), graph, EventTimeline())

    def objects(self, subject: str, relation: str) -> tuple[str, ...]:
        """Return the objects of facts ``(subject, relation, ·)``, sorted.

        The attribute named ``relation`` (as ``str(value)``) and the targets of the
        ``relation`` edges leaving ``subject``: O(out-degree), no fact set is built.
        This is the ``FactLookup`` that conditions are evaluated against.
        """
        found = [edge.dst for edge in self.graph.outgoing(subject, relation)]
        if subject in self.registry:
            value = self.registry.get(subject).attributes.get(relation)
            if value is not None:
                found.append(str(value))
        return tuple(sorted(found))

    def facts(self) -> WorldState:
        """Return every fact: ``(id, attribute, str(value))`` and ``(src, relation, dst)``.

        ``last_updated`` is bookkeeping, not a fact about the world, so it is left out
        (otherwise every update would look like two changes to a drift metric).
        Builds the whole set: O(entities + edges).

        Attributes and edges share the ``(subject, relation)`` key space, so ``apply``
        keeps them apart; the rule: **for any subject, a name is an attribute or an edge
        relation, never both.** ``add_relation`` is refused (``InvalidEdgeError``) when
        ``relation`` is an attribute name that ``src``'s type allows (``status`` or one
        of its contract's attributes), set or not yet set; ``update_entity`` is refused
        (``UnknownFieldError``) when it sets an attribute named like the relation of an
        edge leaving that entity (possible only when a contract grew after the edge
        was added, as ``LLMTracker``'s contracts do). So ``objects(s, r)`` holds either
        one attribute value or the targets of ``r`` edges, and ``fact()`` in a
        condition has one meaning.
        """
        facts = [
            Fact(entity.id, name, str(value))
            for entity in self.registry
            for name, value in entity.attributes.items()
        ]
        facts.extend(Fact(e.src, e.relation, e.dst) for e in self.graph.edges())
        return WorldState(facts)


class Violation(NamedTuple):
    """Why an action or event was refused.

    Attributes:
        error: the ``WorldError`` subclass name, e.g. ``"UnknownEntityError"``, or
            ``"EventDropped"`` for an event whose condition never held by its deadline.
        message: what was wrong, naming the field, id or expression.
    """

    error: str
    message: str

    @classmethod
    def of(cls, err: WorldError) -> Violation:
        """Describe an error as a violation."""
        return cls(type(err).__name__, str(err))


class TransitionResult(NamedTuple):
    """What ``apply`` and ``advance`` return.

    Attributes:
        world: the world after the transition (the input world itself when nothing
            changed, e.g. on a violation or a query).
        events: the timeline events that fired, in firing order (``advance`` only).
        violations: refused actions and dropped events; empty when all went well.
        answer: the facts a ``query`` asked for, sorted (``apply`` of a query only).
    """

    world: World
    events: tuple[ScheduledEvent, ...] = ()
    violations: tuple[Violation, ...] = ()
    answer: tuple[Fact, ...] = ()


def register(
    world: World, entity_type: str, raw_id: str, attributes: Mapping[str, Scalar]
) -> World:
    """Return ``world`` with a new entity registered at the current step.

    Entities enter the world here (from the env, or a tracker that met a new name);
    actions then refer to them by ``canonical_id(entity_type, raw_id)``.

    Raises:
        UnknownEntityTypeError, UnknownFieldError, DuplicateEntityError.
    """
    registry = world.registry.register(entity_type, raw_id, attributes, step=world.step)
    return dataclasses.replace(world, registry=registry)


def apply(world: World, action: AtomicAction, *, strict: bool = False) -> TransitionResult:
    """Apply one atomic action; pure.

    Args:
        world: the world before; never modified.
        action: a validated action (see ``parse_action``).
        strict: raise the ``WorldError`` instead of returning it as a violation.

    Returns:
        The new world, or on an invalid action (dangling id, unknown field, edge
        below the confidence floor, cancel of an unknown event, ...) the same
        ``world`` with one violation.
    """
    try:
        return _apply(world, action)
    except WorldError as err:
        if strict:
            raise
        return TransitionResult(world, violations=(Violation.of(err),))


def _apply(world: World, action: AtomicAction) -> TransitionResult:
    replace = dataclasses.replace
    if isinstance(action, UpdateEntity):
        _check_attribute_names(world, action.entity_id, action.attributes)
        registry = world.registry.update(action.entity_id, action.attributes, step=world.step)
        return TransitionResult(replace(world, registry=registry))
    if isinstance(action, AddRelation):
        _check_relation_name(world, action.src, action.relation)
        graph = world.graph.add_edge(
            action.src,
            action.relation,
            action.dst,
            confidence=action.confidence,
            step=world.step,
            ttl=action.ttl,
            entities=world.registry,
        )
        return TransitionResult(replace(world, graph=graph))
    if isinstance(action, RemoveRelation):
        graph = world.graph.remove_edge(action.src, action.relation, action.dst)
        return TransitionResult(replace(world, graph=graph))
    if isinstance(action, ScheduleEvent):
        if action.condition is not None:
            compile_condition(action.condition)  # a WorldError here, not pydantic's below
        due = world.step + action.delay
        event = ScheduledEvent(
            event_id=action.event_id,
            due=due,
            deadline=due + action.retry_steps,
            condition=action.condition,
            actions=action.actions,
            reason=action.reason,
        )
        return TransitionResult(replace(world, timeline=world.timeline.schedule(event)))
    if isinstance(action, CancelEvent):
        timeline = world.timeline.cancel(action.event_id)
        return TransitionResult(replace(world, timeline=timeline))
    if isinstance(action, Query):
        return TransitionResult(world, answer=_query(world, action.subject, action.relation))
    raise WorldError(f"not an atomic action: {type(action).__name__}")


def _check_relation_name(world: World, src: str, relation: str) -> None:
    """Refuse an edge named like an attribute of its source's type (``World.facts``)."""
    if src not in world.registry:
        return  # the graph names the dangling id
    entity_type = world.registry.get(src).entity_type
    if relation in world.registry.contract(entity_type).allowed:
        raise InvalidEdgeError(
            f"edge {src} -{relation}-> ...: {relation!r} is an attribute of type "
            f"{entity_type!r}; a relation must not share a name with an attribute "
            "(fact() would be ambiguous)"
        )


def _check_attribute_names(world: World, entity_id: str, attributes: Mapping[str, Scalar]) -> None:
    """Refuse an attribute named like a relation of an edge leaving ``entity_id``."""
    clash = sorted({e.relation for e in world.graph.outgoing(entity_id)} & attributes.keys())
    if clash:
        raise UnknownFieldError(
            f"{entity_id}: attribute {clash[0]!r} is the relation of an edge leaving it; "
            "an attribute must not share a name with a relation (fact() would be ambiguous)"
        )


def _query(world: World, subject: str, relation: str | None) -> tuple[Fact, ...]:
    if subject not in world.registry:
        raise UnknownEntityError(f"query of unknown entity id {subject!r}")
    if relation is not None:
        return tuple(Fact(subject, relation, o) for o in world.objects(subject, relation))
    entity = world.registry.get(subject)
    facts = [Fact(subject, name, str(value)) for name, value in entity.attributes.items()]
    facts.extend(Fact(subject, e.relation, e.dst) for e in world.graph.outgoing(subject))
    return tuple(sorted(facts))


def advance(world: World, steps: int = 1) -> TransitionResult:
    """Move the clock forward ``steps`` steps; pure.

    At each step ``t``: first edges with ``expires_at <= t`` are removed, then events
    due at ``t`` are decided against the facts as they are then (see ``timeline``) and
    the actions of those that fire are applied in firing order. An event's actions are
    all or nothing: if one is invalid, none of that event's actions apply and a
    violation names it. Dropped events are reported as violations too. Steps with
    nothing due are skipped in O(1), so a long quiet advance is cheap.

    Args:
        world: the world before; never modified.
        steps: an int ``>= 0`` (a numpy integer is fine); ``0`` changes nothing.

    Returns:
        The world at ``world.step + steps``, the events that fired, and violations.

    Raises:
        StepError: ``steps`` is a float (``1.5`` or ``2.0``), a bool or another non-int,
            is negative, or would take the clock past ``MAX_STEP``.
    """
    target = world.step + _step_count(steps)
    if target > MAX_STEP:
        raise StepError(f"cannot advance by {steps} steps: the clock would pass {MAX_STEP}")
    fired: list[ScheduledEvent] = []
    violations: list[Violation] = []
    while True:
        step = _next_busy_step(world, target)
        if step is None:
            break
        graph, _ = world.graph.expire(step)
        world = dataclasses.replace(world, graph=graph, step=step)
        drained = world.timeline.drain(step, world.objects)
        world = dataclasses.replace(world, timeline=drained.timeline)
        violations.extend(
            Violation("EventDropped", f"event {d.event.event_id!r} dropped: {d.why}")
            for d in drained.dropped
        )
        for event in drained.fired:
            fired.append(event)
            try:
                after = world
                for action in event.actions:
                    after = _apply(after, action).world
                world = after
            except WorldError as err:
                violations.append(Violation(type(err).__name__, f"event {event.event_id!r}: {err}"))
    world = dataclasses.replace(world, step=target)
    return TransitionResult(world, tuple(fired), tuple(violations))


def _step_count(steps: object) -> int:
    """``steps`` as an int >= 0, or a ``StepError`` saying what is wrong with it."""
    if isinstance(steps, bool):
        raise StepError(f"cannot advance by {steps!r}: steps must be an int, not a bool")
    try:
        count = operator.index(steps)  # ints and numpy ints; never a float, even 2.0
    except TypeError:
        raise StepError(
            f"cannot advance by {steps!r}: steps must be an int, not {type(steps).__name__}"
        ) from None
    if count < 0:
        raise StepError(f"cannot advance by {count} steps: the clock only moves forward")
    return count


def _next_busy_step(world: World, target: int) -> int | None:
    """The next step in ``(world.step, target]`` where something may be due, or None."""
    candidates = [
        s for s in (world.timeline.next_due(), world.graph.next_expiry()) if s is not None
    ]
    if not candidates:
        return None
    step = max(min(candidates), world.step + 1)
    return step if step <= target else None
