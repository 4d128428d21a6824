"""The records of governed memory validate strictly and round-trip through JSON."""

from datetime import datetime, timezone

import pydantic
import pytest

from wmkit.memory import (
    Authority,
    GovernedState,
    InvalidRecordError,
    Lookup,
    ReleaseOperation,
    UnknownAuthorityError,
    fact_key,
)
from wmkit.memory.types import parse_enum


def record(**changes):
    base = {
        "key": "user|budget",
        "value": {"amount": 8000, "currency": "EUR"},
        "source": "user",
        "authority": "FACT",
        "created_step": 3,
    }
    return {**base, **changes}


def test_a_record_round_trips_through_json_and_is_frozen():
    state = GovernedState.model_validate(record(ttl_steps=5, dependencies=["trip|dates"]))
    assert state.authority is Authority.FACT
    assert state.dependencies == ("trip|dates",)
    assert state.expires_step == 8
    assert state.created_at.tzinfo is not None
    again = GovernedState.model_validate_json(state.model_dump_json())
    assert again == state
    with pytest.raises(pydantic.ValidationError):
        state.value = 1  # frozen


@pytest.mark.parametrize(
    "changes, fragment",
    [
        ({"colour": "red"}, "colour"),  # extra field
        ({"key": ""}, "key"),
        ({"key": " padded"}, "surrounding whitespace"),
        ({"key": "a\nb"}, "control characters"),
        ({"key": "k" * 257}, "key"),
        ({"source": ""}, "source"),
        ({"created_step": -1}, "created_step"),
        ({"created_step": "3"}, "created_step"),  # strict: no string coercion
        ({"created_step": True}, "created_step"),
        ({"ttl_steps": 0}, "ttl_steps"),
        ({"dependencies": ["a", "a"]}, "repeat"),
        ({"dependencies": ["user|budget"]}, "itself"),
        ({"created_at": datetime(2024, 1, 1)}, "timezone"),
        ({"value": object()}, "value"),
    ],
)
def test_malformed_records_are_refused_naming_the_field(changes, fragment):
    with pytest.raises(pydantic.ValidationError) as info:
        GovernedState.model_validate(record(**changes))
    assert fragment in str(info.value)


def test_authority_order_and_parsing():
    ranks = [a.rank for a in (Authority.TEMPORARY, Authority.ASSUMPTION, Authority.FACT)]
    assert ranks == sorted(ranks) and Authority.SYSTEM.rank == 3
    assert parse_enum(Authority, "FACT") is Authority.FACT
    assert parse_enum(ReleaseOperation, ReleaseOperation.DOWNGRADE) is ReleaseOperation.DOWNGRADE
    with pytest.raises(UnknownAuthorityError, match=r"RUMOUR.*ASSUMPTION"):
        parse_enum(Authority, "RUMOUR")
    assert issubclass(UnknownAuthorityError, ValueError)


def test_fact_key_and_lookup_flags():
    assert fact_key("person:ann", "budget") == "person:ann|budget"
    with pytest.raises(InvalidRecordError):
        fact_key("a|b", "c")
    with pytest.raises(InvalidRecordError):
        fact_key("a", "")
    state = GovernedState.model_validate(record(created_at=datetime.now(timezone.utc)))
    assert Lookup("user|budget", state, "user|budget", "ok").found
    fallback = Lookup("hotel|choice", state, "user|budget", "pending_release")
    assert fallback.fallback and not fallback.found
    assert not Lookup("x", None, None, "missing").found
