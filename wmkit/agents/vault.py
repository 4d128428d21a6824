"""Vault's tracked-state policy: find the way to the vault, learning its hidden rules by trying.

The house is what the tracked state says it is (``wmkit/Vault-v0``'s facts: the rooms on
each side of a door, door states, locks and latches, where keys, notes, levers and the
treasure are, the codes of notes read); the rules of the mechanisms are never stated, so
the policy learns them the way a player does, by trying and remembering what it tried.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from wmkit.agents.policies import _admissible
from wmkit.world.types import WorldState

__all__ = ["VaultPolicy"]

SIDES = ("north", "east", "south", "west")
_COST = {"open": 1, "closed": 2, "locked": 20}  # a locked door is work, not a way through
_VAULT = "room:vault"
_REFRESH = ("look", "inventory")  # they restate what a tracker forgot; never twice in a row


@dataclass
class _House:
    """The tracked house, read off the facts once a step.

    Attributes:
        here: the player's room, or None.
        doors: door id -> its tracked relations (sides, ``state``, ``lock``, ``latch``).
        exits: room -> ``(direction, door, room beyond)`` for each door of it.
        where: key, note or treasure id -> its room, or ``player`` when carried.
        codes: note id -> the code read on it.
        levers: lever id -> its room.
    """

    here: str | None = None
    doors: dict[str, dict[str, str]] = field(default_factory=dict)
    exits: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    codes: dict[str, str] = field(default_factory=dict)
    levers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, tracked: WorldState) -> _House:
        house = cls(here=tracked.value("player", "at"))
        for subject, relation, obj in tracked:
            kind = subject.split(":", 1)[0]
            if kind == "door":
                house.doors.setdefault(subject, {})[relation] = obj
            elif kind == "lever" and relation == "in":
                house.levers[subject] = obj
            elif relation == "in":
                house.where[subject] = obj
            elif kind == "note" and relation == "code":
                house.codes[subject] = obj
        for door, facts in sorted(house.doors.items()):
            sides = [(s, facts[s]) for s in SIDES if s in facts]
            if len(sides) == 2:
                (d1, r1), (d2, r2) = sides
                house.exits.setdefault(r2, []).append((d1, door, r1))
                house.exits.setdefault(r1, []).append((d2, door, r2))
        return house

    def state(self, door: str) -> str:
        """The door's tracked state (a door of unknown state counts as closed)."""
        return self.doors[door].get("state", "closed")

    def rooms(self) -> set[str]:
        """Every room the tracked state places a door next to."""
        return set(self.exits)

    def at(self, door: str) -> bool:
        """Whether the player stands next to ``door``."""
        return any(d == door for _, d, _ in self.exits.get(self.here or "", ()))

    def items(self, kind: str, where: str | None = None) -> list[str]:
        """The tracked items of ``kind`` (``key``, ``note``), those in ``where`` if given."""
        return sorted(
            x
            for x, at in self.where.items()
            if x.startswith(kind + ":") and (where is None or at == where)
        )


def _text(entity: str) -> str:
    """How a command names an entity: ``key:brass`` -> ``brass key``, ``treasure:x`` -> ``x``."""
    kind, _, word = entity.partition(":")
    return word if kind == "treasure" else f"{word} {kind}"


def _door(words: str) -> str:
    """The door id a command names: ``bronze door`` -> ``door:bronze``."""
    return "door:" + words.split(" ", 1)[0]


def _through(house: _House, direction: str, door: str) -> str:
    """The next command that takes the player through ``door`` (which is not locked)."""
    state = house.state(door)
    if state == "open":
        return f"go {direction}"
    if house.doors[door].get("latch") == "down":
        return f"lift latch on {_text(door)}"
    return f"open {_text(door)}"


