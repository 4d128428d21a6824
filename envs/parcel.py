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
reply says so, the move is spent and the world does not advance. Rewards: +1 when a
reroute sends a parcel to its open requested address, -1 when a reroute changes an
address to anything else, 0 otherwise.

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
from typing import Any, NamedTuple

import immutables
from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import CoreDefaults, DiagnosticEnv, StepRng, check_int, check_rate
from wmkit.envs.text import ClaimSpec, MessageKind, SlotType, TextBook, title_words
from wmkit.world.types import Claim, Delta, Fact, Probe, delta_info

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
_ID = re.compile(r"px-\d{4}")
_NAME = re.compile(r"[a-z]+")
_ADDRESS = re.compile(r"\d{1,4}(?: [a-z]{1,20}){1,4}")

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


# --- rendering on the step path --------------------------------------------------------
#
# ``TEXT.render`` builds a dict per line; the step path instead calls a function compiled
# per template from the same template strings (see ``_renderer``), with the surface forms
# of values memoised. The reader compiles the very same strings, so writer and reader
# agree.


class _Memo(dict):
    """A dict that fills itself from ``func`` on a miss (for a bounded set of keys)."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[[str], str]) -> None:
        super().__init__()
        self.func = func

    def __missing__(self, key: str) -> str:
        value = self[key] = self.func(key)
        return value


def _fast_to_text(slot_type: SlotType) -> Callable[[str], str]:
    # Persons, hubs and statuses come from fixed pools; addresses and parcel ids can come
    # from the agent (a reroute, an unknown parcel), so they get bounded LRU caches.
    if slot_type in (_ADDR, _PARCEL):
        return lru_cache(maxsize=16384)(slot_type.to_text)
    return _Memo(slot_type.to_text).__getitem__


_TO_TEXT = {slot: _fast_to_text(t) for slot, t in SLOT_TYPES.items()}


_Said = tuple[tuple[int, ...], tuple[str, ...]]
"""One line's values and the positions among them of entity ids (``wm.mentioned``)."""


class _Form(NamedTuple):
    """A message kind compiled for the step path.

    Attributes:
        lines: per template (variant 0 canonical), a function of the values (in the
            kind's slot order) -> the line; or the line itself for a template without
            slots.
        paraphrases: how many templates besides the canonical one.
        entities: positions of the entity slots (their values count as mentioned).
    """

    lines: tuple[Callable[[tuple[str, ...]], str] | str, ...]
    paraphrases: int
    entities: tuple[int, ...]


def _compile(templates: tuple[str, ...], slots: tuple[str, ...]) -> _Form:
    return _Form(
        tuple(_renderer(template, slots) for template in templates),
        len(templates) - 1,
        tuple(k for k, slot in enumerate(slots) if SLOT_TYPES[slot].entity),
    )


def _renderer(template: str, slots: tuple[str, ...]) -> Callable[[tuple[str, ...]], str] | str:
    """Compile ``template`` into a function of the values in ``slots`` order -> its line.

    For ``"{parcel} is at {hub}."`` with slots ``(parcel, hub)`` it builds
    ``lambda v: "%s is at %s." % (t0(v[0]), t1(v[1]))``, ``t0`` and ``t1`` being the
    slots' surface forms: generated, like ``collections.namedtuple`` does, because this
    runs for every line of every step and is several times faster than ``str.format``.
    """
    if not slots:
        return template
    parts, args = [], []
    for literal, slot, _, _ in string.Formatter().parse(template):
        parts.append(literal.replace("%", "%%"))
        if slot is not None:
            parts.append("%s")
            args.append(f"t{slots.index(slot)}(v[{slots.index(slot)}])")
    namespace = {f"t{k}": _TO_TEXT[slot] for k, slot in enumerate(slots)}
    exec(f"render = lambda v: {''.join(parts)!r} % ({', '.join(args)},)", namespace)
    return namespace["render"]


def _slot_set(template: str) -> set[str]:
    return {slot for _, slot, _, _ in string.Formatter().parse(template) if slot is not None}


