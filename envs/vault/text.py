"""What the Vault family says, declared once: the renderer and the reader share it.

The name pools the world draws from, the slot types, the message kinds (one per exit
direction, with and without a latch; mechanism events by name and by where the door
is), :data:`TEXT` (renders and reads), :data:`VOICE` (the step path's compiled forms) and
:func:`read`, the perfect reader.
"""

from __future__ import annotations

from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.world.types import Claim

__all__ = [
    "ANCHORS",
    "CHATTER",
    "DIRS",
    "DIR_WORDS",
    "DOOR_NAMES",
    "KEY_NAMES",
    "LEVER_NAMES",
    "LINE_MAX",
    "NOTE_NAMES",
    "OPPOSITE",
    "ROOM_NAMES",
    "TEXT",
    "TREASURES",
    "VOICE",
    "item_text",
    "read",
]

# --- pools -----------------------------------------------------------------------------


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


ROOM_NAMES = _words(
    "hall library cellar study gallery chapel armory kitchen pantry crypt parlor workshop "
    "observatory scullery attic vestry foyer larder nursery ballroom greenhouse laundry solar "
    "buttery dungeon garret lounge office chamber cloister smithy stable granary bakery tower "
    "corridor landing closet scriptorium conservatory"
)
DOOR_NAMES = _words(
    "oak ash elm pine birch beech cedar walnut maple yew teak larch alder hazel rowan willow "
    "iron steel bronze copper brass tin lead stone glass red green blue black white grey "
    "crimson amber ivory"
)
KEY_NAMES = _words(
    "brass silver bone copper rusty tiny black bent small gilded pewter steel tin wooden heavy "
    "crooked slender dull shiny long"
)
LEVER_NAMES = _words("rusty wooden long brass heavy short bent red black greasy stiff")
NOTE_NAMES = _words("yellowed crumpled torn damp folded faded stained pencilled")
TREASURES = _words("crown chalice sceptre diadem orb idol")

DIRS = ("north", "east", "south", "west")
OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
DIR_WORDS = {d: d for d in DIRS} | {d[0]: d for d in DIRS}
"""What a command may call a direction: its name or its initial."""

# --- slots and message kinds -----------------------------------------------------------


def item_text(canonical: str) -> str:
    """How a key or note is named in text: ``key:brass`` -> ``brass key``."""
    kind, name = canonical.split(":", 1)
    return f"{name} {kind}"


def _item_canon(text: str) -> str:
    name, kind = text.split(" ")
    return f"{kind}:{name}"


_LOCK_TEXT = {"keyhole": "a keyhole", "bar": "a heavy bar", "keypad": "a keypad", "none": "no lock"}
_LOCK_CANON = {v: k for k, v in _LOCK_TEXT.items()}

SLOT_TYPES = {
    # The player is never named: a zero-width slot lets "You are in ..." claim
    # (player, at, room) through TextBook, whose claim subjects must be slots.
    "me": SlotType("", lambda c: "", lambda t: "player", True),
    "room": SlotType(
        r"[A-Z][a-z]+", lambda c: c[5:].capitalize(), lambda t: "room:" + t.lower(), True
    ),
    "door": SlotType(r"[a-z]+ door", lambda c: c[5:] + " door", lambda t: "door:" + t[:-5], True),
    "item": SlotType(r"[a-z]+ (?:key|note)", item_text, _item_canon, True),
    "lever": SlotType(
        r"[a-z]+ lever", lambda c: c[6:] + " lever", lambda t: "lever:" + t[:-6], True
    ),
    "treasure": SlotType(r"[a-z]+", lambda c: c[9:], lambda t: "treasure:" + t, True),
    "state": SlotType("locked|closed|open", str, str),
    "lock": SlotType("|".join(_LOCK_CANON), _LOCK_TEXT.__getitem__, _LOCK_CANON.__getitem__),
    "latch": SlotType("up|down", str, str),
    "lstate": SlotType("up|down", str, str),
    "code": SlotType(r"\d{4}", str, str),
    "dir": SlotType("north|east|south|west", str, str),
}
SLOT_TYPES["here"] = SLOT_TYPES["there"] = SLOT_TYPES["room"]


