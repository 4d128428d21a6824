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
  of Jericho's "not understood" patterns). With ``informative=False`` these are left
  out whenever the state has a world-changing command: they lead back to the state
  they start from, and a tree search that proposes them spends most of its
  simulations there (76% of the root's visits on snacktime.z8 at 16 simulations).

Order and limits. Candidates are tried movement first (Jericho's basic actions), then
the templates with at most one noun, then the two-noun ones, each part by the verb's
ClubFloyd usage count (most used first; template order, then noun order, on ties). The
full generator tries them all, so its result does not depend on the order. A quick
generator (``max_outcomes=K``, ``max_tries=T``) stops once K distinct world-changing
outcomes are found or T commands were tried, the scope test included: a state then
costs at most T tries instead of every candidate (~1,400 on 905.z5, ~5,000 on
acorncourt.z5 and lostpig.z8, at 0.3-4 ms a try). It tries some of the full
generator's candidates from the same state (a prefix of the same order; fewer nouns
when T cuts the scope test short, and then only the pairs with a carried noun), so its
outcomes are a subset of the full generator's; an outcome may be named by another of
its commands than the full one picks (the best named of those tried). On the first ten
walkthrough states of seven games (balances, acorncourt, night, jewel, lostpig,
snacktime, loose: 73 states), this order with T=300 reached the outcome of 51 of the
60 world-changing walkthrough commands whose outcome the full generator reaches, and
all 9 scoring ones; Jericho's template order reached 33 and 7 (at T=200: 48 and 6
against 24 and 3).

Results are cached by state hash, so revisiting a state costs a dictionary lookup.

Candidates without trying (:class:`Candidates`). In a tree search, the generators
above are 98.8-99.9% of the wall time: every new state pays its tries up front, for
children most of which are never expanded. :class:`Candidates` tries nothing: a
state's list is every template filled with every noun in scope (no scope test: the
nouns the parser would reject stay in), two-noun templates as above (every pair within
``pair_budget``, past it the pairs with a carried noun), ``look`` and ``inventory``
included, sorted, with a prior per command. A search tries them in prior order and
drops those that step into the state they came from (same state hash, no reward): the
filtering, paid only for the children it expands.

