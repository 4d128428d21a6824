"""Property tests of the condition language (issue 16, item 8).

Expressions come from a typed grammar of the allowed constructs, each paired with a
reference meaning written here in plain Python; forbidden constructs are spliced into
allowed expressions. The properties:

- an allowed expression compiles (or is refused for its size, never for its content)
  and evaluates to exactly the reference value, or raises ``ConditionError`` where the
  reference fails (division by zero, ``num('abc')``, ``None in 'abc'``, ...);
- an expression holding any forbidden construct is refused by ``compile_condition``,
  by ``ScheduleEvent`` and by ``parse_action``, and so never evaluates;
- any text at all: ``compile_condition`` returns a ``Condition`` or raises
  ``ConditionError``, and a compiled one evaluates to a bool or raises
  ``ConditionError``, in bounded time.

The example budget is the hypothesis profile's (``tests/conftest.py``).
"""

from __future__ import annotations

import ast
import json
import math
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from pydantic import ValidationError

from wmkit.world import (
    ActionParseError,
    Condition,
    ConditionError,
    ScheduleEvent,
    compile_condition,
    evaluate,
    parse_action,
)
from wmkit.world.conditions import MAX_LENGTH

FACTS: dict[tuple[str, str], tuple[str, ...]] = {
    ("lamp", "level"): ("42",),
    ("lamp", "status"): ("on",),
    ("lamp", "word"): ("hello",),
    ("lamp", "nan"): ("nan",),
    ("lamp", "big"): ("1e400",),
    ("kid", "at"): ("hall", "yard"),
    ("kid", "mood"): ("glad",),
}
SUBJECTS = ["lamp", "kid", "nobody"]
RELATIONS = ["level", "status", "word", "nan", "big", "at", "mood", "missing"]
OBJECTS = ["on", "hall", "yard", "glad", "42", "roof"]
SLOW_S = 1.0  # far above TIME_LIMIT_S: only a hang (or a runaway) would pass it


def lookup(subject: str, relation: str) -> tuple[str, ...]:
    return FACTS.get((subject, relation), ())


class Fails(Exception):
    """The reference meaning of an expression that must raise ConditionError."""


class Expr(NamedTuple):
    """Source text and its reference meaning: ``value(step)``, raising ``Fails``."""

    source: str
    value: Callable[[int], Any]


def _q(text: str) -> str:
    return repr(text)  # a Python string literal, as the language reads it


def _fact(subject: str, relation: str) -> str | None:
    found = lookup(subject, relation)
    return found[0] if len(found) == 1 else None


def _num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise Fails(f"num({value!r})")
    try:
        number = float(value)
    except (ValueError, OverflowError):
        raise Fails(f"num({value!r})") from None
    if not math.isfinite(number):
        raise Fails(f"num({value!r}) is not finite")
    return number


def _arith(op: str, left: float, right: float) -> float:
    try:
        result = {"+": lambda: left + right, "-": lambda: left - right,
                  "*": lambda: left * right, "/": lambda: left / right}[op]()  # fmt: skip
    except (ZeroDivisionError, OverflowError):
        raise Fails(op) from None
    if isinstance(result, float) and not math.isfinite(result):
        raise Fails(f"{result} is not finite")
    return result


def _compare(op: str, left: object, right: object) -> bool:
    ops = {
        "==": lambda: left == right, "!=": lambda: left != right,
        "<": lambda: left < right, "<=": lambda: left <= right,
        ">": lambda: left > right, ">=": lambda: left >= right,
        "in": lambda: left in right, "not in": lambda: left not in right,
    }  # fmt: skip
    try:
        return ops[op]()
    except TypeError:
        raise Fails(f"{left!r} {op} {right!r}") from None


# --- leaves ---------------------------------------------------------------------------

small_ints = st.integers(-1000, 1000)
small_floats = st.floats(-1000, 1000, allow_nan=False, allow_infinity=False)
NUM_TEXTS = ["42", "-3.5", "1e3", " 7 ", "1_0", "abc", "", "nan", "inf", "-Infinity", "1e400"]


def _const(value: object) -> Expr:
    return Expr(repr(value), lambda step: value)