def _kind(name: str, templates: str, *claims: ClaimSpec) -> MessageKind:
    lines = tuple(t.strip() for t in templates.strip().split("\n"))
    return MessageKind(name, lines, claims)


def _door_is(value: str) -> ClaimSpec:
    return ClaimSpec("door", "state", value=value)


def _exit_kinds() -> list[MessageKind]:
    # One kind per direction (a claim's relation cannot come from a slot), with and
    # without a latch. Leaving `here` by `e`: here lies on the opposite side of the door.
    kinds = []
    for e in DIRS:
        sides = (ClaimSpec("door", OPPOSITE[e], "here"), ClaimSpec("door", e, "there"))
        common = (*sides, ClaimSpec("door", "state", "state"), ClaimSpec("door", "lock", "lock"))
        kinds.append(
            MessageKind(
                f"exit_{e}",
                (
                    f"To the {e} of the {{here}}, the {{door}} leads to the {{there}}; it is "
                    "{state}, with {lock}.",
                    f"The {{door}} leads {e} from the {{here}} to the {{there}}. It is {{state}} "
                    "and has {lock}.",
                    f"The {{there}} lies {e} of the {{here}}, through the {{door}} ({{state}}, "
                    "{lock}).",
                ),
                common,
            )
        )
        kinds.append(
            MessageKind(
                f"exit_{e}_latch",
                (
                    f"To the {e} of the {{here}}, the {{door}} leads to the {{there}}; it is "
                    "{state}, with {lock} and a latch that is {latch}.",
                    f"The {{door}} leads {e} from the {{here}} to the {{there}}. It is {{state}}, "
                    "has {lock}, and its latch is {latch}.",
                    f"The {{there}} lies {e} of the {{here}}, through the {{door}} ({{state}}, "
                    "{lock}, latch {latch}).",
                ),
                (*common, ClaimSpec("door", "latch", "latch")),
            )
        )
    return kinds


# Mechanism events: said of the door by name, or by where it is ("the door north of the
# Hall" is the door whose south side is the Hall).
_EVENTS = {
    "unbarred": (
        "closed",
        (
            "With a clank, the bar of the {door} slides back.",
            "You hear the bar of the {door} slide back.",
        ),
    ),
    "barred": (
        "locked",
        (
            "With a clang, the bar of the {door} drops and the door is shut fast.",
            "You hear the bar of the {door} crash down.",
        ),
    ),
    "sprung": (
        "closed",
        (
            "The {door} swings shut on its spring.",
            "With a creak, the {door} closes by itself.",
        ),
    ),
}


def _event_kinds() -> list[MessageKind]:
    kinds = []
    for name, (value, templates) in _EVENTS.items():
        kinds.append(MessageKind(name, templates, (_door_is(value),)))
        for e in DIRS:
            described = tuple(t.replace("{door}", f"door {e} of the {{room}}") for t in templates)
            subject = ((OPPOSITE[e], "room"),)
            kinds.append(
                MessageKind(f"{name}_{e}", described, (ClaimSpec(subject, "state", value=value),))
            )
    return kinds


def _in_room(slot: str) -> ClaimSpec:
    return ClaimSpec(slot, "in", "room")


