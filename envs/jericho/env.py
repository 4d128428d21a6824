"""``wmkit/Jericho-v0``'s Gymnasium env; the package doc says what it does."""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections.abc import Iterable
from itertools import chain
from typing import Any, ClassVar, NamedTuple

import gymnasium
import immutables
import numpy as np
from numpy.ctypeslib import as_ctypes

try:
    import jericho
except ImportError as error:  # pragma: no cover - depends on the install
    raise ImportError("wmkit/Jericho-v0 needs jericho: pip install 'wmkit[jericho]'") from error

from wmkit.envs.diagnostic.params import check_int, check_rate
from wmkit.envs.diagnostic.truth import split_by_counterfactual
from wmkit.envs.jericho.actions import (
    QUICK_OUTCOMES,
    QUICK_TRIES,
    Candidates,
    ValidActions,
    game_templates,
    get_state,
    set_state,
)
from wmkit.envs.jericho.objects import in_scope, links
from wmkit.envs.jericho.story import (
    _ACTION_CHARSET,
    _FILE_COMMAND,
    _MIN_NAME,
    ACTION_MAX_BYTES,
    OBS_CHARSET,
    REFUSED,
    _clean,
    _entity_ids,
    _layout,
    _names,
    _parser_words,
    check_story,
    find_game,
)
from wmkit.envs.spaces import TextSpace
from wmkit.world.types import Delta, Fact, Probe, delta_info

__all__ = ["EmulatorHalted", "JerichoEnv", "JerichoToken"]

COUNTERFACTUAL = "wait"
_SET_VALUED = ("attr",)  # an object has any number of attributes, each its own slot
_MIN_SEED = 1000  # frotz: 0 seeds from the clock, 1..999 select a non-random mode
_MODES = ("quick", "candidates")  # the string values of ``admissible_actions``


class EmulatorHalted(RuntimeError):
    """The z-machine stopped with a runtime error; the episode cannot go on."""


class JerichoToken(NamedTuple):
    """A :meth:`JerichoEnv.snapshot`: everything needed to continue identically.

    Attributes:
        game: the story file the token belongs to.
        emulator: Jericho's ``get_state()`` tuple (memory, stack, registers, RNG).
        step: commands taken since reset.
        seed: the emulator seed of the episode (probes are drawn from it and the step).
        over: whether the episode had ended.
        rows: the object table (ground truth only).
        facts: the facts per object (ground truth only).
        anchors: ``{object: (step, parent)}`` of the probe anchors (ground truth only).
    """

    game: str
    emulator: tuple
    step: int
    seed: int
    over: bool
    rows: np.ndarray | None
    facts: tuple[tuple[Fact, ...], ...] | None
    anchors: immutables.Map | None


