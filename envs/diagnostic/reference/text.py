"""What the reference family says, declared once: the renderer and the reader share it."""

from __future__ import annotations

from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.world.types import Claim

__all__ = ["COLOURS", "SHELVES", "TEXT", "VOICE", "read"]

SHELVES = ("shelf:a", "shelf:b", "shelf:c", "shelf:d")
COLOURS = tuple(
    [
        "red",
        "blue",
        "green",
        "amber",
        "grey",
        "white",
        "black",
        "pink",
        "teal",
        "brown",
        "violet",
        "cream",
    ]
)

SLOT_TYPES = {
    "box": SlotType(r"\d+", lambda c: c.split(":")[1], lambda t: f"box:{t}", entity=True),
    "shelf": SlotType(
        "[ABCD]", lambda c: c.split(":")[1].upper(), lambda t: f"shelf:{t.lower()}", entity=True
    ),
    "colour": SlotType("|".join(COLOURS), str, str),
    "delay": SlotType(r"\d+", str, str),
}


def _kind(name: str, templates: str, *claims: ClaimSpec) -> MessageKind:
    return MessageKind(name, tuple(templates.split(" | ")), claims)


_ON = ClaimSpec("box", "on", "shelf")
KINDS = (
    _kind("intro", "The storeroom opens for the day. | Morning in the storeroom."),
    _kind(
        "arrived",
        "Box {box} arrived on shelf {shelf}; it is {colour}. | A {colour} box, number {box},"
        " was left on shelf {shelf}.",
        _ON,
        ClaimSpec("box", "colour", "colour"),
        ClaimSpec("box", "label", value="plain"),
    ),
    _kind(
        "moved",
        "The porter moved box {box} to shelf {shelf}. | Box {box} now sits on shelf {shelf}.",
        _ON,
    ),
    _kind(
        "moved_desc",
        "The porter moved the {colour} box to shelf {shelf}. | The {colour} box was shifted"
        " to shelf {shelf}.",
        ClaimSpec((("colour", "colour"),), "on", "shelf"),
    ),
    _kind("put", "You put box {box} on shelf {shelf}.", _ON),
    _kind("checked", "Box {box} is on shelf {shelf}. | You find box {box} on shelf {shelf}.", _ON),
    _kind(
        "pickup",
        "The courier will collect box {box} in {delay} steps. | A courier is booked for box"
        " {box} in {delay} steps.",
    ),
    _kind(
        "collected",
        "The courier collected box {box}. | Box {box} left with the courier.",
        ClaimSpec("box", "on", value="courier"),
    ),
    _kind(
        "rule",
        "If box {box} ever reaches shelf {shelf}, label it fragile. | Should box {box} end up"
        " on shelf {shelf}, it must be labelled fragile.",
    ),
    _kind(
        "labelled", "Box {box} is now labelled fragile.", ClaimSpec("box", "label", value="fragile")
    ),
    _kind(
        "request", "Please get box {box} onto shelf {shelf}. | Box {box} belongs on shelf {shelf}."
    ),
    _kind("thanks", "Thanks: box {box} is where it belongs."),
    _kind("waited", "You wait. | Time passes."),
    _kind("gone", "Box {box} has already left with the courier."),
    _kind("not_understood", "Nothing happens: try wait, check box N or move box N to shelf X."),
    _kind("chatter", "The radio plays softly. | Someone sweeps the floor. | A forklift beeps."),
)
TEXT = TextBook(KINDS, SLOT_TYPES)
VOICE = Voice(TEXT)


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    A box named by its colour comes out as the description ``(("colour", c),)``; colours
    are unique within an episode, so the caller resolves it against what it read.
    """
    return TEXT.read(observation)
