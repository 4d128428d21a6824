"""What the Parcel family says, declared once: the renderer and the reader share it.

The pools entities are drawn from, the slot types and message kinds (``TEXT``), the step
path's renderer compiled from them (``VOICE``), the reader (``read``), and the surface
forms of every pooled value, made once at import.
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

from wmkit.envs.diagnostic.text import (
    ClaimSpec,
    MessageKind,
    SlotType,
    TextBook,
    Voice,
    title_words,
)
from wmkit.world.types import Claim

__all__ = [
    "ADDRESSES",
    "ADDRESS_BY_DRAW",
    "ADDRESS_TEXT",
    "CHATTER",
    "HUBS",
    "ID_CAPACITY",
    "PAIR_CAPACITY",
    "PERSONS",
    "PERSON_SET",
    "SLOT_TYPES",
    "STATUSES",
    "STREETS",
    "SUFFIXES",
    "SURFACE",
    "TEXT",
    "TRACKING_IDS",
    "VOICE",
    "read",
]

# --- pools -----------------------------------------------------------------------------


def _pool(prefix: str, words: str) -> tuple[str, ...]:
    return tuple(prefix + word for word in words.split())


PERSONS = _pool(
    "person:",
    (
        "ada abel amir ann arlo bea bella ben bo bram cara chen cleo cyd dara dev dina dora "
        "eli emil eva ezra fay femi finn flo gil greta gus gwen hal hana hope hugo ida ines "
        "iris ivo jade jai joel jon kai kate kira kofi lars lena leo luis maya mei milo mina "
        "ned nia nils nora olga omar oona otto pavel pete pia priya quinn rafa raj rhea rosa "
        "sami sara saul sven tara ted tess tomas ugo uma una uri val vera vic vik wade wanda "
        "will wren xena yara yuki yusuf yves zak zane zia zoe noor liv"
    ),
)
PERSON_SET = frozenset(PERSONS)
HUBS = _pool(
    "hub:",
    "lyon porto leeds graz turin ghent malmo bremen split cork brno basel lille krakow "
    "bilbao aarhus utrecht seville dresden tallinn",
)
STREETS = _pool(
    "",
    "elm oak pine birch cedar maple willow ash mill church station market bridge river park "
    "high king queen castle garden orchard meadow harbor hill lake spring forest chapel north "
    "south",
)
SUFFIXES = ("st", "rd", "ave", "ln", "way")

ID_CAPACITY = 9000  # px-1000 .. px-9999
PAIR_CAPACITY = len(PERSONS) * (len(PERSONS) - 1)  # ordered (sender, receiver) pairs

# --- text ------------------------------------------------------------------------------

_PARCEL = SlotType(
    r"PX-\d{4}", lambda c: c.removeprefix("parcel:").upper(), lambda t: "parcel:" + t.lower(), True
)
_PERSON = SlotType(
    r"[A-Z][a-z]+",
    lambda c: c.removeprefix("person:").capitalize(),
    lambda t: "person:" + t.lower(),
    True,
)
_HUB = SlotType(
    r"[A-Z][a-z]+",
    lambda c: c.removeprefix("hub:").capitalize(),
    lambda t: "hub:" + t.lower(),
    True,
)
_ADDR = SlotType(r"\d{1,4}(?: [A-Z][a-z]*)+", title_words, str.lower)
_STATUS = SlotType(
    r"booked|in transit|delayed|delivered",
    lambda c: c.replace("_", " "),
    lambda t: t.replace(" ", "_"),
)
SLOT_TYPES = {
    "parcel": _PARCEL,
    "sender": _PERSON,
    "receiver": _PERSON,
    "person": _PERSON,
    "hub": _HUB,
    "origin": _HUB,
    "address": _ADDR,
    "new": _ADDR,
    "old": _ADDR,
    "status": _STATUS,
}

_DESC = (("sender", "sender"), ("receiver", "receiver"))  # "the parcel Ann sent to Bo"


def _kind(name: str, templates: str, *claims: ClaimSpec) -> MessageKind:
    return MessageKind(name, tuple(t.strip() for t in templates.strip().split("\n")), claims)


def _says(relation: str, slot: str | None = None, value: str | None = None) -> ClaimSpec:
    return ClaimSpec("parcel", relation, slot, value)


KINDS = (
    _kind(
        "intro",
        """
        Parcel desk log, shift start.
        The parcel desk opens for the day.
        Morning at the parcel desk.
        """,
    ),
    _kind(
        "booking",
        """
        New booking {parcel}: {sender} is sending a parcel to {receiver} at {address}, dropped off at the {origin} hub.
        {sender} dropped off {parcel} at our {origin} depot, addressed to {receiver}, {address}.
        Booked: {parcel}, from {sender} to {receiver} ({address}), received at {origin}.
        {parcel} was booked in at {origin}: sender {sender}, recipient {receiver}, delivery address {address}.
        """,  # noqa: E501
        _says("sender", "sender"),
        _says("receiver", "receiver"),
        _says("address", "address"),
        _says("location", "origin"),
        _says("status", value="booked"),
    ),
    _kind(
        "scan",
        """
        Scan: {parcel} arrived at the {hub} hub and is in transit.
        {parcel} was scanned in at {hub}, still in transit.
        Tracking update: {parcel} is in transit and now at {hub}.
        {parcel} has reached {hub}; it is moving along.
        """,
        _says("location", "hub"),
        _says("status", value="in_transit"),
    ),
    _kind(
        "delay",
        """
        {parcel} is delayed at the {hub} hub.
        Delay notice: {parcel} is held up at {hub}.
        {parcel} missed its connection at {hub} and is running late.
        """,
        _says("location", "hub"),
        _says("status", value="delayed"),
    ),
    _kind(
        "delivered",
        """
        {parcel} was delivered to {address}.
        Delivered: {parcel}, left at {address}.
        {parcel} has arrived at its destination, {address}.
        """,
        _says("address", "address"),
        _says("status", value="delivered"),
    ),
    _kind(
        "request_id",
        """
        A customer asks us to reroute {parcel} to {new}.
        Request on {parcel}: please deliver it to {new} instead.
        Please send {parcel} on to {new}, writes a customer.
        """,
        _says("requested_address", "new"),
    ),
    _kind(
        "request_desc",
        """
        {sender} writes in: the parcel I sent to {receiver} should go to {new} instead.
        {receiver} called: the parcel {sender} is sending them must be redirected to {new}.
        Could the parcel from {sender} to {receiver} go to {new} instead? asks a customer.
        {sender} asks us to send the package for {receiver} on to {new}.
        """,
        ClaimSpec(_DESC, "requested_address", "new"),
    ),
    _kind(
        "recorrect_id",
        """
        Correction on {parcel}: the new address is {new}, not {old}.
        The customer for {parcel} got the address wrong: make that {new}, not {old}.
        """,
        _says("requested_address", "new"),
    ),
    _kind(
        "recorrect_desc",
        """
        {sender} again: sorry, for the parcel to {receiver} I meant {new}, not {old}.
        {receiver} corrects the earlier request about the parcel from {sender}: it should be {new}, not {old}.
        """,  # noqa: E501
        ClaimSpec(_DESC, "requested_address", "new"),
    ),
    _kind(
        "fix_address",
        """
        Depot correction: the address on {parcel} was entered wrongly; it is {address}.
        Address fix for {parcel}: it goes to {address}.
        Our records for {parcel} had a typo; the delivery address is {address}.
        """,
        _says("address", "address"),
    ),
    # Replies to the agent's command.
    _kind(
        "tracked",
        """
        Tracking {parcel}: {status}, last seen at {hub}, addressed to {address}.
        {parcel} is {status}; last scan at {hub}; destination {address}.
        """,
        _says("status", "status"),
        _says("location", "hub"),
        _says("address", "address"),
    ),
    _kind(
        "rerouted",
        """
        Done: {parcel} is now headed to {address}.
        Rerouted {parcel} to {address}.
        {parcel} will now go to {address}.
        """,
        _says("address", "address"),
    ),
    _kind(
        "same_address",
        """
        {parcel} already goes to {address}; nothing changed.
        No change: {parcel} is already addressed to {address}.
        """,
        _says("address", "address"),
    ),
    _kind(
        "too_late",
        """
        Too late: {parcel} was already delivered.
        {parcel} has been delivered already; nothing more can be done.
        """,
        _says("status", value="delivered"),
    ),
    _kind(
        "escalated",
        """
        Escalated {parcel}: the carrier has it moving again from {hub}.
        The carrier pushed {parcel} out of {hub}; it is in transit again.
        """,
        _says("status", value="in_transit"),
        _says("location", "hub"),
    ),
    _kind(
        "not_delayed",
        """
        {parcel} is not delayed; nothing to escalate.
        No need to escalate {parcel}: it is not held up.
        """,
    ),
    _kind(
        "notified",
        """
        You sent {person} a note about their delivery.
        {person} has been notified.
        """,
    ),
    _kind(
        "waited",
        """
        Time passes at the desk.
        You wait.
        You keep an eye on the board.
        """,
    ),
    _kind(
        "unknown_parcel",
        """
        There is no parcel {parcel} on file.
        We cannot find {parcel} in the system.
        """,
    ),
    _kind("unknown_person", "We have no customer by that name."),
    _kind("bad_address", "That is not an address we can deliver to."),
    _kind(
        "not_understood",
        "That command was not understood. Try: wait, track <id>, escalate <id>, "
        "notify <person>, reroute <id> to <address>.",
    ),
    # Chatter: names people and hubs, states no fact.
    _kind(
        "chatter",
        """
        The coffee machine at the {hub} depot is broken again.
        {person} from accounts says hello.
        A van was washed in the yard.
        Radio: light rain expected near {hub}.
        The night shift left a note about the printer.
        {person} is on holiday until next week.
        Someone left a box of pastries by the scanner.
        {person} asks whether anyone has seen the tape gun.
        """,
    ),
)

TEXT = TextBook(KINDS, SLOT_TYPES)
"""The Parcel family's templates: renders observations and reads them back."""

