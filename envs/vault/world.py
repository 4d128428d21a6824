"""The static part of a Vault episode: its layout, names and hidden rules, from the seed."""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import NamedTuple

from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.vault.state import (
    CLOSED,
    DOOR_STATES,
    HELD,
    LATCH_STATES,
    LEVER_STATES,
    LOCKED,
    OPEN,
    Door,
    Item,
    Lever,
    VaultParams,
)
from wmkit.envs.vault.text import (
    DIRS,
    DOOR_NAMES,
    KEY_NAMES,
    LEVER_NAMES,
    NOTE_NAMES,
    OPPOSITE,
    ROOM_NAMES,
    TREASURES,
    item_text,
)
from wmkit.world.types import Fact

__all__ = ["WIN_REWARD", "EpisodeMemo", "VaultWorld"]

P_SIDE_LATCH = 0.25  # a side or keyhole door carries a latch that does nothing
P_SPRING = 0.3  # a side door shuts itself some steps after being opened
P_SIDE_OPEN = 0.3  # a side door without a spring starts open
WIN_REWARD = 10
_LOCKS = {  # what a door's mechanism shows
    "key": "keyhole",
    "key_latch": "keyhole",
    "lever": "bar",
    "keypad": "keypad",
    "side": "none",
}


class _RoomView(NamedTuple):
    """What describing a room states, prepared once per room.

    The messages' fixed values and the fact slots they anchor, so that
    ``Draft.describe``, the costliest common step, skips the generic ``say``.
    """

    room: str
    exits: tuple[tuple[str, int, tuple[str, str, str], str, tuple[int, ...]], ...]
    levers: tuple[tuple[int, tuple[str, str], tuple[int, int]], ...]
    entities: frozenset[str]


