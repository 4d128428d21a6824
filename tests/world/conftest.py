"""Shared fixtures for the world tests: a tiny smart-home world (``tiny_world``)."""

import pytest
from tiny_world import make_world

from wmkit.world import World


@pytest.fixture
def world() -> World:
    return make_world()
