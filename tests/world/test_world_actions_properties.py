"""Property tests of atomic-action validation and application (issue 16, item 8).

Random JSON-ish dicts, shaped like actions (a kind, the known field names, values of
the right and wrong types, NaN, infinities, huge ints, bools for ints, nested event
actions) or not at all. The properties:

- validation gives an ``AtomicAction`` or a pydantic ``ValidationError`` (Python) /
  ``ActionParseError`` (JSON text), never another exception, and both paths agree;
- a valid action holds only finite numbers and in-range ints, and survives a JSON
  round trip unchanged (strict JSON: no NaN, no Infinity);
- applying valid actions and ``advance`` to a world never raises, and the world keeps
  its invariants: integer steps, and no ``(subject, name)`` that is both an attribute
  and an edge relation (so ``fact()`` is never ambiguous).

The example budget is the hypothesis profile's (``tests/conftest.py``).
"""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError
from tiny_world import HALL, LAMP, LIVING, SON, make_world

from wmkit.world import (
    ActionParseError,
    AtomicAction,
    ScheduleEvent,
    UpdateEntity,
    World,
    WorldError,
    advance,
    apply,
    parse_action,
    parse_actions,
)
from wmkit.world.actions import MAX_STEP
from wmkit.world.registry import MAX_INT

ADAPTER: TypeAdapter[AtomicAction] = TypeAdapter(AtomicAction)
KINDS = [
    "update_entity", "add_relation", "remove_relation", "schedule_event", "cancel_event",
    "query",
]  # fmt: skip
FIELDS = [
    "kind", "reason", "entity_id", "attributes", "src", "relation", "dst", "confidence",
    "ttl", "event_id", "delay", "condition", "retry_steps", "actions", "subject",
]  # fmt: skip

IDS = [LAMP, SON, LIVING, HALL, "nobody:0"]
NAMES = ["status", "brightness", "color", "mood", "at", "in", "owns", "last_updated"]


WORLD = make_world()

# --- values ---------------------------------------------------------------------------

# No lone surrogates in text: json.dumps would escape them and the JSON parser refuses
# them, while a Python str holds them (the surrogate case has its own test below).
text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
numbers = st.one_of(
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([MAX_INT, MAX_INT + 1, -MAX_INT, -MAX_INT - 1, MAX_STEP, 0, 1, -1]),
    st.floats(),  # NaN and ±inf included
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -0.0, 0.5, 1.0, 1.5]),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, text)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
names = st.one_of(st.sampled_from(IDS + NAMES + ["", " ", "e1", "e2"]), text)
steps_like = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([MAX_STEP, MAX_STEP + 1, 2**64]),
    st.floats(),
    st.booleans(),
)
CONDITIONS = [
    None, "step > 2", f"has('{SON}', 'at', '{LIVING}')", f"fact('{LAMP}', 'brightness') == '80'",
    f"num(fact('{LAMP}', 'brightness')) > 50", "step < 1e400", "__import__('os')", "", "1 +",
    "x", "step", "num('nan') > 0", "1 / 0 > 0",
]  # fmt: skip


def field_values(field: str) -> st.SearchStrategy:
    plausible = {
        "kind": st.sampled_from([*KINDS, "bogus", "", "Query"]),
        "reason": st.sampled_from(["because", "  ", "", "x" * 2001]) | text,
        "attributes": st.dictionaries(names, scalars, max_size=3),
        "confidence": numbers,
        "ttl": steps_like | st.none(),
        "delay": steps_like,
        "retry_steps": steps_like,
        "condition": st.sampled_from(CONDITIONS) | text,
        "relation": names,
    }.get(field, names)
    return st.one_of(plausible, plausible, json_values)


good_scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63) + 1, 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)
EFFECT_KINDS = ["update_entity", "add_relation", "remove_relation", "cancel_event"]


def good_values(field: str, depth: int) -> st.SearchStrategy:
    """Values that are right for ``field`` (so that many drawn actions are valid)."""
    if field == "actions":
        return st.lists(action_dicts(depth=depth - 1, kinds=EFFECT_KINDS), max_size=3)
    return {
        "reason": st.sampled_from(["because", " seen it ", "é"]),
        "attributes": st.dictionaries(st.sampled_from(NAMES), good_scalars, min_size=1, max_size=3),
        "relation": st.sampled_from(NAMES),
        "confidence": st.floats(0, 1) | st.integers(0, 1),
        "ttl": st.none() | st.integers(1, 10) | st.just(MAX_STEP),
        "delay": st.integers(1, 10) | st.just(MAX_STEP),
        "retry_steps": st.integers(0, 5),
        "condition": st.sampled_from(CONDITIONS[:5]),
    }.get(field, st.sampled_from([*IDS, "e1", "e2"]))


