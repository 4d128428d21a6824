"""``wmkit/TextWorld-v0``: generated TextWorld games with their logic state as ground truth.

A game is either made by ``tw-make`` from a challenge and its options (cached on disk by
those options, see ``wmkit.envs.twgames``) or given as an existing TextWorld ``.z8``
with its ``.json`` beside it. The generation seed is one of the options, so it names the
game (map, objects, quest, text); ``reset(seed=...)`` seeds the episode: the z-machine's
random generator (TextWorld games reseed it themselves when play begins, so in practice
the text does not change) and the probe schedule.

Engine. We drive the compiled game with Jericho's ``FrotzEnv`` directly and keep
TextWorld's logic state ourselves, the way TextWorld's ``TWInform7`` wrappers do: the
game prints an Inform 7 trace of every action that succeeded (``tw-trace-actions``) and
its score (``tw-extra-infos score``); each traced action is matched against the actions
valid in the logic state (``Inform7Game.detect_action``) and applied to it. The logic
state is an immutable set of TextWorld ``Proposition``; what is derived from it (valid
actions, admissible commands, facts, hash) is computed once per distinct state and kept
in a bounded cache, so search that revisits states pays for it once. A snapshot is the
emulator's ``get_state()`` plus our immutable turn record: restore is exact (text, facts,
score, anchors) and costs two memory copies, where TextWorld's ``copy()`` rebuilds the
wrapper stack.

Facts. Entity ids are the entities' names in lower case (``"wooden door"``), the player
is ``player`` and the inventory ``inventory``; an entity without a name keeps its
TextWorld id (``recipe``); two entities sharing a name get ``"name (id)"``. A
proposition becomes facts by its arity:

==========================  ============================================================
TextWorld                   wmkit facts
==========================  ============================================================
``at(P, r)``                ``("player", "at", "kitchen")``
``p(a, b)``                 ``(a, p, b)``: ``in(o, c)``, ``on(o, s)``, ``in(o, I)`` ->
                            ``("old key", "in", "inventory")``, ``north_of(r1, r2)``,
                            ``free(r1, r2)``, ``match(k, d)``, ...
``open|closed|locked(x)``   ``(x, "state", "open")`` (one of the three)
``uncut|sliced|...(f)``     ``(f, "cut", "sliced")``: uncut, sliced, chopped, diced
``raw|roasted|...(f)``      ``(f, "cooking", "fried")``: raw, roasted, fried, grilled
other ``p(x)``              ``(x, p, "true")``: ``edible``, ``cooked``, ``consumed``, ...
``link(r1, d, r2)``         ``(d, "link", r1)`` and ``(d, "link", r2)``
==========================  ============================================================

Every object is in exactly one of ``at``/``in``/``on``: its location.

Ground truth (``ground_truth=True``): ``wm.state`` (sorted facts), ``wm.delta``
(TextWorld has no daemons or timers: every change is caused by the command, so the
``event`` part is always empty), ``wm.state_hash`` (16 hex digits over the facts, score
and won/lost, not the step: equal states at different steps share it),
``wm.mentioned`` (entities whose name appears in the observation, case-insensitive,
whole words; ``player`` when it names the player's room) and ``wm.probes``.

Probes ask where an object is (its ``at``/``in``/``on`` fact). An object gets an anchor
when the text names it while the player can see it (it is in the player's room or
inventory, not inside a closed container); a probe's ``anchor_step`` is the last such
step. An object moved without being seen loses its anchor until seen again. At each
step after reset, with probability ``probe_rate``, one or two anchored objects are
asked about: kind ``drift`` when the object is in view now, ``breakage`` when the answer
must be remembered.

Rewards are the change of the game's score at each step (TextWorld's gym layer returns
the cumulative score; we do not). ``terminated`` when the game is won or lost,
``truncated`` at ``horizon`` steps. Meta commands that would desynchronise the emulator
from the logic state or stop it (``quit``, ``restart``, ``restore``, ``save``, ``undo``,
``script``, TextWorld's ``tw-*`` debug commands) are answered by the env and not sent.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import string
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import gymnasium
import immutables
import jericho
import numpy as np
import textworld
from textworld.generator.inform7 import Inform7Game
from textworld.logic import Action, Proposition, State

from wmkit.envs import twgames
from wmkit.envs.diagnostic.params import check_int, check_rate
from wmkit.envs.spaces import TextSpace
from wmkit.world.types import Delta, Fact, Probe, delta_info

__all__ = ["FAMILIES", "LOCATIONS", "TextWorldEnv", "TextWorldSnapshot"]

FAMILIES = {
    "open": "state",
    "closed": "state",
    "locked": "state",
    "uncut": "cut",
    "sliced": "cut",
    "chopped": "cut",
    "diced": "cut",
    "raw": "cooking",
    "roasted": "cooking",
    "fried": "cooking",
    "grilled": "cooking",
}
"""Mutually exclusive unary predicates -> the relation that holds them as its object."""

LOCATIONS = ("at", "in", "on")
"""The relations that place an object; each object has exactly one."""

_MAX_COMMAND = 190  # Jericho truncates input at 198 bytes, with a warning.
_OBS_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"
_ACT_CHARSET = string.ascii_letters + string.digits + string.punctuation + " "
_OBS_CHARS = frozenset(_OBS_CHARSET)
_OBS_MAX = 2**16
_CACHE_NODES = 2048  # distinct logic states kept per env (tens of kB each)

_TRACE = re.compile(r"\[([^\]]*)\]\n?")  # [opening the chest - succeeded]
_INFO = re.compile(r"<(score|moves)>\n?(.*?)</\1>", re.S)  # from tw-extra-infos
_STATUS = re.compile(r" {20,}[^\n]*\Z")  # the status line trails the prompt
_BLANKS = re.compile(r"\n{3,}")
_SENTENCES = re.compile(r"[.,;!?]|\bthen\b")
_META = frozenset(
    {"quit", "q", "restart", "restore", "save", "undo", "script", "unscript", "transcript"}
)
_WON, _LOST = "*** The End ***", "*** You lost! ***"


class _Node:
    """Everything derived from one logic state; built once per distinct state."""

    __slots__ = (
        "_events", "actions", "admissible", "digest", "fact_set", "facts", "open", "props", "where"
    )  # fmt: skip

    def __init__(self, env: TextWorldEnv, props: frozenset[Proposition]) -> None:
        kb = env._game.kb
        self.props = props
        state = State(kb.logic, props)
        self.actions: list[Action] = list(
            state.all_applicable_actions(kb.rules.values(), kb.types.constants_mapping)
        )
        self.admissible = tuple(sorted(set(env._inform7.gen_commands_from_actions(self.actions))))
        facts = {f for prop in props for f in _facts(prop, env._ids)}
        self.fact_set = frozenset(facts)
        self.facts = tuple(sorted(facts))
        raw = "\n".join("\t".join(f) for f in self.facts).encode()
        self.digest = hashlib.blake2b(raw, digest_size=8).digest()
        self.where = {f.subject: (f.relation, f.object) for f in facts if f.relation in LOCATIONS}
        self.open = frozenset(f.subject for f in facts if f[1:] == ("state", "open"))
        self._events: dict[str, Action | None] = {}

    def detect(self, event: str, inform7: Inform7Game) -> Action | None:
        """Return the valid action an Inform 7 trace names, or None (memoised)."""
        if event not in self._events:
            self._events[event] = inform7.detect_action(event, self.actions)
        return self._events[event]

    def visible(self, entity: str) -> bool:
        """Whether the player can see ``entity``: in their room or inventory, not shut in."""
        room = self.where.get("player", ("", ""))[1]
        for _ in range(16):  # containment depth; TextWorld nests a level or two
            relation, parent = self.where.get(entity, ("", ""))
            if relation == "at" or not relation:
                return relation == "at" and parent == room
            if parent == "inventory":
                return True
            if relation == "in" and parent not in self.open:
                return False
            entity = parent
        return False


def _facts(prop: Proposition, ids: dict[str, str]) -> tuple[Fact, ...]:
    args = [ids.get(v.name, v.name.lower()) for v in prop.arguments]
    name = prop.name
    if len(args) == 1:
        family = FAMILIES.get(name)
        return (Fact(args[0], family, name) if family else Fact(args[0], name, "true"),)
    if len(args) == 2:
        return (Fact(args[0], name, args[1]),)
    if len(args) == 3:  # link(r1, d, r2): the middle entity joins the outer two
        return (Fact(args[1], name, args[0]), Fact(args[1], name, args[2]))
    return (Fact("world", name, ",".join(args)),)


class _Turn(NamedTuple):
    """The episode after one step: immutable, the Python half of a snapshot."""

    seed: int
    step: int
    node: _Node
    score: int
    won: bool
    lost: bool
    observation: str
    mentioned: tuple[str, ...]
    delta: Delta
    probes: tuple[Probe, ...]
    seen: immutables.Map  # entity -> step of the last observation that showed it


class TextWorldSnapshot(NamedTuple):
    """A ``snapshot()`` token: the game file, the emulator state and the turn record."""

    game: str
    frotz: tuple
    turn: _Turn


class TextWorldEnv(gymnasium.Env[str, str]):
    """``wmkit/TextWorld-v0``: a TextWorld game as a ``gymnasium.Env[str, str]``.

    Info every step: ``admissible_actions`` (sorted commands the game's logic accepts
    here), ``score``, ``max_score`` (-1 if unbounded) and ``moves`` (steps since reset,
    every command counted). With ``ground_truth=True`` also the ``wm.*`` keys (see the
    module docs); without it none.

    Args:
        challenge: ``"simple"`` (default), ``"cooking"``, ``"coin_collector"``,
            ``"treasure_hunter"`` or ``"custom"``; not with ``game``.
        options: ``tw-make`` options of the challenge, e.g. ``{"level": 3, "seed": 7}``
            (the seed names the game; default 0); not with ``game``.
        game: path of an existing TextWorld ``.z8`` (its ``.json`` beside it) to play
            instead of generating one.
        horizon: steps per episode, >= 1 (default 100).
        ground_truth: add the ``wm.*`` keys to ``info``.
        probe_rate: probability that probes are due at a step, in [0, 1].
        cache_dir: where generated games are kept (default: ``$WMKIT_CACHE_DIR/
            textworld`` or ``~/.cache/wmkit/textworld``).
        timeout: seconds game generation may take.

    Raises:
        TypeError, ValueError: a bad argument or option (the message names it).
        FileNotFoundError: ``game`` or its ``.json`` does not exist.
        wmkit.envs.twgames.GameGenerationError: ``tw-make`` failed or timed out.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(
        self,
        *,
        challenge: str | None = None,
        options: dict[str, Any] | None = None,
        game: str | os.PathLike[str] | None = None,
        horizon: int = 100,
        ground_truth: bool = False,
        probe_rate: float = 0.3,
        cache_dir: str | os.PathLike[str] | None = None,
        timeout: float = 600.0,
    ) -> None:
        if not isinstance(ground_truth, bool):
            raise TypeError(f"ground_truth must be a bool, got {ground_truth!r}")
        check_int("horizon", horizon, 1)
        check_rate("probe_rate", probe_rate)
        if game is not None:
            if challenge is not None or options:
                raise ValueError("give either game= or challenge=/options=, not both")
            self.game_file = _check_game_file(game)
        else:
            self.game_file = twgames.make_game(
                challenge or "simple", options, cache_dir=cache_dir, timeout=timeout
            )
        self.horizon = int(horizon)
        self.ground_truth = ground_truth
        self.probe_rate = float(probe_rate)

        self._game = textworld.Game.load(str(self.game_file.with_suffix(".json")))
        self._inform7 = Inform7Game(self._game)
        self._ids = _entity_ids(self._game)
        self._mention, self._mention_ids = _mentions(self._game, self._ids)
        max_score = self._game.max_score
        self.max_score = int(max_score) if np.isfinite(max_score) else -1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", jericho.UnsupportedGameWarning)
            self._frotz = jericho.FrotzEnv(str(self.game_file), seed=1)
        self._nodes: OrderedDict[frozenset[Proposition], _Node] = OrderedDict()
        self._root = self._node(frozenset(self._game.world.state.facts))
        self._turn: _Turn | None = None

        self.observation_space = TextSpace(
            max_length=_OBS_MAX, min_length=0, charset=_OBS_CHARSET
        )
        self.action_space = TextSpace(max_length=_MAX_COMMAND, min_length=0, charset=_ACT_CHARSET)

    @property
    def walkthrough(self) -> list[str]:
        """The game's winning commands from the start (TextWorld's ``Game.walkthrough``)."""
        return list(self._game.walkthrough or [])

    # -- Gymnasium API --

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; ``options`` is accepted and unused."""
        super().reset(seed=seed)
        # >= 1: Jericho replaces a seed of 0 with a time-based one.
        episode_seed = int(self.np_random.integers(1, 2**31 - 1))
        self._frotz.seed(episode_seed)
        raw, _ = self._frotz.reset()
        self._frotz.step("tw-trace-actions")
        _, _, score = _parse(self._frotz.step("tw-extra-infos score")[0])
        text, _, _ = _parse(raw)
        blank = _Turn(
            seed=episode_seed, step=0, node=self._root, score=score or 0, won=False,
            lost=False, observation="", mentioned=(), delta=Delta(), probes=(),
            seen=immutables.Map(),
        )  # fmt: skip
        self._turn = self._settle(blank, text, self._root, blank.score)
        return self._turn.observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Send a command; returns ``(observation, reward, terminated, truncated, info)``.

        Raises:
            RuntimeError: before ``reset()`` or after the episode ended.
            TypeError: ``action`` is not a string.
        """
        prev = self._turn
        if prev is None:
            raise RuntimeError("call reset() before step()")
        if prev.won or prev.lost:
            raise RuntimeError("the game is over; call reset()")
        if not isinstance(action, str):
            raise TypeError(f"action must be a str, got {type(action).__name__}")
        command = _clean_command(action)
        node, score = prev.node, prev.score
        meta = _meta_word(command)
        if meta is not None:
            text = f'The command "{meta}" is not available in this environment.'
        else:
            text, events, new_score = _parse(self._frotz.step(command)[0])
            score = prev.score if new_score is None else new_score
            for event in events:
                found = node.detect(event, self._inform7)
                if found is not None:
                    node = self._node((node.props - found.removed) | found.added)
        turn = prev._replace(step=prev.step + 1, won=_WON in text, lost=_LOST in text)
        self._turn = self._settle(turn, text, node, score, before=prev.node)
        terminated = self._turn.won or self._turn.lost
        truncated = not terminated and self._turn.step >= self.horizon
        reward = float(self._turn.score - prev.score)
        return self._turn.observation, reward, terminated, truncated, self._info()

    def close(self) -> None:
        """Release the emulator."""
        self._frotz = None

    # -- planning --

    def snapshot(self) -> TextWorldSnapshot:
        """Return a token of the current state for ``restore``."""
        if self._turn is None:
            raise RuntimeError("call reset() before snapshot()")
        return TextWorldSnapshot(str(self.game_file), self._frotz.get_state(), self._turn)

    def restore(self, token: TextWorldSnapshot) -> None:
        """Continue from a ``snapshot()`` token of an env playing the same game file.

        Raises:
            TypeError: ``token`` is not a ``TextWorldSnapshot``.
            ValueError: ``token`` was taken on another game.
        """
        if not isinstance(token, TextWorldSnapshot):
            raise TypeError(f"restore() needs a TextWorldSnapshot, got {type(token).__name__}")
        if token.game != str(self.game_file):
            raise ValueError(f"token is from game {token.game}, this env plays {self.game_file}")
        self._frotz.set_state(token.frotz)
        self._turn = token.turn

    def state_hash(self) -> str:
        """The hash of the current game state (``wm.state_hash``), ground truth on or off.

        16 hex digits over the facts, score and win/loss flags, as the module doc says: a
        planner's transposition key that reads no ground truth.

        Raises:
            RuntimeError: before :meth:`reset`.
        """
        turn = self._turn
        if turn is None:
            raise RuntimeError("call reset() before state_hash()")
        tail = f"{turn.score}/{turn.won}/{turn.lost}".encode()
        return hashlib.blake2b(turn.node.digest + tail, digest_size=8).hexdigest()

    # -- internals --

    def _node(self, props: frozenset[Proposition]) -> _Node:
        node = self._nodes.get(props)
        if node is None:
            node = self._nodes[props] = _Node(self, props)
            if len(self._nodes) > _CACHE_NODES:
                self._nodes.popitem(last=False)
        else:
            self._nodes.move_to_end(props)
        return node

    def _settle(
        self, turn: _Turn, text: str, node: _Node, score: int, before: _Node | None = None
    ) -> _Turn:
        """Fill in the parts of ``turn`` that follow from the text and the new state."""
        mentioned: set[str] = set()
        for match in self._mention.finditer(text):
            mentioned.update(self._mention_ids[match.group(0).lower()])
        if node.where.get("player", ("", ""))[1] in mentioned:
            mentioned.add("player")
        delta = Delta()
        if before is not None and before is not node:
            added, removed = node.fact_set - before.fact_set, before.fact_set - node.fact_set
            delta = Delta(tuple(sorted(added)), tuple(sorted(removed)))
        # Anchors: dropped when an object moves (or leaves the world) unseen, set when the
        # text names an object the player can see.
        moved = {f.subject for f in delta.added if f.relation in LOCATIONS}
        with turn.seen.mutate() as anchors:
            for entity in moved | {e for e in turn.seen if e not in node.where}:
                anchors.pop(entity, None)
            for entity in mentioned:
                if entity != "player" and entity in node.where and node.visible(entity):
                    anchors[entity] = turn.step
            seen = anchors.finish()
        turn = turn._replace(
            node=node, score=score, observation=text, mentioned=tuple(sorted(mentioned)),
            delta=delta, seen=seen,
        )  # fmt: skip
        return turn._replace(probes=self._probes(turn))

    def _probes(self, turn: _Turn) -> tuple[Probe, ...]:
        if turn.step == 0 or not turn.seen or not self.probe_rate:
            return ()
        rng = random.Random(turn.seed * 1_000_003 + turn.step)
        if rng.random() >= self.probe_rate:
            return ()
        pool = sorted(turn.seen.keys())
        chosen = rng.sample(pool, min(len(pool), 1 + (rng.random() < 0.5)))
        probes = []
        for entity in sorted(chosen):
            relation, answer = turn.node.where[entity]
            kind = "drift" if turn.node.visible(entity) else "breakage"
            probes.append(Probe(entity, relation, answer, turn.seen[entity], kind))
        return tuple(probes)

    def _info(self) -> dict[str, Any]:
        turn = self._turn
        node = turn.node
        info: dict[str, Any] = {
            "admissible_actions": list(node.admissible),
            "score": turn.score,
            "max_score": self.max_score,
            "moves": turn.step,
        }
        if self.ground_truth:
            tail = f"{turn.score}/{turn.won}/{turn.lost}".encode()
            digest = hashlib.blake2b(node.digest + tail, digest_size=8).hexdigest()
            info["wm.state"] = list(node.facts)
            info["wm.delta"] = delta_info(turn.delta, Delta())
            info["wm.probes"] = list(turn.probes)
            info["wm.state_hash"] = digest
            info["wm.mentioned"] = list(turn.mentioned)
        return info


