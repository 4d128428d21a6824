"""The ``rules`` simulator: imagine steps with a rule world model over tracked facts.

:class:`RulesSimulator` steps :class:`RulesToken` states (a tracked
:class:`~wmkit.world.types.WorldState`, the step number, the doors seen open and the
score so far) with a :class:`Predictor`: anything with
``predict(state, action, observation=None) -> Delta``, the interface of the distiller's
:class:`~wmkit.knowledge.rules.RuleSet` (``RulesSimulator.load(path)`` reads one). A
predictor may also offer ``actions(state)`` (the commands worth trying in an imagined
state), ``reward(before, after, token)`` and ``terminal(state)``; without them the
simulator proposes the root's admissible actions everywhere, predicts no reward and
never ends.

The simulator is a world model that can be wrong, so it learns within an episode:
:meth:`RulesSimulator.correct` records what a step really did as an *exception* for
its signature (the facts of the entities the command names and of the player, as
:func:`~wmkit.knowledge.rules.features` reads them), and every later prediction of that
command under that signature returns the observed change instead of the rules'.

:class:`NaiveVaultRules` is a hand-written predictor for ``wmkit/Vault-v0`` holding the
rules a newcomer would assume and nothing of the seed-varied mechanisms: every key
fits every keyhole, an unlocked door opens (latches are ignored), a pulled lever
unbars the barred door beside it at once, any code read opens the keypad.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from wmkit.knowledge.rules import RuleSet, StateIndex, abstract, features, tokenize
from wmkit.search.types import Transition
from wmkit.world.types import Delta, Fact, WorldState

__all__ = [
    "UNKNOWN",
    "NaiveVaultRules",
    "Predictor",
    "RulesSimulator",
    "RulesToken",
    "apply_delta",
]


class Predictor(Protocol):
    """Predicts the change of one step from the state before it (a ``RuleSet``)."""

    def predict(
        self, state: WorldState, action: str | None, observation: str | None = None
    ) -> Delta:
        """Return the predicted delta relative to ``state``."""


class RulesToken(NamedTuple):
    """An imagined state of the ``rules`` simulator.

    Attributes:
        state: the predicted facts.
        step: steps since the episode began (the real step at the root).
        score: the real score at the root plus the rewards predicted since.
        seen: what already earned its reward this episode, really or on the imagined
            path to here: doors seen open and rooms the player has been in (entity
            ids); a predicted reward for them is paid only the first time.
    """

    state: WorldState
    step: int
    score: float
    seen: frozenset[str]


def apply_delta(state: WorldState, delta: Delta) -> WorldState:
    """Return ``state`` with ``delta``'s removed facts taken out and added facts put in."""
    if not delta.added and not delta.removed:
        return state
    return WorldState((state.facts - set(delta.removed)) | set(delta.added))


UNKNOWN = "?"
"""The object of a predicted fact whose value the model cannot know (a note's code
before reading it): it matches any observed object of the same subject and relation."""


def _seen(state: WorldState) -> frozenset[str]:
    """What earns a reward once: open doors, the player's room, carried things, codes."""
    found = {f"{s}#open" for s, r, o in state if r == "state" and o == "open"}
    found.update(state.objects("player", "at"))
    found.update(f"{s}#held" for s, r, o in state if r == "in" and o == "player")
    found.update(f"{s}#code" for s, r, _ in state if r == "code")
    return frozenset(found)


