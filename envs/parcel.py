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
import random
import re
import string
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass
from itertools import accumulate, chain
from typing import Any, NamedTuple

import immutables
from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import CoreDefaults, DiagnosticEnv, check_int, check_rate
from wmkit.envs.text import ClaimSpec, Message, MessageKind, SlotType, TextBook, title_words
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
_ID = r"px-\d{4}"
_ADDRESS = re.compile(r"\d{1,4}(?: [a-z]{1,20}){1,4}")
_PARCEL_VERB = re.compile(rf"(track|escalate) ({_ID})")
_NOTIFY = re.compile(r"notify ([a-z]+)")
_REROUTE = re.compile(rf"reroute ({_ID}) to (.+)")

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

_CHATTER_SLOTS = tuple(
    tuple(name for _, name, _, _ in string.Formatter().parse(t) if name)
    for t in TEXT.kinds["chatter"].templates
)
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


# --- state -----------------------------------------------------------------------------


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


class _ParcelFields(NamedTuple):  # the fields of ``Parcel``
    id: str
    sender: str
    receiver: str
    address: str
    location: str
    status: str
    requested: str
    request: str
    route: tuple[str, ...]
    hop: int
    pace: int
    due: int
    booked_at: int
    location_at: int
    status_at: int
    address_at: int
    requested_at: int


class Parcel(_ParcelFields):
    """One parcel: its facts, its hidden schedule, and when each fact was last stated.

    ``requested`` is ``""`` until a customer asks; ``request`` is ``none``, ``open`` or
    ``served``. ``*_at`` fields are the steps of the observations that last stated a
    fact (probe anchors); ``requested_at`` is the booking step when the request named
    the parcel by description. ``facts`` and ``digest`` are derived from the fields.
    """

    # A subclass of the NamedTuple (which has no __dict__) so that the derived values can
    # be cached per parcel version: only ground truth needs them, so an episode without
    # ground truth never pays for them, and one with it computes each version's once.

    @_cached
    def facts(self) -> tuple[Fact, ...]:
        """The parcel's facts, sorted by relation (so ``wm.state`` needs no sort)."""
        s = self.id
        facts = [Fact(s, "address", self.address), Fact(s, "location", self.location)]
        facts.append(Fact(s, "receiver", self.receiver))
        if self.requested:
            facts.append(Fact(s, "requested_address", self.requested))
        facts += [Fact(s, "sender", self.sender), Fact(s, "status", self.status)]
        return tuple(facts)

    @_cached
    def digest(self) -> int:
        """A stable 64-bit digest of every field (the state hash sums them)."""
        raw = repr(tuple(self)).encode()
        return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big")


_Change = tuple[Parcel | None, Parcel]
"""A parcel before and after one phase of a step; ``None`` before a booking."""


class _ParcelStateFields(NamedTuple):  # the fields of ``ParcelState``
    params: ParcelParams
    seed: int
    step: int
    parcels: tuple[Parcel, ...]
    by_id: tuple[int, ...]
    active: tuple[int, ...]
    corrected: tuple[int, ...]
    used_ids: immutables.Map[str, None]
    used_pairs: immutables.Map[tuple[str, str], None]
    messages: tuple[Message, ...]
    probes: tuple[Probe, ...]
    action_changes: tuple[_Change, ...]
    event_changes: tuple[_Change, ...]
    admissible: tuple[str, ...]
    reward: int
    score: int
    max_score: int


