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

The step path is written for speed (the family's target is 50,000 steps a second with
ground truth off): lines are filled from templates compiled once, the episode keeps
memo caches (parsed commands, seeds of its steps, device facts) that never change what
a state means, a step whose world stands still copies none of it, the admissible
commands are kept up to date rather than rebuilt, and what only ground truth needs
(rule facts, the state hash's rule digests, the probes) is derived when ``truth``
asks, not on every step.
"""

from __future__ import annotations

import hashlib
import math
import string
import threading
from dataclasses import dataclass
from itertools import compress
from operator import is_not, itemgetter
from typing import Any, NamedTuple

import numpy as np
from gymnasium import spaces
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic import (
    CoreDefaults,
    DiagnosticEnv,
    FamilyParams,
    StepRng,
    check_int,
    truth_info,
)
from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook
from wmkit.world.types import Claim, Delta, Fact, Probe

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


def _slot_names(template: str) -> tuple[str, ...]:
    return tuple(name for _, name, _, _ in string.Formatter().parse(template) if name)


def _say_orders() -> dict[str, tuple[str, ...]]:
    """The order in which the step code passes each kind's texts to ``_Draft.say``.

    Written out here, not taken from the templates, so that rewording a template (even
    reordering its slots) cannot misplace a value. Kinds not listed take the slot order
    of their canonical template.
    """
    orders = {}
    for prefix, (device, level) in (
        ("light", ("light", "level")),
        ("blind", ("blind", "position")),
        ("heat", ("heater", "degrees")),
    ):
        orders[f"{prefix}_state"] = orders[f"{prefix}_done"] = (device, level)
        orders[f"{prefix}_manual"] = ("owner", device, level)
    orders["arrive"] = orders["leave"] = ("person",)
    for kind in ("rule_waiting", "rule_fired", "rule_cancelled", "ask_cancel"):
        orders[kind] = ("rule",)
    orders["house_cancel"] = ("owner", "rule")
    orders["rule_waiting_desc"] = orders["rule_fired_desc"] = ("pending", "device", "person")
    orders["timer_fired_desc"] = ("pending", "device", "clock")
    orders["house_cancel_desc"] = ("owner", "pending", "device", "person")
    orders["house_cancel_timer_desc"] = ("owner", "pending", "device", "clock")
    orders["ask_cancel_desc"] = ("device", "person")
    orders["ask_cancel_timer_desc"] = ("device", "clock")
    for owner in ((), ("owner",)):
        house = "house_" if owner else ""
        person = ("person", "on", "delay")
        orders[house + "rule_person"] = (*owner, "rule", *person, "device", "effect")
        orders[house + "rule_timer"] = (*owner, "rule", "after", "device", "effect")
    for cond, heads in _CONDITIONS.items():
        for op, tails in _OPERATIONS.items():
            slots = set(_slot_names(heads[-1] + tails[0]))
            orders[f"ask_{cond}_{op}"] = tuple(s for s in _ASK_ORDER if s in slots)
    return orders


# Instructions: condition texts, then the device and the setting or amount.
_ASK_ORDER = ("person", "on", "minutes", "device", "setting", "amount")


def _plans() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]]:
    """Per message kind: its templates, its values' order for ``say``, its entity slots.

    The entity slots are given as positions in the order.

    Raises:
        ValueError: a kind's templates do not all have the slots of its order (chatter
            is drawn apart and exempt).
    """
    orders = _say_orders()
    plans = {}
    for name, kind in TEXT.kinds.items():
        order = orders.get(name) or _slot_names(kind.templates[0])
        if name != "chatter" and any(
            sorted(_slot_names(t)) != sorted(order) for t in kind.templates
        ):
            raise ValueError(f"{name}: every template needs exactly the slots {order}")
        entities = tuple(k for k, slot in enumerate(order) if SLOT_TYPES[slot].entity)
        plans[name] = (kind.templates, order, entities)
    return plans


def _printf(template: str, order: tuple[str, ...]) -> tuple[str, tuple[int, ...] | None]:
    """Compile a template to a ``%`` format and the order it takes ``order``'s values in.

    ``%`` formatting is the cheapest way to fill a line; the order is None when it is
    ``order`` itself, as for most templates. A template without slots is returned as
    it is: ``say`` uses it without formatting.
    """
    if not order:
        return template, None
    parts, slots = [], []
    for literal, name, _, _ in string.Formatter().parse(template):
        parts.append(literal.replace("%", "%%"))
        if name is not None:
            parts.append("%s")
            slots.append(order.index(name))
    permutation = tuple(slots)
    return "".join(parts), None if permutation == tuple(range(len(order))) else permutation


def _format(template: str, order: tuple[str, ...]) -> tuple[str, itemgetter | None]:
    """``_printf``, with the order as a getter that puts ``say``'s texts in it."""
    fmt, permutation = _printf(template, order)
    return fmt, itemgetter(*permutation) if permutation else None  # never one slot


_PLANS = _plans()
# kind -> (how many paraphrases, its templates as ``_format`` formats, canonical first,
# and the canonical one's format and reordering again, for the common case)
_FORMATS = {
    name: (len(templates) - 1, formats, *formats[0])
    for name, (templates, order, _) in _PLANS.items()
    for formats in [tuple(_format(t, order) for t in templates)]
}
_WAITED = TEXT.kinds["waited"].templates  # the reply to wait, which transition writes out
_WAITED_OTHERS = len(_WAITED) - 1  # its paraphrases
_TO_TEXT = {slot: t.to_text for slot, t in SLOT_TYPES.items()}
_CHATTER = TEXT.kinds["chatter"].templates
_N_CHATTER = len(_CHATTER)
_CHATTER_PERSON = tuple(bool(_slot_names(t)) for t in _CHATTER)


# --- parameters ------------------------------------------------------------------------


@dataclass(frozen=True)
class SmartHomeParams(FamilyParams):
    """Episode parameters (:class:`FamilyParams`); validated on construction.

    ``horizon`` counts minutes; ``load`` is the rooms, each with a light and blinds,
    1..16; ``indirection`` the probability that a rule firing or a cancellation names
    its rule by device and trigger instead of by id.

    Attributes:
        people: household members who come and go, 1..12.
    """

    MAX_LOAD = len(ROOMS)

    people: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("people", self.people, 1, 12)


# --- state -----------------------------------------------------------------------------


