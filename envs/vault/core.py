"""``wmkit/Vault-v0``: hidden rules to discover (seed 001's door, seed 004's self-correction).

A house of rooms joined by doors; the vault lies behind ``load`` locked doors in a row,
and the goal is to reach it and take the treasure inside. Each door on the way has a
mechanism, and the rules of the mechanisms vary by seed and are never stated:

* a *keyhole* door opens with one of the keys lying about (which one is hidden; some
  keys fit nothing);
* a *keyhole and latch* door: the right key turns the lock, yet the door will not open
  until its latch is lifted (other doors carry latches that do nothing);
* a *barred* door is worked by a lever somewhere else in the house; the bar moves some
  steps after the pull (the delay is hidden; some levers work nothing);
* the vault door has a *keypad*; its code is on a note that lies near the start, among
  decoy notes, so the code read early is needed much later;
* some side doors are on springs: they swing shut some steps after being opened.

Facts (canonical lowercase; ``*`` marks facts that never change):

==========================  ==================================================
fact                        object
==========================  ==================================================
``(player, at, R)``         the room the player is in, ``room:hall``
``(door:D, <side>, R)`` *   room R lies on the ``north|east|south|west`` side
                            of the door (two facts per door)
``(door:D, state, S)``      ``locked`` | ``closed`` | ``open``
``(door:D, lock, L)`` *     ``keyhole`` | ``bar`` | ``keypad`` | ``none``
``(door:D, latch, S)``      ``down`` | ``up`` (doors with a latch only)
``(key:K, in, X)``          a room, or ``player`` (carried); likewise notes
                            and the treasure (``note:N``, ``treasure:T``)
``(note:N, code, C)``       the four digits on the note; joins the true state
                            when the note is first read (unread writing is
                            hidden, like the rules)
``(lever:L, in, R)`` *      the room the lever is in
``(lever:L, state, S)``     ``up`` | ``down``
==========================  ==================================================

Every fact of an entity is stated in the observation that first names it (a room is
described in full on the first visit and on ``look``, briefly on later visits), and
every later change of a named entity is stated when it happens, by name or, with
probability ``indirection``, by description ("the bar of the door north of the Hall
slides back"). Changes to entities not yet named happen silently. So a perfect reader
with perfect memory (``read``) reconstructs the true facts of every named entity.

The hidden rules are not facts: they live in ``VaultWorld``, and ground truth exposes
them separately as ``info["wm.rules"]`` (sorted facts such as
``(key:brass, fits, door:oak)``, ``(door:oak, latch_blocks, yes)``,
``(lever:rusty, operates, door:iron)``, ``(lever:rusty, delay, 4)``,
``(note:torn, opens, door:steel)``, ``(door:ash, shuts_after, 3)``; ``nothing`` for
decoys) for scoring rule discovery.

Actions (case and spacing ignored): ``look``, ``inventory``, ``wait``, ``go <dir>`` (or
``north``, ``n``, ...), ``take|drop <thing>``, ``open|close <door>``, ``unlock <door>
with <key>``, ``lift|lower latch on <door>`` (``lift latch`` alone when one door here
has a latch), ``pull <lever>``, ``read <note>``, ``enter code <digits>``. A command the
game cannot carry out gets a reply saying so and changes nothing, but time passes:
scheduled mechanisms still move. Admissible actions are the commands that apply here,
wrong keys included (choosing is the puzzle); at the keypad they offer the code of every
note read so far, decoys included, but never a code the player has not read.

Rewards: +1 the first time each door on the way to the vault is opened, +10 for taking
the treasure, which ends the episode (``terminated``); ``max_score = load + 10``.

Ground truth splits each step's change into the agent's command (``action``) and the
mechanisms (``event``: delayed lever effects, doors shutting on springs). Probes ask
where a thing is or what state a lever is in (``drift``), what a note read long ago
said (``breakage``; also asked whenever the player stands at the locked keypad), and
the state of a door last changed by a mechanism (``confusion``).

The pure core, ``VaultFuncEnv``, has Gymnasium's ``FuncEnv`` shape over an immutable
``VaultState``; a transition is a deterministic function of ``(state, action)`` whose
randomness (wording, chatter) comes from the episode seed and the step. ``VaultEnv`` is
the thin ``gymnasium.Env[str, str]`` shell.
"""

from __future__ import annotations

import hashlib
import string
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, NamedTuple

from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import CoreDefaults, DiagnosticEnv, FamilyParams, check_int, truth_info
from wmkit.envs.diagnostic.text import ClaimSpec, Message, MessageKind, SlotType, TextBook
from wmkit.world.types import Claim, Delta, Fact, Probe