# The order in which ``_Draft.say`` takes each kind's values (chatter is separate: its
# variants name different slots). Checked against the templates below.
_SAY_ORDER = {
    "intro": "",
    "booking": "parcel sender receiver address origin",
    "scan": "parcel hub",
    "delay": "parcel hub",
    "delivered": "parcel address",
    "request_id": "parcel new",
    "request_desc": "sender receiver new",
    "recorrect_id": "parcel old new",
    "recorrect_desc": "sender receiver old new",
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
        forms[name] = _compile(kind.templates, slots)
    if missing := set(TEXT.kinds) - set(forms) - {"chatter"}:
        raise ValueError(f"no say order for {sorted(missing)}")
    return forms


_FORMS = _compile_kinds()


def _chatter_lines(template: str) -> tuple[tuple[str, _Said | None], ...]:
    # Every line a chatter template can give (at most one slot, filled from a fixed
    # pool), rendered once, each with what it names.
    slots = tuple(_slot_set(template))
    if not slots:
        return ((template, None),)
    if slots not in (("person",), ("hub",)):
        raise ValueError(f"chatter names one person or one hub: {template!r}")
    pool = PERSONS if slots == ("person",) else HUBS
    render = _renderer(template, slots)
    return tuple((render((v,)), ((0,), (v,))) for v in pool)


def _chatter_table() -> tuple[tuple[str, _Said | None], ...]:
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
# seeding ``random.Random`` alone would cost a third of a step. The draft keeps the
# generator's state and steps it inline where draws are frequent: a method call costs
# more than the draw. Draws use the high bits, the good ones of an LCG:
# ``(x * n) >> 30`` is uniform in [0, n), and ``x < _chance(p)`` happens with
# probability ``p``.

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


def _start(seed: int, step: int) -> int:
    """The generator's state at the start of ``step``: a hash of (seed, step)."""
    # Steps spread apart by an odd multiplier (small: the product stays below 2**30 for
    # any horizon), then one xorshift-multiply round.
    z = _episode_key(seed) ^ step * 40503
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
class ParcelParams:
    """Episode parameters; validated on construction.

    Attributes:
        horizon: steps per episode, 20..1000.
        load: parcels active at once, >= 1 (bounded so ids and descriptions stay unique).
        paraphrase_rate: probability a message uses a non-canonical template.
        distractors: chatter lines per step, 0..50.
        indirection: probability a customer message names its parcel by description.
        probe_rate: probability that probes are due at a step.

    Raises:
        TypeError: a parameter has the wrong type.
        ValueError: a parameter is out of range.
    """

    horizon: int = 200
    load: int = 4
    paraphrase_rate: float = 0.5
    distractors: int = 1
    indirection: float = 0.7
    probe_rate: float = 0.3

    def __post_init__(self) -> None:
        check_int("horizon", self.horizon, 20, 1000)
        check_int("load", self.load, 1)
        check_int("distractors", self.distractors, 0, 50)
        for name in ("paraphrase_rate", "indirection", "probe_rate"):
            check_rate(name, getattr(self, name))
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


_new = tuple.__new__  # builds a Parcel from a tuple without NamedTuple's slow __new__


class Parcel(_ParcelFields):
    """One parcel: its facts, its hidden schedule, and when each fact was last stated.

    ``requested`` is ``""`` until a customer asks; ``request`` is ``none``, ``open`` or
    ``served``. ``*_at`` fields are the steps of the observations that last stated a
    fact (probe anchors); ``requested_at`` is the booking step when the request named
    the parcel by description. ``corrected`` says whether its address or request
    changed after booking. ``facts`` and ``digest`` are derived from the fields.

    A parcel changes only through the methods below, each returning a new one; they
    splice tuples by field position (``_replace`` costs several times as much, and a
    step builds one or two parcels), so they follow the field order above. They
    concatenate tuples, cheaper in CPython than unpacking slices into a display.
    """

    # A subclass of the NamedTuple (which has no __dict__) so that the derived values can
    # be cached per parcel version: only ground truth needs them, so an episode without
    # ground truth never pays for them, and one with it computes each version's once.

    def scanned(self, hub: str, step: int, due: int) -> Parcel:
        """Arrived at the next hub of its route, in transit, next event at ``due``."""
        p, moved = self, (self[12] + 1, hub, step, "in_transit", step, due)
        return _new(Parcel, p[:12] + moved)

    def delayed(self, step: int, due: int) -> Parcel:
        """Held up where it is until ``due``."""
        return _new(Parcel, self[:14] + (step, "delayed", step, due))  # noqa: RUF005

    def escalated(self, step: int) -> Parcel:
        """Moving again: its next event comes at the next step."""
        return _new(Parcel, self[:14] + (step, "in_transit", step, step + 1))  # noqa: RUF005

    def delivered(self, step: int) -> Parcel:
        """Delivered to its address; no more events."""
        p = self
        return _new(Parcel, p[:7] + (step,) + p[8:15] + ("delivered", step, -1))  # noqa: RUF005

    def tracked(self, step: int) -> Parcel:
        """Status, location and address all stated at ``step``."""
        p = self
        return _new(Parcel, p[:7] + (step,) + p[8:14] + (step, p[15], step, p[17]))  # noqa: RUF005

    def status_stated(self, step: int) -> Parcel:
        """Status stated at ``step``."""
        return _new(Parcel, self[:16] + (step, self[17]))  # noqa: RUF005

    def address_stated(self, step: int) -> Parcel:
        """Address stated at ``step``."""
        return _new(Parcel, self[:7] + (step,) + self[8:])  # noqa: RUF005

    def readdressed(self, address: str, step: int, request: str) -> Parcel:
        """Sent to ``address`` (stated at ``step``), its request now ``request``."""
        p = self
        changed = (address, step, p[8], request, p[10], True)
        return _new(Parcel, p[:6] + changed + p[12:])

    def requested_to(self, address: str, anchor: int) -> Parcel:
        """An open request to send it to ``address``, identified by step ``anchor``."""
        return _new(Parcel, self[:8] + (address, "open", anchor, True) + self[12:])  # noqa: RUF005

    @_cached
    def facts(self) -> tuple[Fact, ...]:
        """The parcel's facts, sorted by relation (so ``wm.state`` needs no sort)."""
        s = self.id
        facts = [(s, "address", self.address), (s, "location", self.location)]
        facts.append((s, "receiver", self.receiver))
        if self.requested:
            facts.append((s, "requested_address", self.requested))
        facts += [(s, "sender", self.sender), (s, "status", self.status)]
        return tuple([_new(Fact, fact) for fact in facts])

    @_cached
    def digest(self) -> int:
        """A stable 64-bit digest of every field (the state hash sums them)."""
        # marshal's version 0 format writes equal values as equal bytes (it has no
        # references or interned strings), and writes them faster than repr().
        raw = marshal.dumps(tuple(self), 0)
        return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big")


_Change = tuple[Parcel | None, Parcel]
"""A parcel before and after one phase of a step; ``None`` before a booking."""

_Touched = tuple[int, Parcel | None]
"""A parcel changed in one phase of a step: its index, and itself before the phase."""


_Commands = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
"""Per active parcel in id order ``reroute <id> to ``; the commands before the reroutes;
those after them."""


class _ParcelStateFields(NamedTuple):  # the fields of ``ParcelState``
    params: ParcelParams
    seed: int
    step: int
    parcels: immutables.Map[int, Parcel]
    index: immutables.Map[str, int]
    active: tuple[int, ...]
    used_pairs: immutables.Map[tuple[str, str], None]
    text: str
    said: tuple[_Said, ...]
    advanced: bool
    action_touched: tuple[_Touched, ...]
    event_touched: tuple[_Touched, ...]
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
        step: steps taken since reset (0 at reset).
        parcels: every parcel ever booked, by its index (0, 1, ... in booking order).
            A persistent map, so that a step costs the same late in an episode as early
            on: changing a parcel shares the rest with the previous step's map instead
            of copying every parcel ever booked.
        index: each parcel's index by its id (the ids taken, never reused).
        active: indices of parcels not yet delivered, in booking order.
        used_pairs: (sender, receiver) pairs taken, as the keys of a persistent map (a
            booking shares structure with the previous step's instead of copying them
            all); never reused, so descriptions are unambiguous.
        text: this step's observation, one message per line.
        said: the values of this step's lines that name something (see ``mentioned``).
        advanced: whether the world moved on into this state (False at reset and
            after a rejected command); probes come only then.
        action_touched: the parcels the agent's command changed this step, each as
            ``(index, version before)`` (``None`` before a booking).
        event_touched: the same for the world events of this step.
        admissible: the admissible commands, sorted.
        commands: the parts of them that only the active parcels decide (see
            ``_commands``), kept to rebuild the rest cheaply when a request changes.
        reward: this step's reward.
        score: cumulative reward.
        max_score: requests issued so far (each can be served once for +1).

    Derived on first use (only ground truth needs them): ``probes``, ``mentioned``,
    ``action_changes``, ``event_changes``, ``action_delta``, ``event_delta``, ``facts``
    and ``digest``.
    """

    # A NamedTuple, being cheaper to build than a frozen dataclass (one per step),
    # subclassed so that the derived values below can be cached on first use.

    @_cached
    def probes(self) -> tuple[Probe, ...]:
        """Probes due at this step (drawn from their own stream of the step's randomness)."""
        return _probes(self) if self.advanced else ()

    @_cached
    def mentioned(self) -> tuple[str, ...]:
        """Sorted entity ids named in this step's observation."""
        return tuple(sorted({values[k] for entities, values in self.said for k in entities}))

    @_cached
    def action_changes(self) -> tuple[_Change, ...]:
        """``(before, after)`` of each parcel the agent's command changed this step."""
        after_command = dict(self.event_touched)  # the events' "before" where they came next
        parcels = self.parcels
        changes = tuple([(old, after_command.get(i, parcels[i])) for i, old in self.action_touched])
        _derive_facts(changes)
        return changes

    @_cached
    def event_changes(self) -> tuple[_Change, ...]:
        """``(before, after)`` of each parcel the world events changed this step."""
        parcels = self.parcels
        changes = tuple([(old, parcels[i]) for i, old in self.event_touched])
        _derive_facts(changes)
        return changes

    @_cached
    def action_delta(self) -> Delta:
        """Fact change caused by the agent's command this step."""
        return _delta(self.action_changes)

    @_cached
    def event_delta(self) -> Delta:
        """Fact change caused by scheduled world events this step."""
        return _delta(self.event_changes)

    @property
    def facts(self) -> tuple[Fact, ...]:
        """Every fact of the world, sorted (``wm.state``)."""
        return tuple(self._fact_list)

    @_cached
    def _fact_list(self) -> list[Fact]:
        # A list, never changed once made, so that a splice and ``wm.state`` copy it once
        # each. Once the previous state's is known, spliced from it (see _Draft.freeze):
        # only the parcels this step changed are redone.
        before = self.__dict__.pop("_facts_before", None)
        if before is not None:
            return _splice(before, self.action_changes + self.event_changes)
        by_id = sorted(self.parcels.values())  # parcels sort by their id, the first field
        return list(chain.from_iterable([p.facts for p in by_id]))

    @_cached
    def digest(self) -> int:
        """Sum of parcel digests mod 2**64 (the world part of ``state_hash``).

        The next step's state gets it incrementally once it is known (see ``_Draft.freeze``).
        """
        return sum(p.digest for p in self.parcels.values()) % 2**64


def state_hash(state: ParcelState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step and every parcel's facts, hidden schedule and
    anchors: equal hashes mean the same world at the same step of the same episode, the
    transposition key for search. The observation, probes and score are left out. Cheap:
    once a state's digest is known, later steps update it by the parcels they change.
    """
    head = hashlib.blake2b(b"%d/%d" % (state.seed, state.step), digest_size=8).digest()
    return f"{(int.from_bytes(head, 'big') + state.digest) % 2**64:016x}"


def _refacts(old: Parcel, new: Parcel) -> tuple[Fact, ...]:
    """``new``'s facts, reusing ``old``'s for the values that did not change (most)."""
    before, s = old.facts, new.id
    if (
        new.address == old.address
        and new.location == old.location
        and new.requested == old.requested
        and new.status == old.status
    ):
        return before  # the usual case, kept identical so that comparing them is quick
    k = 1 if old.requested else 0  # then old's sender and status sit one further on
    facts = [
        before[0] if new.address == old.address else _new(Fact, (s, "address", new.address)),
        before[1] if new.location == old.location else _new(Fact, (s, "location", new.location)),
        before[2],  # the receiver never changes
    ]
    if new.requested:
        same = k and new.requested == old.requested
        facts.append(before[3] if same else _new(Fact, (s, "requested_address", new.requested)))
    facts.append(before[3 + k])  # nor does the sender
    facts.append(
        before[4 + k] if new.status == old.status else _new(Fact, (s, "status", new.status))
    )
    return tuple(facts)


def _derive_facts(changes: tuple[_Change, ...]) -> None:
    """Give each changed parcel its facts, derived from its previous version's.

    Run on the changes of the command, then of the events, so that a parcel changed by
    both derives from its version in between.
    """
    for old, new in changes:
        if old is not None and "facts" not in (known := new.__dict__):
            known["facts"] = _refacts(old, new)


def _splice(facts: list[Fact], changes: tuple[_Change, ...]) -> list[Fact]:
    """Return the sorted ``facts`` with each changed parcel's run of facts replaced."""
    net: dict[str, _Change] = {}  # a parcel changed by the command and by an event
    for old, new in changes:
        net[new.id] = (net[new.id][0] if new.id in net else old, new)
    # Where each parcel's run starts: facts sort by subject first, and (pid,) sorts just
    # before every fact about pid. A new parcel's run is empty in ``facts``. Replacing
    # from the last run back keeps the earlier positions valid.
    runs = sorted(
        ((bisect.bisect_left(facts, (pid,)), pid, old, new) for pid, (old, new) in net.items()),
        reverse=True,
    )
    spliced = list(facts)
    for start, _, old, new in runs:
        if old is None:
            spliced[start:start] = new.facts
        elif old.facts is not new.facts:
            spliced[start : start + len(old.facts)] = new.facts
    return spliced


def _delta(changes: tuple[_Change, ...]) -> Delta:
    added: list[Fact] = []
    removed: list[Fact] = []
    for old, new in changes:
        if old is None:
            added += new.facts
        elif old.facts is new.facts:
            continue
        elif len(old.facts) == len(new.facts):  # the same relations, in the same order
            for before, after in zip(old.facts, new.facts, strict=True):
                if before is not after and before != after:  # mostly the very same Fact
                    removed.append(before)
                    added.append(after)
        else:
            old_facts, new_facts = set(old.facts), set(new.facts)
            added += [fact for fact in new.facts if fact not in old_facts]
            removed += [fact for fact in old.facts if fact not in new_facts]
    # Each parcel changes at most once in a phase, so there are no duplicates.
    added.sort()
    removed.sort()
    return _new(Delta, (tuple(added), tuple(removed)))


class _Draft:
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Transitions stay pure: the draft changes a mutation of the state's persistent map of
    parcels and its own lists, never the input state. ``touched`` remembers each parcel
    as it was when the current phase (agent command, then world events) first changed
    it, to split the delta by cause. ``admissible`` is the input state's commands until
    an open request or the active parcels change, then None; ``commands`` likewise until
    the active parcels change. ``x`` is the random generator's state.
    """

    __slots__ = (
        "active", "admissible", "commands", "index", "lines", "max_score", "params",
        "parcels", "rate", "said", "state", "step", "touched", "used_pairs", "x",
    )  # fmt: skip

    def __init__(self, state: ParcelState, step: int, seed_step: int) -> None:
        self.state = state
        # One unpacking of the state's fields, cheaper than reading them one by one (``_``
        # for those the draft makes anew).
        (
            params, seed, _, parcels, self.index, active, self.used_pairs, _, _, _, _, _,
            self.admissible, self.commands, _, _, self.max_score,
        ) = state  # fmt: skip
        self.params = params
        self.rate = params._chances[0]
        self.step = step
        self.x = _start(seed, seed_step)
        self.parcels = parcels.mutate()  # frozen again by freeze
        self.active = list(active)
        self.lines: list[str] = []
        self.said: list[_Said] = []
        self.touched: dict[int, Parcel | None] = {}

    def choice(self, seq: Any) -> Any:
        """Return a uniformly chosen element of the non-empty sequence ``seq``."""
        self.x = x = (self.x * _LCG_MUL + _LCG_ADD) & _M30
        return seq[(x * len(seq)) >> 30]

    # -- text --

    def say(self, kind: str, *values: str) -> None:
        """Add a line of ``kind`` (values in its ``_SAY_ORDER``); a paraphrase at the rate."""
        lines, paraphrases, entities = _FORMS[kind]
        line = lines[0]
        if paraphrases:
            # One draw decides both whether to paraphrase and which paraphrase: below the
            # rate's threshold, it is uniform in [0, rate).
            self.x = x = (self.x * _LCG_MUL + _LCG_ADD) & _M30
            if x < self.rate:
                line = lines[1 + x * paraphrases // self.rate]
        if values:
            line = line(values)
            if entities:
                self.said.append((entities, values))
        self.lines.append(line)

    def chatter(self, first: int) -> None:
        """Insert ``distractors`` chatter lines at random places after line ``first``."""
        lines, x = self.lines, self.x
        for _ in range(self.params.distractors):
            # Two draws: the line, and where it goes.
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            line, said = _CHATTER[(x * len(_CHATTER)) >> 30]
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            lines.insert(first + ((x * (len(lines) - first + 1)) >> 30), line)
            if said:
                self.said.append(said)
        self.x = x

    # -- parcels --

    def put(self, i: int, parcel: Parcel) -> None:
        self.touched.setdefault(i, self.parcels[i])
        self.parcels[i] = parcel

    def retire(self, i: int) -> None:
        self.active.remove(i)
        self.admissible = self.commands = None

    def changes(self) -> tuple[_Touched, ...]:
        """Return the parcels changed in the phase now ending, and start the next phase."""
        if not self.touched:
            return ()
        touched = tuple(self.touched.items())
        self.touched = {}
        return touched

    def find(self, pid: str) -> int | None:
        return self.index.get(pid)

    def book(self) -> None:
        """Book a parcel: a fresh id and (sender, receiver) pair, pace, route, address."""
        step, x, index, used = self.step, self.x, self.index, self.used_pairs
        # Fresh ids and pairs by rejection: capacity is validated against the horizon, so
        # a draw or two almost always do; past the horizon a scan takes over.
        for _ in range(64):
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            pid = f"parcel:px-{1000 + ((x * ID_CAPACITY) >> 30)}"
            if pid not in index:
                break
        else:
            pid = _first_free_id(index)
        n = len(PERSONS)
        for _ in range(64):
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            a = (x * n) >> 30
            x = (x * _LCG_MUL + _LCG_ADD) & _M30
            b = (x * (n - 1)) >> 30
            pair = (PERSONS[a], PERSONS[b + (b >= a)])
            if pair not in used:
                break
        else:
            pair = _first_free_pair(used)
        # Pace (weighted); the route: one draw among all of them (2 to 5 distinct hubs),
        # read as mixed-radix digits: its length, then each hub among those left.
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        pace = bisect.bisect_right(_PACE_CUMULATIVE, (x * _PACE_CUMULATIVE[-1]) >> 30)
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        u, longer = divmod((x * _ROUTES) >> 30, 4)  # the route has 2 + longer hubs
        hubs, route = list(HUBS), []
        for left in range(len(HUBS), len(HUBS) - 2 - longer, -1):
            u, k = divmod(u, left)
            route.append(hubs.pop(k))
        route = tuple(route)
        low, high = PACES[pace]
        x = (x * _LCG_MUL + _LCG_ADD) & _M30
        due = step + low + ((x * (high - low + 1)) >> 30)
        self.x = x
        address = _address(self, ())
        sender, receiver = pair
        # In field order: id, sender, receiver, route, pace, booked_at, address,
        # address_at, requested, request, requested_at, corrected, hop, location,
        # location_at, status, status_at, due.
        parcel = _new(Parcel, (
            pid, sender, receiver, route, pace, step, address, step, "", "none", -1, False,
            0, route[0], step, "booked", step, due,
        ))  # fmt: skip
        i = len(self.parcels)
        self.parcels[i] = parcel
        self.touched[i] = None
        self.active.append(i)
        self.admissible = self.commands = None
        self.used_pairs = used.set(pair, None)
        self.index = index.set(pid, i)
        self.say("booking", pid, sender, receiver, address, route[0])

    def freeze(
        self,
        reward: int,
        action_touched: tuple[_Touched, ...],
        event_touched: tuple[_Touched, ...],
        advanced: bool,
    ) -> ParcelState:
        admissible, commands = self.admissible, self.commands
        if admissible is None:
            active = [self.parcels[i] for i in self.active]
            if commands is None:
                commands = _commands(active)
            admissible = _admissible(commands, active)
        old = self.state
        state = _new(
            ParcelState,
            (
                self.params,
                old.seed,
                self.step,
                self.parcels.finish(),
                self.index,
                tuple(self.active),
                self.used_pairs,
                "\n".join(self.lines),
                tuple(self.said),
                advanced,
                action_touched,
                event_touched,
                admissible,
                commands,
                reward,
                old.score + reward,
                self.max_score,
            ),
        )
        # Once a digest is known (ground truth on), keep it incremental: hash only the
        # parcels this step changed, and prime the cached property of the new state.
        # Without ground truth no digest is ever computed.
        known = old.__dict__  # empty unless ground truth was asked for
        if not known:
            return state
        digest = known.get("digest")
        if digest is not None:
            net = dict(event_touched)
            net.update(action_touched)  # each parcel as it was before the step
            parcels = state.parcels
            for i, before in net.items():
                digest += parcels[i].digest - (before.digest if before is not None else 0)
            state.__dict__["digest"] = digest % 2**64
        # Likewise all facts, but only when asked for: keep the old ones to splice.
        if (facts := known.get("_fact_list")) is not None:
            state.__dict__["_facts_before"] = facts
        return state


def _first_free_id(taken: immutables.Map[str, int]) -> str:
    """The first tracking id not ``taken``."""
    for n in range(1000, 1000 + ID_CAPACITY):
        if (pid := f"parcel:px-{n}") not in taken:
            return pid
    raise RuntimeError("ran out of unique tracking ids; lower load or horizon")


def _first_free_pair(used: immutables.Map[tuple[str, str], None]) -> tuple[str, str]:
    """The first (sender, receiver) pair not in ``used``."""
    for pair in ((a, b) for a in PERSONS for b in PERSONS if a != b):
        if pair not in used:
            return pair
    raise RuntimeError("ran out of unique sender/receiver pairs; lower load or horizon")


_ADDRESSES = 99 * len(STREETS) * len(SUFFIXES)  # house numbers 1..99 on every street
_ROUTES = 4 * math.perm(len(HUBS), 5)  # route lengths 2..5, times the longest routes


def _address(d: _Draft, avoid: tuple[str, ...]) -> str:
    # One draw among all the addresses.
    while True:
        d.x = x = (d.x * _LCG_MUL + _LCG_ADD) & _M30
        number, street = divmod((x * _ADDRESSES) >> 30, len(STREETS))
        number, suffix = divmod(number, len(SUFFIXES))
        address = f"{1 + number} {STREETS[street]} {SUFFIXES[suffix]}"
        if address not in avoid:
            return address


# ``ParcelFuncEnv.admissible_actions`` defines the commands. They are sorted without a
# sort of the whole list: the verbs sort escalate < notify < reroute < track < wait, and
# ids have a fixed width, so each group is in order. They are rebuilt only when the
# active parcels or their open requests change; other steps carry them over.


def _verbs(pid: str) -> tuple[str, str, str]:
    short = pid.removeprefix("parcel:")
    return f"escalate {short}", f"track {short}", f"reroute {short} to "


# Each parcel's commands, made once per tracking id (at most ID_CAPACITY of them).
_VERBS = _Memo(_verbs)
_NOTIFY_COMMAND = _Memo(lambda person: "notify " + person.removeprefix("person:"))


def _commands(active: list[Parcel]) -> _Commands:
    """The parts of the commands that the active parcels alone decide."""
    escalate, track, reroute, receivers = [], [], [], set()
    for p in sorted(active):  # parcels sort by their id, the first field
        e, t, r = _VERBS[p.id]
        escalate.append(e)
        track.append(t)
        reroute.append(r)
        receivers.add(p.receiver)
    escalate += [_NOTIFY_COMMAND[person] for person in sorted(receivers)]
    track.append("wait")
    return tuple(reroute), tuple(escalate), tuple(track)


def _admissible(commands: _Commands, active: list[Parcel]) -> tuple[str, ...]:
    """All commands: ``commands`` with a reroute per active parcel and open request."""
    reroute, head, tail = commands
    wanted = set()
    for p in active:
        if p.request == "open":
            wanted.add(p.requested)
    if not wanted:
        return head + tail
    addresses = sorted(wanted)
    admissible = list(head)
    for prefix in reroute:
        for address in addresses:
            admissible.append(prefix + address)
    admissible += tail
    return tuple(admissible)


# --- the pure core ---------------------------------------------------------------------

_NOT_UNDERSTOOD = ("not_understood",)
_REFUSALS = frozenset({"not_understood", "unknown_person"})  # what _parse refuses as is


@lru_cache(maxsize=4096)  # agents repeat commands (the admissible ones above all)
def _parse(action: str) -> tuple[str, ...]:
    """Return ``(verb, *args)`` for a command, or ``(reply kind,)`` for one refused as is.

    Verbs: ``wait``; ``notify`` person; ``track``/``escalate`` parcel; ``reroute`` parcel
    address, the address None if we cannot ship to it (refused once the parcel is known
    to exist). Case and spacing are ignored: the command is its lower-cased words.
    """
    words = action.lower().split()
    verb, n = (words[0], len(words)) if words else ("", 0)
    if verb == "wait" and n == 1:
        return ("wait",)
    if verb == "notify" and n == 2 and _NAME.fullmatch(words[1]):
        person = "person:" + words[1]
        return ("notify", person) if person in PERSON_SET else ("unknown_person",)
    if verb in ("track", "escalate") and n == 2 and _ID.fullmatch(words[1]):
        return (verb, "parcel:" + words[1])
    if verb == "reroute" and n > 3 and words[2] == "to" and _ID.fullmatch(words[1]):
        address = " ".join(words[3:])
        return ("reroute", "parcel:" + words[1], address if _ADDRESS.fullmatch(address) else None)
    return _NOT_UNDERSTOOD


def _untouched(d: _Draft, step: int) -> list[int]:
    """Active parcels booked before ``step`` with no request yet."""
    parcels = d.parcels
    return [i for i in d.active if (p := parcels[i]).request == "none" and p.booked_at < step]


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
        none: tuple = ()
        blank = ParcelState(
            params=params, seed=seed, step=0, parcels=immutables.Map(), index=immutables.Map(),
            active=none,
            used_pairs=immutables.Map(), text="", said=none, advanced=False,
            action_touched=none, event_touched=none, admissible=none, commands=None, reward=0,
            score=0, max_score=0,
        )  # fmt: skip
        draft = _Draft(blank, 0, -1)  # steps draw from (seed, step >= 1)
        draft.say("intro")
        for _ in range(params.load):
            draft.book()
        draft.chatter(first=1)
        return draft.freeze(0, (), draft.changes(), False)

    def transition(
        self, state: ParcelState, action: str, rng: Any = None, params: Any = None
    ) -> ParcelState:
        """Apply the agent's command, then the world events due at the next step.

        A rejected command (unparsable, unknown parcel or person, bad address) spends the
        move with a reply and leaves the world as it was: no events, no probes.
        Probes are derived from the state when asked for (``ParcelState.probes``).
        """
        step = state.step + 1
        draft = _Draft(state, step, step)
        reward, accepted = self._command(draft, action)
        if not accepted:
            return draft.freeze(0, (), (), False)
        action_touched = draft.changes()
        self._events(draft)
        event_touched = draft.changes()
        draft.chatter(first=1)
        return draft.freeze(reward, action_touched, event_touched, True)

    def observation(self, state: ParcelState, rng: Any = None, params: Any = None) -> str:
        """Return the text of ``state``'s step, one message per line."""
        return state.text

    def truth_info(self, state: ParcelState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        return {
            "wm.state": list(state._fact_list),
            "wm.delta": delta_info(state.action_delta, state.event_delta),
            "wm.probes": list(state.probes),
            "wm.state_hash": state_hash(state),
            "wm.mentioned": list(state.mentioned),
        }

    @staticmethod
    def admissible_actions(state: ParcelState) -> list[str]:
        """Return the commands that do something here, sorted.

        ``wait``; ``track``/``escalate`` for each active parcel; ``notify`` for each
        receiver of an active parcel; ``reroute <id> to <address>`` for each active
        parcel and each address of an open request (so wrong reroutes are admissible
        too: choosing the right parcel is the task).
        """
        return list(state.admissible)

    # -- transition pieces --

    def _command(self, d: _Draft, action: Any) -> tuple[int, bool]:
        """Apply the agent's command to the draft; return ``(reward, accepted)``."""
        command = _parse(action) if isinstance(action, str) else _NOT_UNDERSTOOD
        verb = command[0]
        if verb == "wait":
            d.say("waited")
            return 0, True
        if verb == "notify":
            d.say("notified", command[1])
            return 0, True
        if verb in _REFUSALS:
            d.say(verb)
            return 0, False
        pid = command[1]
        i = d.find(pid)
        if i is None:
            d.say("unknown_parcel", pid)
            return 0, False
        p, step = d.parcels[i], d.step
        if verb == "reroute":
            address = command[2]
            if address is None:
                d.say("bad_address")
                return 0, False
            return self._reroute(d, i, p, address), True
        if verb == "track":
            d.put(i, p.tracked(step))
            d.say("tracked", pid, p.status, p.location, p.address)
        elif p.status == "delivered":
            d.put(i, p.status_stated(step))
            d.say("too_late", pid)
        elif p.status == "delayed":
            # The carrier moves it on at the next step instead of waiting out the delay.
            d.put(i, p.escalated(step))
            d.say("escalated", pid, p.location)
        else:
            d.say("not_delayed", pid)
        return 0, True

    def _reroute(self, d: _Draft, i: int, p: Parcel, address: str) -> int:
        pid, step = p.id, d.step
        if p.status == "delivered":
            d.put(i, p.status_stated(step))
            d.say("too_late", pid)
            return 0
        if address == p.address:
            d.put(i, p.address_stated(step))
            d.say("same_address", pid, address)
            return 0
        right = p.request == "open" and address == p.requested
        if right:
            d.put(i, p.readdressed(address, step, "served"))
            d.admissible = None  # open requests decide the reroute commands
        else:
            d.put(i, p.readdressed(address, step, p.request))
        d.say("rerouted", pid, address)
        return 1 if right else -1

    def _events(self, d: _Draft) -> None:
        """Scans, delays and deliveries due now; refill bookings; customer and depot news."""
        step, parcels, touched = d.step, d.parcels, d.touched
        for i in tuple(d.active):
            p = parcels[i]
            if p.due > step:  # due now, or on a step whose command was rejected
                continue
            # Two draws: delayed or not, and the gap to the next event. (What put() does
            # is inlined: this loop is the hottest.)
            d.x = x = (d.x * _LCG_MUL + _LCG_ADD) & _M30
            delayed = x < _DELAY_CHANCE
            d.x = x = (x * _LCG_MUL + _LCG_ADD) & _M30
            touched.setdefault(i, p)
            if delayed:
                low, high = DELAY_STEPS
                parcels[i] = p.delayed(step, step + low + ((x * (high - low + 1)) >> 30))
                d.say("delay", p.id, p.location)
            elif p.hop < len(p.route) - 1:
                hub = p.route[p.hop + 1]
                low, high = PACES[p.pace]
                parcels[i] = p.scanned(hub, step, step + low + ((x * (high - low + 1)) >> 30))
                d.say("scan", p.id, hub)
            else:
                parcels[i] = p.delivered(step)
                d.retire(i)
                d.say("delivered", p.id, p.address)
        while len(d.active) < d.params.load:
            d.book()

        # Customer and depot news, each with its chance (the draws inline: see _Draft).
        d.x = x = (d.x * _LCG_MUL + _LCG_ADD) & _M30
        if x < _REQUEST_CHANCE and (pool := _untouched(d, step)):
            i = d.choice(pool)
            self._request(d, i, parcels[i], recorrect=False)
        d.x = x = (d.x * _LCG_MUL + _LCG_ADD) & _M30
        if x < _RECORRECT_CHANCE and (
            pool := [i for i in d.active if parcels[i].request == "open"]
        ):
            i = d.choice(pool)
            self._request(d, i, parcels[i], recorrect=True)
        d.x = x = (d.x * _LCG_MUL + _LCG_ADD) & _M30
        if x < _FIX_CHANCE and (pool := _untouched(d, step)):
            i = d.choice(pool)
            p = parcels[i]
            address = _address(d, (p.address,))
            d.put(i, p.readdressed(address, step, p.request))
            d.say("fix_address", p.id, address)

    def _request(self, d: _Draft, i: int, p: Parcel, *, recorrect: bool) -> None:
        step = d.step
        new = _address(d, (p.address, p.requested))
        d.x = x = (d.x * _LCG_MUL + _LCG_ADD) & _M30
        by_description = x < d.params._chances[1]
        # A description is resolved through the booking that stated sender and receiver,
        # so the answer depends on that older observation.
        d.put(i, p.requested_to(new, p.booked_at if by_description else step))
        d.admissible = None  # open requests decide the reroute commands
        if recorrect:
            if by_description:
                d.say("recorrect_desc", p.sender, p.receiver, p.requested, new)
            else:
                d.say("recorrect_id", p.id, p.requested, new)
        else:
            if by_description:
                d.say("request_desc", p.sender, p.receiver, new)
            else:
                d.say("request_id", p.id, new)
            d.max_score += 1


_PROBE_STREAM = 0x9B0BE5  # probes draw from (seed ^ this, step): apart from the transition's


def _corrected(parcels: immutables.Map[int, Parcel], rng: StepRng) -> Parcel | None:
    """A uniformly chosen parcel whose address or request changed, or None if none did."""
    # By rejection (most parcels of a long episode were corrected), then by a scan.
    for _ in range(16):
        if (p := parcels[rng.below(len(parcels))]).corrected:
            return p
    corrected = [p for i in range(len(parcels)) if (p := parcels[i]).corrected]
    return rng.choice(corrected) if corrected else None


def _probes(state: ParcelState) -> tuple[Probe, ...]:
    """Questions due at ``state``'s step, about parcels already mentioned; old and recent.

    A function of the state alone, so it is computed only when ground truth is asked for.
    """
    rng = StepRng(state.seed ^ _PROBE_STREAM, state.step)
    if rng.random() >= state.params.probe_rate:
        return ()
    parcels = state.parcels
    probes: dict[tuple[str, str], Probe] = {}
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        kind = rng.choice(("drift", "breakage", "confusion"))
        if kind == "confusion" and (p := _corrected(parcels, rng)) is not None:
            if p.requested and rng.random() < 0.5:
                probe = Probe(p.id, "requested_address", p.requested, p.requested_at, kind)
            else:
                probe = Probe(p.id, "address", p.address, p.address_at, kind)
        else:
            # Half the picks among every parcel ever booked (mostly old, long chains),
            # half among the active ones (recent, short chains).
            if rng.random() < 0.5:
                p = parcels[rng.below(len(parcels))]
            else:
                p = parcels[rng.choice(state.active)]
            if kind == "breakage":
                relation = rng.choice(("sender", "receiver"))
                probe = Probe(p.id, relation, getattr(p, relation), p.booked_at, kind)
            elif rng.random() < 0.5:
                probe = Probe(p.id, "location", p.location, p.location_at, "drift")
            else:
                probe = Probe(p.id, "status", p.status, p.status_at, "drift")
        probes.setdefault((probe.subject, probe.relation), probe)
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