class VaultWorld:
    """The static part of an episode: layout, names and hidden rules, made from the seed.

    Shared by every state of the episode and never changed once made, but for the two
    tables only ground truth reads (``rules``, ``fact_plan``), derived on first use; the
    memo tables of an episode are the core's (:class:`EpisodeMemo`). Equal worlds have
    equal seeds and parameters.

    Args:
        seed: episode seed.
        params: episode parameters.

    Attributes:
        rooms: room ids; index 0 is the start, ``vault`` the vault.
        region: per room, the number of doors on the way to the vault behind it.
        doors, items, levers: the entities (see ``Door``, ``Item``, ``Lever``).
        spine: door indices on the way to the vault, in order.
        keypad: index of the vault door; ``code`` its code.
        rules: the hidden rules as sorted facts (``info["wm.rules"]``).
        slots: every ``(subject, relation)`` that can hold a fact; anchors index them.
        views: per room, what describing it states (``_RoomView``).
        surface: surface name -> ``(kind, index)`` of every door, item and lever.
        starts: per step ``0..horizon``, where ``StepRng(seed, step)`` starts.
    """

    def __init__(self, seed: int, params: VaultParams) -> None:
        self.seed = seed
        self.params = params
        rng = StepRng(seed, -1)  # the layout's stream: step -1 (the reset's text is step 0)
        # Where each step's generator starts, seeded at once (cheaper than step by step).
        self.starts = StepRng.starts(seed, 0, params.horizon + 1)
        n = params.load
        low, high = params.delay

        # Layout: a row of rooms S0 .. Sn (Sn the vault), side rooms off S0 .. Sn-1.
        exits: list[dict[str, tuple[int, int]]] = [{}]
        region = [0]  # per room: how many doors on the way lie behind it
        links: list[tuple[int, int, str, int]] = []  # (a, b, direction a -> b, spine)

        def connect(a: int, spine: int) -> int:
            direction = rng.choice([d for d in DIRS if d not in exits[a]])
            b = len(exits)
            exits.append({OPPOSITE[direction]: (len(links), a)})
            exits[a][direction] = (len(links), b)
            region.append(spine or region[a])
            links.append((a, b, direction, spine))
            return b

        room = 0
        for i in range(1, n + 1):
            room = connect(room, i)
        vault = room
        for room in range(n):  # S0 .. Sn-1: rooms are numbered in the order made
            for _ in range(min(rng.choice((0, 1, 1, 2)), 4 - len(exits[room]))):
                connect(room, 0)
        names = rng.sample(ROOM_NAMES, len(exits) - 1)
        names.insert(vault, "vault")
        self.rooms = tuple(f"room:{name}" for name in names)

        # Where to put what a door needs: on its near side, preferably in a side room
        # ("elsewhere"); never in the vault.
        side = set(range(n + 1, len(exits)))
        near = [
            [r for r in range(len(exits)) if region[r] < b and r != vault] for b in range(n + 1)
        ]
        near_sides = [[r for r in rooms if r in side] for rooms in near]

        def place(before: int) -> int:
            sides = near_sides[before]
            return rng.choice(sides if sides and rng.random() < 0.7 else near[before])

        # Mechanisms on the way: keypad at the vault door, the others cycling through
        # a seeded order of the three kinds, so every load >= 4 has each of them.
        order = rng.sample(("key", "key_latch", "lever"), 3)
        mechanism = ["side", *(order[(i - 1) % 3] for i in range(1, n)), "keypad"]
        n_keys = sum(mechanism[spine] in ("key", "key_latch") for *_, spine in links)
        n_levers = sum(mechanism[spine] == "lever" for *_, spine in links)
        key_names = iter(rng.sample(KEY_NAMES, n_keys + 1 + n // 2))
        lever_names = iter(rng.sample(LEVER_NAMES, n_levers + n // 3))
        items: list[Item] = []
        levers: list[Lever] = []
        doors: list[Door] = []
        initial = []
        for i, ((a, b, direction, spine), name) in enumerate(
            zip(links, rng.sample(DOOR_NAMES, len(links)), strict=True)
        ):
            kind = mechanism[spine]
            key = spring = 0
            if kind in ("key", "key_latch"):
                key = len(items)
                items.append(Item(f"key:{next(key_names)}", "key", place(spine), ""))
            elif kind == "lever":
                lever = Lever(
                    f"lever:{next(lever_names)}", place(spine), i, low + rng.below(high - low + 1)
                )
                levers.append(lever)
            elif kind == "side" and rng.random() < P_SPRING:
                spring = low + rng.below(high - low + 1)
            blocks = kind == "key_latch"
            latch = blocks or (kind in ("key", "side") and rng.random() < P_SIDE_LATCH)
            lock = _LOCKS[kind]
            key = key if lock == "keyhole" else -1
            doors.append(
                Door(f"door:{name}", a, b, direction, lock, latch, blocks, key, spring, spine)
            )
            opened = kind == "side" and not spring and rng.random() < P_SIDE_OPEN
            initial.append(LOCKED if spine else OPEN if opened else CLOSED)
        for _ in range(1 + n // 2):  # keys that fit nothing
            items.append(Item(f"key:{next(key_names)}", "key", place(n), ""))
        codes = [1000 + rng.below(9000)]
        codes.append(1000 + (codes[0] - 1000 + 1 + rng.below(8999)) % 9000)  # another one
        note_names = rng.sample(NOTE_NAMES, 2)
        self.true_note = len(items)  # the real code, near the start; a decoy anywhere
        items.append(Item(f"note:{note_names[0]}", "note", place(1), str(codes[0])))
        items.append(Item(f"note:{note_names[1]}", "note", place(n), str(codes[1])))
        items.append(Item(f"treasure:{rng.choice(TREASURES)}", "treasure", vault, ""))
        for _ in range(n // 3):  # levers that work nothing
            levers.append(Lever(f"lever:{next(lever_names)}", place(n), -1, 0))

        self.region = tuple(region)
        self.vault = vault
        self.doors = tuple(doors)
        self.items = tuple(items)
        self.levers = tuple(levers)
        self.spine = tuple(range(n))  # spine door i-1 was made i-th
        self.keypad = n - 1
        self.code = items[self.true_note].code
        self.initial_doors = tuple(initial)
        self.initial_latches = tuple(0 if d.latch else -1 for d in doors)
        self.max_score = n + WIN_REWARD
        self._build_tables(exits)

    def _build_tables(self, exits: list[dict[str, tuple[int, int]]]) -> None:
        doors, rooms = self.doors, self.rooms
        # Per room: its exits in direction order, with the message kind that describes each.
        self.exits = tuple(
            tuple(
                (e, *ex[e], f"exit_{e}_latch" if doors[ex[e][0]].latch else f"exit_{e}")
                for e in DIRS
                if e in ex
            )
            for ex in exits
        )
        self.exit_by_dir = tuple(exits)
        self.adjacent = tuple({door: other for door, other in ex.values()} for ex in exits)
        room_levers: list[list[int]] = [[] for _ in rooms]
        for k, lever in enumerate(self.levers):
            room_levers[lever.room].append(k)
        self.room_levers = tuple(map(tuple, room_levers))

        # Surface names and the admissible-action strings, made once.
        self.door_text = tuple(f"{d.id[5:]} door" for d in doors)
        self.item_text = tuple(
            it.id[9:] if it.kind == "treasure" else item_text(it.id) for it in self.items
        )
        self.lever_text = tuple(f"{lv.id[6:]} lever" for lv in self.levers)
        door_actions = [
            (
                f"open {t}",
                f"close {t}",
                f"lift latch on {t}",
                f"lower latch on {t}",
                f"unlock {t} with ",
            )
            for t in self.door_text
        ]
        self.exit_actions = tuple(
            tuple((i, f"go {e}", door_actions[i], doors[i].lock) for e, i, _, _ in room_exits)
            for room_exits in self.exits
        )
        self.keys = tuple(j for j, it in enumerate(self.items) if it.kind == "key")
        self.notes = tuple(j for j, it in enumerate(self.items) if it.kind == "note")
        self.item_actions = tuple(
            (f"take {t}", f"drop {t}", f"read {t}" if it.kind == "note" else "")
            for t, it in zip(self.item_text, self.items, strict=True)
        )
        self.pull_actions = tuple(
            tuple(f"pull {self.lever_text[k]}" for k in ks) for ks in self.room_levers
        )

        # Fact slots: each (subject, relation) that can hold a fact, with how to read its
        # object from a state. Anchors (the step a fact was last stated) index them.
        slots: list[tuple[str, str]] = [("player", "at")]
        info: list[tuple[str, int, str | None]] = [("at", 0, None)]
        door_slots = []
        for i, d in enumerate(doors):
            k = len(slots)
            slots += [
                (d.id, OPPOSITE[d.direction]),
                (d.id, d.direction),
                (d.id, "state"),
                (d.id, "lock"),
            ]
            info += [
                ("side", i, rooms[d.a]),
                ("side", i, rooms[d.b]),
                ("state", i, None),
                ("lock", i, d.lock),
            ]
            if d.latch:
                slots.append((d.id, "latch"))
                info.append(("latch", i, None))
            door_slots.append((k, k + 1, k + 2, k + 4 if d.latch else -1))
        item_slots = []
        for j, item in enumerate(self.items):
            item_slots.append((len(slots), len(slots) + 1 if item.kind == "note" else -1))
            slots.append((item.id, "in"))
            info.append(("in", j, None))
            if item.kind == "note":
                slots.append((item.id, "code"))
                info.append(("code", j, item.code))
        lever_slots = []
        for k, lever in enumerate(self.levers):
            lever_slots.append((len(slots), len(slots) + 1))
            slots += [(lever.id, "in"), (lever.id, "state")]
            info += [("static", k, rooms[lever.room]), ("lever", k, None)]
        self.door_slots, self.item_slots, self.lever_slots = door_slots, item_slots, lever_slots
        self.slots = tuple(slots)
        self.slot_info = tuple(info)
        self.fact_index = {s: k for k, s in enumerate(slots)}
        self.views = tuple(self._view(room) for room in range(len(rooms)))
        self.surface = self._surface()

    def _view(self, room: int) -> _RoomView:
        # What describing ``room`` states; see ``_RoomView``.
        rid = self.rooms[room]
        exits = []
        entities = {"player", rid}
        for _, i, other, kind in self.exits[room]:
            d, slots = self.doors[i], self.door_slots[i]
            head = (rid, d.id, self.rooms[other])
            stated = (*slots[:3], slots[2] + 1, *(slots[3:] if d.latch else ()))  # + lock
            exits.append((kind, i, head, d.lock, stated))
            entities.update(head)
        levers = []
        for k in self.room_levers[room]:
            levers.append((k, (self.levers[k].id, rid), self.lever_slots[k]))
            entities.add(self.levers[k].id)
        return _RoomView(rid, tuple(exits), tuple(levers), frozenset(entities))

    def _surface(self) -> dict[str, tuple[str, int]]:
        # Surface name -> ``(kind, index)`` of every door, item and lever (the parser's).
        names = {t: ("door", i) for i, t in enumerate(self.door_text)}
        names |= {
            t: (it.kind, j)
            for j, (t, it) in enumerate(zip(self.item_text, self.items, strict=True))
        }
        return names | {t: ("lever", k) for k, t in enumerate(self.lever_text)}

    @cached_property
    def rules(self) -> tuple[Fact, ...]:
        """The hidden rules, as sorted facts (``info["wm.rules"]``)."""
        rules = []
        for j, item in enumerate(self.items):
            if item.kind == "key":
                fits = [d.id for d in self.doors if d.key == j]
                rules.append(Fact(item.id, "fits", fits[0] if fits else "nothing"))
            elif item.kind == "note":
                opens = self.doors[self.keypad].id if j == self.true_note else "nothing"
                rules.append(Fact(item.id, "opens", opens))
        for d in self.doors:
            if d.latch:
                rules.append(Fact(d.id, "latch_blocks", "yes" if d.latch_blocks else "no"))
            if d.spring:
                rules.append(Fact(d.id, "shuts_after", str(d.spring)))
        for lever in self.levers:
            target = self.doors[lever.door].id if lever.door >= 0 else "nothing"
            rules.append(Fact(lever.id, "operates", target))
            if lever.door >= 0:
                rules.append(Fact(lever.id, "delay", str(lever.delay)))
        return tuple(sorted(rules))

    @cached_property
    def fact_plan(self) -> tuple[tuple[tuple[int, dict[int, Fact | None]], ...], tuple[int, ...]]:
        """Per fact slot, where its value sits in ``vector(state)`` and the fact each value means.

        Also the slots in sorted order. Built on the first ground-truth call.
        """
        n_doors, n_levers, n_items = len(self.doors), len(self.levers), len(self.items)
        base = {"at": 1, "state": 2, "latch": 2 + n_doors, "lever": 2 + 2 * n_doors}
        base |= {"in": base["lever"] + n_levers, "code": base["lever"] + n_levers + n_items}
        places = dict(enumerate(self.rooms)) | {HELD: "player"}
        names = {"state": DOOR_STATES, "latch": LATCH_STATES, "lever": LEVER_STATES}
        plan = []
        for (subject, relation), (what, i, static) in zip(self.slots, self.slot_info, strict=True):
            if what in ("at", "in"):
                table = {r: Fact(subject, relation, room) for r, room in places.items()}
            elif what in names:
                table = {v: Fact(subject, relation, name) for v, name in enumerate(names[what])}
            elif what == "code":
                table = {0: None, 1: Fact(subject, relation, static)}
            else:
                table = {0: Fact(subject, relation, static)}
            plan.append((base[what] + i if what in base else 0, table))
        # (subject, relation) pairs are unique, so facts listed in this order are sorted.
        order = tuple(sorted(range(len(self.slots)), key=self.slots.__getitem__))
        return tuple(plan), order

    def __eq__(self, other: object) -> bool:
        if isinstance(other, VaultWorld):
            return self.seed == other.seed and self.params == other.params
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.seed, self.params))

    def __reduce__(self) -> tuple:
        # Rebuilt from the seed: small to pickle, and the lazy tables start empty.
        return (VaultWorld, (self.seed, self.params))

    def __repr__(self) -> str:
        return f"VaultWorld(seed={self.seed}, params={self.params})"


class EpisodeMemo:
    """The memo tables of one episode, kept by the core, never by a state.

    Lookups a step repeats (a command's parse, a message's line, the admissible actions
    of a situation, the true facts of a revisited one) are functions of the world and
    their key only, so keeping them changes no result. Each table is bounded: cleared
    when full.

    Args:
        world: the episode the tables are of.
    """

    __slots__ = ("admissible", "known", "parsed", "said", "world")

    def __init__(self, world: VaultWorld | None) -> None:
        self.world = world
        self.parsed: dict[str, tuple[Callable[..., int], tuple]] = {}
        self.said: dict[tuple, tuple[str, tuple[int, ...], frozenset[str]]] = {}
        self.admissible: dict[tuple, tuple[str, ...]] = {}
        self.known: dict[tuple, list[Fact]] = {}