KINDS = (
    _kind(
        "intro",
        """
        You stand in the cold entrance of an old house. Somewhere inside lies its vault.
        The front door shuts behind you. The vault is somewhere in this house.
        Dust and silence. They say the vault of this house has never been opened.
        """,
    ),
    _kind(
        "at",
        """
        {me}You are in the {room}.
        {me}This is the {room}.
        {me}You stand in the {room}.
        """,
        ClaimSpec("me", "at", "room"),
    ),
    _kind(
        "back",
        """
        {me}You are back in the {room}.
        {me}The {room} again.
        {me}You return to the {room}.
        """,
        ClaimSpec("me", "at", "room"),
    ),
    *_exit_kinds(),
    _kind(
        "item_here",
        """
        There is a {item} here in the {room}.
        A {item} lies on the floor of the {room}.
        In the {room} you see a {item}.
        """,
        _in_room("item"),
    ),
    _kind(
        "treasure_here",
        """
        On a pedestal in the {room} rests the {treasure}.
        The {treasure} gleams on a pedestal in the {room}.
        """,
        _in_room("treasure"),
    ),
    _kind(
        "lever_here",
        """
        A {lever} juts from the wall of the {room}; it is {lstate}.
        In the {room}, a {lever} stands {lstate}.
        There is a {lever} in the {room}, pointing {lstate}.
        """,
        _in_room("lever"),
        ClaimSpec("lever", "state", "lstate"),
    ),
    # Replies to the agent's command.
    _kind(
        "went",
        """
        You go {dir} through the {door}.
        You walk {dir}, through the {door}.
        """,
    ),
    _kind("no_exit", "You cannot go that way."),
    _kind(
        "door_state",
        """
        The {door} is {state}.
        You find the {door} {state}.
        """,
        ClaimSpec("door", "state", "state"),
    ),
    _kind(
        "opened",
        """
        You open the {door}.
        The {door} swings open.
        You pull the {door} open.
        """,
        _door_is("open"),
    ),
    _kind(
        "closed",
        """
        You close the {door}.
        The {door} thuds shut.
        """,
        _door_is("closed"),
    ),
    _kind(
        "held_shut",
        """
        The {door} will not open; something holds it shut.
        You pull at the {door}, but it will not budge.
        """,
        _door_is("closed"),
    ),
    _kind(
        "unlocked",
        """
        The {item} turns in the lock: the {door} is unlocked.
        With a click, the {item} unlocks the {door}.
        """,
        _door_is("closed"),
    ),
    _kind(
        "wrong_key",
        """
        The {item} does not fit the {door}.
        You try the {item} on the {door}; it will not turn.
        """,
    ),
    _kind("no_keyhole", "The {door} has no keyhole."),
    _kind(
        "latch_lifted",
        """
        You lift the latch of the {door}.
        The latch of the {door} clicks up.
        """,
        ClaimSpec("door", "latch", value="up"),
    ),
    _kind(
        "latch_lowered",
        """
        You lower the latch of the {door}.
        The latch of the {door} drops back down.
        """,
        ClaimSpec("door", "latch", value="down"),
    ),
    _kind(
        "latch_already",
        "The latch of the {door} is already {latch}.",
        ClaimSpec("door", "latch", "latch"),
    ),
    _kind("no_latch", "There is no latch on the {door}."),
    _kind("no_latch_here", "You see no latch here."),
    _kind("which_latch", "Which latch? Say: lift latch on <door>."),
    _kind(
        "pulled",
        """
        You pull the {lever}; it is now {lstate}.
        The {lever} moves {lstate} with a grinding sound.
        """,
        ClaimSpec("lever", "state", "lstate"),
    ),
    _kind(
        "taken",
        """
        You take the {item}.
        Taken: the {item}.
        You pick up the {item}.
        """,
        ClaimSpec("item", "in", value="player"),
    ),
    _kind(
        "treasure_taken",
        """
        You lift the {treasure} from its pedestal. The vault is yours!
        The {treasure} is yours at last: you have emptied the vault!
        """,
        ClaimSpec("treasure", "in", value="player"),
    ),
    _kind(
        "dropped",
        """
        You drop the {item} in the {room}.
        You leave the {item} in the {room}.
        """,
        _in_room("item"),
    ),
    _kind(
        "treasure_dropped",
        "You set the {treasure} down in the {room}.",
        _in_room("treasure"),
    ),
    _kind(
        "already_have",
        """
        You already have the {item}.
        The {item} is already in your pack.
        """,
        ClaimSpec("item", "in", value="player"),
    ),
    _kind(
        "carrying",
        """
        You are carrying the {item}.
        In your pack: the {item}.
        """,
        ClaimSpec("item", "in", value="player"),
    ),
    _kind(
        "carrying_treasure",
        "You are carrying the {treasure}.",
        ClaimSpec("treasure", "in", value="player"),
    ),
    _kind(
        "empty_handed",
        """
        You are empty-handed.
        You carry nothing.
        """,
    ),
    _kind(
        "read",
        """
        The {item} reads: {code}.
        Scrawled on the {item}: {code}.
        You read the {item}. It says {code}.
        """,
        ClaimSpec("item", "code", "code"),
    ),
    _kind(
        "code_ok",
        """
        The keypad chimes and the {door} unlocks.
        A green light: the {door} is unlocked.
        """,
        _door_is("closed"),
    ),
    _kind(
        "code_wrong",
        """
        The keypad buzzes: wrong code.
        A red light blinks on the keypad.
        """,
    ),
    _kind("no_keypad", "There is no keypad here."),
    _kind(
        "waited",
        """
        Time passes.
        You wait.
        You listen to the silence.
        """,
    ),
    _kind("no_such", "You see no such thing here."),
    _kind("cannot", "You cannot do that."),
    _kind("not_carrying", "You are not carrying that."),
    _kind(
        "not_understood",
        "That command was not understood. Try: look, inventory, wait, go <direction>, "
        "take/drop <thing>, open/close <door>, unlock <door> with <key>, lift/lower latch on "
        "<door>, pull <lever>, read <note>, enter code <digits>.",
    ),
    *_event_kinds(),
    # Chatter: names nothing and states nothing.
    _kind(
        "chatter",
        """
        Water drips somewhere in the dark.
        A draught stirs the dust at your feet.
        A rat scurries along the skirting board.
        Far above, the wind moans in a chimney.
        Your candle gutters and steadies.
        Somewhere a clock ticks, then stops.
        A floorboard creaks under your weight.
        You hear a distant clank, then nothing.
        """,
    ),
)