step_expr = st.just(Expr("step", lambda step: step))
number_leaves = st.one_of(
    small_ints.map(_const),
    small_floats.map(_const),
    step_expr,
    st.sampled_from(NUM_TEXTS).map(lambda t: Expr(f"num({_q(t)})", lambda step: _num(t))),
    st.builds(
        lambda s, r: Expr(f"num(fact({_q(s)}, {_q(r)}))", lambda step: _num(_fact(s, r))),
        st.sampled_from(SUBJECTS),
        st.sampled_from(RELATIONS),
    ),
)
text_leaves = st.one_of(
    st.sampled_from([*OBJECTS, "", "n", "x y"]).map(_const),
    st.just(_const(None)),
    st.builds(
        lambda s, r: Expr(f"fact({_q(s)}, {_q(r)})", lambda step: _fact(s, r)),
        st.sampled_from(SUBJECTS),
        st.sampled_from(RELATIONS),
    ),
)


def _has(subject: str, relation: str, obj: str | None) -> Expr:
    if obj is None:
        return Expr(
            f"has({_q(subject)}, {_q(relation)})", lambda step: bool(lookup(subject, relation))
        )
    return Expr(
        f"has({_q(subject)}, {_q(relation)}, {_q(obj)})",
        lambda step: obj in lookup(subject, relation),
    )


bool_leaves = st.one_of(
    st.booleans().map(_const),
    st.builds(
        _has,
        st.sampled_from(SUBJECTS),
        st.sampled_from(RELATIONS),
        st.none() | st.sampled_from(OBJECTS),
    ),
)

# --- composites -----------------------------------------------------------------------


def _neg(a: Expr) -> Expr:
    return Expr(f"-({a.source})", lambda step: -a.value(step))


def _binop(op: str, a: Expr, b: Expr) -> Expr:
    return Expr(
        f"({a.source}) {op} ({b.source})", lambda step: _arith(op, a.value(step), b.value(step))
    )


numbers = st.recursive(
    number_leaves,
    lambda inner: st.one_of(
        inner.map(_neg),
        st.builds(_binop, st.sampled_from(["+", "-", "*", "/"]), inner, inner),
    ),
    max_leaves=6,
)


def _cmp(op: str, a: Expr, b: Expr) -> Expr:
    return Expr(
        f"({a.source}) {op} ({b.source})", lambda step: _compare(op, a.value(step), b.value(step))
    )


def _not(a: Expr) -> Expr:
    return Expr(f"not ({a.source})", lambda step: not a.value(step))


def _and(a: Expr, b: Expr) -> Expr:
    return Expr(f"({a.source}) and ({b.source})", lambda step: a.value(step) and b.value(step))


def _or(a: Expr, b: Expr) -> Expr:
    return Expr(f"({a.source}) or ({b.source})", lambda step: a.value(step) or b.value(step))


comparisons = st.one_of(
    st.builds(_cmp, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), numbers, numbers),
    st.builds(_cmp, st.sampled_from(["==", "!="]), text_leaves, text_leaves),
    # `in` on text: None (a missing fact) on either side fails to evaluate.
    st.builds(_cmp, st.sampled_from(["in", "not in"]), text_leaves, text_leaves),
)
booleans = st.recursive(
    bool_leaves | comparisons,
    lambda inner: st.one_of(
        inner.map(_not), st.builds(_and, inner, inner), st.builds(_or, inner, inner)
    ),
    max_leaves=8,
)
steps = st.integers(0, 10**6)


def _size_refusal(err: ConditionError) -> bool:
    text = str(err)
    return "nodes" in text or "nests deeper" in text or "characters long" in text


@given(booleans, steps)
def test_allowed_expressions_mean_what_the_reference_says(expr, step):
    try:
        condition = compile_condition(expr.source)
    except ConditionError as err:
        # The grammar only uses allowed constructs: the only refusal is for size.
        assert _size_refusal(err), (expr.source, str(err))
        return
    try:
        expected: object = expr.value(step)
    except Fails:
        expected = Fails
    started = time.perf_counter()
    try:
        got: object = evaluate(condition, lookup, step=step)
    except ConditionError:
        got = Fails
    assert time.perf_counter() - started < SLOW_S
    assert got == expected and type(got) is type(expected), expr.source


@given(numbers, steps)
def test_a_number_is_not_a_condition(expr, step):
    # A condition must give true/false: a number (or a failure) never passes as one.
    assume(len(expr.source) <= MAX_LENGTH)
    try:
        condition = compile_condition(expr.source)
    except ConditionError as err:
        assert _size_refusal(err), (expr.source, str(err))
        return
    with pytest.raises(ConditionError):
        evaluate(condition, lookup, step=step)


