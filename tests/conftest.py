"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_server import ChatServer
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

GAMES_DIR_VAR = "WMKIT_GAMES_DIR"

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