@st.composite
def action_dicts(draw, depth: int = 1, kinds: list[str] = KINDS) -> dict:
    """A dict shaped like an action; each field right, wrong, missing or extra."""
    kind = draw(st.sampled_from(kinds)) if draw(st.integers(0, 7)) else draw(field_values("kind"))
    out: dict = {} if draw(st.integers(0, 15)) == 0 else {"kind": kind}
    for field in _fields_of(kind):
        choice = draw(st.integers(0, 11))
        if choice == 0 and field != "reason":
            continue  # missing: fine where there is a default
        if choice == 1:
            out[field] = draw(field_values(field))  # most likely wrong
        elif field != "actions" or depth > 0:
            out[field] = draw(good_values(field, depth))
    if draw(st.integers(0, 3)) == 0:
        field = draw(st.sampled_from(FIELDS[1:]))
        out[field] = draw(field_values(field))  # a field of another kind, or a wrong value
    if draw(st.integers(0, 7)) == 0:
        out[draw(text)] = draw(json_values)  # an unknown field
    return out


def _fields_of(kind: object) -> list[str]:
    return {
        "update_entity": ["reason", "entity_id", "attributes"],
        "add_relation": ["reason", "src", "relation", "dst", "confidence", "ttl"],
        "remove_relation": ["reason", "src", "relation", "dst"],
        "schedule_event": ["reason", "event_id", "delay", "condition", "retry_steps", "actions"],
        "cancel_event": ["reason", "event_id"],
        "query": ["reason", "subject", "relation"],
    }.get(kind if isinstance(kind, str) else "", [])


anything = action_dicts() | json_values


def _validate(value: object) -> AtomicAction | None:
    try:
        return ADAPTER.validate_python(value)
    except ValidationError:
        return None


def _parse(value: object) -> AtomicAction | None:
    try:
        return parse_action(json.dumps(value))  # NaN/Infinity go out as JSON5-style tokens
    except ActionParseError:
        return None


def _numbers_in(action: AtomicAction) -> list[object]:
    found: list[object] = []
    if isinstance(action, UpdateEntity):
        found.extend(action.attributes.values())
    for name in ("confidence", "ttl", "delay", "retry_steps"):
        found.append(getattr(action, name, None))
    if isinstance(action, ScheduleEvent):
        for sub in action.actions:
            found.extend(_numbers_in(sub))
    return found


def _assert_sound(action: AtomicAction) -> None:
    for value in _numbers_in(action):
        if isinstance(value, float):
            assert math.isfinite(value), action
        elif isinstance(value, int) and not isinstance(value, bool):
            assert -MAX_INT <= value <= MAX_STEP, action
    # Strict JSON (allow_nan=False) and back: the same action.
    strict = json.dumps(action.model_dump(mode="json"), allow_nan=False)
    assert parse_action(strict) == action
    assert parse_action(action.model_dump_json()) == action


@given(anything)
def test_validation_gives_an_action_or_a_validation_error(value):
    from_python = _validate(value)
    from_json = _parse(value)
    # JSON has no tuples or other Python-only values here, so both paths must agree.
    assert from_python == from_json, (value, from_python, from_json)
    if from_python is not None:
        _assert_sound(from_python)


NUMERIC_SLOTS = [
    ("update_entity", ("attributes", "brightness")),
    ("add_relation", ("confidence",)),
    ("add_relation", ("ttl",)),
    ("schedule_event", ("delay",)),
    ("schedule_event", ("retry_steps",)),
    ("schedule_event", ("actions", 0, "attributes", "brightness")),
    ("schedule_event", ("actions", 0, "confidence")),
]
VALID = {
    "update_entity": {"entity_id": LAMP, "attributes": {"brightness": 1}},
    "add_relation": {"src": SON, "relation": "at", "dst": LIVING},
    "schedule_event": {"event_id": "e", "delay": 1, "condition": "step > 0", "actions": []},
}