# --- helpers ---------------------------------------------------------------------------


def _check_game_file(game: str | os.PathLike[str]) -> Path:
    if not isinstance(game, (str, os.PathLike)):
        raise TypeError(f"game must be a path, got {type(game).__name__}")
    path = Path(game).expanduser().resolve()
    if path.suffix == ".ulx":
        raise ValueError(f"{path}: Glulx (.ulx) games are not supported by textworld 1.7; use .z8")
    if path.suffix != ".z8":
        raise ValueError(f"{path}: expected a TextWorld .z8 game")
    if not path.is_file():
        raise FileNotFoundError(f"game file {path} does not exist")
    if not path.with_suffix(".json").is_file():
        raise FileNotFoundError(
            f"{path.with_suffix('.json')} is missing: TextWorld-v0 reads facts from the game's "
            ".json; play other z-machine games with wmkit/Jericho-v0"
        )
    return path


def _entity_ids(game: textworld.Game) -> dict[str, str]:
    """Map TextWorld ids (``r_0``) to ours: lower-case names, unique."""
    ids = {}
    for tw_id, entity in game.infos.items():
        special = {"P": "player", "I": "inventory"}.get(tw_id)
        ids[tw_id] = special or (entity.name or tw_id).lower()
    counts: dict[str, int] = {}
    for name in ids.values():
        counts[name] = counts.get(name, 0) + 1
    return {k: v if counts[v] == 1 else f"{v} ({k})" for k, v in ids.items()}


