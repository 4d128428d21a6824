"""Governed persistent memory (seed 002): source-bound states and fail-closed release.

``types`` holds the records (``GovernedState`` and its authority and lifecycle);
``store`` the SQLAlchemy Core tables and engines (SQLite or PostgreSQL); ``manager``
the agent-facing ``StateManager``; ``governor`` the worker committing releases;
``errors`` every error raised here.

    memory = StateManager.open("runs/x/memory.db")
    memory.set_state(fact_key("user", "budget"), 8000, source="user",
                     authority="FACT", step=12)
    memory.get_state(fact_key("user", "budget"), min_authority="FACT").state.value
    memory.mark_for_release(fact_key("hotel", "choice"), "ARCHIVE", "user_cancellation")
    Governor(memory.store).drain()
"""

from wmkit.memory.errors import (
    ClockError,
    DanglingDependencyError,
    DependencyCycleError,
    GovernanceError,
    InvalidRecordError,
    LostCommitsError,
    MissingStateError,
    NotAStoreError,
    NotReleasableError,
    OversizedValueError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreMissingError,
    StoreUnavailableError,
    StoreVersionError,
    UnknownAuthorityError,
    WriteConflictError,
)
from wmkit.memory.governor import Governor, GovernorReport
from wmkit.memory.manager import DEFAULT_MAX_STEP_SKEW, DEFAULT_MAX_VALUE_BYTES, StateManager
from wmkit.memory.store import Store, sqlite_files
from wmkit.memory.types import (
    Authority,
    GovernedState,
    Lifecycle,
    Lookup,
    ReleaseEntry,
    ReleaseOperation,
    ReleaseStatus,
    RollbackResult,
    SetResult,
    StoredState,
    fact_key,
)

__all__ = [
    "DEFAULT_MAX_STEP_SKEW",
    "DEFAULT_MAX_VALUE_BYTES",
    "Authority",
    "ClockError",
    "DanglingDependencyError",
    "DependencyCycleError",
    "GovernanceError",
    "GovernedState",
    "Governor",
    "GovernorReport",
    "InvalidRecordError",
    "Lifecycle",
    "Lookup",
    "LostCommitsError",
    "MissingStateError",
    "NotAStoreError",
    "NotReleasableError",
    "OversizedValueError",
    "ReleaseEntry",
    "ReleaseOperation",
    "ReleaseStatus",
    "RollbackResult",
    "SetResult",
    "StateManager",
    "Store",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreMissingError",
    "StoreUnavailableError",
    "StoreVersionError",
    "StoredState",
    "UnknownAuthorityError",
    "WriteConflictError",
    "fact_key",
    "sqlite_files",
]