class ParcelState(_ParcelStateFields):
    """The whole episode state at one step: an immutable value, the snapshot token.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from ``random.Random`` seeded by (seed, t).
        step: steps taken since reset (0 at reset).
        parcels: every parcel ever booked, in booking order.
        by_id: indices into ``parcels`` sorted by parcel id.
        active: indices of parcels not yet delivered, in booking order.
        corrected: indices of parcels whose address or request changed after booking.
        used_ids: parcel ids taken, as the keys of a persistent map: a booking shares
            structure with the previous step's instead of copying every id ever used.
        used_pairs: (sender, receiver) pairs taken, likewise; never reused, so
            descriptions are unambiguous.
        messages: this step's observation, one message per line.
        probes: probes due this step.
        action_changes: ``(before, after)`` of each parcel the agent's command changed
            this step (``before`` is None for a new booking).
        event_changes: the same for the world events of this step.
        admissible: the admissible commands, sorted.
        reward: this step's reward.
        score: cumulative reward.
        max_score: requests issued so far (each can be served once for +1).

    Derived on first use (only ground truth needs them): ``mentioned``,
    ``action_delta``, ``event_delta`` and ``digest``.
    """

    # A NamedTuple, being cheaper to build than a frozen dataclass (one per step),
    # subclassed so that the derived values below can be cached on first use.

    @_cached
    def mentioned(self) -> tuple[str, ...]:
        """Sorted entity ids named in this step's observation."""
        return tuple(TEXT.mentioned(self.messages))

    @_cached
    def action_delta(self) -> Delta:
        """Fact change caused by the agent's command this step."""
        return _delta(self.action_changes)

    @_cached
    def event_delta(self) -> Delta:
        """Fact change caused by scheduled world events this step."""
        return _delta(self.event_changes)

    @_cached
    def digest(self) -> int:
        """Sum of parcel digests mod 2**64 (the world part of ``state_hash``).

        The next step's state gets it incrementally once it is known (see ``_Draft.freeze``).
        """
        return sum(p.digest for p in self.parcels) % 2**64