class Rule(NamedTuple):
    """One automation rule: its facts, its hidden schedule and its anchors.

    ``trigger`` is a person index or -1 for the clock; ``on`` is ``arrive``, ``leave``
    or ``time``; ``value`` is the level set or the signed change. ``due`` is the step it
    fires at once timed (timers and triggered rules), else -1. Its facts and its share
    of the state hash are derived when ground truth asks (``_rule_facts_of``,
    ``_rule_digest``), not on the step path.
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


# Field positions, for the hot loops: indexing a NamedTuple is much cheaper than reading
# its attributes.
_T_KIND, _T_DEVICE, _T_OP, _T_VALUE, _T_PERSON, _T_ON, _T_DELAY, _T_RULE, _T_COMMANDS = (
    Task._fields.index(name)
    for name in ("kind", "device", "op", "value", "person", "on", "delay", "rule", "commands")
)
_TASK_DEVICE = itemgetter(_T_DEVICE)
_R_DEVICE, _R_TRIGGER, _R_STATUS, _R_DUE, _R_OWNER, _R_CREATED = (
    Rule._fields.index(name) for name in ("device", "trigger", "status", "due", "owner", "created")
)


class _Cache(dict):
    """A memo filled as it is used: a pickled state travels without its caches."""

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple]:
        return _Cache, ()


class _Starts(list):
    """The episode's ``StepRng(seed, step).x`` by step, filled when first needed.

    ``_step_x`` fills it; like ``_Cache``, it is pickled empty.
    """

    __slots__ = ()

    def __reduce__(self) -> tuple[type, tuple]:
        return _Starts, ()


@dataclass(frozen=True, slots=True, eq=False)
class _Home:
    """What is fixed for an episode: devices, people, their names, and three caches.

    The caches hold for every state of the episode, snapshots and branches included:
    a command's parse depends only on the house, a device's fact only on its level, a
    step's generator seed only on the episode seed and the step.
    (A slotted class, not a NamedTuple: the step path reads its fields a lot, and slot
    reads are the fast ones.) Homes compare by what they are, not by their caches.
    """

    devices: tuple[str, ...]  # ids, sorted
    types: tuple[int, ...]  # LIGHT, BLIND or HEAT per device
    words: tuple[str, ...]  # command names: "kitchen light"
    set_to: tuple[str, ...]  # per device, its commands' heads: "set kitchen light to "
    adjust_by: tuple[str, ...]  # "adjust kitchen light by "
    by_words: dict[str, int]
    persons: tuple[str, ...]  # ids, sorted
    names: tuple[str, ...]  # command names: "leo"
    by_name: dict[str, int]
    relation: tuple[str, ...]  # per device: brightness, position or target
    titles: tuple[str, ...]  # per person, as the text writes them: "Leo"
    device_ids: tuple[int, ...]  # range(len(devices))
    device_set: frozenset[int]  # the same
    # per chatter line: (line, id) per person, or the line if it names nobody
    chatter: tuple[tuple[tuple[str, str], ...] | str, ...]
    locations: tuple[tuple[Fact, Fact], ...]  # per person: (away, home) facts
    # The parameters the step path reads, ready to use: rates as thresholds on a raw
    # 48-bit draw (``x * 2**-48 < rate`` exactly when ``x < ceil(rate * 2**48)``), ints
    # because comparing two ints is cheaper than an int and a float.
    paraphrase_x: int
    indirection_x: int
    distractors: int
    seed_mix: int  # the episode seed's share of StepRng's seeding
    horizon: int
    starts: _Starts  # step -> StepRng(seed, step).x, steps 0 .. horizon (``_step_x``)
    commands: _Cache  # command text -> _Command, for commands that parsed
    facts: _Cache  # device << 7 | level -> its fact

    def _key(self) -> tuple:
        return (self.devices, self.persons, self.paraphrase_x, self.indirection_x,
                self.distractors, self.seed_mix)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Home) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


class SmartHomeState(NamedTuple):
    """The whole episode state at one step: an immutable value, the snapshot token.

    Attributes:
        params: the episode parameters.
        seed: episode seed; step ``t`` draws from a generator seeded by (seed, t).
        home: the episode's fixed devices and people.
        levels: per device: brightness, 0/1 for closed/open blinds, or degrees.
        level_at: per device, the step its level was last stated.
        relative: devices whose last change was relative (an adjust).
        present: per person, whether they are home.
        present_at: per person, the step their location was last stated.
        rules: every rule ever made, in creation order (``rules[i].id`` is
            ``rule:r<i+1>``).
        pending: indices of armed or waiting rules.
        tasks: open user instructions.
        admissible: sorted admissible commands.
        next_due: the earliest step a pending rule is due at, or -1.
        max_score: instructions given so far.
        score: cumulative reward.
        step: steps taken since reset (0 at reset).
        text: this step's observation.
        mentioned: entity ids named in this step's observation (unsorted, may repeat).
        probe_x: where this step's generator stood when its probes were due, or -1 for
            none (the reset, a rejected command); see ``probes``.
        action_changes: ``(subject, relation, before, after)`` changes caused by the
            agent's command this step, in the order made (``before`` None for a new
            fact; a fact changed twice appears twice; a new rule is one record
            ``(id, None, None, rule)``); see ``action_delta``.
        event_changes: the same for the world's events this step; see ``event_delta``.
        reward: this step's reward.

    The fields are in this order so that a step that leaves the world as it was (a
    ``wait`` and no event) keeps the first ``_S_STEP`` of them as one slice.
    """

    params: SmartHomeParams
    seed: int
    home: _Home
    levels: tuple[int, ...]
    level_at: tuple[int, ...]
    relative: frozenset[int]
    present: tuple[bool, ...]
    present_at: tuple[int, ...]
    rules: tuple[Rule, ...]
    pending: tuple[int, ...]
    tasks: tuple[Task, ...]
    admissible: tuple[str, ...]
    next_due: int
    max_score: int
    score: int
    step: int
    text: str
    mentioned: tuple[str, ...]
    probe_x: int
    action_changes: tuple[tuple[str, str, str | None, str], ...]
    event_changes: tuple[tuple[str, str, str | None, str], ...]
    reward: int

    @property
    def probes(self) -> tuple[Probe, ...]:
        """The probes due this step.

        They are the step's last draws and read only the state the step ends in, so
        they are drawn here, when asked (ground truth on), not on every step.
        """
        return _probes(self)

    @property
    def action_delta(self) -> Delta:
        """The fact change caused by the agent's command this step."""
        return _delta(_net(self.action_changes, self.home))

    @property
    def event_delta(self) -> Delta:
        """The fact change caused by the world's events (timers, arrivals...) this step."""
        return _delta(_net(self.event_changes, self.home))


_S_HOME, _S_RULES, _S_ADMISSIBLE, _S_NEXT_DUE, _S_MAX_SCORE, _S_SCORE, _S_STEP, _S_TEXT = (
    SmartHomeState._fields.index(name)
    for name in ("home", "rules", "admissible", "next_due", "max_score", "score", "step", "text")
)
_S_REWARD = SmartHomeState._fields.index("reward")


_NO_DELTA = Delta()


def _delta(changes: tuple[tuple[str, str, str | None, str], ...]) -> Delta:
    """Return the ``Delta`` of net changes, as ``changes_delta`` does (facts built directly)."""
    if not changes:
        return _NO_DELTA
    added = sorted([_tuple(Fact, (s, r, after)) for s, r, _, after in changes])
    removed = [_tuple(Fact, (s, r, before)) for s, r, before, _ in changes if before is not None]
    removed.sort()
    return _tuple(Delta, (tuple(added), tuple(removed)))


def _net(changes: tuple, home: _Home) -> tuple[tuple[str, str, str | None, str], ...]:
    """Return the net changes: per fact, its first ``before`` and last ``after`` if they differ.

    A new rule is recorded as ``(id, None, None, the rule as made)``: each fact new.
    """
    if not changes:
        return ()
    if len(changes) == 1 and changes[0][1] is not None:
        return changes if changes[0][2] != changes[0][3] else ()
    net: dict[tuple[str, str], list[str | None]] = {}
    for subject, relation, before, after in changes:
        if relation is None:
            for fact in _rule_facts_of(after, home):
                net[subject, fact.relation] = [None, fact.object]
            continue
        entry = net.get((subject, relation))
        if entry is None:
            net[subject, relation] = [before, after]
        else:
            entry[1] = after
    return tuple([(s, r, b, a) for (s, r), (b, a) in net.items() if b != a])


def state_hash(state: SmartHomeState) -> str:
    """Return a stable 16-hex-digit hash of the world in ``state``.

    Covers the episode seed, the step, device levels, who is home, open instructions
    and every rule (through the sum of per-rule digests). Equal hashes mean the same
    world at the same step of the same episode; the observation and score are left out.
    """
    digest = sum(map(_rule_digest, state.rules)) % 2**64
    world = f"{state.levels!r}, {state.present!r}"
    return _state_hash(state.seed, state.step, world, repr(state.tasks), digest)


def _state_hash(seed: int, step: int, world: str, tasks: str, digest: int) -> str:
    """``state_hash`` from its parts; ``world``: ``"%r, %r" % (levels, present)``."""
    # repr((seed, step, levels, present, tasks, digest)), from the parts' reprs
    raw = f"({seed}, {step}, {world}, {tasks}, {digest})"
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def _rule_facts_of(rule: Rule, home: _Home) -> tuple[Fact, ...]:
    """Return the facts of ``rule``, sorted by relation."""
    rid, device, trigger, on, delay, op, value, status, _, _, _, _ = rule
    return (
        _tuple(Fact, (rid, "delay", str(delay))),
        _tuple(Fact, (rid, "device", home.devices[device])),
        _tuple(Fact, (rid, "effect", _effect(op, value, home.types[device]))),
        _tuple(Fact, (rid, "on", on)),
        _tuple(Fact, (rid, "status", status)),
        _tuple(Fact, (rid, "trigger", home.persons[trigger] if trigger >= 0 else "clock")),
    )


def _rule_digest(rule: Rule) -> int:
    """Return ``rule``'s share of the state hash (the hash sums them mod 2**64)."""
    # Hashing a tuple of ints is cheap and, unlike hashing strings, the same in every
    # process.
    rid, device, trigger, on, delay, op, value, status, due, owner, created, _ = rule
    code = _CODE
    key = (int(rid[6:]), device, trigger, code[on], delay, code[op], value, code[status], due,
           code[owner], created)  # fmt: skip
    return hash(key) % 2**64


