"""The Parcel family's rules: one step is its command's handler, then the world's events.

A transition drafts the step (``Draft``: the records as a list, the lines, the
generator), runs the handler of the agent's command (``HANDLERS``), then the scans,
delays, deliveries and the customers' and depot's news (``run_events``) and the chatter
(``chatter``), and freezes the draft into the next state (``freeze``). A rejected
command is answered and the world left as it was (``reject``).

Every draw comes from the step's ``StepRng``; every line from ``VOICE.forms``
(``StepRng.line``: a paraphrase drawn at the rate, and the form filled).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from itertools import accumulate

import immutables

from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.text import Form
from wmkit.envs.parcel.commands import admissible_commands, command_parts
from wmkit.envs.parcel.state import (
    _ADDRESS,
    _BOOKED_AT,
    _DUE,
    _HOP,
    _ID,
    _LOCATION,
    _PACE,
    _RECEIVER,
    _REQUEST,
    _REQUESTED,
    _ROUTE,
    _SENDER,
    _STATUS,
    ParcelState,
    _address_stated,
    _delayed,
    _delivered,
    _escalated,
    _new,
    _readdressed,
    _Record,
    _requested_to,
    _scanned,
    _status_stated,
    _tracked,
)
from wmkit.envs.parcel.text import (
    ADDRESS_BY_DRAW,
    ADDRESS_TEXT,
    ADDRESSES,
    CHATTER,
    HUBS,
    ID_CAPACITY,
    PERSONS,
    SLOT_TYPES,
    SURFACE,
    TRACKING_IDS,
    VOICE,
)

__all__ = ["HANDLERS", "Draft", "book", "chatter", "freeze", "reject", "run_events", "say_intro"]

# Scan gaps in steps by pace (express, standard, freight) and their weights; freight
# parcels stay active for a long time, so requests about them refer far back.
PACES = ((2, 3), (2, 5), (6, 12))
PACE_WEIGHTS = (3, 5, 2)
P_DELAY = 0.15  # per scan event
DELAY_STEPS = (3, 8)
P_REQUEST = 0.3  # per step: a customer asks to reroute an active parcel
P_RECORRECT = 0.1  # per step: a customer corrects an open request
P_FIX = 0.05  # per step: the depot corrects a mistyped booking address
_NEWS = tuple(accumulate((P_REQUEST, P_RECORRECT, P_FIX)))  # one draw picks at most one

_FORMS = VOICE.forms
_INTRO, _BOOKING, _SCAN, _DELAY = (_FORMS[k] for k in ("intro", "booking", "scan", "delay"))
_DELIVERED, _FIX_ADDRESS = _FORMS["delivered"], _FORMS["fix_address"]
_REQUEST_ID, _REQUEST_DESC = _FORMS["request_id"], _FORMS["request_desc"]
_RECORRECT_ID, _RECORRECT_DESC = _FORMS["recorrect_id"], _FORMS["recorrect_desc"]
_WAITED, _NOTIFIED, _TRACKED = _FORMS["waited"], _FORMS["notified"], _FORMS["tracked"]
_ESCALATED, _NOT_DELAYED = _FORMS["escalated"], _FORMS["not_delayed"]
_TOO_LATE, _REROUTED, _SAME_ADDRESS = _FORMS["too_late"], _FORMS["rerouted"], _FORMS["same_address"]
_UNKNOWN_PARCEL, _BAD_ADDRESS = _FORMS["unknown_parcel"], _FORMS["bad_address"]
for _form in (_SCAN, _DELAY, _DELIVERED):  # run_events fills their formats directly
    if not _form.paraphrases or any(reorder is not None for reorder in _form.reorders):
        raise ValueError(f"{_form.name} needs paraphrases, each in say order")

# What the draws index: uniform draws in [0, n) read as pools, weights and routes. Draws
# cost more than the arithmetic on them, so values that are drawn together are drawn as
# one: a draw in [0, m * n) is a pair of independent draws in [0, m) and [0, n) (divmod).
_PERSON_COUNT = len(PERSONS)
_PAIRS = _PERSON_COUNT * (_PERSON_COUNT - 1)
_CHATTER_LINES = len(CHATTER)
_DELAY_LOW, _DELAY_SPAN = DELAY_STEPS[0], DELAY_STEPS[1] - DELAY_STEPS[0] + 1
_PACE_SPANS = tuple((low, high - low + 1) for low, high in PACES)
_PACE_CUMULATIVE = tuple(accumulate(PACE_WEIGHTS))
_PACE_TOTAL = _PACE_CUMULATIVE[-1]
_PACE_BY_DRAW = tuple(bisect.bisect_right(_PACE_CUMULATIVE, v) for v in range(_PACE_TOTAL))
"""The pace a draw in [0, total weight) gives (what ``random.choices`` would do)."""
# A due parcel's event and its gap come from one draw of two dice: one of 20 faces, of
# which P_DELAY's share says "delayed", and one of ``_GAPS`` faces, which every gap span
# divides (so ``face % span`` is uniform).
_DIE = 20
_DELAYED = round(P_DELAY * _DIE)
_GAPS = math.lcm(_DELAY_SPAN, *(span for _, span in _PACE_SPANS))
_EVENT_DICE = _DIE * _GAPS
_GAP_ADDRESSES = _GAPS * ADDRESSES  # a booking's gap and address
if _DELAYED != P_DELAY * _DIE:
    raise ValueError(f"P_DELAY must be a multiple of 1/{_DIE}")
_ROUTES = 4 * math.perm(len(HUBS), 5)  # route lengths 2..5, times the longest routes
_STARTS = len(HUBS) * (len(HUBS) - 1)
_PACE_ROUTES = _PACE_TOTAL * _ROUTES  # a booking's pace and route


def _route_start(digits: int) -> tuple[tuple[str, str], tuple[str, ...]]:
    # The first two hubs of a route (its first two mixed-radix digits, base 20 then 19),
    # and the hubs left for the rest, in order.
    hubs = list(HUBS)
    first = hubs.pop(digits % len(HUBS))
    second = hubs.pop(digits // len(HUBS))
    return (first, second), tuple(hubs)


_ROUTE_STARTS, _ROUTE_RESTS = zip(*map(_route_start, range(_STARTS)), strict=True)


class Draft:
    """One transition's scratch state: the records as a list, the lines, the changes.

    Attributes:
        rng: the step's generator; ``step``: the step drafted; ``rate``: the
            paraphrase rate.
        active, live, retired, index, used: as ``ParcelState``'s fields (``live`` a
            list; ``used`` is ``used_pairs``), changed in place or replaced.
        lines: the observation's lines; ``said``: the entity ids they name.
        acted: ``((index, record before, record after),)`` of the parcel the command
            changed, or ``()``.
        admissible, commands: carried over, or None where the step may change them.
        reward: the step's reward; ``max_score``: requests issued so far.
        params, seed, score: the state's; ``before``: its ``(active, live)``.
    """

    __slots__ = (
        "acted", "active", "admissible", "before", "commands", "index", "lines", "live",
        "max_score", "params", "rate", "retired", "reward", "rng", "said", "score", "seed",
        "step", "used",
    )  # fmt: skip

    def __init__(self, state: ParcelState, rng: StepRng, step: int) -> None:
        self.start(state, rng, step)

    def start(self, state: ParcelState, rng: StepRng, step: int) -> Draft:
        """Draft ``step`` from ``state`` afresh, forgetting any earlier draft; returns self.

        A core keeps one draft and starts it at each transition (a new object each step
        cost ~1% of a step: allocating and freeing 19 slots); ``freeze`` copies out every
        mutable part, so a state never shares one with the draft.
        """
        # One unpacking of the state (``_`` for the fields a step makes anew), keeping
        # what ``freeze`` reads of it: a NamedTuple field read by name is an unspecialised
        # attribute lookup in CPython 3.11, several times an unpacking's cost per field.
        (
            self.params, self.seed, _, active, live, self.retired, self.index, self.used, _,
            _, _, _, _, self.admissible, self.commands, _, self.score, self.max_score,
        ) = state  # fmt: skip
        self.rng, self.step, self.rate = rng, step, self.params.paraphrase_rate
        self.active, self.live, self.before = active, list(live), (active, live)
        self.lines, self.said, self.acted, self.reward = [], [], (), 0
        return self


# --- the agent's command -----------------------------------------------------------------
#
# A handler applies its command to the draft and returns None, or, for a command that is
# rejected, the reply: ``(form, texts, entity ids named)``.

_Reply = tuple[Form, tuple[str, ...], tuple[str, ...]]


def _wait(d: Draft, command: tuple[str, ...]) -> None:
    d.lines.append(d.rng.line(_WAITED, d.rate, ()))


def _notify(d: Draft, command: tuple[str, ...]) -> None:
    person = command[1]
    d.lines.append(d.rng.line(_NOTIFIED, d.rate, (SURFACE[person],)))
    d.said.append(person)


def _refused(d: Draft, command: tuple[str, ...]) -> _Reply:
    return _FORMS[command[0]], (), ()


def _on_parcel(d: Draft, command: tuple[str, ...]) -> _Reply | None:
    """``track``, ``escalate`` or ``reroute`` a parcel, active or delivered."""
    verb, pid = command[0], command[1]
    i = d.index.get(pid)
    if i is None:
        return _UNKNOWN_PARCEL, (SLOT_TYPES["parcel"].to_text(pid),), (pid,)
    k = d.active.index(i) if i in d.active else -1  # -1: delivered, in ``retired``
    p = d.live[k] if k >= 0 else d.retired[i]
    label, status, step, new, names = SURFACE[pid], p[_STATUS], d.step, None, (pid,)
    if verb == "track":
        new, hub = _tracked(p, step), p[_LOCATION]
        texts = (label, SURFACE[status], SURFACE[hub], ADDRESS_TEXT[p[_ADDRESS]])
        form, names = _TRACKED, (pid, hub)
    elif verb == "reroute":
        if (address := command[2]) is None:
            return _BAD_ADDRESS, (), ()
        if status == "delivered":
            new, form, texts = _status_stated(p, step), _TOO_LATE, (label,)
        elif address == p[_ADDRESS]:
            new, form = _address_stated(p, step), _SAME_ADDRESS
            texts = (label, ADDRESS_TEXT[address])
        else:
            if p[_REQUEST] == "open" and address == p[_REQUESTED]:
                new = _readdressed(p, address, step, "served")
                d.reward, d.admissible = 1, None  # open requests decide the reroutes
            else:
                new, d.reward = _readdressed(p, address, step, p[_REQUEST]), -1
            form, texts = _REROUTED, (label, ADDRESS_TEXT[address])
    elif status == "delivered":  # escalate
        new, form, texts = _status_stated(p, step), _TOO_LATE, (label,)
    elif status == "delayed":
        # The carrier moves it on at the next step instead of waiting out the delay.
        new, hub = _escalated(p, step), p[_LOCATION]
        form, texts, names = _ESCALATED, (label, SURFACE[hub]), (pid, hub)
    else:
        form, texts = _NOT_DELAYED, (label,)
    d.lines.append(d.rng.line(form, d.rate, texts))
    d.said += names
    if new is not None:
        d.acted = ((i, p, new),)
        if k >= 0:
            d.live[k] = new
        else:
            d.retired = d.retired.set(i, new)
    return None


HANDLERS: dict[str, Callable[[Draft, tuple[str, ...]], _Reply | None]] = {
    "wait": _wait,
    "notify": _notify,
    "track": _on_parcel,
    "escalate": _on_parcel,
    "reroute": _on_parcel,
    "not_understood": _refused,
    "unknown_person": _refused,
}
"""The handler of each verb ``commands.parse`` returns."""


# --- the world's events ------------------------------------------------------------------


def run_events(d: Draft, load: int, indirection: float) -> None:
    """The world's events: the parcels due move on, then the customers' and depot's news.

    Scans, delays and deliveries of the parcels due, a booking per delivery; then at
    most one message by chance (one draw): a customer asks to reroute a parcel, or
    corrects an open request, or the depot fixes a booking's address. No request comes
    at the horizon's step, which leaves no step to serve it: ``max_score`` counts only
    requests that can be served, the scripted solver's score.
    """
    # The hottest loop of a step: locals, and the forms' formats filled directly (a
    # few bytecodes fewer than StepRng.line; these kinds need no reordering, checked
    # at import).
    step, rng, rate, lines, said, live = d.step, d.rng, d.rate, d.lines, d.said, d.live
    delivered = []
    for k, p in enumerate(live):
        if p[_DUE] > step:  # not yet (one that fell due on a rejected step is due now)
            continue
        pid = p[_ID]
        die, gap = divmod(rng.below(_EVENT_DICE), _GAPS)  # one draw, two dice
        if die < _DELAYED:
            live[k] = _delayed(p, step, step + _DELAY_LOW + gap % _DELAY_SPAN)
            hub, form = p[_LOCATION], _DELAY
            texts, names = (SURFACE[pid], SURFACE[hub]), (pid, hub)
        elif p[_HOP] + 1 < len(route := p[_ROUTE]):
            hub, form = route[p[_HOP] + 1], _SCAN
            low, span = _PACE_SPANS[p[_PACE]]
            live[k] = _scanned(p, hub, step, step + low + gap % span)
            texts, names = (SURFACE[pid], SURFACE[hub]), (pid, hub)
        else:
            live[k] = _delivered(p, step)
            delivered.append(k)
            form = _DELIVERED
            texts, names = (SURFACE[pid], ADDRESS_TEXT[p[_ADDRESS]]), (pid,)
        lines.append(form.formats[rng.variant(form.paraphrases, rate)] % texts)
        said += names
    if delivered:
        active, retired = d.active, d.retired
        for k in reversed(delivered):
            retired = retired.set(active[k], live.pop(k))
            active = active[:k] + active[k + 1 :]
        d.active, d.retired = active, retired
        d.admissible = d.commands = None
        while len(live) < load:
            book(d)
    u = rng.random()
    if u < _NEWS[0]:
        if step < d.params.horizon and (pool := _untouched(live, step)):
            _request(d, pool[rng.below(len(pool))], False, indirection)
            d.max_score += 1
    elif u < _NEWS[1]:
        pool = []
        for k, p in enumerate(live):
            if p[_REQUEST] == "open":
                pool.append(k)
        if pool:
            _request(d, pool[rng.below(len(pool))], True, indirection)
    elif u < _NEWS[2] and (pool := _untouched(live, step)):
        k = pool[rng.below(len(pool))]
        p = live[k]
        address = _address(rng, (p[_ADDRESS],))
        live[k] = _readdressed(p, address, step, p[_REQUEST])
        lines.append(rng.line(_FIX_ADDRESS, rate, (SURFACE[p[_ID]], ADDRESS_TEXT[address])))
        said.append(p[_ID])


def book(d: Draft) -> None:
    """Book a parcel: a fresh id and (sender, receiver) pair, pace, route, address."""
    # Fresh ids and pairs by rejection, at most 64 draws each: capacity is validated
    # against the horizon, so a draw or two almost always do; past it a scan takes over.
    rng, index, used, step = d.rng, d.index, d.used, d.step
    pid = TRACKING_IDS[rng.below(ID_CAPACITY)]
    tries = 1
    while pid in index:
        if tries == 64:
            pid = _first_free_id(index)
            break
        pid = TRACKING_IDS[rng.below(ID_CAPACITY)]
        tries += 1
    for _ in range(64):
        a, b = divmod(rng.below(_PAIRS), _PERSON_COUNT - 1)  # (draws pair up, see _ROUTES)
        sender, receiver = pair = (PERSONS[a], PERSONS[b + (b >= a)])
        if pair not in used:
            break
    else:
        sender, receiver = pair = _first_free_pair(used)
    # Pace (weighted); the route: one draw among all of them, read as mixed-radix
    # digits: its length (2 + longer hubs), then each hub among those left.
    face, u = divmod(rng.below(_PACE_ROUTES), _ROUTES)
    pace = _PACE_BY_DRAW[face]
    u, longer = divmod(u, 4)
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
    gap, drawn = divmod(rng.below(_GAP_ADDRESSES), ADDRESSES)
    due, address = step + low + gap % span, ADDRESS_BY_DRAW[drawn]
    # In field order: id, sender, receiver, route, pace, booked_at, address,
    # address_at, requested, request, requested_at, corrected, hop, location,
    # location_at, status, status_at, due.
    d.live.append(
        (
            pid, sender, receiver, route, pace, step, address, step, "", "none", -1, False, 0,
            origin, step, "booked", step, due,
        )
    )  # fmt: skip
    surface = SURFACE
    texts = (
        surface[pid], surface[sender], surface[receiver], ADDRESS_TEXT[address], surface[origin]
    )  # fmt: skip
    d.lines.append(rng.line(_BOOKING, d.rate, texts))
    d.said += (pid, sender, receiver, origin)
    i = len(index)  # every parcel booked so far has an id in the index
    d.active += (i,)
    d.index, d.used = index.set(pid, i), used.set(pair, None)


def _address(rng: StepRng, avoid: tuple[str, ...]) -> str:
    """Draw an address (one draw among all of them) not in ``avoid``."""
    while (address := ADDRESS_BY_DRAW[rng.below(ADDRESSES)]) in avoid:
        pass
    return address


def _untouched(live: list[_Record], step: int) -> list[int]:
    """Positions in ``live`` of parcels booked before ``step`` with no request yet."""
    pool = []  # (a loop: a comprehension costs a function object and a call in 3.11)
    for k, p in enumerate(live):
        if p[_REQUEST] == "none" and p[_BOOKED_AT] < step:
            pool.append(k)
    return pool


def _request(d: Draft, k: int, recorrect: bool, indirection: float) -> None:
    """A customer asks to send the parcel at ``live[k]`` elsewhere, or corrects that."""
    p, rng = d.live[k], d.rng
    new = _address(rng, (p[_ADDRESS], p[_REQUESTED]))
    by_description = rng.random() < indirection
    new_text = ADDRESS_TEXT[new]
    if by_description:
        sender, receiver = p[_SENDER], p[_RECEIVER]
        names, texts = (sender, receiver), (SURFACE[sender], SURFACE[receiver], new_text)
    else:
        names, texts = (p[_ID],), (SURFACE[p[_ID]], new_text)
    if recorrect:
        form = _RECORRECT_DESC if by_description else _RECORRECT_ID
        texts += (ADDRESS_TEXT[p[_REQUESTED]],)
    else:
        form = _REQUEST_DESC if by_description else _REQUEST_ID
    d.lines.append(rng.line(form, d.rate, texts))
    d.said += names
    # A description is resolved through the booking that stated sender and receiver,
    # so the answer depends on that older observation.
    d.live[k] = _requested_to(p, new, p[_BOOKED_AT] if by_description else d.step)
    d.admissible = None  # open requests decide the reroute commands


def chatter(d: Draft, distractors: int) -> None:
    """Insert ``distractors`` chatter lines at random places after the first line."""
    rng, lines, said = d.rng, d.lines, d.said
    for _ in range(distractors):
        # One draw: which line (uniform) and where it goes (uniform), as a pair.
        n = len(lines)
        pick, at = divmod(rng.below(_CHATTER_LINES * n), n)
        line, names = CHATTER[pick]
        lines.insert(1 + at, line)
        if names:
            said += names


def say_intro(d: Draft) -> None:
    """The first line of an episode."""
    d.lines.append(d.rng.line(_INTRO, d.rate, ()))


# --- the next state ------------------------------------------------------------------------


def freeze(d: Draft, advanced: bool = True) -> ParcelState:
    """The state ``d`` drafted; ``advanced``: the world moved on."""
    admissible, commands = d.admissible, d.commands
    if admissible is None:
        if commands is None:
            commands = command_parts(d.live)
        admissible = admissible_commands(commands, d.live)
    reward = d.reward
    return _new(
        ParcelState,
        (
            d.params, d.seed, d.step, d.active, tuple(d.live), d.retired, d.index, d.used,
            "\n".join(d.lines), tuple(d.said), advanced, d.before, d.acted, admissible,
            commands, reward, d.score + reward, d.max_score,
        ),
    )  # fmt: skip


def reject(state: ParcelState, d: Draft, reply: _Reply) -> ParcelState:
    """The state after a rejected command: the reply, and the world as it was."""
    form, texts, names = reply
    return state._replace(
        step=d.step,
        text=d.rng.line(form, d.rate, texts),
        said=names,
        advanced=False,
        before=d.before,
        acted=(),
        reward=0,
    )


def _first_free_id(taken: immutables.Map[str, int]) -> str:
    """The first tracking id not ``taken``."""
    for pid in TRACKING_IDS:
        if pid not in taken:
            return pid
    raise RuntimeError("ran out of unique tracking ids; lower load or horizon")


def _first_free_pair(used: immutables.Map[tuple[str, str], None]) -> tuple[str, str]:
    """The first (sender, receiver) pair not in ``used``."""
    for pair in ((a, b) for a in PERSONS for b in PERSONS if a != b):
        if pair not in used:
            return pair
    raise RuntimeError("ran out of unique sender/receiver pairs; lower load or horizon")
