"""The tiny smart-home world the world tests share: its contracts, ids and a builder.

Test files import it as ``from tiny_world import ...`` (pytest's ``prepend`` import mode
puts ``tests/world/`` on ``sys.path``); ``conftest.py`` serves it as the ``world``
fixture, and property tests, which cannot take function-scoped fixtures, call
:func:`make_world`.
"""

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


def make_world() -> World:
    """A lamp (on, brightness 80), a son (away) and two rooms, confidence floor 0.5."""
    w = World.create(CONTRACTS, confidence_floor=0.5)
    w = register(w, "lamp", "living-lamp", {"status": "on", "brightness": 80})
    w = register(w, "person", "son", {"status": "away"})
    w = register(w, "room", "living", {"status": "ok"})
    return register(w, "room", "hall", {"status": "ok"})
