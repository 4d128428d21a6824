"""``wmkit/SmartHome-v0``: conditions and time (seed 000, §2.1 third case).

A home with ``load`` rooms, each with a light (brightness 0..100) and blinds (open or
closed), one thermostat (target 15..28 degrees), and ``people`` who come and go. The
user gives the agent instructions: absolute sets ("set the kitchen light to 30"),
relative changes ("turn it up by 20", "a bit lower"), future conditions ("when Leo
gets home, turn the hall light up by 20"), timers ("in 15 minutes set the porch light
to 0"), nested conditions ("when Leo leaves, wait 10 minutes, then ...") and
cancellations ("forget the kitchen light rule for Leo"). The agent carries them out
with ``set``, ``adjust``, ``schedule`` and ``cancel``; the household also changes
devices by hand and adds or cancels rules of its own. One step is one minute.

Facts (canonical lowercase):

=====================  ===========================================================
subject                relation: object
=====================  ===========================================================
``light:kitchen``      ``brightness``: ``0`` .. ``100``
``blind:kitchen``      ``position``: ``open`` | ``closed``
``thermostat:home``    ``target``: ``15`` .. ``28``
``person:leo``         ``location``: ``home`` | ``away``
``rule:r4``            ``device``: a device id; ``trigger``: a person id or ``clock``;
                       ``on``: ``arrive`` | ``leave`` | ``time``; ``delay``: minutes;
                       ``effect``: ``set 30`` | ``set open`` | ``adjust +20``;
                       ``status``: ``armed`` | ``waiting`` | ``fired`` | ``cancelled``
=====================  ===========================================================

Every fact is stated in the observation of the step that sets or changes it: when a
rule fires, the text says so and states the device's new level, so a perfect reader
with perfect memory reconstructs the state. What is hard is remembering: the level of
a device last touched long ago, which rules are still pending, what a rule does, and
resolving a rule named only by its device and trigger ("the armed kitchen light rule
for Leo fired") against the message that created it. At most one rule is pending
(armed or waiting) per (trigger, device), so such descriptions are unambiguous.

Actions (case and spacing ignored): ``wait``; ``set <device> to <value>``;
``adjust <device> by <+n|-n>`` (lights and thermostat); ``schedule <when>: <set or
adjust command>`` with ``<when>`` one of ``when <name> arrives``, ``when <name>
leaves``, ``in <n> min``, ``when <name> arrives, in <n> min`` (and ``leaves``);
``cancel r<n>``. Devices are named ``kitchen light``, ``kitchen blinds``,
``thermostat``. A command that does not parse, names an unknown device or rule, has a
value out of range, cancels a rule that is no longer pending or schedules a second
pending rule on the same trigger and device is *rejected*: the reply says so, the move
is spent and the world does not advance.

Rewards: +1 for a command that carries out an open instruction as meant (an increment
as an increment, a condition as a scheduled rule, a cancellation on the right rule);
-1 for a device change or rule nobody asked for (an increment applied as an
overwrite, a future condition applied now) and -1 when a rule fires that the user
asked to cancel; 0 otherwise. ``max_score`` counts the instructions given so far.

The pure core, ``SmartHomeFuncEnv``, has Gymnasium's ``FuncEnv`` shape over an
immutable ``SmartHomeState``; a transition is a deterministic function of
``(state, action)``: per-step randomness comes from the episode seed in the state and
the step number. ``SmartHomeEnv`` is the thin ``gymnasium.Env[str, str]`` shell.
"""

from __future__ import annotations

import bisect
import hashlib
import string
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple

from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import (
    CoreDefaults,
    DiagnosticEnv,
    StepDraft,
    StepRng,
    changes_delta,
    check_int,
    check_rate,
)
from wmkit.envs.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.world.types import Claim, Delta, Fact, Probe, delta_info

__all__ = [
    "TEXT",
    "Rule",
    "SmartHomeEnv",
    "SmartHomeFuncEnv",
    "SmartHomeParams",
    "SmartHomeState",
    "Task",
    "read",
    "state_hash",
]

# --- pools and constants ---------------------------------------------------------------

ROOMS = (
    "kitchen", "hall", "study", "bedroom", "bathroom", "porch", "attic", "garage",
    "nursery", "den", "pantry", "lounge", "cellar", "office", "library", "studio",
)  # fmt: skip
NAMES = (
    "ada", "amir", "ann", "arlo", "bea", "ben", "cara", "chen", "cleo", "dara", "dev", "eli",
    "eva", "ezra", "finn", "gus", "hana", "hugo", "ida", "ines", "ivo", "jade", "joel", "kai",
    "kira", "lars", "lena", "leo", "maya", "milo", "nia", "nora", "omar", "otto", "pia", "rosa",
    "sami", "tess", "uma", "vera", "wren", "yara", "zoe",
)  # fmt: skip
LIGHT_RANGE = (0, 100)
HEAT_RANGE = (15, 28)
LIGHT, BLIND, HEAT = 0, 1, 2  # device types
POSITIONS = ("closed", "open")  # blind levels 0 and 1

P_MOVE = 0.08  # per step: someone comes home or goes out
P_MANUAL = 0.05  # per step: someone at home changes a device by hand
P_HOUSE_RULE = 0.06  # per step: the household adds a rule of its own
P_HOUSE_CANCEL = 0.02  # per step: the household cancels one of its pending rules
P_INSTRUCT = 0.3  # per step: the user gives the agent an instruction
INSTRUCTION_WEIGHTS = (("now", 35), ("when", 20), ("timer", 15), ("nested", 10), ("cancel", 20))
DELAYS = (5, 10, 15, 20, 30)  # minutes, for timers and nested conditions

# --- text ------------------------------------------------------------------------------


def _device_text(canon: str) -> str:
    kind, _, room = canon.partition(":")
    return (
        "thermostat"
        if kind == "thermostat"
        else f"{room} {'light' if kind == 'light' else 'blinds'}"
    )


def _device_canon(text: str) -> str:
    if text == "thermostat":
        return "thermostat:home"
    room, _, kind = text.partition(" ")
    return f"{'light' if kind == 'light' else 'blind'}:{room}"


def _effect_text(canon: str) -> str:
    verb, _, value = canon.partition(" ")
    if verb == "set":
        return "set to " + value
    return ("raised by " if value[0] == "+" else "lowered by ") + value[1:]


def _effect_canon(text: str) -> str:
    if text.startswith("set to "):
        return "set " + text[7:]
    return ("adjust +" if text[0] == "r" else "adjust -") + text.rsplit(" ", 1)[1]


def _literal(text: str, canon: str) -> SlotType:
    # A slot that always reads the same: lets a description name a fixed object (e.g.
    # the ``clock`` trigger of a timer) through TextBook's slot-valued descriptions.
    return SlotType(text, lambda _c: text, lambda _t: canon)


