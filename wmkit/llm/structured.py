"""Structured output: JSON out of a model reply, validated, repaired, never raised.

Seed 000 (§5.4) asks the model for two blocks, a THINK block of free reasoning and a
JSON block of strict JSON, validates only the JSON block, and falls back on the THINK
block when the JSON block fails. ``ask_structured`` does that, then asks again with a
format-correction message that quotes the error, up to ``max_repairs`` times:

1. the JSON block of the reply (a fenced ```json block, else the first balanced JSON
   value outside the THINK block) parses and validates: ``ok``;
2. else a JSON value inside the THINK block does: ``repaired`` (source ``think``);
3. else, while repairs are left, the reply and a correction message quoting the error
   are appended to the conversation and the model asked again; a later success is
   ``repaired`` (source ``json`` or ``think``);
4. else ``failed``, with every rejected reply's reason.

Bad content never raises; only a failed request does (``LLMError``), since that is not
the model's answer. A THINK block is ``<think>...</think>`` (as reasoning models emit it)
or a section headed ``THINK:`` that runs to a ``JSON:`` heading or the first code fence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import TypeAdapter, ValidationError

from wmkit.llm.prompts import correction_message
from wmkit.llm.types import ChatModel, Message, Usage

__all__ = [
    "MAX_ECHO_CHARS",
    "StructuredResult",
    "ask_structured",
    "describe_error",
    "extract_json",
    "parse_reply",
    "split_think",
]

T = TypeVar("T")

MAX_ECHO_CHARS = 4000
"""Most characters of a rejected reply sent back to the model with a correction."""

Status = Literal["ok", "repaired", "failed"]
Source = Literal["json", "think"]


@dataclass(frozen=True)
class StructuredResult(Generic[T]):
    """What ``ask_structured`` got.

    Attributes:
        status: ``ok`` (the first reply's JSON block was valid), ``repaired`` (the value
            came from a THINK block or after a correction), or ``failed``.
        value: the validated value; None when failed.
        source: the block the value came from (``json`` or ``think``); None when failed.
        attempts: requests made (1 + corrections sent).
        errors: why each rejected reply was rejected, in order; empty when ``ok``.
        reply: the text of the last reply.
    """

    status: Status
    value: T | None
    source: Source | None
    attempts: int
    errors: tuple[str, ...]
    reply: str

    @property
    def ok(self) -> bool:
        """True unless the status is ``failed``."""
        return self.status != "failed"

    @property
    def reason(self) -> str:
        """Why it failed (the last rejection); empty unless failed."""
        return self.errors[-1] if self.status == "failed" and self.errors else ""


# --- finding the blocks ----------------------------------------------------------------

_THINK_TAG = re.compile(r"<(think|thinking)>(.*?)(?:</\1>|\Z)", re.S | re.I)
_HEAD = r"^[ \t#*>]*{}\b[ \t*]*:?"
_THINK_HEAD = re.compile(_HEAD.format("THINK"), re.M | re.I)
_JSON_HEAD = re.compile(_HEAD.format("JSON"), re.M | re.I)
_FENCE_START = re.compile(r"^[ \t]*```", re.M)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)(```|\Z)", re.S)
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|"', re.S)
_OPEN = re.compile(r"[\[{]")


def split_think(text: str) -> tuple[str | None, str]:
    """Split a reply into ``(think, rest)``; ``think`` is None when there is no THINK block.

    ``<think>...</think>`` (or an unclosed ``<think>`` running to the end) wins over a
    ``THINK:`` heading; a heading's block ends at a ``JSON:`` heading or a line that
    opens a code fence, and ``rest`` starts there.
    """
    tag = _THINK_TAG.search(text)
    if tag:
        return tag.group(2), text[: tag.start()] + text[tag.end() :]
    head = _THINK_HEAD.search(text)
    if not head:
        return None, text
    ends = [m.start() for m in (_JSON_HEAD.search(text, head.end()),) if m]
    ends += [m.start() for m in (_FENCE_START.search(text, head.end()),) if m]
    end = min(ends, default=len(text))
    return text[head.end() : end], text[: head.start()] + text[end:]


def _balanced_end(text: str, start: int) -> int | None:
    """End of the bracketed span opening at ``start`` (strings skipped), or None if open."""
    depth = 0
    for m in _TOKEN.finditer(text, start):
        token = m.group()
        if token in ("[", "{"):
            depth += 1
        elif token in ("]", "}"):
            depth -= 1
            if depth == 0:
                return m.end()
        elif token == '"':  # a string that never closes
            return None
    return None


def extract_json(text: str) -> str:
    """Return the JSON text of a reply block, checked to parse as JSON.

    The first fenced block tagged ``json`` (or untagged and starting with ``{``/``[``)
    wins; without one, the first balanced ``{...}``/``[...]`` span that parses. Spans
    that do not parse (prose in brackets) are skipped whole, never searched inside, so
    a truncated list never yields one of its items. Raw control characters inside
    strings (a bare newline) are escaped, not refused.

    Raises:
        ValueError: no JSON found, a fence or value that never closes (a cut-off
            reply), or a block that is not valid JSON; the message says which.
    """
    for fence in _FENCE.finditer(text):
        lang, body, close = fence.group(1).lower(), fence.group(2), fence.group(3)
        if lang not in ("json", "") or (lang == "" and body.lstrip()[:1] not in ("{", "[")):
            continue
        if not close:
            raise ValueError("the ```json block is never closed: the reply looks cut off")
        try:
            return _checked(body.strip())
        except ValueError as err:
            raise ValueError(f"the ```json block is not valid JSON: {err}") from None
    first_bad = None
    pos = 0
    while (m := _OPEN.search(text, pos)) is not None:
        end = _balanced_end(text, m.start())
        if end is None:
            raise ValueError(
                f"the JSON value starting at character {m.start()} is never closed: "
                "the reply looks cut off"
            )
        candidate = text[m.start() : end]
        try:
            return _checked(candidate)
        except ValueError as err:
            first_bad = first_bad or f"{candidate[:60]!r}... is not valid JSON: {err}"
            pos = end
    raise ValueError("no JSON found" + (f" ({first_bad})" if first_bad else ""))


def _checked(text: str) -> str:
    """Return ``text`` if it is JSON, re-encoded if it is JSON only with raw control chars.

    A grammar-constrained reply may hold a bare newline inside a string (llama.cpp's
    string rule lets any character but a quote or a backslash through); strict JSON, and so
    pydantic, refuses it, though what the model meant is plain.

    Raises:
        ValueError: not JSON even so.
    """
    try:
        json.loads(text)
        return text
    except ValueError:
        value = json.loads(text, strict=False)  # raises the error when it is not that
        return json.dumps(value, ensure_ascii=False)


def describe_error(err: Exception) -> str:
    """Return an error as one line a model can act on; pydantic errors give field paths."""
    if isinstance(err, ValidationError):
        problems = [
            f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}"
            for e in err.errors(include_url=False)
        ]
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        return "invalid: " + "; ".join(problems[:5]) + more
    return str(err)


def parse_reply(text: str, parse_fn: Callable[[str], T]) -> tuple[T, Source] | str:
    """Parse one reply: its JSON block first, then its THINK block.

    Returns:
        ``(value, source)`` on success, else the reason as a string.
    """
    think, rest = split_think(text)
    why = []
    for source, block in (("json", rest), ("think", think)):
        if block is None or (source == "think" and not _OPEN.search(block)):
            continue
        try:
            return parse_fn(extract_json(block)), source  # type: ignore[return-value]
        except ValueError as err:  # ValidationError and ActionParseError are ValueErrors
            why.append(f"{source.upper()} block: {describe_error(err)}")
    return "; ".join(why)


def _parser(schema: Any, parse_fn: Callable[[str], T] | None) -> Callable[[str], T]:
    if (schema is None) == (parse_fn is None):
        raise TypeError("ask_structured needs exactly one of schema= and parse_fn=")
    if parse_fn is not None:
        return parse_fn
    return TypeAdapter(schema).validate_json


def ask_structured(
    client: ChatModel,
    messages: Sequence[Message],
    *,
    schema: Any = None,
    parse_fn: Callable[[str], T] | None = None,
    max_repairs: int = 2,
    hint: str = "",
    params: Mapping[str, Any] | None = None,
    json_schema: Mapping[str, Any] | None = None,
) -> StructuredResult[T]:
    """Ask for a structured value; validate, repair from THINK, correct, never raise on content.

    Args:
        client: the chat model (a ``ChatClient``).
        messages: the conversation; the prompt should ask for a THINK block and one
            ```json block (see ``wmkit.llm.prompts``).
        schema: a type pydantic validates the JSON text against (a model, or
            ``list[Model]``); or
        parse_fn: ``json_text -> value``, raising a ``ValueError`` (pydantic's
            ``ValidationError`` is one) that says what is wrong.
        max_repairs: correction rounds after the first reply (0: one request only).
        hint: a line added to every correction message (what shape is wanted).
        params: request fields for every request (``temperature``, ``max_tokens``...).
        json_schema: a JSON schema every reply is constrained to, where the client can
            (``ChatClient``'s ``constrain``; see :func:`wmkit.llm.schema.bounded_schema`);
            None: unconstrained. The reply is parsed and validated all the same.

    The outcome (``ok``, ``repaired`` or ``failed``) is counted in the client's
    ``usage`` when it has one.

    Returns:
        A ``StructuredResult``; ``status == "failed"`` when no reply validated.

    Raises:
        LLMError: a request failed (timeout, HTTP error, garbled response); the
            repairs made so far are lost with it.
        TypeError: not exactly one of ``schema`` and ``parse_fn``.
    """
    if max_repairs < 0:
        raise ValueError(f"max_repairs must be >= 0, got {max_repairs}")
    parse = _parser(schema, parse_fn)
    conversation = list(messages)
    errors: list[str] = []
    text = ""
    request = dict(params or {})
    if json_schema is not None:
        request["json_schema"] = dict(json_schema)
    usage = getattr(client, "usage", None)
    usage = usage if isinstance(usage, Usage) else Usage()  # a model without one: not kept
    for attempt in range(1, max_repairs + 2):
        completion = client.chat(conversation, **request)
        text = completion.text
        outcome = parse_reply(text, parse)
        if isinstance(outcome, tuple):
            value, source = outcome
            status: Status = "ok" if attempt == 1 and source == "json" else "repaired"
            usage.count(status)
            return StructuredResult(status, value, source, attempt, tuple(errors), text)
        why = outcome or "the reply is empty"
        if completion.finish_reason == "length":
            why += " (the reply was cut off at the token limit: finish_reason=length)"
        errors.append(why)
        conversation += [
            {"role": "assistant", "content": text[:MAX_ECHO_CHARS]},
            {"role": "user", "content": correction_message(why, hint)},
        ]
    usage.count("failed")
    return StructuredResult("failed", None, None, max_repairs + 1, tuple(errors), text)