_LINE_MAX = 256  # longest rendered line, with a four-word agent-given address; tested


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    Inverts every template and paraphrase of the family. A parcel named by who sent it
    to whom comes out as a description subject,
    ``(("sender", "person:ann"), ("receiver", "person:bo"))``, which the caller resolves
    against facts it read earlier: no two parcels ever share a (sender, receiver) pair.
    Chatter lines yield nothing.
    """
    return TEXT.read(observation)



# --- text on the step path -------------------------------------------------------------
#
# The step path renders with ``VOICE.forms`` (``%`` formats of the very template strings
# the reader compiles), handing over the values' surface forms, looked up in the tables
# below, in each kind's say order.

# The order in which the step path gives each kind's values (chatter is separate: its
# variants name different slots); ``Voice`` checks them against the templates.
_SAY_ORDER = {
    "intro": "",
    "booking": "parcel sender receiver address origin",
    "scan": "parcel hub",
    "delay": "parcel hub",
    "delivered": "parcel address",
    "request_id": "parcel new",
    "request_desc": "sender receiver new",
    "recorrect_id": "parcel new old",
    "recorrect_desc": "sender receiver new old",
    "fix_address": "parcel address",
    "tracked": "parcel status hub address",
    "rerouted": "parcel address",
    "same_address": "parcel address",
    "too_late": "parcel",
    "escalated": "parcel hub",
    "not_delayed": "parcel",
    "notified": "person",
    "waited": "",
    "unknown_parcel": "parcel",
    "unknown_person": "",
    "bad_address": "",
    "not_understood": "",
}

VOICE = Voice(TEXT, orders=_SAY_ORDER)
"""The Parcel family's step-path renderer (one ``Form`` per kind but chatter)."""
if missing := set(TEXT.kinds) - set(_SAY_ORDER) - {"chatter"}:
    raise ValueError(f"no say order for {sorted(missing)}")


