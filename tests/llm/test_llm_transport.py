"""Transport faults against real local HTTP servers: redirects, broken transfers, a
dripping server, a flood. Each of these got past the urllib client (issue 16)."""

import gzip
import time
import tracemalloc

import pytest
from chat_server import ChatServer, cut_off, drip, flood, ok, raw_response, redirect, reset

from wmkit.agents.trackers import LLMTracker
from wmkit.llm import (
    ChatClient,
    LLMConfigError,
    LLMRedirectError,
    LLMResponseError,
    LLMStatusError,
    LLMTimeoutError,
    LLMTransportError,
)
from wmkit.world.types import WorldState

HELLO = [{"role": "user", "content": "hello"}]
KEY = "sk-secret-test-key"
MiB = 2**20


def _client(server, **kwargs):
    kwargs = {"timeout": 2.0, "max_retries": 2, "backoff": 0.01, **kwargs}
    return ChatClient(server.url, "test-model", KEY, **kwargs)


@pytest.fixture
def elsewhere():
    """A second server: another port on the same host is another origin."""
    with ChatServer() as server:
        server.script(*["the other host's answer"] * 3)
        yield server


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_key_never_leaves(chat_server, elsewhere, status):
    location = elsewhere.url + "/chat/completions"
    chat_server.script(redirect(location, status))
    client = _client(chat_server)
    with pytest.raises(LLMRedirectError) as caught:
        client.complete(HELLO)
    assert isinstance(caught.value, LLMStatusError) and not caught.value.transient
    assert caught.value.status == status and caught.value.location == location
    assert location in str(caught.value) and "not followed" in str(caught.value)
    assert KEY not in str(caught.value)
    assert elsewhere.hits == []  # no request at all, so no Authorization header
    assert chat_server.auth == [f"Bearer {KEY}"] and client.requests_sent == 1  # no retry


def _bad_gzip():
    head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 9\r\n\r\n"
    return raw_response(head + b"not gzip!")


BROKEN = {
    "body shorter than Content-Length": lambda: cut_off(25),
    "connection reset": reset,
    "status line not HTTP": lambda: raw_response(b"HELLO, I AM NOT HTTP\r\n\r\n"),
    "bad chunk size": lambda: raw_response(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"
    ),
    "closed before any answer": lambda: raw_response(b""),
    "gzip that is not": _bad_gzip,
}


@pytest.mark.parametrize("fault", BROKEN.values(), ids=BROKEN.keys())
def test_every_broken_transfer_is_a_transient_llm_error_and_retried(chat_server, fault):
    chat_server.script(fault(), fault(), fault())
    client = _client(chat_server)
    with pytest.raises(LLMTransportError, match="broke") as caught:
        client.complete(HELLO)
    assert caught.value.transient and KEY not in str(caught.value)
    assert (len(chat_server.hits), client.retries) == (3, 2)


def test_a_broken_transfer_then_a_good_one_succeeds(chat_server):
    gzipped = gzip.compress(b'{"choices": [{"message": {"content": "zipped"}}]}')
    head = f"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {len(gzipped)}\r\n\r\n"
    chat_server.script(cut_off(10), raw_response(head.encode() + gzipped), "plain")
    client = _client(chat_server)
    assert client.complete(HELLO) == "zipped"  # a server that compresses anyway is read
    assert client.complete(HELLO) == "plain"
    assert client.retries == 1


def test_a_truncated_reply_skips_one_tracker_step_instead_of_crashing(chat_server):
    client = _client(chat_server, max_retries=1)
    tracker = LLMTracker(client, params={"temperature": 0})
    chat_server.script("[]")
    tracker.reset("PX-1000 was booked.", {})
    chat_server.script(cut_off(30), reset())
    tracker.update("wait", "You wait.", {})  # raised http.client.IncompleteRead before
    assert tracker.state == WorldState() and tracker.stats.request_errors == 1
    assert "broke" in tracker.notes[-1]
    chat_server.script("[]")
    tracker.update("wait", "You wait.", {})  # the run goes on
    assert tracker.stats.replies == 2 and chat_server.pending == 0


@pytest.mark.parametrize("headers", [False, True], ids=["body", "headers"])
def test_a_dripping_server_is_cut_off_at_the_deadline(chat_server, headers):
    # A byte every 0.5 s never trips the 2 s read timeout; only the deadline ends it.
    chat_server.script(drip(0.5, headers=headers))
    client = _client(chat_server, deadline=2.0, max_retries=0)
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="deadline of 2s"):
        client.complete(HELLO)
    elapsed = time.monotonic() - start
    assert 1.9 <= elapsed < 5.0, elapsed


def test_the_deadline_bounds_the_whole_call_retries_included(chat_server):
    # Every attempt drips: with a fresh deadline per attempt, 3 attempts took ~6 s.
    for _ in range(3):
        chat_server.script(drip(0.5))
    client = _client(chat_server, deadline=2.0, max_retries=2, backoff=0.1)
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError, match="deadline of 2s"):
        client.complete(HELLO)
    assert time.monotonic() - start < 3.5
    assert client.requests_sent == 1  # no retry that could not finish in time was started


def test_the_deadline_defaults_to_three_timeouts_an_attempt_and_is_checked():
    assert ChatClient("http://127.0.0.1:1/v1", "m", timeout=5).deadline == 45.0  # 3 attempts
    assert ChatClient("http://127.0.0.1:1/v1", "m", timeout=5, max_retries=0).deadline == 15.0
    assert ChatClient("http://127.0.0.1:1/v1", "m", timeout=5, deadline=1).deadline == 1.0
    for bad in ({"deadline": 0}, {"max_reply_bytes": 0}, {"max_reply_bytes": 1.5}):
        with pytest.raises(LLMConfigError, match=next(iter(bad))):
            ChatClient("http://127.0.0.1:1/v1", "m", **bad)


@pytest.mark.parametrize("announce", [True, False], ids=["announced", "unannounced"])
def test_an_oversized_reply_is_refused_without_holding_it(chat_server, announce):
    chat_server.script(flood(64 * MiB, announce=announce))
    client = _client(chat_server, max_reply_bytes=1 * MiB)
    tracemalloc.start()
    try:
        with pytest.raises(LLMResponseError, match="max_reply_bytes=1,048,576"):
            client.complete(HELLO)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * MiB, f"peak {peak / MiB:.1f} MiB while refusing a 64 MiB reply"
    assert client.requests_sent == 1  # the same request would get the same flood


def test_the_size_limit_counts_body_bytes(chat_server):
    chat_server.script(ok("x" * 1000), ok("x" * 1000))
    assert len(_client(chat_server, max_reply_bytes=5000).complete(HELLO)) == 1000
    with pytest.raises(LLMResponseError, match="announces"):
        _client(chat_server, max_reply_bytes=500).complete(HELLO)


def test_a_remote_server_is_reached_through_the_proxy_from_the_environment(
    chat_server, monkeypatch
):
    for name in ("no_proxy", "NO_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", chat_server.url.removesuffix("/v1"))
    client = ChatClient("http://llm.example.invalid/v1", "m", timeout=2.0, max_retries=0)
    with pytest.raises(LLMStatusError, match="404"):  # the proxy knows no such path
        client.complete(HELLO)
    assert chat_server.hits == [("POST", "http://llm.example.invalid/v1/chat/completions", None)]
