"""The ``rules`` simulator: imagine steps with a rule world model over tracked facts.

:class:`RulesSimulator` steps :class:`RulesToken` states (a tracked
:class:`~wmkit.world.types.WorldState`, the step number, the doors seen open and the
score so far) with a :class:`Predictor`: anything with
``predict(state, action, observation=None) -> Delta``, the interface of the distiller's
:class:`~wmkit.knowledge.rules.RuleSet` (``RulesSimulator.load(path)`` reads one). A
predictor may also offer ``actions(state)`` (the commands worth trying in an imagined
state), ``reward(before, action, after, token)`` and ``terminal(state)``; without them
the simulator proposes the root's admissible actions everywhere, predicts no reward and
never ends. A distilled ``RuleSet`` predicts rewards with the reward model learned with
its rules (:mod:`wmkit.knowledge.rewards`): what the command earned in the logged
steps whose state offered the same preconditions, so the search sees a penalised
command coming.

A rule model predicts facts, not text: an imagined state is described to a value
function as the root was, by the last real observation and the real score (its
``info["score"]``; the rewards predicted on the way are the search's to add, and the
token's ``score`` keeps their sum), plus the predicted facts themselves
(``info["tracked_facts"]``, which a policy/value network reads). A value function that
reads only the text then values the imagined states of one search alike, and what
tells them apart is what the model does predict: the facts, the rewards and what ends
the episode. It
never reads a made-up line, nor a score that rewards it predicted itself (a learned
value takes a high score for a late step, with little left to earn, and would pay a
predicted penalty back).

The simulator is a world model that can be wrong, so it learns within an episode:
:meth:`RulesSimulator.correct` records what a step really did as an *exception* for
its signature (the facts of the entities the command names and of the player, as
:func:`~wmkit.knowledge.rules.features` reads them), and every later prediction of that
command under that signature returns the observed change instead of the rules'.

A hand-written predictor lives with its family: ``wmkit.envs.vault.naive_rules.NaiveVaultRules``
(the rules a newcomer to ``wmkit/Vault-v0`` assumes), named from config only.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

from wmkit.knowledge.rules import RuleSet, StateIndex, abstract, features, tokenize
from wmkit.knowledge.types import Predictor
from wmkit.search.types import TRACKED_FACTS, Transition
from wmkit.world.types import Delta, Fact, WorldState

__all__ = [
    "UNKNOWN",
    "Predictor",
    "RulesSimulator",
    "RulesToken",
    "apply_delta",
    "seen_marks",
]


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


_MEMO = 50_000  # predictions kept by (state, command), then started over

UNKNOWN = "?"
"""The object of a predicted fact whose value the model cannot know (a note's code
before reading it): it matches any observed object of the same subject and relation."""


def seen_marks(facts: Iterable[Fact]) -> frozenset[str]:
    """What earns a reward once: open doors, the player's room, carried things, codes.

    Marks are ``<door>#open``, room ids, ``<thing>#held`` and ``<note>#code``, read off
    ``facts`` (a state, or the facts a step adds) in one pass.
    """
    found = set()
    for s, r, o in facts:
        if r == "state":
            if o == "open":
                found.add(f"{s}#open")
        elif r == "at":
            if s == "player":
                found.add(o)
        elif r == "in":
            if o == "player":
                found.add(f"{s}#held")
        elif r == "code":
            found.add(f"{s}#code")
    return frozenset(found)


class RulesSimulator:
    """Steps tracked-fact states with a rule world model, with learned exceptions.

    A step predicts the delta of ``action`` (an exception recorded by :meth:`correct`
    first, else the predictor), applies it, and asks the predictor (when it knows how)
    for the reward, whether the state ends the episode and the actions to try next.
    The transposition key is the predicted fact set: two paths that predict the same
    facts reach the same state. The transition's ``info`` carries
    ``admissible_actions`` (the proposal), ``score`` (the real one, at the root) and
    ``max_score``, so :func:`~wmkit.search.simulators.admissible_proposal` and
    :class:`~wmkit.search.values.HeuristicValue` work unchanged; its observation is the
    root's.

    Args:
        rules: the predictor (a ``RuleSet``, ``wmkit.envs.vault.naive_rules.NaiveVaultRules``, ...),
            or the path of a rules file (``wmkit-distill``'s ``rules.jsonl``), loaded
            as a ``RuleSet``.
        static_relations: relations left out of signatures when their object is
            another entity (a door's sides only restate which door it is); by default
            the rule set's lexicon's, if it has one.
        min_confidence: rules below this confidence are left out (when loading a path).

    Attributes:
        corrections: ``(signature, action) -> observed delta``, learned this episode.
        hits: predictions answered by an exception (a cost-free counter).

    Raises:
        FileNotFoundError: ``rules`` names no file.
        RulesError: the file is not a rules file.
        TypeError: ``rules`` has no ``predict``.
    """

    def __init__(
        self,
        rules: Predictor | str | os.PathLike[str],
        *,
        static_relations: frozenset[str] | None = None,
        min_confidence: float = 0.0,
    ) -> None:
        if isinstance(rules, str | os.PathLike):
            rules = RuleSet.load(rules, min_confidence=min_confidence)
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
        # A rule set keeps the reading of the states it saw: share it.
        self._index: Callable[[WorldState], StateIndex] = getattr(rules, "index", StateIndex)
        self._terminal_fn = getattr(rules, "terminal", None)
        self.corrections: dict[tuple[Hashable, str], Delta] = {}
        self.hits = 0
        # Predictions by (state, command): a search steps the same commands from the
        # same states again and again (every no-op of every real step whose facts stood
        # still); a correction changes predictions, so it empties this.
        self._predicted: dict[tuple[WorldState, str], Delta] = {}
        self.seen: set[str] = set()
        self._root_actions: tuple[str, ...] = ()
        self._max_score = 0.0
        self._observation = ""
        self._score = 0.0

    @classmethod
    def load(cls, path: str | Path, *, min_confidence: float = 0.0) -> RulesSimulator:
        """A simulator over the rules file ``path`` (``wmkit-distill``'s ``rules.jsonl``)."""
        return cls(path, min_confidence=min_confidence)

    def reset(self) -> None:
        """Forget the episode: exceptions, what was seen, the root's actions."""
        self.corrections.clear()
        self._predicted.clear()
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
        self._observation = observation
        self._score = float(info.get("score", 0) or 0)
        self.seen |= seen_marks(tracked)
        token = RulesToken(tracked, step, self._score, frozenset(self.seen))
        return Transition(
            token,
            observation,
            0.0,
            terminal,
            self._info(token, self._root_actions),
            tracked,
            None,
        )

    @contextmanager
    def preserve(self) -> Iterator[None]:
        """Nothing to restore: imagined steps touch only this simulator's tokens."""
        yield

    def signature(self, state: WorldState, action: str) -> Hashable:
        """What an exception for ``action`` in ``state`` is keyed by.

        The facts of the entities the command names (their identity included) and of
        the player, read as the distiller reads preconditions; facts of other entities
        do not matter to the command.
        """
        index = self._index(state)
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
        self._predicted.clear()
        return kept

    def step(self, token: RulesToken, action: str) -> Transition:
        """Predict what ``action`` leads to from ``token``'s state."""
        state = token.state
        delta = self._predicted.get((state, action))
        if delta is None:
            if len(self._predicted) >= _MEMO:
                self._predicted.clear()
            delta = self._predicted[(state, action)] = self.predict(state, action)
        after = apply_delta(state, delta)
        reward = 0.0
        if self._reward_fn is not None:
            reward = float(self._reward_fn(state, action, after, token))
        # The token's marks hold its state's; what is new comes with the added facts.
        seen = token.seen | seen_marks(delta.added) if delta.added else token.seen
        terminal = bool(self._terminal_fn(after)) if self._terminal_fn is not None else False
        new = RulesToken(after, token.step + 1, token.score + reward, seen)
        actions = () if terminal else self._proposal(after)
        return Transition(
            new,
            self._observation,
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
            "score": self._score,
            "max_score": self._max_score,
            "moves": token.step,
            TRACKED_FACTS: token.state,  # what tells imagined states apart (a network reads it)
        }