class _Memo(dict):
    """A dict that fills itself from ``func`` on a miss.

    Its values are a pure function of the key, so emptying it when it reaches ``limit``
    entries (agent-given addresses are unbounded) only costs recomputation.
    """

    __slots__ = ("func", "limit")

    def __init__(self, func: Callable[[str], Any], limit: int = 1 << 16) -> None:
        super().__init__()
        self.func = func
        self.limit = limit

    def __missing__(self, key: str) -> Any:
        if len(self) >= self.limit:
            self.clear()
        value = self[key] = self.func(key)
        return value


STATUSES = ("booked", "in_transit", "delayed", "delivered")
TRACKING_IDS = tuple(f"parcel:px-{n}" for n in range(1000, 1000 + ID_CAPACITY))
"""Every tracking id, by its number less 1000 (what a booking draws)."""

# The surface forms of every tracking id, person, hub and status (fixed pools, so a plain
# dict, the cheapest lookup); of addresses (agent-given ones too) in a bounded memo.
SURFACE = {
    value: SLOT_TYPES[slot].to_text(value)
    for slot, pool in (
        ("parcel", TRACKING_IDS),
        ("person", PERSONS),
        ("hub", HUBS),
        ("status", STATUSES),
    )
    for value in pool
}
ADDRESS_TEXT = _Memo(_ADDR.to_text, 1 << 16)  # with every drawn address (see below)


