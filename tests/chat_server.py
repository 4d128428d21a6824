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

Transport faults, which a real model server does not produce but a proxy, a crash or a
hostile host can: ``redirect`` (a 3xx with a ``Location``), ``cut_off`` (a body shorter
than its ``Content-Length``, then the connection closes), ``drip`` (a byte at a time,
body only or from the status line on), ``reset`` (the connection closed with a TCP
reset instead of an answer), ``raw_response`` (any bytes, status line included) and
``flood`` (a body of any size, generated as it is sent, announced or not). ``hits``
records every request of any method, so a test can show that one never arrived.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ChatServer",
    "Reply",
    "cut_off",
    "drip",
    "flood",
    "http_error",
    "no_choices",
    "ok",
    "raw",
    "raw_response",
    "redirect",
    "reset",
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
        keep: send only this many bytes of the body (``Content-Length`` still announces
            all of it), then close the connection.
        drip: seconds between single bytes of the response; 0 sends it at once.
        drip_headers: drip from the status line on, not only the body.
        reset: answer nothing and close the connection with a TCP reset.
        raw_response: bytes sent as the whole response, status line included.
        flood: send a body of this many bytes of JSON whitespace, made as it is sent.
        announce: give the flood a ``Content-Length`` (else it ends when the
            connection closes).
        tokens: the ``(prompt_tokens, completion_tokens)`` its ``usage`` reports.
    """

    content: str | None = ""
    status: int = 200
    delay: float = 0.0
    finish_reason: str | None = "stop"
    body: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    no_choices: bool = False
    keep: int | None = None
    drip: float = 0.0
    drip_headers: bool = False
    reset: bool = False
    raw_response: bytes | None = None
    flood: int = 0
    announce: bool = True
    tokens: tuple[int, int] = (0, 0)


def ok(
    content: str, finish_reason: str | None = "stop", tokens: tuple[int, int] = (0, 0)
) -> Reply:
    """A normal completion whose message is ``content``; ``usage`` reports ``tokens``."""
    return Reply(content, finish_reason=finish_reason, tokens=tokens)


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


def redirect(location: str, status: int = 302) -> Reply:
    """A redirect to ``location`` (give the full URL of another server to test origins)."""
    return Reply(None, status=status, body="", headers={"Location": location})


def cut_off(keep: int, content: str = "a reply that never arrives whole") -> Reply:
    """A completion whose body stops after ``keep`` bytes, short of its Content-Length."""
    return Reply(content, keep=keep)


def drip(interval: float, content: str = "```json\n[]\n```", headers: bool = False) -> Reply:
    """A completion sent one byte every ``interval`` seconds (from the status line on
    when ``headers``): each read is quick, the whole is not."""
    return Reply(content, drip=interval, drip_headers=headers)


def reset() -> Reply:
    """No answer: the connection is closed with a TCP reset (``ECONNRESET``)."""
    return Reply(None, reset=True)


def raw_response(data: bytes) -> Reply:
    """``data`` as the whole response, e.g. a status line that is not HTTP."""
    return Reply(None, raw_response=data)


def flood(size: int, announce: bool = True) -> Reply:
    """A 200 whose body is ``size`` bytes of whitespace, with or without Content-Length."""
    return Reply(None, flood=size, announce=announce)


Responder = Callable[[dict[str, Any]], "Reply | str"]
"""Answers a request body when no scripted reply is left; a str means ``ok(str)``."""


class ChatServer:
    """A chat-completions server in a thread; see the module docstring.

    Args:
        responder: answers requests once the script is used up; None: HTTP 500.

    Attributes:
        requests: every well-formed request body received, in order.
        auth: the ``Authorization`` header of each of those requests (None if absent).
        hits: ``(method, path, Authorization)`` of every request that arrived, of any
            method or path, well-formed or not, in order.
    """

    def __init__(self, responder: Responder | None = None) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.hits: list[tuple[str, str, str | None]] = []
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

    def _hit(self) -> ChatServer:
        owner: ChatServer = self.server.owner  # type: ignore[attr-defined]
        with owner._lock:
            owner.hits.append((self.command, self.path, self.headers.get("Authorization")))
        return owner

    def do_GET(self) -> None:  # where a client that follows a 302 would go
        self._hit()
        self._send(Reply(None, status=405, body=json.dumps({"error": "POST only"})))

    def do_POST(self) -> None:
        owner = self._hit()
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
        owner: ChatServer = self.server.owner  # type: ignore[attr-defined]
        if reply.reset:
            # Linger 0: close() sends RST instead of FIN. The reader made by makefile
            # holds the socket open until it is closed too.
            linger = struct.pack("ii", 1, 0)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)
            self.rfile.close()
            self.connection.close()
            return
        if reply.raw_response is not None:
            return self._write([reply.raw_response])
        if reply.flood:
            return self._flood(reply)
        data = _body(reply, model).encode()
        headers = {"Content-Type": "application/json", "Content-Length": str(len(data))}
        headers.update(reply.headers)
        if reply.keep is None and not reply.drip:
            try:
                self.send_response(reply.status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timed out)
                pass
            return
        head = _head(reply.status, headers)
        body = data if reply.keep is None else data[: reply.keep]
        if not reply.drip:
            return self._write([head, body])
        if not reply.drip_headers:
            self._write([head])
            head = b""
        data = head + body
        for i in range(len(data)):
            if owner._closing.wait(reply.drip) or not self._write([data[i : i + 1]]):
                return

    def _flood(self, reply: Reply) -> None:
        headers = {"Content-Type": "application/json", "Connection": "close"}
        if reply.announce:
            headers["Content-Length"] = str(reply.flood)
        if not self._write([_head(reply.status, headers)]):
            return
        chunk, left = b" " * 65536, reply.flood
        while left > 0:
            if not self._write([chunk[:left]]):
                return
            left -= len(chunk)

    def _write(self, parts: list[bytes]) -> bool:
        """Write ``parts`` as they are; False when the client has gone."""
        try:
            for part in parts:
                self.wfile.write(part)
            return True
        except OSError:  # broken pipe, reset: the client gave up or cut us off
            return False


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    lines = [f"HTTP/1.1 {status} Scripted", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _body(reply: Reply, model: str) -> str:
    if reply.body is not None:
        return reply.body
    message = {"role": "assistant", "content": reply.content}
    choices = (
        []
        if reply.no_choices
        else [{"index": 0, "message": message, "finish_reason": reply.finish_reason}]
    )
    return json.dumps(
        {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": choices,
            "usage": {
                "prompt_tokens": reply.tokens[0],
                "completion_tokens": reply.tokens[1],
                "total_tokens": sum(reply.tokens),
            },
        }
    )
