"""The errors of ``wmkit.memory``: one small hierarchy under ``GovernanceError``.

Every error is a ``ValueError`` (the request was refused, not a bug) and its message
names the key, field or value at fault. An operation that raises one has changed
nothing: each runs in one database transaction, rolled back on the error.
"""

from __future__ import annotations

__all__ = [
    "DanglingDependencyError",
    "DependencyCycleError",
    "GovernanceError",
    "InvalidRecordError",
    "MissingStateError",
    "NotReleasableError",
    "OversizedValueError",
    "StoreError",
    "UnknownAuthorityError",
    "WriteConflictError",
]


class GovernanceError(ValueError):
    """Base class of every error raised by ``wmkit.memory``."""


class InvalidRecordError(GovernanceError):
    """A record that does not validate: missing or extra fields, bad key, bad types."""


class UnknownAuthorityError(InvalidRecordError):
    """An authority (or lifecycle, operation) name outside its enumeration."""


class OversizedValueError(InvalidRecordError):
    """A value or metadata whose JSON encoding exceeds the store's size limit."""


class DanglingDependencyError(GovernanceError):
    """A dependency on a key that has no usable persisted state."""


class DependencyCycleError(GovernanceError):
    """A write whose dependencies would lead back to its own key."""


class MissingStateError(GovernanceError):
    """An operation on a key that has no live (ACTIVE or STABLE) persisted state."""


class NotReleasableError(GovernanceError):
    """A release operation the state does not allow (downgrading an ASSUMPTION)."""


class WriteConflictError(GovernanceError):
    """Concurrent writers kept conflicting on the same key; the write was not made."""


class StoreError(GovernanceError):
    """A store that cannot be opened as asked: bad URL, schema option or version."""
