"""The errors of ``wmkit.memory``: one small hierarchy under ``GovernanceError``.

Every error is a ``ValueError`` (the request was refused, not a bug) and its message
names the key, field or value at fault. An operation that raises one has changed
nothing: each runs in one database transaction, rolled back on the error.

Store failures are ``StoreError`` subclasses whose message starts with the store (the
SQLite file, or the PostgreSQL URL without its password and the schema), also kept in
``location``; the database driver's exception, where there was one, is ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "ClockError",
    "DanglingDependencyError",
    "DependencyCycleError",
    "GovernanceError",
    "InvalidRecordError",
    "LostCommitsError",
    "MissingStateError",
    "NotAStoreError",
    "NotReleasableError",
    "OversizedValueError",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreMissingError",
    "StoreUnavailableError",
    "StoreVersionError",
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
    """A store that cannot be opened or used: bad URL or option, damage, lock, outage.

    Attributes:
        location: the store (file path, or URL and schema), or None if not known yet.
    """

    def __init__(self, message: str, *, location: str | None = None) -> None:
        super().__init__(message)
        self.location = location


class StoreMissingError(StoreError):
    """No store where one was expected (and ``create=False``): nothing was created."""


class NotAStoreError(StoreError):
    """Something exists at the location but holds no wmkit store (empty, foreign, garbage).

    It is never initialised over: creating a store is only done where nothing exists.
    """


class StoreVersionError(StoreError):
    """A store written by a wmkit with another schema version."""


class StoreCorruptError(StoreError):
    """A store whose contents are damaged: SQLite's check failed, or tables are missing."""


class LostCommitsError(StoreCorruptError):
    """The store holds fewer committed transactions than were recorded as committed.

    Raised on open when the commit counter in the database is behind the one recorded
    beside it (SQLite's ``<file>.commits``): typically the ``-wal`` file was deleted or
    not copied while it still held committed transactions.

    Attributes:
        recorded: commits recorded beside the store.
        found: commits the database holds.
    """

    def __init__(
        self, message: str, *, location: str | None = None, recorded: int = 0, found: int = 0
    ) -> None:
        super().__init__(message, location=location)
        self.recorded = recorded
        self.found = found

    @property
    def missing(self) -> int:
        """How many committed transactions are missing (``recorded - found``)."""
        return self.recorded - self.found


class StoreLockedError(StoreError):
    """Another connection held the store's write lock for longer than the busy timeout."""


class StoreUnavailableError(StoreError):
    """The database failed for another reason: unreachable, I/O error, disk full, read-only."""


class ClockError(InvalidRecordError):
    """A step the memory clock does not allow: too far ahead of it, or beyond 2**63 - 1."""