__all__ = [
    "TEXT",
    "Door",
    "Item",
    "Lever",
    "VaultEnv",
    "VaultFuncEnv",
    "VaultParams",
    "VaultState",
    "VaultWorld",
    "read",
    "state_hash",
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
_DIR_WORDS = {d: d for d in DIRS} | {d[0]: d for d in DIRS}

LOCKED, CLOSED, OPEN = 0, 1, 2
DOOR_STATES = ("locked", "closed", "open")
LATCH_STATES = ("down", "up")  # latches[i]: -1 no latch, 0 down, 1 up
LEVER_STATES = ("up", "down")  # levers[k]: 0 up, 1 down
HELD = -1  # where[j] of a carried item

MAX_LOAD = 10
P_SIDE_LATCH = 0.25  # a side or keyhole door carries a latch that does nothing
P_SPRING = 0.3  # a side door shuts itself some steps after being opened
P_SIDE_OPEN = 0.3  # a side door without a spring starts open
WIN_REWARD = 10

# Scheduled mechanisms: (due step, kind, door, value), kept sorted.
_BAR, _SPRING = 0, 1

# --- text ------------------------------------------------------------------------------


def _item_text(canonical: str) -> str:
    kind, name = canonical.split(":", 1)
    return f"{name} {kind}"


def _item_canon(text: str) -> str:
    name, kind = text.split(" ")
    return f"{kind}:{name}"


_LOCK_TEXT = {"keyhole": "a keyhole", "bar": "a heavy bar", "keypad": "a keypad", "none": "no lock"}
_LOCK_CANON = {v: k for k, v in _LOCK_TEXT.items()}
_LOCKS = {
    "key": "keyhole",
    "key_latch": "keyhole",
    "lever": "bar",
    "keypad": "keypad",
    "side": "none",
}

SLOT_TYPES = {
    # The player is never named: a zero-width slot lets "You are in ..." claim
    # (player, at, room) through TextBook, whose claim subjects must be slots.
    "me": SlotType("", lambda c: "", lambda t: "player", True),
    "room": SlotType(
        r"[A-Z][a-z]+", lambda c: c[5:].capitalize(), lambda t: "room:" + t.lower(), True
    ),
    "door": SlotType(r"[a-z]+ door", lambda c: c[5:] + " door", lambda t: "door:" + t[:-5], True),
    "item": SlotType(r"[a-z]+ (?:key|note)", _item_text, _item_canon, True),
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

_LINE_MAX = 256  # longest rendered line; tested


def _slot_names(template: str) -> tuple[str, ...]:
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


class _KindSpec(NamedTuple):
    """A kind, compiled for the hot path: values are passed positionally."""

    variants: int
    slots: tuple[str, ...]  # the order of ``templates[0]``, the positional order
    claims: tuple[tuple[int, str], ...]  # (position of the subject slot, relation)
    entities: tuple[int, ...]  # positions of entity-typed slots


def _compile_specs() -> dict[str, _KindSpec]:
    specs = {}
    for kind in KINDS:
        slots = _slot_names(kind.templates[0])
        claims = tuple(
            (slots.index(c.subject), c.relation) for c in kind.claims if isinstance(c.subject, str)
        )
        entities = tuple(i for i, s in enumerate(slots) if SLOT_TYPES[s].entity)
        specs[kind.name] = _KindSpec(len(kind.templates), slots, claims, entities)
    return specs


_SPECS = _compile_specs()
_CHATTER = len(TEXT.kinds["chatter"].templates)
_CHATTER_LINES = tuple(TEXT.kinds["chatter"].templates)


def _render(key: tuple) -> str:
    kind, variant, values = key
    return TEXT.render(Message(kind, variant, tuple(zip(_SPECS[kind].slots, values, strict=True))))


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    Inverts every template and paraphrase of the family. A door named by where it is
    ("the door north of the Hall") comes out as a description subject,
    ``(("south", "room:hall"),)``, which the caller resolves against the door sides it
    read earlier: a room has at most one door on each side, so it is unambiguous.
    Chatter and replies that state nothing yield nothing.
    """
    return TEXT.read(observation)


# --- parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class VaultParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``load`` is the locked doors between the start and the vault, 1..10 (the house has
    about twice as many rooms, plus decoy keys, levers and notes in proportion);
    ``indirection`` the probability a mechanism event names its door by where it is.

    Attributes:
        delay: ``(low, high)`` steps, 1..50, from which each lever's delay and each
            spring door's shutting time are drawn (a list is accepted).
    """

    MAX_LOAD = MAX_LOAD

    delay: tuple[int, int] = (2, 6)

    def __post_init__(self) -> None:
        super().__post_init__()
        delay = self.delay
        if isinstance(delay, (str, bytes)) or not isinstance(delay, Sequence) or len(delay) != 2:
            raise TypeError(f"delay must be a (low, high) pair of ints, got {delay!r}")
        low, high = delay
        check_int("delay low", low, 1, 50)
        check_int("delay high", high, 1, 50)
        if low > high:
            raise ValueError(f"delay must have low <= high, got {tuple(delay)}")
        object.__setattr__(self, "delay", (int(low), int(high)))


# --- randomness ------------------------------------------------------------------------

_M31 = 0x7FFFFFFF


def _hash32(x: int) -> int:
    # A 32-bit integer hash with full avalanche (two xorshift-multiply rounds).
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    x = ((x ^ (x >> 16)) * 0x45D9F3B) & 0xFFFFFFFF
    return x ^ (x >> 16)


class _Rng:
    """Per-step random numbers: a 31-bit LCG started from a hash of (seed, step, salt).

    So a step's draws are a function of the episode seed and the step only, as
    transitions must be, at a fraction of the cost of seeding ``random.Random`` (and
    smaller than ``diagnostic.StepRng``'s 48 bits): every number stays small, which is fast in
    CPython, and the sequence is the same on every platform. Draws use the LCG's high
    bits, the good ones. ``_Draft`` inlines the same generator.
    """

    __slots__ = ("x",)

    def __init__(self, seed32: int, step: int, salt: int = 0) -> None:
        self.x = _start(seed32, step, salt)

    def bits(self) -> int:
        """Return 31 random bits."""
        self.x = x = (self.x * 1103515245 + 12345) & _M31
        return x

    def choice(self, seq: Sequence[Any]) -> Any:
        """Return a uniform element of the non-empty ``seq``."""
        return seq[self.below(len(seq))]

    def sample(self, seq: Sequence[Any], k: int) -> list[Any]:
        """Return ``k`` distinct elements of ``seq`` (a partial Fisher-Yates shuffle)."""
        pool = list(seq)
        for i in range(k):
            j = i + self.below(len(pool) - i)
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def random(self) -> float:
        """Return a float in [0, 1)."""
        return self.bits() * 4.656612873077393e-10  # 2**-31

    def below(self, n: int) -> int:
        """Return an int in [0, n)."""
        return (self.bits() * n) >> 31


def _start(seed32: int, step: int, salt: int = 0) -> int:
    # One xorshift-multiply round over (seed, step): enough to decorrelate the starts of
    # neighbouring steps, which a bare LCG would not.
    x = ((seed32 ^ (step << 2 | salt) * 0x9E3779B1) & 0xFFFFFFFF) * 0x45D9F3B & 0xFFFFFFFF
    return (x ^ (x >> 16)) & _M31


# --- the world: layout and hidden rules ------------------------------------------------


class Door(NamedTuple):
    """A door between rooms ``a`` and ``b``; ``b`` lies ``direction`` of ``a``.

    Attributes:
        id: ``door:oak``.
        a: index of the room on one side.
        b: index of the room on the other side.
        direction: the way from ``a`` through the door to ``b``.
        lock: ``keyhole``, ``bar``, ``keypad`` or ``none`` (visible).
        latch: whether the door carries a latch (visible).
        latch_blocks: hidden rule: the door will not open with its latch down.
        key: hidden rule: index in ``VaultWorld.items`` of the key that fits, or -1.
        spring: hidden rule: steps after opening that it shuts itself; 0 for never.
        spine: position on the way to the vault (1..load), 0 for a side door.
    """

    id: str
    a: int
    b: int
    direction: str
    lock: str
    latch: bool
    latch_blocks: bool
    key: int
    spring: int
    spine: int


class Item(NamedTuple):
    """A thing that can be carried: ``kind`` is ``key``, ``note`` or ``treasure``.

    ``code`` is a note's four digits ("" otherwise); ``home`` the room it starts in.
    """

    id: str
    kind: str
    home: int
    code: str


class Lever(NamedTuple):
    """A lever in ``room``; hidden rule: it works ``door`` (-1: nothing) after ``delay`` steps."""

    id: str
    room: int
    door: int
    delay: int


class _RoomView(NamedTuple):
    """What describing a room states, prepared once per room.

    The messages' fixed values and the fact slots they anchor, so that
    ``_Draft.describe``, the costliest common step, skips the generic ``say``.
    """

    room: str
    exits: tuple[tuple[str, int, tuple[str, str, str], str, tuple[int, ...]], ...]
    levers: tuple[tuple[int, tuple[str, str], tuple[int, int]], ...]
    entities: frozenset[str]


class VaultWorld:
    """The static part of an episode: layout, names and hidden rules, made from the seed.

    Shared by every state of the episode. Equal worlds have equal seeds and parameters.
    It also holds the episode's memo tables (parsed commands, admissible actions), which
    never change what a state means.

    Args:
        seed: episode seed.
        params: episode parameters.

    Attributes:
        rooms: room ids; index 0 is the start, ``vault`` the vault.
        region: per room, the number of doors on the way to the vault behind it.
        doors, items, levers: the entities (see ``Door``, ``Item``, ``Lever``).
        spine: door indices on the way to the vault, in order.
        keypad: index of the vault door; ``code`` its code.
        rules: the hidden rules as sorted facts (``info["wm.rules"]``).
        slots: every ``(subject, relation)`` that can hold a fact; anchors index them.
    """

    def __init__(self, seed: int, params: VaultParams) -> None:
        self.seed = seed
        self.params = params
        self.paraphrase_bits = int(params.paraphrase_rate * 2**31)
        self.seed32 = _hash32(_hash32(seed & 0xFFFFFFFF) ^ (seed >> 32 & 0xFFFFFFFF))
        rng = _Rng(self.seed32, 0, salt=3)  # cheap: a reset is on the hot path too
        n = params.load
        low, high = params.delay

        # Layout: a row of rooms S0 .. Sn (Sn the vault), side rooms off S0 .. Sn-1.
        exits: list[dict[str, tuple[int, int]]] = [{}]
        region = [0]  # per room: how many doors on the way lie behind it
        links: list[tuple[int, int, str, int]] = []  # (a, b, direction a -> b, spine)

        def connect(a: int, spine: int) -> int:
            direction = rng.choice([d for d in DIRS if d not in exits[a]])
            b = len(exits)
            exits.append({OPPOSITE[direction]: (len(links), a)})
            exits[a][direction] = (len(links), b)
            region.append(spine or region[a])
            links.append((a, b, direction, spine))
            return b

        room = 0
        for i in range(1, n + 1):
            room = connect(room, i)
        vault = room
        for room in range(n):  # S0 .. Sn-1: rooms are numbered in the order made
            for _ in range(min(rng.choice((0, 1, 1, 2)), 4 - len(exits[room]))):
                connect(room, 0)
        names = rng.sample(ROOM_NAMES, len(exits) - 1)
        names.insert(vault, "vault")
        self.rooms = tuple(f"room:{name}" for name in names)

        # Where to put what a door needs: on its near side, preferably in a side room
        # ("elsewhere"); never in the vault.
        side = set(range(n + 1, len(exits)))
        near = [
            [r for r in range(len(exits)) if region[r] < b and r != vault] for b in range(n + 1)
        ]
        near_sides = [[r for r in rooms if r in side] for rooms in near]

        def place(before: int) -> int:
            sides = near_sides[before]
            return rng.choice(sides if sides and rng.random() < 0.7 else near[before])

        # Mechanisms on the way: keypad at the vault door, the others cycling through
        # a seeded order of the three kinds, so every load >= 4 has each of them.
        order = rng.sample(("key", "key_latch", "lever"), 3)
        mechanism = ["side", *(order[(i - 1) % 3] for i in range(1, n)), "keypad"]
        n_keys = sum(mechanism[spine] in ("key", "key_latch") for *_, spine in links)
        n_levers = sum(mechanism[spine] == "lever" for *_, spine in links)
        key_names = iter(rng.sample(KEY_NAMES, n_keys + 1 + n // 2))
        lever_names = iter(rng.sample(LEVER_NAMES, n_levers + n // 3))
        items: list[Item] = []
        levers: list[Lever] = []
        doors: list[Door] = []
        initial = []
        for i, ((a, b, direction, spine), name) in enumerate(
            zip(links, rng.sample(DOOR_NAMES, len(links)), strict=True)
        ):
            kind = mechanism[spine]
            key = spring = 0
            if kind in ("key", "key_latch"):
                key = len(items)
                items.append(Item(f"key:{next(key_names)}", "key", place(spine), ""))
            elif kind == "lever":
                lever = Lever(
                    f"lever:{next(lever_names)}", place(spine), i, low + rng.below(high - low + 1)
                )
                levers.append(lever)
            elif kind == "side" and rng.random() < P_SPRING:
                spring = low + rng.below(high - low + 1)
            blocks = kind == "key_latch"
            latch = blocks or (kind in ("key", "side") and rng.random() < P_SIDE_LATCH)
            lock = _LOCKS[kind]
            key = key if lock == "keyhole" else -1
            doors.append(
                Door(f"door:{name}", a, b, direction, lock, latch, blocks, key, spring, spine)
            )
            opened = kind == "side" and not spring and rng.random() < P_SIDE_OPEN
            initial.append(LOCKED if spine else OPEN if opened else CLOSED)
        for _ in range(1 + n // 2):  # keys that fit nothing
            items.append(Item(f"key:{next(key_names)}", "key", place(n), ""))
        codes = [1000 + rng.below(9000)]
        codes.append(1000 + (codes[0] - 1000 + 1 + rng.below(8999)) % 9000)  # another one
        note_names = rng.sample(NOTE_NAMES, 2)
        self.true_note = len(items)  # the real code, near the start; a decoy anywhere
        items.append(Item(f"note:{note_names[0]}", "note", place(1), str(codes[0])))
        items.append(Item(f"note:{note_names[1]}", "note", place(n), str(codes[1])))
        items.append(Item(f"treasure:{rng.choice(TREASURES)}", "treasure", vault, ""))
        for _ in range(n // 3):  # levers that work nothing
            levers.append(Lever(f"lever:{next(lever_names)}", place(n), -1, 0))

        self.region = tuple(region)
        self.vault = vault
        self.doors = tuple(doors)
        self.items = tuple(items)
        self.levers = tuple(levers)
        self.spine = tuple(range(n))  # spine door i-1 was made i-th
        self.keypad = n - 1
        self.code = items[self.true_note].code
        self.initial_doors = tuple(initial)
        self.initial_latches = tuple(0 if d.latch else -1 for d in doors)
        self.max_score = n + WIN_REWARD
        self._build_tables(exits)
        self.parsed: dict[str, tuple[Callable[..., int], tuple]] = {}
        self.said: dict[tuple, tuple[str, tuple[int, ...], frozenset[str]]] = {}
        self.known: dict[tuple, list[Fact]] = {}  # wm.state by _vector, for revisits
        self.admissible: dict[tuple, tuple[str, ...]] = {}

    def _build_tables(self, exits: list[dict[str, tuple[int, int]]]) -> None:
        doors, rooms = self.doors, self.rooms
        # Per room: its exits in direction order, with the message kind that describes each.
        self.exits = tuple(
            tuple(
                (e, *ex[e], f"exit_{e}_latch" if doors[ex[e][0]].latch else f"exit_{e}")
                for e in DIRS
                if e in ex
            )
            for ex in exits
        )
        self.exit_by_dir = tuple(exits)
        self.adjacent = tuple({door: other for door, other in ex.values()} for ex in exits)
        room_levers: list[list[int]] = [[] for _ in rooms]
        for k, lever in enumerate(self.levers):
            room_levers[lever.room].append(k)
        self.room_levers = tuple(map(tuple, room_levers))

        # Surface names and the admissible-action strings, made once.
        self.door_text = tuple(f"{d.id[5:]} door" for d in doors)
        self.item_text = tuple(
            it.id[9:] if it.kind == "treasure" else _item_text(it.id) for it in self.items
        )
        self.lever_text = tuple(f"{lv.id[6:]} lever" for lv in self.levers)
        door_actions = [
            (
                f"open {t}",
                f"close {t}",
                f"lift latch on {t}",
                f"lower latch on {t}",
                f"unlock {t} with ",
            )
            for t in self.door_text
        ]
        self.exit_actions = tuple(
            tuple((i, f"go {e}", door_actions[i], doors[i].lock) for e, i, _, _ in room_exits)
            for room_exits in self.exits
        )
        self.keys = tuple(j for j, it in enumerate(self.items) if it.kind == "key")
        self.notes = tuple(j for j, it in enumerate(self.items) if it.kind == "note")
        self.item_actions = tuple(
            (f"take {t}", f"drop {t}", f"read {t}" if it.kind == "note" else "")
            for t, it in zip(self.item_text, self.items, strict=True)
        )
        self.pull_actions = tuple(
            tuple(f"pull {self.lever_text[k]}" for k in ks) for ks in self.room_levers
        )

        # Fact slots: each (subject, relation) that can hold a fact, with how to read its
        # object from a state. Anchors (the step a fact was last stated) index them.
        slots: list[tuple[str, str]] = [("player", "at")]
        info: list[tuple[str, int, str | None]] = [("at", 0, None)]
        door_slots = []
        for i, d in enumerate(doors):
            k = len(slots)
            slots += [
                (d.id, OPPOSITE[d.direction]),
                (d.id, d.direction),
                (d.id, "state"),
                (d.id, "lock"),
            ]
            info += [
                ("side", i, rooms[d.a]),
                ("side", i, rooms[d.b]),
                ("state", i, None),
                ("lock", i, d.lock),
            ]
            if d.latch:
                slots.append((d.id, "latch"))
                info.append(("latch", i, None))
            door_slots.append((k, k + 1, k + 2, k + 4 if d.latch else -1))
        item_slots = []
        for j, item in enumerate(self.items):
            item_slots.append((len(slots), len(slots) + 1 if item.kind == "note" else -1))
            slots.append((item.id, "in"))
            info.append(("in", j, None))
            if item.kind == "note":
                slots.append((item.id, "code"))
                info.append(("code", j, item.code))
        lever_slots = []
        for k, lever in enumerate(self.levers):
            lever_slots.append((len(slots), len(slots) + 1))
            slots += [(lever.id, "in"), (lever.id, "state")]
            info += [("static", k, rooms[lever.room]), ("lever", k, None)]
        self.door_slots, self.item_slots, self.lever_slots = door_slots, item_slots, lever_slots
        self.views: list[_RoomView | None] = [None] * len(rooms)  # made on first visit
        self.slots = tuple(slots)
        self.slot_info = tuple(info)
        self.fact_index = {s: k for k, s in enumerate(slots)}

    def view(self, room: int) -> _RoomView:
        """Return (and keep) what describing ``room`` states; see ``_RoomView``."""
        rid = self.rooms[room]
        exits = []
        entities = {"player", rid}
        for _, i, other, kind in self.exits[room]:
            d, slots = self.doors[i], self.door_slots[i]
            head = (rid, d.id, self.rooms[other])
            stated = (*slots[:3], slots[2] + 1, *(slots[3:] if d.latch else ()))  # + lock
            exits.append((kind, i, head, d.lock, stated))
            entities.update(head)
        levers = []
        for k in self.room_levers[room]:
            levers.append((k, (self.levers[k].id, rid), self.lever_slots[k]))
            entities.add(self.levers[k].id)
        view = self.views[room] = _RoomView(rid, tuple(exits), tuple(levers), frozenset(entities))
        return view

    def say(self, key: tuple) -> tuple[str, tuple[int, ...], frozenset[str]]:
        """Return (and keep) a message's line, the fact slots it states and its entities.

        ``key`` is ``(kind, variant, values)``, values in the kind's slot order.
        """
        kind, _, values = key
        spec = _SPECS[kind]
        said = (
            _render(key),
            tuple(self.fact_index[values[pos], relation] for pos, relation in spec.claims),
            frozenset(values[pos] for pos in spec.entities),
        )
        if len(self.said) >= 100_000:
            self.said.clear()
        self.said[key] = said
        return said

    @cached_property
    def surface(self) -> dict[str, tuple[str, int]]:
        """Surface name -> ``(kind, index)`` of every door, item and lever (the parser's)."""
        names = {t: ("door", i) for i, t in enumerate(self.door_text)}
        names |= {
            t: (it.kind, j)
            for j, (t, it) in enumerate(zip(self.item_text, self.items, strict=True))
        }
        return names | {t: ("lever", k) for k, t in enumerate(self.lever_text)}

    @cached_property
    def rules(self) -> tuple[Fact, ...]:
        """The hidden rules, as sorted facts (``info["wm.rules"]``)."""
        rules = []
        for j, item in enumerate(self.items):
            if item.kind == "key":
                fits = [d.id for d in self.doors if d.key == j]
                rules.append(Fact(item.id, "fits", fits[0] if fits else "nothing"))
            elif item.kind == "note":
                opens = self.doors[self.keypad].id if j == self.true_note else "nothing"
                rules.append(Fact(item.id, "opens", opens))
        for d in self.doors:
            if d.latch:
                rules.append(Fact(d.id, "latch_blocks", "yes" if d.latch_blocks else "no"))
            if d.spring:
                rules.append(Fact(d.id, "shuts_after", str(d.spring)))
        for lever in self.levers:
            target = self.doors[lever.door].id if lever.door >= 0 else "nothing"
            rules.append(Fact(lever.id, "operates", target))
            if lever.door >= 0:
                rules.append(Fact(lever.id, "delay", str(lever.delay)))
        return tuple(sorted(rules))

    @cached_property
    def fact_plan(self) -> tuple[tuple[tuple[int, dict[int, Fact | None]], ...], tuple[int, ...]]:
        """Per fact slot, where its value sits in ``_vector`` and the fact each value means.

        Also the slots in sorted order. Built on the first ground-truth call.
        """
        n_doors, n_levers, n_items = len(self.doors), len(self.levers), len(self.items)
        base = {"at": 1, "state": 2, "latch": 2 + n_doors, "lever": 2 + 2 * n_doors}
        base |= {"in": base["lever"] + n_levers, "code": base["lever"] + n_levers + n_items}
        places = dict(enumerate(self.rooms)) | {HELD: "player"}
        names = {"state": DOOR_STATES, "latch": LATCH_STATES, "lever": LEVER_STATES}
        plan = []
        for (subject, relation), (what, i, static) in zip(self.slots, self.slot_info, strict=True):
            if what in ("at", "in"):
                table = {r: Fact(subject, relation, room) for r, room in places.items()}
            elif what in names:
                table = {v: Fact(subject, relation, name) for v, name in enumerate(names[what])}
            elif what == "code":
                table = {0: None, 1: Fact(subject, relation, static)}
            else:
                table = {0: Fact(subject, relation, static)}
            plan.append((base[what] + i if what in base else 0, table))
        # (subject, relation) pairs are unique, so facts listed in this order are sorted.
        order = tuple(sorted(range(len(self.slots)), key=self.slots.__getitem__))
        return tuple(plan), order

    def __eq__(self, other: object) -> bool:
        if isinstance(other, VaultWorld):
            return self.seed == other.seed and self.params == other.params
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.seed, self.params))

    def __reduce__(self) -> tuple:
        # Rebuilt from the seed: small to pickle, and the memo tables start empty.
        return (VaultWorld, (self.seed, self.params))

    def __repr__(self) -> str:
        return f"VaultWorld(seed={self.seed}, params={self.params})"


# --- state -----------------------------------------------------------------------------


class VaultState(NamedTuple):
    """The whole episode state at one step: an immutable value, the snapshot token.

    ``params`` and ``seed`` (properties) are the world's.

    Attributes:
        world: the layout and hidden rules (shared by the episode's states).
        step: steps taken since reset (0 at reset).
        player: index of the player's room.
        doors: per door, ``LOCKED`` (0), ``CLOSED`` (1) or ``OPEN`` (2).
        latches: per door, -1 (no latch), 0 (down) or 1 (up).
        levers: per lever, 0 (up) or 1 (down).
        where: per item, its room index or -1 (carried).
        read: bit j set once note j has been read.
        visited: bit r set once room r has been described in full.
        pending: scheduled mechanisms ``(due step, kind, door, value)``, sorted.
        opened: bit i set once spine door i has been opened (progress reward).
        evented: bit i set once door i was changed by a mechanism (confusion probes).
        mentioned: every entity id named in an observation so far.
        anchors: per fact slot, the step of the observation that last established it
            (-1: never).
        messages: this step's messages as ``(kind, variant, values)`` triples, in
            order; chatter, which names and states nothing, is left out.
        text: this step's observation.
        changes: this step's fact changes ``(phase, slot, old, new)``; phase 0 is the
            agent's command, 1 the mechanisms.
        actions: the admissible actions, sorted.
        reward: this step's reward.
        score: cumulative reward.
        won: whether the treasure has been taken.
    """

    world: VaultWorld
    step: int
    player: int
    doors: tuple[int, ...]
    latches: tuple[int, ...]
    levers: tuple[int, ...]
    where: tuple[int, ...]
    read: int
    visited: int
    pending: tuple[tuple[int, int, int, int], ...]
    opened: int
    evented: int
    mentioned: frozenset[str]
    anchors: tuple[int, ...]
    messages: tuple[tuple[str, int, tuple[str, ...]], ...]
    text: str
    changes: tuple[tuple[int, int, str | None, str], ...]
    actions: tuple[str, ...]
    reward: int
    score: int
    won: bool

    @property
    def params(self) -> VaultParams:
        """The episode parameters."""
        return self.world.params

    @property
    def seed(self) -> int:
        """The episode seed."""
        return self.world.seed


def state_hash(state: VaultState, vec: tuple[int, ...] | None = None) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, every changeable fact and the scheduled
    mechanisms: equal hashes mean the same world at the same step of the same episode,
    the transposition key for search. The observation, anchors and score are left out.
    """
    numbers = (state.world.seed & 0x7FFFFFFFFFFFFFFF, state.step, *(vec or _vector(state)))
    for event in state.pending:
        numbers += event
    packed = _STRUCTS.get(len(numbers)) or _STRUCTS.setdefault(
        len(numbers), struct.Struct(f"<{len(numbers)}q")
    )
    return hashlib.blake2b(packed.pack(*numbers), digest_size=8).hexdigest()


_STRUCTS: dict[int, struct.Struct] = {}


class _Draft:
    """Scratch copy of a state for one transition, frozen again by ``freeze``.

    Transitions stay pure and cheap: the per-entity tuples are replaced, never mutated,
    when something changes (rarely more than twice a step), and the anchors are copied
    only once a message states a fact.
    """

    __slots__ = (
        "anchors", "changes", "doors", "evented", "latches", "levers", "lines", "mentioned",
        "messages", "opened", "pending", "phase", "player", "read", "state", "step",
        "visited", "where", "won", "world", "x",
    )  # fmt: skip

    def __init__(self, state: VaultState, step: int) -> None:
        self.state = state
        self.world = state.world
        self.step = step
        # A 31-bit LCG started from a hash of (seed, step), as in _Rng and _start.
        x = ((state.world.seed32 ^ (step << 2) * 0x9E3779B1) & 0xFFFFFFFF) * 0x45D9F3B & 0xFFFFFFFF
        self.x = (x ^ (x >> 16)) & _M31
        self.player = state.player
        self.doors = state.doors
        self.latches = state.latches
        self.levers = state.levers
        self.where = state.where
        self.read = state.read
        self.visited = state.visited
        self.pending = state.pending
        self.opened = state.opened
        self.evented = state.evented
        self.mentioned = state.mentioned
        self.anchors: list[int] | None = None
        self.lines: list[str] = []
        self.messages: list[tuple[str, int, tuple[str, ...]]] = []
        self.changes: list[tuple[int, int, str | None, str]] = []
        self.phase = 0
        self.won = state.won

    def random(self) -> float:
        """Return a float in [0, 1) (``_Rng.random``, on the draft's own generator)."""
        self.x = x = (self.x * 1103515245 + 12345) & _M31
        return x * 4.656612873077393e-10

    def below(self, n: int) -> int:
        """Return an int in [0, n) (``_Rng.below``, on the draft's own generator)."""
        self.x = x = (self.x * 1103515245 + 12345) & _M31
        return (x * n) >> 31

    def variant(self, variants: int) -> int:
        """Pick a template: the canonical one, or with the paraphrase rate another."""
        self.x = u = (self.x * 1103515245 + 12345) & _M31
        rate = self.world.paraphrase_bits
        # u is uniform below rate when it passes: reuse it to pick the paraphrase.
        return 1 + u * (variants - 1) // rate if u < rate else 0

    def say(self, kind: str, *values: str) -> None:
        """Add a message; values in the slot order of the kind's first template."""
        spec = _SPECS[kind]
        if spec.variants > 1:  # self.variant(spec.variants), inlined: say is the hot path
            self.x = u = (self.x * 1103515245 + 12345) & _M31
            rate = self.world.paraphrase_bits
            key = (kind, 1 + u * (spec.variants - 1) // rate if u < rate else 0, values)
        else:
            key = (kind, 0, values)
        line, slots, names = self.world.said.get(key) or self.world.say(key)
        self.lines.append(line)
        self.messages.append(key)
        if slots:
            anchors = self.anchors
            if anchors is None:
                anchors = self.anchors = list(self.state.anchors)
            step = self.step
            for k in slots:
                anchors[k] = step
        if names and not names <= self.mentioned:
            self.mentioned = self.mentioned | names

    def anchor_of(self, slot: int) -> int:
        return (self.state.anchors if self.anchors is None else self.anchors)[slot]

    def anchor(self, slot: int, step: int) -> None:
        if self.anchors is None:
            self.anchors = list(self.state.anchors)
        self.anchors[slot] = step

    def change(self, slot: int, old: str | None, new: str) -> None:
        self.changes.append((self.phase, slot, old, new))

    def set_door(self, i: int, value: int) -> None:
        self.change(self.world.door_slots[i][2], DOOR_STATES[self.doors[i]], DOOR_STATES[value])
        self.doors = _put(self.doors, i, value)

    def schedule(self, due: int, kind: int, door: int, value: int) -> None:
        self.pending = tuple(sorted((*self.pending, (due, kind, door, value))))

    def describe(self, room: int) -> None:
        """State everything in ``room``: the player, its exits, levers and items.

        The hot path of looking around, so the exits and levers go through a plan made
        once per room (``VaultWorld.views``) rather than through ``say``.
        """
        w, step = self.world, self.step
        view = w.views[room] or w.view(room)
        self.say("at", "player", view.room)
        if self.anchors is None:
            self.anchors = list(self.state.anchors)
        anchors, lines, messages = self.anchors, self.lines, self.messages
        doors, latches = self.doors, self.latches
        for kind, i, head, lock, slots in view.exits:
            if latches[i] >= 0:
                values = (*head, DOOR_STATES[doors[i]], lock, LATCH_STATES[latches[i]])
            else:
                values = (*head, DOOR_STATES[doors[i]], lock)
            key = (kind, self.variant(3), values)
            lines.append((w.said.get(key) or w.say(key))[0])
            messages.append(key)
            for k in slots:
                anchors[k] = step
        for k, head, slots in view.levers:
            key = ("lever_here", self.variant(3), (*head, LEVER_STATES[self.levers[k]]))
            lines.append((w.said.get(key) or w.say(key))[0])
            messages.append(key)
            anchors[slots[0]] = anchors[slots[1]] = step
        if not view.entities <= self.mentioned:
            self.mentioned = self.mentioned | view.entities
        for j, place in enumerate(self.where):
            if place == room:
                item = w.items[j]
                if item.kind == "treasure":
                    self.say("treasure_here", view.room, item.id)
                else:
                    self.say("item_here", item.id, view.room)
        self.visited |= 1 << room

    def chatter(self) -> None:
        """Insert the distractor lines: they state nothing, so no message is kept."""
        lines, x = self.lines, self.x
        for _ in range(self.world.params.distractors):
            # One draw picks the line and where it goes (never before the reply).
            x = (x * 1103515245 + 12345) & _M31
            pos, variant = divmod((x * _CHATTER * len(lines)) >> 31, _CHATTER)
            lines.insert(pos + 1, _CHATTER_LINES[variant])
        self.x = x

    def freeze(self, reward: int) -> VaultState:
        s, w = self.state, self.world
        if self.changes or s.step == self.step:
            actions = _admissible(w, self.player, self.doors, self.latches, self.where, self.read)
        else:
            actions = s.actions  # nothing changed, so neither did what one can do
        anchors = s.anchors if self.anchors is None else tuple(self.anchors)
        return VaultState(
            w, self.step, self.player, self.doors, self.latches, self.levers, self.where,
            self.read, self.visited, self.pending, self.opened, self.evented, self.mentioned,
            anchors, tuple(self.messages), "\n".join(self.lines), tuple(self.changes),
            actions, reward, s.score + reward, self.won,
        )  # fmt: skip


def _put(values: tuple[int, ...], i: int, value: int) -> tuple[int, ...]:
    return (*values[:i], value, *values[i + 1 :])


# --- commands --------------------------------------------------------------------------

_BAD = ("not_understood",)
_NO_SUCH = ("no_such",)
_CANNOT = ("cannot",)
_SIMPLE = {"look": ("look",), "l": ("look",), "inventory": ("inventory",), "inv": ("inventory",)}
_SIMPLE |= {"i": ("inventory",), "wait": ("wait",), "z": ("wait",)}
_SIMPLE |= {word: ("go", d) for word, d in _DIR_WORDS.items()}
_CARRIED = ("key", "note", "treasure")
_THING_VERBS = {
    "take": _CARRIED,
    "get": _CARRIED,
    "drop": _CARRIED,
    "open": ("door",),
    "close": ("door",),
    "pull": ("lever",),
    "read": ("note",),
}


def _thing(world: VaultWorld, words: list[str], kinds: tuple[str, ...]) -> tuple:
    """Return ``(kind, index)`` of the thing named, or a one-word failure."""
    if words and words[0] == "the":
        words = words[1:]
    found = world.surface.get(" ".join(words))
    if found is None:
        return _NO_SUCH
    return found if found[0] in kinds else _CANNOT


def _parse(world: VaultWorld, action: str) -> tuple:
    """Turn a command into ``(verb, *arguments)`` with entity indices; no regexes."""
    words = action.lower().split()
    if not words:
        return _BAD
    verb, rest = words[0], words[1:]
    if not rest:
        return _SIMPLE.get(verb, _BAD)
    if verb == "go" and len(rest) == 1:
        return ("go", _DIR_WORDS[rest[0]]) if rest[0] in _DIR_WORDS else _BAD
    if verb == "pick" and rest[0] == "up":
        verb, rest = "take", rest[1:]
    if verb in _THING_VERBS:
        found = _thing(world, rest, _THING_VERBS[verb])
        return found if len(found) == 1 else ("take" if verb == "get" else verb, found[1])
    if verb == "unlock" and "with" in rest:
        cut = rest.index("with")
        door = _thing(world, rest[:cut], ("door",))
        key = _thing(world, rest[cut + 1 :], ("key",))
        for found in (door, key):
            if len(found) == 1:
                return found
        return ("unlock", door[1], key[1])
    if verb in ("lift", "lower") and rest[0] == "latch":
        up = int(verb == "lift")
        if len(rest) == 1:
            return ("latch", -1, up)
        if rest[1] not in ("on", "of"):
            return _BAD
        door = _thing(world, rest[2:], ("door",))
        return door if len(door) == 1 else ("latch", door[1], up)
    if verb in ("enter", "type"):
        if rest[0] == "code":
            rest = rest[1:]
        if len(rest) == 1 and rest[0].isdigit() and rest[0].isascii():
            return ("code", rest[0])
    return _BAD


def _command(world: VaultWorld, action: Any) -> tuple[Callable[..., int], tuple]:
    """Return the handler of ``action`` and its arguments, memoised per episode."""
    try:
        return world.parsed[action]
    except (KeyError, TypeError):  # new, or not even hashable
        pass
    verb, *args = _parse(world, action) if isinstance(action, str) else _BAD
    found = (_HANDLERS[verb], tuple(args))
    if isinstance(action, str) and len(world.parsed) < 100_000:  # junk stays bounded
        world.parsed[action] = found
    return found


# Each handler applies one verb to the draft and returns its reward.


def _look(d: _Draft) -> int:
    d.describe(d.player)
    return 0


def _wait(d: _Draft) -> int:
    d.say("waited")
    return 0


def _inventory(d: _Draft) -> int:
    held = [j for j, where in enumerate(d.where) if where == HELD]
    for j in held:
        item = d.world.items[j]
        d.say("carrying_treasure" if item.kind == "treasure" else "carrying", item.id)
    if not held:
        d.say("empty_handed")
    return 0


def _reply(kind: str) -> Callable[[_Draft], int]:
    def handle(d: _Draft) -> int:
        d.say(kind)
        return 0

    return handle


def _go(d: _Draft, direction: str) -> int:
    w = d.world
    found = w.exit_by_dir[d.player].get(direction)
    if found is None:
        d.say("no_exit")
        return 0
    door, other = found
    if d.doors[door] != OPEN:
        d.say("door_state", w.doors[door].id, DOOR_STATES[d.doors[door]])
        return 0
    d.say("went", direction, w.doors[door].id)
    d.change(0, w.rooms[d.player], w.rooms[other])
    d.player = other
    if d.visited >> other & 1:
        d.say("back", "player", w.rooms[other])
    else:
        d.describe(other)
    return 0


def _take(d: _Draft, j: int) -> int:
    w = d.world
    item = w.items[j]
    if d.where[j] == HELD:
        d.say("carrying_treasure" if item.kind == "treasure" else "already_have", item.id)
        return 0
    if d.where[j] != d.player:
        d.say("no_such")
        return 0
    d.change(w.item_slots[j][0], w.rooms[d.where[j]], "player")
    d.where = _put(d.where, j, HELD)
    if item.kind == "treasure":
        d.say("treasure_taken", item.id)
        if not d.won:
            d.won = True
            return WIN_REWARD
        return 0
    d.say("taken", item.id)
    return 0


def _drop(d: _Draft, j: int) -> int:
    w, room = d.world, d.player
    item = w.items[j]
    if d.where[j] != HELD:
        d.say("not_carrying")
        return 0
    d.where = _put(d.where, j, room)
    d.change(w.item_slots[j][0], "player", w.rooms[room])
    d.say("treasure_dropped" if item.kind == "treasure" else "dropped", item.id, w.rooms[room])
    return 0


def _open(d: _Draft, i: int) -> int:
    door, state = d.world.doors[i], d.doors[i]
    if i not in d.world.adjacent[d.player]:
        d.say("no_such")
        return 0
    if state != CLOSED:
        d.say("door_state", door.id, DOOR_STATES[state])
        return 0
    if door.latch_blocks and d.latches[i] == 0:
        d.say("held_shut", door.id)
        return 0
    d.set_door(i, OPEN)
    d.say("opened", door.id)
    if door.spring:
        d.pending = tuple(p for p in d.pending if p[1] != _SPRING or p[2] != i)
        d.schedule(d.step + door.spring, _SPRING, i, 0)
    if door.spine and not d.opened >> i & 1:
        d.opened |= 1 << i
        return 1
    return 0


def _close(d: _Draft, i: int) -> int:
    door, state = d.world.doors[i], d.doors[i]
    if i not in d.world.adjacent[d.player]:
        d.say("no_such")
    elif state != OPEN:
        d.say("door_state", door.id, DOOR_STATES[state])
    else:
        d.set_door(i, CLOSED)
        d.say("closed", door.id)
        if door.spring:
            d.pending = tuple(p for p in d.pending if p[1] != _SPRING or p[2] != i)
    return 0


def _unlock(d: _Draft, i: int, j: int) -> int:
    w = d.world
    door, key = w.doors[i], w.items[j]
    if i not in w.adjacent[d.player]:
        d.say("no_such")
    elif d.where[j] != HELD:
        d.say("not_carrying")
    elif door.lock != "keyhole":
        d.say("no_keyhole", door.id)
    elif d.doors[i] != LOCKED:
        d.say("door_state", door.id, DOOR_STATES[d.doors[i]])
    elif door.key == j:
        d.set_door(i, CLOSED)
        d.say("unlocked", key.id, door.id)
    else:
        d.say("wrong_key", key.id, door.id)
    return 0


def _latch(d: _Draft, i: int, up: int) -> int:
    w = d.world
    if i < 0:
        here = [k for k in w.adjacent[d.player] if d.latches[k] >= 0]
        if len(here) != 1:
            d.say("which_latch" if here else "no_latch_here")
            return 0
        i = here[0]
    door = w.doors[i]
    if i not in w.adjacent[d.player]:
        d.say("no_such")
    elif d.latches[i] < 0:
        d.say("no_latch", door.id)
    elif d.latches[i] == up:
        d.say("latch_already", door.id, LATCH_STATES[up])
    else:
        d.change(w.door_slots[i][3], LATCH_STATES[d.latches[i]], LATCH_STATES[up])
        d.latches = _put(d.latches, i, up)
        d.say("latch_lifted" if up else "latch_lowered", door.id)
    return 0


def _pull(d: _Draft, k: int) -> int:
    w = d.world
    lever = w.levers[k]
    if lever.room != d.player:
        d.say("no_such")
        return 0
    new = 1 - d.levers[k]
    d.change(w.lever_slots[k][1], LEVER_STATES[d.levers[k]], LEVER_STATES[new])
    d.levers = _put(d.levers, k, new)
    d.say("pulled", lever.id, LEVER_STATES[new])
    if lever.door >= 0:
        d.schedule(d.step + lever.delay, _BAR, lever.door, new)
    return 0


def _read(d: _Draft, j: int) -> int:
    w = d.world
    if d.where[j] != d.player and d.where[j] != HELD:
        d.say("no_such")
        return 0
    item = w.items[j]
    if not d.read >> j & 1:
        d.read |= 1 << j
        d.change(w.item_slots[j][1], None, item.code)
    d.say("read", item.id, item.code)
    return 0


def _code(d: _Draft, code: str) -> int:
    w = d.world
    i = w.keypad
    if i not in w.adjacent[d.player]:
        d.say("no_keypad")
    elif d.doors[i] != LOCKED:
        d.say("door_state", w.doors[i].id, DOOR_STATES[d.doors[i]])
    elif code == w.code:
        d.set_door(i, CLOSED)
        d.say("code_ok", w.doors[i].id)
    else:
        d.say("code_wrong")
    return 0


_HANDLERS: dict[str, Callable[..., int]] = {
    "look": _look,
    "wait": _wait,
    "inventory": _inventory,
    "go": _go,
    "take": _take,
    "drop": _drop,
    "open": _open,
    "close": _close,
    "unlock": _unlock,
    "latch": _latch,
    "pull": _pull,
    "read": _read,
    "code": _code,
    "no_such": _reply("no_such"),
    "cannot": _reply("cannot"),
    "not_understood": _reply("not_understood"),
}


def _events(d: _Draft) -> None:
    """Run the mechanisms due now; say each change to a door the agent has seen."""
    w, step = d.world, d.step
    d.phase = 1
    while d.pending and d.pending[0][0] <= step:
        _, kind, i, value = d.pending[0]
        d.pending = d.pending[1:]
        state = d.doors[i]
        if kind == _SPRING:
            if state != OPEN:
                continue
            new, message = CLOSED, "sprung"
        elif value == 1 and state == LOCKED:  # lever down: the bar lifts
            new, message = CLOSED, "unbarred"
        elif value == 0 and state != LOCKED:  # lever up: the bar drops, shutting the door
            new, message = LOCKED, "barred"
        else:
            continue
        d.set_door(i, new)
        d.evented |= 1 << i
        door = w.doors[i]
        if door.id not in d.mentioned:
            continue  # unseen doors change silently; their first description says how they are
        if d.random() < w.params.indirection:
            side = d.below(2)
            room = door.a if side == 0 else door.b
            relation = OPPOSITE[door.direction] if side == 0 else door.direction
            d.say(f"{message}_{OPPOSITE[relation]}", w.rooms[room])
            # Reading this needs the door's side, stated when the door was last described.
            slots = w.door_slots[i]
            d.anchor(slots[2], d.anchor_of(slots[side]))
        else:
            d.say(message, door.id)


# --- the pure core ---------------------------------------------------------------------


def _max_lines(p: VaultParams) -> int:
    # Reply + move + description (player, four exits, levers, items) or inventory, one
    # event per door, chatter; generous headroom.
    n = p.load
    doors, items, levers = 3 * n + 1, 2 * n + 6, n + n // 3
    return 8 + 2 * doors + items + levers + p.distractors


class VaultFuncEnv(CoreDefaults, FuncEnv[VaultState, str, str, int, bool, None, VaultParams]):
    """The Vault family as pure functions over an immutable ``VaultState``.

    ``transition(state, action)`` is deterministic: its randomness is drawn from the
    episode seed carried in the state and the step number, so the same code serves as
    the planner's simulator and the state value is the snapshot. The ``rng`` and
    ``params`` arguments of the ``FuncEnv`` signatures are accepted but only ``initial``
    uses them.

    Args:
        params: the episode parameters; defaults to ``VaultParams()``.
    """

    def __init__(self, params: VaultParams | None = None) -> None:
        self._params = params or VaultParams()
        super().__init__()
        self.observation_space = spaces.Text(
            max_length=_LINE_MAX * _max_lines(self._params),
            min_length=1,
            charset=string.ascii_letters + string.digits + string.punctuation + " \n",
        )
        self.action_space = spaces.Text(
            max_length=512,
            min_length=0,
            charset=string.ascii_letters + string.digits + string.punctuation + " ",
        )

    def initial(self, rng: Any, params: VaultParams | None = None) -> VaultState:
        """Return the state at reset: a fresh house, the player at its entrance, step 0.

        Args:
            rng: a ``numpy.random.Generator`` (one draw makes the episode seed) or an int
                used as the episode seed directly.
            params: overrides the core's parameters for this episode.
        """
        params = params or self._params
        seed = int(rng.integers(2**62)) if hasattr(rng, "integers") else int(rng)
        w = VaultWorld(seed, params)
        blank = VaultState(
            w, 0, 0, w.initial_doors, w.initial_latches, (0,) * len(w.levers),
            tuple(item.home for item in w.items), 0, 0, (), 0, 0, frozenset(),
            (-1,) * len(w.slots), (), "", (), (), 0, 0, False,
        )  # fmt: skip
        d = _Draft(blank, 0)
        d.say("intro")
        d.describe(0)
        d.chatter()
        return d.freeze(0)

    def transition(
        self, state: VaultState, action: str, rng: Any = None, params: Any = None
    ) -> VaultState:
        """Apply the agent's command, then the mechanisms due at the next step.

        A command that cannot be carried out gets a reply and changes nothing, but the
        move is spent and the mechanisms still run.
        """
        d = _Draft(state, state.step + 1)
        handler, args = _command(state.world, action)
        reward = handler(d, *args)
        if d.pending and d.pending[0][0] <= d.step:
            _events(d)
        d.chatter()
        return d.freeze(reward)

    def terminal(self, state: VaultState, rng: Any = None, params: Any = None) -> bool:
        """Return True once the treasure has been taken."""
        return state.won

    def state_info(self, state: VaultState, params: Any = None) -> dict[str, Any]:
        """Return the agent-visible info: admissible actions, score, max_score, moves."""
        return {
            "admissible_actions": list(state.actions),
            "score": state.score,
            "max_score": state.world.max_score,
            "moves": state.step,
        }

    def truth(self, state: VaultState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers).

        Besides the common keys, ``wm.rules`` lists the hidden rules (sorted facts).
        """
        action, event = _deltas(state)
        vec = _vector(state)
        return truth_info(
            state=facts(state, vec),
            action=action,
            event=event,
            probes=_probes(state, vec),
            state_hash=state_hash(state, vec),
            mentioned=[v[p] for kind, _, v in state.messages for p in _SPECS[kind].entities],
            rules=list(state.world.rules),
        )

    def probes(self, state: VaultState) -> list[Probe]:
        """Return the probes due at ``state``."""
        return list(_probes(state))


def _admissible(
    w: VaultWorld,
    room: int,
    doors: tuple[int, ...],
    latches: tuple[int, ...],
    where: tuple[int, ...],
    read: int,
) -> tuple[str, ...]:
    """Return the commands that apply, sorted (memoised per episode).

    ``look``, ``inventory``, ``wait``; ``go`` through each open door here and ``open`` or
    ``close`` each door here; ``unlock <door> with <key>`` for each locked keyhole door
    here and each carried key; ``lift``/``lower latch on <door>``; ``enter code <n>`` at
    the locked keypad for each code read so far; ``pull`` each lever here; ``take``,
    ``drop`` and ``read`` what is here or carried.
    """
    key = (room, doors, latches, where, read)
    found = w.admissible.get(key)
    if found is not None:
        return found
    actions = ["inventory", "look", "wait"]
    for i, go, names, lock in w.exit_actions[room]:
        state = doors[i]
        if state == OPEN:
            actions += (go, names[1])
        else:
            actions.append(names[0])
            if state == LOCKED and lock == "keyhole" and HELD in where:
                actions += [names[4] + w.item_text[j] for j in w.keys if where[j] == HELD]
            elif state == LOCKED and lock == "keypad" and read:
                actions += [f"enter code {w.items[j].code}" for j in w.notes if read >> j & 1]
        if latches[i] >= 0:
            actions.append(names[2 + latches[i]])  # down: lift it; up: lower it
    actions += w.pull_actions[room]
    if room in where or HELD in where:
        for j, place in enumerate(where):
            if place in (room, HELD):
                take, drop, read_it = w.item_actions[j]
                actions.append(take if place == room else drop)
                if read_it:
                    actions.append(read_it)
    found = tuple(sorted(actions))
    if len(w.admissible) >= 50_000:
        w.admissible.clear()
    w.admissible[key] = found
    return found


def _vector(state: VaultState) -> tuple[int, ...]:
    read = state.read
    return (
        0, state.player, *state.doors, *state.latches, *state.levers, *state.where,
        *[read >> j & 1 for j in range(len(state.where))],
    )  # fmt: skip


def facts(state: VaultState, vec: tuple[int, ...] | None = None) -> list[Fact]:
    """Return the true facts of ``state``, sorted (``info["wm.state"]``); a fresh list."""
    w = state.world
    vec = vec or _vector(state)
    found = w.known.get(vec)
    if found is None:
        plan, order = w.fact_plan
        found = [f for k in order if (f := plan[k][1][vec[plan[k][0]]]) is not None]
        if len(w.known) >= 20_000:
            w.known.clear()
        w.known[vec] = found
    return found.copy()


def _deltas(state: VaultState) -> tuple[Delta, Delta]:
    if not state.changes:
        return _NO_CHANGE, _NO_CHANGE
    slots = state.world.slots
    out = []
    for phase in (0, 1):
        net: dict[int, list] = {}
        for ph, slot, old, new in state.changes:
            if ph == phase:
                net.setdefault(slot, [old, new])[1] = new
        added = sorted(Fact(*slots[k], new) for k, (old, new) in net.items() if new != old)
        removed = sorted(
            Fact(*slots[k], old) for k, (old, new) in net.items() if new != old and old is not None
        )
        out.append(Delta(tuple(added), tuple(removed)))
    return out[0], out[1]


_NO_CHANGE = Delta()


def _probes(state: VaultState, vec: tuple[int, ...] | None = None) -> tuple[Probe, ...]:
    """Questions due now about named entities: drawn from a hash of (seed, step)."""
    w, mentioned = state.world, state.mentioned
    probes: dict[int, Probe] = {}
    # Decision point: at the locked keypad, the code read long ago is what matters.
    note = w.true_note
    at_keypad = (
        w.keypad in w.adjacent[state.player]
        and state.doors[w.keypad] == LOCKED
        and state.read >> note & 1
    )
    rng = _Rng(state.world.seed32, state.step, salt=1)
    due = rng.random() < state.params.probe_rate
    if not (due or at_keypad):
        return ()
    plan = w.fact_plan[0]
    vec = vec or _vector(state)

    def ask(slot: int, kind: str) -> None:
        pos, table = plan[slot]
        fact = table[vec[pos]]
        if fact is not None and slot not in probes:
            probes[slot] = Probe(*fact, state.anchors[slot], kind)

    if at_keypad:
        ask(w.item_slots[note][1], "breakage")
    if not due:
        return tuple(probes.values())
    for _ in range(1 + (rng.random() < 0.5)):
        kind = ("drift", "breakage", "confusion")[rng.below(3)]
        pool: list[int] = []
        if kind == "confusion":
            pool = [
                w.door_slots[i][2]
                for i, d in enumerate(w.doors)
                if state.evented >> i & 1 and d.id in mentioned
            ]
        elif kind == "breakage":
            pool = [w.item_slots[j][1] for j in range(len(w.items)) if state.read >> j & 1]
            if not pool or rng.random() < 0.3:
                # The door sides: stated once, when a room was last described.
                pool += [
                    w.door_slots[i][rng.below(2)]
                    for i, d in enumerate(w.doors)
                    if d.id in mentioned
                ]
        if not pool:
            kind = "drift"
            pool = [w.item_slots[j][0] for j, it in enumerate(w.items) if it.id in mentioned]
            pool += [w.lever_slots[k][1] for k, lv in enumerate(w.levers) if lv.id in mentioned]
            pool += [w.door_slots[i][2] for i, d in enumerate(w.doors) if d.id in mentioned]
            pool.append(0)
        ask(pool[rng.below(len(pool))], kind)
    return tuple(probes.values())


# --- the Gymnasium shell ---------------------------------------------------------------


class VaultEnv(DiagnosticEnv):
    """``wmkit/Vault-v0``: the shared diagnostic shell over ``VaultFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ground truth adds ``wm.rules``: the
    episode's hidden rules as sorted facts. ``terminated`` is True once the treasure is
    taken; the episode is truncated at ``horizon``. ``VaultEnv.reader`` is the family's
    perfect reader, ``read``.

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        horizon: steps per episode, 20..1000 (default 200).
        load: locked doors on the way to the vault, 1..10 (default 4).
        paraphrase_rate: probability a message uses a non-canonical template, 0..1.
        distractors: chatter lines per step, 0..50.
        indirection: probability a mechanism event names its door by where it is.
        probe_rate: probability that probes are due at a step, 0..1.
        delay: ``(low, high)`` steps for lever delays and spring doors, 1..50.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = VaultFuncEnv
    params_class = VaultParams
    reader = staticmethod(read)
