"""The rules of ``wmkit/Vault-v0`` a newcomer assumes: a hand-written rule model.

:class:`NaiveVaultRules` is a :class:`~wmkit.knowledge.types.Predictor` for the
``rules`` simulator (:class:`~wmkit.search.rules_sim.RulesSimulator`) holding the rules
a newcomer would assume and nothing of the seed-varied mechanisms: every key fits every
keyhole, an unlocked door opens (latches are ignored), a pulled lever unbars the barred
door beside it at once, any code read opens the keypad. The self-correcting policy
learns the real ones as exceptions. It lives with the family it describes; the library
never imports it (configs name it: ``configs/simulator/naive_vault.yaml``).
"""

from __future__ import annotations

from wmkit.search.rules_sim import UNKNOWN, RulesToken, seen_marks
from wmkit.world.types import Delta, Fact, WorldState

__all__ = ["NaiveVaultRules"]

_DIRS = ("north", "east", "south", "west")
_OPPOSITE = {"north": "south", "south": "north", "east": "west", "west": "east"}
_DIR_WORDS = {d: d for d in _DIRS} | {d[0]: d for d in _DIRS}
_OPEN_REWARD = 1.0
_WIN_REWARD = 10.0
_ROOM_REWARD = 0.5
_FIND_REWARD = 0.25


def _name(entity: str) -> str:
    """How Vault's commands name an entity: ``door:oak`` -> ``oak door``; treasure bare."""
    kind, _, name = entity.partition(":")
    return name if kind == "treasure" else f"{name} {kind}"