@given(st.sampled_from(NUMERIC_SLOTS), numbers)
def test_any_number_in_a_numeric_field_is_sound_or_refused(slot, number):
    kind, path = slot
    value = {"kind": kind, "reason": "r", **json.loads(json.dumps(VALID[kind]))}
    if path[0] == "actions":  # inside an event's action
        nested = {"kind": "update_entity" if path[2] == "attributes" else "add_relation"}
        nested |= {"reason": "r", **json.loads(json.dumps(VALID[nested["kind"]]))}
        value["actions"] = [nested]
        path = path[2:]
        target = nested
    else:
        target = value
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = number
    from_python, from_json = _validate(value), _parse(value)
    assert from_python == from_json, (value, from_python, from_json)
    if from_python is not None:
        _assert_sound(from_python)


@given(st.lists(anything, max_size=4))
def test_a_list_is_all_or_nothing(values):
    try:
        parsed = parse_actions(json.dumps(values))
    except ActionParseError:
        assert any(_validate(v) is None for v in values)
    else:
        assert list(parsed) == [_validate(v) for v in values]


@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_text_parses_or_is_refused(raw):
    try:
        action = parse_action(raw)
    except ActionParseError:
        return
    _assert_sound(action)


@given(st.sampled_from(["entity_id", "reason", "attribute", "key", "condition"]))
def test_lone_surrogates_are_refused_not_stored(where):
    # json.loads("\"\\ud800\"") gives a str that cannot be written back as JSON: such an
    # action must be refused, not accepted and then fail when it is logged.
    bad = "x\ud800"
    value: dict = {"kind": "update_entity", "entity_id": LAMP, "attributes": {"color": "red"}}
    value["reason"] = "r"
    if where in ("entity_id", "reason"):
        value[where] = bad
    elif where == "attribute":
        value["attributes"] = {"color": bad}
    elif where == "key":
        value["attributes"] = {bad: "red"}
    else:
        value = {"kind": "schedule_event", "event_id": "e", "delay": 1, "reason": "r"}
        value["condition"] = f"fact('{bad}', 'a') == None"
    assert _validate(value) is None


# --- applying valid actions -----------------------------------------------------------

good_actions = st.one_of(
    st.builds(
        lambda e, attrs: {"kind": "update_entity", "entity_id": e, "attributes": attrs},
        st.sampled_from(IDS),
        st.dictionaries(st.sampled_from(NAMES), scalars, min_size=1, max_size=2),
    ),
    st.builds(
        lambda k, s, r, d, c, t: (
            {"kind": k, "src": s, "relation": r, "dst": d}
            | ({"confidence": c, "ttl": t} if k == "add_relation" else {})
        ),
        st.sampled_from(["add_relation", "remove_relation"]),
        st.sampled_from(IDS),
        st.sampled_from(NAMES),
        st.sampled_from(IDS),
        st.floats(0, 1) | st.just(math.nan),
        st.none() | st.integers(-1, 6),
    ),
    st.builds(
        lambda s, r: {"kind": "query", "subject": s, "relation": r},
        st.sampled_from(IDS),
        st.none() | st.sampled_from(NAMES),
    ),
    action_dicts(),
).map(lambda d: {"reason": "r", **d} if isinstance(d, dict) else d)
moves = st.lists(
    st.one_of(good_actions, st.integers(0, 4), st.sampled_from([1.5, True, -1])), max_size=12
)


def _assert_world_sound(world: World) -> None:
    assert type(world.step) is int
    attributes = {(e.id, name) for e in world.registry for name in e.attributes}
    relations = {(e.src, e.relation) for e in world.graph.edges()}
    assert not attributes & relations
    for subject, name in attributes:  # one attribute value, never mixed with edge targets
        assert len(world.objects(subject, name)) == 1
    facts = world.facts()
    assert all(isinstance(o, str) for _, _, o in facts)
    json.dumps(facts.to_list(), allow_nan=False)


@given(moves)
def test_applying_valid_actions_never_raises_and_keeps_the_world_sound(moves):
    world = WORLD
    for move in moves:
        if isinstance(move, dict):
            action = _validate(move)
            if action is None:
                continue
            result = apply(world, action)
            assert result.world is world or not result.violations
            world = result.world
        else:
            try:
                result = advance(world, move)
            except WorldError:
                assert type(move) is not int or move < 0
                continue
            assert result.world.step == world.step + move
            world = result.world
        _assert_world_sound(world)