class RulesSimulator:
    """Steps tracked-fact states with a rule world model, with learned exceptions.

    A step predicts the delta of ``action`` (an exception recorded by :meth:`correct`
    first, else the predictor), applies it, and asks the predictor (when it knows how)
    for the reward, whether the state ends the episode and the actions to try next.
    The transposition key is the predicted fact set: two paths that predict the same
    facts reach the same state. The transition's ``info`` carries
    ``admissible_actions`` (the proposal), ``score`` and ``max_score``, so
    :func:`~wmkit.search.simulators.admissible_proposal` and
    :class:`~wmkit.search.values.HeuristicValue` work unchanged.

    Args:
        rules: the predictor (a ``RuleSet``, :class:`NaiveVaultRules`, ...).
        static_relations: relations left out of signatures when their object is
            another entity (a door's sides only restate which door it is); by default
            the rule set's lexicon's, if it has one.

    Attributes:
        corrections: ``(signature, action) -> observed delta``, learned this episode.
        hits: predictions answered by an exception (a cost-free counter).
    """

    def __init__(self, rules: Predictor, *, static_relations: frozenset[str] | None = None) -> None:
        if not callable(getattr(rules, "predict", None)):
            raise TypeError(
                f"{type(rules).__name__} has no predict(state, action, observation): the "
                "rules simulator needs a RuleSet or another predictor"
            )
        self.rules = rules
        lexicon = getattr(rules, "lexicon", None)
        if static_relations is None:
            static_relations = getattr(lexicon, "static_relations", None) or getattr(
                rules, "static_relations", frozenset()
            )
        self.static_relations = frozenset(static_relations)
        self._actions_fn: Callable[[WorldState], tuple[str, ...]] | None = getattr(
            rules, "actions", None
        )
        self._reward_fn = getattr(rules, "reward", None)
        self._terminal_fn = getattr(rules, "terminal", None)
        self.corrections: dict[tuple[Hashable, str], Delta] = {}
        self.hits = 0
        self.seen: set[str] = set()
        self._root_actions: tuple[str, ...] = ()
        self._max_score = 0.0

    @classmethod
    def load(cls, path: str | Path, *, min_confidence: float = 0.0) -> RulesSimulator:
        """A simulator over the rules file ``path`` (``wmkit-distill``'s ``rules.jsonl``)."""
        return cls(RuleSet.load(path, min_confidence=min_confidence))

    def reset(self) -> None:
        """Forget the episode: exceptions, what was seen, the root's actions."""
        self.corrections.clear()
        self.seen.clear()
        self.hits = 0
        self._root_actions = ()

    def root(
        self,
        observation: str,
        info: Mapping[str, Any],
        tracked: WorldState,
        *,
        step: int = 0,
        terminal: bool = False,
    ) -> Transition:
        """The transition record of the real state now, to search from.

        Args:
            observation: the last observation.
            info: the agent-visible info. Its ``admissible_actions`` are proposed at
                the root (those of them the predictor would try, when it proposes) and
                everywhere when the predictor proposes none.
            tracked: the tracked state now.
            step: the real step number.
            terminal: whether the episode is over.
        """
        admissible = tuple(info.get("admissible_actions", ()))
        self._root_actions = admissible
        if self._actions_fn is not None:
            # What the model would try, among what the game accepts here.
            allowed = set(admissible)
            mine = tuple(a for a in self._actions_fn(tracked) if a in allowed)
            self._root_actions = mine or admissible
        self._max_score = float(info.get("max_score", 0) or 0)
        self.seen |= _seen(tracked)
        token = RulesToken(tracked, step, float(info.get("score", 0) or 0), frozenset(self.seen))
        return Transition(
            token,
            observation,
            0.0,
            terminal,
            self._info(token, self._root_actions),
            tracked,
            None,
        )

    def signature(self, state: WorldState, action: str) -> Hashable:
        """What an exception for ``action`` in ``state`` is keyed by.

        The facts of the entities the command names (their identity included) and of
        the player, read as the distiller reads preconditions; facts of other entities
        do not matter to the command.
        """
        index = StateIndex(state)
        slots = abstract(tokenize(action), index.surfaces).slots
        return features(index.by_subject, list(slots), self.static_relations)

    def predict(self, state: WorldState, action: str) -> Delta:
        """The change ``action`` makes to ``state``: a learned exception, else the rules'."""
        if self.corrections:
            found = self.corrections.get((self.signature(state, action), action))
            if found is not None:
                self.hits += 1
                # The exception holds facts of the signature's entities; drop the parts
                # that already hold here (the state may differ elsewhere).
                added = tuple(f for f in found.added if f not in state)
                removed = tuple(f for f in found.removed if f in state)
                return Delta(added, removed)
        return self.rules.predict(state, action, None)

    def correct(self, state: WorldState, action: str, observed: Delta) -> Delta:
        """Record that ``action`` in ``state`` did ``observed``; return the exception kept.

        Only the part of ``observed`` about the player and the entities the command
        names is kept: other changes in the same step (a mechanism elsewhere) are not
        the command's doing.
        """
        signature = self.signature(state, action)
        named = {s for s, r, _ in signature if r != "="} | {v for s, r, v in signature if r == "="}
        named.add("player")
        kept = Delta(
            tuple(f for f in observed.added if f.subject in named),
            tuple(f for f in observed.removed if f.subject in named),
        )
        self.corrections[(signature, action)] = kept
        return kept

    def step(self, token: RulesToken, action: str) -> Transition:
        """Predict what ``action`` leads to from ``token``'s state."""
        state = token.state
        delta = self.predict(state, action)
        after = apply_delta(state, delta)
        reward = 0.0
        if self._reward_fn is not None:
            reward = float(self._reward_fn(state, after, token))
        seen = token.seen | _seen(after)
        terminal = bool(self._terminal_fn(after)) if self._terminal_fn is not None else False
        new = RulesToken(after, token.step + 1, token.score + reward, seen)
        actions = () if terminal else self._proposal(after)
        return Transition(
            new,
            f"(predicted) {action}",
            reward,
            terminal,
            self._info(new, actions),
            after,
            delta,
        )

    def _proposal(self, state: WorldState) -> tuple[str, ...]:
        if self._actions_fn is None:
            return self._root_actions
        return tuple(self._actions_fn(state))

    def _info(self, token: RulesToken, actions: tuple[str, ...]) -> Mapping[str, Any]:
        return {
            "admissible_actions": list(actions),
            "score": token.score,
            "max_score": self._max_score,
            "moves": token.step,
        }


# --- hand-written naive rules for Vault -------------------------------------------------

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
    """The rules of ``wmkit/Vault-v0`` a newcomer assumes (a :class:`Predictor`).

    Right about moving, taking, dropping, closing, latches going up and down and levers
    flipping; wrong, on purpose, about the hidden mechanisms: every carried key unlocks
    every locked keyhole door, an unlocked (``closed``) door opens whatever its latch,
    pulling a lever down unbars the barred doors of its room at once, and every code
    read opens the keypad. Reading a note predicts nothing (its code is unknown).

    Rewards follow the family's: +1 the first time a door is imagined open, +10 for
    holding a treasure, which ends the episode; and, to drive exploration, +0.5 the
    first time the player is imagined in a room and +0.25 the first time a thing is
    taken or a note read (the real game pays nothing for those). Reading a note predicts
    that its code becomes known, value :data:`UNKNOWN`.

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

    def reward(self, before: WorldState, after: WorldState, token: RulesToken) -> float:
        """Predicted reward of a step: doors opened, rooms entered, things found, treasure.

        +1 per door newly open, +0.5 per room first entered, +0.25 per thing first taken
        or code first read, +10 for a treasure held; "newly" and "first": not in
        ``token.seen``.
        """
        reward = 0.0
        for x in _seen(after) - _seen(before) - token.seen:
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
