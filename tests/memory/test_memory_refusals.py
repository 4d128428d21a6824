"""Bad requests are refused with a clear error and change nothing in the store.

Each case builds a small store, dumps every table, makes the bad request, and compares
the dump afterwards: byte-for-byte equal, clock included.
"""

import pytest

from wmkit.memory import (
    DanglingDependencyError,
    DependencyCycleError,
    GovernanceError,
    GovernedState,
    InvalidRecordError,
    MissingStateError,
    NotReleasableError,
    OversizedValueError,
    UnknownAuthorityError,
)


@pytest.fixture
def seeded(memory):
    """a <- b <- c (c rests on b, b on a), a pending release on d, a temporary t."""
    memory.max_value_bytes = 1024
    for key, deps in (("a", []), ("b", ["a"]), ("c", ["b"]), ("d", [])):
        memory.set_state(key, key, source="test", authority="FACT", step=2, dependencies=deps)
    memory.set_state("assumed", 1, source="test", authority="ASSUMPTION", step=2)
    memory.mark_for_release("d", "ARCHIVE", "test")
    memory.set_state("t", 1, source="test", authority="TEMPORARY", step=2)
    return memory


def good(**changes):
    base = {"key": "new", "value": 1, "source": "test", "authority": "FACT", "created_step": 3}
    return {**base, **changes}


CASES = [
    # malformed records
    ("submit", good(colour="red"), InvalidRecordError, "colour"),
    ("submit", {k: v for k, v in good().items() if k != "source"}, InvalidRecordError, "source"),
    ("submit", good(created_step="3"), InvalidRecordError, "created_step"),
    ("submit", good(key=""), InvalidRecordError, "key"),
    ("submit", good(value=float("nan")), InvalidRecordError, "not JSON"),
    ("submit", "not a record", InvalidRecordError, "GovernedState or a mapping"),
    # unknown authorities
    ("submit", good(authority="RUMOUR"), UnknownAuthorityError, "RUMOUR"),
    ("set", {"authority": "fact"}, UnknownAuthorityError, "fact"),
    ("set", {"authority": 2}, UnknownAuthorityError, "2"),
    # dependency cycles (the key already exists: rewriting it would close the loop)
    ("set", {"key": "a", "dependencies": ["c"]}, DependencyCycleError, "a -> c -> b -> a"),
    ("set", {"key": "a", "dependencies": ["b"]}, DependencyCycleError, "a -> b -> a"),
    ("set", {"key": "a", "dependencies": ["a"]}, InvalidRecordError, "itself"),
    # dangling dependencies
    ("set", {"dependencies": ["nowhere"]}, DanglingDependencyError, "no live persisted"),
    ("set", {"dependencies": ["t"]}, DanglingDependencyError, "TEMPORARY"),
    ("set", {"dependencies": ["d"]}, DanglingDependencyError, "'d'"),
    # oversized values
    ("set", {"value": "x" * 2000}, OversizedValueError, "over the limit of 1024"),
    ("set", {"metadata": {"blob": "x" * 2000}}, OversizedValueError, "metadata"),
    # bad releases and rollbacks
    ("release", ("nowhere", "ARCHIVE", "r"), MissingStateError, "nowhere"),
    ("release", ("a", "SHRED", "r"), UnknownAuthorityError, "SHRED"),
    ("release", ("assumed", "DOWNGRADE", "r"), NotReleasableError, "ASSUMPTION"),
    ("release", ("a", "ARCHIVE", "  "), InvalidRecordError, "reason"),
    ("rollback", -1, InvalidRecordError, "to_step"),
    ("advance", -5, InvalidRecordError, "step"),
]


@pytest.mark.parametrize(
    "kind, arg, error, fragment", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_refusals_change_nothing(seeded, store, kind, arg, error, fragment):
    before = store.dump()
    with pytest.raises(error) as info:
        if kind == "submit":
            seeded.submit(arg)
        elif kind == "set":
            params = {"key": "new", "value": 1, "source": "test", "authority": "FACT", "step": 9}
            seeded.set_state(**{**params, **arg})
        elif kind == "release":
            seeded.mark_for_release(*arg)
        elif kind == "rollback":
            seeded.rollback(arg)
        else:
            seeded.advance(arg)
    assert fragment in str(info.value)
    assert isinstance(info.value, GovernanceError) and isinstance(info.value, ValueError)
    assert store.dump() == before
    assert seeded.get_state("t").reason == "temporary"  # the process-local state too


def test_a_stored_record_cannot_be_resubmitted_as_new(seeded, store):
    stored = seeded.history("a")[0]
    before = store.dump()
    with pytest.raises(InvalidRecordError, match="StoredState"):
        seeded.submit(stored)
    assert store.dump() == before
    plain = GovernedState.model_validate(good())
    assert seeded.submit(plain).accepted and store.dump() != before