class JerichoEnv(gymnasium.Env[str, str]):
    """``wmkit/Jericho-v0``: a z-machine game as a ``gymnasium.Env[str, str]``.

    Observations are the game's text; actions are commands. Reward is the change of the
    game's score this step; ``terminated`` means won or lost; ``truncated`` means
    ``horizon`` commands were taken. Stepping on after either raises: call ``reset``.
    Info keys every step: ``admissible_actions`` (sorted), ``score``, ``max_score``,
    ``moves``; with ``admissible_actions="candidates"`` also ``action_priors``; with
    ``ground_truth=True`` also ``wm.state``, ``wm.delta``, ``wm.probes``,
    ``wm.state_hash``, ``wm.mentioned`` (module doc: what they hold).

    Args:
        game: the story file: a path, or a bare name found in ``$WMKIT_GAMES_DIR``.
        horizon: commands per episode, >= 1.
        ground_truth: add the ``wm.*`` keys to ``info``.
        admissible_actions: ``True``: the full valid-action search every step;
            ``"quick"``: the bounded one (module doc); ``"candidates"``: the
            unverified candidates, no command tried, with their prior in
            ``info["action_priors"]`` (module doc); ``False``: an empty list.
        probe_rate: probability that a where-is probe is asked at a step, 0..1.
        quick_outcomes: with ``"quick"``, stop after this many distinct world-changing
            outcomes, >= 1.
        quick_tries: with ``"quick"``, stop after this many commands tried from a
            state (the scope test included), >= 1.
        informative_actions: keep the commands that only inform (``look``,
            ``inventory``, ``examine X``) in ``admissible_actions``; False leaves them
            out where the state has a world-changing command (fewer self-loops for a
            tree search; every agent gets the same list). With ``"candidates"``,
            False leaves them out of the candidates altogether.

    Raises:
        FileNotFoundError: the game file is missing.
        ValueError: it is not a z-machine story, or a parameter is out of range.
        TypeError: a parameter has the wrong type.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        *,
        game: str | os.PathLike[str],
        horizon: int = 1000,
        ground_truth: bool = False,
        admissible_actions: bool | str = True,
        probe_rate: float = 0.1,
        quick_outcomes: int = QUICK_OUTCOMES,
        quick_tries: int = QUICK_TRIES,
        informative_actions: bool = True,
    ) -> None:
        for name, flag in (
            ("ground_truth", ground_truth),
            ("informative_actions", informative_actions),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {flag!r}")
        if not (isinstance(admissible_actions, bool) or admissible_actions in _MODES):
            raise TypeError(
                "admissible_actions must be True, False, 'quick' or 'candidates', "
                f"got {admissible_actions!r}"
            )
        check_int("quick_outcomes", quick_outcomes, 1)
        check_int("quick_tries", quick_tries, 1)
        check_int("horizon", horizon, 1)
        check_rate("probe_rate", probe_rate)
        self.game = find_game(game)
        story = check_story(self.game)
        self.horizon = int(horizon)
        self.ground_truth = ground_truth
        self.probe_rate = float(probe_rate)
        self.observation_space = TextSpace(max_length=1 << 14, min_length=0, charset=OBS_CHARSET)
        self.action_space = TextSpace(
            max_length=ACTION_MAX_BYTES, min_length=0, charset=_ACTION_CHARSET
        )

        self.frotz = jericho.FrotzEnv(str(self.game))
        """The Jericho emulator (public for benchmarks; stepping it directly desyncs us)."""
        lib = self.frotz.frotz_lib
        self._lib = lib
        self._ram = np.zeros(lib.getRAMSize(), dtype=np.uint8)
        self._ram_c = as_ctypes(self._ram)
        self._special = np.zeros(lib.get_special_ram_size(), dtype=np.uint8)
        self._special_c = as_ctypes(self._special) if self._special.size else None
        self._layout = layout = _layout(story)
        end = layout.start + layout.count * layout.entry
        if end > self._ram.size:
            raise ValueError(f"{self.game}: object table ends at {end}, past dynamic memory")
        self._table = self._ram[layout.start : end].reshape(layout.count, layout.entry)

        self.player = self.frotz.player_obj_num
        names = _names(story, layout)
        self.entity_ids = _entity_ids(names, self.player)
        """Entity id of every object, by object number (index 0 unused)."""
        self._nouns = self._noun_of(names, _parser_words(story, layout))
        self._by_name: dict[str, list[int]] = {}
        for num, name in enumerate(names):
            name = name.lower()
            if num and num != self.player and len(name) >= _MIN_NAME and name[0].isalnum():
                self._by_name.setdefault(name, []).append(num)
        alternatives = "|".join(re.escape(n) for n in sorted(self._by_name, key=len, reverse=True))
        self._mention_re = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)") if alternatives else None

        self.templates = game_templates(self.frotz)
        self._mode = admissible_actions
        quick = admissible_actions == "quick"
        self.valid_actions: ValidActions | Candidates | None = None
        """The valid-action generator: :class:`ValidActions` (``True``, ``"quick"``),
        :class:`Candidates` (``"candidates"``) or None (``False``)."""
        if admissible_actions == "candidates":
            self.valid_actions = Candidates(self.templates, informative=informative_actions)
        elif admissible_actions:
            self.valid_actions = ValidActions(
                self.frotz,
                self.templates,
                self._state_hash,
                self.frotz.get_score,
                max_outcomes=int(quick_outcomes) if quick else None,
                max_tries=int(quick_tries) if quick else None,
                informative=informative_actions,
            )
        self._max_score = 0
        self._seed = 0
        self._step = 0
        self._over = True
        self._started = False
        self._rows: np.ndarray | None = None
        self._facts: tuple[tuple[Fact, ...], ...] | None = None
        self._state_list: tuple[Fact, ...] | None = None
        self._anchors: immutables.Map | None = None

    # -- reading the tree --

    def _read_ram(self) -> None:
        self._lib.getRAM(self._ram_c)

    def _state_hash(self) -> str:
        """Hash of the object table and Jericho's world-state RAM addresses, read now."""
        self._read_ram()
        digest = hashlib.blake2b(self._table, digest_size=16)
        if self._special_c is not None:
            self._lib.get_special_ram(self._special_c)
            digest.update(self._special)
        return digest.hexdigest()

    def _links(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return ``(parent, sibling, child)`` object numbers per row (:func:`links`)."""
        return links(rows, self._layout.version)

    def _object_facts(self, rows: np.ndarray, nums: Iterable[int]) -> list[tuple[Fact, ...]]:
        ids = self.entity_ids
        parents = self._links(rows)[0]
        bits = np.unpackbits(rows[:, : self._layout.attr_bytes], axis=1)
        out = []
        for num in nums:
            i = num - 1
            subject = ids[num]
            facts = [Fact(subject, "attr", str(a)) for a in np.flatnonzero(bits[i]).tolist()]
            parent = int(parents[i])
            if 0 < parent <= self._layout.count:
                facts.append(Fact(subject, "in", ids[parent]))
            out.append(tuple(facts))
        return out

    def _noun_of(self, names: list[str], parser_words: list[list[str]]) -> list[str]:
        """Per object, one word commands can name it by; "" if there is none.

        The last short-name word among the words the parser knows it by (``"crank"``
        of "hand crank", ``"acorn"`` of "(acorn3)"); else the last of those words; for
        games that keep no such list, the last short-name word in the dictionary.
        """
        resolution = 6 if self._layout.version <= 3 else 9
        dictionary = {w.word for w in self.frotz.get_dictionary()}
        nouns = []
        for name, known in zip(names, parser_words, strict=True):
            words = re.findall(r"[a-z]+", name.lower())  # "(ball3)" is a ball
            usable = [w for w in known if w.isalpha() and len(w) > 1]
            if usable:
                in_name = [w for w in words if w[:resolution] in usable]
                nouns.append(in_name[-1] if in_name else usable[-1])
            else:
                in_dictionary = [w for w in words if len(w) > 1 and w[:resolution] in dictionary]
                nouns.append(in_dictionary[-1] if in_dictionary else "")
        return nouns

    def _scope(self, rows: np.ndarray) -> list[int]:
        """The player's room and what is in it (:func:`in_scope`)."""
        return in_scope(*self._links(rows), self.player)

    def _scope_nouns(self) -> tuple[list[str], set[str]]:
        """Nouns of the objects in scope, and of those the player carries (any depth)."""
        self._read_ram()
        rows = self._table
        scope = self._scope(rows)
        parents = self._links(rows)[0]
        held = set()
        for num in scope:
            here, depth = num, 0
            while 0 < here <= len(parents) and depth < len(parents):
                here, depth = int(parents[here - 1]), depth + 1
                if here == self.player:
                    held.add(self._nouns[num])
                    break
        return sorted({self._nouns[n] for n in scope} - {""}), held - {""}

    # -- the Gymnasium API --

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode.

        Args:
            seed: seeds ``np_random``, from which the emulator seed is drawn.
            options: ``{"walkthrough_seed": True}`` uses the seed Jericho recorded the
                game's walkthrough with instead.

        Raises:
            ValueError: an unknown option, or no walkthrough seed for this game.
        """
        super().reset(seed=seed)
        options = dict(options or {})
        walkthrough = options.pop("walkthrough_seed", False)
        if options:
            raise ValueError(f"unknown reset options {sorted(options)}; known: walkthrough_seed")
        if walkthrough:
            if "seed" not in self.frotz.bindings:
                raise ValueError(f"{self.game.name}: Jericho has no walkthrough seed for it")
            self._seed = int(self.frotz.bindings["seed"])
        else:
            self._seed = int(self.np_random.integers(_MIN_SEED, 2**31 - 1))
        # FrotzEnv.seed() replaces a falsy seed by the walkthrough's, so only a
        # walkthrough seed of 0 ever reaches it as 0: that is the substitution we want.
        self.frotz.seed(self._seed)
        observation, _ = self.frotz.reset()
        if self.frotz._emulator_halted():
            raise EmulatorHalted(f"{self.game}: the story stopped with a runtime error on reset")
        self._max_score = int(self.frotz.get_max_score())
        self._step, self._over, self._started = 0, False, True
        observation = _clean(observation)
        if not self.ground_truth:
            return observation, self._info()
        self._read_ram()
        self._rows = self._table.copy()
        self._facts = tuple(self._object_facts(self._rows, range(1, self._layout.count + 1)))
        self._state_list = None
        self._anchors = immutables.Map()
        return observation, self._info(observation, Delta(), Delta())

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send one command; returns ``(observation, reward, terminated, truncated, info)``.

        Raises:
            RuntimeError: before ``reset``, or after the episode ended.
            TypeError, ValueError: the command is not a string, has control characters
                or is longer than :data:`ACTION_MAX_BYTES` bytes.
            EmulatorHalted: the story stopped with a runtime error.

        A command that would make the story read or write files is not run; its
        observation is :data:`REFUSED` (module doc).
        """
        if self._over:
            raise RuntimeError(
                "the episode is over: call reset()"
                if self._started
                else "call reset() before step()"
            )
        if not isinstance(action, str):
            raise TypeError(f"action must be a str, got {type(action).__name__}")
        # Frotz's text front end reads a leading backslash as one of its own commands
        # (and "\\help" then loops forever); a doubled backslash is a literal one.
        command = action.replace("\\", "\\\\")
        if not command.isprintable() or len(command.encode()) > ACTION_MAX_BYTES:
            raise ValueError(
                f"action must be one line of printable text of at most {ACTION_MAX_BYTES} "
                f"bytes (a backslash counts twice), got {action!r:.80}"
            )
        lower = command.lower()
        # Substring tests first: they cost a fraction of the regex on every step.
        if (
            "sav" in lower
            or "restor" in lower
            or "script" in lower
            or "recor" in lower
            or "repla" in lower
        ) and _FILE_COMMAND.search(lower):
            return self._refuse()
        waited = self._counterfactual() if self.ground_truth else None
        observation, reward, done, counters = self.frotz.step(command)
        if self.frotz._emulator_halted():
            self._over = True
            raise EmulatorHalted(
                f"{self.game}: the story stopped with a runtime error after {action!r} "
                f"at step {self._step + 1}"
            )
        self._step += 1
        terminated = bool(done)
        truncated = not terminated and self._step >= self.horizon
        self._over = terminated or truncated
        observation = _clean(observation)
        if not self.ground_truth:
            return observation, float(reward), terminated, truncated, self._info(counters=counters)
        action_delta, event_delta = self._advance(waited)
        info = self._info(observation, action_delta, event_delta, counters)
        return observation, float(reward), terminated, truncated, info

    def _refuse(self) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Answer a file command without running it: a spent move, nothing changes."""
        self._step += 1
        truncated = self._step >= self.horizon
        self._over = truncated
        info = self._info(REFUSED, Delta(), Delta()) if self.ground_truth else self._info()
        return REFUSED, 0.0, False, truncated, info

    def snapshot(self) -> JerichoToken:
        """Return a token to :meth:`restore` this exact point of the episode from."""
        if not self._started:
            raise RuntimeError("call reset() before snapshot()")
        return JerichoToken(
            str(self.game),
            get_state(self.frotz),
            self._step,
            self._seed,
            self._over,
            self._rows,
            self._facts,
            self._anchors,
        )

    def restore(self, token: JerichoToken) -> None:
        """Continue from a :meth:`snapshot` token of this game.

        Raises:
            TypeError: ``token`` is not a :class:`JerichoToken`.
            ValueError: it belongs to another game, or ground truth was off when taken.
        """
        if not isinstance(token, JerichoToken):
            raise TypeError(f"restore() needs a JerichoToken, got {type(token).__name__}")
        if token.game != str(self.game):
            raise ValueError(f"token is from {token.game}, this env plays {self.game}")
        if self.ground_truth and token.rows is None:
            raise ValueError("token was taken without ground truth; this env needs it")
        set_state(self.frotz, token.emulator)
        self._step, self._seed, self._over, self._started = token.step, token.seed, token.over, True
        self._rows, self._facts, self._anchors = token.rows, token.facts, token.anchors
        self._state_list = None
        self._max_score = int(self.frotz.get_max_score())

    def state_hash(self) -> str:
        """The hash of the current game state (``wm.state_hash``), ground truth on or off.

        The object table and Jericho's world-state RAM, as the module doc says; the move
        counter is left out. It identifies the state the way a :meth:`snapshot` would, so
        a planner may use it as a transposition key without reading ground truth.

        Raises:
            RuntimeError: before :meth:`reset`.
        """
        if not self._started:
            raise RuntimeError("call reset() before state_hash()")
        return self._state_hash()

    def close(self) -> None:
        """Free the emulator's memory; the env cannot be used afterwards."""
        self.frotz.close()
        self._over, self._started = True, False

    # -- ground truth --

    def _counterfactual(self) -> np.ndarray:
        """Object table after ``wait`` from the current state; the state is then put back."""
        start = get_state(self.frotz)
        self.frotz.step(COUNTERFACTUAL)
        self._read_ram()
        rows = self._table.copy()
        set_state(self.frotz, start)
        return rows

    def _advance(self, waited: np.ndarray) -> tuple[Delta, Delta]:
        """Update the facts to the emulator's state; return the action and event deltas.

        The split is :func:`~wmkit.envs.diagnostic.truth.split_by_counterfactual`'s, by
        slot (each attribute its own slot), against the ``wait`` run's table ``waited``.
        """
        before, facts = self._rows, self._facts
        self._read_ram()
        rows = self._table.copy()
        changed = np.flatnonzero((rows != before).any(axis=1)) + 1
        if changed.size == 0:
            self._rows = rows
            return Delta(), Delta()
        nums = changed.tolist()
        new = self._object_facts(rows, nums)
        old = [facts[num - 1] for num in nums]
        # Only the rows waiting changed too can differ from ``old`` in the wait run.
        moved = set((np.flatnonzero((waited != before).any(axis=1)) + 1).tolist())
        both = [num for num in nums if num in moved]
        waited_facts = dict(zip(both, self._object_facts(waited, both), strict=True))
        action, event = split_by_counterfactual(
            chain.from_iterable(old),
            chain.from_iterable(new),
            chain.from_iterable(waited_facts.get(n, o) for n, o in zip(nums, old, strict=True)),
            _SET_VALUED,
        )
        updated = list(facts)
        for num, after in zip(nums, new, strict=True):
            updated[num - 1] = after
        self._rows, self._facts, self._state_list = rows, tuple(updated), None
        return action, event

    def _mentioned(self, observation: str) -> set[int]:
        if self._mention_re is None:
            return set()
        named = {m.group() for m in self._mention_re.finditer(observation.lower())}
        found: set[int] = set()
        scope: set[int] | None = None
        for name in named:
            nums = self._by_name[name]
            if len(nums) > 1:
                if scope is None:
                    scope = set(self._scope(self._rows))
                near = [n for n in nums if n in scope]
                nums = near or nums
            found.update(nums)
        return found

    def _info(
        self,
        observation: str = "",
        action_delta: Delta | None = None,
        event_delta: Delta | None = None,
        counters: dict[str, int] | None = None,
    ) -> dict[str, Any]:
        if counters is None:
            counters = {"score": self.frotz.get_score(), "moves": self.frotz.get_moves()}
        supported = self.frotz.is_fully_supported
        state_hash = self._state_hash() if self.ground_truth or self.valid_actions else ""
        actions, priors = self._admissible(state_hash)
        info: dict[str, Any] = {"admissible_actions": actions}
        if priors is not None:
            info["action_priors"] = priors
        info["score"] = int(counters["score"])
        info["max_score"] = self._max_score
        info["moves"] = int(counters["moves"]) if supported else self._step
        if not self.ground_truth:
            return info
        ids, step = self.entity_ids, self._step
        parents = self._links(self._rows)[0]
        mentioned = self._mentioned(observation)
        anchored = set(mentioned)
        if 0 < self.player <= len(parents) and int(parents[self.player - 1]) in mentioned:
            anchored.add(self.player)
        with self._anchors.mutate() as anchors:
            for num in anchored:
                anchors[num] = (step, int(parents[num - 1]))
            self._anchors = anchors.finish()
        if self._state_list is None:  # sorted once per change of the tree
            self._state_list = tuple(sorted(chain.from_iterable(self._facts)))
        info["wm.state"] = list(self._state_list)
        info["wm.delta"] = delta_info(action_delta or Delta(), event_delta or Delta())
        info["wm.probes"] = self._probes(parents)
        info["wm.state_hash"] = state_hash
        info["wm.mentioned"] = sorted(ids[n] for n in mentioned)
        return info

    def _probes(self, parents: np.ndarray) -> list[Probe]:
        step = self._step
        rng = random.Random(self._seed * 1_000_003 + step)
        if step == 0 or rng.random() >= self.probe_rate:
            return []
        due = sorted(
            num
            for num, (anchor, parent) in self._anchors.items()
            if anchor < step and parent and int(parents[num - 1]) == parent
        )
        if not due:
            return []
        num = rng.choice(due)
        anchor, parent = self._anchors[num]
        return [Probe(self.entity_ids[num], "in", self.entity_ids[parent], anchor, "breakage")]

    def _admissible(self, state_hash: str) -> tuple[list[str], list[float] | None]:
        """The state's ``admissible_actions``, and their ``action_priors`` (candidates only)."""
        candidates = self._mode == "candidates"
        if self.valid_actions is None or self._over:
            return [], [] if candidates else None
        if candidates:  # the scope is read only when the state is not cached
            actions, priors = self.valid_actions.propose(state_hash, self._scope_nouns)
            return list(actions), list(priors)
        return self.valid_actions(state_hash, *self._scope_nouns()), None
