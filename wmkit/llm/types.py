"""Contracts of the llm package: chat messages, a completion, and the chat model protocol.

Anything with a ``chat(messages, **params) -> Completion`` method can stand where a
``ChatClient`` is expected (``ask_structured``, ``LLMTracker``), so callers never depend
on how the text is obtained.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, TypedDict

__all__ = ["ChatModel", "Completion", "Message"]


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
    """

    text: str
    finish_reason: str | None
    model: str
    cached: bool = False


class ChatModel(Protocol):
    """Answers a conversation with one completion."""

    def chat(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Return the model's reply to ``messages``.

        ``params`` are request fields such as ``temperature`` or ``max_tokens``.

        Raises:
            LLMError: the request failed (see ``wmkit.llm.errors``).
        """
