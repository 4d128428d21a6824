"""An OpenAI-compatible chat client over plain HTTP (``POST {base_url}/chat/completions``).

It speaks the protocol that OpenAI, vLLM, llama.cpp's server, Ollama and most gateways
share, with the standard library's ``urllib`` (no SDK, no extra dependency: a local
model server answers in seconds, so connection reuse is not worth a package).

Failures are typed (``wmkit.llm.errors``) and carry what to fix: the status and the
start of the body, the URL, the timeout. Timeouts, 429 and 5xx are retried with
exponential backoff (``backoff * 2**attempt`` seconds, at least what ``Retry-After``
asks, at most ``max_backoff``); nothing else is retried, because a refused connection,
a 4xx or a garbled response will not get better by asking again at once.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from email.message import Message as _Headers
from typing import Any
from urllib.parse import urlsplit

from wmkit.llm.cache import ReplyCache, request_key
from wmkit.llm.errors import (
    BODY_EXCERPT_CHARS,
    LLMConfigError,
    LLMConnectionError,
    LLMEmptyReplyError,
    LLMError,
    LLMResponseError,
    LLMStatusError,
    LLMTimeoutError,
)
from wmkit.llm.types import Completion, Message

__all__ = ["ChatClient"]

log = logging.getLogger(__name__)

_RESERVED_PARAMS = ("model", "messages", "stream")  # set by the client; no streaming


class ChatClient:
    """A chat-completions client with timeouts, retries and an optional cache.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions``
            is appended). Configs take it from ``$WMKIT_LLM_BASE_URL``.
        model: the model name sent with every request.
        api_key: sent as ``Authorization: Bearer <key>`` when given.
        timeout: seconds allowed for connecting and for each read of the response (a
            server that sends nothing for this long times out).
        max_retries: retries after the first attempt, for timeouts, 429 and 5xx only.
        backoff: seconds before the first retry; doubles with each retry.
        max_backoff: the longest wait between attempts, ``Retry-After`` included.
        cache: where identical requests are answered from; None for no cache. Replies
            cut off at the token limit (``finish_reason="length"``) are not cached.
        params: default request fields (``temperature``, ``max_tokens``, ...); the
            ``params`` of a call override them.

    Attributes:
        url: the full endpoint URL.
        requests_sent: HTTP requests made, retries included.
        retries: retries made.

    Raises:
        LLMConfigError: a missing or non-HTTP base URL, no model, or bad numbers.
    """

    def __init__(
        self,
        base_url: str | None,
        model: str | None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        max_retries: int = 2,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        cache: ReplyCache | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        if not base_url:
            raise LLMConfigError(
                "ChatClient needs base_url, the OpenAI-compatible API root such as "
                "http://127.0.0.1:8000/v1 (the llm configs read it from $WMKIT_LLM_BASE_URL)"
            )
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise LLMConfigError(f"base_url must be an http(s) URL with a host, got {base_url!r}")
        if not model:
            raise LLMConfigError("ChatClient needs the model name to send with each request")
        if not timeout > 0:
            raise LLMConfigError(f"timeout must be > 0 seconds, got {timeout}")
        if max_retries < 0 or backoff < 0 or max_backoff < 0:
            raise LLMConfigError(
                f"max_retries, backoff and max_backoff must be >= 0, "
                f"got {max_retries}, {backoff}, {max_backoff}"
            )
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.cache = cache
        self.params = dict(params or {})
        _check_params(self.params)
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # Proxies from the environment apply, except to a server on this machine: a
        # local model server never sits behind a proxy, and a stray HTTP_PROXY must not
        # send its traffic away.
        local = parts.hostname in ("127.0.0.1", "localhost", "::1")
        handlers = [urllib.request.ProxyHandler({})] if local else []
        self._opener = urllib.request.build_opener(*handlers)
        self.requests_sent = 0
        self.retries = 0

    def __repr__(self) -> str:  # never shows the key
        return f"ChatClient(url={self.url!r}, model={self.model!r})"

    def complete(self, messages: Sequence[Message], **params: Any) -> str:
        """Return the text of the reply to ``messages``; see ``chat``."""
        return self.chat(messages, **params).text

    def chat(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Send ``messages`` and return the first choice, from the cache if it has it.

        Args:
            messages: the conversation, each ``{"role": str, "content": str}``.
            **params: request fields for this call (``temperature``, ``max_tokens``...).

        Raises:
            LLMConfigError: malformed messages or a reserved parameter.
            LLMTimeoutError, LLMStatusError: after the retries are spent.
            LLMConnectionError, LLMResponseError, LLMEmptyReplyError: at once.
        """
        checked = _check_messages(messages)
        merged = {**self.params, **params}
        _check_params(merged)
        key = None
        if self.cache is not None:
            key = request_key(self.model, checked, merged)
            hit = self.cache.get(key)
            if hit is not None:
                return hit
        body = json.dumps({"model": self.model, "messages": checked, **merged}).encode()
        attempt = 0
        while True:
            try:
                completion = _completion(self._post(body), self.model, self.url)
                break
            except LLMError as err:
                if not _retryable(err) or attempt >= self.max_retries:
                    raise
                wait = self._wait(attempt, err)
                attempt += 1
                self.retries += 1
                log.warning(
                    "LLM request failed (%s); retry %d/%d in %.2fs",
                    err,
                    attempt,
                    self.max_retries,
                    wait,
                )
                time.sleep(wait)
        if key is not None and completion.finish_reason != "length":
            self.cache.put(key, completion)  # type: ignore[union-attr]
        return completion

    def _wait(self, attempt: int, err: LLMError) -> float:
        wait = self.backoff * 2**attempt
        if isinstance(err, LLMStatusError) and err.retry_after is not None:
            wait = max(wait, err.retry_after)
        return min(wait, self.max_backoff)

    def _post(self, body: bytes) -> bytes:
        """POST ``body`` and return the raw 2xx response body, or raise a typed error."""
        request = urllib.request.Request(self.url, data=body, headers=self._headers, method="POST")
        self.requests_sent += 1
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                return response.read()
        except urllib.error.HTTPError as err:  # a non-2xx answer: the body says why
            text = _excerpt(err)
            raise LLMStatusError(err.code, text, self.url, _retry_after(err.headers)) from None
        except urllib.error.URLError as err:  # raised while connecting or sending
            if isinstance(err.reason, TimeoutError):
                raise self._timed_out() from None
            raise LLMConnectionError(f"cannot reach {self.url}: {err.reason}") from None
        except TimeoutError:  # raised while reading the response
            raise self._timed_out() from None
        except OSError as err:  # reset, broken pipe, http.client's RemoteDisconnected
            raise LLMConnectionError(f"connection to {self.url} failed: {err!r}") from None

    def _timed_out(self) -> LLMTimeoutError:
        return LLMTimeoutError(f"no answer from {self.url} within {self.timeout:g}s")


