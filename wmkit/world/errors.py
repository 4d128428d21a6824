"""The errors of ``wmkit.world``: one small hierarchy under ``WorldError``.

Every error is a ``ValueError`` (bad input, not a bug) and its message names the
offending type, field, id or expression, so that a log line alone says what to fix.
Operations that raise one change nothing: every structure here is persistent, so a
failed operation simply never returns its new value.
"""

from __future__ import annotations

__all__ = [
    "ActionParseError",
    "ConditionError",
    "ConfidenceError",
    "DuplicateEntityError",
    "DuplicateEventError",
    "InvalidEdgeError",
    "StepError",
    "UnknownEdgeError",
    "UnknownEntityError",
    "UnknownEntityTypeError",
    "UnknownEventError",
    "UnknownFieldError",
    "WorldError",
]


class WorldError(ValueError):
    """Base class of every error raised by ``wmkit.world``."""


class UnknownEntityTypeError(WorldError):
    """An entity type that has no contract in the registry."""


class UnknownFieldError(WorldError):
    """An attribute outside its type's contract, missing, reserved, or of a bad value.

    Bad values include non-finite floats (NaN, ±Infinity), ints outside 64 bits, and an
    attribute named like a relation of an edge leaving the same entity.
    """


class UnknownEntityError(WorldError):
    """An entity id that is not registered (a dangling reference)."""


class DuplicateEntityError(WorldError):
    """Registering an id that is already taken (or a canonical-id hash collision)."""


class UnknownEdgeError(WorldError):
    """Removing or reading an edge that is not in the graph."""


class InvalidEdgeError(WorldError):
    """An edge with an empty relation, a TTL below one step, or a relation that collides.

    A relation collides when it is an attribute name of its source's type (see
    ``wmkit.world.transition.World.facts``).
    """


class StepError(WorldError):
    """A step or step count that is not an int in range (a float, a bool, negative, ...)."""


class ConfidenceError(WorldError):
    """An edge confidence outside [0, 1] or below the graph's confidence floor."""


class ConditionError(WorldError):
    """A condition expression that is invalid, refused, or failed to evaluate."""


class UnknownEventError(WorldError):
    """Cancelling an event id that is not pending in the timeline."""


class DuplicateEventError(WorldError):
    """Scheduling an event id that is already pending in the timeline."""


class ActionParseError(WorldError):
    """Text that is not exactly one valid atomic action (or list of them)."""
