"""JSON schemas fit for constrained decoding: small, bounded, with nothing optional that matters.

A server that constrains its output to a JSON schema (llama.cpp compiles it to a
grammar; vLLM and OpenAI to their own) makes every reply parse, but not every reply
end: a small model inside a string with no length bound writes until ``max_tokens``.
:func:`bounded_schema` turns a pydantic type's schema into one a grammar can hold a
model to:

- every string gets ``maxLength`` (at most ``max_string``), every array ``maxItems``
  (at most ``max_items``), every open object ``maxProperties`` (at most ``max_items``);
- ``title``, ``description``, ``default`` and ``examples`` go (they cost grammar
  states and prompt tokens and constrain nothing);
- a property with a ``const`` (a discriminated union's ``kind``) becomes required and
  first, so the model names the member it writes before writing it;
- integer bounds past ``max_int`` are dropped (a grammar for a 19-digit range is large
  and no answer needs one).

The schema stays one that pydantic's validator accepts the output of; validation still
runs on every reply (``wmkit.llm.structured``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter

__all__ = ["bounded_schema"]

_DROPPED = frozenset({"title", "description", "default", "examples", "discriminator"})


def bounded_schema(
    of: Any,
    *,
    max_string: int = 80,
    max_items: int = 8,
    max_int: int = 10**6,
) -> dict[str, Any]:
    """Return a bounded JSON schema of ``of`` (a type pydantic knows, or a schema dict).

    Args:
        of: a pydantic model, a type such as ``list[AtomicAction]``, or a JSON schema.
        max_string: the longest string allowed (an existing smaller ``maxLength`` stays).
        max_items: the most items of an array and properties of an open object.
        max_int: integer bounds beyond +-this are dropped.

    Raises:
        ValueError: a bound below 1.
    """
    if min(max_string, max_items, max_int) < 1:
        raise ValueError(
            f"bounds must be >= 1, got max_string={max_string}, max_items={max_items}, "
            f"max_int={max_int}"
        )
    schema = dict(of) if isinstance(of, Mapping) else TypeAdapter(of).json_schema()
    return _bound(schema, max_string, max_items, max_int)


def _bound(node: Any, max_string: int, max_items: int, max_int: int) -> Any:
    if isinstance(node, list):
        return [_bound(item, max_string, max_items, max_int) for item in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in ("properties", "$defs", "definitions"):
            out[key] = {
                name: _bound(sub, max_string, max_items, max_int) for name, sub in value.items()
            }
        else:
            out[key] = _bound(value, max_string, max_items, max_int)
    kind = out.get("type")
    if kind == "string" and "const" not in out and "enum" not in out:
        out["maxLength"] = min(int(out.get("maxLength", max_string)), max_string)
        out["minLength"] = min(int(out.get("minLength", 0)), out["maxLength"])
    elif kind == "array":
        out["maxItems"] = min(int(out.get("maxItems", max_items)), max_items)
    elif kind == "object" and "properties" not in out:
        out["maxProperties"] = min(int(out.get("maxProperties", max_items)), max_items)
    elif kind == "integer":
        for bound in ("minimum", "maximum"):
            if bound in out and abs(out[bound]) > max_int:
                del out[bound]
    properties = out.get("properties")
    if isinstance(properties, dict):
        consts = [name for name, sub in properties.items() if "const" in sub]
        # First, so that a grammar that writes properties in order names the member
        # before its fields.
        out["properties"] = {name: properties[name] for name in consts} | properties
        required = [name for name in out.get("required", []) if name not in consts]
        out["required"] = consts + required
    return out
