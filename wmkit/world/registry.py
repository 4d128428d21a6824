"""The entity registry: canonical ids and an attribute contract per entity type.

The registry is the single source of truth for names. A canonical id is derived from
``(entity_type, raw_id)`` by blake2b, so it is the same in every process and on every
machine (Python's ``hash`` is salted per process and must never be used for this).

The registry is a persistent value: ``register`` and ``update`` return a new registry
and leave the old one valid and unchanged. Entities live in an ``immutables.Map`` (a
HAMT), so each of those calls costs O(log32 n) and shares all untouched structure.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

import immutables

from wmkit.world.errors import (
    DuplicateEntityError,
    UnknownEntityError,
    UnknownEntityTypeError,
    UnknownFieldError,
)

__all__ = [
    "MAX_INT",
    "Entity",
    "EntityContract",
    "EntityRegistry",
    "Scalar",
    "canonical_id",
    "scalar_problem",
]

Scalar = str | int | float | bool
"""The type of an attribute value; facts carry it as ``str(value)``.

Floats must be finite and ints must fit in 64 bits (``scalar_problem``). Strings are
text and are never read as numbers here: ``"nan"`` is a valid string value, and the
one place that parses text as a number, ``num()`` of the condition language, refuses
non-finite results.
"""

MAX_INT = 2**63 - 1
"""Largest magnitude of an int attribute value (64 bits, what SQL stores keep exactly)."""

_TYPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\Z")
_RESERVED = "last_updated"  # set by the registry from the step, never by callers


def canonical_id(entity_type: str, raw_id: str) -> str:
    """Return the canonical id of ``(entity_type, raw_id)``: ``"type:<16 hex>"``.

    The digest is blake2b over the type, a NUL byte and the raw id (the NUL keeps
    ``("ab", "c")`` and ``("a", "bc")`` apart), truncated to 64 bits. Deterministic
    across processes; 64 bits keep the chance of any collision among 10^6 ids of one
    type below 1e-7, and the registry refuses a collision rather than merging.
    """
    digest = hashlib.blake2b(f"{entity_type}\x00{raw_id}".encode(), digest_size=8)
    return f"{entity_type}:{digest.hexdigest()}"


@dataclass(frozen=True)
class EntityContract:
    """What attributes an entity type may carry.

    Attributes:
        entity_type: the type name, e.g. ``"package"``: letters, digits, ``_.-``.
        attributes: allowed attribute names besides ``status`` (always allowed and
            required). ``last_updated`` is reserved: the registry sets it.
        statuses: allowed ``status`` values; empty means any string.
    """

    entity_type: str
    attributes: frozenset[str] = frozenset()
    statuses: frozenset[str] = frozenset()
    allowed: frozenset[str] = field(init=False, repr=False, compare=False)
    """Every attribute name a caller may set, ``status`` included."""

    def __post_init__(self) -> None:
        if not _TYPE_NAME.match(self.entity_type):
            raise UnknownEntityTypeError(
                f"bad entity type name {self.entity_type!r}: use letters, digits and _.-"
            )
        # Accept any iterable of names (a list from a config) but store frozensets.
        object.__setattr__(self, "attributes", frozenset(self.attributes))
        object.__setattr__(self, "statuses", frozenset(self.statuses))
        if _RESERVED in self.attributes:
            raise UnknownFieldError(f"{self.entity_type}: {_RESERVED!r} is reserved")
        object.__setattr__(self, "allowed", self.attributes | {"status"})


class Entity(NamedTuple):
    """A registered entity.

    Attributes:
        id: the canonical id.
        entity_type: its type.
        raw_id: the id it was registered under (e.g. a tracking number).
        attributes: its attribute values; always holds ``status``.
        last_updated: the step of its last register or update (a step, not wall time).
    """

    id: str
    entity_type: str
    raw_id: str
    attributes: immutables.Map[str, Scalar]
    last_updated: int


class EntityRegistry:
    """A persistent map of canonical id -> ``Entity``, checked against contracts.

    Lookups either way are O(1) in the number of entities (up to the HAMT's log32):
    raw -> canonical is a hash and a membership test, canonical -> raw is stored.
    """

    __slots__ = ("_contracts", "_entities")

    def __init__(self, contracts: Iterable[EntityContract] = ()) -> None:
        """Create an empty registry that accepts the types of ``contracts``."""
        self._contracts: Mapping[str, EntityContract] = MappingProxyType(
            {c.entity_type: c for c in contracts}
        )
        self._entities: immutables.Map[str, Entity] = immutables.Map()

    def _with(self, entities: immutables.Map[str, Entity]) -> EntityRegistry:
        new = object.__new__(EntityRegistry)
        new._contracts = self._contracts  # shared: contracts never change
        new._entities = entities
        return new

    def __len__(self) -> int:
        return len(self._entities)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._entities

    def __iter__(self) -> Iterator[Entity]:
        """Iterate over entities in no particular order."""
        return iter(self._entities.values())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, EntityRegistry):
            return self._contracts == other._contracts and self._entities == other._entities
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"EntityRegistry({len(self)} entities; types: {', '.join(sorted(self._contracts))})"

    @property
    def contracts(self) -> Mapping[str, EntityContract]:
        """The contracts by entity type."""
        return self._contracts

    def contract(self, entity_type: str) -> EntityContract:
        """Return the contract of ``entity_type``.

        Raises:
            UnknownEntityTypeError: no contract for that type.
        """
        try:
            return self._contracts[entity_type]
        except KeyError:
            known = ", ".join(sorted(self._contracts)) or "(none)"
            raise UnknownEntityTypeError(
                f"unknown entity type {entity_type!r}; known types: {known}"
            ) from None

    def get(self, entity_id: str) -> Entity:
        """Return the entity with canonical id ``entity_id``.

        Raises:
            UnknownEntityError: not registered.
        """
        entity = self._entities.get(entity_id)
        if entity is None:
            raise UnknownEntityError(f"unknown entity id {entity_id!r}")
        return entity

    def id_of(self, entity_type: str, raw_id: str) -> str:
        """Return the canonical id of a registered ``(entity_type, raw_id)``.

        Raises:
            UnknownEntityError: no such entity is registered.
        """
        entity_id = canonical_id(entity_type, raw_id)
        entity = self._entities.get(entity_id)
        if entity is None or entity.raw_id != raw_id:
            raise UnknownEntityError(f"no {entity_type!r} registered with raw id {raw_id!r}")
        return entity_id

    def raw_of(self, entity_id: str) -> tuple[str, str]:
        """Return ``(entity_type, raw_id)`` of a registered canonical id."""
        entity = self.get(entity_id)
        return entity.entity_type, entity.raw_id

    def register(
        self, entity_type: str, raw_id: str, attributes: Mapping[str, Scalar], *, step: int
    ) -> EntityRegistry:
        """Return a registry that also holds a new entity.

        Args:
            entity_type: a type with a contract.
            raw_id: the external id; ``canonical_id(entity_type, raw_id)`` names it.
            attributes: initial values; must include ``status``.
            step: the current step, stored as ``last_updated``.

        Raises:
            UnknownEntityTypeError, UnknownFieldError, DuplicateEntityError.
        """
        return self.register_many([(entity_type, raw_id, attributes)], step=step)

    def register_many(
        self, entities: Iterable[tuple[str, str, Mapping[str, Scalar]]], *, step: int
    ) -> EntityRegistry:
        """Return a registry that also holds every ``(type, raw_id, attributes)``.

        All or nothing: if any entity is invalid, raises and nothing is registered.
        Builds in one batch (``Map.mutate``), much faster than repeated ``register``.
        """
        with self._entities.mutate() as batch:
            for entity_type, raw_id, attributes in entities:
                contract = self.contract(entity_type)
                if not isinstance(raw_id, str) or not raw_id:
                    raise UnknownFieldError(f"{entity_type}: raw id must be a non-empty string")
                if "status" not in attributes:
                    raise UnknownFieldError(
                        f"{entity_type} {raw_id!r}: required attribute 'status' is missing"
                    )
                entity_id = canonical_id(entity_type, raw_id)
                old = batch.get(entity_id)
                if old is not None:
                    what = "already registered" if old.raw_id == raw_id else "collides with"
                    raise DuplicateEntityError(
                        f"{entity_type} {raw_id!r} ({entity_id}) {what} {old.raw_id!r}"
                    )
                _check(contract, entity_id, attributes)
                batch[entity_id] = Entity(
                    entity_id, entity_type, raw_id, immutables.Map(attributes), step
                )
            return self._with(batch.finish())

    def update(
        self, entity_id: str, attributes: Mapping[str, Scalar], *, step: int
    ) -> EntityRegistry:
        """Return a registry where ``entity_id`` has the given attribute values set.

        Attributes not named keep their values; ``last_updated`` becomes ``step``.

        Raises:
            UnknownEntityError, UnknownFieldError.
        """
        entity = self.get(entity_id)
        _check(self._contracts[entity.entity_type], entity_id, attributes)
        updated = entity._replace(
            attributes=entity.attributes.update(attributes), last_updated=step
        )
        return self._with(self._entities.set(entity_id, updated))


def scalar_problem(value: object) -> str | None:
    """Return why ``value`` is not a valid attribute value, or None when it is.

    Valid: a str that is valid UTF-8, a bool, an int within ``±MAX_INT``, or a finite
    float. NaN and ±Infinity are refused: they compare false to everything (a NaN fact
    never equals itself in a drift metric) and JSON cannot carry them (pydantic writes
    ``null``); a lone surrogate cannot be written as JSON either.
    """
    if isinstance(value, str):
        return _text_problem(value)
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if -MAX_INT <= value <= MAX_INT:
            return None
        return f"int {_digits(value)} is outside ±(2**63 - 1)"
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    return f"must be str, int, float or bool, not {type(value).__name__}"


def _text_problem(text: str) -> str | None:
    """Return why ``text`` cannot be written as UTF-8 (a lone surrogate), or None."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"text holds a lone surrogate {text[err.start]!r} at index {err.start}"
    return None


def _digits(value: int) -> str:
    """Show a huge int briefly (``str()`` of one over 4300 digits raises)."""
    return f"of {value.bit_length()} bits" if value.bit_length() > 64 else str(value)


def _check(contract: EntityContract, entity_id: str, attributes: Mapping[str, Scalar]) -> None:
    """Raise ``UnknownFieldError`` unless ``attributes`` fits ``contract``."""
    allowed = contract.allowed
    for name, value in attributes.items():
        if name not in allowed:
            why = "is reserved (set from the step)" if name == _RESERVED else "is not allowed"
            raise UnknownFieldError(
                f"{entity_id}: attribute {name!r} {why} for type {contract.entity_type!r}; "
                f"allowed: {', '.join(sorted(allowed))}"
            )
        problem = scalar_problem(value)
        if problem is not None:
            raise UnknownFieldError(f"{entity_id}: attribute {name!r}: {problem}")
    status = attributes.get("status")
    if status is not None and not isinstance(status, str):
        raise UnknownFieldError(f"{entity_id}: status must be a string, not {status!r}")
    if status is not None and contract.statuses and status not in contract.statuses:
        raise UnknownFieldError(
            f"{entity_id}: status {status!r} is not allowed for type {contract.entity_type!r}; "
            f"allowed: {', '.join(sorted(contract.statuses))}"
        )
