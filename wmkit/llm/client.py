"""An OpenAI-compatible chat client over HTTP (``POST {base_url}/chat/completions``).

It speaks the protocol that OpenAI, vLLM, llama.cpp's server, Ollama and most gateways
share, over ``httpx`` rather than the standard library's ``urllib``: urllib follows
redirects (and resends the ``Authorization`` header to wherever they point), lets
``http.client`` errors such as ``IncompleteRead`` escape, and has no bound on a reply's
size or total time. httpx follows no redirect unless told, has one exception hierarchy,
explicit connect/read/write timeouts and streamed reads; the official ``openai`` package
would add retries and types we already have and a release cadence tied to one vendor.

What every request is held to:

- **No redirects.** A 3xx is an ``LLMRedirectError`` naming the ``Location``: the
  request carries the API key, so it goes to ``base_url`` and nowhere else.
- **Typed failures.** Anything that breaks (refused, reset, a body shorter than its
  ``Content-Length``, a status line that is not HTTP, JSON that is not a completion)
  is an ``LLMError`` (``wmkit.llm.errors``) that says what to fix.
- **A deadline per call**, not only per read: a ``chat`` call, its retries and the
  waits between them included, ends ``deadline`` seconds after it started; a server that
  drips a byte at a time is cut off then, headers included (a watchdog shuts the socket
  down; each attempt has its own connection so that it can).
- **A size limit**: the reply is read in chunks and refused past ``max_reply_bytes``
  (at once when its ``Content-Length`` says so), so a runaway server cannot fill memory.

**Constrained output.** ``json_schema=`` among a call's params asks for a reply that
matches that JSON schema; the client writes it the way its server takes it
(``constrain``): ``json_schema`` is OpenAI's ``response_format`` (``{"type":
"json_schema", "json_schema": {"name", "schema", "strict"}}``: OpenAI, vLLM, Ollama's
OpenAI API), ``json_object`` is llama-cpp-python's (``{"type": "json_object", "schema":
...}``, compiled to a grammar; it answers the OpenAI form with 422), ``none`` drops it
(a server that cannot constrain; the THINK-and-repair path still applies).

**Accounting.** ``usage`` (a :class:`~wmkit.llm.types.Usage`) counts calls, cache hits,
the tokens the server's ``usage`` field reports, the seconds spent waiting, and their
cost at ``price_in``/``price_out`` per million tokens.

Timeouts, broken transfers (``LLMTransportError``), 429 and 5xx are retried with
exponential backoff (``backoff * 2**attempt`` seconds, at least what ``Retry-After``
asks, at most ``max_backoff``); nothing else is retried, because a refused connection,
a redirect, a 4xx or a garbled response will not get better by asking again at once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from wmkit.llm.cache import ReplyCache, request_key
from wmkit.llm.errors import (
    BODY_EXCERPT_CHARS,
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
from wmkit.llm.types import Completion, Message, Usage

__all__ = ["CONSTRAIN_STYLES", "DEFAULT_MAX_REPLY_BYTES", "ChatClient", "response_format"]

Constrain = Literal["none", "json_schema", "json_object"]
CONSTRAIN_STYLES: tuple[str, ...] = ("none", "json_schema", "json_object")
"""How a server takes a JSON schema to constrain its output (see ``response_format``)."""

log = logging.getLogger(__name__)

_RESERVED_PARAMS = ("model", "messages", "stream")  # set by the client; no streaming

DEFAULT_MAX_REPLY_BYTES = 16 * 2**20
"""The default size limit of one reply body: 16 MiB, hundreds of times a long completion
(even one with per-token logprobs), far below what would hurt a worker's memory."""

_LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