_ROOM = "|".join(ROOMS)
_PERSON = SlotType(
    r"[A-Z][a-z]+", lambda c: c[7:].capitalize(), lambda t: "person:" + t.lower(), True
)
_NUMBER = SlotType(r"\d{1,3}", str, str)
SLOT_TYPES = {
    "light": SlotType(
        rf"(?:{_ROOM}) light", lambda c: c[6:] + " light", lambda t: "light:" + t[:-6], True
    ),
    "blind": SlotType(
        rf"(?:{_ROOM}) blinds", lambda c: c[6:] + " blinds", lambda t: "blind:" + t[:-7], True
    ),
    "heater": SlotType("thermostat", lambda c: "thermostat", lambda t: "thermostat:home", True),
    "device": SlotType(
        rf"(?:{_ROOM}) (?:light|blinds)|thermostat", _device_text, _device_canon, True
    ),
    "person": _PERSON,
    "owner": _PERSON,
    "rule": SlotType(r"R\d{1,4}", lambda c: "R" + c[6:], lambda t: "rule:r" + t[1:], True),
    "level": _NUMBER,
    "degrees": _NUMBER,
    "amount": _NUMBER,
    "minutes": _NUMBER,
    "after": _NUMBER,
    "position": SlotType("open|closed", str, str),
    "setting": SlotType(r"\d{1,3}|open|closed", str, str),
    "where": SlotType("home|away", str, str),
    "on": SlotType(
        "gets home|leaves",
        lambda c: "gets home" if c == "arrive" else "leaves",
        lambda t: "arrive" if t == "gets home" else "leave",
    ),
    "delay": SlotType(
        r"right away|\d{1,2} minutes later",
        lambda c: "right away" if c == "0" else c + " minutes later",
        lambda t: "0" if t == "right away" else t.split(" ", 1)[0],
    ),
    "effect": SlotType(
        r"set to (?:\d{1,3}|open|closed)|raised by \d{1,3}|lowered by \d{1,3}",
        _effect_text,
        _effect_canon,
    ),
    "pending": SlotType("armed|waiting", str, str),
    "clock": _literal("timer", "clock"),
}


def _kind(name: str, templates: str, *claims: ClaimSpec) -> MessageKind:
    return MessageKind(name, tuple(t.strip() for t in templates.strip().split("\n")), claims)


def _rule_claims(person: bool) -> tuple[ClaimSpec, ...]:
    trigger = (
        ClaimSpec("rule", "trigger", "person")
        if person
        else ClaimSpec("rule", "trigger", value="clock")
    )
    return (
        ClaimSpec("rule", "device", "device"),
        trigger,
        ClaimSpec("rule", "on", "on") if person else ClaimSpec("rule", "on", value="time"),
        ClaimSpec("rule", "delay", "delay" if person else "after"),
        ClaimSpec("rule", "effect", "effect"),
        ClaimSpec("rule", "status", value="armed"),
    )


# A pending rule named by what it does: the one pending rule on this device and trigger.
_BY_PERSON = (("status", "pending"), ("device", "device"), ("trigger", "person"))
_BY_CLOCK = (("status", "pending"), ("device", "device"), ("trigger", "clock"))

# User instructions state no fact; their wording is the task. Built as condition x
# operation phrases, so every condition reads with every kind of change.
_CONDITIONS = {
    "now": ("", "Please ", "Kindly "),
    "when": ("When {person} {on}, ", "Once {person} {on}, please "),
    "timer": ("In {minutes} minutes, ", "Please, {minutes} minutes from now, "),
    "nested": (
        "When {person} {on}, wait {minutes} minutes, then ",
        "Once {person} {on}, give it {minutes} minutes and ",
    ),
}
_OPERATIONS = {
    "set": ("set the {device} to {setting}.", "put the {device} at {setting}."),
    "up": ("turn the {device} up by {amount}.", "raise the {device} by {amount}."),
    "down": ("turn the {device} down by {amount}.", "lower the {device} by {amount}."),
    "nudge_up": ("turn the {device} up a little.", "make the {device} a bit higher."),
    "nudge_down": ("turn the {device} down a little.", "make the {device} a bit lower."),
}


def _instruction_kinds() -> list[MessageKind]:
    kinds = []
    for cond, heads in _CONDITIONS.items():
        for op, tails in _OPERATIONS.items():
            templates = []
            for i, head in enumerate(heads):
                for j, tail in enumerate(tails):
                    if (i + j) % len(tails) == 0 or len(heads) == 1:
                        line = head + tail
                        templates.append(line[0].upper() + line[1:])
            kinds.append(MessageKind(f"ask_{cond}_{op}", tuple(templates)))
    return kinds


