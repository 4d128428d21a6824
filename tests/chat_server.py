"""A real chat-completions HTTP server for tests, scripted reply by reply.

It listens on 127.0.0.1 on an ephemeral port in a background thread and speaks the
OpenAI protocol: ``POST /v1/chat/completions`` with ``{"model", "messages", ...}`` gets a
``chat.completion`` object back. Each request is answered by the next scripted ``Reply``
(``script``), or, when none is left, by ``responder(request_body)``; with neither, it
answers HTTP 500 "no scripted reply left", so a test that sends more requests than it
expected fails loudly. Every request body is kept in ``requests``, in arrival order.

Reusable anywhere: test files in ``tests/llm`` get the ``chat_server`` fixture from
``conftest.py``; elsewhere put ``tests/llm`` on ``sys.path`` and use ``ChatServer`` as a
context manager::

    with ChatServer() as server:
        server.script(ok('```json\\n[]\\n```'), http_error(500), slow(5.0))
        client = ChatClient(server.url, "test-model", timeout=0.5)

Reply helpers: ``ok`` (a completion), ``think_json`` (THINK block + ```json block),
``truncated`` (cut text, ``finish_reason="length"``), ``slow`` (answers after a delay),
``http_error`` (status, OpenAI error body, optional ``Retry-After``), ``raw`` (any body,
e.g. malformed JSON) and ``no_choices`` (an empty ``choices`` list).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ChatServer",
    "Reply",
    "http_error",
    "no_choices",
    "ok",
    "raw",
    "slow",
    "think_json",
    "truncated",
]

PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        content: the assistant message text (None sends ``"content": null``).
        status: the HTTP status.
        delay: seconds to wait before answering (past a client's timeout: a slow server).
        finish_reason: the choice's finish reason.
        body: a raw response body sent instead of a completion (malformed responses,
            error bodies).
        headers: extra response headers.
        no_choices: send a completion with an empty ``choices`` list.
    """

    content: str | None = ""
    status: int = 200
    delay: float = 0.0
    finish_reason: str | None = "stop"
    body: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    no_choices: bool = False


def ok(content: str, finish_reason: str | None = "stop") -> Reply:
    """A normal completion whose message is ``content``."""
    return Reply(content, finish_reason=finish_reason)


def think_json(think: str, value: Any) -> Reply:
    """A completion in the seed's two-block format: ``THINK:`` text, then a ```json block."""
    return Reply(f"THINK: {think}\n```json\n{json.dumps(value)}\n```")


def truncated(content: str, keep: int) -> Reply:
    """``content`` cut after ``keep`` characters, as a server that hit ``max_tokens``."""
    return Reply(content[:keep], finish_reason="length")


def slow(delay: float, content: str = "```json\n[]\n```") -> Reply:
    """A completion sent only after ``delay`` seconds."""
    return Reply(content, delay=delay)


def http_error(
    status: int, message: str = "scripted failure", retry_after: int | None = None
) -> Reply:
    """An HTTP error with an OpenAI-style error body."""
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
    body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}})
    return Reply(None, status=status, body=body, headers=headers)


def raw(body: str, status: int = 200) -> Reply:
    """Any response body as it is (e.g. JSON cut in the middle)."""
    return Reply(None, status=status, body=body)


def no_choices() -> Reply:
    """A completion object with ``"choices": []``."""
    return Reply(None, no_choices=True)


Responder = Callable[[dict[str, Any]], "Reply | str"]
"""Answers a request body when no scripted reply is left; a str means ``ok(str)``."""


class ChatServer:
    """A chat-completions server in a thread; see the module docstring.

    Args:
        responder: answers requests once the script is used up; None: HTTP 500.

    Attributes:
        requests: every well-formed request body received, in order.
        auth: the ``Authorization`` header of each of those requests (None if absent).
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The API root to give a client: ``http://127.0.0.1:<port>/v1``."""
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def pending(self) -> int:
        """Scripted replies not used yet."""
        with self._lock:
            return len(self._script)

    def script(self, *replies: Reply | str) -> ChatServer:
        """Queue replies for the next requests, in order; a str means ``ok(str)``."""
        with self._lock:
            self._script.extend(ok(r) if isinstance(r, str) else r for r in replies)
        return self

    def start(self) -> ChatServer:
        """Start listening on an ephemeral port."""
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        httpd.daemon_threads = True
        httpd.owner = self  # type: ignore[attr-defined]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop the server; handlers still sleeping in a ``slow`` reply wake up at once."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _next(self, request: dict[str, Any], auth: str | None) -> Reply:
        with self._lock:
            self.requests.append(request)
            self.auth.append(auth)
            if self._script:
                return self._script.popleft()
        if self.responder is not None:
            answer = self.responder(request)
            return ok(answer) if isinstance(answer, str) else answer
        return http_error(500, "no scripted reply left")


class _Handler(BaseHTTPRequestHandler):
    server: ThreadingHTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        owner: ChatServer = self.server.owner  # type: ignore[attr-defined]
        if self.path != PATH:
            return self._send(Reply(None, status=404, body=json.dumps({"error": "no such path"})))
        length = int(self.headers.get("Content-Length") or 0)
        try:
            request = json.loads(self.rfile.read(length))
            if not isinstance(request.get("model"), str) or not isinstance(
                request.get("messages"), list
            ):
                raise ValueError("needs a string 'model' and a list 'messages'")
        except (ValueError, AttributeError) as err:
            return self._send(Reply(None, status=400, body=json.dumps({"error": str(err)})))
        reply = owner._next(request, self.headers.get("Authorization"))
        if reply.delay and owner._closing.wait(reply.delay):
            return  # shutting down: drop the connection unanswered
        self._send(reply, request.get("model", ""))

    def _send(self, reply: Reply, model: str = "") -> None:
        if reply.body is not None:
            body = reply.body
        else:
            message = {"role": "assistant", "content": reply.content}
            choices = (
                []
                if reply.no_choices
                else [{"index": 0, "message": message, "finish_reason": reply.finish_reason}]
            )
            body = json.dumps(
                {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": choices,
                    "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                }
            )
        data = body.encode()
        try:
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timed out)
            pass
