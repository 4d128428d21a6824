"""Contracts of the llm package: chat messages, a completion, usage, the chat model protocol.

Anything with a ``chat(messages, **params) -> Completion`` method can stand where a
``ChatClient`` is expected (``ask_structured``, ``LLMTracker``), so callers never depend
on how the text is obtained.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple, Protocol, TypedDict

__all__ = ["ChatModel", "Completion", "Message", "Usage"]


class Message(TypedDict):
    """One chat message in the OpenAI shape: ``{"role": ..., "content": ...}``.

    ``role`` is ``"system"``, ``"user"`` or ``"assistant"``.
    """

    role: str
    content: str


class Completion(NamedTuple):
    """The first choice of a chat completion.

    Attributes:
        text: the assistant message content.
        finish_reason: why generation stopped, as the server says (``"stop"``;
            ``"length"`` means the reply was cut off at the token limit), or None.
        model: the model name the server reports (the requested one if it reports none).
        cached: True when the text came from the client's cache, not the server.
        tokens_in: prompt tokens, as the server's ``usage`` reports them (0 if it does not).
        tokens_out: completion tokens, likewise.
    """

    text: str
    finish_reason: str | None
    model: str
    cached: bool = False
    tokens_in: int = 0
    tokens_out: int = 0


@dataclasses.dataclass
class Usage:
    """What talking to a model cost: requests, tokens, time, money, and reply quality.

    A ``ChatClient`` counts the first six as it answers; ``ask_structured`` counts the
    last three (one per structured question). ``as_dict`` is the ``usage`` of an
    episode record and the ``llm`` of a results row.

    Attributes:
        calls: ``chat`` calls answered (cache hits included; retries are not calls).
        cached: of those, answered from the cache (no tokens, no time, no cost).
        tokens_in: prompt tokens the server reported.
        tokens_out: completion tokens the server reported.
        seconds: wall time spent waiting for the server, retries included.
        cost: ``tokens_in`` and ``tokens_out`` at the client's prices (per million
            tokens), in whatever currency those are given in.
        valid: structured questions answered validly by the first reply.
        repaired: answered validly after a repair (THINK block or correction round).
        failed: never answered validly.
    """

    calls: int = 0
    cached: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    cost: float = 0.0
    valid: int = 0
    repaired: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, float]:
        """Return the counters as a plain dict (JSON-ready)."""
        return dataclasses.asdict(self)

    def copy(self) -> Usage:
        """Return an independent copy (a snapshot to subtract later)."""
        return dataclasses.replace(self)

    def __add__(self, other: Usage) -> Usage:
        return Usage(*(a + b for a, b in zip(_values(self), _values(other), strict=True)))

    def __sub__(self, other: Usage) -> Usage:
        return Usage(*(a - b for a, b in zip(_values(self), _values(other), strict=True)))

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """Return the sum of ``usages`` (an empty ``Usage`` for none)."""
        out = cls()
        for usage in usages:
            out = out + usage
        return out

    def count(self, status: str) -> None:
        """Count one structured question's outcome: ``ok``, ``repaired`` or ``failed``."""
        if status == "ok":
            self.valid += 1
        elif status == "repaired":
            self.repaired += 1
        elif status == "failed":
            self.failed += 1
        else:
            raise ValueError(f"unknown structured outcome {status!r}")


def _values(usage: Usage) -> tuple[Any, ...]:
    return dataclasses.astuple(usage)


class ChatModel(Protocol):
    """Answers a conversation with one completion.

    A model may also have a ``usage`` attribute (a :class:`Usage`, as ``ChatClient``
    has): ``ask_structured`` then counts its outcomes there, and the evaluation reads
    it into each episode's accounting. ``json_schema=`` among the ``params`` asks for
    output constrained to that JSON schema; a model that cannot constrain ignores it.
    """

    def chat(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Return the model's reply to ``messages``.

        ``params`` are request fields such as ``temperature`` or ``max_tokens``.

        Raises:
            LLMError: the request failed (see ``wmkit.llm.errors``).
        """