_tuple = tuple.__new__  # builds a NamedTuple from a tuple, skipping its Python __new__
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
_M48 = (1 << 48) - 1
_M64 = (1 << 64) - 1
_UNIT = 3.552713678800501e-15  # 2**-48: a 48-bit draw as a float in [0, 1)
_ONE = float(1 << 48)  # a probability times this is a threshold on a raw draw
_SPLITMIX = 0xBF58476D1CE4E5B9  # StepRng's seeding multiplier


def _starts(seed_mix: int, first: int, n: int) -> list[int]:
    """``StepRng(seed, step).x`` for the ``n`` steps from ``first``, computed at once.

    numpy's uint64 arithmetic wraps modulo 2**64 as StepRng's masks do; one pass over an
    episode costs less than seeding its steps one by one in Python's big integers.
    """
    mix = np.uint64(_SPLITMIX)
    z = np.uint64(seed_mix) + np.arange(first, first + n, dtype=np.uint64) * mix
    z = (z ^ (z >> np.uint64(30))) * mix
    return ((z ^ (z >> np.uint64(31))) & np.uint64(_M48)).tolist()


def _step_x(home: _Home, step: int) -> int:
    """``StepRng(seed, step).x`` for ``step >= 0``, from the episode's list of them."""
    starts = home.starts
    if not starts:  # a new episode, or a state unpickled without its caches
        starts[:] = _starts(home.seed_mix, 0, home.horizon + 1)  # one call: thread-safe
    if step < len(starts):
        return starts[step]
    return _starts(home.seed_mix, step, 1)[0]  # past the horizon: a planner looking on


def _roll(p: float, shift: int) -> tuple[int, int]:
    """Return ``(mask, bound)``: ``bits & mask < bound`` when a 9-bit roll comes true.

    The roll is ``(bits >> shift) & 511``, true when below ``p * 512``.
    """
    return 511 << shift, math.ceil(p * 512) << shift


# The step's world events: five 9-bit rolls of one draw.
_MOVE_MASK, _MOVE_BOUND = _roll(P_MOVE, 0)
_MANUAL_MASK, _MANUAL_BOUND = _roll(P_MANUAL, 9)
_HOUSE_RULE_MASK, _HOUSE_RULE_BOUND = _roll(P_HOUSE_RULE, 18)
_HOUSE_CANCEL_MASK, _HOUSE_CANCEL_BOUND = _roll(P_HOUSE_CANCEL, 27)
_INSTRUCT_MASK, _INSTRUCT_BOUND = _roll(P_INSTRUCT, 36)
# The instruction kind for each roll in [0, 100).
_KIND_BY_ROLL = tuple(kind for kind, weight in INSTRUCTION_WEIGHTS for _ in range(weight))
_ASK_KINDS = {cond: {op: f"ask_{cond}_{op}" for op in _OPERATIONS} for cond in _CONDITIONS}
# Message kinds of a device's level, per device type: stated, reply to the agent, by hand.
_STATE, _DONE, _BY_HAND = 0, 1, 2
_LEVEL_KINDS = tuple(
    tuple(f"{prefix}_{context}" for context in ("state", "done", "manual"))
    for prefix in ("light", "blind", "heat")
)


_NUMBERS = tuple(map(str, range(1000)))  # str(n) of every level, amount and delay
_SIGNED = {n: f"{n:+d}" for n in range(-100, 101)}  # every adjustment, as commands write it
_LATER = ("right away", *(f"{n} minutes later" for n in range(1, 1000)))  # a rule's delay


def _level_text(dtype: int, level: int) -> str:
    return POSITIONS[level] if dtype == BLIND else _NUMBERS[level]


def _effect(op: str, value: int, dtype: int) -> str:
    if op == "set":
        return "set " + _level_text(dtype, value)
    return f"adjust {value:+d}"


def _apply(op: str, value: int, level: int, dtype: int) -> int:
    if op == "set":
        return value
    low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
    return min(high, max(low, level + value))


def _rank(n: int) -> int:
    """Return where ``r<n>`` sorts among the ids ``r1`` .. ``r<n>`` compared as strings.

    For each length ``l`` shorter than ``n``'s ``L`` digits, the ids at most ``n``'s
    first ``l`` digits come first: ``int(s[:l]) - 10**(l-1) + 1`` of them; then the
    ``n - 10**(L-1)`` ids of ``n``'s own length below it.
    """
    s = str(n)
    rank = n - 10 ** (len(s) - 1)
    for length in range(1, len(s)):
        rank += int(s[:length]) - 10 ** (length - 1) + 1
    return rank


def _put(values: tuple, i: int, value: Any) -> tuple:
    copy = list(values)  # cheaper than splicing slices
    copy[i] = value
    return tuple(copy)


