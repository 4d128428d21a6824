"""Valid actions for Jericho games without spaCy and without a network.

Jericho's own ``get_valid_actions()`` finds the objects around the player with spaCy's
``en_core_web_sm`` model (downloaded at run time). Here the objects come from the
z-machine object tree instead: the env hands over one noun per object in scope.

Rule (:class:`ValidActions`): from the current state, ``examine <noun>`` is tried for
each noun, and only the nouns the parser accepts there are used, as Jericho filters its
spaCy nouns: what is in the tree but out of reach (the contents of a closed box) is
left out. The candidates are the game's action templates (Jericho's grammar bindings,
one verb per template, meta commands removed; a generic Inform list for games without
bindings) filled with those nouns. Two-noun templates take every pair of nouns, as in
Jericho, while that makes at most ``pair_budget`` candidates; past it (the count grows
with the square of the nouns: minutes per state on big games) only the pairs where the
player carries one of the two (``put X in Y``, ``unlock Y with X``).
Each candidate is tried from the same emulator state (``get_state``/``set_state``,
never ``copy()``) and kept when

* it changes the world: the state hash, the score or the game-over/victory flag; the
  candidates with the same outcome (same state hash, score and flags) are one action,
  and the most common verb in the ClubFloyd transcripts names it (Jericho's choice),
  shorter and then alphabetically first on ties; or
* it only informs (a template that is just ``look``, ``inventory`` or ``examine OBJ``,
  in any of their usual spellings) and the parser accepted it (the reply matches none
  of Jericho's "not understood" patterns).

Results are cached by state hash, so revisiting a state costs a dictionary lookup.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

import numpy as np
from jericho import defines
from jericho.util import clean, recognized, verb_usage_count

__all__ = [
    "GENERIC_TEMPLATES",
    "INFO_VERBS",
    "Outcome",
    "ValidActions",
    "game_templates",
    "get_state",
    "set_state",
]

GENERIC_TEMPLATES = (
    *defines.BASIC_ACTIONS,
    "wait",
    "take OBJ",
    "drop OBJ",
    "open OBJ",
    "close OBJ",
    "eat OBJ",
    "wear OBJ",
    "remove OBJ",
    "push OBJ",
    "pull OBJ",
    "turn on OBJ",
    "turn off OBJ",
    "enter OBJ",
    "examine OBJ",
    "put OBJ in OBJ",
    "put OBJ on OBJ",
    "take OBJ from OBJ",
    "unlock OBJ with OBJ",
    "lock OBJ with OBJ",
    "give OBJ to OBJ",
)
"""Inform standard-library commands, for games without Jericho grammar bindings."""

INFO_VERBS = frozenset({"look", "l", "inventory", "inv", "i", "examine", "x"})
"""Verbs of templates (bare, or with one ``OBJ``) kept when the parser accepts them."""


def get_state(frotz: Any) -> tuple:
    """Return ``frotz.get_state()``: the same tuple, in about half the time.

    Jericho converts its buffers to ctypes arrays on every call; handing the emulator
    the buffers' addresses does the same copy without that (jericho 3.3.1's layout:
    RAM, stack, PC, SP, FP, frame count, opcode, RNG, narrative text).
    """
    lib = frotz.frotz_lib
    ram = np.empty(lib.getRAMSize(), dtype=np.uint8)
    stack = np.empty(lib.getStackSize(), dtype=np.uint8)
    lib.getRAM(ram.ctypes.data)
    lib.getStack(stack.ctypes.data)
    rng = (lib.getRngA(), lib.getRngInterval(), lib.getRngCounter())
    return (
        ram,
        stack,
        lib.getPC(),
        lib.getSP(),
        lib.getFP(),
        lib.getFrameCount(),
        lib.get_opcode(),
        rng,
        lib.get_narrative_text(),
    )


def set_state(frotz: Any, state: tuple) -> None:
    """Do ``frotz.set_state(state)`` in about half the time (see :func:`get_state`)."""
    ram, stack, pc, sp, fp, frame_count, opcode, rng, narrative = state
    lib = frotz.frotz_lib
    lib.setRng(*rng)
    lib.setRAM(ram.ctypes.data)
    lib.setStack(stack.ctypes.data)
    lib.setPC(pc)
    lib.setSP(sp)
    lib.setFP(fp)
    lib.set_opcode(opcode)
    lib.setFrameCount(frame_count)
    lib.set_narrative_text(narrative)


class Outcome(NamedTuple):
    """What one command does from a state: the key its effect is grouped by.

    Attributes:
        state_hash: the world-state hash after the command.
        score: the score after it.
        over: whether the game is won or lost after it.
    """

    state_hash: str
    score: int
    over: bool


def game_templates(frotz: Any) -> tuple[str, ...]:
    """Return the action templates of a loaded ``jericho.FrotzEnv``; ``OBJ`` marks a noun.

    Jericho's template generator needs no spaCy: it reads the grammar from the game's
    bindings, keeps the most common of each verb's synonyms and drops meta commands.
    Games without bindings (unsupported or TextWorld) get :data:`GENERIC_TEMPLATES`.
    """
    templates = frotz.act_gen.templates if frotz.act_gen is not None else GENERIC_TEMPLATES
    return tuple(dict.fromkeys((*templates, "look", "inventory")))


def _informs(template: str) -> bool:
    words = template.split()
    return words[0] in INFO_VERBS and words[1:] in ([], ["OBJ"])


def _fill(
    templates: Sequence[str], nouns: Sequence[str], held: Collection[str] | None = None
) -> list[str]:
    """Return every template filled with nouns.

    Two holes take two distinct nouns, one of them in ``held`` unless it is None.
    """
    out = []
    for template in templates:
        holes = template.count("OBJ")
        if holes == 0:
            out.append(template)
        elif holes == 1:
            out.extend(template.replace("OBJ", n) for n in nouns)
        elif holes == 2:
            out.extend(
                template.replace("OBJ", a, 1).replace("OBJ", b, 1)
                for a in nouns
                for b in nouns
                if a != b and (held is None or a in held or b in held)
            )
    return out


def _name_key(action: str) -> tuple[int, int, str]:
    # Jericho names a group by its most used verb; length and text break ties stably.
    return (-verb_usage_count(action), len(action), action)


class ValidActions:
    """Finds the valid actions of the state a ``jericho.FrotzEnv`` is in (rule: module doc).

    Args:
        frotz: the loaded emulator; it is left in the state it was found in.
        templates: action templates, ``OBJ`` per noun (see :func:`game_templates`).
        hash_fn: returns the current world-state hash (a string).
        score_fn: returns the current score.
        cache_size: states remembered (least recently used dropped first).
        pair_budget: most two-noun candidates tried with every pair (see module doc).
    """

    def __init__(
        self,
        frotz: Any,
        templates: Sequence[str],
        hash_fn: Callable[[], str],
        score_fn: Callable[[], int],
        cache_size: int = 4096,
        pair_budget: int = 5000,
    ) -> None:
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        if pair_budget < 0:
            raise ValueError(f"pair_budget must be >= 0, got {pair_budget}")
        self.frotz = frotz
        self.templates = tuple(templates)
        self._informative = tuple(t for t in self.templates if _informs(t))
        if not any("OBJ" in t for t in self._informative):
            self._informative += ("examine OBJ",)  # the scope test needs one
        self._acting = tuple(t for t in self.templates if not _informs(t))
        self._pair_templates = sum(t.count("OBJ") == 2 for t in self._acting)
        self.hash_fn = hash_fn
        self.score_fn = score_fn
        self.cache_size = cache_size
        self.pair_budget = pair_budget
        self._cache: OrderedDict[str, dict[str, Outcome]] = OrderedDict()
        self.tried = 0
        """Candidates tried so far (cache misses only): a cost counter for benchmarks."""

    def outcomes(
        self, state_hash: str, nouns: Sequence[str], held: Collection[str] | None = None
    ) -> dict[str, Outcome]:
        """Return ``{action: outcome}`` for the valid actions of the current state.

        Args:
            state_hash: the current state's hash, the cache key.
            nouns: one noun per object in scope; those the parser rejects are left out.
            held: the nouns of what the player carries: past the pair budget a
                two-noun candidate needs one of them; None tries every pair anyway.
        """
        found = self._cache.get(state_hash)
        if found is not None:
            self._cache.move_to_end(state_hash)
            return found
        found = self._search(state_hash, nouns, held)
        self._cache[state_hash] = found
        if len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return found

    def __call__(
        self, state_hash: str, nouns: Sequence[str], held: Collection[str] | None = None
    ) -> list[str]:
        """Return the valid actions of the current state, sorted."""
        return sorted(self.outcomes(state_hash, nouns, held))

    def _search(
        self, state_hash: str, nouns: Sequence[str], held: Collection[str] | None
    ) -> dict[str, Outcome]:
        frotz = self.frotz
        if frotz.victory() or frotz.game_over():
            return {}
        start = get_state(frotz)
        score = self.score_fn()
        groups: dict[Outcome, list[str]] = {}
        informative: dict[str, Outcome] = {}

        def attempt(action: str) -> tuple[str, Outcome] | None:
            set_state(frotz, start)
            reply = frotz.step(action)[0]
            if frotz._emulator_halted():
                frotz.reset()  # a runtime error in the story: only a reset clears it
                return None
            over = frotz.victory() or frotz.game_over()
            return reply, Outcome(self.hash_fn(), self.score_fn(), over)

        try:
            # The informative templates come first: a noun the parser accepts with
            # one of them is within reach, and only those fill the other templates.
            reachable: set[str] = set()
            for template in self._informative:
                for noun in nouns if "OBJ" in template else [""]:
                    tried = attempt(template.replace("OBJ", noun))
                    if tried is not None and recognized(clean(tried[0])):
                        informative[template.replace("OBJ", noun)] = tried[1]
                        reachable.add(noun)
            usable = sorted(reachable - {""})
            pairs = self._pair_templates * len(usable) * (len(usable) - 1)
            candidates = _fill(self._acting, usable, held if pairs > self.pair_budget else None)
            self.tried += len(candidates)
            for action in candidates:
                tried = attempt(action)
                if tried is None:
                    continue
                outcome = tried[1]
                if outcome.state_hash != state_hash or outcome.score != score or outcome.over:
                    groups.setdefault(outcome, []).append(action)
        finally:
            set_state(frotz, start)
        found = {min(actions, key=_name_key): outcome for outcome, actions in groups.items()}
        found.update(informative)
        return found