def state_hash(state: ParcelState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step and every parcel's facts, hidden schedule and
    anchors: equal hashes mean the same world at the same step of the same episode, the
    transposition key for search. The observation, probes and score are left out. Cheap:
    once a state's digest is known, later steps update it by the parcels they change.
    """
    head = hashlib.blake2b(f"{state.seed}/{state.step}".encode(), digest_size=8).digest()
    return f"{(int.from_bytes(head, 'big') + state.digest) % 2**64:016x}"


def _step_rng(seed: int, step: int) -> random.Random:
    # Integer seeding is fast and stable across processes (no str hash randomisation).
    return random.Random(seed * 1_000_003 + step)


def _delta(changes: tuple[_Change, ...]) -> Delta:
    added: set[Fact] = set()
    removed: set[Fact] = set()
    for old, new in changes:
        new_facts = set(new.facts)
        old_facts = set(old.facts) if old is not None else set()
        added |= new_facts - old_facts
        removed |= old_facts - new_facts
    return Delta(tuple(sorted(added)), tuple(sorted(removed)))


class _Draft:
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Transitions stay pure: the draft copies the tuples it changes, never the input state.
    ``touched`` remembers each parcel as it was when the current phase (agent command,
    then world events) first changed it, to split the delta by cause. ``admissible`` is
    the input state's commands until something they depend on changes, then None.
    """

    def __init__(self, state: ParcelState, step: int, rng: random.Random) -> None:
        self.state = state
        self.params = state.params
        self.step = step
        self.rng = rng
        self.parcels = list(state.parcels)
        self.by_id = state.by_id
        self.active = list(state.active)
        self.corrected = state.corrected
        self.used_ids = state.used_ids
        self.used_pairs = state.used_pairs
        self.messages: list[Message] = []
        self.max_score = state.max_score
        self.touched: dict[int, Parcel | None] = {}
        self.admissible: tuple[str, ...] | None = state.admissible

    def say(self, kind: str, **values: str) -> None:
        n = TEXT.variants(kind)
        rate = self.params.paraphrase_rate
        variant = self.rng.randrange(1, n) if n > 1 and self.rng.random() < rate else 0
        self.messages.append(Message(kind, variant, tuple(values.items())))

    def put(self, i: int, parcel: Parcel) -> None:
        old = self.parcels[i]
        self.touched.setdefault(i, old)
        if parcel.request != old.request or parcel.requested != old.requested:
            self.admissible = None  # open requests decide the reroute commands
        self.parcels[i] = parcel

    def retire(self, i: int) -> None:
        self.active.remove(i)
        self.admissible = None

    def changes(self) -> tuple[_Change, ...]:
        """Return the parcels changed in the phase now ending, and start the next phase."""
        if not self.touched:
            return ()
        changes = tuple((old, self.parcels[i]) for i, old in self.touched.items())
        self.touched = {}
        return changes

    def mark_corrected(self, i: int) -> None:
        if i not in self.corrected:
            self.corrected = (*self.corrected, i)

    def find(self, pid: str) -> int | None:
        # by_id is sorted by parcel id: O(log n) lookup without a dict in the state.
        k = bisect.bisect_left(self.by_id, pid, key=lambda i: self.parcels[i].id)
        if k < len(self.by_id) and self.parcels[self.by_id[k]].id == pid:
            return self.by_id[k]
        return None

    def book(self) -> None:
        rng, step = self.rng, self.step
        pid = _fresh(
            lambda: f"parcel:px-{rng.randrange(1000, 10000)}",
            self.used_ids,
            lambda: (f"parcel:px-{n}" for n in range(1000, 10000)),
            "tracking ids",
        )
        sender, receiver = _fresh(
            lambda: tuple(rng.sample(PERSONS, 2)),
            self.used_pairs,
            lambda: ((a, b) for a in PERSONS for b in PERSONS if a != b),
            "sender/receiver pairs",
        )
        self.used_ids = self.used_ids.set(pid, None)
        self.used_pairs = self.used_pairs.set((sender, receiver), None)
        pace = rng.choices(range(len(PACES)), cum_weights=_PACE_CUMULATIVE)[0]
        route = tuple(rng.sample(HUBS, rng.randint(2, 5)))
        address = _address(rng, ())
        parcel = Parcel(
            id=pid, sender=sender, receiver=receiver, address=address,
            location=route[0], status="booked", requested="", request="none",
            route=route, hop=0, pace=pace, due=step + rng.randint(*PACES[pace]),
            booked_at=step, location_at=step, status_at=step, address_at=step,
            requested_at=-1,
        )  # fmt: skip
        i = len(self.parcels)
        self.parcels.append(parcel)
        self.touched[i] = None
        self.active.append(i)
        self.admissible = None
        k = bisect.bisect_left(self.by_id, pid, key=lambda j: self.parcels[j].id)
        self.by_id = (*self.by_id[:k], i, *self.by_id[k:])
        self.say(
            "booking",
            parcel=pid,
            sender=sender,
            receiver=receiver,
            address=address,
            origin=route[0],
        )

    def chatter(self, first: int) -> None:
        for _ in range(self.params.distractors):
            variant = self.rng.randrange(len(_CHATTER_SLOTS))
            values = tuple(
                (slot, self.rng.choice(PERSONS if slot == "person" else HUBS))
                for slot in _CHATTER_SLOTS[variant]
            )
            pos = self.rng.randint(first, len(self.messages))
            self.messages.insert(pos, Message("chatter", variant, values))

    def freeze(
        self,
        *,
        reward: int,
        action_changes: tuple[_Change, ...],
        event_changes: tuple[_Change, ...],
        probes: tuple[Probe, ...],
    ) -> ParcelState:
        admissible = self.admissible
        if admissible is None:
            admissible = _admissible([self.parcels[i] for i in self.active])
        state = ParcelState(
            params=self.params,
            seed=self.state.seed,
            step=self.step,
            parcels=tuple(self.parcels),
            by_id=self.by_id,
            active=tuple(self.active),
            corrected=self.corrected,
            used_ids=self.used_ids,
            used_pairs=self.used_pairs,
            messages=tuple(self.messages),
            probes=probes,
            action_changes=action_changes,
            event_changes=event_changes,
            admissible=admissible,
            reward=reward,
            score=self.state.score + reward,
            max_score=self.max_score,
        )
        # Once a digest is known (ground truth on), keep it incremental: hash only the
        # parcels this step changed, and prime the cached property of the new state.
        # Without ground truth no digest is ever computed.
        digest = self.state.__dict__.get("digest")
        if digest is not None:
            for old, new in action_changes + event_changes:
                digest += new.digest - (old.digest if old is not None else 0)
            state.__dict__["digest"] = digest % 2**64
        return state


def _fresh(
    draw: Callable[[], Any], used: Container, everything: Callable[[], Iterable], what: str
) -> Any:
    # Capacity is validated against the horizon, so a few draws almost always do;
    # stepping on past the horizon falls back to a scan before giving up loudly.
    for _ in range(64):
        if (value := draw()) not in used:
            return value
    for value in everything():
        if value not in used:
            return value
    raise RuntimeError(f"ran out of unique {what}; lower load or horizon")


def _address(rng: random.Random, avoid: tuple[str, ...]) -> str:
    while True:
        address = f"{rng.randint(1, 99)} {rng.choice(STREETS)} {rng.choice(SUFFIXES)}"
        if address not in avoid:
            return address


def _short(pid: str) -> str:
    return pid.removeprefix("parcel:")


def _admissible(active: list[Parcel]) -> tuple[str, ...]:
    # See ``ParcelFuncEnv.admissible_actions``. Built only when the active parcels or
    # their requests change; other steps carry the previous state's tuple over.
    ids = sorted(_short(p.id) for p in active)
    receivers = sorted({p.receiver.removeprefix("person:") for p in active})
    wanted = sorted({p.requested for p in active if p.request == "open"})
    # Already sorted without a sort of the whole list: the verbs sort escalate < notify <
    # reroute < track < wait, and ids have a fixed width, so each group is in order.
    return (
        *[f"escalate {pid}" for pid in ids],
        *[f"notify {name}" for name in receivers],
        *[f"reroute {pid} to {address}" for pid in ids for address in wanted],
        *[f"track {pid}" for pid in ids],
        "wait",
    )


# --- the pure core ---------------------------------------------------------------------


def _untouched(d: _Draft, step: int) -> list[int]:
    """Active parcels booked before ``step`` with no request yet."""
    return [i for i in d.active if d.parcels[i].request == "none" and d.parcels[i].booked_at < step]


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
            params=params, seed=seed, step=0, parcels=none, by_id=none, active=none,
            corrected=none, used_ids=immutables.Map(), used_pairs=immutables.Map(), messages=none,
            probes=none, action_changes=none, event_changes=none, admissible=none,
            reward=0, score=0, max_score=0,
        )  # fmt: skip
        draft = _Draft(blank, 0, _step_rng(seed, 0))
        draft.say("intro")
        for _ in range(params.load):
            draft.book()
        draft.chatter(first=1)
        return draft.freeze(reward=0, action_changes=(), event_changes=draft.changes(), probes=())

    def transition(
        self, state: ParcelState, action: str, rng: Any = None, params: Any = None
    ) -> ParcelState:
        """Apply the agent's command, then the world events due at the next step.

        A rejected command (unparsable, unknown parcel or person, bad address) spends the
        move with a reply and leaves the world as it was: no events, no probes.
        """
        step = state.step + 1
        draft = _Draft(state, step, _step_rng(state.seed, step))
        reward, accepted = self._command(draft, action)
        if not accepted:
            return draft.freeze(reward=0, action_changes=(), event_changes=(), probes=())
        action_changes = draft.changes()
        self._events(draft)
        event_changes = draft.changes()
        draft.chatter(first=1)
        probes = self._probes(draft)
        return draft.freeze(
            reward=reward, action_changes=action_changes, event_changes=event_changes, probes=probes
        )

    def observation(self, state: ParcelState, rng: Any = None, params: Any = None) -> str:
        """Return the text of ``state``'s step, one message per line."""
        return "\n".join(TEXT.render(m) for m in state.messages)

    def truth_info(self, state: ParcelState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        return {
            "wm.state": list(chain.from_iterable([state.parcels[i].facts for i in state.by_id])),
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
        words = " ".join(action.lower().split()) if isinstance(action, str) else ""
        if words == "wait":
            d.say("waited")
            return 0, True
        if m := _NOTIFY.fullmatch(words):
            person = "person:" + m.group(1)
            if person not in PERSON_SET:
                d.say("unknown_person")
                return 0, False
            d.say("notified", person=person)
            return 0, True
        m = _PARCEL_VERB.fullmatch(words) or _REROUTE.fullmatch(words)
        if m is None:
            d.say("not_understood")
            return 0, False
        pid = "parcel:" + (m.group(2) if m.re is _PARCEL_VERB else m.group(1))
        i = d.find(pid)
        if i is None:
            d.say("unknown_parcel", parcel=pid)
            return 0, False
        p, step = d.parcels[i], d.step
        if m.re is _REROUTE:
            address = m.group(2)
            if not _ADDRESS.fullmatch(address):
                d.say("bad_address")
                return 0, False
            return self._reroute(d, i, p, address), True
        if m.group(1) == "track":
            d.put(i, p._replace(status_at=step, location_at=step, address_at=step))
            d.say("tracked", parcel=pid, status=p.status, hub=p.location, address=p.address)
        elif p.status == "delivered":
            d.put(i, p._replace(status_at=step))
            d.say("too_late", parcel=pid)
        elif p.status == "delayed":
            # The carrier moves it on at the next step instead of waiting out the delay.
            d.put(
                i, p._replace(status="in_transit", status_at=step, location_at=step, due=step + 1)
            )
            d.say("escalated", parcel=pid, hub=p.location)
        else:
            d.say("not_delayed", parcel=pid)
        return 0, True

    def _reroute(self, d: _Draft, i: int, p: Parcel, address: str) -> int:
        pid, step = p.id, d.step
        if p.status == "delivered":
            d.put(i, p._replace(status_at=step))
            d.say("too_late", parcel=pid)
            return 0
        if address == p.address:
            d.put(i, p._replace(address_at=step))
            d.say("same_address", parcel=pid, address=address)
            return 0
        right = p.request == "open" and address == p.requested
        d.put(
            i,
            p._replace(address=address, address_at=step, request="served" if right else p.request),
        )
        d.mark_corrected(i)
        d.say("rerouted", parcel=pid, address=address)
        return 1 if right else -1

    def _events(self, d: _Draft) -> None:
        """Scans, delays and deliveries due now; refill bookings; customer and depot news."""
        rng, step, params = d.rng, d.step, d.params
        for i in tuple(d.active):
            p = d.parcels[i]
            if p.due != step:
                continue
            if rng.random() < P_DELAY:
                d.put(
                    i,
                    p._replace(
                        status="delayed",
                        status_at=step,
                        location_at=step,
                        due=step + rng.randint(*DELAY_STEPS),
                    ),
                )
                d.say("delay", parcel=p.id, hub=p.location)
            elif p.hop < len(p.route) - 1:
                hub = p.route[p.hop + 1]
                d.put(
                    i,
                    p._replace(
                        hop=p.hop + 1,
                        location=hub,
                        status="in_transit",
                        location_at=step,
                        status_at=step,
                        due=step + rng.randint(*PACES[p.pace]),
                    ),
                )
                d.say("scan", parcel=p.id, hub=hub)
            else:
                d.put(i, p._replace(status="delivered", status_at=step, address_at=step, due=-1))
                d.retire(i)
                d.say("delivered", parcel=p.id, address=p.address)
        while len(d.active) < params.load:
            d.book()

        if rng.random() < P_REQUEST:
            pool = _untouched(d, step)
            if pool:
                i = rng.choice(pool)
                self._request(d, i, d.parcels[i], recorrect=False)
        if rng.random() < P_RECORRECT:
            pool = [i for i in d.active if d.parcels[i].request == "open"]
            if pool:
                i = rng.choice(pool)
                self._request(d, i, d.parcels[i], recorrect=True)
        if rng.random() < P_FIX:
            pool = _untouched(d, step)
            if pool:
                i = rng.choice(pool)
                p = d.parcels[i]
                address = _address(rng, (p.address,))
                d.put(i, p._replace(address=address, address_at=step))
                d.mark_corrected(i)
                d.say("fix_address", parcel=p.id, address=address)

    def _request(self, d: _Draft, i: int, p: Parcel, *, recorrect: bool) -> None:
        rng, step = d.rng, d.step
        new = _address(rng, (p.address, p.requested))
        by_description = rng.random() < d.params.indirection
        # A description is resolved through the booking that stated sender and receiver,
        # so the answer depends on that older observation.
        anchor = p.booked_at if by_description else step
        d.put(i, p._replace(requested=new, request="open", requested_at=anchor))
        d.mark_corrected(i)
        kind = ("recorrect" if recorrect else "request") + ("_desc" if by_description else "_id")
        values = {"new": new}
        if recorrect:
            values["old"] = p.requested
        if by_description:
            values.update(sender=p.sender, receiver=p.receiver)
        else:
            values["parcel"] = p.id
        d.say(kind, **values)
        if not recorrect:
            d.max_score += 1

    def _probes(self, d: _Draft) -> tuple[Probe, ...]:
        """Questions due now, about parcels already mentioned; mixed old and recent."""
        rng = d.rng
        if rng.random() >= d.params.probe_rate:
            return ()
        probes: dict[tuple[str, str], Probe] = {}
        for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
            kind = rng.choice(("drift", "breakage", "confusion"))
            if kind == "confusion" and d.corrected:
                p = d.parcels[rng.choice(d.corrected)]
                if p.requested and rng.random() < 0.5:
                    probe = Probe(p.id, "requested_address", p.requested, p.requested_at, kind)
                else:
                    probe = Probe(p.id, "address", p.address, p.address_at, kind)
            else:
                # Half the picks among every parcel ever booked (mostly old, long chains),
                # half among the active ones (recent, short chains).
                if rng.random() < 0.5:
                    p = d.parcels[rng.randrange(len(d.parcels))]
                else:
                    p = d.parcels[rng.choice(d.active)]
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