KINDS = (
    _kind(
        "intro",
        """
        Home log: the assistant is on duty.
        Good morning from the house assistant.
        The smart home wakes up.
        """,
    ),
    # Device levels: at reset, after a rule fires, and when a command changes nothing.
    _kind(
        "light_state",
        """
        The {light} is at {level}.
        The {light} now reads {level}.
        Level of the {light}: {level}.
        """,
        ClaimSpec("light", "brightness", "level"),
    ),
    _kind(
        "blind_state",
        """
        The {blind} are {position}.
        The {blind} are now {position}.
        Blinds report: the {blind} are {position}.
        """,
        ClaimSpec("blind", "position", "position"),
    ),
    _kind(
        "heat_state",
        """
        The {heater} is set to {degrees} degrees.
        The {heater} now holds {degrees} degrees.
        Heating target on the {heater}: {degrees} degrees.
        """,
        ClaimSpec("heater", "target", "degrees"),
    ),
    # Replies to the agent's set and adjust.
    _kind(
        "light_done",
        """
        Done: the {light} is now at {level}.
        OK, the {light} is at {level} now.
        """,
        ClaimSpec("light", "brightness", "level"),
    ),
    _kind(
        "blind_done",
        """
        Done: the {blind} are now {position}.
        OK, the {blind} are {position} now.
        """,
        ClaimSpec("blind", "position", "position"),
    ),
    _kind(
        "heat_done",
        """
        Done: the {heater} is now set to {degrees} degrees.
        OK, the {heater} holds {degrees} degrees now.
        """,
        ClaimSpec("heater", "target", "degrees"),
    ),
    # The household changes devices by hand.
    _kind(
        "light_manual",
        """
        {owner} set the {light} to {level} by hand.
        {owner} changed the {light} to {level} at the wall switch.
        """,
        ClaimSpec("light", "brightness", "level"),
    ),
    _kind(
        "blind_manual",
        """
        {owner} pulled the {blind} {position} by hand.
        {owner} left the {blind} {position}.
        """,
        ClaimSpec("blind", "position", "position"),
    ),
    _kind(
        "heat_manual",
        """
        {owner} turned the {heater} to {degrees} degrees by hand.
        {owner} changed the {heater} to {degrees} degrees.
        """,
        ClaimSpec("heater", "target", "degrees"),
    ),
    _kind(
        "person_state",
        """
        {person} is {where}.
        Right now {person} is {where}.
        """,
        ClaimSpec("person", "location", "where"),
    ),
    _kind(
        "arrive",
        """
        {person} just got home.
        {person} walked in the front door.
        The door sensor saw {person} come home.
        """,
        ClaimSpec("person", "location", value="home"),
    ),
    _kind(
        "leave",
        """
        {person} left the house.
        {person} just went out.
        The door sensor saw {person} leave.
        """,
        ClaimSpec("person", "location", value="away"),
    ),
    # Rules: created by the agent or the household, each stating all of its facts.
    _kind(
        "rule_person",
        """
        Scheduled {rule}: when {person} {on}, {delay} the {device} gets {effect}.
        Rule {rule} is armed: once {person} {on}, {delay} the {device} will be {effect}.
        """,
        *_rule_claims(person=True),
    ),
    _kind(
        "rule_timer",
        """
        Scheduled {rule}: in {after} minutes the {device} gets {effect}.
        Timer {rule} is armed: the {device} will be {effect} in {after} minutes.
        """,
        *_rule_claims(person=False),
    ),
    _kind(
        "house_rule_person",
        """
        {owner} added rule {rule}: when {person} {on}, {delay} the {device} gets {effect}.
        New rule {rule} from {owner}: once {person} {on}, {delay} the {device} will be {effect}.
        """,
        *_rule_claims(person=True),
    ),
    _kind(
        "house_rule_timer",
        """
        {owner} set timer {rule}: in {after} minutes the {device} gets {effect}.
        New timer {rule} from {owner}: the {device} will be {effect} in {after} minutes.
        """,
        *_rule_claims(person=False),
    ),
    _kind(
        "rule_waiting",
        """
        Rule {rule} was triggered and is now waiting.
        {rule} triggered: it waits out its delay.
        """,
        ClaimSpec("rule", "status", value="waiting"),
    ),
    _kind(
        "rule_waiting_desc",
        """
        The {pending} {device} rule for {person} was triggered and is now waiting.
        The {pending} rule on the {device} for {person} triggered; it waits out its delay.
        """,
        ClaimSpec(_BY_PERSON, "status", value="waiting"),
    ),
    _kind(
        "rule_fired",
        """
        Rule {rule} fired.
        {rule} went off.
        Automation {rule} ran.
        """,
        ClaimSpec("rule", "status", value="fired"),
    ),
    _kind(
        "rule_fired_desc",
        """
        The {pending} {device} rule for {person} fired.
        The {pending} rule on the {device} for {person} ran.
        """,
        ClaimSpec(_BY_PERSON, "status", value="fired"),
    ),
    _kind(
        "timer_fired_desc",
        """
        The {pending} {device} {clock} went off.
        The {pending} {clock} on the {device} rang.
        """,
        ClaimSpec(_BY_CLOCK, "status", value="fired"),
    ),
    _kind(
        "rule_cancelled",
        """
        Rule {rule} is cancelled.
        Cancelled {rule}; it will not run.
        """,
        ClaimSpec("rule", "status", value="cancelled"),
    ),
    _kind(
        "house_cancel",
        """
        {owner} cancelled rule {rule}.
        {owner} switched off rule {rule}.
        """,
        ClaimSpec("rule", "status", value="cancelled"),
    ),
    _kind(
        "house_cancel_desc",
        """
        {owner} cancelled the {pending} {device} rule for {person}.
        {owner} switched off the {pending} rule on the {device} for {person}.
        """,
        ClaimSpec(_BY_PERSON, "status", value="cancelled"),
    ),
    _kind(
        "house_cancel_timer_desc",
        """
        {owner} cancelled the {pending} {device} {clock}.
        {owner} switched off the {pending} {clock} on the {device}.
        """,
        ClaimSpec(_BY_CLOCK, "status", value="cancelled"),
    ),
    *_instruction_kinds(),
    _kind(
        "ask_cancel",
        """
        Please cancel rule {rule}.
        I no longer need {rule}; cancel it.
        """,
    ),
    _kind(
        "ask_cancel_desc",
        """
        Forget the {device} rule for {person}, please.
        I changed my mind about the {device} rule for {person}: cancel it.
        """,
    ),
    _kind(
        "ask_cancel_timer_desc",
        """
        Forget the {device} {clock}, please.
        I changed my mind about the {device} {clock}: cancel it.
        """,
    ),
    # Replies that change nothing.
    _kind(
        "waited",
        """
        You wait.
        Time passes; the house hums along.
        A quiet minute goes by.
        """,
    ),
    _kind(
        "not_understood",
        "That command was not understood. Try: wait, set <device> to <value>, adjust "
        "<device> by <+n|-n>, schedule <when>: <command>, cancel r<n>.",
    ),
    _kind("unknown_device", "There is no such device in this house."),
    _kind("unknown_person", "Nobody by that name lives here."),
    _kind("bad_value", "That value is out of range for the {device}."),
    _kind("unknown_rule", "There is no rule {rule}."),
    _kind("rule_over", "Rule {rule} is no longer pending; nothing to cancel."),
    _kind("rule_clash", "A pending rule already covers the {device} for that trigger."),
    _kind(
        "chatter",
        """
        {person} is making coffee.
        The cat is asleep on the sofa.
        {person} asks what is for dinner.
        Rain is forecast for the afternoon.
        The washing machine finished its cycle.
        {person} is on the phone.
        """,
    ),
)

TEXT = TextBook(KINDS, SLOT_TYPES)
"""The SmartHome family's templates: renders observations and reads them back."""

_LINE_MAX = 140  # longest rendered line (checked over every template in the tests)


def read(observation: str) -> list[Claim]:
    """Return every claim an observation states, in text order (a perfect reader).

    Inverts every template and paraphrase of the family. A pending rule named by its
    device and trigger comes out as a description subject,
    ``(("status", "armed"), ("device", "light:hall"), ("trigger", "person:leo"))``,
    which the caller resolves against facts it read earlier: at most one rule is
    pending per device and trigger. User instructions and chatter yield nothing.
    """
    return TEXT.read(observation)


_CHATTER = TEXT.kinds["chatter"].templates
_CHATTER_SLOTS = tuple(
    tuple(name for _, name, _, _ in string.Formatter().parse(t) if name)
    for t in TEXT.kinds["chatter"].templates
)

# --- parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class SmartHomeParams:
    """Episode parameters; validated on construction.

    Attributes:
        horizon: steps (minutes) per episode, 20..1000.
        load: rooms, each with a light and blinds, 1..16.
        people: household members who come and go, 1..12.
        paraphrase_rate: probability a message uses a non-canonical template.
        distractors: chatter lines per step, 0..50.
        indirection: probability that a rule firing or a cancellation names its rule by
            device and trigger instead of by id.
        probe_rate: probability that probes are due at a step.

    Raises:
        TypeError: a parameter has the wrong type.
        ValueError: a parameter is out of range.
    """

    horizon: int = 200
    load: int = 4
    people: int = 3
    paraphrase_rate: float = 0.5
    distractors: int = 1
    indirection: float = 0.5
    probe_rate: float = 0.3

    def __post_init__(self) -> None:
        check_int("horizon", self.horizon, 20, 1000)
        check_int("load", self.load, 1, len(ROOMS))
        check_int("people", self.people, 1, 12)
        check_int("distractors", self.distractors, 0, 50)
        for name in ("paraphrase_rate", "indirection", "probe_rate"):
            check_rate(name, getattr(self, name))


# --- state -----------------------------------------------------------------------------


class Rule(NamedTuple):
    """One automation rule: its facts, its hidden schedule and its anchors.

    ``trigger`` is a person index or -1 for the clock; ``on`` is ``arrive``, ``leave``
    or ``time``; ``value`` is the level set or the signed change. ``due`` is the step it
    fires at once timed (timers and triggered rules), else -1. ``facts`` (sorted by
    relation) and ``digest`` are derived (see ``_seal``).
    """

    id: str
    device: int
    trigger: int
    on: str
    delay: int
    op: str
    value: int
    status: str
    due: int
    owner: str  # "agent" or "house"
    created: int
    status_at: int
    facts: tuple[Fact, ...] = ()
    digest: int = 0


class Task(NamedTuple):
    """An open user instruction, hidden from the agent but for its wording.

    ``kind`` is ``now``, ``when``, ``timer``, ``nested`` or ``cancel``; ``person`` is a
    person index or -1; ``rule`` is the index of the rule to cancel, or -1.
    """

    kind: str
    device: int
    op: str
    value: int
    person: int
    on: str
    delay: int
    rule: int
    issued: int
    commands: tuple[str, ...] = ()  # admissible commands it brings (see ``_task_commands``)