def _mentions(game: textworld.Game, ids: dict[str, str]) -> tuple[re.Pattern, dict[str, list]]:
    """Compile one pattern over every entity name; longest first, so names nest right."""
    by_name: dict[str, list[str]] = {}
    for tw_id, entity in game.infos.items():
        if entity.name and tw_id not in ("P", "I"):
            by_name.setdefault(entity.name.lower(), []).append(ids[tw_id])
    names = sorted(by_name, key=lambda n: (-len(n), n))
    if not names:
        return re.compile(r"(?!x)x"), {}
    alternation = "|".join(re.escape(n) for n in names)
    return re.compile(rf"(?<![\w-])(?:{alternation})(?![\w-])", re.I), by_name


def _parse(raw: str) -> tuple[str, list[str], int | None]:
    """Split the game's raw output into ``(text, traced actions, score or None)``.

    The traces (``[opening the chest - succeeded]``) and info tags (``<score>2</score>``)
    are what TextWorld's ``Inform7Data``/``StateTracking`` wrappers read; sub-actions
    (``[(1) taking the key ...]``) do not count, as there. Several commands on one line
    print several score tags: the last one is the score after the line.
    """
    events = []
    for tag in _TRACE.findall(raw):
        name, sep, _ = tag.partition(" - succeeded")
        if sep and "(" not in name and ")" not in name:
            events.append(name)
    scores = [value for kind, value in _INFO.findall(raw) if kind == "score"]
    score = int(scores[-1].strip().split("\n")[0]) if scores else None
    text = _STATUS.sub("", _INFO.sub("", _TRACE.sub("", raw))).rstrip()
    text = _BLANKS.sub("\n\n", text.removesuffix(">")).strip()
    if not _OBS_CHARS.issuperset(text):
        text = "".join(c if c in _OBS_CHARS else " " if c == "\t" else "?" for c in text)
    return text[:_OBS_MAX], events, score


def _clean_command(action: str) -> str:
    # One line of printable ASCII: a newline would end the input early, the emulator reads
    # bytes, and its dumb terminal takes a backslash as the start of an escape command.
    printable = "".join(c if " " <= c <= "~" and c != "\\" else " " for c in action)
    return " ".join(printable.split())[:_MAX_COMMAND]


def _meta_word(command: str) -> str | None:
    for sentence in _SENTENCES.split(command.lower()):
        words = sentence.split()
        if words and (words[0] in _META or words[0].startswith("tw-")):
            return words[0]
    return None
