"""Atomic actions: the only way a model changes the world (seed 000, §3.3).

A model does not write state; it emits JSON actions, which are parsed strictly here
and applied by ``wmkit.world.transition.apply``. Each action is a frozen pydantic
model discriminated on ``kind``; unknown fields, wrong types (no ``"0.9"`` for a
number: strict mode) and unknown kinds are refused, and every action carries a
non-empty human ``reason`` for the audit trail. Entities are named by canonical id
(``EntityRegistry`` makes them); steps are integers counted by the world.

Numbers are checked, not just typed: attribute values must be finite (no ``NaN``,
``Infinity`` or ``-Infinity``, which the JSON parser would otherwise accept, nor
``1e400``, which it reads as infinity) and ints must fit in 64 bits; ``confidence`` is
a finite float in [0, 1]; ``delay``, ``ttl`` and ``retry_steps`` are ints (never
floats or bools) up to ``MAX_STEP``; a condition's number literals must be finite.

Example::

    {"kind": "add_relation", "src": "package:…", "relation": "assigned_to",
     "dst": "carrier:…", "confidence": 0.9, "ttl": 72, "reason": "label scanned"}
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from wmkit.world.conditions import compile_condition
from wmkit.world.errors import ActionParseError
from wmkit.world.registry import Scalar, scalar_problem

__all__ = [
    "MAX_STEP",
    "MAX_TEXT_CHARS",
    "AddRelation",
    "AtomicAction",
    "CancelEvent",
    "EffectAction",
    "Query",
    "RemoveRelation",
    "ScheduleEvent",
    "UpdateEntity",
    "parse_action",
    "parse_actions",
]

MAX_TEXT_CHARS = 100_000
"""Longest text ``parse_action`` and ``parse_actions`` accept."""
MAX_STEP = 2**63 - 1
"""Largest ``delay``, ``ttl`` or ``retry_steps`` (and ``advance`` count) the world accepts."""

# Constrained strings refuse lone surrogates already (pydantic-core reads them as UTF-8).
Name = Annotated[str, StringConstraints(min_length=1, max_length=256)]
Reason = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=2000)]
Steps = Annotated[int, Field(le=MAX_STEP)]


class _Action(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    reason: Reason = Field(description="Why this action: a human-readable audit line.")


class UpdateEntity(_Action):
    """Set attributes of a registered entity (others keep their values)."""

    kind: Literal["update_entity"] = "update_entity"
    entity_id: Name
    attributes: dict[Name, Scalar] = Field(min_length=1)

    @field_validator("attributes")
    @classmethod
    def _finite(cls, attributes: dict[str, Scalar]) -> dict[str, Scalar]:
        for name, value in attributes.items():
            problem = scalar_problem(value)
            if problem is not None:
                raise ValueError(f"attribute {name!r}: {problem}")
        return attributes


class AddRelation(_Action):
    """Add (or replace) the edge ``src -relation-> dst``; ``ttl`` in steps.

    ``relation`` must not be an attribute name of ``src``'s type: ``apply`` refuses it
    (``InvalidEdgeError``), so that ``fact(src, relation)`` has one meaning.
    """

    kind: Literal["add_relation"] = "add_relation"
    src: Name
    relation: Name
    dst: Name
    confidence: float = Field(1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    ttl: Steps | None = Field(None, ge=1)


class RemoveRelation(_Action):
    """Remove the edge ``src -relation-> dst``, which must exist."""

    kind: Literal["remove_relation"] = "remove_relation"
    src: Name
    relation: Name
    dst: Name


class CancelEvent(_Action):
    """Cancel a pending event by id."""

    kind: Literal["cancel_event"] = "cancel_event"
    event_id: Name


EffectAction = Annotated[
    UpdateEntity | AddRelation | RemoveRelation | CancelEvent,
    Field(discriminator="kind"),
]
"""An action an event may carry: one that changes state and schedules nothing."""


class ScheduleEvent(_Action):
    """Schedule ``actions`` to apply ``delay`` steps from now, if ``condition`` holds.

    When the event is due and its condition is false, it is re-checked at each of the
    next ``retry_steps`` steps and dropped after that (so ``retry_steps=0``: dropped
    at once). The condition is compiled while the action is validated: a condition
    outside the language (``wmkit.world.conditions``) makes the action invalid.
    Events cannot schedule events, so a timeline cannot grow by itself.
    """

    kind: Literal["schedule_event"] = "schedule_event"
    event_id: Name
    delay: Steps = Field(ge=1)
    condition: str | None = None
    retry_steps: Steps = Field(0, ge=0)
    actions: tuple[EffectAction, ...] = Field((), strict=False)  # a list is fine here

    @field_validator("condition")
    @classmethod
    def _compiles(cls, condition: str | None) -> str | None:
        if condition is not None:
            compile_condition(condition)  # ConditionError is a ValueError: pydantic reports it
        return condition

    @model_validator(mode="after")
    def _retry_needs_condition(self) -> ScheduleEvent:
        if self.retry_steps and self.condition is None:
            raise ValueError("retry_steps needs a condition to re-check")
        return self


class Query(_Action):
    """Ask for the facts of ``subject`` (of one ``relation`` if given); changes nothing."""

    kind: Literal["query"] = "query"
    subject: Name
    relation: Name | None = None


AtomicAction = Annotated[
    UpdateEntity | AddRelation | RemoveRelation | ScheduleEvent | CancelEvent | Query,
    Field(discriminator="kind"),
]
"""Any atomic action, discriminated on ``kind``."""

_ONE: TypeAdapter[AtomicAction] = TypeAdapter(AtomicAction)
_MANY: TypeAdapter[list[AtomicAction]] = TypeAdapter(list[AtomicAction])


def parse_action(text: str | bytes) -> AtomicAction:
    """Parse exactly one atomic action from a JSON object.

    Raises:
        ActionParseError: malformed JSON, an unknown or missing ``kind``, an unknown
            field, a wrong type or value, or text over ``MAX_TEXT_CHARS``. The message
            gives the path of each problem (``actions.0.ttl: ...``).
    """
    return _parse(_ONE, text)


def parse_actions(text: str | bytes) -> tuple[AtomicAction, ...]:
    """Parse a JSON list of atomic actions; all or nothing, as ``parse_action``."""
    return tuple(_parse(_MANY, text))


def _parse(adapter: TypeAdapter, text: str | bytes):
    if not isinstance(text, (str, bytes)):
        raise ActionParseError(f"expected JSON text, got {type(text).__name__}")
    if len(text) > MAX_TEXT_CHARS:
        raise ActionParseError(f"text is {len(text)} characters; the limit is {MAX_TEXT_CHARS}")
    try:
        return adapter.validate_json(text)
    except ValidationError as err:
        problems = [
            f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}"
            for e in err.errors(include_url=False)
        ]
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ActionParseError("invalid action: " + "; ".join(problems[:5]) + more) from None
