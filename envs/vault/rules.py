"""One Vault transition's scratch state, and the mechanisms that run after the command.

A transition is draft -> handler -> events -> chatter -> freeze (``VaultFuncEnv``): the
:class:`Draft` copies what can change, the command's handler (:mod:`.commands`) and
:func:`run_events` change it and say so, and :meth:`Draft.freeze` makes the next state.
"""

from __future__ import annotations

from wmkit.envs.diagnostic.core import StepDraft
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import Change
from wmkit.envs.vault.commands import admissible
from wmkit.envs.vault.state import (
    CLOSED,
    DOOR_STATES,
    LATCH_STATES,
    LEVER_STATES,
    LOCKED,
    OPEN,
    SPRING,
    VaultState,
)
from wmkit.envs.vault.text import ANCHORS, CHATTER, OPPOSITE, VOICE
from wmkit.envs.vault.world import EpisodeMemo

__all__ = ["Draft", "run_events", "said"]

_FORMS = VOICE.forms


def said(memo: EpisodeMemo, key: tuple) -> tuple[str, tuple[int, ...], frozenset[str]]:
    """Return (and keep) a message's line, the fact slots it states and the entities it names.

    ``key`` is ``(kind, variant, values)``, canonical values in the kind's ``VOICE`` order.
    """
    kind, variant, values = key
    form, index = _FORMS[kind], memo.world.fact_index
    entry = (
        form.render(variant, values),
        tuple(index[values[pos], relation] for pos, relation in ANCHORS[kind]),
        frozenset(values[pos] for pos in form.entities),
    )
    if len(memo.said) >= 100_000:
        memo.said.clear()
    memo.said[key] = entry
    return entry


def _put(values: tuple[int, ...], i: int, value: int) -> tuple[int, ...]:
    return (*values[:i], value, *values[i + 1 :])