FORBIDDEN = [
    "__import__('os')", "().__class__", "fact.__globals__", "'a'.upper()", "x", "steps",
    "open('f')", "eval('1')", "exec('1')", "getattr(step, 'real')", "[1][0]", "'abc'[0]",
    "'a'[1:2]", "(lambda: 1)()", "lambda: 1", "[i for i in 'ab']", "{i for i in 'ab'}",
    "(i for i in 'ab')", "{1: 2}", "{1}", "(1, 2)", "[1]", "()", "2 ** 8", "(y := 1)",
    "f'{step}'", "f'x'", "1 if step else 2", "step is None", "step is not None", "b'x'",
    "...", "1j", "7 // 2", "7 % 2", "1 << 2", "1 >> 2", "1 & 2", "1 | 2", "1 ^ 2", "~1",
    "+1", "fact(subject='a', relation='b')", "fact(*['a', 'b'])", "fact(**{})", "num()",
    "has('a')", "fact('a', 'b', 'c')", "num(1, 2)", "step.real", "'%s' % 1", "'a' + 'b'",
    "'a' * 3", "3 - 'a'", "True.__class__", "step(1)", "fact('a', 'b')('c')",
    "__builtins__", "None.__class__", "[*'ab']", "{**{}}", "await step", "(yield)",
    "1e400", "-1e999", "step < 1e309", "print(step)", "len('ab')", "float('nan')",
]  # fmt: skip


def test_the_forbidden_list_parses_as_python():
    # Each entry must reach the whitelist, not fail in the parser.
    for source in FORBIDDEN:
        ast.parse(source, mode="eval")


def _wrap(template: str, inner: str, other: str) -> str:
    return template.format(f=inner, o=other)


WRAPPERS = [
    "{f}", "({f})", "not ({f})", "({o}) and ({f})", "({f}) or ({o})", "num({f}) < 1",
    "fact({f}, 'r') == 'x'", "has('a', 'b', {f})", "({f}) + 1 > 0", "-({f}) < step",
    "({o}) and (({f}) == 1)",
]  # fmt: skip


forbidden_expressions = st.builds(
    _wrap,
    st.sampled_from(WRAPPERS),
    st.sampled_from(FORBIDDEN),
    booleans.map(lambda e: e.source),
).flatmap(
    # Nest a second wrapper sometimes: depth must not hide a construct.
    lambda source: st.one_of(
        st.just(source),
        st.builds(
            _wrap, st.sampled_from(WRAPPERS), st.just(source), booleans.map(lambda e: e.source)
        ),
    )
)


@given(forbidden_expressions, steps)
def test_forbidden_constructs_are_always_refused(source, step):
    assume(len(source) <= MAX_LENGTH)
    with pytest.raises(ConditionError):
        compile_condition(source)
    with pytest.raises(ConditionError):
        evaluate(source, lookup, step=step)
    with pytest.raises(ValidationError, match="condition"):
        ScheduleEvent(event_id="e", delay=1, condition=source, reason="r")
    text = json.dumps(
        {"kind": "schedule_event", "event_id": "e", "delay": 1, "condition": source, "reason": "r"}
    )
    with pytest.raises(ActionParseError, match="condition"):
        parse_action(text)


TOKENS = [
    "fact(", "has(", "num(", "(", ")", ",", "'lamp'", "'level'", "'at'", "'hall'", "step",
    "0", "1", "2.5", "1e308", "-", "+", "*", "/", "and", "or", "not", "==", "!=", "<",
    ">=", "in", "not in", "True", "None", "'x'", "'nan'", "[", "]", ".", "__class__",
    "lambda", ":", "**", "if", "else", "is", "'", '"', "\\", "\x00", "{", "}", "@", "=",
]  # fmt: skip
token_soup = st.lists(st.sampled_from(TOKENS), max_size=40).map(" ".join)
any_text = st.text(max_size=MAX_LENGTH + 20)


@given(token_soup | any_text, steps)
def test_any_text_compiles_or_is_refused_and_evaluates_or_fails(source, step):
    started = time.perf_counter()
    try:
        condition = compile_condition(source)
    except ConditionError:
        assert time.perf_counter() - started < SLOW_S
        return
    assert isinstance(condition, Condition)
    try:
        value = evaluate(condition, lookup, step=step)
    except ConditionError:
        pass
    else:
        assert type(value) is bool
    assert time.perf_counter() - started < SLOW_S
