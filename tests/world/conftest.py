"""Shared fixtures for the world tests: a tiny smart-home world."""

import pytest

from wmkit.world import EntityContract, World, canonical_id, register

CONTRACTS = [
    EntityContract("lamp", {"brightness", "color"}, statuses={"on", "off"}),
    EntityContract("person", {"mood"}),
    EntityContract("room"),
]
LAMP = canonical_id("lamp", "living-lamp")
SON = canonical_id("person", "son")
LIVING = canonical_id("room", "living")
HALL = canonical_id("room", "hall")


@pytest.fixture
def world() -> World:
    w = World.create(CONTRACTS, confidence_floor=0.5)
    w = register(w, "lamp", "living-lamp", {"status": "on", "brightness": 80})
    w = register(w, "person", "son", {"status": "away"})
    w = register(w, "room", "living", {"status": "ok"})
    return register(w, "room", "hall", {"status": "ok"})
