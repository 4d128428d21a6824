"""``wmkit/Parcel-v0``: the logistics diagnostic family (seed 000, §2.1 first case).

Senders book parcels to receivers; parcels advance from hub to hub by scan events, are
sometimes delayed, and get delivered, and new bookings keep ``load`` parcels active.
Customers write in asking for a parcel to go to a new address, often naming it only by
who sent it to whom, and sometimes correct that request. The agent must reroute the
right parcel before it is delivered, which needs the booking it read long ago.

Facts (all canonical lowercase; subjects are parcels, ``parcel:px-4821``):

========================  ===================================================
relation                  object
========================  ===================================================
``sender``, ``receiver``  ``person:ann`` (never change)
``address``               ``12 elm st`` (booking, depot fix, agent reroute)
``location``              ``hub:lyon`` (origin hub, then each scan)
``status``                ``booked`` | ``in_transit`` | ``delayed`` | ``delivered``
``requested_address``     set by a customer request or its correction; kept
                          after the request is served (it then equals ``address``)
========================  ===================================================

Every fact is stated in the observation of the step that sets or changes it, so a
perfect reader with perfect memory reconstructs the state from the text alone (``read``
is that reader, one observation at a time).

Actions (case and spacing are ignored): ``wait``, ``track <id>``, ``escalate <id>``,
``notify <person>``, ``reroute <id> to <address>``. A command that does not parse, or
names an unknown parcel or person, or an address we cannot ship to, is *rejected*: the
reply says so, the move is spent and the world does not advance (events that fall due
meanwhile happen at the next accepted command). Rewards: +1 when a reroute sends a
parcel to its open requested address, -1 when a reroute changes an address to anything
else, 0 otherwise.

The pure core, ``ParcelFuncEnv``, has Gymnasium's ``FuncEnv`` shape; its state is an
immutable ``ParcelState`` and a transition is a deterministic function of
``(state, action)``: per-step randomness comes from the episode seed in the state and
the step number. ``ParcelEnv`` is the thin ``gymnasium.Env[str, str]`` shell.
"""

from __future__ import annotations

import bisect
import hashlib
import marshal
import math
import re
import string
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate, chain
from operator import itemgetter
from typing import Any, NamedTuple

import immutables
from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import CoreDefaults, DiagnosticEnv, FamilyParams, StepRng, truth_info
from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook, title_words
from wmkit.world.types import Claim, Delta, Fact, Probe

