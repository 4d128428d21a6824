"""Rule distillers: logged transitions in, a :class:`~wmkit.knowledge.rules.RuleSet` out.

Two distillers share one interface, ``fit(transitions) -> RuleSet``; both give the rule
set its reward model, counted from the same reading of the commands and the logged
rewards (:func:`~wmkit.trainers.rewards.count_rewards`):

* :class:`CountingDistiller` reads every transition into templates and slots (the
  reading of :mod:`wmkit.knowledge.rules`) and interned integer keys, counts with
  ``Counter`` how often each (command template, precondition signature) occurred and
  how often each effect followed it, and how often each observation template was
  followed by each fact holding, then induces rules from the counts (see
  :meth:`CountingDistiller.fit`). ``python -m wmkit.trainers.distill`` measures the
  throughput (:func:`bench_counting`).
* :class:`LLMDistiller` shows a model a few transitions at a time with the seed 001
  prompt, takes its knowledge delta (``entities``, ``states``, ``edges``, ``rules``),
  validates it (pydantic and :func:`~wmkit.knowledge.delta.validate_delta`; invalid
  parts are dropped and counted), reads the rules' text into rules, and scores them
  against the transitions.

:func:`evaluate` scores a rule set on held-out transitions the way ByteSized32 scores
state prediction: per transition, the predicted action-driven and event-driven deltas
against the true ones (:class:`DeltaAccuracy`).

Transitions come from recorded trajectories (:func:`transitions_from_dataset`,
consecutive rows of an episode) or straight from step rows (:func:`transitions_from_rows`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import operator
import random
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from wmkit.knowledge.delta import ValidatedDelta, validate_delta
from wmkit.knowledge.rewards import RewardModel
from wmkit.knowledge.rules import (
    SELF_IDS,
    Atom,
    Feature,
    Lexicon,
    Rule,
    RulesError,
    RuleSet,
    StateIndex,
    Surfaces,
    abstract,
    apply_atoms,
    describe,
    entity_surfaces,
    features,
    literal_surfaces,
    parse_rule_text,
    rule_text,
    sentences,
    tokenize,
    wilson_lower,
)
from wmkit.llm.errors import LLMError
from wmkit.llm.prompts import DISTILL_SYSTEM, distill_user
from wmkit.llm.structured import ask_structured
from wmkit.llm.types import ChatModel
from wmkit.trainers.rewards import count_rewards
from wmkit.trainers.types import DeltaAccuracy, Distiller, PartScore, Transition
from wmkit.world.delta_score import DeltaTally
from wmkit.world.types import Delta, Fact, WorldState

__all__ = [
    "CountingDistiller",
    "DeltaAccuracy",
    "Distiller",
    "LLMDistillStats",
    "LLMDistiller",
    "PartScore",
    "Transition",
    "bench_counting",
    "bench_transitions",
    "evaluate",
    "learn_lexicon",
    "split_episodes",
    "transitions_from_dataset",
    "transitions_from_rows",
]

_NUMBER_CHARS = frozenset("0123456789+-.,")
# How the LLM distiller reads commands for its reward model: CountingDistiller's defaults.
_REWARD_FEATURES = 24
_REWARD_CONDITIONS = 2


# --- transitions from recorded data -----------------------------------------------------

_COLUMNS = [
    "env", "episode", "step", "observation", "action", "reward", "true_facts", "true_delta",
]  # fmt: skip


def _delta(part: Mapping[str, Any]) -> Delta:
    return Delta(
        tuple(sorted(Fact(*f) for f in part["added"])),
        tuple(sorted(Fact(*f) for f in part["removed"])),
    )


def transitions_from_rows(
    rows: Iterable[Mapping[str, Any]], *, resets: bool = True
) -> Iterator[Transition]:
    """Turn step rows (:data:`~wmkit.knowledge.recording.STEP_FEATURES`) into transitions.

    Rows of one episode must come together and in step order, as the recorder writes
    them. Step 0 (the reset) becomes a transition with no action from the empty state
    when ``resets`` (observation rules learn from it); every later step pairs with the
    row before it.

    Raises:
        ValueError: a row has no ground truth (``true_facts``/``true_delta`` null: the
            env was recorded without it), or a step does not follow its predecessor.
    """
    prev: tuple[str, int, WorldState] | None = None
    for row in rows:
        episode, step = row["episode"], row["step"]
        if row["true_facts"] is None or (step > 0 and row["true_delta"] is None):
            raise ValueError(
                f"episode {episode!r} step {step} has no ground truth: record the env "
                "with ground_truth=True to distil rules from it"
            )
        after = WorldState(Fact(*f) for f in row["true_facts"])
        if step == 0:
            if resets:
                yield Transition(
                    row["env"], episode, 0, WorldState(), None, row["observation"],
                    Delta(), Delta(), after,
                )  # fmt: skip
        else:
            if prev is None or prev[0] != episode or prev[1] != step - 1:
                raise ValueError(
                    f"episode {episode!r} step {step} does not follow step {step - 1} of "
                    "the same episode: rows must come whole and in step order"
                )
            delta = row["true_delta"]
            yield Transition(
                row["env"], episode, step, prev[2], row["action"], row["observation"],
                _delta(delta["action"]), _delta(delta["event"]), after, float(row["reward"]),
            )  # fmt: skip
        prev = (episode, step, after)


def transitions_from_dataset(
    ds: Any, *, resets: bool = True, batch_size: int = 1000
) -> list[Transition]:
    """Transitions of a recorded-trajectories dataset (``load_trajectories(data_dir)``).

    Args:
        ds: a ``datasets.Dataset`` with the step columns.
        resets: keep each episode's reset as a transition with no action.
        batch_size: rows read at a time.
    """
    table = ds.select_columns(_COLUMNS)

    def rows() -> Iterator[dict[str, Any]]:
        for batch in table.iter(batch_size=batch_size):
            keys = list(batch)
            for values in zip(*(batch[k] for k in keys), strict=True):
                yield dict(zip(keys, values, strict=True))

    return list(transitions_from_rows(rows(), resets=resets))


def split_episodes(
    transitions: Sequence[Transition], held_out: float, *, seed: int = 0
) -> tuple[list[Transition], list[Transition]]:
    """Split by episode: ``(train, held_out)``, about ``held_out`` of the episodes held out.

    Episodes are shuffled by ``seed``; with two or more episodes and ``held_out > 0``,
    at least one is held out and at least one kept.

    Raises:
        ValueError: ``held_out`` is outside [0, 1).
    """
    if not 0.0 <= held_out < 1.0:
        raise ValueError(f"held_out must be in [0, 1), got {held_out}")
    episodes = sorted({(t.env, t.episode) for t in transitions})
    random.Random(seed).shuffle(episodes)
    n = len(episodes)
    k = 0 if held_out == 0 or n < 2 else min(n - 1, max(1, round(held_out * n)))
    test = set(episodes[:k])
    train = [t for t in transitions if (t.env, t.episode) not in test]
    return train, [t for t in transitions if (t.env, t.episode) in test]


# --- the lexicon -------------------------------------------------------------------------


def _is_entity(value: str, subjects: Collection[str]) -> bool:
    head, sep, name = value.partition(":")
    return value in subjects or bool(sep and head and name and head.isidentifier())


def _is_number(value: str) -> bool:
    return bool(value) and value[-1].isdigit() and set(value) <= _NUMBER_CHARS


def learn_lexicon(transitions: Iterable[Transition], *, open_values: int = 20) -> Lexicon:
    """Read what the rules need to know about the facts from ``transitions``.

    Literals are the objects that are neither entities (a subject, or a ``type:name``
    id) nor numbers; a relation with more than ``open_values`` distinct literals is
    open-valued (addresses, city names), and its literals are named as slots in
    commands too. Static relations never lost a fact (facts of new entities may
    appear: a new parcel's sender); multi relations had two objects for one subject in
    some state. Styles are left empty (the reading fills them).
    """
    # Each episode's first state is read whole; after it, the deltas are replayed on
    # (subject, relation) -> objects, so a step costs the size of its delta (deltas are
    # the env's own account of the change).
    transitions = list(transitions)
    changed: set[str] = set()
    subjects: set[str] = set()
    facts: list[Fact] = []
    multi: set[str] = set()
    held: dict[tuple[str, str], set[str]] = {}
    episode = None
    for t in transitions:
        if (t.env, t.episode) != episode or t.action is None:
            episode = (t.env, t.episode)
            held = {}
            for fact in t.before if t.action is not None else t.after:
                held.setdefault((fact.subject, fact.relation), set()).add(fact.object)
                subjects.add(fact.subject)
                facts.append(fact)
            multi.update(r for (_, r), objects in held.items() if len(objects) > 1)
        for part in (t.action_delta, t.event_delta):
            for s, r, o in part.removed:
                changed.add(r)
                held.get((s, r), set()).discard(o)
            for fact in part.added:
                subjects.add(fact.subject)
                facts.append(fact)
                objects = held.setdefault((fact.subject, fact.relation), set())
                objects.add(fact.object)
                if len(objects) > 1:
                    multi.add(fact.relation)
    values: dict[str, set[str]] = {}
    for _, r, o in facts:
        found = values.setdefault(r, set())
        if o not in found and not _is_entity(o, subjects) and not _is_number(o):
            found.add(o)
    seen_relations = set(values)
    values = {r: vs for r, vs in values.items() if vs}
    literals = frozenset(v for vs in values.values() for v in vs)
    open_relations = frozenset(r for r, vs in values.items() if len(vs) > open_values)
    open_literals = frozenset(v for r in open_relations for v in values[r])
    return Lexicon(
        literals,
        open_literals,
        open_relations,
        frozenset(seen_relations - changed),
        frozenset(multi),
        {},
    )


# --- reading transitions into examples ---------------------------------------------------


_SHIFT = 28  # bits of an effect id in a packed (key, effect) count key


def _pack(key: int, atom: int) -> int:
    return (key << _SHIFT) | atom


def _unpack(packed: int) -> tuple[int, int]:
    return packed >> _SHIFT, packed & ((1 << _SHIFT) - 1)


class _Example(NamedTuple):
    """One transition as counted: interned ids packed into ints, ready to count.

    Attributes:
        key: (command template, signature) id; -1 without a command.
        hits: ``_pack(key, effect)`` for each effect of the command.
        lines: the template id of each observation sentence with slots.
        holds: ``_pack(template, effect)`` for each effect holding after a sentence.
        changes: ``_pack(template, effect) << 1 | is_event`` for those that changed.
    """

    key: int
    hits: tuple[int, ...]
    lines: tuple[int, ...]
    holds: tuple[int, ...]
    changes: tuple[int, ...]


def _episodes(transitions: Iterable[Transition]) -> Iterator[list[Transition]]:
    """Runs of transitions of one episode: a new one at each reset or change of id."""
    run: list[Transition] = []
    for t in transitions:
        if run and (t.action is None or (t.env, t.episode) != (run[-1].env, run[-1].episode)):
            yield run
            run = []
        run.append(t)
    if run:
        yield run


class _Reader:
    """Reads transitions into :class:`_Example` records, interning every key."""

    def __init__(self, lexicon: Lexicon, max_features: int) -> None:
        self.lexicon = lexicon
        self.max_features = max_features
        self.literals = literal_surfaces(lexicon.literals)
        self.open = literal_surfaces(lexicon.open_literals)
        self.keys: dict[tuple[str, tuple[Feature, ...]], int] = {}
        self.atoms: dict[Atom, int] = {}
        self.lines: dict[str, int] = {}
        self.styles: dict[str, Counter[str]] = {}
        self._recent: list[StateIndex] = []

    def _id(self, table: dict, key: Any) -> int:
        found = table.get(key)
        if found is None:
            found = table[key] = len(table)
        return found

    def read(self, transitions: Sequence[Transition]) -> list[_Example]:
        """Read transitions in order; an episode's mentions use all its entities."""
        out: list[_Example] = []
        for episode in _episodes(transitions):
            # Entities of the first state, then those the deltas bring in.
            first = episode[0].before if episode[0].action is not None else episode[0].after
            facts = itertools.chain(
                first,
                *(itertools.chain(t.action_delta.added, t.event_delta.added) for t in episode),
            )
            entities: dict[str, None] = {}
            for s, _, o in facts:
                entities[s] = None
                if ":" in o:
                    entities[o] = None
            surfaces = entity_surfaces(sorted(entities), self.lexicon.literals)
            for t in episode:
                out.append(self._example(t, surfaces))
        return out

    def _index(self, state: WorldState, t: Transition | None = None) -> StateIndex:
        # A step's state after is the next step's state before: keep the last two, and
        # build a state after from the state before and the step's delta.
        for found in self._recent:
            if found.state is state:
                return found
        if t is not None and self._recent and self._recent[0].state is t.before:
            found = StateIndex.updated(self._recent[0], state, (t.action_delta, t.event_delta))
        else:
            found = StateIndex(state)
        self._recent = [found, *self._recent[:1]]
        return found

    def _example(self, t: Transition, surfaces: Surfaces) -> _Example:
        lex = self.lexicon
        key, hits = -1, ()
        if t.action:
            before = self._index(t.before).by_subject
            read = abstract(tokenize(t.action), surfaces, self.open)
            self._styles(read.forms)
            sig = features(before, read.slots, lex.static_relations)
            if len(sig) > self.max_features:
                sig = frozenset(sorted(sig, key=_feature_rank)[: self.max_features])
            key = self._id(self.keys, (read.template, tuple(sorted(sig))))
            multi = lex.multi_relations
            found = _delta_atoms(t.action_delta, "action", read.slots, multi, before)
            found += _delta_atoms(t.event_delta, "event", read.slots, multi, before)
            hits = tuple(_pack(key, self._id(self.atoms, a)) for a in dict.fromkeys(found))
        after_index = self._index(t.after, t)
        after = after_index.by_subject
        changed = {f: 0 for f in t.action_delta.added}
        changed.update({f: 1 for f in t.event_delta.added})
        lines, holds, changes = [], [], []
        for sentence in sentences(t.observation):
            read = abstract(tokenize(sentence), surfaces, self.literals)
            if not read.slots:
                continue
            self._styles(read.forms)
            line = self._id(self.lines, read.template)
            lines.append(line)
            for atom, fact in _holding(read.slots, after, lex.multi_relations):
                packed = _pack(line, self._id(self.atoms, atom))
                holds.append(packed)
                kind = changed.get(fact)
                if kind is not None:
                    changes.append(packed << 1 | kind)
            for atom, kind in _described(read.slots, changed, after_index, lex.multi_relations):
                packed = _pack(line, self._id(self.atoms, atom))
                holds.append(packed)
                changes.append(packed << 1 | kind)
        return _Example(key, hits, tuple(lines), tuple(holds), tuple(changes))

    def _styles(self, forms: Iterable[tuple[str, str]]) -> None:
        for kind, form in forms:
            if kind != "v":
                self.styles.setdefault(kind, Counter())[form] += 1


def _reward_model(
    reader: _Reader,
    examples: Sequence[_Example],
    transitions: Sequence[Transition],
    *,
    min_support: int,
    max_conditions: int,
) -> RewardModel:
    """What commands earn: each command step's template, signature and reward counted.

    ``examples`` are ``reader``'s reading of ``transitions``, one each, in order.
    """
    keys = {i: k for k, i in reader.keys.items()}
    readings = (
        (*keys[e.key], t.reward) for e, t in zip(examples, transitions, strict=True) if e.key >= 0
    )
    return count_rewards(readings, min_support=min_support, max_conditions=max_conditions)


def _common(forms: Counter[str], share: float = 0.05) -> tuple[str, ...]:
    """Forms of a type seen in at least ``share`` of its mentions, most frequent first."""
    total = sum(forms.values())
    return tuple(f for f, n in forms.most_common() if n >= share * total)


def _feature_rank(feature: Feature) -> tuple[int, Feature]:
    # Keep identities, then facts of the named entities, then the player's.
    return (0 if feature[1] == "=" else 1 if feature[0].startswith("{") else 2, feature)


def _delta_atoms(
    delta: Delta,
    kind: str,
    slots: Sequence[tuple[str, str]],
    multi: frozenset[str],
    before: Mapping[str, Sequence[tuple[str, str]]],
) -> list[Atom]:
    """The effects of a true delta part, slots in place of the values a command named.

    An object the command does not name but a self id held before the step becomes a
    reference to that fact (``drop {key}``: ``{key}.in := @player.at``).
    """
    slot_of = {value: slot for slot, value in reversed(slots)}
    for self_id in SELF_IDS:
        for r, o in before.get(self_id, ()):
            if r not in multi:
                slot_of.setdefault(o, f"@{self_id}.{r}")
    numbers = {}
    for slot, value in slots:
        if _is_number(value):
            with contextlib.suppress(ValueError):  # "1.2.3" looks like a number, is not one
                numbers[slot] = float(value.replace(",", ""))
    old: dict[tuple[str, str], list[str]] = {}
    for s, r, o in delta.removed:
        old.setdefault((s, r), []).append(o)
    atoms = []
    set_keys = set()
    for s, r, o in delta.added:
        subject = slot_of.get(s, s)
        if r in multi:
            atoms.append(Atom(kind, "add", subject, r, slot_of.get(o, o)))  # type: ignore[arg-type]
            continue
        set_keys.add((s, r))
        obj, op = slot_of.get(o), "set"
        if obj is None:
            before = old.get((s, r), ())
            if len(before) == 1 and _is_number(before[0]) and _is_number(o):
                try:
                    diff = float(o.replace(",", "")) - float(before[0].replace(",", ""))
                except ValueError:
                    diff = math.nan
                for slot, value in numbers.items():
                    if value == diff or value == -diff:
                        obj, op = slot, ("inc" if value == diff else "dec")
                        break
        atoms.append(Atom(kind, op, subject, r, o if obj is None else obj))  # type: ignore[arg-type]
    for s, r, o in delta.removed:
        if r in multi or (s, r) not in set_keys:
            atoms.append(Atom(kind, "remove", slot_of.get(s, s), r, slot_of.get(o, o)))  # type: ignore[arg-type]
    return atoms


def _holding(
    slots: Sequence[tuple[str, str]],
    after: Mapping[str, Sequence[tuple[str, str]]],
    multi: frozenset[str],
) -> Iterator[tuple[Atom, Fact]]:
    """Effects a sentence may state: facts after the step of the entities it names.

    A fact's object must be named in the sentence too, or be a literal; facts of a
    self id (``player``) count only when the sentence names their object.
    """
    slot_of = {value: slot for slot, value in reversed(slots)}
    for slot, value in slots:
        for r, o in after.get(value, ()):
            obj = slot_of.get(o)
            if obj is None:
                if _is_entity(o, after):
                    continue
                obj = o
            op = "add" if r in multi else "set"
            yield Atom("action", op, slot, r, obj), Fact(value, r, o)
    for self_id in SELF_IDS:
        for r, o in after.get(self_id, ()):
            obj = slot_of.get(o)
            if obj is not None:
                op = "add" if r in multi else "set"
                yield Atom("action", op, self_id, r, obj), Fact(self_id, r, o)


def _described(
    slots: Sequence[tuple[str, str]],
    changed: Mapping[Fact, int],
    after: StateIndex,
    multi: frozenset[str],
) -> Iterator[tuple[Atom, int]]:
    """Changes to entities a sentence describes instead of naming (see ``describe``).

    They count only when they happened: a sentence that describes an entity says
    something about it only when it changed.
    """
    slot_of = {value: slot for slot, value in reversed(slots)}
    for fact, kind in changed.items():
        s, r, o = fact
        if s in slot_of or s in SELF_IDS:
            continue
        obj = slot_of.get(o)
        if obj is None:
            if after.is_entity(o):
                continue
            obj = o
        subject = describe(s, after.by_subject, after.holders, slot_of)
        if subject is not None:
            yield Atom("action", "add" if r in multi else "set", subject, r, obj), kind


# --- counting ------------------------------------------------------------------------------


class _Counts(NamedTuple):
    occ: Counter[int]  # command key -> steps
    hit: Counter[int]  # _pack(command key, effect) -> steps with the effect
    lines: Counter[int]  # observation template -> sentences
    holds: Counter[int]  # _pack(template, effect) -> sentences after which it held
    kinds: Counter[int]  # _pack(template, effect) << 1 | is_event -> changes of that kind


def _count(examples: Sequence[_Example]) -> _Counts:
    """The counting pass: ``Counter`` over each packed key field of the examples.

    Each field is counted by one ``Counter`` over all examples chained (its counting
    loop runs in C), so the pass costs a few dict increments per key and no Python
    work per key.
    """
    chain = itertools.chain.from_iterable
    return _Counts(
        Counter(k for k in map(_KEY, examples) if k >= 0),
        Counter(chain(map(_HITS, examples))),
        Counter(chain(map(_LINES, examples))),
        Counter(chain(map(_HOLDS, examples))),
        Counter(chain(map(_CHANGES, examples))),
    )


_KEY, _HITS, _LINES, _HOLDS, _CHANGES = (operator.itemgetter(i) for i in range(5))


@dataclass
class CountingDistiller:
    """Induces rules by counting; see the module docstring and :meth:`fit`.

    Args:
        min_support: fewest steps a rule must rest on.
        min_confidence: least share of those steps that must agree with a rule, in
            (0.5, 1].
        max_conditions: most preconditions per rule (0..3; subsets of each step's
            preconditions up to this size are counted, so cost grows with it).
        max_features: most preconditions kept per step (identities first).
        open_values: distinct literals above which a relation is open-valued (see
            :func:`learn_lexicon`).

    Attributes:
        timings: seconds spent per phase of the last ``fit`` (``lexicon``, ``read``,
            ``count``, ``induce``, ``rewards``: the reward model) and the transitions it
            read.
    """

    min_support: int = 3
    min_confidence: float = 0.8
    max_conditions: int = 2
    max_features: int = 24
    open_values: int = 20
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.min_support < 1:
            raise ValueError(f"min_support must be >= 1, got {self.min_support}")
        if not 0.5 < self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be in (0.5, 1], got {self.min_confidence}")
        if not 0 <= self.max_conditions <= 3:
            raise ValueError(f"max_conditions must be in 0..3, got {self.max_conditions}")
        if self.max_features < 1 or self.open_values < 1:
            raise ValueError("max_features and open_values must be >= 1")

    def fit(self, transitions: Sequence[Transition]) -> RuleSet:
        """Learn rules from ``transitions`` (several episodes, any envs of one family).

        1. :func:`learn_lexicon`; 2. read each transition: the command into a template
           and slots, its precondition signature (:func:`~wmkit.knowledge.rules.features`)
           and its true delta into effects with slots; each observation sentence into a
           template and the facts of the entities it names that hold after the step;
        3. count (``_count``); 4. induce:

        * command rules, per template and effect: every precondition set C of up to
          ``max_conditions`` features with ``support(C) >= min_support`` is visited,
          smaller sets first; ``p = hits(C) / support(C)``. C is a rule when
          ``max(p, 1 - p) >= min_confidence``: a positive rule (the effect happens) when
          ``p >= 0.5``, else a failure rule (same command, a precondition that stops
          it: the door does not open while its latch is down). A rule is dropped when
          a smaller kept set decides the same at least as strongly (Wilson lower
          bound of the confidence, see ``Rule.strength``: the decision list would
          never need it), and a failure rule when no positive rule ever
          matched together with it (not happening is the default). Effects that never
          confidently happen get no rules.
        * observation rules, per template and effect: ``p = held / sentences``, kept
          when ``p >= min_confidence`` and ``sentences >= min_support``; the effect's
          kind is where its changes were seen most (action if never).
        """
        start = time.perf_counter()
        lexicon = learn_lexicon(transitions, open_values=self.open_values)
        t1 = time.perf_counter()
        reader = _Reader(lexicon, self.max_features)
        examples = reader.read(transitions)
        t2 = time.perf_counter()
        counts = _count(examples)
        t3 = time.perf_counter()
        rules = self._induce(reader, counts)
        t4 = time.perf_counter()
        rewards = _reward_model(
            reader, examples, transitions,
            min_support=self.min_support, max_conditions=self.max_conditions,
        )  # fmt: skip
        self.timings = {
            "transitions": len(transitions),
            "lexicon": t1 - start,
            "read": t2 - t1,
            "count": t3 - t2,
            "induce": t4 - t3,
            "rewards": time.perf_counter() - t4,
        }
        styles = {k: _common(c) for k, c in reader.styles.items()}
        envs = sorted({t.env for t in transitions})
        meta = {
            "env": ",".join(envs),
            "distiller": "counting",
            "transitions": len(transitions),
            "settings": {
                "min_support": self.min_support,
                "min_confidence": self.min_confidence,
                "max_conditions": self.max_conditions,
                "max_features": self.max_features,
                "open_values": self.open_values,
            },
        }
        return RuleSet(rules, lexicon._replace(styles=styles), meta=meta, rewards=rewards)

    def _induce(self, reader: _Reader, counts: _Counts) -> list[Rule]:
        atoms = {i: a for a, i in reader.atoms.items()}
        rules: list[Rule] = []
        # Command rules, per template.
        by_template: dict[str, list[tuple[tuple[Feature, ...], int, int]]] = {}
        keys = {i: k for k, i in reader.keys.items()}
        for key, n in counts.occ.items():
            template, sig = keys[key]
            by_template.setdefault(template, []).append((sig, n, key))
        hits_of: dict[int, dict[int, int]] = {}
        for packed, h in counts.hit.items():
            key, a = _unpack(packed)
            hits_of.setdefault(key, {})[a] = h
        for template, sigs in sorted(by_template.items()):
            support: dict[tuple[Feature, ...], int] = {}
            held: dict[int, dict[tuple[Feature, ...], int]] = {}
            for sig, n, key in sigs:
                subsets = [
                    c for size in range(self.max_conditions + 1)
                    for c in itertools.combinations(sig, size)
                ]  # fmt: skip
                for c in subsets:
                    support[c] = support.get(c, 0) + n
                for a, h in hits_of.get(key, {}).items():
                    table = held.setdefault(a, {})
                    for c in subsets:
                        table[c] = table.get(c, 0) + h
            visit = sorted(
                (c for c, n in support.items() if n >= self.min_support),
                key=lambda c: (len(c), c),
            )
            sets = [frozenset(sig) for sig, _, _ in sigs]
            for a in sorted(held, key=lambda a: atoms[a]):
                rules += self._command_rules(template, atoms[a], visit, support, held[a], sets)
        # Observation rules.
        lines = {i: t for t, i in reader.lines.items()}
        for packed, h in sorted(counts.holds.items()):
            line, a = _unpack(packed)
            n = counts.lines[line]
            if n < self.min_support or h / n < self.min_confidence:
                continue
            act, ev = counts.kinds[packed << 1], counts.kinds[packed << 1 | 1]
            atom = atoms[a]._replace(kind="event" if ev > act else "action")
            rules.append(Rule("observation", lines[line], (), atom, True, n, h, h / n))
        return rules

    def _command_rules(
        self,
        template: str,
        atom: Atom,
        visit: Sequence[tuple[Feature, ...]],
        support: Mapping[tuple[Feature, ...], int],
        held: Mapping[tuple[Feature, ...], int],
        sigs: Sequence[frozenset[Feature]],
    ) -> list[Rule]:
        if not any(
            support[c] >= self.min_support and h / support[c] >= self.min_confidence
            for c, h in held.items()
        ):
            return []  # never confidently happens: no rule, and no failure to state
        kept: dict[bool, dict[tuple[Feature, ...], float]] = {True: {}, False: {}}
        out = []
        for c in visit:
            n, h = support[c], held.get(c, 0)
            p = h / n
            decision = p >= 0.5
            confidence = p if decision else 1.0 - p
            if confidence < self.min_confidence:
                continue
            # Redundant when a smaller set already decides the same at least as strongly:
            # wherever this rule matches, that one matches and ranks at least as high.
            strength = wilson_lower(confidence, n)
            same = kept[decision]
            if any(
                same.get(sub, -1.0) >= strength
                for size in range(len(c))
                for sub in itertools.combinations(c, size)
            ):
                continue
            if not decision and not any(
                set(c) <= sig and any(set(pos) <= sig for pos in kept[True]) for sig in sigs
            ):
                continue  # no rule says it happens here: "it does not" is the default
            same[c] = strength
            out.append(Rule("command", template, c, atom, decision, n, h, confidence))
        return out


# --- scoring ---------------------------------------------------------------------------


def evaluate(
    ruleset: RuleSet, transitions: Iterable[Transition], *, observation: bool = True
) -> DeltaAccuracy:
    """Score ``ruleset`` on transitions: predicted vs true delta, split by cause.

    A transition's action part is correct when the predicted action-driven delta equals
    the true one exactly (ByteSized32: a transition counts as correct when the
    predicted delta equals the true one); likewise the event part; ``exact`` asks both.
    Each part is pooled by a :class:`~wmkit.world.delta_score.DeltaTally` (the scorer
    the causal-confusion metric uses too). Resets (no command) are skipped.

    Args:
        ruleset: the rules.
        transitions: held-out transitions.
        observation: give the rules the observation (a tracker's case); False predicts
            from the state and command alone (a simulator's case, before acting).
    """
    act, ev = DeltaTally(), DeltaTally()
    n = both = 0
    for t in transitions:
        if t.action is None:
            continue
        p_act, p_ev = ruleset.predict_split(
            t.before, t.action, t.observation if observation else None
        )
        n += 1
        both += act.add(p_act, t.action_delta) & ev.add(p_ev, t.event_delta)
    return DeltaAccuracy(n, both / n if n else math.nan, act.score(), ev.score())


# --- the LLM distiller -----------------------------------------------------------------


@dataclass
class LLMDistillStats:
    """What happened during one :meth:`LLMDistiller.fit`.

    Attributes:
        requests: batches sent (one structured request each, repairs included).
        ok, repaired, failed: replies by ``ask_structured`` status.
        request_errors: batches lost to a transient request error.
        rejections: dropped delta parts by reason (``validate_delta``'s reasons).
        unparsed: rules whose condition/action text is not the rule syntax.
        proposed: distinct rules read from the replies.
        refuted: proposed rules the transitions did not bear out (calibration).
        kept: rules in the result.
        notes: one line per problem, for a person.
    """

    requests: int = 0
    ok: int = 0
    repaired: int = 0
    failed: int = 0
    request_errors: int = 0
    rejections: Counter[str] = field(default_factory=Counter)
    unparsed: int = 0
    proposed: int = 0
    refuted: int = 0
    kept: int = 0
    notes: list[str] = field(default_factory=list)


_DELTA_HINT = (
    "The JSON must be one object with the lists entities, states, edges and rules; "
    "rules use the condition/action syntax of the instructions."
)


def _parse_delta(text: str, scene: str) -> ValidatedDelta:
    """Validate a reply's JSON as a knowledge delta; a wrong structure asks for a repair."""
    checked = validate_delta(text, None, scene=scene)
    whole = [r for r in checked.rejections if r.part == "delta"]
    if whole:
        raise ValueError(f"not a knowledge delta ({whole[0].reason}): {whole[0].detail}")
    return checked


def _scene(t: Transition, max_facts: int) -> dict[str, Any]:
    """What the prompt shows of a transition: the facts of the entities involved."""
    changed = [
        *t.action_delta.added,
        *t.action_delta.removed,
        *t.event_delta.added,
        *t.event_delta.removed,
    ]
    words = set(tokenize(t.action or "")) | set(tokenize(t.observation))
    involved = {f.subject for f in changed} | set(SELF_IDS)
    for subject in t.before.subjects():
        if set(tokenize(subject.split(":", 1)[-1])) & words:
            involved.add(subject)
    facts = sorted(f for f in t.before if f.subject in involved)[:max_facts]
    return {
        "action": t.action,
        "observation": t.observation,
        "facts": facts,
        "action_delta": t.action_delta,
        "event_delta": t.event_delta,
    }


@dataclass
class LLMDistiller:
    """A model proposes rules (seed 001 prompt and delta schema); the data scores them.

    ``fit`` picks up to ``max_scenes`` transitions that changed something (one per
    command verb and changed relations first, then in order), sends them ``batch`` at
    a time with the rules proposed so far (``wmkit.llm.prompts.DISTILL_SYSTEM`` /
    ``distill_user``), and asks for a knowledge delta through ``ask_structured``
    (repairs on a reply that is not a delta at all). Each delta is validated part by
    part (:func:`~wmkit.knowledge.delta.validate_delta`): invalid parts are dropped
    and counted in ``stats.rejections``; valid rules whose text is not the rule syntax
    (:func:`~wmkit.knowledge.rules.parse_rule_text`) are counted in ``stats.unparsed``.
    With ``calibrate``, each proposed rule is then scored on all the transitions given
    to ``fit`` like a counted rule (support, hits, confidence) and dropped below
    ``min_support``/``min_confidence`` (``stats.refuted``); without it, rules keep the
    model's confidence. The valid deltas themselves are kept in ``deltas`` (for a
    world graph).

    Args:
        client: the chat model.
        batch: transitions per request.
        max_scenes: transitions shown in all.
        max_facts: facts shown per transition.
        max_repairs: correction rounds per request.
        calibrate: score proposals on the data (see above).
        min_support, min_confidence: thresholds of calibration.
        params: request fields for every request (``temperature``...).
    """

    client: ChatModel
    batch: int = 4
    max_scenes: int = 32
    max_facts: int = 40
    max_repairs: int = 1
    calibrate: bool = True
    min_support: int = 3
    min_confidence: float = 0.8
    params: Mapping[str, Any] = field(default_factory=dict)
    stats: LLMDistillStats = field(default_factory=LLMDistillStats)
    deltas: list[ValidatedDelta] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.batch < 1 or self.max_scenes < 1 or self.max_facts < 0 or self.max_repairs < 0:
            raise ValueError("batch and max_scenes must be >= 1, max_facts and max_repairs >= 0")

    def _pick(self, transitions: Sequence[Transition]) -> list[Transition]:
        changed = [
            t for t in transitions
            if t.action and (t.action_delta.added or t.action_delta.removed
                             or t.event_delta.added or t.event_delta.removed)
        ]  # fmt: skip
        first: dict[tuple, Transition] = {}
        for t in changed:
            relations = tuple(
                sorted({f.relation for f in (*t.action_delta.added, *t.event_delta.added)})
            )
            first.setdefault((tokenize(t.action or "")[:1], relations), t)
        picked = list(first.values())[: self.max_scenes]
        chosen = {id(t) for t in picked}
        picked += [t for t in changed if id(t) not in chosen][: self.max_scenes - len(picked)]
        return picked

    def fit(self, transitions: Sequence[Transition]) -> RuleSet:
        """Propose rules from a sample of ``transitions``, then score them on all of them.

        Raises:
            LLMError: a request failed in a way retrying cannot fix (refused
                connection, 4xx): the run is misconfigured.
        """
        self.stats = stats = LLMDistillStats()
        self.deltas = []
        proposed: dict[tuple, Rule] = {}
        scenes = self._pick(transitions)
        for start in range(0, len(scenes), self.batch):
            chunk = scenes[start : start + self.batch]
            scene_id = f"{chunk[0].env}/{chunk[0].episode}@{chunk[0].step}"
            known = [rule_text(r) for r in list(proposed.values())[-20:]]
            messages = [
                {"role": "system", "content": DISTILL_SYSTEM},
                {
                    "role": "user",
                    "content": distill_user([_scene(t, self.max_facts) for t in chunk], known),
                },
            ]
            stats.requests += 1
            try:
                result = ask_structured(
                    self.client,
                    messages,
                    parse_fn=lambda text, scene=scene_id: _parse_delta(text, scene),
                    max_repairs=self.max_repairs,
                    hint=_DELTA_HINT,
                    params=self.params,
                )
            except LLMError as err:
                if not err.transient:
                    raise
                stats.request_errors += 1
                stats.notes.append(f"{scene_id}: request failed: {err}")
                continue
            if not result.ok or result.value is None:
                stats.failed += 1
                stats.notes.append(f"{scene_id}: no valid delta: {result.reason}")
                continue
            stats.ok += result.status == "ok"
            stats.repaired += result.status == "repaired"
            delta = result.value
            self.deltas.append(delta)
            stats.rejections.update(delta.counts)
            for part in delta.rules:
                try:
                    rule = parse_rule_text(part.condition, part.action, part.confidence)
                except RulesError as err:
                    stats.unparsed += 1
                    stats.notes.append(f"{scene_id}: {err}")
                    continue
                key = (rule.source, rule.template, rule.conditions, rule.atom, rule.predicts)
                proposed.setdefault(key, rule)
        stats.proposed = len(proposed)
        lexicon = learn_lexicon(transitions)
        # What commands earn is counted from the data whatever proposed the rules.
        reader = _Reader(lexicon, _REWARD_FEATURES)
        rewards = _reward_model(
            reader, reader.read(transitions), transitions,
            min_support=self.min_support, max_conditions=_REWARD_CONDITIONS,
        )  # fmt: skip
        rules = list(proposed.values())
        if self.calibrate:
            rules = self._calibrated(rules, lexicon, transitions)
        stats.refuted = len(proposed) - len(rules)
        stats.kept = len(rules)
        meta = {
            "env": ",".join(sorted({t.env for t in transitions})),
            "distiller": "llm",
            "transitions": len(transitions),
            "settings": {
                "batch": self.batch,
                "max_scenes": self.max_scenes,
                "calibrate": self.calibrate,
            },
        }
        return RuleSet(rules, lexicon, meta=meta, rewards=rewards)

    def _calibrated(
        self, rules: list[Rule], lexicon: Lexicon, transitions: Sequence[Transition]
    ) -> list[Rule]:
        probe = RuleSet(rules, lexicon)
        tally: dict[Rule, list[int]] = {r: [0, 0] for r in rules}
        for t in transitions:
            for rule, atom in probe.matches(t.before, t.action, t.observation):
                counts = tally[rule]
                counts[0] += 1
                counts[1] += _happened(rule, atom, t, lexicon)
        kept = []
        for rule in rules:
            n, h = tally[rule]
            if n < self.min_support:
                continue
            confidence = h / n if rule.predicts else 1.0 - h / n
            if confidence >= self.min_confidence:
                kept.append(Rule(rule.source, rule.template, rule.conditions, rule.atom,
                                 rule.predicts, n, h, confidence))  # fmt: skip
        return kept


def _happened(rule: Rule, atom: Atom, t: Transition, lexicon: Lexicon) -> bool:
    """Whether a bound effect happened at ``t`` (command) or holds after it (observation)."""
    if rule.source == "observation":
        objects = t.after.objects(atom.subject, atom.relation)
        if atom.op == "remove":
            return atom.object not in objects
        if atom.op == "add":
            return atom.object in objects
        return objects == (atom.object,)
    act, ev = apply_atoms(t.before, [atom], lexicon.multi_relations)
    predicted = act if atom.kind == "action" else ev
    true = t.action_delta if atom.kind == "action" else t.event_delta
    if not predicted.added and not predicted.removed:
        return False
    return set(predicted.added) <= set(true.added) and set(predicted.removed) <= set(true.removed)


# --- throughput ------------------------------------------------------------------------


def bench_transitions(episodes: int = 4, horizon: int = 200) -> list[Transition]:
    """Real transitions for the benchmark: random play of Vault (seeds 0..episodes-1)."""
    import gymnasium

    import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
    from wmkit.knowledge.recording import Recorder, record_random

    rows: list[dict[str, Any]] = []
    env = gymnasium.make("wmkit/Vault-v0", ground_truth=True, horizon=horizon)
    record_random(Recorder(env, lambda e: rows.extend(e.steps), env_name="vault"), range(episodes))
    return list(transitions_from_rows(rows))


def bench_counting(
    n: int = 200_000, *, transitions: Sequence[Transition] | None = None, repeat: int = 3
) -> dict[str, float]:
    """Measure distillation throughput on one core, against a raw baseline in the same run.

    Reads ``transitions`` (default: four random Vault episodes of 200 steps) into
    examples, tiles them to ``n`` examples and times the counting pass (best of
    ``repeat``) against the barest count of the same examples: a ``Counter`` of their
    command keys (one increment per transition).

    Returns:
        ``transitions``; ``read_per_s`` (transitions read into examples per second);
        ``count_per_s`` (examples counted per second; the target is >= 100k/s);
        ``raw_per_s`` and ``ratio`` (count time / raw time); ``fit_per_s`` (a whole
        ``CountingDistiller.fit``, lexicon to rules, in transitions per second);
        ``rules``.
    """
    if transitions is None:
        transitions = bench_transitions()
    if not transitions:
        raise ValueError("bench_counting needs at least one transition")
    lexicon = learn_lexicon(transitions)
    reader = _Reader(lexicon, 24)
    start = time.perf_counter()
    examples = reader.read(transitions)
    read_s = time.perf_counter() - start
    tiled = (examples * (n // len(examples) + 1))[:n]

    def best(fn: Callable[[], Any]) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    count_s = best(lambda: _count(tiled))
    raw_s = best(lambda: Counter(e.key for e in tiled))
    start = time.perf_counter()
    rules = CountingDistiller().fit(transitions)
    fit_s = time.perf_counter() - start
    return {
        "transitions": len(transitions),
        "read_per_s": len(transitions) / read_s,
        "count_per_s": n / count_s,
        "raw_per_s": n / raw_s,
        "ratio": count_s / raw_s,
        "fit_per_s": len(transitions) / fit_s,
        "rules": len(rules),
    }


if __name__ == "__main__":  # python -m wmkit.trainers.distill [n]
    import sys

    for key, value in bench_counting(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000).items():
        print(f"{key:12s} {value:,.1f}")