class VaultPolicy:
    """Finds the vault and takes the treasure (``wmkit/Vault-v0``), from the tracked state.

    Each step it reads the house off the tracked facts and sends the first of:

    1. ``take`` the treasure where it stands with it;
    2. here, what may be needed while a door of that kind is locked (or the vault is not
       found yet): ``take`` a key, ``read`` a note whose code is not tracked, ``pull`` a
       lever it never pulled (a lever is pulled once: pulled back, it bars its door
       again);
    3. towards the vault (the treasure's room, else ``room:vault``), on the cheapest way
       the tracked doors allow: through open and closed doors (a down latch lifted
       first, then ``open``), and at the first locked door on it, the work it needs:
       a keyhole gets every carried key it has not tried there (``unlock <door> with
       <key>``; keys not carried are fetched), a keypad every tracked code not tried
       there (notes not read are read), a bar every lever not pulled yet, then a wait
       beside it for the bar to lift;
    4. where no exit of the player's room is tracked, ``look``; the nearest room it has
       not been in; the work of any locked door;
    5. with nothing of that to do, a random ``go`` or ``open`` among the admissible
       commands (a tracker that forgot the way finds it again by going and looking),
       else ``wait``.

    The hidden rules (which key fits, which latch blocks, which lever works which bar,
    which note holds the code) are learned only by trying: it remembers the keys and
    codes it tried on each door and the levers it pulled. A tracker that forgets the
    layout, a code or a key's place makes it wander, wait or try again: the score says
    how good the tracked house was. Commands the env does not admit are not sent.
    """

    def __init__(self) -> None:
        self._tried: set[tuple[str, str]] = set()  # (door, key) and (keypad, code) tried
        self._pulled: set[str] = set()
        self._visited: set[str] = set()
        self._fitted: set[str] = set()  # keys that opened a lock: they fit no other
        self._last: tuple[str, str] | None = None  # the last unlock tried: (door, key)
        self._sent: str | None = None  # the command last sent from the plan
        self._rng = np.random.default_rng(0)

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        self._tried, self._pulled, self._visited, self._fitted = set(), set(), set(), set()
        self._last = self._sent = None
        self._rng = rng

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        admissible = {a.lower(): a for a in _admissible(info)}
        house = _House.of(tracked)
        if house.here is not None:
            self._visited.add(house.here)
        last = self._last
        if last is not None and last[0] in house.doors and house.state(last[0]) != "locked":
            self._fitted.add(last[1])  # the key it just tried turned the lock
        self._last = None
        for command in self._plan(house):
            if command in admissible and not (command in _REFRESH and command == self._sent):
                self._remember(command)
                self._sent = command
                return admissible[command]
        # Nothing the tracked house suggests: wander (a tracker that forgot the way on
        # finds it again by going and looking), or wait.
        ways = [
            a
            for low, a in sorted(admissible.items())
            if low.startswith("go ")
            or (
                low.startswith("open ")
                and house.doors.get(_door(low[5:]), {}).get("state") != "locked"
            )
        ]
        self._sent = None
        if ways:
            return ways[int(self._rng.integers(len(ways)))]
        return admissible.get("wait") or next(iter(admissible.values()))

    def _remember(self, command: str) -> None:
        words = command.split()
        if words[0] == "unlock":  # unlock <word> door with <word> key
            self._last = ("door:" + words[1], "key:" + words[4])
            self._tried.add(self._last)
        elif words[:2] == ["enter", "code"]:
            self._tried.add(("keypad", words[2]))
        elif words[0] == "pull":
            self._pulled.add("lever:" + words[1])

    def _plan(self, house: _House) -> Iterable[str]:
        """Commands in order of preference; the first admissible one is sent."""
        here = house.here
        if here is None:
            yield "look"
            return
        treasure = [x for x in house.where if x.startswith("treasure:")]
        goal = house.where[treasure[0]] if treasure else None
        if goal == "player":
            return  # the episode is won
        goal = goal or (_VAULT if _VAULT in house.rooms() else None)
        if here == goal:
            yield from (f"take {_text(t)}" for t in treasure)
        locked = {house.doors[d].get("lock") for d in house.doors if house.state(d) == "locked"}
        lost = goal is None
        if lost or "keyhole" in locked:
            yield from (f"take {_text(k)}" for k in house.items("key", here))
        if lost or "keypad" in locked:
            yield from (
                f"read {_text(n)}" for n in house.items("note", here) if n not in house.codes
            )
        if lost or "bar" in locked:
            yield from (
                f"pull {_text(lever)}"
                for lever, room in sorted(house.levers.items())
                if room == here and lever not in self._pulled
            )
        if goal is not None:
            yield from self._towards(house, goal)
        unseen = house.rooms() - self._visited
        if not house.exits.get(here):
            yield "look"
        yield from self._route(house, unseen)
        for door in sorted(house.doors):
            if house.state(door) == "locked":
                yield from self._work(house, door)

    def _towards(self, house: _House, goal: str) -> Iterable[str]:
        """The first locked door's work on the cheapest tracked way to ``goal``, else a step."""
        path = _cheapest(house, goal)
        if not path:
            return
        locked = [door for _, door in path if house.state(door) == "locked"]
        if locked:
            yield from self._work(house, locked[0])
        else:
            yield _through(house, *path[0])

    def _work(self, house: _House, door: str) -> Iterable[str]:
        """What a locked ``door`` needs next, by its tracked lock."""
        lock = house.doors[door].get("lock")
        if lock == "keyhole":
            carried = [
                k
                for k in house.items("key", "player")
                if (door, k) not in self._tried and k not in self._fitted
            ]
            if carried:
                if house.at(door):
                    yield from (f"unlock {_text(door)} with {_text(k)}" for k in carried)
                yield from self._route(house, _beside(house, door))
                return
            yield from self._route(house, {house.where[k] for k in house.items("key")} - {"player"})
            yield "inventory"  # what it carries, when it knows of no key to try
        elif lock == "keypad":
            codes = sorted({c for c in house.codes.values() if ("keypad", c) not in self._tried})
            if codes:
                if house.at(door):
                    yield from (f"enter code {c}" for c in codes)
                yield from self._route(house, _beside(house, door))
                return
            unread = [n for n in house.items("note") if n not in house.codes]
            yield from self._route(house, {house.where[n] for n in unread} - {"player"})
            yield from (f"read {_text(n)}" for n in unread if house.where[n] == "player")
        elif lock == "bar":
            unpulled = {r for lever, r in house.levers.items() if lever not in self._pulled}
            yield from self._route(house, unpulled)
            if house.at(door):
                yield "wait"  # the bar moves some steps after the pull
            yield from self._route(house, _beside(house, door))

    def _route(self, house: _House, goals: set[str]) -> Iterable[str]:
        """The first command on a shortest way through unlocked doors to one of ``goals``."""
        if not goals or house.here in goals:
            return
        first: dict[str, tuple[str, str] | None] = {house.here: None}
        queue = deque([house.here])
        while queue:
            room = queue.popleft()
            for direction, door, other in house.exits.get(room, ()):
                if other in first or house.state(door) == "locked":
                    continue
                first[other] = first[room] or (direction, door)
                if other in goals:
                    yield _through(house, *first[other])
                    return
                queue.append(other)


def _beside(house: _House, door: str) -> set[str]:
    """The rooms on either side of ``door``."""
    return {house.doors[door][s] for s in SIDES if s in house.doors[door]}


def _cheapest(house: _House, goal: str) -> list[tuple[str, str]] | None:
    """The ``(direction, door)`` steps of the cheapest way to ``goal`` (locked doors allowed)."""
    start = house.here
    best = {start: 0}
    back: dict[str, tuple[str, str, str]] = {}
    heap = [(0, start)]
    while heap:
        cost, room = heapq.heappop(heap)
        if room == goal:
            steps = []
            while room != start:
                prev, direction, door = back[room]
                steps.append((direction, door))
                room = prev
            return steps[::-1]
        if cost > best[room]:
            continue
        for direction, door, other in house.exits.get(room, ()):
            new = cost + _COST.get(house.state(door), 2)
            if new < best.get(other, new + 1):
                best[other] = new
                back[other] = (room, direction, door)
                heapq.heappush(heap, (new, other))
    return None
