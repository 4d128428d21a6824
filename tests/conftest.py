"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from chat_server import ChatServer

GAMES_DIR_VAR = "WMKIT_GAMES_DIR"


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