__all__ = [
    "TEXT",
    "Parcel",
    "ParcelEnv",
    "ParcelFuncEnv",
    "ParcelParams",
    "ParcelState",
    "read",
    "state_hash",
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

# Scan gaps in steps by pace (express, standard, freight) and their weights; freight
# parcels stay active for a long time, so requests about them refer far back.
PACES = ((2, 3), (2, 5), (6, 12))
PACE_WEIGHTS = (3, 5, 2)
_PACE_CUMULATIVE = tuple(accumulate(PACE_WEIGHTS))  # what choices() would build
MIN_LIFE = 4  # steps from booking to delivery at the least: two events, gaps of >= 2
P_DELAY = 0.15  # per scan event
DELAY_STEPS = (3, 8)
P_REQUEST = 0.3  # per step: a customer asks to reroute an active parcel
P_RECORRECT = 0.1  # per step: a customer corrects an open request
P_FIX = 0.05  # per step: the depot corrects a mistyped booking address

# Commands. Agent-given addresses: a house number and one to four words of letters.
_ID_RE = re.compile(r"px-\d{4}")
_NAME_RE = re.compile(r"[a-z]+")
_ADDRESS_RE = re.compile(r"\d{1,4}(?: [a-z]{1,20}){1,4}")
_REROUTE_RE = re.compile(r"reroute (px-\d{4}) to (\d{1,4}(?: [a-z]{1,20}){1,4})")

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
# ``TEXT.render`` builds a dict per line; the step path instead fills each template with
# ``%``, from the very template strings the reader compiles (so writer and reader agree).
# Callers hand over the values' surface forms, looked up in the tables below, and the
# entity ids the line names (``wm.mentioned``).


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
_TRACKING_IDS = tuple(f"parcel:px-{n}" for n in range(1000, 1000 + ID_CAPACITY))
"""Every tracking id, by its number less 1000 (what a booking draws)."""

# The surface forms of every tracking id, person, hub and status (fixed pools, so a plain
# dict, the cheapest lookup); of addresses (agent-given ones too) in a bounded memo.
_SURFACE = {
    value: SLOT_TYPES[slot].to_text(value)
    for slot, pool in (
        ("parcel", _TRACKING_IDS),
        ("person", PERSONS),
        ("hub", HUBS),
        ("status", STATUSES),
    )
    for value in pool
}
_ADDRESS_TEXT = _Memo(_ADDR.to_text, 1 << 16)  # with every drawn address (see below)


_Variant = tuple[str, Callable[[tuple[str, ...]], Any] | None]
"""One template compiled for the step path: the template as a ``%`` format (the line
itself when it has no slots), and an ``itemgetter`` that puts the values, given in the
kind's say order, in the template's order; None when they already are."""

_Form = tuple[tuple[_Variant, ...], int]
"""A message kind compiled for the step path: its variants (0 canonical), and how many
paraphrases it has (variants besides the canonical one). A plain tuple: it is unpacked
for every line."""


def _percent(template: str, slots: tuple[str, ...]) -> tuple[str, Callable | None]:
    """``template`` as a ``%`` format, and the reorder of ``slots``-ordered values it needs."""
    if not slots:
        return template, None
    parts, used = [], []
    for literal, slot, _, _ in string.Formatter().parse(template):
        parts.append(literal.replace("%", "%%"))
        if slot is not None:
            parts.append("%s")
            used.append(slots.index(slot))
    return "".join(parts), None if used == sorted(used) else itemgetter(*used)


def _slot_set(template: str) -> set[str]:
    return {slot for _, slot, _, _ in string.Formatter().parse(template) if slot is not None}


# The order in which the step path gives each kind's values (chatter is separate: its
# variants name different slots). Checked against the templates below.
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


def _compile_kinds() -> dict[str, _Form]:
    forms = {}
    for name, order in _SAY_ORDER.items():
        kind, slots = TEXT.kinds[name], tuple(order.split())
        for template in kind.templates:
            if _slot_set(template) != set(slots):
                raise ValueError(f"{name}: say order {slots} does not fit {template!r}")
        variants = tuple(_percent(template, slots) for template in kind.templates)
        forms[name] = (variants, len(variants) - 1)
    if missing := set(TEXT.kinds) - set(forms) - {"chatter"}:
        raise ValueError(f"no say order for {sorted(missing)}")
    return forms


_FORMS = _compile_kinds()
_INTRO, _BOOKING, _SCAN, _DELAY = (_FORMS[k] for k in ("intro", "booking", "scan", "delay"))
_DELIVERED, _FIX_ADDRESS = _FORMS["delivered"], _FORMS["fix_address"]
_REQUEST_ID, _REQUEST_DESC = _FORMS["request_id"], _FORMS["request_desc"]
_RECORRECT_ID, _RECORRECT_DESC = _FORMS["recorrect_id"], _FORMS["recorrect_desc"]
_WAITED, _NOTIFIED, _TRACKED = _FORMS["waited"], _FORMS["notified"], _FORMS["tracked"]
_ESCALATED, _NOT_DELAYED = _FORMS["escalated"], _FORMS["not_delayed"]
_TOO_LATE = _FORMS["too_late"]
_REROUTED, _SAME_ADDRESS = _FORMS["rerouted"], _FORMS["same_address"]
_UNKNOWN_PARCEL, _BAD_ADDRESS = _FORMS["unknown_parcel"], _FORMS["bad_address"]
for _form in (_SCAN, _DELAY, _DELIVERED):  # transition formats these without _say()
    if not _form[1] or any(order is not None for _, order in _form[0]):
        raise ValueError("scan, delay and delivered need paraphrases in say order")


def _chatter_lines(template: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    # Every line a chatter template can give (at most one slot, filled from a fixed
    # pool), rendered once, each with the entity it names.
    slots = tuple(_slot_set(template))
    if not slots:
        return ((template, ()),)
    if slots not in (("person",), ("hub",)):
        raise ValueError(f"chatter names one person or one hub: {template!r}")
    pool = PERSONS if slots == ("person",) else HUBS
    fmt, _ = _percent(template, slots)
    return tuple((fmt % _SURFACE[v], (v,)) for v in pool)


def _chatter_table() -> tuple[tuple[str, tuple[str, ...]], ...]:
    # A variant uniformly, then one of its lines uniformly, as one table in which each
    # variant fills the same share: one draw picks a line.
    variants = [_chatter_lines(t) for t in TEXT.kinds["chatter"].templates]
    share = math.lcm(*map(len, variants))
    return tuple(line for lines in variants for line in lines for _ in range(share // len(lines)))


_CHATTER = _chatter_table()


# --- randomness ------------------------------------------------------------------------
#
# A transition draws from a 30-bit LCG started from a hash of (episode seed, step), so its
# randomness is a function of the state. 30 bits because CPython's int arithmetic is
# cheapest on operands below 2**30 (one internal digit), and a step draws ~20 numbers;
# seeding ``random.Random`` alone would cost a third of a step. The step keeps the
# generator's state in a local int and steps it inline (a call costs more than the
# draw); helpers that draw take and return it. Draws use the high bits, the good ones
# of an LCG: ``(x * n) >> 30`` is uniform in [0, n), and ``x < _chance(p)`` happens
# with probability ``p``.

_LCG_MUL = 1664525  # with an odd increment, full period 2**30 (Hull-Dobell)
_LCG_ADD = 1013904223
_M30 = (1 << 30) - 1


def _mix30(z: int) -> int:
    # Two xorshift-multiply rounds over 30 bits: every bit of z reaches every bit out.
    z = ((z ^ (z >> 15)) * 0x2C1B3C6D) & _M30
    z = ((z ^ (z >> 13)) * 0x297A2D39) & _M30
    return z ^ (z >> 16)


@lru_cache(maxsize=64)
def _episode_key(seed: int) -> int:
    """The seed (any int) folded into 30 bits, 30 bits at a time."""
    key, rest = 0x5EED, abs(seed)
    while True:
        key = _mix30(key ^ (rest & _M30))
        rest >>= 30
        if not rest:
            return _mix30(key ^ 0x2545F491) if seed < 0 else key


def _start(key: int, step: int) -> int:
    """The generator's state at the start of ``step``: a hash of (episode key, step)."""
    # Steps spread apart by an odd multiplier (small: the product stays below 2**30 for
    # any horizon), then one xorshift-multiply round.
    z = key ^ step * 40503
    z = ((z ^ (z >> 15)) * 0x2C1B3C6D) & _M30
    return z ^ (z >> 13)


def _chance(p: float) -> int:
    return int(p * (1 << 30))


_DELAY_CHANCE = _chance(P_DELAY)
_REQUEST_CHANCE = _chance(P_REQUEST)
_RECORRECT_CHANCE = _chance(P_RECORRECT)
_FIX_CHANCE = _chance(P_FIX)


# --- state -----------------------------------------------------------------------------


class _cached:  # lower case: used as a decorator, like the property it replaces
    """``functools.cached_property`` without its lock, for values of immutable objects.

    Python 3.11's cached_property takes a lock on every first access, which costs more
    than the small values cached here; a race can only compute the same value twice.
    """

    def __init__(self, func: Callable[[Any], Any]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        # Stored in the instance dict, which shadows this (non-data) descriptor from now on.
        value = instance.__dict__[self.name] = self.func(instance)
        return value


@dataclass(frozen=True)
class ParcelParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``load`` is the parcels active at once (bounded with the horizon, so ids and
    descriptions stay unique); ``indirection`` the probability a customer message names
    its parcel by description.
    """

    indirection: float = 0.7

    def __post_init__(self) -> None:
        super().__post_init__()
        # Rejection sampling of fresh ids and (sender, receiver) pairs must stay cheap and
        # can never run dry within the horizon.
        most = self.load * (self.horizon // MIN_LIFE + 1)
        if most > 0.75 * min(ID_CAPACITY, PAIR_CAPACITY):
            raise ValueError(
                f"load={self.load} with horizon={self.horizon} could book {most} parcels, more "
                f"than the {int(0.75 * min(ID_CAPACITY, PAIR_CAPACITY))} unique tracking ids "
                "and descriptions the family guarantees; lower load or horizon"
            )

    @_cached
    def _chances(self) -> tuple[int, int]:
        """``paraphrase_rate`` and ``indirection`` as thresholds for draws (see _chance)."""
        return _chance(self.paraphrase_rate), _chance(self.indirection)


class _ParcelFields(NamedTuple):  # the fields of ``Parcel``; grouped by what changes together
    id: str
    sender: str
    receiver: str
    route: tuple[str, ...]
    pace: int
    booked_at: int
    address: str  # 6
    address_at: int
    requested: str  # 8
    request: str
    requested_at: int
    corrected: bool  # 11
    hop: int  # 12
    location: str
    location_at: int
    status: str  # 15
    status_at: int
    due: int


_new = tuple.__new__  # builds a NamedTuple from a tuple without NamedTuple's slow __new__

# A parcel's record on the step path: a plain tuple of the fields above, read by these
# positions. CPython 3.11 reads a NamedTuple field by name, or builds a NamedTuple, at
# several times the cost of the plain tuple operation, and the step path does both a
# few dozen times per step; ``Parcel`` is the record's named view for everything else.
(
    _ID, _SENDER, _RECEIVER, _ROUTE, _PACE, _BOOKED_AT, _ADDRESS, _ADDRESS_AT, _REQUESTED,
    _REQUEST, _REQUESTED_AT, _CORRECTED, _HOP, _LOCATION, _LOCATION_AT, _STATUS, _STATUS_AT,
    _DUE,
) = range(len(_ParcelFields._fields))  # fmt: skip

_Record = tuple
"""A parcel's fields as a plain tuple, in ``Parcel``'s order."""


class Parcel(_ParcelFields):
    """One parcel: its facts, its hidden schedule, and when each fact was last stated.

    ``requested`` is ``""`` until a customer asks; ``request`` is ``none``, ``open`` or
    ``served``. ``*_at`` fields are the steps of the observations that last stated a
    fact (probe anchors); ``requested_at`` is the booking step when the request named
    the parcel by description. ``corrected`` says whether its address or request
    changed after booking. ``facts`` and ``digest`` are derived from the fields.

    States keep parcels as plain tuples of these fields (``_Record``), changed only by
    the ``_scanned``... functions below; ``ParcelState.parcel`` and ``parcels`` give
    them as ``Parcel`` (see ``_view``).
    """

    __slots__ = ()

    @property
    def facts(self) -> tuple[Fact, ...]:
        """The parcel's facts, sorted by relation (see ``_record_facts``)."""
        return _record_facts(self)

    @property
    def digest(self) -> int:
        """A stable 64-bit digest of every field (the state hash sums them)."""
        return _record_digest(self)


def _view(record: _Record) -> Parcel:
    """``record`` as a ``Parcel`` (named fields), for everything off the step path."""
    return _new(Parcel, record)


def _record_facts(p: _Record) -> tuple[Fact, ...]:
    """The facts of parcel record ``p``, sorted by relation (so ``wm.state`` needs no sort)."""
    s = p[_ID]
    if p[_REQUESTED]:
        return (
            _new(Fact, (s, "address", p[_ADDRESS])),
            _new(Fact, (s, "location", p[_LOCATION])),
            _new(Fact, (s, "receiver", p[_RECEIVER])),
            _new(Fact, (s, "requested_address", p[_REQUESTED])),
            _new(Fact, (s, "sender", p[_SENDER])),
            _new(Fact, (s, "status", p[_STATUS])),
        )
    return (
        _new(Fact, (s, "address", p[_ADDRESS])),
        _new(Fact, (s, "location", p[_LOCATION])),
        _new(Fact, (s, "receiver", p[_RECEIVER])),
        _new(Fact, (s, "sender", p[_SENDER])),
        _new(Fact, (s, "status", p[_STATUS])),
    )


def _record_digest(p: _Record) -> int:
    """A stable 64-bit digest of every field of parcel record ``p``."""
    # marshal's version 0 format writes equal values as equal bytes (it has no
    # references or interned strings), and writes them faster than repr().
    h = _BLAKE2B_8.copy()
    h.update(marshal.dumps(tuple(p), 0))
    return int.from_bytes(h.digest(), "big")


# Copied for each hash: cheaper than a new blake2b (the constructor parses its keywords).
_BLAKE2B_8 = hashlib.blake2b(digest_size=8)


# How a step changes a parcel record; each returns a new record. They splice tuples by
# field position and concatenate (cheaper in CPython than unpacking slices into a
# display), so they follow the field order above.


def _scanned(p: _Record, hub: str, step: int, due: int) -> _Record:
    """Arrived at the next hub of its route, in transit, next event at ``due``."""
    return p[:12] + (p[12] + 1, hub, step, "in_transit", step, due)  # noqa: RUF005


def _delayed(p: _Record, step: int, due: int) -> _Record:
    """Held up where it is until ``due``."""
    return p[:14] + (step, "delayed", step, due)  # noqa: RUF005


def _escalated(p: _Record, step: int) -> _Record:
    """Moving again: its next event comes at the next step."""
    return p[:14] + (step, "in_transit", step, step + 1)  # noqa: RUF005


def _delivered(p: _Record, step: int) -> _Record:
    """Delivered to its address (stated at ``step``); no more events."""
    return p[:7] + (step,) + p[8:15] + ("delivered", step, -1)  # noqa: RUF005


def _tracked(p: _Record, step: int) -> _Record:
    """Status, location and address all stated at ``step``."""
    return p[:7] + (step,) + p[8:14] + (step, p[15], step, p[17])  # noqa: RUF005


def _status_stated(p: _Record, step: int) -> _Record:
    """Status stated at ``step``."""
    return p[:16] + (step, p[17])  # noqa: RUF005


def _address_stated(p: _Record, step: int) -> _Record:
    """Address stated at ``step``."""
    return p[:7] + (step,) + p[8:]  # noqa: RUF005


def _readdressed(p: _Record, address: str, step: int, request: str) -> _Record:
    """Sent to ``address`` (stated at ``step``), its request now ``request``."""
    return p[:6] + (address, step, p[8], request, p[10], True) + p[12:]  # noqa: RUF005


def _requested_to(p: _Record, address: str, anchor: int) -> _Record:
    """An open request to send it to ``address``, identified by step ``anchor``."""
    return p[:8] + (address, "open", anchor, True) + p[12:]  # noqa: RUF005


class _Digests(dict):
    """Each record's digest, by the record's identity.

    A step's state hash adds the digests of the records it made and takes off those of
    the records they replaced, which the step before made and hashed: kept here, they
    are hashed once. Each entry holds its record, so an identity cannot be reused while
    it is cached (nothing here can go stale). Emptied when it reaches ``limit`` entries:
    small, as a step needs only the digests of its own records and of the step before's,
    and entries kept alive long end up in the cyclic garbage collector's oldest
    generation, where they trigger full collections.
    """

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def __call__(self, record: _Record) -> int:
        entry = self.get(id(record))
        if entry is None:
            if len(self) >= self.limit:
                self.clear()
            entry = self[id(record)] = (record, _record_digest(record))
        return entry[1]


_digest = _Digests(512)


_Change = tuple[_Record | None, _Record | None, _Record]
"""A parcel the step changed: its record before the step, after the agent's command
(both ``None`` for a parcel booked in the step), and after the world events."""


_Commands = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""Per active parcel in id order ``reroute <id> to ``; the commands before the reroutes;
those after them."""


class _ParcelStateFields(NamedTuple):  # the fields of ``ParcelState``
    params: ParcelParams
    seed: int
    key: int
    step: int
    active: tuple[int, ...]
    live: tuple[_Record, ...]
    retired: immutables.Map[int, _Record]
    index: immutables.Map[str, int]
    used_pairs: immutables.Map[tuple[str, str], None]
    text: str
    said: tuple[str, ...]
    advanced: bool
    before: tuple[tuple[int, ...], tuple[_Record, ...]]
    acted: tuple[tuple[int, _Record, _Record], ...]
    admissible: tuple[str, ...]
    commands: _Commands
    reward: int
    score: int
    max_score: int


class ParcelState(_ParcelStateFields):
    """The whole episode state at one step: an immutable value, the snapshot token.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        key: the seed folded into 30 bits (``_episode_key``), kept for those draws.
        step: steps taken since reset (0 at reset).
        active: indices (0, 1, ... in booking order) of the parcels not yet delivered,
            in booking order.
        live: those parcels' records (see ``Parcel``), in the same order. Kept apart
            from the delivered ones, which rarely change, so that a step copies a few
            records, not a map.
        retired: the delivered parcels' records by index, a persistent map (a delivery
            shares structure with the previous step's instead of copying them all).
        index: each parcel's index by its id (the ids taken, never reused).
        used_pairs: (sender, receiver) pairs taken, as the keys of a persistent map;
            never reused, so descriptions are unambiguous.
        text: this step's observation, one message per line.
        said: the entity ids this step's lines name, with repeats (see ``mentioned``).
        advanced: whether the world moved on into this state (False at reset and
            after a rejected command); probes come only then.
        before: ``(active, live)`` of the state this one came from (empty at reset).
        acted: the parcel the agent's command changed, as ``(index, record before,
            record after)``; empty if it changed none. With ``before``, what the world
            events changed is derived when asked (``_changes``), so that a step
            without ground truth does no bookkeeping for it.
        admissible: the admissible commands, sorted.
        commands: the parts of them that only the active parcels decide (see
            ``_commands``), kept to rebuild the rest cheaply when a request changes.
        reward: this step's reward.
        score: cumulative reward.
        max_score: requests issued so far (each can be served once for +1).

    Derived when asked (only ground truth needs them): ``parcels``, ``probes``,
    ``mentioned``, ``action_delta``, ``event_delta``, ``facts`` and ``digest``.
    """

    # A NamedTuple, being cheaper to build than a frozen dataclass (one per step),
    # subclassed so that the derived values below can be cached on first use.

    def record(self, i: int) -> _Record:
        """Return the record of the parcel with index ``i`` (booked ``i``-th, from 0)."""
        p = self.retired.get(i)
        return self.live[self.active.index(i)] if p is None else p

    def parcel(self, i: int) -> Parcel:
        """Return the parcel with index ``i`` (booked ``i``-th, from 0)."""
        return _view(self.record(i))

    @_cached
    def parcels(self) -> immutables.Map[int, Parcel]:
        """Every parcel ever booked, by index."""
        every = chain(self.retired.items(), zip(self.active, self.live, strict=True))
        return immutables.Map({i: _view(record) for i, record in every})

    @_cached
    def probes(self) -> tuple[Probe, ...]:
        """Probes due at this step (drawn from their own stream of the step's randomness)."""
        return _probes(self) if self.advanced else ()

    @_cached
    def mentioned(self) -> tuple[str, ...]:
        """Sorted entity ids named in this step's observation."""
        return tuple(sorted(set(self.said)))

    @property
    def action_delta(self) -> Delta:
        """Fact change caused by the agent's command this step."""
        return _deltas(_changes(self))[0]

    @property
    def event_delta(self) -> Delta:
        """Fact change caused by scheduled world events this step."""
        return _deltas(_changes(self))[1]

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every fact of the world, sorted (``wm.state``)."""
        return tuple(self._world[0])

    @property
    def digest(self) -> int:
        """Sum of parcel digests mod 2**64 (the world part of ``state_hash``)."""
        return self._world[1]

    @_cached
    def _world(self) -> tuple[list[Fact], int]:
        # The sorted facts (a list, never changed once made, so that the next state's
        # splice and ``wm.state`` copy it once each) and the digest. Once the previous
        # state's are known (see _carry_truth), updated by the parcels this step changed.
        return _make_world(self, _changes(self))


def state_hash(state: ParcelState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step and every parcel's facts, hidden schedule and
    anchors: equal hashes mean the same world at the same step of the same episode, the
    transposition key for search. The observation, probes and score are left out. Cheap:
    once a state's digest is known, later steps update it by the parcels they change.
    """
    return _hash(state, state._world[1])


def _hash(state: ParcelState, digest: int) -> str:
    h = _BLAKE2B_8.copy()
    h.update(b"%d/%d" % (state.seed, state.step))
    return f"{(int.from_bytes(h.digest(), 'big') + digest) % 2**64:016x}"


# --- ground truth ------------------------------------------------------------------------
#
# Derived when asked, from what a state keeps anyway: ``before`` (the previous step's
# parcels), ``acted`` (the command's change) and the parcels now. One walk finds the
# parcels the step changed (``_changes``); the deltas compare their fact fields, and the
# facts and digest of the world are the previous state's, updated by those parcels.

_FACT_FIELDS = (
    (_ADDRESS, "address"),
    (_LOCATION, "location"),
    (_REQUESTED, "requested_address"),
    (_STATUS, "status"),
)
"""The record fields that facts state and a step can change (sender and receiver never
change), with their relations."""


def _changes(state: ParcelState) -> list[_Change]:
    """The parcels ``state``'s step changed: ``(before it, after the command, after it)``.

    A step passes unchanged records on as they are, so a record that is not the one
    before is a change. ``None`` before a booking.
    """
    before_active, before_live = state.before
    active, live = state.active, state.live
    changes: list[_Change] = []
    if state.acted:
        ((acted, old, mid),) = state.acted  # at most one parcel
        if acted not in before_active:  # a delivered parcel: no event changes it
            changes.append((old, mid, mid))
    else:
        acted = mid = -1
    if active is before_active:
        # No delivery or booking (most steps): the parcels line up position by position.
        if live is not before_live:
            for i, old, new in zip(active, before_live, live, strict=True):
                if i == acted:
                    changes.append((old, mid, new))
                elif old is not new:
                    changes.append((old, old, new))
        return changes
    base = dict(zip(before_active, before_live, strict=True))
    for i, new in zip(active, live, strict=True):
        old = base.pop(i, None)
        if i == acted:
            changes.append((old, mid, new))
        elif old is not new:
            changes.append((old, old, new))
    retired = state.retired
    for i, old in base.items():  # the rest left ``live``: delivered now
        changes.append((old, mid if i == acted else old, retired[i]))
    return changes


def _deltas(changes: list[_Change]) -> tuple[Delta, Delta]:
    """The fact changes of the command, then those of the events (sorted)."""
    action_added: list[Fact] = []
    action_removed: list[Fact] = []
    event_added: list[Fact] = []
    event_removed: list[Fact] = []
    for old, mid, new in changes:
        if old is not mid:
            _diff(old, mid, action_added, action_removed)
        if mid is not new:
            _diff(mid, new, event_added, event_removed)
    # Each parcel changes at most once in a phase, so there are no duplicates.
    action_added.sort()
    action_removed.sort()
    event_added.sort()
    event_removed.sort()
    return (
        _new(Delta, (tuple(action_added), tuple(action_removed))),
        _new(Delta, (tuple(event_added), tuple(event_removed))),
    )


def _diff(old: _Record | None, new: _Record, added: list[Fact], removed: list[Fact]) -> None:
    """Add the facts ``old`` to ``new`` adds to ``added``, those it removes to ``removed``."""
    if old is None:
        added += _record_facts(new)
        return
    s = new[_ID]
    for k, relation in _FACT_FIELDS:
        if (after := new[k]) != (before := old[k]):
            added.append(_new(Fact, (s, relation, after)))
            if before:  # (no requested address is "": no fact to remove)
                removed.append(_new(Fact, (s, relation, before)))


def _make_world(state: ParcelState, changes: list[_Change]) -> tuple[list[Fact], int]:
    """``state``'s sorted facts and digest: the previous state's updated by ``changes``.

    From scratch when the previous state's are not known (ground truth was off, or
    ``state`` was made by ``initial``).
    """
    before = state.__dict__.pop("_world_before", None)
    if before is None:
        records = sorted(chain(state.retired.values(), state.live))  # sorted by id
        facts = list(chain.from_iterable([_record_facts(record) for record in records]))
        return facts, sum(map(_digest, records)) % 2**64
    facts, digest = before
    runs = []
    for old, _, new in changes:
        if old is None:
            digest += _digest(new)
            runs.append((bisect.bisect_left(facts, (new[_ID],)), new[_ID], 0, new))
            continue
        digest += _digest(new) - _digest(old)
        for k, _ in _FACT_FIELDS:
            if new[k] != old[k]:
                # Its run of facts: facts sort by subject first, and (pid,) sorts just
                # before every fact about pid; the requested address adds one.
                start = bisect.bisect_left(facts, (new[_ID],))
                runs.append((start, new[_ID], 6 if old[_REQUESTED] else 5, new))
                break
    if runs:
        # Replaced from the last run back, so that the earlier positions stay valid (a
        # booking's empty run may start where another parcel's does: ids order them).
        runs.sort(reverse=True)
        facts = list(facts)
        for start, _, length, new in runs:
            facts[start : start + length] = _record_facts(new)
    return facts, digest % 2**64


# --- the step path ---------------------------------------------------------------------
#
# ``ParcelFuncEnv.transition`` is one function over local variables, not a scratch
# object: in CPython 3.11 storing a draft's fields and loading them again around every
# helper call cost ~7 % of a step's instructions (measured when this replaced such a
# draft). What the reset shares with a step (a line of text, an address, a booking, the
# chatter) are the functions below. They take the generator's state ``x`` as a plain int
# and return its new value, and append to the step's lists: ``lines`` (the observation),
# ``said`` (the entity ids the lines name, for ``wm.mentioned``) and, for a booking,
# ``live``.


def _say(x: int, rate: int, form: _Form, texts: tuple[str, ...], lines: list[str]) -> int:
    """Add a line of ``form`` filled with ``texts``; return the generator's new state.

    Args:
        x: the generator's state.
        rate: the paraphrase threshold (``ParcelParams._chances``).
        form: the message kind.
        texts: the surface forms of its values, in its ``_SAY_ORDER``.
        lines: the step's lines.
    """
    variants, paraphrases = form
    line, order = variants[0]
    if paraphrases:
        # One draw decides both whether to paraphrase and which paraphrase: below the
        # rate's threshold, it is uniform in [0, rate).
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        if x < rate:
            line, order = variants[1 + x * paraphrases // rate]
    if texts:
        line %= texts if order is None else order(texts)
    lines.append(line)
    return x


def _address(x: int, avoid: tuple[str, ...]) -> tuple[int, str]:
    """Draw an address (one draw among all of them) not in ``avoid``; return (x, it)."""
    while True:
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        address = _ADDRESS_BY_DRAW[(x * _ADDRESSES) >> 30]
        if address not in avoid:
            return x, address


_Booked = tuple[int, tuple[int, ...], immutables.Map, immutables.Map]
"""What a booking changes: the generator's state, ``active``, ``index``, ``used_pairs``."""


def _book(
    x: int,
    step: int,
    rate: int,
    live: list[_Record],
    active: tuple[int, ...],
    index: immutables.Map[str, int],
    used: immutables.Map[tuple[str, str], None],
    lines: list[str],
    said: list[str],
) -> _Booked:
    """Book a parcel: a fresh id and (sender, receiver) pair, pace, route, address.

    Appends its record to ``live``, its line to ``lines`` and the ids it names to
    ``said``; returns the generator's new state, ``active``, ``index`` and ``used_pairs``.
    """
    # Fresh ids and pairs by rejection, at most 64 draws each: capacity is validated
    # against the horizon, so a draw or two almost always do; past it a scan takes over.
    x = (x * _LCG_MUL + _LCG_ADD) & _M30
    pid = _TRACKING_IDS[(x * ID_CAPACITY) >> 30]
    tries = 1
    while pid in index:
        if tries == 64:
            pid = _first_free_id(index)
            break
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        pid = _TRACKING_IDS[(x * ID_CAPACITY) >> 30]
        tries += 1
    tries = 0
    while True:
        if tries == 64:
            sender, receiver = pair = _first_free_pair(used)
            break
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        a = (x * _PERSON_COUNT) >> 30
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        b = (x * (_PERSON_COUNT - 1)) >> 30
        sender, receiver = pair = (PERSONS[a], PERSONS[b + (b >= a)])
        if pair not in used:
            break
        tries += 1
    # Pace (weighted); the route: one draw among all of them, read as mixed-radix
    # digits: its length (2 + longer hubs), then each hub among those left.
    x = (x * _LCG_MUL + _LCG_ADD) & _M30
    pace = _PACE_BY_DRAW[(x * _PACE_TOTAL) >> 30]
    x = (x * _LCG_MUL + _LCG_ADD) & _M30
    u, longer = divmod((x * _ROUTES) >> 30, 4)
    route = _ROUTE_STARTS[u % _STARTS]  # the first two digits at once
    if longer:
        hubs, more = list(_ROUTE_RESTS[u % _STARTS]), []
        u //= _STARTS
        for left in range(len(hubs), len(hubs) - longer, -1):
            u, k = divmod(u, left)
            more.append(hubs.pop(k))
        route += tuple(more)
    origin = route[0]
    low, span = _PACE_SPANS[pace]
    x = (x * _LCG_MUL + _LCG_ADD) & _M30
    due = step + low + ((x * span) >> 30)
    x, address = _address(x, ())
    # In field order: id, sender, receiver, route, pace, booked_at, address,
    # address_at, requested, request, requested_at, corrected, hop, location,
    # location_at, status, status_at, due.
    live.append(
        (
            pid, sender, receiver, route, pace, step, address, step, "", "none", -1, False, 0,
            origin, step, "booked", step, due,
        )
    )  # fmt: skip
    surface = _SURFACE
    texts = (
        surface[pid], surface[sender], surface[receiver], _ADDRESS_TEXT[address], surface[origin]
    )  # fmt: skip
    x = _say(x, rate, _BOOKING, texts, lines)
    said += (pid, sender, receiver, origin)
    i = len(index)  # every parcel booked so far has an id in the index
    return x, active + (i,), index.set(pid, i), used.set(pair, None)  # noqa: RUF005


def _chatter(x: int, distractors: int, lines: list[str], said: list[str]) -> None:
    """Insert ``distractors`` chatter lines at random places after the first line.

    The last draws of a step, so the generator's state is not returned.
    """
    for _ in range(distractors):
        # Two draws: the line, and where it goes.
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        line, names = _CHATTER[(x * _CHATTER_LINES) >> 30]
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        lines.insert(1 + ((x * len(lines)) >> 30), line)
        if names:
            said += names


def _untouched(live: list[_Record], step: int) -> list[int]:
    """Positions in ``live`` of parcels booked before ``step`` with no request yet."""
    pool = []  # (a loop: a comprehension costs a function object and a call in 3.11)
    for k, p in enumerate(live):
        if p[_REQUEST] == "none" and p[_BOOKED_AT] < step:
            pool.append(k)
    return pool


def _request(
    x: int,
    step: int,
    chances: tuple[int, int],
    p: _Record,
    recorrect: bool,
    lines: list[str],
    said: list[str],
) -> tuple[int, _Record]:
    """A customer asks to send parcel ``p`` elsewhere, or corrects that request.

    Returns the generator's new state and ``p``'s new record.
    """
    rate, indirect = chances
    x, new = _address(x, (p[_ADDRESS], p[_REQUESTED]))
    x = (x * _LCG_MUL + _LCG_ADD) & _M30
    by_description = x < indirect
    surface, new_text = _SURFACE, _ADDRESS_TEXT[new]
    if by_description:
        sender, receiver = p[_SENDER], p[_RECEIVER]
        names, texts = (sender, receiver), (surface[sender], surface[receiver], new_text)
    else:
        names, texts = (p[_ID],), (surface[p[_ID]], new_text)
    if recorrect:
        form = _RECORRECT_DESC if by_description else _RECORRECT_ID
        texts += (_ADDRESS_TEXT[p[_REQUESTED]],)
    else:
        form = _REQUEST_DESC if by_description else _REQUEST_ID
    x = _say(x, rate, form, texts, lines)
    said += names
    # A description is resolved through the booking that stated sender and receiver,
    # so the answer depends on that older observation.
    return x, _requested_to(p, new, p[_BOOKED_AT] if by_description else step)


def _rejected(
    state: ParcelState, x: int, form: _Form, texts: tuple[str, ...], names: tuple[str, ...]
) -> ParcelState:
    """The state after a rejected command: the reply, and the world as it was."""
    lines: list[str] = []
    _say(x, state.params._chances[0], form, texts, lines)
    return state._replace(
        step=state.step + 1,
        text=lines[0],
        said=names,
        advanced=False,
        before=(state.active, state.live),
        acted=(),
        reward=0,
    )


def _carry_truth(old: ParcelState, new: ParcelState) -> None:
    """Let ``new`` derive its facts and digest from ``old``'s, where those are known.

    Once they are known (ground truth on), they stay incremental: only the parcels a
    step changed are hashed and their facts redone.
    """
    if (world := old.__dict__.get("_world")) is not None:
        new.__dict__["_world_before"] = world


def _first_free_id(taken: immutables.Map[str, int]) -> str:
    """The first tracking id not ``taken``."""
    for pid in _TRACKING_IDS:
        if pid not in taken:
            return pid
    raise RuntimeError("ran out of unique tracking ids; lower load or horizon")


def _first_free_pair(used: immutables.Map[tuple[str, str], None]) -> tuple[str, str]:
    """The first (sender, receiver) pair not in ``used``."""
    for pair in ((a, b) for a in PERSONS for b in PERSONS if a != b):
        if pair not in used:
            return pair
    raise RuntimeError("ran out of unique sender/receiver pairs; lower load or horizon")


_PERSON_COUNT = len(PERSONS)
_DELAY_SPAN = (DELAY_STEPS[0], DELAY_STEPS[1] - DELAY_STEPS[0] + 1)  # (least, how many)
_PACE_SPANS = tuple((low, high - low + 1) for low, high in PACES)
_CHATTER_LINES = len(_CHATTER)
_PACE_TOTAL = _PACE_CUMULATIVE[-1]
_PACE_BY_DRAW = tuple(bisect.bisect_right(_PACE_CUMULATIVE, v) for v in range(_PACE_TOTAL))
"""The pace a draw in [0, total weight) gives (what ``random.choices`` would do)."""
_ROUTES = 4 * math.perm(len(HUBS), 5)  # route lengths 2..5, times the longest routes
_STARTS = len(HUBS) * (len(HUBS) - 1)


def _route_start(digits: int) -> tuple[tuple[str, str], tuple[str, ...]]:
    # The first two hubs of a route (its first two mixed-radix digits, base 20 then 19),
    # and the hubs left for the rest, in order.
    hubs = list(HUBS)
    first = hubs.pop(digits % len(HUBS))
    second = hubs.pop(digits // len(HUBS))
    return (first, second), tuple(hubs)


_ROUTE_STARTS, _ROUTE_RESTS = zip(*map(_route_start, range(_STARTS)), strict=True)
_ADDRESSES = 99 * len(STREETS) * len(SUFFIXES)  # house numbers 1..99 on every street


def _addresses(streets: tuple[str, ...], suffixes: tuple[str, ...]) -> tuple[str, ...]:
    # Draw k is house number 1 + k // (30 * 5), suffix k // 30 % 5, street k % 30.
    return tuple(f"{n} {s} {x}" for n in range(1, 100) for x in suffixes for s in streets)


# Every address a draw can give, and its surface form (built once at import, ~10 ms: a
# booking or request would otherwise format them, two dozen times slower than this).
_ADDRESS_BY_DRAW = _addresses(STREETS, SUFFIXES)
_ADDRESS_TEXT.update(
    zip(
        _ADDRESS_BY_DRAW,
        _addresses(tuple(map(str.capitalize, STREETS)), tuple(map(str.capitalize, SUFFIXES))),
        strict=True,
    )
)


# ``ParcelFuncEnv.admissible_actions`` defines the commands. They are sorted without a
# sort of the whole list: the verbs sort escalate < notify < reroute < track < wait, and
# ids have a fixed width, so each group is in order. They are rebuilt only when the
# active parcels or their open requests change; other steps carry them over.


def _verbs(pid: str) -> tuple[str, str, str]:
    short = pid.removeprefix("parcel:")
    return f"escalate {short}", f"track {short}", f"reroute {short} to "


# Each parcel's commands and each receiver's, made at import (~10 ms and ~4 MB with the
# parses ahead below): made on first use instead, as a new parcel is booked every few
# steps, they cost ~2.5 % of a step's instructions.
_VERBS = {pid: _verbs(pid) for pid in _TRACKING_IDS}
_NOTIFY_COMMAND = {person: "notify " + person.removeprefix("person:") for person in PERSONS}


def _parsed_ahead() -> dict[str, tuple[str, ...]]:
    # Agents send the admissible commands back: those naming no address are parsed
    # ahead (see _parse).
    parsed: dict[str, tuple[str, ...]] = {}
    for pid, (escalate, track, _) in _VERBS.items():
        parsed[escalate], parsed[track] = ("escalate", pid), ("track", pid)
    for person, notify in _NOTIFY_COMMAND.items():
        parsed[notify] = ("notify", person)
    return parsed


_PARSED_AHEAD = _parsed_ahead()


def _commands(live: list[_Record]) -> _Commands:
    """The parts of the commands that the active parcels alone decide."""
    escalate, track, reroute, receivers = [], [], [], set()
    for p in sorted(live):  # records sort by their id, the first field
        e, t, r = _VERBS[p[_ID]]
        escalate.append(e)
        track.append(t)
        reroute.append(r)
        receivers.add(p[_RECEIVER])
    for person in sorted(receivers):
        escalate.append(_NOTIFY_COMMAND[person])
    track.append("wait")
    return tuple(reroute), tuple(escalate), tuple(track)


def _admissible(commands: _Commands, live: list[_Record]) -> tuple[str, ...]:
    """All commands: ``commands`` with a reroute per active parcel and open request."""
    reroute, head, tail = commands
    wanted = []
    for p in live:
        if p[_REQUEST] == "open":
            wanted.append(p[_REQUESTED])
    if not wanted:
        return head + tail
    if len(wanted) > 1:  # (two parcels may be wanted at the same address)
        wanted = sorted(set(wanted))
    block = []
    for prefix in reroute:
        for address in wanted:
            block.append(prefix + address)
    return head + tuple(block) + tail


# --- the pure core ---------------------------------------------------------------------

_NOT_UNDERSTOOD = ("not_understood",)
_REFUSALS = frozenset({"not_understood", "unknown_person"})  # what _parse refuses as is
_PARSED: dict[str, tuple[str, ...]] = dict(_PARSED_AHEAD)
"""Commands already parsed, a pure function of the text: emptied when it gets large (but
for those parsed ahead)."""
_PARSED_LIMIT = 1 << 16


def _parse(action: str) -> tuple[str, ...]:
    """Return ``(verb, *args)`` for a command, or ``(reply kind,)`` for one refused as is.

    Verbs: ``wait``; ``notify`` person; ``track``/``escalate`` parcel; ``reroute`` parcel
    address, the address None if we cannot ship to it (refused once the parcel is known
    to exist). Case and spacing are ignored: the command is its lower-cased words.
    Agents repeat commands (the admissible ones above all), so results are kept.
    """
    command = _PARSED.get(action)
    if command is None:
        if len(_PARSED) >= _PARSED_LIMIT:
            _PARSED.clear()
            _PARSED.update(_PARSED_AHEAD)
        if match := _REROUTE_RE.fullmatch(action):
            # A reroute as the admissible commands spell it, the one kind agents send that
            # is not parsed ahead: one match instead of splitting and matching its words.
            command = ("reroute", "parcel:" + match[1], match[2])
        else:
            command = _parse_words(action.lower().split())
        _PARSED[action] = command
    return command


def _parse_words(words: list[str]) -> tuple[str, ...]:
    verb, n = (words[0], len(words)) if words else ("", 0)
    if verb == "wait" and n == 1:
        return ("wait",)
    if verb == "notify" and n == 2 and _NAME_RE.fullmatch(words[1]):
        person = "person:" + words[1]
        return ("notify", person) if person in PERSON_SET else ("unknown_person",)
    if verb in ("track", "escalate") and n == 2 and _ID_RE.fullmatch(words[1]):
        return (verb, "parcel:" + words[1])
    if verb == "reroute" and n > 3 and words[2] == "to" and _ID_RE.fullmatch(words[1]):
        address = " ".join(words[3:])
        return (
            "reroute",
            "parcel:" + words[1],
            address if _ADDRESS_RE.fullmatch(address) else None,
        )
    return _NOT_UNDERSTOOD


class ParcelFuncEnv(CoreDefaults, FuncEnv[ParcelState, str, str, int, bool, None, ParcelParams]):
    """The Parcel family as pure functions over an immutable ``ParcelState``.

    ``transition(state, action)`` is deterministic: its randomness is drawn from the
    episode seed carried in the state and the step number, so the same code serves as
    the planner's simulator and the state value is the snapshot. The ``rng`` and
    ``params`` arguments of the ``FuncEnv`` signatures are accepted but only ``initial``
    uses them: later steps read the parameters stored in the state.

    Args:
        params: the episode parameters; defaults to ``ParcelParams()``.
    """

    def __init__(self, params: ParcelParams | None = None) -> None:
        self._params = params or ParcelParams()
        self._truth = False  # whether ground truth was ever asked of this core
        super().__init__()
        p = self._params
        # Lines per step: reply, one event per active parcel, a booking per delivery,
        # three customer/depot messages, the chatter; plus headroom.
        self.observation_space = spaces.Text(
            max_length=_LINE_MAX * (2 * p.load + p.distractors + 8),
            min_length=1,
            charset=string.ascii_letters + string.digits + string.punctuation + " \n",
        )
        self.action_space = spaces.Text(
            max_length=512,
            min_length=0,
            charset=string.ascii_letters + string.digits + string.punctuation + " ",
        )

    def initial(self, rng: Any, params: ParcelParams | None = None) -> ParcelState:
        """Return the state at reset: ``load`` fresh bookings, step 0.

        Args:
            rng: a ``numpy.random.Generator`` (one draw makes the episode seed) or an int
                used as the episode seed directly.
            params: overrides the core's parameters for this episode.
        """
        params = params or self._params
        seed = int(rng.integers(2**62)) if hasattr(rng, "integers") else int(rng)
        key, rate = _episode_key(seed), params._chances[0]
        live: list[_Record] = []
        lines: list[str] = []
        said: list[str] = []
        active, index, used = (), immutables.Map(), immutables.Map()
        x = _start(key, -1)  # steps draw from (key, step >= 1)
        x = _say(x, rate, _INTRO, (), lines)
        for _ in range(params.load):
            x, active, index, used = _book(x, 0, rate, live, active, index, used, lines, said)
        _chatter(x, params.distractors, lines, said)
        commands = _commands(live)
        return _new(
            ParcelState,
            (
                params, seed, key, 0, active, tuple(live), immutables.Map(), index, used,
                "\n".join(lines), tuple(said), False, ((), ()), (), _admissible(commands, live),
                commands, 0, 0, 0,
            ),
        )  # fmt: skip

    def transition(
        self, state: ParcelState, action: str, rng: Any = None, params: Any = None
    ) -> ParcelState:
        """Apply the agent's command, then the world events due at the next step.

        A rejected command (unparsable, unknown parcel or person, bad address) spends the
        move with a reply and leaves the world as it was: no events, no probes; events
        that fell due meanwhile happen at the next accepted command.
        Probes are derived from the state when asked for (``ParcelState.probes``).
        """
        # The hot path: one function over locals (see "the step path"). One unpacking of
        # the state's fields (``_`` for those the step makes anew).
        (
            params, seed, key, step, before_active, before_live, retired, index, used, _, _,
            _, _, _, admissible, commands, _, score, max_score,
        ) = state  # fmt: skip
        step += 1
        chances = params._chances
        rate = chances[0]
        # The generator's state at the start of the step, ``_start(key, step)`` inlined.
        z = key ^ step * 40503
        z = ((z ^ (z >> 15)) * 0x2C1B3C6D) & _M30
        x = z ^ (z >> 13)
        if isinstance(action, str):
            command = _PARSED.get(action) or _parse(action)
        else:
            command = _NOT_UNDERSTOOD

        # -- the agent's command: its reply, reward, and the parcel it changes (if any) --
        active, live, lines, said = before_active, list(before_live), [], []
        verb, reward, acted = command[0], 0, ()
        if verb == "wait":
            x = _say(x, rate, _WAITED, (), lines)
        elif verb == "notify":
            person = command[1]
            x = _say(x, rate, _NOTIFIED, (_SURFACE[person],), lines)
            said.append(person)
        else:
            if verb in _REFUSALS:
                return self._carry(state, _rejected(state, x, _FORMS[verb], (), ()))
            pid = command[1]
            i = index.get(pid)
            if i is None:
                text = (_PARCEL.to_text(pid),)
                return self._carry(state, _rejected(state, x, _UNKNOWN_PARCEL, text, (pid,)))
            k = active.index(i) if i in active else -1  # -1: delivered, in ``retired``
            p = live[k] if k >= 0 else retired[i]
            label, status, new = _SURFACE[pid], p[_STATUS], None
            names = (pid,)
            if verb == "track":
                new, hub = _tracked(p, step), p[_LOCATION]
                texts = (label, _SURFACE[status], _SURFACE[hub], _ADDRESS_TEXT[p[_ADDRESS]])
                form, names = _TRACKED, (pid, hub)
            elif verb == "reroute":
                address = command[2]
                if address is None:
                    return self._carry(state, _rejected(state, x, _BAD_ADDRESS, (), ()))
                if status == "delivered":
                    new, form, texts = _status_stated(p, step), _TOO_LATE, (label,)
                elif address == p[_ADDRESS]:
                    new, form = _address_stated(p, step), _SAME_ADDRESS
                    texts = (label, _ADDRESS_TEXT[address])
                else:
                    if p[_REQUEST] == "open" and address == p[_REQUESTED]:
                        new = _readdressed(p, address, step, "served")
                        reward, admissible = 1, None  # open requests decide the reroutes
                    else:
                        new, reward = _readdressed(p, address, step, p[_REQUEST]), -1
                    form, texts = _REROUTED, (label, _ADDRESS_TEXT[address])
            elif status == "delivered":  # escalate
                new, form, texts = _status_stated(p, step), _TOO_LATE, (label,)
            elif status == "delayed":
                # The carrier moves it on at the next step instead of waiting out the delay.
                new, hub = _escalated(p, step), p[_LOCATION]
                form, texts, names = _ESCALATED, (label, _SURFACE[hub]), (pid, hub)
            else:
                form, texts = _NOT_DELAYED, (label,)
            x = _say(x, rate, form, texts, lines)
            said += names
            if new is not None:
                acted = ((i, p, new),)
                if k >= 0:
                    live[k] = new
                else:
                    retired = retired.set(i, new)

        # -- scans, delays, deliveries --
        # The hottest loop: _say() inlined (these kinds need no reordering).
        delivered = []
        for k, p in enumerate(live):
            if p[_DUE] > step:  # not yet (one that fell due on a rejected step is due now)
                continue
            # Two draws: delayed or not, and the gap to the next event.
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            delayed = x < _DELAY_CHANCE
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            pid = p[_ID]
            if delayed:
                low, span = _DELAY_SPAN
                live[k] = _delayed(p, step, step + low + ((x * span) >> 30))
                hub, form = p[_LOCATION], _DELAY
                texts, names = (_SURFACE[pid], _SURFACE[hub]), (pid, hub)
            elif p[_HOP] + 1 < len(route := p[_ROUTE]):
                hub, form = route[p[_HOP] + 1], _SCAN
                low, span = _PACE_SPANS[p[_PACE]]
                live[k] = _scanned(p, hub, step, step + low + ((x * span) >> 30))
                texts, names = (_SURFACE[pid], _SURFACE[hub]), (pid, hub)
            else:
                live[k] = _delivered(p, step)
                delivered.append(k)
                form = _DELIVERED
                texts, names = (_SURFACE[pid], _ADDRESS_TEXT[p[_ADDRESS]]), (pid,)
            variants, paraphrases = form
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            line = variants[0][0] if x >= rate else variants[1 + x * paraphrases // rate][0]
            lines.append(line % texts)
            said += names
        if delivered:
            for k in reversed(delivered):
                retired = retired.set(active[k], live.pop(k))
                active = active[:k] + active[k + 1 :]
            admissible = commands = None
            while len(live) < params.load:
                x, active, index, used = _book(
                    x, step, rate, live, active, index, used, lines, said
                )

        # -- customer and depot news, each with its chance --
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        if x < _REQUEST_CHANCE and (pool := _untouched(live, step)):
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            k = pool[(x * len(pool)) >> 30]
            x, live[k] = _request(x, step, chances, live[k], False, lines, said)
            max_score += 1
            admissible = None  # open requests decide the reroute commands
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        if x < _RECORRECT_CHANCE:
            pool = []
            for k, p in enumerate(live):
                if p[_REQUEST] == "open":
                    pool.append(k)
            if pool:
                x = (x * _LCG_MUL + _LCG_ADD) & _M30
                k = pool[(x * len(pool)) >> 30]
                x, live[k] = _request(x, step, chances, live[k], True, lines, said)
                admissible = None
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        if x < _FIX_CHANCE and (pool := _untouched(live, step)):
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            k = pool[(x * len(pool)) >> 30]
            p = live[k]
            x, address = _address(x, (p[_ADDRESS],))
            live[k] = _readdressed(p, address, step, p[_REQUEST])
            x = _say(x, rate, _FIX_ADDRESS, (_SURFACE[p[_ID]], _ADDRESS_TEXT[address]), lines)
            said.append(p[_ID])
        _chatter(x, params.distractors, lines, said)

        # -- the new state --
        if admissible is None:
            if commands is None:
                commands = _commands(live)
            admissible = _admissible(commands, live)
        new_state = _new(
            ParcelState,
            (
                params, seed, key, step, active, tuple(live), retired, index, used,
                "\n".join(lines), tuple(said), True, (before_active, before_live), acted,
                admissible, commands, reward, score + reward, max_score,
            ),
        )  # fmt: skip
        if self._truth:
            _carry_truth(state, new_state)
        return new_state

    def _carry(self, old: ParcelState, new: ParcelState) -> ParcelState:
        """``new``, set to derive its ground truth from ``old``'s once it is asked for."""
        if self._truth:
            _carry_truth(old, new)
        return new

    def truth(self, state: ParcelState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        # From now on transitions carry the facts and digest over (see _carry_truth):
        # without ground truth they are never computed at all.
        self._truth = True
        # The facts and the digest are cached on the state (the next state's are updated
        # from them); the rest is made here directly, as this asks for each only once.
        # The step's changes are found once, for both.
        changes = _changes(state)
        known = state.__dict__
        if (world := known.get("_world")) is None:
            world = known["_world"] = _make_world(state, changes)
        facts, digest = world
        action, event = _deltas(changes)
        return truth_info(
            state=facts,
            action=action,
            event=event,
            probes=self.probes(state),
            state_hash=_hash(state, digest),
            mentioned=state.said,
        )

    def probes(self, state: ParcelState) -> list[Probe]:
        """Return the probes due at ``state`` (none after a rejected command)."""
        return list(_probes(state)) if state.advanced else []

    @staticmethod
    def admissible_actions(state: ParcelState) -> list[str]:
        """Return the commands that do something here, sorted.

        ``wait``; ``track``/``escalate`` for each active parcel; ``notify`` for each
        receiver of an active parcel; ``reroute <id> to <address>`` for each active
        parcel and each address of an open request (so wrong reroutes are admissible
        too: choosing the right parcel is the task).
        """
        return list(state.admissible)


_PROBE_STREAM = 0x9B0BE5  # probes draw from (seed ^ this, step): apart from the transition's


def _corrected(state: ParcelState, rng: StepRng) -> _Record | None:
    """A uniformly chosen parcel whose address or request changed, or None if none did."""
    # By rejection (most parcels of a long episode were corrected), then by a scan.
    booked, record = len(state.index), state.record
    for _ in range(16):
        if (p := record(rng.below(booked)))[_CORRECTED]:
            return p
    corrected = [p for i in range(booked) if (p := record(i))[_CORRECTED]]
    return rng.choice(corrected) if corrected else None


_PROBE_KINDS = ("drift", "breakage", "confusion")
_BREAKAGE = (("sender", _SENDER), ("receiver", _RECEIVER))  # relation, record field


def _probes(state: ParcelState) -> tuple[Probe, ...]:
    """Questions due at ``state``'s step, about parcels already mentioned; old and recent.

    A function of the state alone, so it is computed only when ground truth is asked for.
    """
    rng = StepRng(state.seed ^ _PROBE_STREAM, state.step)
    if rng.random() >= state.params.probe_rate:
        return ()
    booked, record = len(state.index), state.record
    probes: dict[tuple[str, str], Probe] = {}
    # Records read by field position and probes built as plain tuples: this runs at
    # every third step with ground truth on (see _ParcelFields on why).
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        kind = rng.choice(_PROBE_KINDS)
        if kind == "confusion" and (p := _corrected(state, rng)) is not None:
            if p[_REQUESTED] and rng.random() < 0.5:
                probe = (p[_ID], "requested_address", p[_REQUESTED], p[_REQUESTED_AT], kind)
            else:
                probe = (p[_ID], "address", p[_ADDRESS], p[_ADDRESS_AT], kind)
        else:
            # Half the picks among every parcel ever booked (mostly old, long chains),
            # half among the active ones (recent, short chains).
            p = record(rng.below(booked)) if rng.random() < 0.5 else rng.choice(state.live)
            if kind == "breakage":
                relation, field = rng.choice(_BREAKAGE)
                probe = (p[_ID], relation, p[field], p[_BOOKED_AT], kind)
            elif rng.random() < 0.5:
                probe = (p[_ID], "location", p[_LOCATION], p[_LOCATION_AT], "drift")
            else:
                probe = (p[_ID], "status", p[_STATUS], p[_STATUS_AT], "drift")
        if probe[:2] not in probes:
            probes[probe[:2]] = _new(Probe, probe)
    return tuple(probes.values())


# --- the Gymnasium shell ---------------------------------------------------------------


class ParcelEnv(DiagnosticEnv):
    """``wmkit/Parcel-v0``: the shared diagnostic shell over ``ParcelFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ``max_score`` counts the requests
    issued so far. ``terminated`` is always False; the episode ends at ``horizon``.
    ``ParcelEnv.reader`` is the family's perfect reader, ``read``.

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        horizon: steps per episode, 20..1000 (default 200).
        load: parcels active at once, >= 1 (default 4).
        paraphrase_rate: probability a message uses a non-canonical template, 0..1.
        distractors: chatter lines per step, 0..50.
        indirection: probability a customer message names its parcel by description.
        probe_rate: probability that probes are due at a step, 0..1.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = ParcelFuncEnv
    params_class = ParcelParams
    reader = staticmethod(read)
