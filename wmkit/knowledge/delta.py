"""Knowledge deltas (seed 001 §4.1) and their validation before any merge (§4.2).

A delta is what a distiller (an LLM prompt or the rule inducer) makes of one scene:

    {"entities": [{"name", "type", "properties"}],
     "states":   [{"name", "type", "conditions"}],
     "edges":    [{"relation", "src_ref", "dst_ref", "trigger", "conditions"}],
     "rules":    [{"condition", "action", "confidence", "recovery", "linked_nodes"}]}

Every part is a pydantic model with ``extra="forbid"``. A node's id is its ``id`` when
given, else its ``name``; edges and rules refer to nodes by id. ``validate_delta``
checks a delta as a whole before anything merges: a delta whose structure is wrong
(not JSON, not an object, an unknown top-level key, a group that is not a list) is
dropped entirely; otherwise each part is checked on its own, the valid ones are kept
and the others are dropped with a reason (``REASONS``). A part that refers to a
dropped part is dropped too (``depends_on_rejected``), so a merge never sees half of
what the distiller meant.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, Protocol, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

if TYPE_CHECKING:
    from wmkit.world.types import Fact

__all__ = [
    "MAX_TEXT",
    "REASONS",
    "RELATIONS",
    "DeltaEdge",
    "DeltaEntity",
    "DeltaRule",
    "DeltaState",
    "KnowledgeDelta",
    "NodeLookup",
    "PropertyValue",
    "Rejection",
    "Relation",
    "ValidatedDelta",
    "delta_from_facts",
    "text_tokens",
    "validate_delta",
]

Relation = Literal["transition", "containment", "episodic"]
RELATIONS: tuple[str, ...] = get_args(Relation)
"""The only edge relations a world graph holds (seed 001 §4.3)."""

MAX_TEXT = 1000
"""Longest name, condition, action or trigger accepted, in characters."""

REASONS = (
    "malformed_json",  # the delta is not JSON text
    "bad_structure",  # not an object, unknown top-level key, or a group that is not a list
    "missing_field",  # a required field is absent
    "unknown_field",  # a field the format does not have
    "bad_type",  # a field of the wrong type, or a string that is too long
    "empty_name",  # a node name or id that is blank
    "unknown_relation",  # an edge relation outside RELATIONS
    "self_loop",  # a containment edge from a node to itself
    "empty_condition",  # a rule condition with no word in it
    "empty_action",  # a rule action with no word in it
    "trivial_rule",  # a rule whose condition and action say the same thing
    "confidence_out_of_range",  # a confidence outside [0, 1], or not finite
    "duplicate_in_delta",  # a node id, edge or rule that the delta already stated
    "kind_conflict",  # an entity with the id of a state node, or the other way round
    "type_conflict",  # a node whose type differs from the one the graph holds
    "missing_endpoint",  # an edge end that names no node in the graph or the delta
    "missing_link",  # a rule linked to a node in neither the graph nor the delta
    "depends_on_rejected",  # an edge or rule referring to a node this delta dropped
)
"""Every reason a part (or the whole delta) is dropped for, in check order."""

# Runs of letters/digits, or of operator symbols; separators and "_" split and vanish.
_WORD = re.compile(r"[^\W_]+|[^\w\s.,;:'\"()\[\]{}]+")


@functools.lru_cache(maxsize=1 << 16)  # rule texts recur across scenes
def text_tokens(text: str) -> tuple[str, ...]:
    """Split ``text`` into normalised tokens: case-folded words and operator runs.

    Underscores and separators (``. , ; : ' " ( ) [ ] { }``) split words and are
    dropped; operators stay tokens (``==``, ``!=``, ``<``), so ``x == 1`` and
    ``x != 1`` stay apart. ``"door.locked == true"`` -> ``("door", "locked", "==",
    "true")``.
    """
    return tuple(_WORD.findall(text.casefold()))


# Constraints checked inside pydantic-core (no Python call per field): this is the hot
# path of every merge. ``_reason`` maps pydantic's error types to ours.
Confidence = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False, strict=True)]
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT),
    Field(strict=True),
]
Text = Annotated[
    str, StringConstraints(strip_whitespace=True, max_length=MAX_TEXT), Field(strict=True)
]
PropertyValue = StrictBool | StrictInt | Annotated[StrictFloat, Field(allow_inf_nan=False)] | Text
"""A node property value: a JSON scalar (null, lists and objects are refused)."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _NodePart(_Part):
    name: Name
    type: Name
    id: Name | None = None
    properties: dict[Name, PropertyValue] = Field(default_factory=dict)
    confidence: Confidence = 1.0

    @property
    def node_id(self) -> str:
        """The node this part describes: ``id`` when given, else ``name``."""
        return self.id if self.id is not None else self.name


class DeltaEntity(_NodePart):
    """An entity seen in a scene: a room, an object, a person.

    Attributes:
        name: display name; also the node id when ``id`` is not given.
        type: what kind of thing it is (``"room"`` marks rooms on the map).
        id: node id, when it differs from the name (e.g. ``"door:iron"``).
        properties: observed attributes, JSON scalars.
        confidence: how sure the distiller is, in [0, 1].
    """

    kind: Literal["entity"] = "entity"


class DeltaState(_NodePart):
    """A state of the world worth a node, e.g. ``door_unlocked``.

    Attributes:
        conditions: what holds in that state, as text (``"door:iron.locked == false"``).
        (the other fields as in ``DeltaEntity``)
    """

    kind: Literal["state"] = "state"
    conditions: tuple[Text, ...] = ()


class DeltaEdge(_Part):
    """A relation between two nodes.

    Attributes:
        relation: one of ``RELATIONS``. ``containment``: ``src_ref`` holds
            ``dst_ref``; ``transition``: doing ``trigger`` in ``src_ref`` leads to
            ``dst_ref``; ``episodic``: the two were involved in one event.
        src_ref: id of the source node.
        dst_ref: id of the destination node.
        trigger: the action that takes the transition (transitions; optional).
        conditions: what must hold for it, as text.
        confidence: how sure the distiller is, in [0, 1].
    """

    relation: Relation
    src_ref: Name
    dst_ref: Name
    trigger: Text | None = None
    conditions: tuple[Text, ...] = ()
    confidence: Confidence = 1.0

    @model_validator(mode="after")
    def _no_containment_loop(self) -> DeltaEdge:
        if self.relation == "containment" and self.src_ref == self.dst_ref:
            raise PydanticCustomError(
                "self_loop", "'{ref}' cannot contain itself", {"ref": self.src_ref}
            )
        return self

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(src_ref, relation, dst_ref, trigger or "")``: what makes two edges the same."""
        return (self.src_ref, self.relation, self.dst_ref, self.trigger or "")


class DeltaRule(_Part):
    """A regularity of the environment: when ``condition`` holds, ``action`` results.

    Attributes:
        condition: when the rule applies, as text (``"door.locked == true"``).
        action: what results (the seed's name; ``"open_door_fail"``).
        confidence: how sure the distiller is, in [0, 1]; required.
        recovery: what to do about it, if anything (``"use_key_on_door"``).
        linked_nodes: ids of the nodes the rule is about; each must exist.
    """

    condition: Text
    action: Text
    confidence: Confidence
    recovery: Text | None = None
    linked_nodes: tuple[Name, ...] = ()

    @field_validator("condition")
    @classmethod
    def _condition(cls, value: str) -> str:
        if not text_tokens(value):
            raise PydanticCustomError(
                "empty_condition", "condition '{value}' has no words", {"value": value}
            )
        return value

    @field_validator("action")
    @classmethod
    def _action(cls, value: str) -> str:
        if not text_tokens(value):
            raise PydanticCustomError(
                "empty_action", "action '{value}' has no words", {"value": value}
            )
        return value

    @model_validator(mode="after")
    def _not_trivial(self) -> DeltaRule:
        if text_tokens(self.condition) == text_tokens(self.action):
            raise PydanticCustomError("trivial_rule", "condition and action say the same thing")
        return self


class KnowledgeDelta(_Part):
    """A whole delta, for building one in code and serialising it (``model_dump_json``).

    Validation of outside input goes through ``validate_delta``, which drops bad parts
    one by one instead of refusing the whole delta for one of them.
    """

    entities: tuple[DeltaEntity, ...] = ()
    states: tuple[DeltaState, ...] = ()
    edges: tuple[DeltaEdge, ...] = ()
    rules: tuple[DeltaRule, ...] = ()


class Rejection(NamedTuple):
    """One dropped part, and why.

    Attributes:
        part: the group (``"entities"``, ...; ``"delta"`` for the whole delta).
        index: position in that group (-1 for the whole delta).
        reason: one of ``REASONS``.
        detail: what was wrong, for a person.
    """

    part: str
    index: int
    reason: str
    detail: str


class ValidatedDelta(NamedTuple):
    """The parts of a delta that passed, and why the others did not.

    Attributes:
        scene: id of the scene the delta was distilled from (its evidence).
        entities, states, edges, rules: the valid parts, in input order.
        rejections: the dropped parts, in input order.
    """

    scene: str
    entities: tuple[DeltaEntity, ...] = ()
    states: tuple[DeltaState, ...] = ()
    edges: tuple[DeltaEdge, ...] = ()
    rules: tuple[DeltaRule, ...] = ()
    rejections: tuple[Rejection, ...] = ()

    @property
    def counts(self) -> Counter[str]:
        """Dropped parts by reason."""
        return Counter(r.reason for r in self.rejections)

    @property
    def nodes(self) -> tuple[DeltaEntity | DeltaState, ...]:
        """Entities then states."""
        return self.entities + self.states


class NodeLookup(Protocol):
    """What validation needs of a graph: the kind and type of a node, or None."""

    def node_kind_type(self, node_id: str) -> tuple[str, str] | None:
        """Return ``(kind, type)`` of node ``node_id``, or None if there is none."""
        ...


_GROUPS: dict[str, type[_Part]] = {
    "entities": DeltaEntity,
    "states": DeltaState,
    "edges": DeltaEdge,
    "rules": DeltaRule,
}
_PYDANTIC_REASONS = {
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "string_too_short": "empty_name",  # only names and ids have a minimum length
}
_OUT_OF_RANGE = {"greater_than_equal", "less_than_equal", "finite_number"}


def _reason(error: ValidationError) -> tuple[str, str]:
    first = error.errors(include_url=False)[0]
    kind, loc = first["type"], first["loc"]
    if kind in REASONS:
        reason = kind
    elif loc[:1] == ("confidence",) and kind in _OUT_OF_RANGE:
        reason = "confidence_out_of_range"
    elif loc[:1] == ("relation",) and kind == "literal_error":
        reason = "unknown_relation"
    else:
        reason = _PYDANTIC_REASONS.get(kind, "bad_type")
    where = ".".join(str(p) for p in loc)
    return reason, f"{where}: {first['msg']}" if where else first["msg"]


def validate_delta(
    raw: Mapping[str, Any] | str | bytes | KnowledgeDelta,
    graph: NodeLookup | None = None,
    *,
    scene: str,
) -> ValidatedDelta:
    """Check a delta against the format and against ``graph``; keep what passes.

    Checks, in order: JSON and top-level structure (a failure drops the whole delta);
    each part's fields (required, known, typed, non-blank, confidence in [0, 1],
    relation known, rule sane); duplicates inside the delta; node kind and type
    against the graph; edge endpoints and rule links exist in the graph or among
    this delta's valid nodes (a reference to a node this delta dropped is
    ``depends_on_rejected``).

    Args:
        raw: the delta as JSON text, a parsed object, or a ``KnowledgeDelta``.
        graph: the graph it will merge into; None checks references within the delta.
        scene: id of the scene the delta came from; recorded as evidence.

    Returns:
        The valid parts and the rejections; nothing is raised for bad input.

    Raises:
        ValueError: ``scene`` is not a non-blank string (a caller bug, not bad data).
    """
    if not isinstance(scene, str) or not scene.strip():
        raise ValueError(f"scene must be a non-blank string, got {scene!r}")
    parsed = _parse(raw)
    if isinstance(parsed, Rejection):
        return ValidatedDelta(scene, rejections=(parsed,))
    rejections: list[Rejection] = []
    kept: dict[str, list[Any]] = {group: [] for group in _GROUPS}
    dropped_ids: set[str] = set()  # ids of nodes this delta states but dropped
    seen_ids: set[str] = set()
    for group in ("entities", "states"):
        for i, (part, why) in enumerate(parsed[group]):
            if part is not None:
                why = _node_problem(part, graph, seen_ids)
            if why is None:
                kept[group].append(part)
                seen_ids.add(part.node_id)
            else:
                rejections.append(Rejection(group, i, *why[:2]))
                ref = part.node_id if part is not None else _raw_id(why[2])
                if ref is not None and ref not in seen_ids:
                    dropped_ids.add(ref)

    def unknown(refs: Iterable[str]) -> tuple[str, str] | None:
        """The first ref naming no usable node, and whether it is missing or was dropped."""
        for ref in refs:
            if ref in seen_ids:
                continue
            if ref in dropped_ids:  # even if the graph has it: the delta meant its own
                return ref, "depends_on_rejected"
            if graph is None or graph.node_kind_type(ref) is None:
                return ref, "missing"
        return None

    seen_edges: set[tuple[str, str, str, str]] = set()
    for i, (edge, why) in enumerate(parsed["edges"]):
        if edge is not None:
            if (bad := unknown((edge.src_ref, edge.dst_ref))) is not None:
                reason = "missing_endpoint" if bad[1] == "missing" else bad[1]
                why = (reason, f"endpoint {bad[0]!r} ({bad[1]})")
            elif edge.key in seen_edges:
                why = ("duplicate_in_delta", f"edge {edge.key}")
            else:
                seen_edges.add(edge.key)
                kept["edges"].append(edge)
                continue
        rejections.append(Rejection("edges", i, *why[:2]))

    seen_rules: set[tuple[tuple[str, ...], tuple[str, ...]]] = set()
    for i, (rule, why) in enumerate(parsed["rules"]):
        if rule is not None:
            key = (text_tokens(rule.condition), text_tokens(rule.action))
            if (bad := unknown(rule.linked_nodes)) is not None:
                reason = "missing_link" if bad[1] == "missing" else bad[1]
                why = (reason, f"linked node {bad[0]!r} ({bad[1]})")
            elif key in seen_rules:
                why = ("duplicate_in_delta", f"rule {rule.condition!r}")
            else:
                seen_rules.add(key)
                kept["rules"].append(rule)
                continue
        rejections.append(Rejection("rules", i, *why[:2]))

    return ValidatedDelta(
        scene,
        tuple(kept["entities"]),
        tuple(kept["states"]),
        tuple(kept["edges"]),
        tuple(kept["rules"]),
        tuple(rejections),
    )


# A part that parsed (problem None), or None and (reason, detail, the raw item).
_Parsed = dict[str, list[tuple[Any, tuple[str, str, Any] | None]]]


def _parse(raw: Mapping[str, Any] | str | bytes | KnowledgeDelta) -> _Parsed | Rejection:
    """Parse every part, or say why the delta as a whole is unusable.

    The usual delta is valid throughout and parses in one pydantic call; only when
    that fails is each part parsed on its own, to keep the good ones.
    """
    if isinstance(raw, str | bytes):
        try:
            raw = KnowledgeDelta.model_validate_json(raw)
        except ValidationError:
            try:
                raw = json.loads(raw)
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                return Rejection("delta", -1, "malformed_json", str(exc))
    elif isinstance(raw, Mapping):
        with contextlib.suppress(ValidationError):  # then part by part, below
            raw = KnowledgeDelta.model_validate(raw)
    if isinstance(raw, KnowledgeDelta):
        return {group: [(part, None) for part in getattr(raw, group)] for group in _GROUPS}
    if not isinstance(raw, Mapping):
        detail = f"a delta is a JSON object, got {type(raw).__name__}"
        return Rejection("delta", -1, "bad_structure", detail)
    unknown = sorted(set(raw) - set(_GROUPS), key=str)
    if unknown:
        return Rejection("delta", -1, "bad_structure", f"unknown top-level keys {unknown}")
    parsed: _Parsed = {}
    for group, model in _GROUPS.items():
        items = raw.get(group, [])
        if not isinstance(items, list | tuple):
            return Rejection("delta", -1, "bad_structure", f"{group!r} must be a list")
        parsed[group] = []
        for item in items:
            try:
                parsed[group].append((model.model_validate(item), None))
            except ValidationError as exc:
                parsed[group].append((None, (*_reason(exc), item)))
    return parsed


def _raw_id(item: object) -> str | None:
    """The id a (possibly invalid) node part claims, to trace references to it."""
    if not isinstance(item, Mapping):
        return None
    ref = item.get("id") if item.get("id") is not None else item.get("name")
    return ref.strip() if isinstance(ref, str) and ref.strip() else None


def _node_problem(
    part: DeltaEntity | DeltaState, graph: NodeLookup | None, seen: set[str]
) -> tuple[str, str, Any] | None:
    node = part.node_id
    if node in seen:
        return "duplicate_in_delta", f"node {node!r} stated twice", None
    known = graph.node_kind_type(node) if graph is not None else None
    if known is not None:
        kind, type_ = known
        if kind != part.kind:
            return "kind_conflict", f"{node!r} is a {kind} node, not a {part.kind}", None
        if type_ != part.type:
            return "type_conflict", f"{node!r} has type {type_!r}, not {part.type!r}", None
    return None


def delta_from_facts(
    facts: Iterable[Fact | tuple[str, str, str]],
    *,
    containment: Collection[str] = ("at", "in", "on"),
    types: Mapping[str, str] | None = None,
) -> KnowledgeDelta:
    """Build a delta from facts: subjects become entities, facts their properties.

    A fact whose relation is in ``containment`` (``("key", "in", "room:hall")``)
    becomes a containment edge from the container to the subject, and the container
    an entity too. A node's type is ``types[id]``, else the prefix of a canonical id
    (``"room:hall"`` -> ``"room"``), else ``"thing"``. A relation with several objects
    for one subject (Jericho's ``attr``) becomes one property: the sorted objects
    joined by commas.

    Args:
        facts: ``(subject, relation, object)`` triples, e.g. a ``WorldState``.
        containment: relations that mean "subject is inside object".
        types: node id -> type, overriding the prefix rule.
    """
    types = types or {}
    props: dict[str, dict[str, list[str]]] = {}
    edges: dict[tuple[str, str], None] = {}
    for subject, relation, obj in facts:
        props.setdefault(subject, {})
        if relation in containment:
            props.setdefault(obj, {})
            if obj != subject:
                edges[(obj, subject)] = None
        else:
            props[subject].setdefault(relation, []).append(obj)

    def type_of(node: str) -> str:
        head, sep, _ = node.partition(":")
        return types.get(node) or (head if sep and head else "thing")

    entities = tuple(
        DeltaEntity(
            name=node,
            type=type_of(node),
            properties={k: ",".join(sorted(v)) for k, v in sorted(values.items())},
        )
        for node, values in sorted(props.items())
    )
    return KnowledgeDelta(
        entities=entities,
        edges=tuple(
            DeltaEdge(relation="containment", src_ref=src, dst_ref=dst) for src, dst in edges
        ),
    )