class Draft(StepDraft):
    """Scratch copy of a state for one transition, frozen again by :meth:`freeze`.

    Transitions stay pure and cheap: the per-entity tuples are replaced, never mutated,
    when something changes (rarely more than twice a step), and the anchors are copied
    only once a message states a fact. ``named`` is every entity named so far (the
    state's ``mentioned``); the step's own are read off ``messages`` when asked.

    Args:
        state: the state the step starts from.
        memo: the episode's memo tables (the core's).
        step: the step being made (0 at reset).
    """

    __slots__ = (
        "anchors", "changes", "doors", "evented", "latches", "levers", "lines", "memo",
        "messages", "named", "opened", "params", "pending", "player", "rate", "read", "rng",
        "state", "step", "visited", "where", "won", "world",
    )  # fmt: skip
    voice = VOICE

    def __init__(self, state: VaultState, memo: EpisodeMemo, step: int) -> None:
        self.state, self.memo, self.step = state, memo, step
        self.world = world = state.world
        self.params = params = world.params
        self.rate = params.paraphrase_rate
        starts = world.starts  # StepRng(seed, step), seeded with the episode
        self.rng = StepRng.at(starts[step]) if step < len(starts) else StepRng(world.seed, step)
        self.player, self.doors, self.latches = state.player, state.doors, state.latches
        self.levers, self.where, self.read = state.levers, state.where, state.read
        self.visited, self.pending, self.opened = state.visited, state.pending, state.opened
        self.evented, self.named, self.won = state.evented, state.mentioned, state.won
        self.anchors: list[int] | None = None
        self.lines: list[str] = []
        self.messages: list[tuple[str, int, tuple[str, ...]]] = []
        self.changes = {}

    def say(self, kind: str, *values: str) -> None:  # type: ignore[override]
        """Add a message; canonical ``values`` positionally, in the kind's ``VOICE`` order.

        The step path's ``say``: a message's line, anchors and names are looked up in
        the episode's memo, made once by :func:`said`.
        """
        paraphrases = _FORMS[kind].paraphrases
        key = (kind, self.rng.variant(paraphrases, self.rate) if paraphrases else 0, values)
        line, slots, names = self.memo.said.get(key) or said(self.memo, key)
        self.lines.append(line)
        self.messages.append(key)
        if slots:
            anchors = self.anchors
            if anchors is None:
                anchors = self.anchors = list(self.state.anchors)
            step = self.step
            for k in slots:
                anchors[k] = step
        if names and not names <= self.named:
            self.named = self.named | names

    def anchor_of(self, slot: int) -> int:
        """Return the step fact slot ``slot`` was last stated (-1: never)."""
        return (self.state.anchors if self.anchors is None else self.anchors)[slot]

    def anchor(self, slot: int, step: int) -> None:
        """Mark fact slot ``slot`` as stated at ``step``."""
        if self.anchors is None:
            self.anchors = list(self.state.anchors)
        self.anchors[slot] = step

    def change(self, slot: int, old: str | None, new: str) -> None:
        """Note a change of fact slot ``slot`` (``StepDraft.note`` by slot index)."""
        self.note(*self.world.slots[slot], old, new)

    def set_door(self, i: int, value: int) -> None:
        """Put door ``i`` in state ``value`` (``LOCKED``, ``CLOSED``, ``OPEN``)."""
        self.change(self.world.door_slots[i][2], DOOR_STATES[self.doors[i]], DOOR_STATES[value])
        self.doors = _put(self.doors, i, value)

    def set_latch(self, i: int, up: int) -> None:
        """Put the latch of door ``i`` up (1) or down (0)."""
        self.change(self.world.door_slots[i][3], LATCH_STATES[self.latches[i]], LATCH_STATES[up])
        self.latches = _put(self.latches, i, up)

    def set_lever(self, k: int, value: int) -> None:
        """Put lever ``k`` up (0) or down (1)."""
        self.change(self.world.lever_slots[k][1], LEVER_STATES[self.levers[k]], LEVER_STATES[value])
        self.levers = _put(self.levers, k, value)

    def put_item(self, j: int, place: int, old: str, new: str) -> None:
        """Move item ``j`` to ``place`` (a room index or ``HELD``): from ``old`` to ``new``."""
        self.change(self.world.item_slots[j][0], old, new)
        self.where = _put(self.where, j, place)

    def schedule(self, due: int, kind: int, door: int, value: int) -> None:
        """Schedule a mechanism (``BAR`` or ``SPRING``) on ``door`` at step ``due``."""
        self.pending = tuple(sorted((*self.pending, (due, kind, door, value))))

    def unschedule_spring(self, door: int) -> None:
        """Cancel the spring of ``door``, if it is due to shut."""
        self.pending = tuple(p for p in self.pending if p[1] != SPRING or p[2] != door)

    def describe(self, room: int) -> None:
        """State everything in ``room``: the player, its exits, levers and items.

        The hot path of looking around, so the exits and levers go through a plan made
        once per room (``VaultWorld.views``) rather than through ``say``.
        """
        w, memo, step = self.world, self.memo, self.step
        view = w.views[room]
        self.say("at", "player", view.room)
        if self.anchors is None:
            self.anchors = list(self.state.anchors)
        anchors, lines, messages = self.anchors, self.lines, self.messages
        doors, latches, variant, rate = self.doors, self.latches, self.rng.variant, self.rate
        for kind, i, head, lock, slots in view.exits:
            if latches[i] >= 0:
                values = (*head, DOOR_STATES[doors[i]], lock, LATCH_STATES[latches[i]])
            else:
                values = (*head, DOOR_STATES[doors[i]], lock)
            key = (kind, variant(2, rate), values)
            lines.append((memo.said.get(key) or said(memo, key))[0])
            messages.append(key)
            for k in slots:
                anchors[k] = step
        for k, head, slots in view.levers:
            key = ("lever_here", variant(2, rate), (*head, LEVER_STATES[self.levers[k]]))
            lines.append((memo.said.get(key) or said(memo, key))[0])
            messages.append(key)
            anchors[slots[0]] = anchors[slots[1]] = step
        if not view.entities <= self.named:
            self.named = self.named | view.entities
        for j, place in enumerate(self.where):
            if place == room:
                item = w.items[j]
                self.say(
                    "treasure_here" if item.kind == "treasure" else "item_here", item.id, view.room
                )
        self.visited |= 1 << room

    def chatter(self) -> None:
        """Insert the distractor lines (never before the reply); no message is kept."""
        lines, below, n = self.lines, self.rng.below, len(CHATTER)
        for _ in range(self.params.distractors):
            # One draw picks where the line goes and which line it is.
            pos, k = divmod(below(len(lines) * n), n)
            lines.insert(pos + 1, CHATTER[k])

    def freeze(self, reward: int, acted: tuple[Change, ...]) -> VaultState:
        """Return the next state: ``acted`` the command's changes, the rest the events'."""
        s, w = self.state, self.world
        events = self.take_changes() if self.changes else ()
        if acted or events or s.step == self.step:
            actions = admissible(
                self.memo, self.player, self.doors, self.latches, self.where, self.read
            )
        else:
            actions = s.actions  # nothing changed, so neither did what one can do
        anchors = s.anchors if self.anchors is None else tuple(self.anchors)
        return VaultState(
            w, self.step, self.player, self.doors, self.latches, self.levers, self.where,
            self.read, self.visited, self.pending, self.opened, self.evented, self.named,
            anchors, tuple(self.messages), "\n".join(self.lines), acted, events,
            actions, reward, s.score + reward, self.won,
        )  # fmt: skip


def run_events(d: Draft) -> None:
    """Run the mechanisms due now; say each change to a door the agent has seen."""
    w, step, rng = d.world, d.step, d.rng
    while d.pending and d.pending[0][0] <= step:
        _, kind, i, value = d.pending[0]
        d.pending = d.pending[1:]
        state = d.doors[i]
        if kind == SPRING:
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
        if door.id not in d.named:
            continue  # unseen doors change silently; their first description says how they are
        if rng.random() < d.params.indirection:
            side = rng.below(2)
            room = door.a if side == 0 else door.b
            relation = OPPOSITE[door.direction] if side == 0 else door.direction
            d.say(f"{message}_{OPPOSITE[relation]}", w.rooms[room])
            # Reading this needs the door's side, stated when the door was last described.
            slots = w.door_slots[i]
            d.anchor(slots[2], d.anchor_of(slots[side]))
        else:
            d.say(message, door.id)
