"""What SmartHome says, declared once: the renderer and the reader share it.

The slot types, the message kinds (``TEXT``), the order in which the step code passes
each kind's values (``VOICE``, the family's compiled renderer), and the perfect reader.
"""

from __future__ import annotations

import string

from wmkit.envs.diagnostic.text import ClaimSpec, MessageKind, SlotType, TextBook, Voice
from wmkit.world.types import Claim

__all__ = [
    "ASK_KINDS",
    "CHATTER",
    "CHATTER_PERSON",
    "FORMS",
    "LATER",
    "LEVEL_KINDS",
    "LINE_MAX",
    "NAMES",
    "NUMBERS",
    "ROOMS",
    "SIGNED",
    "SLOT_TYPES",
    "TEXT",
    "VOICE",
    "read",
]

# --- pools -----------------------------------------------------------------------------

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

# --- slots and kinds ------------------------------------------------------------------


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

LINE_MAX = 140  # longest rendered line (checked over every template in the tests)


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


# Instructions: condition texts, then the device and the setting or amount.
_ASK_ORDER = ("person", "on", "minutes", "device", "setting", "amount")


def _say_orders() -> dict[str, tuple[str, ...]]:
    """The order in which the step code passes each kind's texts to ``VOICE``'s forms.

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


VOICE = Voice(TEXT, orders=_say_orders())
"""The family's step-path renderer: values passed positionally, in ``_say_orders``."""
FORMS = VOICE.forms
"""Kind name -> its ``Form``: what the step path renders from."""

# Text the step path writes often, made once.
CHATTER = TEXT.kinds["chatter"].templates
CHATTER_PERSON = tuple(bool(_slot_names(t)) for t in CHATTER)  # which lines name someone
ASK_KINDS = {cond: {op: FORMS[f"ask_{cond}_{op}"] for op in _OPERATIONS} for cond in _CONDITIONS}
# Message kinds of a device's level, per device type: stated, reply to the agent, by hand.
LEVEL_KINDS = tuple(
    tuple(FORMS[f"{prefix}_{context}"] for context in ("state", "done", "manual"))
    for prefix in ("light", "blind", "heat")
)
NUMBERS = tuple(map(str, range(1000)))  # str(n) of every level, amount and delay
SIGNED = {n: f"{n:+d}" for n in range(-100, 101)}  # every adjustment, as commands write it
LATER = ("right away", *(f"{n} minutes later" for n in range(1, 1000)))  # a rule's delay