class NaiveVaultRules:
    """The rules of ``wmkit/Vault-v0`` a newcomer assumes (a ``Predictor``).

    Right about moving, taking, dropping, closing, latches going up and down and levers
    flipping; wrong, on purpose, about the hidden mechanisms: every carried key unlocks
    every locked keyhole door, an unlocked (``closed``) door opens whatever its latch,
    pulling a lever down unbars the barred doors of its room at once, and every code
    read opens the keypad. Reading a note predicts nothing (its code is unknown).

    Rewards follow the family's: +1 the first time a door is imagined open, +10 for
    holding a treasure, which ends the episode; and, to drive exploration, +0.5 the
    first time the player is imagined in a room and +0.25 the first time a thing is
    taken or a note read (the real game pays nothing for those). Reading a note predicts
    that its code becomes known, value :data:`~wmkit.search.rules_sim.UNKNOWN`.

    It proposes only what a newcomer heading for the vault would try: going through
    open doors, opening, unlocking, lifting latches, pulling levers, taking, reading,
    entering codes read, and waiting (for a lever); never dropping or closing.
    """

    static_relations = frozenset({*_DIRS, "lock"})

    def predict(
        self, state: WorldState, action: str | None, observation: str | None = None
    ) -> Delta:
        """Predict the change of ``action`` (observations are not read)."""
        if not action:
            return Delta()
        words = action.lower().split()
        verb, rest = words[0], words[1:]
        here = state.value("player", "at")
        if verb in _DIR_WORDS and not rest:
            verb, rest = "go", [verb]
        sets: list[Fact] = []
        if verb == "go" and len(rest) == 1 and rest[0] in _DIR_WORDS and here:
            direction = _DIR_WORDS[rest[0]]
            for door in self._doors_at(state, here):
                there = state.value(door, direction)
                if state.value(door, _OPPOSITE[direction]) == here and there:
                    if state.value(door, "state") == "open":
                        sets.append(Fact("player", "at", there))
                    break
        elif verb in ("open", "close") and rest:
            door = self._entity(state, rest, "door")
            if door and here in self._sides(state, door):
                now = state.value(door, "state")
                if verb == "open" and now == "closed":
                    sets.append(Fact(door, "state", "open"))
                elif verb == "close" and now == "open":
                    sets.append(Fact(door, "state", "closed"))
        elif verb == "unlock" and "with" in rest:
            cut = rest.index("with")
            door = self._entity(state, rest[:cut], "door")
            key = self._entity(state, rest[cut + 1 :], "key")
            if (
                door
                and key
                and here in self._sides(state, door)
                and state.value(door, "state") == "locked"
                and state.value(door, "lock") == "keyhole"
                and state.value(key, "in") == "player"
            ):
                sets.append(Fact(door, "state", "closed"))
        elif verb in ("lift", "lower") and rest[:1] == ["latch"]:
            want = "up" if verb == "lift" else "down"
            if len(rest) > 2:
                door = self._entity(state, rest[2:], "door")
                doors = [door] if door else []
            else:
                doors = [d for d in self._doors_at(state, here) if state.value(d, "latch")]
            if (
                len(doors) == 1
                and here in self._sides(state, doors[0])
                and state.value(doors[0], "latch") not in (None, want)
            ):
                sets.append(Fact(doors[0], "latch", want))
        elif verb == "pull" and rest:
            lever = self._entity(state, rest, "lever")
            if lever and state.value(lever, "in") == here:
                new = "down" if state.value(lever, "state") == "up" else "up"
                sets.append(Fact(lever, "state", new))
                if new == "down":
                    for door in self._doors_at(state, here):
                        if (
                            state.value(door, "lock") == "bar"
                            and state.value(door, "state") == "locked"
                        ):
                            sets.append(Fact(door, "state", "closed"))
        elif verb in ("take", "get") and rest:
            thing = self._thing(state, rest)
            if thing and state.value(thing, "in") == here:
                sets.append(Fact(thing, "in", "player"))
        elif verb == "drop" and rest:
            thing = self._thing(state, rest)
            if thing and state.value(thing, "in") == "player" and here:
                sets.append(Fact(thing, "in", here))
        elif verb == "read" and rest:
            note = self._entity(state, rest, "note")
            held = note and state.value(note, "in") in (here, "player")
            if held and not state.objects(note, "code"):
                sets.append(Fact(note, "code", UNKNOWN))
        elif verb in ("enter", "type") and rest:
            code = rest[-1]
            known = {o for _, r, o in state if r == "code" and o != UNKNOWN}
            if code in known:
                for door in self._doors_at(state, here):
                    if (
                        state.value(door, "lock") == "keypad"
                        and state.value(door, "state") == "locked"
                    ):
                        sets.append(Fact(door, "state", "closed"))
        added, removed = [], []
        for fact in sets:
            old = state.objects(fact.subject, fact.relation)
            if old != (fact.object,):
                added.append(fact)
                removed += [Fact(fact.subject, fact.relation, o) for o in old]
        return Delta(tuple(sorted(added)), tuple(sorted(removed)))

    def actions(self, state: WorldState) -> tuple[str, ...]:
        """The commands worth trying in ``state``, as Vault's admissible actions read."""
        here = state.value("player", "at")
        out = ["wait"]
        if not here:
            return tuple(out)
        carried = sorted(s for s, r, o in state if r == "in" and o == "player")
        codes = sorted({o for _, r, o in state if r == "code" and o != UNKNOWN})
        for door in self._doors_at(state, here):
            text = _name(door)
            now = state.value(door, "state")
            if now == "open":
                side = next(d for d in _DIRS if state.value(door, d) == here)
                out.append(f"go {_OPPOSITE[side]}")
            else:
                out.append(f"open {text}")
                lock = state.value(door, "lock")
                if now == "locked" and lock == "keyhole":
                    out += [f"unlock {text} with {_name(k)}" for k in carried if k[:4] == "key:"]
                elif now == "locked" and lock == "keypad":
                    out += [f"enter code {c}" for c in codes]
            if state.value(door, "latch") == "down":
                out.append(f"lift latch on {text}")
        for s, r, o in state:
            if r == "in" and o == here:
                kind = s.partition(":")[0]
                if kind == "lever":
                    out.append(f"pull {_name(s)}")
                else:
                    out.append(f"take {_name(s)}")
        for s, r, o in state:
            if (
                r == "in"
                and o in (here, "player")
                and s[:5] == "note:"
                and not state.objects(s, "code")
            ):
                out.append(f"read {_name(s)}")
        return tuple(sorted(set(out)))

    def reward(
        self, before: WorldState, action: str, after: WorldState, token: RulesToken
    ) -> float:
        """Predicted reward of a step: doors opened, rooms entered, things found, treasure.

        +1 per door newly open, +0.5 per room first entered, +0.25 per thing first taken
        or code first read, +10 for a treasure held; "newly" and "first": not in
        ``token.seen``. The command itself is not read: the change tells.
        """
        reward = 0.0
        for x in seen_marks(after) - seen_marks(before) - token.seen:
            if x.endswith("#open"):
                reward += _OPEN_REWARD
            elif x.startswith("room:"):
                reward += _ROOM_REWARD
            elif not x.startswith("treasure:"):
                reward += _FIND_REWARD
        if self.terminal(after) and not self.terminal(before):
            reward += _WIN_REWARD
        return reward

    def terminal(self, state: WorldState) -> bool:
        """Whether a treasure is held (the family's goal)."""
        return any(s.startswith("treasure:") and o == "player" for s, r, o in state if r == "in")

    @staticmethod
    def _sides(state: WorldState, door: str) -> set[str]:
        return {o for d in _DIRS for o in state.objects(door, d)}

    @staticmethod
    def _doors_at(state: WorldState, room: str | None) -> list[str]:
        if room is None:
            return []
        return sorted({s for s, r, o in state if r in _DIRS and o == room})

    @staticmethod
    def _entity(state: WorldState, words: list[str], kind: str) -> str | None:
        if words[-1:] == [kind] and len(words) >= 2:
            entity = f"{kind}:{' '.join(words[:-1])}"
            return entity if entity in state.subjects() else None
        return None

    def _thing(self, state: WorldState, words: list[str]) -> str | None:
        for kind in ("key", "note"):
            found = self._entity(state, words, kind)
            if found:
                return found
        treasure = f"treasure:{' '.join(words)}"
        return treasure if treasure in state.subjects() else None