class ChatClient:
    """A chat-completions client with timeouts, a deadline, retries and an optional cache.

    Args:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1`` (``/chat/completions``
            is appended). Configs take it from ``$WMKIT_LLM_BASE_URL``. Requests go
            there and nowhere else: redirects are refused, not followed.
        model: the model name sent with every request.
        api_key: sent as ``Authorization: Bearer <key>`` when given.
        timeout: seconds allowed for connecting and for each read or write (a server
            that sends nothing for this long times out).
        deadline: seconds a whole ``chat`` call may take, from connecting to the last
            byte of the reply, however steadily the bytes come, retries and the waits
            between them included (no retry starts that could not finish in time).
            None: ``3 * timeout * (max_retries + 1)`` (connecting, waiting for the
            answer and reading it may each take up to ``timeout``, on every attempt).
        max_retries: retries after the first attempt, for timeouts, broken transfers,
            429 and 5xx only.
        backoff: seconds before the first retry; doubles with each retry.
        max_backoff: the longest wait between attempts, ``Retry-After`` included.
        max_reply_bytes: the largest reply body accepted, in bytes; a longer one is an
            ``LLMResponseError``, found without holding more than this in memory.
        cache: where identical requests are answered from; None for no cache. Replies
            cut off at the token limit (``finish_reason="length"``) are not cached.
        params: default request fields (``temperature``, ``max_tokens``, ...); the
            ``params`` of a call override them.
        constrain: how ``json_schema=`` is sent (``json_schema``: OpenAI's form,
            ``json_object``: llama-cpp-python's, ``none``: not at all).
        price_in: cost of a million prompt tokens (0: free, a local model).
        price_out: cost of a million completion tokens.

    Attributes:
        url: the full endpoint URL.
        requests_sent: HTTP requests made, retries included.
        retries: retries made.
        usage: calls, tokens, seconds and cost so far (and structured outcomes, which
            ``ask_structured`` counts); never reset by the client.

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
        deadline: float | None = None,
        max_retries: int = 2,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        cache: ReplyCache | None = None,
        params: Mapping[str, Any] | None = None,
        constrain: Constrain = "none",
        price_in: float = 0.0,
        price_out: float = 0.0,
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
        if deadline is not None and not deadline > 0:
            raise LLMConfigError(f"deadline must be > 0 seconds or None, got {deadline}")
        if max_retries < 0 or backoff < 0 or max_backoff < 0:
            raise LLMConfigError(
                f"max_retries, backoff and max_backoff must be >= 0, "
                f"got {max_retries}, {backoff}, {max_backoff}"
            )
        if isinstance(max_reply_bytes, bool) or not isinstance(max_reply_bytes, int):
            raise LLMConfigError(f"max_reply_bytes must be an int, got {max_reply_bytes!r}")
        if max_reply_bytes < 1:
            raise LLMConfigError(f"max_reply_bytes must be >= 1, got {max_reply_bytes}")
        if constrain not in CONSTRAIN_STYLES:
            raise LLMConfigError(
                f"constrain must be one of {', '.join(CONSTRAIN_STYLES)}, got {constrain!r}"
            )
        if not (price_in >= 0 and price_out >= 0):
            raise LLMConfigError(
                f"price_in and price_out must be >= 0 (per million tokens), "
                f"got {price_in}, {price_out}"
            )
        self.constrain = constrain
        self.price_in = float(price_in)
        self.price_out = float(price_out)
        self.usage = Usage()
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.deadline = (
            float(deadline) if deadline is not None else 3 * self.timeout * (max_retries + 1)
        )
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_reply_bytes = max_reply_bytes
        self.cache = cache
        self.params = dict(params or {})
        _check_params(self.params)
        # identity: a compressed body could grow far past max_reply_bytes in one chunk.
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "identity",
        }
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # Proxies from the environment apply, except to a server on this machine: a
        # local model server never sits behind a proxy, and a stray HTTP_PROXY must not
        # send its traffic away.
        local = parts.hostname in _LOCAL_HOSTS
        self._http = httpx.Client(
            headers=headers,
            follow_redirects=False,
            trust_env=not local,
            timeout=httpx.Timeout(self.timeout, connect=min(self.timeout, self.deadline)),
            # No kept-alive connections: each attempt opens its own, so the watchdog
            # always knows the socket to cut. A handshake costs milliseconds; a
            # completion, seconds.
            limits=httpx.Limits(max_keepalive_connections=0),
        )
        self.requests_sent = 0
        self.retries = 0

    def __repr__(self) -> str:  # never shows the key
        return f"ChatClient(url={self.url!r}, model={self.model!r})"

    def close(self) -> None:
        """Release the HTTP client; the instance sends no more requests after this."""
        self._http.close()

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def complete(self, messages: Sequence[Message], **params: Any) -> str:
        """Return the text of the reply to ``messages``; see ``chat``."""
        return self.chat(messages, **params).text

    def chat(self, messages: Sequence[Message], **params: Any) -> Completion:
        """Send ``messages`` and return the first choice, from the cache if it has it.

        Args:
            messages: the conversation, each ``{"role": str, "content": str}``.
            **params: request fields for this call (``temperature``, ``max_tokens``...);
                ``json_schema=`` (a JSON schema dict) constrains the reply to it, in the
                client's ``constrain`` style.

        Raises:
            LLMConfigError: malformed messages or a reserved parameter.
            LLMTimeoutError, LLMTransportError, LLMStatusError: after the retries are
                spent (``LLMStatusError`` only for 408, 429 and 5xx; others at once).
            LLMConnectionError, LLMRedirectError, LLMResponseError, LLMEmptyReplyError:
                at once.
        """
        checked = _check_messages(messages)
        schema = params.pop("json_schema", None)
        merged = {**self.params, **params}
        _check_params(merged)
        if schema is not None:
            merged.update(response_format(self.constrain, schema))
        key = None
        if self.cache is not None:
            key = request_key(self.model, checked, merged)
            hit = self.cache.get(key)
            if hit is not None:
                self.usage.calls += 1
                self.usage.cached += 1
                return hit
        body = json.dumps({"model": self.model, "messages": checked, **merged}).encode()
        started = time.monotonic()
        try:
            completion = self._send(body, started + self.deadline)
        finally:
            self.usage.seconds += time.monotonic() - started
        usage = self.usage
        usage.calls += 1
        usage.tokens_in += completion.tokens_in
        usage.tokens_out += completion.tokens_out
        usage.cost += (
            completion.tokens_in * self.price_in + completion.tokens_out * self.price_out
        ) / 1e6
        if key is not None and completion.finish_reason != "length":
            self.cache.put(key, completion)  # type: ignore[union-attr]
        return completion

    def _send(self, body: bytes, end: float) -> Completion:
        """POST ``body`` until it is answered, retrying what may pass, by ``end``."""
        attempt = 0
        while True:
            try:
                completion = _completion(self._post(body, end), self.model, self.url)
                break
            except LLMError as err:
                wait = self._wait(attempt, err)
                retry = _retryable(err) and attempt < self.max_retries
                if not retry or time.monotonic() + wait >= end:
                    raise
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
        return completion

    def _wait(self, attempt: int, err: LLMError) -> float:
        wait = self.backoff * 2**attempt
        if isinstance(err, LLMStatusError) and err.retry_after is not None:
            wait = max(wait, err.retry_after)
        return min(wait, self.max_backoff)

    def _post(self, body: bytes, end: float) -> bytes:
        """POST ``body`` and return the raw 2xx body by ``end`` (monotonic), or raise."""
        left = end - time.monotonic()
        if left <= 0:
            raise self._past_deadline()
        self.requests_sent += 1
        watchdog = _Watchdog(left)
        try:
            with self._http.stream(
                "POST", self.url, content=body, extensions={"trace": watchdog.trace}
            ) as response:
                return self._read_reply(response, watchdog)
        except LLMError:
            raise
        except Exception as err:
            # After the watchdog cut the socket, whatever broke broke because of it.
            if watchdog.fired:
                raise self._past_deadline() from None
            if isinstance(err, httpx.TimeoutException):
                raise self._timed_out() from None
            if isinstance(err, (httpx.ConnectError, httpx.ProxyError)):
                raise LLMConnectionError(f"cannot reach {self.url}: {err}") from None
            if isinstance(err, (httpx.HTTPError, OSError)):
                raise LLMTransportError(
                    f"the exchange with {self.url} broke: {type(err).__name__}: {err}"
                ) from None
            raise
        finally:
            watchdog.close()

    def _read_reply(self, response: httpx.Response, watchdog: _Watchdog) -> bytes:
        status = response.status_code
        if 300 <= status < 400:
            raise LLMRedirectError(status, response.headers.get("Location", ""), self.url)
        if not 200 <= status < 300:  # a non-2xx answer: the body says why
            text = self._excerpt(response, watchdog)
            raise LLMStatusError(status, text, self.url, _retry_after(response.headers))
        declared = response.headers.get("Content-Length", "")
        if declared.strip().isdigit() and int(declared) > self.max_reply_bytes:
            raise self._too_large(f"its Content-Length announces {int(declared):,} bytes")
        chunks, size = [], 0
        for chunk in self._chunks(response, watchdog):
            size += len(chunk)
            if size > self.max_reply_bytes:
                raise self._too_large("more arrived before it ended")
            chunks.append(chunk)
        return b"".join(chunks)

    def _chunks(self, response: httpx.Response, watchdog: _Watchdog) -> Iterator[bytes]:
        for chunk in response.iter_bytes():
            if watchdog.expired():  # checked here too: the cut may race the last read
                raise self._past_deadline()
            yield chunk

    def _excerpt(self, response: httpx.Response, watchdog: _Watchdog) -> str:
        limit, chunks, size = BODY_EXCERPT_CHARS * 4, [], 0
        try:
            for chunk in self._chunks(response, watchdog):
                chunks.append(chunk)
                size += len(chunk)
                if size >= limit:
                    break
        except (LLMError, httpx.HTTPError, OSError):  # the body itself timed out or broke
            pass
        return b"".join(chunks)[:limit].decode("utf-8", "replace").strip()

    def _timed_out(self) -> LLMTimeoutError:
        return LLMTimeoutError(f"no answer from {self.url} within {self.timeout:g}s")

    def _past_deadline(self) -> LLMTimeoutError:
        return LLMTimeoutError(
            f"{self.url} did not finish answering within the deadline of {self.deadline:g}s "
            f"(the timeout of {self.timeout:g}s applies to each read; the deadline to the "
            "whole call, retries included)"
        )

    def _too_large(self, detail: str) -> LLMResponseError:
        return LLMResponseError(
            f"the reply from {self.url} is larger than max_reply_bytes="
            f"{self.max_reply_bytes:,} ({detail}); raise the limit if such replies are expected"
        )


class _Watchdog:
    """Cuts one request's connection once its deadline has passed.

    httpx bounds each read, not a whole response, and has no hook between the reads of
    the headers; so a timer thread shuts the socket down (``shutdown`` wakes a blocked
    ``recv`` at once) and the request fails in whatever read it was in. It learns the
    socket from httpcore's documented ``trace`` extension (``connect_tcp.complete``) and
    keeps a duplicate of it, which stays valid after TLS wraps the original.
    """

    def __init__(self, seconds: float) -> None:
        self._ends = time.monotonic() + seconds
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def expired(self) -> bool:
        """True once the deadline has passed (whether or not the timer has run yet)."""
        return self.fired or time.monotonic() >= self._ends

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        """The ``trace`` callback: keep (a duplicate of) the socket of each new connection."""
        if not event.endswith("connect_tcp.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if not isinstance(sock, socket.socket):
            return  # another network backend: only the checks between chunks apply
        duplicate = sock.dup()
        with self._lock:
            self._sockets.append(duplicate)
            if self.fired:  # connected after the deadline: cut at once
                _shutdown(duplicate)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._sockets:
                _shutdown(sock)

    def close(self) -> None:
        """Stop the timer and drop the duplicates (the connection closes with httpx's)."""
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()


def _shutdown(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed by the other side
        sock.shutdown(socket.SHUT_RDWR)


def _retryable(err: LLMError) -> bool:
    if isinstance(err, LLMStatusError):
        return err.transient
    return isinstance(err, (LLMTimeoutError, LLMTransportError))


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


def _retry_after(headers: httpx.Headers) -> float | None:
    value = headers.get("Retry-After")
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
    usage = payload.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return Completion(
        content,
        finish,
        reported if isinstance(reported, str) and reported else model,
        tokens_in=_count(usage.get("prompt_tokens")),
        tokens_out=_count(usage.get("completion_tokens")),
    )


def _count(value: Any) -> int:
    """A token count from a reply's ``usage``: a non-negative int, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def response_format(style: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """Return the request fields that constrain a reply to ``schema``, in ``style``.

    Args:
        style: ``json_schema`` (OpenAI's ``response_format``), ``json_object``
            (llama-cpp-python's), or ``none`` (no fields: unconstrained).
        schema: the JSON schema (a dict).
    """
    if style == "json_schema":
        named = {"name": "reply", "schema": dict(schema), "strict": True}
        return {"response_format": {"type": "json_schema", "json_schema": named}}
    if style == "json_object":
        return {"response_format": {"type": "json_object", "schema": dict(schema)}}
    if style == "none":
        return {}
    raise LLMConfigError(f"constrain must be one of {', '.join(CONSTRAIN_STYLES)}, got {style!r}")
