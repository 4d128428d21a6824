"""A tiny expression language for event conditions, evaluated without ``eval``.

A condition is a string such as::

    fact('lamp:1f2e3d4c5b6a7980', 'status') == 'on' and num(fact('lamp:1f…', 'level')) < 50
    has('person:0a1b2c3d4e5f6071', 'at', 'room:9f8e7d6c5b4a3021') or step >= 40

It is parsed with ``ast`` and checked against a whitelist before it is accepted:

- literals: strings, ints, finite floats (``1e400`` reads as infinity: refused),
  True, False, None;
- the one name ``step`` (the step being evaluated);
- calls of ``fact(subject, relation)`` (the single object, or None when there is none
  or several), ``has(subject, relation[, object])`` and ``num(value)`` (str -> float);
- ``and``, ``or``, ``not``; ``== != < <= > >= in`` and ``not in``; unary ``-``;
  ``+ - * /`` on numbers only.

Everything else (attribute access, subscripts, other names or calls, lambdas,
comprehensions, ``**``, walrus, f-strings, ...) is refused when the condition is
compiled, which happens when an event is scheduled: a hostile string never enters the
timeline. Length, node count and nesting depth are bounded, so evaluation is bounded
too; a wall-clock budget is checked on every node as a backstop. ``and``/``or``/``not``
take booleans and a condition must yield a boolean: the string ``"false"`` is not
silently true. Numbers stay finite: arithmetic that overflows to infinity (or NaN),
like ``num()`` of ``'nan'`` or ``'inf'``, fails to evaluate.

What can come out of this module is a ``Condition``, a bool or a ``ConditionError``;
``tests/world/test_world_conditions_properties.py`` checks that on random expressions.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from wmkit.world.errors import ConditionError

__all__ = [
    "MAX_DEPTH",
    "MAX_LENGTH",
    "MAX_NODES",
    "TIME_LIMIT_S",
    "Condition",
    "FactLookup",
    "compile_condition",
    "evaluate",
]

MAX_LENGTH = 500
"""Most characters a condition may have."""
MAX_NODES = 100
"""Most AST nodes a condition may have."""
MAX_DEPTH = 16
"""Deepest AST nesting a condition may have."""
TIME_LIMIT_S = 0.05
"""Wall-clock budget of one evaluation, in seconds (a backstop: evaluation is bounded)."""

FactLookup = Callable[[str, str], Sequence[str]]
"""``lookup(subject, relation) -> objects``: e.g. ``WorldState.objects``, ``World.objects``."""

_ARITY = {"fact": (2,), "has": (2, 3), "num": (1,)}
_ALLOWED = (
    ast.Expression, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub,
    ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.In, ast.NotIn,
    ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.Div,
    ast.Call, ast.Name, ast.Load, ast.Constant,
)  # fmt: skip
_COMPARE = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: operator.contains(b, a),
    ast.NotIn: lambda a, b: not operator.contains(b, a),
}  # fmt: skip
_ARITH = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
}


class Condition(NamedTuple):
    """A compiled, validated condition: its source and its checked syntax tree."""

    source: str
    tree: ast.Expression


def compile_condition(source: str) -> Condition:
    """Parse and validate ``source``; the result is cached by source string.

    Raises:
        ConditionError: the source is too long, not an expression, uses anything
            outside the language, or exceeds the node or depth limits. The message
            names the offending construct.
    """
    if not isinstance(source, str):
        raise ConditionError(f"condition must be a string, not {type(source).__name__}")
    if len(source) > MAX_LENGTH:
        raise ConditionError(
            f"condition is {len(source)} characters long; the limit is {MAX_LENGTH}"
        )
    return _compile(source)


@functools.lru_cache(maxsize=1024)
def _compile(source: str) -> Condition:
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise ConditionError(f"condition {_show(source)} is not an expression: {err}") from None
    # Iterative walk: a hostile tree must not be able to exhaust our own stack.
    nodes = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ConditionError(f"condition {_show(source)} has more than {MAX_NODES} nodes")
        if depth > MAX_DEPTH:
            raise ConditionError(f"condition {_show(source)} nests deeper than {MAX_DEPTH}")
        _check_node(node, source)
        # A callee was checked with its Call; walking it would meet a refused Name.
        children = node.args if isinstance(node, ast.Call) else ast.iter_child_nodes(node)
        stack.extend((child, depth + 1) for child in children)
    return Condition(source, tree)


def _show(source: str) -> str:
    """Quote a condition for an error message, cut to a readable length."""
    return repr(source) if len(source) <= 80 else repr(source[:77] + "...")


def _check_node(node: ast.AST, source: str) -> None:
    what = f"in condition {_show(source)}"
    if isinstance(node, ast.Attribute):
        raise ConditionError(f"attribute access .{node.attr} is not allowed {what}")
    if not isinstance(node, _ALLOWED):
        raise ConditionError(f"{type(node).__name__} is not allowed {what}")
    if isinstance(node, ast.Constant) and not (
        node.value is None or isinstance(node.value, (str, int, float))
    ):
        raise ConditionError(f"constant {node.value!r} is not allowed {what}")
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, float)
        and not math.isfinite(node.value)
    ):
        raise ConditionError(f"number literal {node.value!r} is not finite {what}")
    if isinstance(node, ast.Name) and node.id != "step":
        raise ConditionError(f"name {node.id!r} is not allowed {what}; the only name is 'step'")
    if isinstance(node, ast.Call):
        func = node.func.id if isinstance(node.func, ast.Name) else None
        if isinstance(node.func, ast.Attribute):
            raise ConditionError(f"attribute access .{node.func.attr} is not allowed {what}")
        if func not in _ARITY:
            shown = func or type(node.func).__name__
            raise ConditionError(
                f"call of {shown!r} is not allowed {what}; functions: fact, has, num"
            )
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise ConditionError(f"{func}() takes plain positional arguments only {what}")
        if len(node.args) not in _ARITY[func]:
            counts = " or ".join(map(str, _ARITY[func]))
            raise ConditionError(f"{func}() takes {counts} arguments, not {len(node.args)}, {what}")
    if isinstance(node, ast.BinOp):
        for side in (node.left, node.right):
            if isinstance(side, ast.Constant) and isinstance(side.value, str):
                raise ConditionError(f"arithmetic on the string {side.value!r} {what}")


def evaluate(condition: Condition | str, lookup: FactLookup, *, step: int) -> bool:
    """Evaluate a condition against facts.

    Args:
        condition: a compiled condition, or a source string (compiled first).
        lookup: ``lookup(subject, relation) -> objects``.
        step: the value of the name ``step``.

    Returns:
        The boolean value of the condition.

    Raises:
        ConditionError: a type error (e.g. ``'a' < 1``, ``num('x')``), a non-boolean
            result, division by zero, or the time budget ran out.
    """
    if isinstance(condition, str):
        condition = compile_condition(condition)
    scope = _Scope(lookup, step, time.perf_counter() + TIME_LIMIT_S, condition.source)
    try:
        value = scope.value_of(condition.tree.body)
    except ConditionError:
        raise
    except (TypeError, ValueError, ArithmeticError) as err:
        raise ConditionError(f"condition {_show(condition.source)} failed: {err}") from None
    if not isinstance(value, bool):
        raise ConditionError(f"condition {_show(condition.source)} gave {value!r}, not true/false")
    return value


class _Scope:
    """One evaluation: the lookup, the step and the deadline."""

    def __init__(self, lookup: FactLookup, step: int, deadline: float, source: str) -> None:
        self.lookup, self.step, self.deadline, self.source = lookup, step, deadline, source

    def value_of(self, node: ast.AST) -> Any:
        if time.perf_counter() > self.deadline:
            raise ConditionError(f"condition {_show(self.source)} ran past {TIME_LIMIT_S}s")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.step
        if isinstance(node, ast.BoolOp):
            want = isinstance(node.op, ast.Or)  # `or` stops at True, `and` at False
            for operand in node.values:
                if self.boolean(operand) is want:
                    return want
            return not want
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.Not):
                return not self.boolean(node.operand)
            return -self.number(node.operand)
        if isinstance(node, ast.Compare):
            left = self.value_of(node.left)
            for op, right_node in zip(node.ops, node.comparators, strict=True):
                right = self.value_of(right_node)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BinOp):
            value = _ARITH[type(node.op)](self.number(node.left), self.number(node.right))
            if isinstance(value, float) and not math.isfinite(value):
                raise ConditionError(f"condition {_show(self.source)}: {value!r} is not finite")
            return value
        if isinstance(node, ast.Call):
            return self.call(node.func.id, [self.value_of(a) for a in node.args])
        raise ConditionError(f"{type(node).__name__} is not allowed")  # unreachable

    def boolean(self, node: ast.AST) -> bool:
        value = self.value_of(node)
        if not isinstance(value, bool):
            raise ConditionError(f"condition {_show(self.source)}: {value!r} is not true/false")
        return value

    def number(self, node: ast.AST) -> int | float:
        value = self.value_of(node)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConditionError(f"condition {_show(self.source)}: {value!r} is not a number")
        return value

    def call(self, func: str, args: list[Any]) -> Any:
        if func == "num":
            (value,) = args
            if isinstance(value, bool) or not isinstance(value, (str, int, float)):
                raise ConditionError(f"condition {_show(self.source)}: num({value!r})")
            number = float(value)  # ValueError for non-numeric text: reported above
            if not math.isfinite(number):
                raise ConditionError(
                    f"condition {_show(self.source)}: num({value!r}) is not finite"
                )
            return number
        if not all(isinstance(a, str) for a in args):
            raise ConditionError(f"condition {_show(self.source)}: {func}() takes strings")
        objects = self.lookup(args[0], args[1])
        if func == "fact":
            return objects[0] if len(objects) == 1 else None
        return bool(objects) if len(args) == 2 else args[2] in objects
