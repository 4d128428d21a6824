"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple, NoReturn

import pytest
from chat_server import ChatServer
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from wmkit.llm import LLMError
from wmkit.llm.local import LocalServer, LocalServerUnavailable, require_server, served_models

GAMES_DIR_VAR = "WMKIT_GAMES_DIR"
LLM_REQUIRED_VAR = "WMKIT_REQUIRE_LLM"  # CI sets it: no model is then a failure, not a skip

# Property tests run a fixed, derandomised example budget by default, so a CI run is
# reproducible and its cost known; HYPOTHESIS_PROFILE=dev searches wider (and keeps
# failing examples under the ignored .pytest_cache/ to replay them).
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,  # shared CI cores: a slow example is not a failure
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=2000,
    deadline=None,
    database=DirectoryBasedExampleDatabase(
        str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "hypothesis")
    ),
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def games_dir() -> Path:
    """The folder of free Jericho story files named by ``$WMKIT_GAMES_DIR``.

    Tests that need it are skipped, with the reason shown, when the variable is unset
    (CI sets it to ``../shared/games``); a variable naming no folder is an error.
    """
    value = os.environ.get(GAMES_DIR_VAR)
    if not value:
        pytest.skip(
            f"{GAMES_DIR_VAR} is not set: point it at a folder of Jericho game files "
            "(CI uses ../shared/games) to run the game tests"
        )
    path = Path(value)
    if not path.is_dir():
        pytest.fail(f"{GAMES_DIR_VAR}={value!r} is not a folder")
    return path


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A started local chat-completions server (``chat_server.ChatServer``), closed after."""
    with ChatServer() as server:
        yield server


def _no_llm(reason: str) -> NoReturn:
    """Skip the test for want of a model, or fail it under ``$WMKIT_REQUIRE_LLM`` (CI)."""
    if os.environ.get(LLM_REQUIRED_VAR):
        pytest.fail(f"{LLM_REQUIRED_VAR} is set, but {reason}")
    pytest.skip(reason)


class LLMEndpoint(NamedTuple):
    """Where the ``llm_server`` fixture's model answers."""

    base_url: str
    model: str


@pytest.fixture(scope="session")
def llm_extra() -> None:
    """llama-cpp-python's server can run here (the ``llm`` extra); else skip (CI: fail)."""
    try:
        require_server()
    except LocalServerUnavailable as err:
        _no_llm(str(err))


@pytest.fixture(scope="session")
def llm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMEndpoint]:
    """A real language model over the OpenAI protocol, for the tests marked ``llm``.

    ``$WMKIT_LLM_BASE_URL`` (and ``$WMKIT_LLM_MODEL``, else the first model the server
    lists) when set, as CI sets them (``.ci/run``); otherwise a ``LocalServer`` on the
    packaged model, started once for the session (its log in the session's temporary
    folder), when the ``llm`` extra is installed. Without either the tests are skipped,
    or fail when ``$WMKIT_REQUIRE_LLM`` is set; a server that is named but does not
    answer, or that fails to start, is a failure. The tests that use it speak llama.cpp's
    dialect where servers differ (``constrain="json_object"``).
    """
    base_url = os.environ.get("WMKIT_LLM_BASE_URL")
    if base_url:
        api_key = os.environ.get("WMKIT_LLM_API_KEY")
        try:
            models = served_models(base_url, timeout=10.0, api_key=api_key)
        except LLMError as err:
            pytest.fail(f"WMKIT_LLM_BASE_URL={base_url!r} does not answer: {err}")
        model = os.environ.get("WMKIT_LLM_MODEL") or (models[0] if models else "")
        if not model:
            pytest.fail(f"{base_url} lists no model; set WMKIT_LLM_MODEL")
        yield LLMEndpoint(base_url, model)
        return
    try:
        server = LocalServer(log=tmp_path_factory.mktemp("llm") / "server.log")
    except LocalServerUnavailable as err:
        _no_llm(f"no language model (set WMKIT_LLM_BASE_URL, or install one): {err}")
    with server:
        yield LLMEndpoint(server.base_url, server.model)
