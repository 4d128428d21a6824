"""Structured world state: facts, entities, relations, atomic actions, timeline.

``types`` holds the shared vocabulary (facts); ``registry``, ``graph`` and
``timeline`` are persistent structures; ``actions`` is what a model may emit;
``transition`` applies actions to a ``World`` purely; ``conditions`` is the
expression language of event conditions; ``delta_score`` scores a predicted change
against a true one; ``errors`` holds every error raised here.
"""

from wmkit.world.actions import (
    AddRelation,
    AtomicAction,
    CancelEvent,
    EffectAction,
    Query,
    RemoveRelation,
    ScheduleEvent,
    UpdateEntity,
    parse_action,
    parse_actions,
)
from wmkit.world.conditions import Condition, FactLookup, compile_condition, evaluate
from wmkit.world.errors import (
    ActionParseError,
    ConditionError,
    ConfidenceError,
    DuplicateEntityError,
    DuplicateEventError,
    InvalidEdgeError,
    StepError,
    UnknownEdgeError,
    UnknownEntityError,
    UnknownEntityTypeError,
    UnknownEventError,
    UnknownFieldError,
    WorldError,
)
from wmkit.world.graph import Edge, RelationGraph
from wmkit.world.registry import (
    MAX_INT,
    Entity,
    EntityContract,
    EntityRegistry,
    Scalar,
    canonical_id,
)
from wmkit.world.timeline import Drained, Dropped, EventTimeline, ScheduledEvent
from wmkit.world.transition import (
    MAX_STEP,
    TransitionResult,
    Violation,
    World,
    advance,
    apply,
    register,
)
from wmkit.world.types import Claim, Delta, Fact, Probe, WorldState, delta_info

__all__ = [
    "MAX_INT",
    "MAX_STEP",
    "ActionParseError",
    "AddRelation",
    "AtomicAction",
    "CancelEvent",
    "Claim",
    "Condition",
    "ConditionError",
    "ConfidenceError",
    "Delta",
    "Drained",
    "Dropped",
    "DuplicateEntityError",
    "DuplicateEventError",
    "Edge",
    "EffectAction",
    "Entity",
    "EntityContract",
    "EntityRegistry",
    "EventTimeline",
    "Fact",
    "FactLookup",
    "InvalidEdgeError",
    "Probe",
    "Query",
    "RelationGraph",
    "RemoveRelation",
    "Scalar",
    "ScheduleEvent",
    "ScheduledEvent",
    "StepError",
    "TransitionResult",
    "UnknownEdgeError",
    "UnknownEntityError",
    "UnknownEntityTypeError",
    "UnknownEventError",
    "UnknownFieldError",
    "UpdateEntity",
    "Violation",
    "World",
    "WorldError",
    "WorldState",
    "advance",
    "apply",
    "canonical_id",
    "compile_condition",
    "delta_info",
    "evaluate",
    "parse_action",
    "parse_actions",
    "register",
]
