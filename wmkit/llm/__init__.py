"""OpenAI-compatible chat client: structured output, repair, cache.

``ChatClient`` talks to any ``POST {base_url}/chat/completions`` endpoint with timeouts,
retries and a ``ReplyCache``; ``ask_structured`` turns replies into validated values,
repairing from a THINK block or with a correction round, and reports what happened
instead of raising on bad content; ``prompts`` holds every prompt we send.
"""

from wmkit.llm.cache import ReplyCache, request_key
from wmkit.llm.client import ChatClient
from wmkit.llm.errors import (
    LLMConfigError,
    LLMConnectionError,
    LLMEmptyReplyError,
    LLMError,
    LLMRedirectError,
    LLMResponseError,
    LLMStatusError,
    LLMTimeoutError,
    LLMTransportError,
)
from wmkit.llm.structured import (
    StructuredResult,
    ask_structured,
    describe_error,
    extract_json,
    parse_reply,
    split_think,
)
from wmkit.llm.types import ChatModel, Completion, Message

__all__ = [
    "ChatClient",
    "ChatModel",
    "Completion",
    "LLMConfigError",
    "LLMConnectionError",
    "LLMEmptyReplyError",
    "LLMError",
    "LLMRedirectError",
    "LLMResponseError",
    "LLMStatusError",
    "LLMTimeoutError",
    "LLMTransportError",
    "Message",
    "ReplyCache",
    "StructuredResult",
    "ask_structured",
    "describe_error",
    "extract_json",
    "parse_reply",
    "request_key",
    "split_think",
]
