import json
import socket
import time

import pytest
from chat_server import http_error, no_choices, ok, raw, slow, truncated

from wmkit.llm import (
    ChatClient,
    Completion,
    LLMConfigError,
    LLMConnectionError,
    LLMEmptyReplyError,
    LLMResponseError,
    LLMStatusError,
    LLMTimeoutError,
    ReplyCache,
    request_key,
)

HELLO = [{"role": "user", "content": "hello"}]


def _client(server, **kwargs):
    kwargs = {"timeout": 2.0, "max_retries": 2, "backoff": 0.01, **kwargs}
    return ChatClient(server.url, "test-model", **kwargs)


def test_sends_the_openai_request_and_reads_the_first_choice(chat_server):
    chat_server.script("hi there")
    client = _client(chat_server, api_key="sk-test", params={"temperature": 0})
    completion = client.chat(HELLO, max_tokens=50)
    assert completion == Completion("hi there", "stop", "test-model", cached=False)
    [request] = chat_server.requests
    assert request == {
        "model": "test-model",
        "messages": HELLO,
        "temperature": 0,
        "max_tokens": 50,
    }
    assert chat_server.auth == ["Bearer sk-test"]
    assert "sk-test" not in repr(client)


def test_content_parts_are_joined(chat_server):
    body = {"choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"text": "b"}]}}]}
    chat_server.script(raw(json.dumps(body)))
    assert _client(chat_server).complete(HELLO) == "ab"


def test_500_then_ok_is_retried(chat_server):
    chat_server.script(http_error(500), http_error(503), "fine")
    client = _client(chat_server)
    assert client.complete(HELLO) == "fine"
    assert (len(chat_server.requests), client.retries) == (3, 2)


def test_500_every_time_gives_status_error_with_body_after_retries(chat_server):
    chat_server.script(*[http_error(500, "model overloaded")] * 3)
    client = _client(chat_server, max_retries=2)
    with pytest.raises(LLMStatusError) as caught:
        client.complete(HELLO)
    assert caught.value.status == 500 and caught.value.transient
    assert "model overloaded" in str(caught.value) and "model overloaded" in caught.value.body
    assert len(chat_server.requests) == 3 and chat_server.pending == 0


def test_429_waits_for_retry_after_then_succeeds(chat_server):
    chat_server.script(http_error(429, "slow down", retry_after=1), "ok now")
    client = _client(chat_server, backoff=0.0, max_backoff=5.0)
    start = time.monotonic()
    assert client.complete(HELLO) == "ok now"
    assert time.monotonic() - start >= 1.0
    assert len(chat_server.requests) == 2


def test_retry_after_is_capped_by_max_backoff(chat_server):
    chat_server.script(http_error(429, retry_after=60), "ok now")
    start = time.monotonic()
    assert _client(chat_server, max_backoff=0.05).complete(HELLO) == "ok now"
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_not_retried(chat_server, status):
    chat_server.script(http_error(status, "bad request"), "never sent")
    with pytest.raises(LLMStatusError) as caught:
        _client(chat_server).complete(HELLO)
    assert caught.value.status == status and not caught.value.transient
    assert len(chat_server.requests) == 1 and chat_server.pending == 1


def test_slow_server_times_out_after_retries(chat_server):
    chat_server.script(slow(3.0), slow(3.0))
    client = _client(chat_server, timeout=0.3, max_retries=1)
    start = time.monotonic()
    with pytest.raises(LLMTimeoutError, match=r"within 0\.3s"):
        client.complete(HELLO)
    assert time.monotonic() - start < 2.5
    assert len(chat_server.requests) == 2


def test_slow_then_fast_is_retried(chat_server):
    chat_server.script(slow(3.0, "late"), "on time")
    assert _client(chat_server, timeout=0.3).complete(HELLO) == "on time"


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (raw('{"choices": [{"message": {"content": "cut'), LLMResponseError, "not JSON"),
        (raw("<html>gateway</html>"), LLMResponseError, "not JSON"),
        (raw("[1, 2]"), LLMResponseError, "not an object"),
        (raw('{"object": "chat.completion"}'), LLMResponseError, "no 'choices'"),
        (raw('{"error": {"message": "quota"}}'), LLMResponseError, "quota"),
        (no_choices(), LLMEmptyReplyError, "empty 'choices'"),
        (ok(None), LLMEmptyReplyError, "no text content"),  # type: ignore[arg-type]
    ],
)
def test_malformed_responses_fail_clearly_without_retry(chat_server, reply, error, message):
    chat_server.script(reply, "never sent")
    with pytest.raises(error, match=message) as caught:
        _client(chat_server).complete(HELLO)
    assert caught.value.transient
    assert len(chat_server.requests) == 1