class _Home(NamedTuple):
    """What is fixed for an episode: device and person ids and names."""

    devices: tuple[str, ...]  # ids, sorted
    types: tuple[int, ...]  # LIGHT, BLIND or HEAT per device
    words: tuple[str, ...]  # command names: "kitchen light"
    by_words: dict[str, int]
    persons: tuple[str, ...]  # ids, sorted
    names: tuple[str, ...]  # command names: "leo"
    by_name: dict[str, int]
    relation: tuple[str, ...]  # per device: brightness, position or target


class SmartHomeState(NamedTuple):
    """The whole episode state at one step: an immutable value, the snapshot token.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        step: steps taken since reset (0 at reset).
        home: the episode's fixed devices and people.
        levels: per device: brightness, 0/1 for closed/open blinds, or degrees.
        level_at: per device, the step its level was last stated.
        relative: devices whose last change was relative (an adjust).
        present: per person, whether they are home.
        present_at: per person, the step their location was last stated.
        rules: every rule ever made, in creation order.
        rule_order: indices into ``rules`` sorted by rule id.
        pending: indices of armed or waiting rules.
        tasks: open user instructions.
        text: this step's observation.
        mentioned: entity ids named in this step's observation (unsorted, unique).
        probes: probes due this step.
        action_changes: ``(subject, relation, before, after)`` changes caused by the
            agent's command this step (``before`` None for a new fact); see
            ``action_delta``.
        event_changes: the same for the world's events this step; see ``event_delta``.
        reward: this step's reward.
        score: cumulative reward.
        max_score: instructions given so far.
        admissible: sorted admissible commands.
        next_due: the earliest step a pending rule is due at, or -1.
        digest: sum of rule digests mod 2**64 (incremental state hash).
    """

    params: SmartHomeParams
    seed: int
    step: int
    home: _Home
    levels: tuple[int, ...]
    level_at: tuple[int, ...]
    relative: frozenset[int]
    present: tuple[bool, ...]
    present_at: tuple[int, ...]
    rules: tuple[Rule, ...]
    rule_order: tuple[int, ...]
    pending: tuple[int, ...]
    tasks: tuple[Task, ...]
    text: str
    mentioned: tuple[str, ...]
    probes: tuple[Probe, ...]
    action_changes: tuple[tuple[str, str, str | None, str], ...]
    event_changes: tuple[tuple[str, str, str | None, str], ...]
    reward: int
    score: int
    max_score: int
    admissible: tuple[str, ...]
    next_due: int
    digest: int

    @property
    def action_delta(self) -> Delta:
        """The fact change caused by the agent's command this step."""
        return changes_delta(self.action_changes)

    @property
    def event_delta(self) -> Delta:
        """The fact change caused by the world's events (timers, arrivals...) this step."""
        return changes_delta(self.event_changes)


