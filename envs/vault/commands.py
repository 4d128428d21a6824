"""The Vault family's commands: the parser, one handler per verb, the admissible actions.

A command is parsed once per episode into a handler and its arguments (entity indices);
the handler applies the verb to a :class:`~wmkit.envs.vault.rules.Draft`, says what
happened and returns the reward. A command that cannot be carried out gets a reply and
changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from wmkit.envs.vault.state import (
    BAR,
    CLOSED,
    DOOR_STATES,
    HELD,
    LATCH_STATES,
    LEVER_STATES,
    LOCKED,
    OPEN,
    SPRING,
)
from wmkit.envs.vault.text import DIR_WORDS
from wmkit.envs.vault.world import WIN_REWARD, EpisodeMemo, VaultWorld

if TYPE_CHECKING:
    from wmkit.envs.vault.rules import Draft

__all__ = ["admissible", "command"]

_BAD = ("not_understood",)
_NO_SUCH = ("no_such",)
_CANNOT = ("cannot",)
_SIMPLE = {"look": ("look",), "l": ("look",), "inventory": ("inventory",), "inv": ("inventory",)}
_SIMPLE |= {"i": ("inventory",), "wait": ("wait",), "z": ("wait",)}
_SIMPLE |= {word: ("go", d) for word, d in DIR_WORDS.items()}
_CARRIED = ("key", "note", "treasure")
_THING_VERBS = {
    "take": _CARRIED,
    "get": _CARRIED,
    "drop": _CARRIED,
    "open": ("door",),
    "close": ("door",),
    "pull": ("lever",),
    "read": ("note",),
}


def _thing(world: VaultWorld, words: list[str], kinds: tuple[str, ...]) -> tuple:
    """Return ``(kind, index)`` of the thing named, or a one-word failure."""
    if words and words[0] == "the":
        words = words[1:]
    found = world.surface.get(" ".join(words))
    if found is None:
        return _NO_SUCH
    return found if found[0] in kinds else _CANNOT


def _parse(world: VaultWorld, action: str) -> tuple:
    """Turn a command into ``(verb, *arguments)`` with entity indices; no regexes."""
    words = action.lower().split()
    if not words:
        return _BAD
    verb, rest = words[0], words[1:]
    if not rest:
        return _SIMPLE.get(verb, _BAD)
    if verb == "go" and len(rest) == 1:
        return ("go", DIR_WORDS[rest[0]]) if rest[0] in DIR_WORDS else _BAD
    if verb == "pick" and rest[0] == "up":
        verb, rest = "take", rest[1:]
    if verb in _THING_VERBS:
        found = _thing(world, rest, _THING_VERBS[verb])
        return found if len(found) == 1 else ("take" if verb == "get" else verb, found[1])
    if verb == "unlock" and "with" in rest:
        cut = rest.index("with")
        door = _thing(world, rest[:cut], ("door",))
        key = _thing(world, rest[cut + 1 :], ("key",))
        for found in (door, key):
            if len(found) == 1:
                return found
        return ("unlock", door[1], key[1])
    if verb in ("lift", "lower") and rest[0] == "latch":
        up = int(verb == "lift")
        if len(rest) == 1:
            return ("latch", -1, up)
        if rest[1] not in ("on", "of"):
            return _BAD
        door = _thing(world, rest[2:], ("door",))
        return door if len(door) == 1 else ("latch", door[1], up)
    if verb in ("enter", "type"):
        if rest[0] == "code":
            rest = rest[1:]
        if len(rest) == 1 and rest[0].isdigit() and rest[0].isascii():
            return ("code", rest[0])
    return _BAD


def command(memo: EpisodeMemo, action: Any) -> tuple[Callable[..., int], tuple]:
    """Return the handler of ``action`` and its arguments, memoised per episode."""
    try:
        return memo.parsed[action]
    except (KeyError, TypeError):  # new, or not even hashable
        pass
    verb, *args = _parse(memo.world, action) if isinstance(action, str) else _BAD
    found = (_HANDLERS[verb], tuple(args))
    if isinstance(action, str) and len(memo.parsed) < 100_000:  # junk stays bounded
        memo.parsed[action] = found
    return found


# Each handler applies one verb to the draft and returns its reward.


def _look(d: Draft) -> int:
    d.describe(d.player)
    return 0


def _wait(d: Draft) -> int:
    d.say("waited")
    return 0


def _inventory(d: Draft) -> int:
    held = [j for j, where in enumerate(d.where) if where == HELD]
    for j in held:
        item = d.world.items[j]
        d.say("carrying_treasure" if item.kind == "treasure" else "carrying", item.id)
    if not held:
        d.say("empty_handed")
    return 0


def _reply(kind: str) -> Callable[[Draft], int]:
    def handle(d: Draft) -> int:
        d.say(kind)
        return 0

    return handle


def _go(d: Draft, direction: str) -> int:
    w = d.world
    found = w.exit_by_dir[d.player].get(direction)
    if found is None:
        d.say("no_exit")
        return 0
    door, other = found
    if d.doors[door] != OPEN:
        d.say("door_state", w.doors[door].id, DOOR_STATES[d.doors[door]])
        return 0
    d.say("went", direction, w.doors[door].id)
    d.change(0, w.rooms[d.player], w.rooms[other])
    d.player = other
    if d.visited >> other & 1:
        d.say("back", "player", w.rooms[other])
    else:
        d.describe(other)
    return 0


def _take(d: Draft, j: int) -> int:
    w = d.world
    item = w.items[j]
    if d.where[j] == HELD:
        d.say("carrying_treasure" if item.kind == "treasure" else "already_have", item.id)
        return 0
    if d.where[j] != d.player:
        d.say("no_such")
        return 0
    d.put_item(j, HELD, w.rooms[d.where[j]], "player")
    if item.kind == "treasure":
        d.say("treasure_taken", item.id)
        if not d.won:
            d.won = True
            return WIN_REWARD
        return 0
    d.say("taken", item.id)
    return 0


def _drop(d: Draft, j: int) -> int:
    w, room = d.world, d.player
    item = w.items[j]
    if d.where[j] != HELD:
        d.say("not_carrying")
        return 0
    d.put_item(j, room, "player", w.rooms[room])
    d.say("treasure_dropped" if item.kind == "treasure" else "dropped", item.id, w.rooms[room])
    return 0


def _open(d: Draft, i: int) -> int:
    door, state = d.world.doors[i], d.doors[i]
    if i not in d.world.adjacent[d.player]:
        d.say("no_such")
        return 0
    if state != CLOSED:
        d.say("door_state", door.id, DOOR_STATES[state])
        return 0
    if door.latch_blocks and d.latches[i] == 0:
        d.say("held_shut", door.id)
        return 0
    d.set_door(i, OPEN)
    d.say("opened", door.id)
    if door.spring:
        d.unschedule_spring(i)
        d.schedule(d.step + door.spring, SPRING, i, 0)
    if door.spine and not d.opened >> i & 1:
        d.opened |= 1 << i
        return 1
    return 0


def _close(d: Draft, i: int) -> int:
    door, state = d.world.doors[i], d.doors[i]
    if i not in d.world.adjacent[d.player]:
        d.say("no_such")
    elif state != OPEN:
        d.say("door_state", door.id, DOOR_STATES[state])
    else:
        d.set_door(i, CLOSED)
        d.say("closed", door.id)
        if door.spring:
            d.unschedule_spring(i)
    return 0


def _unlock(d: Draft, i: int, j: int) -> int:
    w = d.world
    door, key = w.doors[i], w.items[j]
    if i not in w.adjacent[d.player]:
        d.say("no_such")
    elif d.where[j] != HELD:
        d.say("not_carrying")
    elif door.lock != "keyhole":
        d.say("no_keyhole", door.id)
    elif d.doors[i] != LOCKED:
        d.say("door_state", door.id, DOOR_STATES[d.doors[i]])
    elif door.key == j:
        d.set_door(i, CLOSED)
        d.say("unlocked", key.id, door.id)
    else:
        d.say("wrong_key", key.id, door.id)
    return 0


def _latch(d: Draft, i: int, up: int) -> int:
    w = d.world
    if i < 0:
        here = [k for k in w.adjacent[d.player] if d.latches[k] >= 0]
        if len(here) != 1:
            d.say("which_latch" if here else "no_latch_here")
            return 0
        i = here[0]
    door = w.doors[i]
    if i not in w.adjacent[d.player]:
        d.say("no_such")
    elif d.latches[i] < 0:
        d.say("no_latch", door.id)
    elif d.latches[i] == up:
        d.say("latch_already", door.id, LATCH_STATES[up])
    else:
        d.set_latch(i, up)
        d.say("latch_lifted" if up else "latch_lowered", door.id)
    return 0


def _pull(d: Draft, k: int) -> int:
    w = d.world
    lever = w.levers[k]
    if lever.room != d.player:
        d.say("no_such")
        return 0
    new = 1 - d.levers[k]
    d.set_lever(k, new)
    d.say("pulled", lever.id, LEVER_STATES[new])
    if lever.door >= 0:
        d.schedule(d.step + lever.delay, BAR, lever.door, new)
    return 0


def _read(d: Draft, j: int) -> int:
    w = d.world
    if d.where[j] != d.player and d.where[j] != HELD:
        d.say("no_such")
        return 0
    item = w.items[j]
    if not d.read >> j & 1:
        d.read |= 1 << j
        d.change(w.item_slots[j][1], None, item.code)
    d.say("read", item.id, item.code)
    return 0


def _code(d: Draft, code: str) -> int:
    w = d.world
    i = w.keypad
    if i not in w.adjacent[d.player]:
        d.say("no_keypad")
    elif d.doors[i] != LOCKED:
        d.say("door_state", w.doors[i].id, DOOR_STATES[d.doors[i]])
    elif code == w.code:
        d.set_door(i, CLOSED)
        d.say("code_ok", w.doors[i].id)
    else:
        d.say("code_wrong")
    return 0


_HANDLERS: dict[str, Callable[..., int]] = {
    "look": _look,
    "wait": _wait,
    "inventory": _inventory,
    "go": _go,
    "take": _take,
    "drop": _drop,
    "open": _open,
    "close": _close,
    "unlock": _unlock,
    "latch": _latch,
    "pull": _pull,
    "read": _read,
    "code": _code,
    "no_such": _reply("no_such"),
    "cannot": _reply("cannot"),
    "not_understood": _reply("not_understood"),
}


def admissible(
    memo: EpisodeMemo,
    room: int,
    doors: tuple[int, ...],
    latches: tuple[int, ...],
    where: tuple[int, ...],
    read: int,
) -> tuple[str, ...]:
    """Return the commands that apply, sorted (memoised per episode).

    ``look``, ``inventory``, ``wait``; ``go`` through each open door here and ``open`` or
    ``close`` each door here; ``unlock <door> with <key>`` for each locked keyhole door
    here and each carried key; ``lift``/``lower latch on <door>``; ``enter code <n>`` at
    the locked keypad for each code read so far; ``pull`` each lever here; ``take``,
    ``drop`` and ``read`` what is here or carried.
    """
    key = (room, doors, latches, where, read)
    found = memo.admissible.get(key)
    if found is not None:
        return found
    w = memo.world
    actions = ["inventory", "look", "wait"]
    for i, go, names, lock in w.exit_actions[room]:
        state = doors[i]
        if state == OPEN:
            actions += (go, names[1])
        else:
            actions.append(names[0])
            if state == LOCKED and lock == "keyhole" and HELD in where:
                actions += [names[4] + w.item_text[j] for j in w.keys if where[j] == HELD]
            elif state == LOCKED and lock == "keypad" and read:
                actions += [f"enter code {w.items[j].code}" for j in w.notes if read >> j & 1]
        if latches[i] >= 0:
            actions.append(names[2 + latches[i]])  # down: lift it; up: lower it
    actions += w.pull_actions[room]
    if room in where or HELD in where:
        for j, place in enumerate(where):
            if place in (room, HELD):
                take, drop, read_it = w.item_actions[j]
                actions.append(take if place == room else drop)
                if read_it:
                    actions.append(read_it)
    found = tuple(sorted(actions))
    if len(memo.admissible) >= 50_000:
        memo.admissible.clear()
    memo.admissible[key] = found
    return found