The prior is counted (:func:`prior_weight`): ``(u + 1) * factor``, ``u`` the ClubFloyd
usage count of the command's verb, factor :data:`PRIOR_BASIC` (100) for Jericho's basic
actions (the moves, ``enter``, ``exit``, ``take all``), :data:`PRIOR_PAIR` (0.01) for a
two-noun command and :data:`PRIOR_INFORM` (1e-7) for the commands that only look (verb
``look``, ``examine``, ``inventory`` or their short forms, any preposition): basic
actions above all, then by usage, two-noun commands below the one-noun ones of their
verb, the looking ones last. Normalised over the state's list, a command made by two
templates takes the larger weight. Measured on the first 25 walkthrough states of the
27 free games with a walkthrough (534 world-changing walkthrough commands, 492 of them
reached by some candidate): the first candidate reaching the walkthrough's outcome, in
prior order, has median rank 7 (geometric mean 15, mean 293), and is within the first
16 / 50 / 100 / 300 candidates for 59% / 72% / 80% / 87% of them, against 55% / 66% /
76% / 89% (median 10) for the quick generator's try order over the same lists, 26% /
39% / 50% / 68% (median 102) for the usage count alone and 7% / 12% / 18% / 34%
(median 611) for the sorted order. ``take all`` among the basic actions gives median 7
instead of 10; the looking commands last rather than at a tenth of their usage cost
one point within 100 and two within 300 (world-changing ones such as examining
balances.z5's spell scrolls); a two-noun factor of 0.1 changes no share, 1 (no factor)
loses 8 points within 50 and 13 within 100; the exponent of ``u + 1`` (0.5, 1 or 2)
changes no share by more than one point, so it is 1.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

import numpy as np
from jericho import defines
from jericho.util import clean, recognized, verb_usage_count

__all__ = [
    "GENERIC_TEMPLATES",
    "INFO_VERBS",
    "PRIOR_BASIC",
    "PRIOR_INFORM",
    "PRIOR_PAIR",
    "QUICK_OUTCOMES",
    "QUICK_TRIES",
    "Candidates",
    "Outcome",
    "ValidActions",
    "game_templates",
    "get_state",
    "prior_weight",
    "set_state",
]

QUICK_OUTCOMES = 16
"""Default ``quick_outcomes``: distinct world-changing outcomes after which the quick
valid-action search stops."""

QUICK_TRIES = 300
"""Default ``quick_tries``: commands the quick valid-action search tries per state at most."""

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


class _StateCache(OrderedDict):
    """What was found for each state hash, the least recently used dropped past ``size``."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"cache_size must be >= 1, got {size}")
        super().__init__()
        self.size = size

    def get_or_make(self, state_hash: str, make: Callable[[], Any]) -> Any:
        """The entry of ``state_hash``, made by ``make()`` and kept when it is not there."""
        found = self.get(state_hash)
        if found is not None:
            self.move_to_end(state_hash)
            return found
        found = self[state_hash] = make()
        if len(self) > self.size:
            self.popitem(last=False)
        return found


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
    Its meta list names ``hint`` but not a game's own hint verbs: those (any verb with
    "hint" in it) are dropped too, since night.z5's ``allhints`` opens a menu that
    swallows every later command. Games without bindings (unsupported or TextWorld) get
    :data:`GENERIC_TEMPLATES`.
    """
    templates = frotz.act_gen.templates if frotz.act_gen is not None else GENERIC_TEMPLATES
    kept = (t for t in (*templates, "look", "inventory") if "hint" not in t.split()[0])
    return tuple(dict.fromkeys(kept))


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


_MOVES = frozenset(defines.BASIC_ACTIONS) - {"take all"}


def _try_order(templates: Sequence[str]) -> list[str]:
    """Return the templates in the order candidates are tried (module doc).

    Movement first, then templates with at most one noun, then two-noun ones, each by
    ClubFloyd verb usage, most used first; the sort is stable, so ties keep the game's
    template order.
    """
    return sorted(
        templates,
        key=lambda t: (t not in _MOVES, t.count("OBJ") > 1, -verb_usage_count(t)),
    )


PRIOR_BASIC = 100.0
"""Prior factor of Jericho's basic actions (movement, ``enter``, ``exit``, ``take all``)."""

PRIOR_PAIR = 0.01
"""Prior factor of a two-noun command."""

PRIOR_INFORM = 1e-7
"""Prior factor of a command that only looks (its verb is ``look``, ``examine``,
``inventory`` or a short form): below every other command."""


def prior_weight(template: str) -> float:
    """Return the unnormalised prior of every command ``template`` makes (module doc).

    ``(u + 1) * factor``, ``u`` the ClubFloyd usage count of the template's verb (its
    first word): :data:`PRIOR_BASIC` for Jericho's basic actions, else
    :data:`PRIOR_PAIR` with two nouns and :data:`PRIOR_INFORM` for the commands that
    only look. The factors keep three tiers apart whatever the counts: every basic
    action above every other command (``exit``, the least used, makes 16,700; no verb
    but ``examine``, a looking one, is counted more than ``north``'s 11,613 times)
    and the commands that only look below every other (``examine``, the most used of
    all, makes 0.004; a two-noun command of an unknown verb 0.01).
    """
    weight = float(verb_usage_count(template) + 1)
    if template in defines.BASIC_ACTIONS:
        return weight * PRIOR_BASIC
    if template.count("OBJ") > 1:
        weight *= PRIOR_PAIR
    if template.split()[0] in INFO_VERBS:
        weight *= PRIOR_INFORM
    return weight


class Candidates:
    """The unverified candidate commands of a state, with a counted prior (module doc).

    No command is tried: the candidates are the templates filled with the nouns in
    scope as :class:`ValidActions` fills them (two-noun templates with every pair
    within ``pair_budget``, past it only the pairs with a carried noun), ``look`` and
    ``inventory`` included. A search is to try them in prior order and drop the ones
    that step into the state they came from (the same state hash, no reward): the
    filtering :class:`ValidActions` pays for up front, paid per child expanded.

    Results are cached by state hash (least recently used dropped first), so a search
    stepping a command that changes nothing gets the list back from the cache.

    Args:
        templates: action templates, ``OBJ`` per noun (see :func:`game_templates`).
        cache_size: states remembered.
        pair_budget: most two-noun candidates made with every pair (as in
            :class:`ValidActions`).
        informative: keep the commands that only inform (``look``, ``inventory``,
            ``examine X``); False leaves them out (the movement commands remain).

    Raises:
        ValueError: a size or budget is out of range.
        TypeError: ``informative`` is not a bool.
    """

    tried = 0
    """Commands tried: always 0 (the cost counter :class:`ValidActions` keeps)."""

    def __init__(
        self,
        templates: Sequence[str],
        cache_size: int = 4096,
        pair_budget: int = 5000,
        informative: bool = True,
    ) -> None:
        if pair_budget < 0:
            raise ValueError(f"pair_budget must be >= 0, got {pair_budget}")
        if not isinstance(informative, bool):
            raise TypeError(f"informative must be a bool, got {informative!r}")
        self.informative = informative
        self.templates = tuple(t for t in templates if informative or not _informs(t))
        self._weights = tuple((t, prior_weight(t)) for t in self.templates)
        self._pair_templates = sum(t.count("OBJ") == 2 for t in self.templates)
        self.cache_size = cache_size
        self.pair_budget = pair_budget
        self._cache = _StateCache(cache_size)

    def propose(
        self, state_hash: str, scope: Callable[[], tuple[Sequence[str], Collection[str] | None]]
    ) -> tuple[tuple[str, ...], tuple[float, ...]]:
        """Return the state's candidates (sorted) and their priors (aligned, summing to 1).

        Args:
            state_hash: the current state's hash, the cache key.
            scope: returns the nouns in scope and those of what the player carries
                (None: every pair, whatever the budget); called only when the state
                is not cached.
        """
        return self._cache.get_or_make(state_hash, lambda: self._fill(*scope()))

    def __call__(
        self, state_hash: str, nouns: Sequence[str], held: Collection[str] | None = None
    ) -> list[str]:
        """Return the candidates of the current state, sorted (arguments: :class:`ValidActions`)."""
        return list(self.propose(state_hash, lambda: (nouns, held))[0])

    def _fill(
        self, nouns: Sequence[str], held: Collection[str] | None
    ) -> tuple[tuple[str, ...], tuple[float, ...]]:
        nouns = sorted(set(nouns) - {""})
        pairs = self._pair_templates * len(nouns) * (len(nouns) - 1)
        restrict = held if pairs > self.pair_budget else None
        weights: dict[str, float] = {}
        for template, weight in self._weights:
            for action in _fill((template,), nouns, restrict):
                if weights.get(action, 0.0) < weight:  # two templates, one command
                    weights[action] = weight
        actions = tuple(sorted(weights))
        total = math.fsum(weights.values())
        return actions, tuple(weights[a] / total for a in actions)


def _limit(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1 (or None for no limit), got {value}")
    return value


class ValidActions:
    """Finds the valid actions of the state a ``jericho.FrotzEnv`` is in (rule: module doc).

    With ``max_outcomes`` or ``max_tries`` set it is a quick generator: it stops early
    (module doc, "Order and limits") and returns a subset of the full one's outcomes.

    Args:
        frotz: the loaded emulator; it is left in the state it was found in.
        templates: action templates, ``OBJ`` per noun (see :func:`game_templates`).
        hash_fn: returns the current world-state hash (a string).
        score_fn: returns the current score.
        cache_size: states remembered (least recently used dropped first).
        pair_budget: most two-noun candidates tried with every pair (see module doc).
        max_outcomes: stop once this many distinct world-changing outcomes are found
            (None: no limit).
        max_tries: stop once this many commands were tried from a state, the scope
            test included (None: no limit).
        informative: keep the commands that only inform (module doc); False keeps them
            only where no command changes the world (the list is never empty for that).

    Raises:
        TypeError: a limit is not an int (or None).
        ValueError: a size, budget or limit is out of range.
    """

    def __init__(
        self,
        frotz: Any,
        templates: Sequence[str],
        hash_fn: Callable[[], str],
        score_fn: Callable[[], int],
        cache_size: int = 4096,
        pair_budget: int = 5000,
        max_outcomes: int | None = None,
        max_tries: int | None = None,
        informative: bool = True,
    ) -> None:
        if pair_budget < 0:
            raise ValueError(f"pair_budget must be >= 0, got {pair_budget}")
        self.max_outcomes = _limit("max_outcomes", max_outcomes)
        self.max_tries = _limit("max_tries", max_tries)
        if not isinstance(informative, bool):
            raise TypeError(f"informative must be a bool, got {informative!r}")
        self.informative = informative
        self.frotz = frotz
        self.templates = tuple(templates)
        self._informative = tuple(t for t in self.templates if _informs(t))
        if not any("OBJ" in t for t in self._informative):
            self._informative += ("examine OBJ",)  # the scope test needs one
        self._acting = tuple(_try_order([t for t in self.templates if not _informs(t)]))
        self._pair_templates = sum(t.count("OBJ") == 2 for t in self._acting)
        self.hash_fn = hash_fn
        self.score_fn = score_fn
        self.cache_size = cache_size
        self.pair_budget = pair_budget
        self._cache = _StateCache(cache_size)
        self.tried = 0
        """Commands tried so far, scope tests included (cache misses only): a cost counter."""

    @property
    def quick(self) -> bool:
        """Whether a limit is set (the generator may stop before trying every candidate)."""
        return self.max_outcomes is not None or self.max_tries is not None

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
        return self._cache.get_or_make(state_hash, lambda: self._search(state_hash, nouns, held))

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
        tries = self.max_tries if self.max_tries is not None else math.inf
        outcomes = self.max_outcomes if self.max_outcomes is not None else math.inf
        tried = 0

        def attempt(action: str) -> tuple[str, Outcome] | None:
            nonlocal tried
            tried += 1
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
            scope = [
                (noun, template.replace("OBJ", noun))
                for template in self._informative
                for noun in (nouns if "OBJ" in template else [""])
            ]
            for noun, action in scope:
                if tried >= tries:
                    break
                result = attempt(action)
                if result is not None and recognized(clean(result[0])):
                    informative[action] = result[1]
                    reachable.add(noun)
            usable = sorted(reachable - {""})
            pairs = self._pair_templates * len(usable) * (len(usable) - 1)
            # A scope test cut short by max_tries knows fewer nouns than the full one:
            # its smaller pair count must not lift the pair budget the full generator
            # applies, or it could try pairs the full one leaves out.
            cut = tried < len(scope)
            restrict = pairs > self.pair_budget or cut
            candidates = _fill(self._acting, usable, held if restrict else None)
            for action in candidates:
                if tried >= tries or len(groups) >= outcomes:
                    break
                result = attempt(action)
                if result is None:
                    continue
                outcome = result[1]
                if outcome.state_hash != state_hash or outcome.score != score or outcome.over:
                    groups.setdefault(outcome, []).append(action)
        finally:
            self.tried += tried
            set_state(frotz, start)
        found = {min(actions, key=_name_key): outcome for outcome, actions in groups.items()}
        if self.informative or not found:
            found.update(informative)
        return found