def state_hash(state: SmartHomeState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, device levels, who is home, open instructions
    and every rule (incrementally, through rule digests). Equal hashes mean the same
    world at the same step of the same episode; the observation and score are left out.
    """
    raw = repr((state.seed, state.step, state.levels, state.present, state.tasks, state.digest))
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


_new_state = SmartHomeState._make
_CODE = {
    word: i
    for i, word in enumerate(
        (
            "arrive",
            "leave",
            "time",
            "set",
            "adjust",
            "armed",
            "waiting",
            "fired",
            "cancelled",
            "agent",
            "house",
        )
    )
}


def _level_text(dtype: int, level: int) -> str:
    return POSITIONS[level] if dtype == BLIND else str(level)


def _effect(op: str, value: int, dtype: int) -> str:
    if op == "set":
        return "set " + _level_text(dtype, value)
    return f"adjust {value:+d}"


def _apply(op: str, value: int, level: int, dtype: int) -> int:
    if op == "set":
        return value
    low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
    return min(high, max(low, level + value))


def _seal(rule: Rule, home: _Home) -> Rule:
    s = rule.id
    trigger = home.persons[rule.trigger] if rule.trigger >= 0 else "clock"
    device = home.devices[rule.device]
    effect = _effect(rule.op, rule.value, home.types[rule.device])
    facts = (
        Fact(s, "delay", str(rule.delay)),
        Fact(s, "device", device),
        Fact(s, "effect", effect),
        Fact(s, "on", rule.on),
        Fact(s, "status", rule.status),
        Fact(s, "trigger", trigger),
    )
    # Hashing a tuple of ints is cheap and, unlike hashing strings, the same in every
    # process; the state hash sums these digests.
    key = (
        int(s[6:]),
        rule.device,
        rule.trigger,
        _CODE[rule.on],
        rule.delay,
        _CODE[rule.op],
        rule.value,
        _CODE[rule.status],
        rule.due,
        _CODE[rule.owner],
        rule.created,
    )
    digest = hash(key) % 2**64
    return rule._replace(facts=facts, digest=digest)


def _command_text(home: _Home, op: str, device: int, value: int) -> str:
    if op == "set":
        return f"set {home.words[device]} to {_level_text(home.types[device], value)}"
    return f"adjust {home.words[device]} by {value:+d}"


def _when_text(home: _Home, person: int, on: str, delay: int) -> str:
    if person < 0:
        return f"in {delay} min"
    verb = "arrives" if on == "arrive" else "leaves"
    return f"when {home.names[person]} {verb}" + (f", in {delay} min" if delay else "")


def _task_commands(home: _Home, task: Task) -> list[str]:
    """The command that carries ``task`` out, then the confusable ones beside it."""
    if task.kind == "cancel":
        return []  # every pending rule's cancel is admissible anyway
    dtype = home.types[task.device]
    do = _command_text(home, task.op, task.device, task.value)
    # The same number read the other way: an increment as an overwrite or back.
    other = None
    if dtype != BLIND:
        if task.op == "set" and task.value:
            other = _command_text(home, "adjust", task.device, task.value)
        else:
            low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
            if low <= abs(task.value) <= high:
                other = _command_text(home, "set", task.device, abs(task.value))
    if task.kind == "now":
        return [do] + ([other] if other else [])
    when = _when_text(home, task.person, task.on, task.delay)
    out = [f"schedule {when}: {do}", do]  # the right rule, and the condition applied now
    if other:
        out.append(f"schedule {when}: {other}")
    return out


# --- commands --------------------------------------------------------------------------


class _Command(NamedTuple):
    verb: str  # wait | set | adjust | schedule | cancel
    device: int = -1
    op: str = ""
    value: int = 0
    person: int = -1
    on: str = ""
    delay: int = 0
    rule: int = -1


def _number(text: str, signed: bool) -> int | None:
    body = text[1:] if signed and text[:1] in "+-" else text
    if not (body.isascii() and body.isdigit() and len(body) <= 4):
        return None
    return -int(body) if text[0] == "-" else int(body)


def _parse_change(home: _Home, words: list[str]) -> _Command | tuple[str, dict[str, str]]:
    """Parse ``set <device> to <value>`` or ``adjust <device> by <n>`` (split words)."""
    if len(words) < 4 or words[-2] != ("to" if words[0] == "set" else "by"):
        return "not_understood", {}
    device = home.by_words.get(" ".join(words[1:-2]))
    if device is None:
        return "unknown_device", {}
    dtype, raw, canon = home.types[device], words[-1], home.devices[device]
    if words[0] == "set":
        if dtype == BLIND:
            if raw not in POSITIONS:
                return "bad_value", {"device": canon}
            return _Command("set", device, "set", POSITIONS.index(raw))
        value = _number(raw, signed=False)
        low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
        if value is None or not low <= value <= high:
            return "bad_value", {"device": canon}
        return _Command("set", device, "set", value)
    value = _number(raw, signed=True)
    if dtype == BLIND or value is None or abs(value) > 100:
        return "bad_value", {"device": canon}
    return _Command("adjust", device, "adjust", value)


def _parse(home: _Home, rules: tuple[Rule, ...], action: Any) -> _Command | tuple[str, dict]:
    """Parse a command, or return the rejection message ``(kind, values)``.

    Plain string splitting, no regular expressions: this runs every step.
    """
    if not isinstance(action, str):
        return "not_understood", {}
    words = action.lower().split()
    if not words:
        return "not_understood", {}
    verb = words[0]
    if verb == "wait" and len(words) == 1:
        return _Command("wait")
    if verb in ("set", "adjust"):
        return _parse_change(home, words)
    if verb == "cancel" and len(words) == 2:
        n = _number(words[1][1:], signed=False) if words[1][:1] == "r" else None
        if n is None:
            return "not_understood", {}
        if not 1 <= n <= len(rules):
            return "unknown_rule", {"rule": f"rule:r{n}"}
        return _Command("cancel", rule=n - 1)
    if verb != "schedule":
        return "not_understood", {}
    head, colon, tail = " ".join(words).partition(":")
    when = head.replace(",", " ").split()[1:]
    if not colon or not when:
        return "not_understood", {}
    change = (
        _parse_change(home, tail.split()) if tail.split()[:1] in (["set"], ["adjust"]) else None
    )
    if change is None:
        return "not_understood", {}
    if not isinstance(change, _Command):
        return change
    person, on, delay = -1, "time", 0
    if when[0] == "when" and len(when) in (3, 6):
        if when[1] not in home.by_name:
            return "unknown_person", {}
        person = home.by_name[when[1]]
        on = {"arrives": "arrive", "leaves": "leave"}.get(when[2], "")
        when = when[3:]
        if not on:
            return "not_understood", {}
    if when:
        if len(when) != 3 or when[0] != "in" or when[2] != "min":
            return "not_understood", {}
        delay = _number(when[1], signed=False)
        if delay is None or not 1 <= delay <= 999:
            return "not_understood", {}
    elif person < 0:
        return "not_understood", {}
    return change._replace(verb="schedule", person=person, on=on, delay=delay)


# --- transitions -----------------------------------------------------------------------


class _Draft(StepDraft):
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Transitions stay pure: the draft copies what it changes, never the input state.
    ``changes`` maps ``(subject, relation)`` to ``[before, after]`` objects for the
    current phase (agent command, then world events), to split the delta by cause.
    """

    __slots__ = (
        "changes", "digest", "dirty", "home", "level_at", "levels", "lines", "max_score",
        "mentioned", "params", "pending", "present", "present_at", "relative", "reward",
        "rng", "rule_order", "rules", "state", "step", "tasks", "timers_dirty",
    )  # fmt: skip
    voice = Voice(TEXT)

    def __init__(self, state: SmartHomeState, step: int) -> None:
        self.state = state
        self.params = state.params
        self.home = state.home
        self.step = step
        self.rng = StepRng(state.seed, step)
        # Per-device and per-person tuples are copied to lists on first write only.
        self.levels: tuple[int, ...] | list[int] = state.levels
        self.level_at: tuple[int, ...] | list[int] = state.level_at
        self.relative = state.relative
        self.present: tuple[bool, ...] | list[bool] = state.present
        self.present_at: tuple[int, ...] | list[int] = state.present_at
        self.rules: tuple[Rule, ...] | list[Rule] = state.rules  # copied on first write
        self.rule_order = state.rule_order
        self.pending = state.pending
        self.tasks = state.tasks
        self.lines: list[str] = []
        self.mentioned: dict[str, None] = {}  # insertion-ordered: deterministic
        self.changes: dict[tuple[str, str], list[str | None]] = {}
        self.digest = state.digest
        self.max_score = state.max_score
        self.reward = 0
        self.dirty = False  # tasks or pending rules changed: recompute admissible
        self.timers_dirty = False  # a rule changed: recompute next_due

    # -- text --

    def chatter(self, first: int) -> None:
        rng, persons, lines = self.rng, self.home.persons, self.lines
        for _ in range(self.params.distractors):
            # One draw: 16 bits each for the line, the person and the position.
            bits = rng.bits()
            variant = ((bits & 0xFFFF) * len(_CHATTER)) >> 16
            template = _CHATTER[variant]
            if _CHATTER_SLOTS[variant]:
                person = persons[(((bits >> 16) & 0xFFFF) * len(persons)) >> 16]
                self.mentioned[person] = None
                template = template.format(person=person[7:].capitalize())
            lines.insert(
                first + ((((bits >> 32) & 0xFFFF) * (len(lines) - first + 1)) >> 16), template
            )

    def state_line(self, device: int, context: str = "state", owner: str = "") -> None:
        home = self.home
        dtype, canon, level = home.types[device], home.devices[device], self.levels[device]
        if type(self.level_at) is tuple:
            self.level_at = list(self.level_at)
        self.level_at[device] = self.step
        extra = {"owner": owner} if owner else {}
        if dtype == LIGHT:
            self.say("light_" + context, light=canon, level=str(level), **extra)
        elif dtype == BLIND:
            self.say("blind_" + context, blind=canon, position=POSITIONS[level], **extra)
        else:
            self.say("heat_" + context, heater=canon, degrees=str(level), **extra)

    # -- facts --

    def set_level(self, device: int, level: int, relative: bool) -> None:
        old = self.levels[device]
        if old != level:
            home = self.home
            dtype = home.types[device]
            self.note(
                home.devices[device],
                home.relation[device],
                _level_text(dtype, old),
                _level_text(dtype, level),
            )
            if type(self.levels) is tuple:
                self.levels = list(self.levels)
            self.levels[device] = level
        if relative:
            self.relative = self.relative | {device}
        elif device in self.relative:
            self.relative = self.relative - {device}

    def set_present(self, person: int, home_now: bool) -> None:
        pid = self.home.persons[person]
        self.note(
            pid,
            "location",
            "home" if self.present[person] else "away",
            "home" if home_now else "away",
        )
        if type(self.present) is tuple:
            self.present, self.present_at = list(self.present), list(self.present_at)
        self.present[person] = home_now
        self.present_at[person] = self.step

    def put_rule(self, i: int, rule: Rule) -> None:
        rule = _seal(rule, self.home)
        self.timers_dirty = True
        if type(self.rules) is tuple:
            self.rules = list(self.rules)
        if i == len(self.rules):
            self.rules.append(rule)
            for fact in rule.facts:
                self.note(fact.subject, fact.relation, None, fact.object)
            k = bisect.bisect_left(self.rule_order, rule.id, key=lambda j: self.rules[j].id)
            self.rule_order = (*self.rule_order[:k], i, *self.rule_order[k:])
            self.digest = (self.digest + rule.digest) % 2**64
        else:
            old = self.rules[i]
            if old.status != rule.status:
                self.note(rule.id, "status", old.status, rule.status)
            self.rules[i] = rule
            self.digest = (self.digest + rule.digest - old.digest) % 2**64
        pending = rule.status in ("armed", "waiting")
        if pending != (i in self.pending):
            self.pending = (
                (*self.pending, i) if pending else tuple(j for j in self.pending if j != i)
            )
            self.dirty = True

    # -- tasks --

    def close_task(self, task: Task) -> None:
        self.tasks = tuple(t for t in self.tasks if t is not task)
        self.dirty = True

    def add_task(self, task: Task) -> None:
        task = task._replace(commands=tuple(_task_commands(self.home, task)))
        self.tasks = (*self.tasks, task)
        self.max_score += 1
        self.dirty = True

    # -- rules --

    def rule_on(self, trigger: int, device: int) -> bool:
        """Whether a pending rule covers this (trigger, device): it must stay unique."""
        rules = self.rules
        return any(rules[i].trigger == trigger and rules[i].device == device for i in self.pending)

    def announce_rule(self, rule: Rule, owner: str = "") -> None:
        kind = ("house_" if owner else "") + ("rule_person" if rule.trigger >= 0 else "rule_timer")
        values = {
            "rule": rule.id,
            "device": self.home.devices[rule.device],
            "effect": _effect(rule.op, rule.value, self.home.types[rule.device]),
        }
        if rule.trigger >= 0:
            values.update(person=self.home.persons[rule.trigger], on=rule.on, delay=str(rule.delay))
        else:
            values["after"] = str(rule.delay)
        if owner:
            values["owner"] = owner
        self.say(kind, **values)

    def new_rule(self, cmd: _Command, owner: str) -> Rule:
        i = len(self.rules)
        due = self.step + cmd.delay if cmd.person < 0 else -1
        rule = Rule(
            id=f"rule:r{i + 1}", device=cmd.device, trigger=cmd.person, on=cmd.on,
            delay=cmd.delay, op=cmd.op, value=cmd.value, status="armed", due=due,
            owner=owner, created=self.step, status_at=self.step,
        )  # fmt: skip
        self.put_rule(i, rule)
        return self.rules[i]

    def describe_rule(self, kind: str, rule: Rule, **extra: str) -> None:
        """Name a pending rule by id, or by device and trigger (``indirection``)."""
        if self.rng.random() < self.params.indirection:
            values = {"pending": rule.status, "device": self.home.devices[rule.device], **extra}
            if rule.trigger >= 0:
                self.say(kind + "_desc", person=self.home.persons[rule.trigger], **values)
            else:
                timer_kind = {"rule_fired": "timer_fired", "house_cancel": "house_cancel_timer"}
                self.say(timer_kind[kind] + "_desc", clock="clock", **values)
        else:
            self.say(kind, rule=rule.id, **extra)

    def fire(self, i: int) -> None:
        rule = self.rules[i]
        self.describe_rule("rule_fired", rule)
        self.put_rule(i, rule._replace(status="fired", status_at=self.step, due=-1))
        dtype = self.home.types[rule.device]
        level = _apply(rule.op, rule.value, self.levels[rule.device], dtype)
        self.set_level(rule.device, level, relative=rule.op == "adjust")
        self.state_line(rule.device)
        for task in self.tasks:
            if task.kind == "cancel" and task.rule == i:
                self.reward -= 1  # the user asked for it to be cancelled, and it ran
                self.close_task(task)

    def freeze(
        self, *, admissible: tuple[str, ...] | None, probes: tuple[Probe, ...],
        action_changes: tuple = (), event_changes: tuple = (),
    ) -> SmartHomeState:  # fmt: skip
        state = self.state
        if admissible is None:
            admissible = _admissible(self.pending, self.tasks) if self.dirty else state.admissible
        rules = self.rules if type(self.rules) is tuple else tuple(self.rules)
        next_due = state.next_due
        if self.timers_dirty:
            next_due = min((rules[i].due for i in self.pending if rules[i].due >= 0), default=-1)
        # Positional, in field order: the state is built every step.
        return _new_state((
            self.params, state.seed, self.step, self.home, _frozen(self.levels),
            _frozen(self.level_at), self.relative, _frozen(self.present),
            _frozen(self.present_at),
            rules, self.rule_order, self.pending, self.tasks, "\n".join(self.lines),
            tuple(self.mentioned), probes, action_changes, event_changes, self.reward,
            state.score + self.reward, self.max_score, admissible, next_due, self.digest,
        ))  # fmt: skip


def _frozen(values: tuple | list) -> tuple:
    return values if type(values) is tuple else tuple(values)


def _admissible(pending: tuple[int, ...], tasks: tuple[Task, ...]) -> tuple[str, ...]:
    actions = {"wait"}
    for i in pending:
        actions.add(f"cancel r{i + 1}")
    for task in tasks:
        actions.update(task.commands)
    return tuple(sorted(actions))


# --- the pure core ---------------------------------------------------------------------


class SmartHomeFuncEnv(
    CoreDefaults, FuncEnv[SmartHomeState, str, str, int, bool, None, SmartHomeParams]
):
    """The SmartHome family as pure functions over an immutable ``SmartHomeState``.

    ``transition(state, action)`` is deterministic: its randomness is drawn from the
    episode seed carried in the state and the step number, so the same code serves as
    the planner's simulator and the state value is the snapshot. The ``rng`` and
    ``params`` arguments of the ``FuncEnv`` signatures are accepted but only ``initial``
    uses them.

    Args:
        params: the episode parameters; defaults to ``SmartHomeParams()``.
    """

    def __init__(self, params: SmartHomeParams | None = None) -> None:
        self._params = params or SmartHomeParams()
        super().__init__()
        p = self._params
        devices = 2 * p.load + 1
        # Lines per step: the intro states every device and person; later a reply, a
        # firing (two lines) per pending rule at most, four world events, the chatter.
        lines = max(devices + p.people + p.load, 2 * devices * (p.people + 1) + 8) + p.distractors
        charset = string.ascii_letters + string.digits + string.punctuation + " "
        self.observation_space = spaces.Text(
            max_length=_LINE_MAX * lines, min_length=1, charset=charset + "\n"
        )
        self.action_space = spaces.Text(max_length=512, min_length=0, charset=charset)

    def initial(self, rng: Any, params: SmartHomeParams | None = None) -> SmartHomeState:
        """Return the state at reset: the house, everyone's whereabouts, a few rules.

        Args:
            rng: a ``numpy.random.Generator`` (one draw makes the episode seed) or an int
                used as the episode seed directly.
            params: overrides the core's parameters for this episode.
        """
        params = params or self._params
        seed = int(rng.integers(2**62)) if hasattr(rng, "integers") else int(rng)
        r = StepRng(seed, -1)
        rooms = _sample(r, ROOMS, params.load)
        names = sorted(_sample(r, NAMES, params.people))
        # Sorted ids; the thermostat sorts last of all devices.
        devices = [*sorted(f"{kind}:{room}" for kind in ("light", "blind") for room in rooms)]
        devices.append("thermostat:home")
        types = tuple(
            HEAT if d.startswith("t") else BLIND if d.startswith("b") else LIGHT for d in devices
        )
        words = tuple(_device_text(d) for d in devices)
        home = _Home(
            devices=tuple(devices), types=types, words=words,
            by_words={w: i for i, w in enumerate(words)},
            persons=tuple("person:" + n for n in names), names=tuple(names),
            by_name={n: i for i, n in enumerate(names)},
            relation=tuple(("brightness", "position", "target")[t] for t in types),
        )  # fmt: skip
        levels = tuple(
            r.below(11) * 10 if t == LIGHT else r.below(2) if t == BLIND else 18 + r.below(5)
            for t in types
        )
        present = tuple(r.random() < 0.6 for _ in names)
        none: tuple = ()
        blank = SmartHomeState(
            params=params, seed=seed, step=0, home=home, levels=levels,
            level_at=(0,) * len(devices), relative=frozenset(), present=present,
            present_at=(0,) * len(names), rules=none, rule_order=none, pending=none,
            tasks=none, text="", mentioned=none, probes=none, action_changes=none,
            event_changes=none, reward=0, score=0, max_score=0, admissible=("wait",),
            next_due=-1, digest=0,
        )  # fmt: skip
        d = _Draft(blank, 0)
        d.say("intro")
        for i in range(len(devices)):
            d.state_line(i)
            d.note(devices[i], home.relation[i], None, _level_text(types[i], levels[i]))
        for i, pid in enumerate(home.persons):
            where = "home" if present[i] else "away"
            d.say("person_state", person=pid, where=where)
            d.note(pid, "location", None, where)
        for _ in range(params.load // 2):
            _house_rule(d)
        d.chatter(first=1)
        return d.freeze(admissible=None, probes=(), event_changes=d.take_changes())

    def transition(
        self, state: SmartHomeState, action: str, rng: Any = None, params: Any = None
    ) -> SmartHomeState:
        """Apply the agent's command, then the world's events at the next step.

        A rejected command spends the move with a reply and leaves the world as it was:
        no events, no probes.
        """
        d = _Draft(state, state.step + 1)
        cmd = _parse(state.home, state.rules, action)
        if not isinstance(cmd, _Command):
            kind, values = cmd
            d.say(kind, **values)
            return d.freeze(admissible=state.admissible, probes=())
        if not _command(d, cmd):
            return d.freeze(admissible=state.admissible, probes=())
        action_changes = d.take_changes()
        _events(d)
        event_changes = d.take_changes()
        d.chatter(first=1)
        return d.freeze(
            admissible=None, probes=_probes(d), action_changes=action_changes,
            event_changes=event_changes,
        )  # fmt: skip

    def observation(self, state: SmartHomeState, rng: Any = None, params: Any = None) -> str:
        """Return the text of ``state``'s step, one message per line."""
        return state.text

    def truth_info(self, state: SmartHomeState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        return {
            "wm.state": _true_facts(state),
            "wm.delta": delta_info(state.action_delta, state.event_delta),
            "wm.probes": list(state.probes),
            "wm.state_hash": state_hash(state),
            "wm.mentioned": sorted(state.mentioned),
        }

    @staticmethod
    def admissible_actions(state: SmartHomeState) -> list[str]:
        """Return the commands that do something here, sorted.

        ``wait``; ``cancel`` for every pending rule; for each open instruction the
        command that carries it out and the confusable ones beside it (the increment
        read as an overwrite or back, the condition applied now), so choosing the right
        reading is the task.
        """
        return list(state.admissible)


def _true_facts(state: SmartHomeState) -> list[Fact]:
    """Return the true state of ``state`` as a sorted list of facts."""
    home = state.home
    out = []
    # Ids sort as blind:* < light:* < person:* < rule:* < thermostat:home.
    thermostat = len(home.devices) - 1
    for i in range(thermostat):
        out.append(
            Fact(home.devices[i], home.relation[i], _level_text(home.types[i], state.levels[i]))
        )
    for pid, here in zip(home.persons, state.present, strict=True):
        out.append(Fact(pid, "location", "home" if here else "away"))
    rules = state.rules
    out.extend(chain.from_iterable([rules[i].facts for i in state.rule_order]))
    out.append(Fact(home.devices[thermostat], "target", str(state.levels[thermostat])))
    return out


def _sample(rng: StepRng, pool: tuple[str, ...], k: int) -> list[str]:
    items = list(pool)
    for i in range(k):
        j = i + rng.below(len(items) - i)
        items[i], items[j] = items[j], items[i]
    return items[:k]


def _command(d: _Draft, cmd: _Command) -> bool:
    """Apply the agent's parsed command to the draft; return False if rejected."""
    home = d.home
    if cmd.verb == "wait":
        d.say("waited")
        return True
    if cmd.verb == "cancel":
        rule = d.rules[cmd.rule]
        if cmd.rule not in d.pending:
            d.say("rule_over", rule=rule.id)
            return False
        d.say("rule_cancelled", rule=rule.id)
        d.put_rule(cmd.rule, rule._replace(status="cancelled", status_at=d.step, due=-1))
        task = next((t for t in d.tasks if t.kind == "cancel" and t.rule == cmd.rule), None)
        d.reward += 1 if task else -1
        if task:
            d.close_task(task)
        return True
    if cmd.verb == "schedule":
        if d.rule_on(cmd.person, cmd.device):
            d.say("rule_clash", device=home.devices[cmd.device])
            return False
        rule = d.new_rule(cmd, "agent")
        d.announce_rule(rule)
        # One try per instruction: the open future instruction on this device is
        # carried out (+1) or misread (-1); a rule nobody asked for costs -1.
        task = next(
            (t for t in d.tasks if t.kind not in ("now", "cancel") and t.device == cmd.device), None
        )
        if task is not None:
            right = (task.op, task.value, task.person, task.delay) == (
                cmd.op,
                cmd.value,
                cmd.person,
                cmd.delay,
            )
            d.reward += 1 if right and (task.person < 0 or task.on == cmd.on) else -1
            d.close_task(task)
        else:
            d.reward -= 1
        return True
    # set / adjust now
    device, dtype = cmd.device, home.types[cmd.device]
    before = d.levels[device]
    level = _apply(cmd.op, cmd.value, before, dtype)
    task = next((t for t in d.tasks if t.kind == "now" and t.device == device), None)
    if task is not None:
        d.reward += 1 if level == _apply(task.op, task.value, before, dtype) else -1
        d.close_task(task)
    elif level != before:
        d.reward -= 1  # nobody asked for this change (or not yet: a condition applied now)
    d.set_level(device, level, relative=cmd.op == "adjust")
    d.state_line(device, "done")
    return True


def _events(d: _Draft) -> None:
    """Timers and waiting rules due now; comings and goings; the household; the user."""
    rng, step, home = d.rng, d.step, d.home
    if 0 <= d.state.next_due <= step:
        for i in tuple(d.pending):
            if d.rules[i].due == step:
                d.fire(i)
    # One 48-bit draw makes the step's five independent rolls (9 bits each).
    bits = rng.bits()
    if bits & 511 < P_MOVE * 512:
        p = rng.below(len(home.persons))
        arrive = not d.present[p]
        on = "arrive" if arrive else "leave"
        d.set_present(p, arrive)
        d.say("arrive" if arrive else "leave", person=home.persons[p])
        for i in tuple(d.pending):
            rule = d.rules[i]
            if rule.trigger == p and rule.on == on and rule.status == "armed":
                if rule.delay:
                    d.describe_rule("rule_waiting", rule)
                    d.put_rule(
                        i, rule._replace(status="waiting", status_at=step, due=step + rule.delay)
                    )
                else:
                    d.fire(i)
        for task in d.tasks:  # the condition came true before the agent set it up
            if task.person == p and task.on == on:
                d.close_task(task)
    if (bits >> 9) & 511 < P_MANUAL * 512:
        owners = [i for i, here in enumerate(d.present) if here]
        free = [i for i in range(len(home.devices)) if not any(t.device == i for t in d.tasks)]
        if owners and free:
            device = rng.choice(free)
            dtype = home.types[device]
            level = _random_level(rng, dtype, d.levels[device])
            d.set_level(device, level, relative=False)
            d.state_line(device, "manual", owner=home.persons[rng.choice(owners)])
    if (bits >> 18) & 511 < P_HOUSE_RULE * 512:
        _house_rule(d)
    if (bits >> 27) & 511 < P_HOUSE_CANCEL * 512:
        asked = {t.rule for t in d.tasks if t.kind == "cancel"}
        mine = [i for i in d.pending if d.rules[i].owner == "house" and i not in asked]
        if mine:
            i = rng.choice(mine)
            rule = d.rules[i]
            owner = home.persons[rng.below(len(home.persons))]
            d.describe_rule("house_cancel", rule, owner=owner)
            d.put_rule(i, rule._replace(status="cancelled", status_at=step, due=-1))
    if (bits >> 36) & 511 < P_INSTRUCT * 512:
        _instruct(d)


def _random_level(rng: StepRng, dtype: int, avoid: int) -> int:
    if dtype == BLIND:
        return 1 - avoid
    while True:
        level = rng.below(11) * 10 if dtype == LIGHT else HEAT_RANGE[0] + 2 + rng.below(10)
        if level != avoid:
            return level


def _random_change(rng: StepRng, dtype: int, level: int, now: bool) -> tuple[str, str, int]:
    """Pick ``(phrase, op, value)``; a change made now stays inside the device's range."""
    if dtype == BLIND:
        return "set", "set", (1 - level if now else rng.below(2))
    low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
    unit = 1 if dtype == HEAT else 10
    for _ in range(8):
        phrase = rng.choice(("set", "set", "up", "down", "nudge_up", "nudge_down"))
        if phrase == "set":
            value = _random_level(rng, dtype, level)
            return phrase, "set", value
        size = unit if phrase.startswith("nudge") else unit * (1 + rng.below(4))
        value = size if phrase.endswith("up") else -size
        if not now or low <= level + value <= high:
            return phrase, "adjust", value
    return "set", "set", _random_level(rng, dtype, level)


def _instruct(d: _Draft) -> None:
    """The user gives an instruction: a new open task, worded as a message."""
    rng, home = d.rng, d.home
    roll = rng.below(100)
    for kind, weight in INSTRUCTION_WEIGHTS:  # noqa: B007  (the loop picks ``kind``)
        if roll < weight:
            break
        roll -= weight
    if kind == "cancel":
        asked = {t.rule for t in d.tasks if t.kind == "cancel"}
        open_rules = [i for i in d.pending if i not in asked]
        if open_rules:
            i = rng.choice(open_rules)
            rule = d.rules[i]
            d.add_task(Task("cancel", rule.device, "", 0, -1, "", 0, i, d.step))
            device = home.devices[rule.device]
            if rng.random() >= d.params.indirection:
                d.say("ask_cancel", rule=rule.id)
            elif rule.trigger >= 0:
                d.say("ask_cancel_desc", device=device, person=home.persons[rule.trigger])
            else:
                d.say("ask_cancel_timer_desc", device=device, clock="clock")
            return
        kind = "now"
    busy = {t.device for t in d.tasks}
    free = [i for i in range(len(home.devices)) if i not in busy]
    if not free:
        return
    device = rng.choice(free)
    dtype = home.types[device]
    person, on, delay = -1, "time", 0
    if kind in ("when", "nested"):
        person = rng.below(len(home.persons))
        on = "leave" if d.present[person] else "arrive"
    if kind in ("timer", "nested"):
        delay = rng.choice(DELAYS)
    if kind != "now" and d.rule_on(person, device):
        return  # the pending rule there must stay the only one for its description
    phrase, op, value = _random_change(rng, dtype, d.levels[device], now=kind == "now")
    d.add_task(Task(kind, device, op, value, person, on, delay, -1, d.step))
    values = {"device": home.devices[device]}
    if phrase == "set":
        values["setting"] = _level_text(dtype, value)
    elif not phrase.startswith("nudge"):
        values["amount"] = str(abs(value))
    if person >= 0:
        values.update(person=home.persons[person], on=on)
    if delay:
        values["minutes"] = str(delay)
    d.say(f"ask_{kind}_{phrase}", **values)


def _house_rule(d: _Draft) -> None:
    """Someone in the household sets up a rule of their own (never on a busy device)."""
    rng, home = d.rng, d.home
    busy = {t.device for t in d.tasks}
    device = rng.below(len(home.devices))
    person = rng.below(len(home.persons)) if rng.random() < 0.6 else -1
    if device in busy or d.rule_on(person, device):
        return
    dtype = home.types[device]
    _, op, value = _random_change(rng, dtype, d.levels[device], now=False)
    if person >= 0:
        on = "leave" if d.present[person] else "arrive"
        delay = rng.choice(DELAYS) if rng.random() < 0.3 else 0
    else:
        on, delay = "time", rng.choice(DELAYS)
    cmd = _Command("schedule", device, op, value, person, on, delay)
    rule = d.new_rule(cmd, "house")
    d.announce_rule(rule, owner=home.persons[rng.below(len(home.persons))])


def _probes(d: _Draft) -> tuple[Probe, ...]:
    """Questions due now about mentioned entities, old and recent alike."""
    rng, home = d.rng, d.home
    if rng.random() >= d.params.probe_rate:
        return ()
    probes: dict[tuple[str, str], Probe] = {}
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        roll = rng.below(3)
        rules = d.rules
        if roll == 2 and rules:
            # Breakage: what a rule does, stated once when it was made.
            rule = rules[rng.below(len(rules))]
            fact = rule.facts[rng.choice((1, 2, 5))]  # device, effect, trigger
            probe = Probe(rule.id, fact.relation, fact.object, rule.created, "breakage")
        elif roll == 1 and (d.relative or rules):
            # Confusion: a level after an increment, or whether a rule is still pending.
            if d.relative and (not rules or rng.random() < 0.5):
                device = rng.choice(sorted(d.relative))
                probe = _level_probe(d, device, "confusion")
            else:
                rule = rules[rng.below(len(rules))]
                probe = Probe(rule.id, "status", rule.status, rule.status_at, "confusion")
        elif rng.random() < 0.75:
            probe = _level_probe(d, rng.below(len(home.devices)), "drift")
        else:
            p = rng.below(len(home.persons))
            where = "home" if d.present[p] else "away"
            probe = Probe(home.persons[p], "location", where, d.present_at[p], "drift")
        probes.setdefault((probe.subject, probe.relation), probe)
    return tuple(probes.values())


def _level_probe(d: _Draft, device: int, kind: str) -> Probe:
    home = d.home
    value = _level_text(home.types[device], d.levels[device])
    return Probe(home.devices[device], home.relation[device], value, d.level_at[device], kind)


# --- the Gymnasium shell ---------------------------------------------------------------


class SmartHomeEnv(DiagnosticEnv):
    """``wmkit/SmartHome-v0``: the shared diagnostic shell over ``SmartHomeFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ``max_score`` counts the
    instructions given so far. ``terminated`` is always False; the episode ends at
    ``horizon``. ``SmartHomeEnv.reader`` is the family's perfect reader, ``read``.

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        horizon: steps (minutes) per episode, 20..1000 (default 200).
        load: rooms, each with a light and blinds, 1..16 (default 4).
        people: household members, 1..12 (default 3).
        paraphrase_rate: probability a message uses a non-canonical template, 0..1.
        distractors: chatter lines per step, 0..50.
        indirection: probability a rule is named by device and trigger, not by id.
        probe_rate: probability that probes are due at a step, 0..1.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = SmartHomeFuncEnv
    params_class = SmartHomeParams
    reader = staticmethod(read)