TEXT = TextBook(KINDS, SLOT_TYPES)
"""The Vault family's templates: renders observations and reads them back."""

_EXITS = "here door there state lock"
VOICE = Voice(
    TEXT,
    orders={
        "at": "me room",
        "back": "me room",
        **{f"exit_{e}": _EXITS for e in DIRS},
        **{f"exit_{e}_latch": f"{_EXITS} latch" for e in DIRS},
        "item_here": "item room",
        "treasure_here": "treasure room",
        "lever_here": "lever room lstate",
        "went": "dir door",
        "door_state": "door state",
        "unlocked": "item door",
        "wrong_key": "item door",
        "latch_already": "door latch",
        "pulled": "lever lstate",
        "dropped": "item room",
        "treasure_dropped": "treasure room",
        "read": "item code",
    },
)
"""The step path's renderer: values are passed in the orders above (the rest: one slot)."""

ANCHORS = {
    name: tuple(
        (form.order.index(claim.subject), claim.relation)
        for claim in TEXT.kinds[name].claims
        if isinstance(claim.subject, str)
    )
    for name, form in VOICE.forms.items()
}
"""Per kind, the facts a message states by name: ``(position of the subject, relation)``.

A message re-states these facts, so it anchors them (the step a probe's chain starts).
"""

CHATTER = VOICE.kinds["chatter"][0]
"""The distractor lines: they name nothing and state nothing."""

LINE_MAX = 256
"""The longest rendered line (tested with the longest names)."""


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    Inverts every template and paraphrase of the family. A door named by where it is
    ("the door north of the Hall") comes out as a description subject,
    ``(("south", "room:hall"),)``, which the caller resolves against the door sides it
    read earlier: a room has at most one door on each side, so it is unambiguous.
    Chatter and replies that state nothing yield nothing.
    """
    return TEXT.read(observation)