def _retryable(err: LLMError) -> bool:
    return isinstance(err, LLMTimeoutError) or (isinstance(err, LLMStatusError) and err.transient)


def _check_messages(messages: Sequence[Message]) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise LLMConfigError("messages must be a non-empty list of {'role', 'content'} dicts")
    checked = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise LLMConfigError(f"messages[{i}] must be a dict, not {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role or not isinstance(content, str):
            raise LLMConfigError(
                f"messages[{i}] needs a non-empty string 'role' and a string 'content', "
                f"got role={role!r}, content of type {type(content).__name__}"
            )
        checked.append({"role": role, "content": content})
    return checked


def _check_params(params: Mapping[str, Any]) -> None:
    reserved = sorted(set(params) & set(_RESERVED_PARAMS))
    if reserved:
        raise LLMConfigError(
            f"request params may not set {', '.join(reserved)}: the client sets model and "
            "messages itself and does not stream"
        )


def _excerpt(err: urllib.error.HTTPError) -> str:
    try:
        return err.read(BODY_EXCERPT_CHARS * 4).decode("utf-8", "replace").strip()
    except (OSError, ValueError):  # the body itself timed out or was cut
        return ""


def _retry_after(headers: _Headers | None) -> float | None:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: fall back to our own backoff
        return None


def _completion(raw: bytes, model: str, url: str) -> Completion:
    """Read the first choice of a chat-completion response body."""
    try:
        payload = json.loads(raw)
    except ValueError as err:  # UnicodeDecodeError is a ValueError too
        excerpt = raw[:BODY_EXCERPT_CHARS].decode("utf-8", "replace")
        raise LLMResponseError(f"response from {url} is not JSON ({err}): {excerpt!r}") from None
    if not isinstance(payload, dict):
        raise LLMResponseError(
            f"response from {url} is a JSON {type(payload).__name__}, not an object"
        )
    choices = payload.get("choices")
    if choices is None and "error" in payload:  # some servers report errors with a 200
        raise LLMResponseError(
            f"{url} reported an error: {str(payload['error'])[:BODY_EXCERPT_CHARS]}"
        )
    if not isinstance(choices, list):
        raise LLMResponseError(f"response from {url} has no 'choices' list")
    if not choices:
        raise LLMEmptyReplyError(f"response from {url} has an empty 'choices' list")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}, ...]
        texts = [p.get("text") for p in content if isinstance(p, dict)]
        content = "".join(t for t in texts if isinstance(t, str)) if texts else None
    finish = first.get("finish_reason") if isinstance(first, dict) else None
    if not isinstance(content, str):
        raise LLMEmptyReplyError(
            f"the first choice from {url} has no text content (finish_reason={finish!r})"
        )
    reported = payload.get("model")
    return Completion(
        content, finish, reported if isinstance(reported, str) and reported else model
    )