def test_refused_connection_is_a_connection_error():
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "m", timeout=1.0)
    with pytest.raises(LLMConnectionError, match="cannot reach") as caught:
        client.complete(HELLO)
    assert not caught.value.transient and client.requests_sent == 1


@pytest.mark.parametrize(
    ("base_url", "model", "message"),
    [
        (None, "m", "WMKIT_LLM_BASE_URL"),
        ("", "m", "WMKIT_LLM_BASE_URL"),
        ("localhost:8000/v1", "m", "http"),
        ("ftp://host/v1", "m", "http"),
        ("http://127.0.0.1:1/v1", None, "model"),
    ],
)
def test_bad_configuration_is_refused(base_url, model, message):
    with pytest.raises(LLMConfigError, match=message):
        ChatClient(base_url, model)


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "non-empty list"),
        ("hello", "non-empty list"),
        ([{"role": "user"}], r"messages\[0\]"),
        ([{"role": "user", "content": "a"}, ("user", "b")], r"messages\[1\] must be a dict"),
        ([{"role": "", "content": "a"}], "role"),
    ],
)
def test_bad_messages_are_refused_before_sending(chat_server, messages, message):
    client = _client(chat_server)
    with pytest.raises(LLMConfigError, match=message):
        client.complete(messages)
    assert chat_server.requests == []


def test_reserved_params_are_refused(chat_server):
    with pytest.raises(LLMConfigError, match="stream"):
        _client(chat_server).complete(HELLO, stream=True)
    with pytest.raises(LLMConfigError, match="model"):
        _client(chat_server, params={"model": "other"})


def test_identical_requests_are_answered_from_the_cache(chat_server):
    chat_server.script("first", "second", "third")
    client = _client(chat_server, cache=ReplyCache())
    assert client.chat(HELLO, temperature=0).text == "first"
    again = client.chat(HELLO, temperature=0)
    assert again.text == "first" and again.cached
    assert client.chat(HELLO, temperature=1).text == "second"  # other params: a new request
    assert client.chat([{"role": "user", "content": "other"}]).text == "third"
    assert len(chat_server.requests) == 3 and client.cache.hits == 1


def test_truncated_replies_are_not_cached(chat_server):
    chat_server.script(truncated("abcdef", 3), "whole")
    client = _client(chat_server, cache=ReplyCache())
    assert client.chat(HELLO).finish_reason == "length"
    assert client.chat(HELLO).text == "whole"
    assert len(chat_server.requests) == 2


def test_request_key_is_canonical():
    key = request_key("m", HELLO, {"temperature": 0, "max_tokens": 5})
    assert key == request_key("m", [dict(HELLO[0])], {"max_tokens": 5, "temperature": 0})
    assert key != request_key("m2", HELLO, {"temperature": 0, "max_tokens": 5})
    assert key != request_key("m", HELLO, {"temperature": 0})
    assert key != request_key("m", [{"role": "user", "content": "hello!"}], {})
    with pytest.raises(TypeError, match="JSON"):
        request_key("m", HELLO, {"stop": {1, 2}})


def test_memory_cache_forgets_least_recently_used():
    cache = ReplyCache(max_entries=2)
    for key in "abc":
        cache.put(key, Completion(key, "stop", "m"))
        cache.get("a")  # keep "a" fresh
    assert (cache.get("a"), cache.get("b")) == (Completion("a", "stop", "m", True), None)
    assert cache.get("c").text == "c" and len(cache) == 2
    with pytest.raises(ValueError, match="max_entries"):
        ReplyCache(max_entries=0)


def test_disk_cache_survives_a_restart_and_torn_lines(tmp_path, chat_server):
    path = tmp_path / "cache" / "replies.jsonl"
    chat_server.script("from the server")
    client = _client(chat_server, cache=ReplyCache(path))
    assert client.complete(HELLO) == "from the server"
    # A later process finds it on disk; the server is not asked again.
    assert _client(chat_server, cache=ReplyCache(path)).chat(HELLO).cached
    assert len(chat_server.requests) == 1
    # Damage the file: a malformed line, a wrong-shaped one, bad bytes, a torn last line.
    with path.open("ab") as f:
        f.write(b'not json\n{"key": 1, "text": "x"}\n\xff\xfe\n{"key": "torn", "te')
    cache = ReplyCache(path)
    assert cache.skipped == 4 and len(cache) == 1
    cache.put("new", Completion("fresh", "stop", "m"))  # starts on a line of its own
    reloaded = ReplyCache(path)
    assert reloaded.skipped == 4
    assert reloaded.get("new").text == "fresh"
    assert reloaded.get(request_key("test-model", HELLO, {})).text == "from the server"


def test_a_local_server_is_reached_directly_despite_proxy_settings(chat_server, monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there
    chat_server.script("direct")
    assert _client(chat_server, max_retries=0).complete(HELLO) == "direct"