def _task_commands(
    home: _Home, kind: str, device: int, op: str, value: int, person: int, on: str, delay: int
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The command that carries a task out, then the confusable ones beside it.

    Returns them, and them without repeats (setting a light to 0 reads the same both
    ways). Each is also put in the house's parse cache, parsed as ``_parse`` would.
    """
    if kind == "cancel":
        return (), ()  # every pending rule's cancel is admissible anyway
    cache = home.commands
    if op == "set":
        do = home.set_to[device] + _level_text(home.types[device], value)
    else:
        do = home.adjust_by[device] + _SIGNED[value]
    if do not in cache:  # most tasks repeat a command of the episode: skip the parse then
        cache[do] = _tuple(_Command, (op, device, op, value, -1, "", 0, -1))
    # The same number read the other way: an increment as an overwrite or back.
    other = None
    dtype = home.types[device]
    if dtype != BLIND:
        if op == "set" and value:
            other_op, other_value = "adjust", value
            other = home.adjust_by[device] + _SIGNED[value]
        else:
            low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
            other_op, other_value = "set", abs(value)
            if low <= other_value <= high:
                other = home.set_to[device] + _NUMBERS[other_value]
        if other is not None and other not in cache:
            parsed = (other_op, device, other_op, other_value, -1, "", 0, -1)
            cache[other] = _tuple(_Command, parsed)
    if kind == "now":
        if other is None:
            return (do,), (do,)
        return (do, other), ((do, other) if other != do else (do,))
    if person < 0:
        when = f"schedule in {delay} min: "
    else:
        verb = "arrives: " if on == "arrive" else "leaves: "
        if delay:
            verb = f"{verb[:-2]}, in {delay} min: "
        when = f"schedule when {home.names[person]} {verb}"
    # The right rule, and the condition applied now.
    schedule = when + do
    cache[schedule] = _tuple(_Command, ("schedule", device, op, value, person, on, delay, -1))
    if other is None:
        return (schedule, do), (schedule, do)
    if other == do:
        return (schedule, do, schedule), (schedule, do)
    other_schedule = when + other
    cache[other_schedule] = _tuple(
        _Command, ("schedule", device, other_op, other_value, person, on, delay, -1)
    )
    return (schedule, do, other_schedule), (schedule, do, other_schedule)


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


_WAIT = _Command("wait")
# A rejection: the kind of the reply and its canonical values (in the kind's slot order).
_Rejection = tuple[str, tuple[str, ...]]
_NOT_UNDERSTOOD: _Rejection = ("not_understood", ())


class _RuleName(NamedTuple):
    """How the rule of one index is named: the same in every episode."""

    id: str  # rule:r12
    text: str  # R12
    cancel: str  # cancel r12
    command: _Command  # the parse of ``cancel``
    rank: int  # where the id sorts among those before it (``_rank``)


_RULE_NAMES: list[_RuleName] = []  # by rule index, grown as needed
_GROWING = threading.Lock()  # two threads growing the list at once would misnumber it


def _rule_name(i: int) -> _RuleName:
    try:
        return _RULE_NAMES[i]
    except IndexError:
        with _GROWING:
            for n in range(len(_RULE_NAMES) + 1, i + 2):
                command = _Command("cancel", rule=n - 1)
                name = _RuleName(f"rule:r{n}", f"R{n}", f"cancel r{n}", command, _rank(n))
                _RULE_NAMES.append(name)
        return _RULE_NAMES[i]


def _number(text: str, signed: bool) -> int | None:
    body = text[1:] if signed and text[:1] in "+-" else text
    if not (body.isascii() and body.isdigit() and len(body) <= 4):
        return None
    return -int(body) if text[0] == "-" else int(body)


def _parse_change(home: _Home, words: list[str]) -> _Command | _Rejection:
    """Parse ``set <device> to <value>`` or ``adjust <device> by <n>`` (split words)."""
    if len(words) < 4 or words[-2] != ("to" if words[0] == "set" else "by"):
        return _NOT_UNDERSTOOD
    device = home.by_words.get(" ".join(words[1:-2]))
    if device is None:
        return "unknown_device", ()
    dtype, raw, canon = home.types[device], words[-1], home.devices[device]
    if words[0] == "set":
        if dtype == BLIND:
            if raw not in POSITIONS:
                return "bad_value", (canon,)
            return _Command("set", device, "set", POSITIONS.index(raw))
        value = _number(raw, signed=False)
        low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
        if value is None or not low <= value <= high:
            return "bad_value", (canon,)
        return _Command("set", device, "set", value)
    value = _number(raw, signed=True)
    if dtype == BLIND or value is None or abs(value) > 100:
        return "bad_value", (canon,)
    return _Command("adjust", device, "adjust", value)


def _parse(home: _Home, rules: tuple[Rule, ...], action: Any) -> _Command | _Rejection:
    """Parse a command, or return the rejection message ``(kind, values)``.

    Plain string splitting, no regular expressions. A rule number is checked against
    ``rules`` here; ``_command`` checks it again for a parse remembered from another
    branch of the episode.
    """
    if not isinstance(action, str):
        return _NOT_UNDERSTOOD
    words = action.lower().split()
    if not words:
        return _NOT_UNDERSTOOD
    verb = words[0]
    if verb == "wait" and len(words) == 1:
        return _WAIT
    if verb in ("set", "adjust"):
        return _parse_change(home, words)
    if verb == "cancel" and len(words) == 2:
        n = _number(words[1][1:], signed=False) if words[1][:1] == "r" else None
        if n is None:
            return _NOT_UNDERSTOOD
        if not 1 <= n <= len(rules):
            return "unknown_rule", (f"rule:r{n}",)
        return _rule_name(n - 1).command
    if verb != "schedule":
        return _NOT_UNDERSTOOD
    head, colon, tail = " ".join(words).partition(":")
    when = head.replace(",", " ").split()[1:]
    if not colon or not when:
        return _NOT_UNDERSTOOD
    change = (
        _parse_change(home, tail.split()) if tail.split()[:1] in (["set"], ["adjust"]) else None
    )
    if change is None:
        return _NOT_UNDERSTOOD
    if not isinstance(change, _Command):
        return change
    person, on, delay = -1, "time", 0
    if when[0] == "when" and len(when) in (3, 6):
        if when[1] not in home.by_name:
            return "unknown_person", ()
        person = home.by_name[when[1]]
        on = {"arrives": "arrive", "leaves": "leave"}.get(when[2], "")
        when = when[3:]
        if not on:
            return _NOT_UNDERSTOOD
    if when:
        if len(when) != 3 or when[0] != "in" or when[2] != "min":
            return _NOT_UNDERSTOOD
        delay = _number(when[1], signed=False)
        if delay is None or not 1 <= delay <= 999:
            return _NOT_UNDERSTOOD
    elif person < 0:
        return _NOT_UNDERSTOOD
    return change._replace(verb="schedule", person=person, on=on, delay=delay)


# --- transitions -----------------------------------------------------------------------


class _Lcg:
    """``StepRng``'s generator (a 48-bit LCG) from a given position ``x``.

    The same draws as ``StepRng``, with the generator kept where the step path can
    also step it inline.
    """

    __slots__ = ("x",)

    def __init__(self, x: int) -> None:
        self.x = x

    def random(self) -> float:
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return x * _UNIT

    def draw(self) -> int:
        """``random()`` times ``2**48``: compare it with a threshold (``_Home``)."""
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return x

    def below(self, n: int) -> int:
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return ((x >> 16) * n) >> 32

    def choice(self, seq: Any) -> Any:
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return seq[((x >> 16) * len(seq)) >> 32]


class _Draft(_Lcg):
    """Mutable scratch copy of a state for one transition, frozen again by ``freeze``.

    Transitions stay pure: the draft replaces the state's tuples when it changes them
    (rarely more than twice a step), never mutates them. ``changes`` lists the step's
    ``(subject, relation, before, after)`` changes in order; ``transition`` notes where
    the agent's command ends and the world's events begin, to split the delta by cause.
    Its draws are ``StepRng(seed, step)``'s; ``lines`` and ``mentioned`` are the step's
    lists, shared with ``transition``, which made them before it needed a draft.
    """

    __slots__ = (
        "admissible", "changes", "home", "level_at", "levels", "lines", "max_score",
        "mentioned", "next_due", "pending", "present", "present_at", "relative", "reward",
        "rules", "step", "tasks", "timers_dirty",
    )  # fmt: skip

    def __init__(
        self, state: SmartHomeState, step: int, x: int, lines: list[str], mentioned: list[str]
    ) -> None:
        """Start step ``step`` (the one after ``state``'s) with the generator at ``x``."""
        # One unpacking of the world's fields (``freeze`` takes the others from ``state``
        # or makes them anew). A slice of the state is a plain tuple: the fast unpacking.
        (
            self.home, self.levels, self.level_at, self.relative, self.present,
            self.present_at, self.rules, self.pending, self.tasks, self.admissible,
            self.next_due, self.max_score,
        ) = state[_S_HOME:_S_SCORE]  # fmt: skip
        self.step = step
        self.x = x
        self.lines = lines
        self.mentioned = mentioned
        self.changes: list[tuple[str, str, str | None, str]] = []
        self.reward = 0
        self.timers_dirty = False  # a timed rule left: recompute next_due

    # -- text --

    def say(self, kind: str, texts: tuple[str, ...] = (), entities: tuple[str, ...] = ()) -> None:
        """Add a line of ``kind``: ``texts`` as written, in its order (``_say_orders``).

        ``entities`` are the ids the line names. A paraphrase at ``paraphrase_rate``: one
        draw, and a second to pick which (``StepDraft.say``'s draws).
        """
        others, formats, fmt, reorder = _FORMATS[kind]
        if others:
            x = (self.x * 0x5DEECE66D + 11) & _M48
            if x < self.home.paraphrase_x:
                x = (x * 0x5DEECE66D + 11) & _M48
                fmt, reorder = formats[(((x >> 16) * others) >> 32) + 1]
            self.x = x
        if texts:
            self.lines.append(fmt % (reorder(texts) if reorder else texts))
            self.mentioned += entities
        else:
            self.lines.append(fmt)

    def say_canon(self, kind: str, *values: str) -> None:
        """``say`` with canonical values (ids), turned to text by the slot types.

        The plain path, for the messages too rare to be worth writing out at the caller.
        """
        _, order, entities = _PLANS[kind]
        texts = tuple([_TO_TEXT[slot](value) for slot, value in zip(order, values, strict=True)])
        self.say(kind, texts, tuple([values[k] for k in entities]))

    # -- facts --

    def set_level(
        self, device: int, level: int, relative: bool, context: int, owner: int = -1
    ) -> None:
        """Set a device's level and state it: at reset or a firing, as a reply, or by hand.

        ``relative``: the change was an adjustment. ``context`` is ``_STATE``, ``_DONE``
        or ``_BY_HAND``, with ``owner`` the person who changed it by hand.
        """
        home = self.home
        dtype = home.types[device]
        texts = POSITIONS if dtype == BLIND else _NUMBERS
        old = self.levels[device]
        if old != level:
            self.changes.append((home.devices[device], home.relation[device], texts[old],
                                 texts[level]))  # fmt: skip
            levels = list(self.levels)  # _put, inlined
            levels[device] = level
            self.levels = tuple(levels)
        if relative:
            if device not in self.relative:
                self.relative = self.relative | {device}
        elif device in self.relative:
            self.relative = self.relative - {device}
        level_at = list(self.level_at)
        level_at[device] = self.step
        self.level_at = tuple(level_at)
        kind = _LEVEL_KINDS[dtype][context]
        if owner < 0:
            self.say(kind, (home.words[device], texts[level]), (home.devices[device],))
        else:
            texts = (home.titles[owner], home.words[device], texts[level])
            self.say(kind, texts, (home.persons[owner], home.devices[device]))

    def set_present(self, person: int, home_now: bool) -> None:
        before = "home" if self.present[person] else "away"
        after = "home" if home_now else "away"
        self.changes.append((self.home.persons[person], "location", before, after))
        self.present = _put(self.present, person, home_now)
        self.present_at = _put(self.present_at, person, self.step)

    # -- admissible commands --

    def admit(self, commands: tuple[str, ...]) -> None:
        """Add ``commands``, distinct and none admissible yet, to the admissible ones.

        None is: see ``unadmit``. The admissible commands are kept sorted here rather
        than rebuilt (a set, then sorted) at every change.
        """
        admissible = [*self.admissible, *commands]
        admissible.sort()  # cheap: the old part is one sorted run
        self.admissible = tuple(admissible)

    def unadmit(self, commands: tuple[str, ...]) -> None:
        """Remove ``commands`` from the admissible ones.

        No command belongs to two open sources: a task's commands name its device, no
        two open tasks share a device, and a cancel names its rule.
        """
        admissible = list(self.admissible)
        for command in commands:
            if command in admissible:  # a task's commands may repeat (set to 0 either way)
                admissible.remove(command)
        self.admissible = tuple(admissible)

    # -- tasks --

    def close_task(self, task: Task) -> None:
        tasks = self.tasks
        k = tasks.index(task)  # tasks are distinct (each is given at its own step)
        self.tasks = tasks[:k] + tasks[k + 1 :]
        if task[_T_COMMANDS]:
            self.unadmit(task[_T_COMMANDS])

    def add_task(
        self, kind: str, device: int, op: str, value: int, person: int, on: str, delay: int,
        rule: int,
    ) -> None:  # fmt: skip
        commands, distinct = _task_commands(self.home, kind, device, op, value, person, on, delay)
        task = _tuple(Task, (kind, device, op, value, person, on, delay, rule, self.step, commands))
        self.tasks = (*self.tasks, task)
        self.max_score += 1
        if commands:
            self.admit(distinct)

    def free_devices(self) -> tuple[int, ...] | list[int]:
        """Devices no open instruction is about, in order."""
        if not self.tasks:
            return self.home.device_ids
        return sorted(self.home.device_set.difference(map(_TASK_DEVICE, self.tasks)))

    # -- rules --

    def rule_on(self, trigger: int, device: int) -> bool:
        """Whether a pending rule covers this (trigger, device): it must stay unique."""
        rules = self.rules
        for i in self.pending:
            rule = rules[i]
            if rule[_R_TRIGGER] == trigger and rule[_R_DEVICE] == device:
                return True
        return False

    def new_rule(
        self, device: int, trigger: int, on: str, delay: int, op: str, value: int, owner: str
    ) -> Rule:
        """Make an armed rule (its facts are all new: see ``_net``)."""
        step, rules = self.step, self.rules
        i = len(rules)
        name = _rule_name(i)
        due = step + delay if trigger < 0 else -1
        rule = _tuple(
            Rule, (name.id, device, trigger, on, delay, op, value, "armed", due, owner, step, step)
        )
        self.rules = rules + (rule,)  # noqa: RUF005  (a third of the time of (*rules, rule))
        self.changes.append((name.id, None, None, rule))
        self.pending = (*self.pending, i)
        if due >= 0 and (due < self.next_due or self.next_due < 0):
            self.next_due = due
        self.admit((name.cancel,))
        self.home.commands[name.cancel] = name.command  # its cancel parses without _parse
        return rule

    def set_status(self, i: int, status: str, due: int) -> None:
        """Move pending rule ``i`` to ``status`` (and ``due``) at this step.

        ``status`` is ``waiting`` (still pending), ``fired`` or ``cancelled``.
        """
        rules = self.rules
        rule = rules[i]
        old, old_due = rule[_R_STATUS], rule[_R_DUE]
        rules = list(rules)  # _put, inlined
        changed = (status, due, rule[_R_OWNER], rule[_R_CREATED], self.step)
        rules[i] = _tuple(Rule, rule[:_R_STATUS] + changed)
        self.rules = tuple(rules)
        if old != status:
            self.changes.append((rule[0], "status", old, status))
        if due >= 0:  # now waiting: its time is set
            if due < self.next_due or self.next_due < 0:
                self.next_due = due
        elif old_due >= 0 and old_due == self.next_due:
            self.timers_dirty = True  # the next rule due may be a later one now
        if status != "waiting":
            pending = self.pending
            k = pending.index(i)
            self.pending = pending[:k] + pending[k + 1 :]
            self.unadmit((_rule_name(i).cancel,))

    def announce_rule(self, rule: Rule, owner: int = -1) -> None:
        """State a new rule's facts; ``owner`` is the person who made it, or -1 (agent)."""
        home = self.home
        rid, device, trigger, on, delay, op, value = rule[:_R_STATUS]  # a plain tuple: fast
        if op == "set":
            effect = "set to " + _level_text(home.types[device], value)
        else:
            effect = ("raised by " if value >= 0 else "lowered by ") + _NUMBERS[abs(value)]
        name, word = "R" + rid[6:], home.words[device]
        if trigger >= 0:
            on_text = "gets home" if on == "arrive" else "leaves"
            texts: tuple[str, ...] = (
                name, home.titles[trigger], on_text, _LATER[delay], word, effect
            )  # fmt: skip
            entities: tuple[str, ...] = (rid, home.persons[trigger], home.devices[device])
            kind = "rule_person"
        else:
            texts = (name, _NUMBERS[delay], word, effect)
            entities = (rid, home.devices[device])
            kind = "rule_timer"
        if owner >= 0:
            texts, entities = (home.titles[owner], *texts), (*entities, home.persons[owner])
            self.say("house_" + kind, texts, entities)
        else:
            self.say(kind, texts, entities)

    def describe_rule(self, kind: str, rule: Rule, owner: int = -1) -> None:
        """Name a pending rule by id, or by device and trigger (``indirection``).

        ``kind`` is ``rule_waiting``, ``rule_fired`` or, with ``owner`` (a person),
        ``house_cancel``.
        """
        home = self.home
        if self.draw() < home.indirection_x:
            device = home.devices[rule.device]
            texts: tuple[str, ...] = (rule.status, home.words[rule.device])
            if rule.trigger >= 0:
                texts += (home.titles[rule.trigger],)
                entities: tuple[str, ...] = (device, home.persons[rule.trigger])
                kind += "_desc"
            else:
                texts += ("timer",)  # the clock slot
                entities = (device,)
                kind = "house_cancel_timer_desc" if owner >= 0 else "timer_fired_desc"
        else:
            texts, entities = ("R" + rule.id[6:],), (rule.id,)
        if owner >= 0:
            texts = (home.titles[owner], *texts)
            entities += (home.persons[owner],)
        self.say(kind, texts, entities)

    def fire(self, i: int) -> None:
        rule = self.rules[i]
        self.describe_rule("rule_fired", rule)
        self.set_status(i, "fired", -1)
        device = rule.device
        dtype = self.home.types[device]
        level = _apply(rule.op, rule.value, self.levels[device], dtype)
        self.set_level(device, level, rule.op == "adjust", _STATE)
        for task in self.tasks:
            if task.kind == "cancel" and task.rule == i:
                self.reward -= 1  # the user asked for it to be cancelled, and it ran
                self.close_task(task)

    def freeze(self, state: SmartHomeState, probe_x: int, split: int) -> SmartHomeState:
        """Return the step's new state; ``state`` is the one it started from.

        ``changes[:split]`` are the agent's, the rest the world's. ``probe_x``: where this
        step's probes are drawn from, or -1 for none.
        """
        next_due = self.next_due
        if self.timers_dirty:
            rules = self.rules
            next_due = -1
            for i in self.pending:
                due = rules[i][_R_DUE]
                if due >= 0 and (due < next_due or next_due < 0):
                    next_due = due
        changes = self.changes
        if not changes:
            action_changes = event_changes = ()
        elif split == 0:
            action_changes, event_changes = (), tuple(changes)
        elif split == len(changes):
            action_changes, event_changes = tuple(changes), ()
        else:
            action_changes, event_changes = tuple(changes[:split]), tuple(changes[split:])
        reward = self.reward
        # Positional, in field order: the state is built every step.
        return _tuple(SmartHomeState, (
            state[0], state[1], self.home, self.levels, self.level_at, self.relative,
            self.present, self.present_at, self.rules, self.pending, self.tasks,
            self.admissible, next_due, self.max_score, state[_S_SCORE] + reward, self.step,
            "\n".join(self.lines), tuple(self.mentioned), probe_x, action_changes,
            event_changes, reward,
        ))  # fmt: skip


def _chatter(home: _Home, x: int, lines: list[str], mentioned: list[str]) -> int:
    """Insert the distractor lines anywhere after the first; return the generator's ``x``.

    One ``StepRng.bits`` draw a line: 16 bits each for the line, the person and the
    position.
    """
    n = home.distractors
    while n:
        n -= 1
        x = (x * 0x5DEECE66D + 11) & _M48
        bits = x ^ (x >> 24) ^ ((x * 0x9E3779B1) & _M48)  # < 2**48
        variant = ((bits & 0xFFFF) * _N_CHATTER) >> 16
        said = home.chatter[variant]
        if _CHATTER_PERSON[variant]:  # said: (line, person) per person
            # ((bits >> 16) & 0xFFFF) * n >> 16, with one operation less
            line, person = said[((bits & 0xFFFF0000) * len(said)) >> 32]
            mentioned.append(person)
        else:
            line = said
        if len(lines) == 1:  # after the reply, the only place (bits >> 32 < 2**16)
            lines.append(line)
        else:
            lines.insert(1 + (((bits >> 32) * len(lines)) >> 16), line)
    return x


# --- the pure core ---------------------------------------------------------------------


class _RuleTruth:
    """The ground truth of a tuple of rules, brought up to date from the last one.

    Consecutive steps change a rule or two (or make one): only rules that are not the
    very same objects as last time are derived again, and the facts sorted by rule id
    are patched in place. Anything else (a new episode, a restore) starts again.

    Attributes:
        rules: the rules it is the truth of.
        facts: their facts, six per rule, sorted by rule id.
        order: rule indices sorted by rule id.
        digests: per rule, its share of the state hash; ``digest`` their sum mod 2**64.
    """

    __slots__ = ("digest", "digests", "facts", "order", "rules")

    def __init__(self) -> None:
        self.rules: tuple[Rule, ...] = ()
        self.facts: list[Fact] = []
        self.order: list[int] = []
        self.digests: list[int] = []
        self.digest = 0

    def update(self, rules: tuple[Rule, ...], home: _Home) -> None:
        last = self.rules
        changed = list(compress(range(len(last)), map(is_not, rules, last)))
        if len(rules) < len(last) or len(changed) > 8:
            self.__init__()
            changed = []
        facts, order, digests, digest = self.facts, self.order, self.digests, self.digest
        for i in changed:
            k = order.index(i)
            facts[6 * k : 6 * k + 6] = _rule_facts_of(rules[i], home)
            new = _rule_digest(rules[i])
            digest += new - digests[i]
            digests[i] = new
        for i in range(len(digests), len(rules)):  # new rules, in order of making
            k = _rule_name(i).rank  # where its id sorts among those made before it
            order.insert(k, i)
            facts[6 * k : 6 * k] = _rule_facts_of(rules[i], home)
            digests.append(_rule_digest(rules[i]))
            digest += digests[i]
        self.digest = digest % 2**64
        self.rules = rules


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
        # Ground truth of consecutive steps shares most of its parts: the last ones are
        # kept, keyed by the identity of what they were made from (and holding it).
        # levels, present -> their facts and the thermostat's, and their text for the hash
        self._world_facts: tuple = (None, None, (), None, "")
        self._rules = _RuleTruth()
        self._tasks_text: tuple = (None, "")  # tasks -> repr(tasks)

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
        persons = tuple("person:" + n for n in names)
        titles = tuple(_TO_TEXT["person"](p) for p in persons)
        chatter = tuple(
            tuple((t.format(person=title), p) for title, p in zip(titles, persons, strict=True))
            if has_person
            else t
            for t, has_person in zip(_CHATTER, _CHATTER_PERSON, strict=True)
        )
        home = _Home(
            devices=tuple(devices), types=types, words=words,
            set_to=tuple(f"set {w} to " for w in words),
            adjust_by=tuple(f"adjust {w} by " for w in words),
            by_words={w: i for i, w in enumerate(words)},
            persons=persons, names=tuple(names), by_name={n: i for i, n in enumerate(names)},
            relation=tuple(("brightness", "position", "target")[t] for t in types),
            titles=titles, device_ids=tuple(range(len(devices))),
            device_set=frozenset(range(len(devices))), chatter=chatter,
            locations=tuple((Fact(p, "location", "away"), Fact(p, "location", "home"))
                            for p in persons),
            paraphrase_x=math.ceil(params.paraphrase_rate * _ONE),
            indirection_x=math.ceil(params.indirection * _ONE),
            distractors=params.distractors, seed_mix=(seed * 0x9E3779B97F4A7C15 + 1) & _M64,
            horizon=params.horizon, starts=_Starts(), commands=_Cache(), facts=_Cache(),
        )  # fmt: skip
        levels = tuple(
            r.below(11) * 10 if t == LIGHT else r.below(2) if t == BLIND else 18 + r.below(5)
            for t in types
        )
        present = tuple(r.random() < 0.6 for _ in names)
        none: tuple = ()
        blank = SmartHomeState(
            params=params, seed=seed, step=-1, home=home, levels=levels,
            level_at=(0,) * len(devices), relative=frozenset(), present=present,
            present_at=(0,) * len(names), rules=none, pending=none,
            tasks=none, text="", mentioned=none, probe_x=-1, action_changes=none,
            event_changes=none, reward=0, score=0, max_score=0, admissible=("wait",),
            next_due=-1,
        )  # fmt: skip
        d = _Draft(blank, 0, _step_x(home, 0), [], [])  # the reset is step 0
        d.say("intro")
        for i in range(len(devices)):
            d.set_level(i, levels[i], False, _STATE)  # the level it has: no change
            d.changes.append((devices[i], home.relation[i], None, _level_text(types[i], levels[i])))
        for i, pid in enumerate(persons):
            where = "home" if present[i] else "away"
            d.say_canon("person_state", pid, where)
            d.changes.append((pid, "location", None, where))
        for _ in range(params.load // 2):
            _house_rule(d)
        _chatter(home, d.x, d.lines, d.mentioned)
        return d.freeze(blank, -1, 0)

    def transition(
        self, state: SmartHomeState, action: str, rng: Any = None, params: Any = None
    ) -> SmartHomeState:
        """Apply the agent's command, then the world's events at the next step.

        A rejected command spends the move with a reply and leaves the world as it was:
        no events, no probes.
        """
        # The step path, written out for speed: the reply to ``wait``, the world's dice
        # and the chatter run on locals, and a ``_Draft`` (the world, to change) is made
        # only once the command or an event changes something. About a quarter of the
        # steps need none: their world is ``state``'s, kept as one slice.
        home = state[_S_HOME]
        step = state[_S_STEP] + 1
        try:
            x = home.starts[step]  # _step_x's common case, inlined
        except IndexError:
            x = _step_x(home, step)
        lines: list[str] = []
        mentioned: list[str] = []
        try:
            cmd = home.commands[action]
        except (KeyError, TypeError):  # not seen yet, or not even hashable
            cmd = _parse(home, state[_S_RULES], action)
            if type(cmd) is not _Command:
                d = _Draft(state, step, x, lines, mentioned)
                kind, values = cmd
                d.say_canon(kind, *values)
                return d.freeze(state, -1, 0)
            home.commands[action] = cmd  # a command that parsed is a string
        d = None
        if cmd is _WAIT:  # the most common command: its reply is _Draft.say("waited")'s
            x = (x * 0x5DEECE66D + 11) & _M48
            if x < home.paraphrase_x:
                x = (x * 0x5DEECE66D + 11) & _M48
                lines.append(_WAITED[(((x >> 16) * _WAITED_OTHERS) >> 32) + 1])
            else:
                lines.append(_WAITED[0])
            next_due, split = state[_S_NEXT_DUE], 0
        else:
            d = _Draft(state, step, x, lines, mentioned)
            if not _command(d, cmd):
                return d.freeze(state, -1, 0)
            x, next_due, split = d.x, d.next_due, len(d.changes)
        # The world's events: rules due now, then five independent 9-bit rolls of one
        # draw (StepRng.bits) for comings and goings, the household and the user.
        if 0 <= next_due <= step:
            if d is None:
                d = _Draft(state, step, x, lines, mentioned)
            for i in d.pending:  # the tuple as it was: firing replaces d.pending
                if d.rules[i][_R_DUE] == step:
                    d.fire(i)
            x = d.x
        x = (x * 0x5DEECE66D + 11) & _M48
        bits = x ^ (x >> 24) ^ ((x * 0x9E3779B1) & _M48)
        move = bits & _MOVE_MASK < _MOVE_BOUND
        by_hand = bits & _MANUAL_MASK < _MANUAL_BOUND
        house_rule = bits & _HOUSE_RULE_MASK < _HOUSE_RULE_BOUND
        house_cancel = bits & _HOUSE_CANCEL_MASK < _HOUSE_CANCEL_BOUND
        instruct = bits & _INSTRUCT_MASK < _INSTRUCT_BOUND
        if move or by_hand or house_rule or house_cancel or instruct:
            if d is None:
                d = _Draft(state, step, x, lines, mentioned)
            else:
                d.x = x
            if move:
                _move(d)
            if by_hand:
                _by_hand(d)
            if house_rule:
                _house_rule(d)
            if house_cancel:
                _house_cancel(d)
            if instruct:
                _instruct(d)
            x = d.x
        n = home.distractors  # _chatter, inlined
        while n:
            n -= 1
            x = (x * 0x5DEECE66D + 11) & _M48
            bits = x ^ (x >> 24) ^ ((x * 0x9E3779B1) & _M48)
            variant = ((bits & 0xFFFF) * _N_CHATTER) >> 16
            said = home.chatter[variant]
            if _CHATTER_PERSON[variant]:
                line, person = said[((bits & 0xFFFF0000) * len(said)) >> 32]
                mentioned.append(person)
            else:
                line = said
            if len(lines) == 1:
                lines.append(line)
            else:
                lines.insert(1 + (((bits >> 32) * len(lines)) >> 16), line)
        if d is None:  # the world as it was; the probes are drawn from x when asked
            news = (step, "\n".join(lines), tuple(mentioned), x, (), (), 0)
            return _tuple(SmartHomeState, state[:_S_STEP] + news)
        return d.freeze(state, x, split)

    # The shell's per-step calls read the state by position: a NamedTuple's attributes
    # are much slower to read than its items.

    def observation(self, state: SmartHomeState, rng: Any = None, params: Any = None) -> str:
        """Return the text of ``state``'s step, one message per line."""
        return state[_S_TEXT]

    def reward(
        self, state: Any, action: str, next_state: SmartHomeState, rng: Any = None,
        params: Any = None,
    ) -> int:  # fmt: skip
        """Return the reward of the step into ``next_state`` (see the module docs)."""
        return next_state[_S_REWARD]

    def state_info(self, state: SmartHomeState, params: Any = None) -> dict[str, Any]:
        """Return the agent-visible info: admissible actions, score, max_score, moves."""
        return {
            "admissible_actions": list(state[_S_ADMISSIBLE]),
            "score": state[_S_SCORE],
            "max_score": state[_S_MAX_SCORE],
            "moves": state[_S_STEP],
        }

    def truth(self, state: SmartHomeState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        # The true facts, sorted: ids sort as blind:* < light:* < person:* < rule:* <
        # thermostat:home, so the rules' facts go between the people and the thermostat.
        levels, present, head, thermostat, world = self._world_facts
        if state.levels is not levels or state.present is not present:
            head, thermostat = _world_facts(state)
            world = f"{state.levels!r}, {state.present!r}"
            self._world_facts = (state.levels, state.present, head, thermostat, world)
        rules = self._rules
        if state.rules is not rules.rules:
            rules.update(state.rules, state.home)
        tasks, tasks_text = self._tasks_text
        if state.tasks is not tasks:
            tasks_text = repr(state.tasks)
            self._tasks_text = (state.tasks, tasks_text)
        return truth_info(
            state=[*head, *rules.facts, thermostat],
            action=state.action_delta,
            event=state.event_delta,
            probes=_probes(state),
            state_hash=_state_hash(state.seed, state.step, world, tasks_text, rules.digest),
            mentioned=state.mentioned,
        )

    def probes(self, state: SmartHomeState) -> list[Probe]:
        """Return the probes due at ``state``."""
        return list(_probes(state))

    @staticmethod
    def admissible_actions(state: SmartHomeState) -> list[str]:
        """Return the commands that do something here, sorted.

        ``wait``; ``cancel`` for every pending rule; for each open instruction the
        command that carries it out and the confusable ones beside it (the increment
        read as an overwrite or back, the condition applied now), so choosing the right
        reading is the task.
        """
        return list(state.admissible)


def _world_facts(state: SmartHomeState) -> tuple[tuple[Fact, ...], Fact]:
    """Return the facts of the lights, blinds and people, sorted, and the thermostat's."""
    home, levels = state.home, state.levels
    cache = home.facts
    out = []
    for i in home.device_ids:
        key = (i << 7) | levels[i]  # levels are below 128
        fact = cache.get(key)
        if fact is None:
            text = _level_text(home.types[i], levels[i])
            fact = cache[key] = _tuple(Fact, (home.devices[i], home.relation[i], text))
        out.append(fact)
    thermostat = out.pop()  # the thermostat is the last device
    out += [pair[here] for pair, here in zip(home.locations, state.present, strict=True)]
    return tuple(out), thermostat


def _sample(rng: StepRng, pool: tuple[str, ...], k: int) -> list[str]:
    items = list(pool)
    for i in range(k):
        j = i + rng.below(len(items) - i)
        items[i], items[j] = items[j], items[i]
    return items[:k]


def _command(d: _Draft, cmd: _Command) -> bool:
    """Apply the agent's parsed command to the draft; return False if rejected."""
    verb, device, op, value, person, on, delay, i = cmd
    if verb == "wait":  # (a parse of "wait" is _WAIT, seen by transition)
        d.say("waited")
        return True
    if verb == "cancel":
        if i >= len(d.rules):  # parsed on a branch of the episode with more rules
            d.say_canon("unknown_rule", f"rule:r{i + 1}")
            return False
        name = _rule_name(i)
        if i not in d.pending:
            d.say_canon("rule_over", name.id)
            return False
        d.say("rule_cancelled", (name.text,), (name.id,))
        d.set_status(i, "cancelled", -1)
        for task in d.tasks:
            if task[_T_KIND] == "cancel" and task[_T_RULE] == i:
                d.reward += 1
                d.close_task(task)
                break
        else:
            d.reward -= 1
        return True
    home = d.home
    if verb == "schedule":
        if d.rule_on(person, device):
            d.say_canon("rule_clash", home.devices[device])
            return False
        rule = d.new_rule(device, person, on, delay, op, value, "agent")
        d.announce_rule(rule)
        # One try per instruction: the open future instruction on this device is
        # carried out (+1) or misread (-1); a rule nobody asked for costs -1.
        for task in d.tasks:
            kind = task[_T_KIND]
            if task[_T_DEVICE] == device and kind != "now" and kind != "cancel":
                right = (task[_T_OP], task[_T_VALUE], task[_T_PERSON], task[_T_DELAY]) == (
                    op,
                    value,
                    person,
                    delay,
                )
                d.reward += 1 if right and (task[_T_PERSON] < 0 or task[_T_ON] == on) else -1
                d.close_task(task)
                break
        else:
            d.reward -= 1
        return True
    # set / adjust now
    dtype = home.types[device]
    before = d.levels[device]
    if op == "set":  # _apply, inlined
        level = value
    else:
        low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
        level = before + value
        level = low if level < low else high if level > high else level
    for task in d.tasks:
        if task[_T_DEVICE] == device and task[_T_KIND] == "now":
            wanted = _apply(task[_T_OP], task[_T_VALUE], before, dtype)
            d.reward += 1 if level == wanted else -1
            d.close_task(task)
            break
    else:
        if level != before:
            d.reward -= 1  # nobody asked for this change (or not yet: a condition applied now)
    d.set_level(device, level, op == "adjust", _DONE)
    return True


def _move(d: _Draft) -> None:
    """Someone comes home or goes out; rules waiting for it trigger."""
    home, step = d.home, d.step
    p = d.below(len(home.persons))
    arrive = not d.present[p]
    on = "arrive" if arrive else "leave"
    d.set_present(p, arrive)
    d.say(on, (home.titles[p],), (home.persons[p],))
    for i in d.pending:
        rule = d.rules[i]
        if rule.trigger == p and rule.on == on and rule.status == "armed":
            if rule.delay:
                d.describe_rule("rule_waiting", rule)
                d.set_status(i, "waiting", step + rule.delay)
            else:
                d.fire(i)
    for task in d.tasks:  # the condition came true before the agent set it up
        if task.person == p and task.on == on:
            d.close_task(task)


def _by_hand(d: _Draft) -> None:
    """Someone at home changes a device no instruction is about."""
    owners = [i for i, here in enumerate(d.present) if here]
    free = d.free_devices()
    if owners and free:
        device = d.choice(free)
        level = _random_level(d, d.home.types[device], d.levels[device])
        d.set_level(device, level, False, _BY_HAND, d.choice(owners))


def _house_cancel(d: _Draft) -> None:
    """The household cancels one of its pending rules nobody asked to cancel."""
    asked = {t.rule for t in d.tasks if t.kind == "cancel"}
    rules = d.rules
    mine = [i for i in d.pending if rules[i].owner == "house" and i not in asked]
    if mine:
        i = d.choice(mine)
        owner = d.below(len(d.home.persons))
        d.describe_rule("house_cancel", rules[i], owner=owner)
        d.set_status(i, "cancelled", -1)


def _random_level(rng: _Lcg, dtype: int, avoid: int) -> int:
    if dtype == BLIND:
        return 1 - avoid
    x = rng.x
    while True:  # rng.below(11) * 10 or 17 + rng.below(10), inlined
        x = (x * 0x5DEECE66D + 11) & _M48
        if dtype == LIGHT:
            level = (((x >> 16) * 11) >> 32) * 10
        else:
            level = HEAT_RANGE[0] + 2 + (((x >> 16) * 10) >> 32)
        if level != avoid:
            rng.x = x
            return level


_PHRASES = ("set", "set", "up", "down", "nudge_up", "nudge_down")
_TRIES = range(8)  # tries at a change that stays in range (made once: range() costs)


def _random_change(rng: _Lcg, dtype: int, level: int, now: bool) -> tuple[str, str, int]:
    """Pick ``(phrase, op, value)``; a change made now stays inside the device's range."""
    if dtype == BLIND:
        return "set", "set", (1 - level if now else rng.below(2))
    low, high = HEAT_RANGE if dtype == HEAT else LIGHT_RANGE
    unit = 1 if dtype == HEAT else 10
    x = rng.x
    for _ in _TRIES:
        x = (x * 0x5DEECE66D + 11) & _M48  # rng.choice(_PHRASES), inlined
        phrase = _PHRASES[((x >> 16) * 6) >> 32]
        if phrase == "set":
            rng.x = x
            return phrase, "set", _random_level(rng, dtype, level)
        if phrase[0] == "n":  # a nudge: one unit
            size = unit
        else:  # unit * (1 + rng.below(4)), inlined
            x = (x * 0x5DEECE66D + 11) & _M48
            size = unit * (1 + (((x >> 16) * 4) >> 32))
        value = size if phrase[-1] == "p" else -size  # up or down
        if not now or low <= level + value <= high:
            rng.x = x
            return phrase, "adjust", value
    rng.x = x
    return "set", "set", _random_level(rng, dtype, level)


def _instruct(d: _Draft) -> None:
    """The user gives an instruction: a new open task, worded as a message."""
    home = d.home
    # The draws of the common path are inlined (``_Lcg.below`` and ``_Lcg.choice``).
    d.x = x = (d.x * 0x5DEECE66D + 11) & _M48
    kind = _KIND_BY_ROLL[((x >> 16) * 100) >> 32]
    if kind == "cancel":
        if _ask_cancel(d):
            return
        kind = "now"
        x = d.x
    tasks = d.tasks
    if tasks:  # the devices no open instruction is about
        free = sorted(home.device_set.difference(map(_TASK_DEVICE, tasks)))
        if not free:
            return
    else:
        free = home.device_ids
    x = (x * 0x5DEECE66D + 11) & _M48
    device = free[((x >> 16) * len(free)) >> 32]
    person, on, delay = -1, "time", 0
    if kind != "now":
        if kind != "timer":  # when or nested
            x = (x * 0x5DEECE66D + 11) & _M48
            person = ((x >> 16) * len(home.persons)) >> 32
            on = "leave" if d.present[person] else "arrive"
        if kind != "when":  # timer or nested
            x = (x * 0x5DEECE66D + 11) & _M48
            delay = DELAYS[((x >> 16) * 5) >> 32]
        if d.rule_on(person, device):
            d.x = x
            return  # the pending rule there must stay the only one for its description
    d.x = x
    dtype = home.types[device]
    phrase, op, value = _random_change(d, dtype, d.levels[device], kind == "now")
    d.add_task(kind, device, op, value, person, on, delay, -1)
    # The texts in _ASK_ORDER: person, on, minutes, device, then setting or amount.
    word = home.words[device]
    if phrase == "set":
        texts: tuple[str, ...] = (word, _level_text(dtype, value))
    elif phrase[0] == "n":  # a nudge names no amount
        texts = (word,)
    else:
        texts = (word, _NUMBERS[abs(value)])
    if delay:
        texts = (_NUMBERS[delay], *texts)
    if person >= 0:
        on_text = "gets home" if on == "arrive" else "leaves"
        texts = (home.titles[person], on_text, *texts)
        entities: tuple[str, ...] = (home.devices[device], home.persons[person])
    else:
        entities = (home.devices[device],)
    d.say(_ASK_KINDS[kind][phrase], texts, entities)


def _ask_cancel(d: _Draft) -> bool:
    """The user asks to cancel a pending rule nobody asked about yet; False if none."""
    asked = {t.rule for t in d.tasks if t.kind == "cancel"}
    open_rules = [i for i in d.pending if i not in asked]
    if not open_rules:
        return False
    home = d.home
    i = d.choice(open_rules)
    rule = d.rules[i]
    d.add_task("cancel", rule.device, "", 0, -1, "", 0, i)
    device, word = home.devices[rule.device], home.words[rule.device]
    if d.draw() >= home.indirection_x:
        d.say("ask_cancel", (_rule_name(i).text,), (rule.id,))
    elif rule.trigger >= 0:
        person = home.titles[rule.trigger]
        d.say("ask_cancel_desc", (word, person), (device, home.persons[rule.trigger]))
    else:
        d.say("ask_cancel_timer_desc", (word, "timer"), (device,))
    return True


def _house_rule(d: _Draft) -> None:
    """Someone in the household sets up a rule of their own (never on a busy device)."""
    home = d.home
    busy = {t.device for t in d.tasks}
    device = d.below(len(home.devices))
    person = d.below(len(home.persons)) if d.random() < 0.6 else -1
    if device in busy or d.rule_on(person, device):
        return
    _, op, value = _random_change(d, home.types[device], d.levels[device], False)
    if person >= 0:
        on = "leave" if d.present[person] else "arrive"
        delay = d.choice(DELAYS) if d.random() < 0.3 else 0
    else:
        on, delay = "time", d.choice(DELAYS)
    rule = d.new_rule(device, person, on, delay, op, value, "house")
    d.announce_rule(rule, owner=d.below(len(home.persons)))


def _probes(state: SmartHomeState) -> tuple[Probe, ...]:
    """Questions due at ``state``'s step about mentioned entities, old and recent alike.

    Drawn from where the step's generator stood after its text (``probe_x``).
    """
    x = state.probe_x
    if x < 0:
        return ()
    x = (x * 0x5DEECE66D + 11) & _M48  # the first draw, inlined: usually the only one
    if x * _UNIT >= state.params.probe_rate:
        return ()
    rng = _Lcg(x)
    home, rules, relative = state.home, state.rules, state.relative
    probes: dict[tuple[str, str], Probe] = {}
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        roll = rng.below(3)
        if roll == 2 and rules:
            # Breakage: what a rule does, stated once when it was made.
            rule = rules[rng.below(len(rules))]
            fact = _rule_facts_of(rule, home)[rng.choice((1, 2, 5))]  # device, effect, trigger
            probe = Probe(rule.id, fact.relation, fact.object, rule.created, "breakage")
        elif roll == 1 and (relative or rules):
            # Confusion: a level after an increment, or whether a rule is still pending.
            if relative and (not rules or rng.random() < 0.5):
                probe = _level_probe(state, rng.choice(sorted(relative)), "confusion")
            else:
                rule = rules[rng.below(len(rules))]
                probe = Probe(rule.id, "status", rule.status, rule.status_at, "confusion")
        elif rng.random() < 0.75:
            probe = _level_probe(state, rng.below(len(home.devices)), "drift")
        else:
            p = rng.below(len(home.persons))
            where = "home" if state.present[p] else "away"
            probe = Probe(home.persons[p], "location", where, state.present_at[p], "drift")
        probes.setdefault((probe.subject, probe.relation), probe)
    return tuple(probes.values())


def _level_probe(state: SmartHomeState, device: int, kind: str) -> Probe:
    home = state.home
    value = _level_text(home.types[device], state.levels[device])
    return Probe(home.devices[device], home.relation[device], value, state.level_at[device], kind)


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