def _slots(template: str) -> tuple[str, ...]:
    return tuple(slot for _, slot, _, _ in string.Formatter().parse(template) if slot is not None)


def _chatter_lines(template: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # Every line a chatter template can give (at most one slot, filled from a fixed
    # pool), rendered once, each with the entity it names.
    slots = _slots(template)
    if not slots:
        return ((template, ()),)
    if slots not in (("person",), ("hub",)):
        raise ValueError(f"chatter names one person or one hub: {template!r}")
    pool = PERSONS if slots == ("person",) else HUBS
    return tuple((template.format_map({slots[0]: SURFACE[v]}), (v,)) for v in pool)


def _chatter_table() -> tuple[tuple[str, tuple[str, ...]], ...]:
    # A variant uniformly, then one of its lines uniformly, as one table in which each
    # variant fills the same share: one draw picks a line.
    variants = [_chatter_lines(t) for t in TEXT.kinds["chatter"].templates]
    share = math.lcm(*map(len, variants))
    return tuple(line for lines in variants for line in lines for _ in range(share // len(lines)))


CHATTER = _chatter_table()
"""Every chatter line, each with the entity ids it names; a uniform draw picks one."""

ADDRESSES = 99 * len(STREETS) * len(SUFFIXES)  # house numbers 1..99 on every street


def _addresses(streets: tuple[str, ...], suffixes: tuple[str, ...]) -> tuple[str, ...]:
    # Draw k is house number 1 + k // (30 * 5), suffix k // 30 % 5, street k % 30.
    return tuple(f"{n} {s} {x}" for n in range(1, 100) for x in suffixes for s in streets)


# Every address a draw can give, and its surface form (built once at import, ~10 ms: a
# booking or request would otherwise format them, two dozen times slower than this).
ADDRESS_BY_DRAW = _addresses(STREETS, SUFFIXES)
ADDRESS_TEXT.update(
    zip(
        ADDRESS_BY_DRAW,
        _addresses(tuple(map(str.capitalize, STREETS)), tuple(map(str.capitalize, SUFFIXES))),
        strict=True,
    )
)
