"""Rules: condition -> effect regularities of an environment, and predicting with them.

A :class:`Rule` says what one kind of step does to the facts. It has a *key*, an
*effect* and *preconditions*:

* the key is a text template with typed entity slots, either of the command
  (``source="command"``: ``"unlock {door} with {key}"``) or of one sentence of the
  observation (``source="observation"``: ``"the {door} swings shut on its spring"``);
* the effect is one fact-delta template, an :class:`Atom`: ``{door}.state := "open"``
  (``set``: replaces every object of ``(subject, relation)``), ``add``/``remove`` (for
  relations with several objects, such as Jericho's ``attr``), ``inc``/``dec`` (a
  number changed by a slot's value: ``adjust {light} by {v}``); each atom is
  ``action``- or ``event``-driven; an object ``@player.at`` is the object of that fact
  of a self id before the step (``drop {key}``: ``{key}.in := "@player.at"``);
* preconditions (command rules only) are facts of the slotted entities in the state
  before the step: ``{door}.state == "closed"``, ``{door}.latch == "down"``, and
  identities ``{door} == "door:willow"`` when a rule holds for one entity only (which
  key fits which door varies by seed).

A rule with ``predicts=False`` is a *failure* rule: under its preconditions the
effect does not happen (the key that does not open the door). Command rules form a
decision list: for each effect of a command, the matching rule with the highest
:attr:`Rule.strength` (the lower confidence bound, so that support counts) decides
(ties: more preconditions, then more support); with no match the effect does not
happen. Observation rules are read as statements: after a sentence of
that template, the effect holds (a ``set`` that already holds changes nothing). An
observation effect may be about an entity the sentence describes instead of naming:
its subject ``?relation={slot}`` is the one entity whose ``relation`` is the slot's
value ("the door east of the Attic closes" -> ``?west={room}``), or two such pairs
joined by ``&``. A line is read whole and, when it holds several sentences, sentence
by sentence too.

Generalising across names. Text is tokenised (lower case; numbers keep their sign and
lose thousands separators) and every mention of an entity becomes a slot named by
the entity's type: ids look like ``type:name`` (``door:willow``, said "willow door";
``parcel:px-1514``, said "PX-1514"), plain ids (TextWorld, Jericho) are type ``obj``.
The surface forms tried, most specific first: the id, ``name type``, ``name types``,
``type name``, then the bare ``name`` and the bare ``type`` (the latter when only one
entity has that type); a form claimed by two entities at the same rank, or (for the
bare forms) equal to a literal value, is not used. ``player`` is never named. Numbers
become ``{v}`` slots everywhere; other literal values (``closed``, ``81 garden rd``)
become ``{v}`` slots in observations, and in commands only for *open-valued*
relations (those with many distinct values, like addresses), so that ``open {door}``
stays a command and does not turn into ``{v} {door}``. Slots are numbered by first
appearance (``{room}``, ``{room2}``). At prediction time a sentence whose exact
template is unknown (it names an entity the state does not hold yet) is matched
against the known templates as regular expressions, and each captured span is turned
into an id by the surface forms seen for its type when the rules were learned.

A :class:`RuleSet` keeps the rules and the :class:`Lexicon` they were read with;
``predict(state, action, observation)`` returns the predicted :class:`Delta`
(``predict_split`` splits it into action- and event-driven parts). It is saved as
JSONL: a header row (format, lexicon, provenance) then one row per rule, both
validated with pydantic on load. A rule set also carries what commands earn, its
:class:`~wmkit.knowledge.rewards.RewardModel` (``estimate_reward``; its groups are
rows of the same file). ``to_knowledge_delta`` exports the rules as the
``rules`` part of a :class:`~wmkit.knowledge.delta.KnowledgeDelta` (condition and
action as text in the syntax :func:`rule_text` writes and :func:`parse_rule_text`
reads), for merging into a world graph.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import math
import os
import re
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wmkit.knowledge.delta import DeltaEntity, DeltaRule, KnowledgeDelta
from wmkit.knowledge.rewards import RewardEstimate, RewardModel
from wmkit.world.types import Delta, Fact, WorldState

__all__ = [
    "OPS",
    "RULES_FORMAT",
    "SELF_IDS",
    "Abstraction",
    "Atom",
    "Feature",
    "Lexicon",
    "Rule",
    "RuleSet",
    "RulesError",
    "StateIndex",
    "Surfaces",
    "abstract",
    "apply_atoms",
    "describe",
    "described",
    "entity_surfaces",
    "features",
    "holders",
    "literal_surfaces",
    "parse_rule_text",
    "rule_text",
    "sentences",
    "slot_type",
    "tokenize",
    "wilson_lower",
]

RULES_FORMAT = "wmkit.rules/1"
"""The ``format`` of a rules file's header row."""

SELF_IDS = frozenset({"player"})
"""Entity ids the text never names (the player is "you"); their facts are
preconditions of every command, and they may be the subject of observation effects."""

OPS = ("set", "add", "remove", "inc", "dec")
"""Effect operations: ``set`` replaces every object of ``(subject, relation)``;
``add``/``remove`` one fact of a relation with several objects; ``inc``/``dec`` change
a number by the object (a number or a slot holding one)."""

Kind = Literal["action", "event"]
Source = Literal["command", "observation"]

Feature = tuple[str, str, str]
"""A precondition ``(subject, relation, value)``. Subject: a slot (``"{door}"``) or a
self id (``"player"``); relation ``"="`` states the slot's identity (value: an entity
id or a literal); a value is a slot when it names a slotted entity."""

# Numbers first (signed, thousands separators), then words with inner ' # : - joins.
_TOKEN = re.compile(r"[+-]?\d+(?:[.,]\d+)*|[^\W_]+(?:['#:-][^\W_]+)*")
_NUMBER = re.compile(r"[+-]?\d+(?:[.,]\d+)*")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"'])")
_SLOT = re.compile(r"\{([^{}\s]+)\}")
_DUPLICATE_SUFFIX = re.compile(r"\s*(?:#\d+|\(\S+\))$")  # "door#42", "key (k_1)"
_MAX_SURFACE = 6  # longest surface form tried, in tokens
_MIN_WORDS = 2  # fewest literal words of a template matched as a regex
_MAX_NEW = 4  # longest span read as a name or value the state does not hold, in tokens
_CACHE = 4096  # states (and sentences) whose reading a RuleSet keeps


class RulesError(ValueError):
    """A rules file or rule text that cannot be read; the message says where and why."""


# --- reading text ----------------------------------------------------------------------


def tokenize(text: str) -> tuple[str, ...]:
    """Split text into lower-case tokens; numbers lose thousands separators (``13,000``).

    ``"Unlock the willow door with the brass key."`` -> ``("unlock", "the", "willow",
    "door", "with", "the", "brass", "key")``; ``"PX-1514"`` -> ``("px-1514",)``;
    ``"by +40"`` -> ``("by", "+40")``.
    """
    return tuple(
        t.replace(",", "") if t[-1].isdigit() and _NUMBER.fullmatch(t) else t
        for t in _TOKEN.findall(text.casefold())
    )


def sentences(observation: str) -> list[str]:
    """The units of an observation that rules read: its lines, then their sentences.

    Each line, then, for a line holding several sentences (split at ``.``/``!``/``?``
    before a capital), each sentence. A line keeps what its sentences say together
    ("You read the note. It says 1936."); its sentences recur more often than the whole
    line does.
    """
    out = []
    for line in observation.splitlines():
        line = line.strip()
        if not line:
            continue
        out.append(line)
        parts = _SENTENCE_END.split(line)
        if len(parts) > 1:
            out.extend(p for p in parts if p)
    return out


def slot_type(entity: str) -> str:
    """The slot type of an entity id: the ``type`` of ``type:name``, else ``"obj"``."""
    head, sep, _ = entity.partition(":")
    return head if sep and head and head.isidentifier() else "obj"


def _split_id(entity: str) -> tuple[str, str] | None:
    head, sep, name = entity.partition(":")
    return (head, name) if sep and head and name and head.isidentifier() else None


def _is_number(text: str) -> bool:
    return _NUMBER.fullmatch(text) is not None


def _number(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _format_number(value: float) -> str:
    return str(int(value)) if value == int(value) else repr(value)


class Surfaces:
    """A table from token sequences to what they name: ``tokens -> (type, value, form)``.

    ``starts`` maps each first token to the longest sequence starting with it, so that
    reading a text only looks further at tokens that can begin a mention.
    """

    __slots__ = ("starts", "table")

    def __init__(self, table: Mapping[tuple[str, ...], tuple[str, str, str]]) -> None:
        self.table = dict(table)
        self.starts: dict[str, int] = {}
        for key in self.table:
            if self.starts.get(key[0], 0) < len(key):
                self.starts[key[0]] = len(key)

    def __len__(self) -> int:
        return len(self.table)


@functools.lru_cache(maxsize=1 << 16)  # entities recur across states and steps
def _forms(entity: str) -> tuple[str, tuple[tuple[int, str, tuple[str, ...]], ...]]:
    """An entity's slot type and its surface forms ``(rank, form, tokens)``, bare type last."""
    parts = _split_id(entity)
    if parts is None:
        plain = tokenize(_DUPLICATE_SUFFIX.sub("", entity))
        return "obj", ((0, "id", tokenize(entity)), (2, "name", plain))
    kind, name = parts
    nt, tt = tokenize(name), tokenize(kind)
    forms = [(0, "id", tokenize(entity))]
    if nt and tt:
        forms += [
            (1, "name_type", nt + tt),
            (1, "name_types", (*nt, *tt[:-1], tt[-1] + "s")),
            (1, "type_name", tt + nt),
        ]
    forms += [(2, "name", nt), (3, "type", tt)]
    return kind, tuple(forms)


def entity_surfaces(entities: Iterable[str], literals: Collection[str] = ()) -> Surfaces:
    """How the text names each entity; see the module docstring for the forms and ranks.

    Args:
        entities: entity ids (``type:name`` or plain names); ``SELF_IDS`` are skipped.
        literals: literal values (as text) a bare name or type must not shadow.
    """
    found = [(*_forms(e), e) for e in dict.fromkeys(entities) if e not in SELF_IDS]
    per_type: dict[str, int] = {}
    for kind, _, _ in found:
        per_type[kind] = per_type.get(kind, 0) + 1
    best: dict[tuple[str, ...], tuple[int, str | None, str, str]] = {}
    for kind, forms, e in found:
        for rank, form, toks in forms:
            if not toks or (rank >= 2 and " ".join(toks) in literals):
                continue
            if rank == 3 and per_type[kind] > 1:
                continue  # the bare type names an entity only when it is the only one
            held = best.get(toks)
            if held is None or rank < held[0]:
                best[toks] = (rank, e, kind, form)
            elif rank == held[0] and held[1] != e:
                best[toks] = (rank, None, kind, form)  # two entities: ambiguous
    return Surfaces({k: (t, e, f) for k, (_, e, t, f) in best.items() if e is not None})


_SURFACES: OrderedDict[tuple[frozenset[str], frozenset[str]], Surfaces] = OrderedDict()


def _cached_surfaces(entities: frozenset[str], literals: frozenset[str]) -> Surfaces:
    """``entity_surfaces``, kept for recent entity sets (an episode's states share most)."""
    key = (entities, literals)
    found = _SURFACES.get(key)
    if found is None:
        found = _SURFACES[key] = entity_surfaces(sorted(entities), literals)
        if len(_SURFACES) > 256:
            _SURFACES.popitem(last=False)
    else:
        _SURFACES.move_to_end(key)
    return found


def literal_surfaces(values: Iterable[str]) -> Surfaces:
    """A table naming literal values (``"81 garden rd"``, ``"in_transit"``) as ``{v}``."""
    table = {}
    for value in values:
        toks = tokenize(value)
        if toks and not (len(toks) == 1 and _is_number(toks[0])):
            table.setdefault(toks, ("v", value, "literal"))
    return Surfaces(table)


class Abstraction(NamedTuple):
    """A text read into a template.

    Attributes:
        template: the tokens joined by spaces, each mention replaced by its slot
            (``"unlock {door} with {key}"``).
        slots: ``(slot, value)`` pairs in order of first appearance (``("{door}",
            "door:willow")``); a value named twice keeps its first slot.
        forms: ``(slot type, form)`` of each mention (how the text named it).
    """

    template: str
    slots: tuple[tuple[str, str], ...]
    forms: tuple[tuple[str, str], ...] = ()


def abstract(tokens: Sequence[str], *tables: Surfaces, numbers: bool = True) -> Abstraction:
    """Replace mentions in ``tokens`` by typed slots, longest mention first.

    Tables are tried in order at each position (entities before literals); with
    ``numbers`` every number token not inside a longer mention becomes a ``{v}`` slot.
    """
    out: list[str] = []
    slot_of: dict[str, str] = {}
    slots: list[tuple[str, str]] = []
    forms: list[tuple[str, str]] = []
    used: dict[str, int] = {}
    i, n = 0, len(tokens)
    while i < n:
        token = tokens[i]
        hit = None
        for table in tables:
            longest = table.starts.get(token)
            if longest is None:
                continue
            for length in range(min(longest, n - i, _MAX_SURFACE), 0, -1):
                found = table.table.get(tuple(tokens[i : i + length]))
                if found is not None and (hit is None or length > hit[0]):
                    hit = (length, found)
                    break
        if hit is None and numbers and _is_number(token):
            hit = (1, ("v", token, "number"))
        if hit is None:
            out.append(token)
            i += 1
            continue
        length, (kind, value, form) = hit
        slot = slot_of.get(value)
        if slot is None:
            used[kind] = used.get(kind, 0) + 1
            slot = f"{{{kind}}}" if used[kind] == 1 else f"{{{kind}{used[kind]}}}"
            slot_of[value] = slot
            slots.append((slot, value))
            forms.append((kind, form))
        out.append(slot)
        i += length
    return Abstraction(" ".join(out), tuple(slots), tuple(forms))


class StateIndex:
    """What reading text against one state needs, built once per state, parts on first use.

    Attributes:
        state: the state.
        by_subject: subject -> its ``(relation, object)`` pairs.
    """

    __slots__ = ("_holders", "_literals", "_surfaces", "by_subject", "state")

    def __init__(self, state: WorldState, literals: Collection[str] = ()) -> None:
        self.state = state
        by_subject: dict[str, list[tuple[str, str]]] = {}
        for s, r, o in state:
            by_subject.setdefault(s, []).append((r, o))
        self.by_subject = by_subject
        self._literals = literals
        self._surfaces: Surfaces | None = None
        self._holders: dict[tuple[str, str], list[str]] | None = None

    @classmethod
    def updated(cls, before: StateIndex, state: WorldState, changes: Iterable[Delta]) -> StateIndex:
        """The index of ``state``, built from ``before``'s in the size of the change.

        ``state`` must be ``before.state`` with each delta of ``changes`` applied in
        order (removed, then added); when the counts disagree the index is built from
        ``state`` afresh.
        """
        by_subject = dict(before.by_subject)
        holders_ = None if before._holders is None else dict(before._holders)
        for delta in changes:
            for s, r, o in delta.removed:
                pairs = by_subject.get(s)
                if pairs is not None and (r, o) in pairs:
                    by_subject[s] = [p for p in pairs if p != (r, o)]
                    if holders_ is not None:
                        holders_[(r, o)] = [x for x in holders_[(r, o)] if x != s]
            for s, r, o in delta.added:
                pairs = by_subject.get(s, [])
                if (r, o) not in pairs:
                    by_subject[s] = [*pairs, (r, o)]
                    if holders_ is not None:
                        holders_[(r, o)] = [*holders_.get((r, o), ()), s]
        by_subject = {s: pairs for s, pairs in by_subject.items() if pairs}
        if sum(map(len, by_subject.values())) != len(state):
            return cls(state, before._literals)
        index = cls.__new__(cls)
        index.state, index.by_subject, index._literals = state, by_subject, before._literals
        index._surfaces = None
        index._holders = None if holders_ is None else {k: v for k, v in holders_.items() if v}
        return index

    @property
    def surfaces(self) -> Surfaces:
        """How the text names the state's entities (:func:`entity_surfaces`)."""
        if self._surfaces is None:
            entities = set(self.by_subject)
            entities.update(o for _, _, o in self.state if ":" in o and _split_id(o))
            self._surfaces = _cached_surfaces(frozenset(entities), frozenset(self._literals))
        return self._surfaces

    def is_entity(self, value: str) -> bool:
        """Whether ``value`` names an entity: a subject of the state or a typed id."""
        return value in self.by_subject or _split_id(value) is not None

    @property
    def holders(self) -> dict[tuple[str, str], list[str]]:
        """``(relation, object)`` -> the subjects holding it (built on first use)."""
        if self._holders is None:
            self._holders = holders(self.by_subject)
        return self._holders


def holders(
    by_subject: Mapping[str, Sequence[tuple[str, str]]],
) -> dict[tuple[str, str], list[str]]:
    """The reverse index of a state: ``(relation, object)`` -> subjects, in subject order."""
    found: dict[tuple[str, str], list[str]] = {}
    for s, pairs in by_subject.items():
        for pair in pairs:
            found.setdefault(pair, []).append(s)
    return found


def describe(
    entity: str,
    by_subject: Mapping[str, Sequence[tuple[str, str]]],
    holders_: Mapping[tuple[str, str], Sequence[str]],
    slot_of: Mapping[str, str],
) -> str | None:
    """A description of ``entity`` through named values, or None if there is none.

    The description is ``?relation={slot}`` (the one entity whose ``relation`` is the
    slot's value: "the door east of the Attic" is ``?west={room}``), or two such
    pairs joined by ``&`` ("the hotel in the centre, in Lyon":
    ``?area={v2}&city={v}``); the first unique one in sorted order wins.
    """
    named = sorted((r, slot_of[o], o) for r, o in by_subject.get(entity, ()) if o in slot_of)
    for r, slot, o in named:
        if list(holders_.get((r, o), ())) == [entity]:
            return f"?{r}={slot}"
    for (r1, s1, o1), (r2, s2, o2) in itertools.combinations(named, 2):
        both = set(holders_.get((r1, o1), ())) & set(holders_.get((r2, o2), ()))
        if both == {entity}:
            return f"?{r1}={s1}&{r2}={s2}"
    return None


def described(subject: str, values: Mapping[str, str], index: StateIndex) -> str | None:
    """The entity a ``?relation={slot}[&...]`` subject names in ``index``'s state, or None."""
    found: set[str] | None = None
    for part in subject[1:].split("&"):
        relation, _, slot = part.partition("=")
        value = values.get(slot)
        if value is None:
            return None
        subjects = set(index.holders.get((relation, value), ()))
        found = subjects if found is None else found & subjects
        if not found:
            return None
    return next(iter(found)) if found is not None and len(found) == 1 else None


def features(
    by_subject: Mapping[str, Sequence[tuple[str, str]]],
    slots: Sequence[tuple[str, str]],
    static_relations: Collection[str] = (),
) -> frozenset[Feature]:
    """The preconditions a state offers for a command read into ``slots``.

    For each slot: its identity ``(slot, "=", value)`` and, for an entity, each of its
    facts ``(slot, relation, object)`` with the object replaced by its slot when the
    command names it; for each self id (``player``) its facts likewise. A fact of a
    relation in ``static_relations`` whose object is another, unnamed entity (a door's
    sides) is left out: it only restates which entity this is.
    """
    slot_of = {value: slot for slot, value in reversed(slots)}
    out: list[Feature] = []

    def facts_of(subject: str, name: str) -> None:
        for r, o in by_subject.get(subject, ()):
            bound = slot_of.get(o)
            if bound is not None:
                o = bound
            elif r in static_relations and (o in by_subject or _split_id(o) is not None):
                continue
            out.append((name, r, o))

    for slot, value in slots:
        out.append((slot, "=", value))
        facts_of(value, slot)
    for self_id in SELF_IDS:
        facts_of(self_id, self_id)
    return frozenset(out)


# --- rules -----------------------------------------------------------------------------


class Atom(NamedTuple):
    """One fact-delta template: ``kind``-driven ``op`` on ``(subject, relation, object)``.

    Subject and object are slots (``"{door}"``) or literal strings (``"player"``,
    ``"open"``, ``"door:willow"``).
    """

    kind: Kind
    op: str
    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class Rule:
    """A condition -> effect rule; see the module docstring.

    Attributes:
        source: whether ``template`` reads the command or an observation sentence.
        template: the key, with slots.
        conditions: preconditions over the state before the step, sorted; empty for
            observation rules.
        atom: the effect.
        predicts: True when the effect happens under the conditions, False for a
            failure rule (it does not).
        support: steps whose key matched and whose state met the conditions.
        hits: of those, the steps where the effect happened.
        confidence: share of ``support`` agreeing with ``predicts`` (in [0, 1]).
    """

    source: Source
    template: str
    conditions: tuple[Feature, ...]
    atom: Atom
    predicts: bool = True
    support: int = 0
    hits: int = 0
    confidence: float = 1.0

    @property
    def id(self) -> str:
        """A stable id from the rule's key, conditions, effect and polarity."""
        text = json.dumps(
            [self.source, self.template, self.conditions, self.atom, self.predicts]
        ).encode()
        return "rule:" + hashlib.blake2b(text, digest_size=8).hexdigest()

    @property
    def strength(self) -> float:
        """How far the rule can be trusted: the 95% lower bound of its confidence.

        The Wilson lower bound over its support; the bare confidence for a rule with no
        support yet (read from text). Four steps out of four (0.51) count less than 950
        of 1000 (0.94): a rule resting on a handful of steps does not outrank a broad one.
        """
        if self.support <= 0:
            return self.confidence
        return wilson_lower(self.confidence, self.support)

    @property
    def entities(self) -> tuple[str, ...]:
        """Entity ids the rule names literally (identities, grounded facts), sorted."""
        found = {v for _, rel, v in self.conditions if rel == "=" and _split_id(v)}
        found |= {v for s, _, v in self.conditions if _split_id(v)}
        found |= {x for x in (self.atom.subject, self.atom.object) if _split_id(x)}
        return tuple(sorted(found))


class Lexicon(NamedTuple):
    """How the rules read text and facts; learned with them, saved in the header.

    Attributes:
        literals: literal values (non-entity objects) seen in the facts; named ``{v}``
            in observations.
        open_literals: the literals of open-valued relations; named ``{v}`` in
            commands too.
        open_relations: the open-valued relations (many distinct literals: addresses);
            a value read from text that is neither a known literal nor a number is
            only accepted as the object of one of these.
        static_relations: relations none of whose facts was ever removed in the data.
        multi_relations: relations with several objects per subject (``add``/``remove``).
        styles: per slot type, the surface forms seen for it, most frequent first (to
            turn text captured by a template back into an id); forms seen rarely are
            left out by the distiller.
    """

    literals: frozenset[str] = frozenset()
    open_literals: frozenset[str] = frozenset()
    open_relations: frozenset[str] = frozenset()
    static_relations: frozenset[str] = frozenset()
    multi_relations: frozenset[str] = frozenset()
    styles: Mapping[str, tuple[str, ...]] = {}


class _Header(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: Literal["wmkit.rules/1"]
    env: str = ""
    distiller: str = ""
    transitions: int = Field(default=0, ge=0)
    rules: int = Field(default=0, ge=0)
    literals: list[str] = []
    open_literals: list[str] = []
    open_relations: list[str] = []
    static_relations: list[str] = []
    multi_relations: list[str] = []
    styles: dict[str, list[str]] = {}
    meta: dict[str, Any] = {}
    rewards: int = Field(default=0, ge=0)


class _RewardRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: Literal["reward"]
    template: str = Field(min_length=1)
    conditions: list[tuple[str, str, str]] = []
    support: int = Field(ge=1)
    mean: float = Field(allow_inf_nan=False)
    sd: float = Field(ge=0.0, allow_inf_nan=False)


class _RuleRow(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    source: Source
    template: str = Field(min_length=1)
    conditions: list[tuple[str, str, str]] = []
    kind: Kind
    op: Literal["set", "add", "remove", "inc", "dec"]
    subject: str = Field(min_length=1)
    relation: str = Field(min_length=1)
    object: str
    predicts: bool = True
    support: int = Field(ge=0)
    hits: int = Field(ge=0)
    confidence: float = Field(ge=0.0, le=1.0)


def _row(rule: Rule) -> dict[str, Any]:
    return {
        "id": rule.id,
        "source": rule.source,
        "template": rule.template,
        "conditions": [list(c) for c in rule.conditions],
        **rule.atom._asdict(),
        "predicts": rule.predicts,
        "support": rule.support,
        "hits": rule.hits,
        "confidence": round(rule.confidence, 6),
    }


def _from_row(row: _RuleRow) -> Rule:
    return Rule(
        row.source,
        row.template,
        tuple(sorted(tuple(c) for c in row.conditions)),
        Atom(row.kind, row.op, row.subject, row.relation, row.object),
        row.predicts,
        row.support,
        row.hits,
        row.confidence,
    )


def _template_regex(template: str) -> re.Pattern[str]:
    parts, pos = [], 0
    for m in _SLOT.finditer(template):
        parts.append(re.escape(template[pos : m.start()]))
        parts.append(f"(?P<s{len(parts)}>.+?)")
        pos = m.end()
    parts.append(re.escape(template[pos:]))
    return re.compile("".join(parts))


class _Templates:
    """Templates matched as regular expressions, for text naming unknown entities."""

    def __init__(self, templates: Iterable[str], min_words: int) -> None:
        self.by_first: dict[str, list[tuple[str, re.Pattern[str], list[str]]]] = {}
        for template in templates:
            slots = _SLOT.findall(template)
            if not slots or len(_SLOT.sub("", template).split()) < min_words:
                # No slot: only the exact text matches, found without a regex. Too few
                # words: the regex would match about any sentence ("{rule} {v}").
                continue
            first = template.split(" ", 1)[0]
            key = "" if _SLOT.fullmatch(first) else first
            entry = (template, _template_regex(template), [f"{{{s}}}" for s in slots])
            self.by_first.setdefault(key, []).append(entry)
        self.cache: OrderedDict[str, list[tuple[str, list[tuple[str, str]]]]] = OrderedDict()

    def match(self, text: str) -> list[tuple[str, list[tuple[str, str]]]]:
        """The most specific templates matching ``text`` whole, with each slot's capture."""
        found = self.cache.get(text)
        if found is not None:
            self.cache.move_to_end(text)
            return found
        found = []
        first = text.split(" ", 1)[0]
        best = -1
        for template, regex, names in (*self.by_first.get(first, ()), *self.by_first.get("", ())):
            m = regex.fullmatch(text)
            if m is None:
                continue
            # The template with the most literal words is the most specific reading.
            words = len(_SLOT.sub("", template).split())
            if words > best:
                best, found = words, []
            if words == best:
                found.append((template, list(zip(names, m.groups(), strict=True))))
        self.cache[text] = found
        if len(self.cache) > _CACHE * 8:
            self.cache.popitem(last=False)
        return found


@dataclass
class RuleSet:
    """Rules and the lexicon they were read with; predicts the delta of a step.

    Args:
        rules: the rules (any order).
        lexicon: how the rules read text (from the distiller).
        min_confidence: observation rules below it are not used; command rules are
            used whatever their confidence (the distiller keeps only confident ones).
        meta: provenance kept in the header (env, distiller settings...).
        rewards: what commands earn (:class:`~wmkit.knowledge.rewards.RewardModel`,
            learned with the rules; empty: every command is neutral).

    ``predict`` is pure and cheap: rules are indexed by template, and what a state
    offers (its surface forms and facts by subject) is built once per state and kept
    for the last few thousand states.
    """

    rules: Sequence[Rule]
    lexicon: Lexicon = field(default_factory=Lexicon)
    min_confidence: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    rewards: RewardModel = field(default_factory=RewardModel)

    def __post_init__(self) -> None:
        self.rules = tuple(self.rules)
        self._command: dict[str, dict[Atom, list[Rule]]] = {}
        self._observation: dict[str, list[Rule]] = {}
        for rule in self.rules:
            if rule.source == "command":
                self._command.setdefault(rule.template, {}).setdefault(rule.atom, []).append(rule)
            elif rule.predicts and rule.confidence >= self.min_confidence:
                self._observation.setdefault(rule.template, []).append(rule)
        for groups in self._command.values():
            for group in groups.values():
                # Strongest first, then most specific: the first match decides.
                group.sort(key=lambda r: (-r.strength, -len(r.conditions), -r.support))
        # A command's first word anchors its regex ("take {key}"); a sentence needs two.
        self._command_regex = _Templates(self._command, 1)
        self._observation_regex = _Templates(self._observation, _MIN_WORDS)
        self._reward_regex = _Templates(self.rewards.templates, 1)
        self._open = literal_surfaces(self.lexicon.open_literals)
        self._literals = literal_surfaces(self.lexicon.literals)
        self._indexes: OrderedDict[WorldState, StateIndex] = OrderedDict()
        self._rewards: dict[tuple[WorldState, str], RewardEstimate] = {}

    def __len__(self) -> int:
        return len(self.rules)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules)

    # --- prediction --------------------------------------------------------------------

    def index(self, state: WorldState) -> StateIndex:
        """The :class:`StateIndex` of ``state`` (cached)."""
        found = self._indexes.get(state)
        if found is None:
            found = StateIndex(state, self.lexicon.literals)
            self._indexes[state] = found
            if len(self._indexes) > _CACHE:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(state)
        return found

    def predict(
        self, state: WorldState, action: str | None, observation: str | None = None
    ) -> Delta:
        """Predict the change of one step (action- and event-driven parts together).

        Args:
            state: the state before the step.
            action: the command sent (None at an episode's start).
            observation: what the env said after it; None to predict before acting (a
                simulator), which uses command rules only.

        Returns:
            The predicted delta relative to ``state``.
        """
        act, event = self.predict_split(state, action, observation)
        if not event.added and not event.removed:
            return act
        added = set(act.added) | set(event.added)
        removed = (set(act.removed) | set(event.removed)) - added
        return Delta(tuple(sorted(added - set(removed))), tuple(sorted(removed)))

    def predict_split(
        self, state: WorldState, action: str | None, observation: str | None = None
    ) -> tuple[Delta, Delta]:
        """Like :meth:`predict`, split into ``(action-driven, event-driven)`` deltas.

        Observation rules come first (the text is evidence of what happened), then the
        command's: an effect on a ``(subject, relation)`` already set by an earlier
        effect is ignored.
        """
        index = self.index(state)
        atoms: list[Atom] = []
        if observation:
            for sentence in sentences(observation):
                atoms += self._observe(index, tokenize(sentence))
        if action:
            atoms += self._command_atoms(index, tokenize(action))
        return apply_atoms(state, atoms, self.lexicon.multi_relations)

    def matches(
        self, state: WorldState, action: str | None, observation: str | None = None
    ) -> list[tuple[Rule, Atom]]:
        """Every rule whose key and preconditions match the step, with its bound effect.

        Unlike :meth:`predict`, no rule shadows another: this is what scoring rules on
        data needs. Rules whose effect names a slot the text did not fill are left out.
        """
        index = self.index(state)
        found: list[tuple[Rule, Atom]] = []
        if observation:
            for sentence in sentences(observation):
                toks = tokenize(sentence)
                read = self._read(
                    index, toks, self._literals, self._observation, self._observation_regex
                )
                for template, values in read:
                    for rule in self._observation[template]:
                        atom = self._bind(rule.atom, values, index)
                        if atom is not None:
                            found.append((rule, atom))
        if action:
            static = self.lexicon.static_relations
            toks = tokenize(action)
            for template, values in self._read(
                index, toks, self._open, self._command, self._command_regex
            ):
                have = features(index.by_subject, list(values.items()), static)
                for group in self._command[template].values():
                    for rule in group:
                        atom = self._bind(rule.atom, values, index)
                        if atom is not None and all(c in have for c in rule.conditions):
                            found.append((rule, atom))
        return found

    def _read(
        self,
        index: StateIndex,
        tokens: Sequence[str],
        literals: Surfaces,
        rules: Mapping,
        regex: _Templates,
    ) -> list[tuple[str, dict[str, str]]]:
        """The templates of ``rules`` that ``tokens`` matches, each with its slot values.

        The exact template first; else those of ``regex`` (``rules``' templates) that
        match the text, each captured span read as an entity or a value.
        """
        read = abstract(tokens, index.surfaces, literals)
        if read.template in rules:
            return [(read.template, dict(read.slots))]
        found = []
        for template, captured in regex.match(" ".join(tokens)):
            values = {}
            for slot, text in captured:
                value = self._resolve(index, slot, text, literals)
                if value is None:
                    break
                values[slot] = value
            else:
                found.append((template, values))
        return found

    def _resolve(self, index: StateIndex, slot: str, text: str, literals: Surfaces) -> str | None:
        """The value a captured span names, for a slot of the given type, or None."""
        kind = _SLOT.fullmatch(slot).group(1).rstrip("0123456789")  # type: ignore[union-attr]
        toks = tuple(text.split(" "))
        if kind == "v":
            if len(toks) == 1 and _is_number(toks[0]):
                return toks[0]
            hit = literals.table.get(toks)
            if hit is not None:
                return hit[1]
        else:
            hit = index.surfaces.table.get(toks)
            if hit is not None:
                return hit[1] if hit[0] == kind else None
        # Free text: a new name or value, unless it holds a mention of its own (then
        # the template swallowed more than one slot's worth).
        if len(toks) > _MAX_NEW or abstract(toks, index.surfaces, literals, numbers=False).slots:
            return None
        if kind in ("v", "obj"):
            return text
        kt = tokenize(kind)
        styles = self.lexicon.styles.get(kind, ())
        # Forms that carry the type word first: "rule r14" is r14 when rules are said
        # both "R3" and "rule R3".
        for form in sorted(styles, key=lambda f: f == "name"):
            name: tuple[str, ...] | None = None
            if form == "name":
                name = toks
            elif form == "name_type" and toks[-len(kt) :] == kt and len(toks) > len(kt):
                name = toks[: -len(kt)]
            elif form == "type_name" and toks[: len(kt)] == kt and len(toks) > len(kt):
                name = toks[len(kt) :]
            elif form == "name_types" and len(toks) > 1 and toks[-1] == kt[-1] + "s":
                name = toks[:-1]
            if name:
                return f"{kind}:{' '.join(name)}"
        return None

    def _bind(self, atom: Atom, values: Mapping[str, str], index: StateIndex) -> Atom | None:
        """``atom`` with its slots filled, or None when a slot is unfilled or misfits.

        Free text read into ``{v}`` is accepted only for open-valued relations: "you
        listen to the silence" sets no door's state.
        """
        if atom.subject[:1] == "?":
            subject = described(atom.subject, values, index)
            if subject is None:
                return None
            atom = atom._replace(subject=subject)
        bound = _bind(atom, values)
        if bound is not None and bound.object[:1] == "@":
            # A reference to a fact of a self id held before the step (@player.at).
            self_id, _, relation = bound.object[1:].partition(".")
            value = index.state.value(self_id, relation)
            return None if value is None else bound._replace(object=value)
        if bound is None or atom.object[:2] != "{v" or atom.op in ("inc", "dec"):
            return bound
        value = bound.object
        lex = self.lexicon
        if value in lex.literals or _is_number(value) or atom.relation in lex.open_relations:
            return bound
        return None

    def _observe(self, index: StateIndex, tokens: Sequence[str]) -> list[Atom]:
        atoms = []
        read = self._read(index, tokens, self._literals, self._observation, self._observation_regex)
        for template, values in read:
            for rule in self._observation[template]:
                atom = self._bind(rule.atom, values, index)
                if atom is not None:
                    atoms.append(atom)
        return atoms

    def _command_atoms(self, index: StateIndex, tokens: Sequence[str]) -> list[Atom]:
        atoms = []
        static = self.lexicon.static_relations
        for template, values in self._read(
            index, tokens, self._open, self._command, self._command_regex
        ):
            have = features(index.by_subject, list(values.items()), static)
            for group in self._command[template].values():
                for rule in group:
                    if all(c in have for c in rule.conditions):
                        if rule.predicts:
                            atom = self._bind(rule.atom, values, index)
                            if atom is not None:
                                atoms.append(atom)
                        break
        return atoms

    def estimate_reward(self, state: WorldState, action: str | None) -> RewardEstimate:
        """What ``action`` sent in ``state`` earns, by the reward model, and its support.

        The command is read as command rules read it (its template, the
        preconditions the state offers its slots); a command the model has never seen
        is neutral (0, support 0).
        """
        if not action or not len(self.rewards):
            return RewardEstimate()
        found = self._rewards.get((state, action))
        if found is not None:
            return found
        index = self.index(state)
        static = self.lexicon.static_relations
        found = RewardEstimate()
        for template, values in self._read(
            index, tokenize(action), self._open, self.rewards.templates, self._reward_regex
        ):
            found = self.rewards.estimate(
                template, features(index.by_subject, list(values.items()), static)
            )
            break
        if len(self._rewards) >= _CACHE * 8:
            self._rewards.clear()
        self._rewards[(state, action)] = found
        return found

    def reward(
        self, state: WorldState, action: str | None, after: WorldState | None = None,
        token: Any = None,
    ) -> float:  # fmt: skip
        """The predicted reward of a step (the rules simulator's hook).

        The reward model's estimate, cautious (:attr:`RewardEstimate.cautious`: the
        mean less one standard error), so a search does not gamble on a command whose
        logged rewards went either way. ``after`` and ``token`` are not read: what a
        command earns is learned from the state it was sent in.
        """
        return self.estimate_reward(state, action).cautious

    # --- storage -----------------------------------------------------------------------

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the rules as JSONL; return the path.

        A header row, then the rules sorted by template and id, then the reward
        model's groups (rows with ``"source": "reward"``).
        """
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        lex = self.lexicon
        header = _Header(
            format=RULES_FORMAT,
            env=str(self.meta.get("env", "")),
            distiller=str(self.meta.get("distiller", "")),
            transitions=int(self.meta.get("transitions", 0)),
            rules=len(self.rules),
            literals=sorted(lex.literals),
            open_literals=sorted(lex.open_literals),
            open_relations=sorted(lex.open_relations),
            static_relations=sorted(lex.static_relations),
            multi_relations=sorted(lex.multi_relations),
            styles={k: list(v) for k, v in sorted(lex.styles.items())},
            meta={
                k: v for k, v in self.meta.items() if k not in ("env", "distiller", "transitions")
            },
            rewards=len(self.rewards),
        )
        rows = sorted((_row(r) for r in self.rules), key=lambda r: (r["template"], r["id"]))
        rows += self.rewards.rows()
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as f:
            f.write(header.model_dump_json() + "\n")
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, min_confidence: float = 0.0) -> RuleSet:
        """Read a rules file written by :meth:`save`.

        Raises:
            FileNotFoundError: no file at ``path``.
            RulesError: the file is empty, its header is not a ``wmkit.rules/1`` header,
                or a row is not a valid rule (the message names the line).
        """
        path = Path(path)
        with path.open(encoding="utf-8") as f:
            lines = f.read().splitlines()
        if not lines:
            raise RulesError(f"{path}: empty file, expected a {RULES_FORMAT} header row")
        try:
            header = _Header.model_validate_json(lines[0])
        except ValidationError as err:
            raise RulesError(f"{path}:1: not a {RULES_FORMAT} header: {err}") from None
        rules, rewards = [], []
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if isinstance(row, dict) and row.get("source") == "reward":
                    rewards.append(_RewardRow.model_validate(row).model_dump())
                else:
                    rules.append(_from_row(_RuleRow.model_validate(row)))
            except (ValueError, ValidationError) as err:  # JSONDecodeError is a ValueError
                raise RulesError(f"{path}:{number}: not a rule row: {err}") from None
        lexicon = Lexicon(
            frozenset(header.literals),
            frozenset(header.open_literals),
            frozenset(header.open_relations),
            frozenset(header.static_relations),
            frozenset(header.multi_relations),
            {k: tuple(v) for k, v in header.styles.items()},
        )
        meta = {
            **header.meta,
            "env": header.env,
            "distiller": header.distiller,
            "transitions": header.transitions,
        }
        try:
            model = RewardModel.from_rows(rewards)
        except ValueError as err:
            raise RulesError(f"{path}: the reward rows do not form a model: {err}") from None
        return cls(rules, lexicon, min_confidence=min_confidence, meta=meta, rewards=model)

    def to_knowledge_delta(self) -> KnowledgeDelta:
        """The rules as the ``rules`` part of a knowledge delta (seed 001 format).

        Each rule's condition and action are the text of :func:`rule_text`; entities a
        rule names literally become ``linked_nodes`` and the delta's ``entities``, so
        the delta validates against an empty graph.
        """
        nodes: dict[str, None] = {}
        rules = []
        seen = set()
        for rule in sorted(self.rules, key=lambda r: (r.template, r.id)):
            condition, action = rule_text(rule)
            if (condition, action) in seen:
                continue
            seen.add((condition, action))
            linked = rule.entities
            nodes.update(dict.fromkeys(linked))
            rules.append(
                DeltaRule(
                    condition=condition,
                    action=action,
                    confidence=round(rule.confidence, 6),
                    linked_nodes=linked,
                )
            )
        entities = tuple(DeltaEntity(name=n, type=slot_type(n)) for n in sorted(nodes))
        return KnowledgeDelta(entities=entities, rules=tuple(rules))


def wilson_lower(p: float, n: int, z: float = 1.96) -> float:
    """The Wilson score lower bound of a proportion ``p`` observed over ``n`` trials."""
    if n <= 0:
        return 0.0
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (centre - spread) / (1 + z2 / n)


def _bind(atom: Atom, values: Mapping[str, str]) -> Atom | None:
    subject = values.get(atom.subject, atom.subject) if atom.subject[:1] == "{" else atom.subject
    obj = values.get(atom.object, atom.object) if atom.object[:1] == "{" else atom.object
    if _SLOT.fullmatch(subject) or _SLOT.fullmatch(obj):
        return None  # a slot the text did not fill
    return atom._replace(subject=subject, object=obj)


def apply_atoms(
    state: WorldState, atoms: Iterable[Atom], multi: Collection[str]
) -> tuple[Delta, Delta]:
    """Turn bound effects into ``(action, event)`` deltas relative to ``state``.

    Effects are taken in order; one on a ``(subject, relation)`` that an earlier effect
    already set is ignored (for ``add``/``remove``: on the same fact). ``inc``/``dec``
    need one number as the current object, else they are ignored. ``multi`` names the
    relations with several objects per subject.
    """
    added: dict[str, set[Fact]] = {"action": set(), "event": set()}
    removed: dict[str, set[Fact]] = {"action": set(), "event": set()}
    claimed: set[tuple[str, ...]] = set()
    for kind, op, s, r, o in atoms:
        if op == "add" or op == "remove":
            key = (s, r, o)
            if key in claimed:
                continue
            claimed.add(key)
            fact = Fact(s, r, o)
            if op == "add" and fact not in state:
                added[kind].add(fact)
            elif op == "remove" and fact in state:
                removed[kind].add(fact)
            continue
        if (s, r) in claimed or (r in multi and op == "set" and (s, r, o) in claimed):
            continue
        claimed.add((s, r))
        current = state.objects(s, r)
        new = o
        if op in ("inc", "dec"):
            base = _number(current[0]) if len(current) == 1 else None
            step = _number(o)
            if base is None or step is None:
                continue
            new = _format_number(base + step if op == "inc" else base - step)
        if current == (new,):
            continue
        removed[kind].update(Fact(s, r, x) for x in current if x != new)
        if new not in current:
            added[kind].add(Fact(s, r, new))
    return tuple(  # type: ignore[return-value]
        Delta(tuple(sorted(added[k])), tuple(sorted(removed[k] - added[k])))
        for k in ("action", "event")
    )


# --- rules as text ---------------------------------------------------------------------

_SYMBOL = {"set": ":=", "add": "+=", "remove": "-="}
_OP_OF = {v: k for k, v in _SYMBOL.items()}
_VALUE = r'(?:\{[^{}\s]+\}|"(?:[^"\\]|\\.)*")'
_REL = r'(?:[A-Za-z_][\w-]*|"(?:[^"\\]|\\.)*")'
_KEY = re.compile(r'^\s*(command|observation)\s+("(?:[^"\\]|\\.)*")\s*(.*)$', re.S)
_CONDITION = re.compile(rf"^({_VALUE})(?:\.({_REL}))?\s*==\s*({_VALUE})$")
_EFFECT = re.compile(
    rf"^(event:\s*)?(not\s+)?({_VALUE})\.({_REL})\s*(:=|\+=|-=)\s*"
    rf"(?:({_VALUE})\.({_REL})\s*([+-])\s*)?({_VALUE})$"
)
_AND = re.compile(r"\s+and\s+(?=[{\"])")


def _quote(value: str) -> str:
    return value if _SLOT.fullmatch(value) else json.dumps(value, ensure_ascii=False)


def _quote_rel(relation: str) -> str:
    return relation if re.fullmatch(r"[A-Za-z_][\w-]*", relation) else json.dumps(relation)


def _unquote(text: str) -> str:
    return text if text.startswith("{") else json.loads(text)


def _unquote_rel(text: str) -> str:
    return json.loads(text) if text.startswith('"') else text


def _normalise(template: str) -> str:
    """A template as reading text makes it: tokens between slots, lower case, spaced."""
    parts, pos = [], 0
    for m in _SLOT.finditer(template):
        parts += tokenize(template[pos : m.start()])
        parts.append(m.group())
        pos = m.end()
    parts += tokenize(template[pos:])
    return " ".join(parts)


def rule_text(rule: Rule) -> tuple[str, str]:
    """Write a rule as ``(condition, action)`` text, the form :func:`parse_rule_text` reads.

    Condition: ``command "open {door}" and {door}.state == "closed" and {door} ==
    "door:willow"`` (``observation "..."`` for observation rules). Action: an optional
    ``event: `` prefix, ``not `` for a failure rule, then ``{door}.state := "open"``
    (``+=`` add, ``-=`` remove, ``{x}.r := {x}.r + {v}`` inc, ``- {v}`` dec).
    """
    parts = [f"{rule.source} {json.dumps(rule.template, ensure_ascii=False)}"]
    for subject, relation, value in rule.conditions:
        lhs = _quote(subject) if relation == "=" else f"{_quote(subject)}.{_quote_rel(relation)}"
        parts.append(f"{lhs} == {_quote(value)}")
    a = rule.atom
    target = f"{_quote(a.subject)}.{_quote_rel(a.relation)}"
    if a.op in ("inc", "dec"):
        effect = f"{target} := {target} {'+' if a.op == 'inc' else '-'} {_quote(a.object)}"
    else:
        effect = f"{target} {_SYMBOL[a.op]} {_quote(a.object)}"
    prefix = ("event: " if a.kind == "event" else "") + ("" if rule.predicts else "not ")
    return " and ".join(parts), prefix + effect


def parse_rule_text(condition: str, action: str, confidence: float = 1.0) -> Rule:
    """Read a rule written in the syntax of :func:`rule_text` (e.g. by a model).

    Support and hits are 0: a rule read from text has no evidence yet.

    Raises:
        RulesError: the text does not follow the syntax; the message says which part.
    """
    m = _KEY.match(condition)
    if m is None:
        raise RulesError(
            f'condition {condition!r} must start with command "<template>" or '
            'observation "<template>"'
        )
    source, template, rest = m.group(1), _normalise(json.loads(m.group(2))), m.group(3).strip()
    if not template:
        raise RulesError(f"condition {condition!r} has an empty template")
    conditions = []
    if rest:
        if not rest.startswith("and "):
            raise RulesError(f"expected 'and' after the template in {condition!r}")
        if source == "observation":
            raise RulesError(f"observation rules have no preconditions: {condition!r}")
        for clause in _AND.split(rest[4:].strip()):
            clause = clause.strip()
            c = _CONDITION.match(clause)
            if c is None:
                raise RulesError(
                    f"precondition {clause!r} is not <slot>.<relation> == <value> or "
                    "<slot> == <value>"
                )
            relation = "=" if c.group(2) is None else _unquote_rel(c.group(2))
            conditions.append((_unquote(c.group(1)), relation, _unquote(c.group(3))))
    e = _EFFECT.match(action.strip())
    if e is None:
        raise RulesError(
            f"action {action!r} is not [event: ][not ]<subject>.<relation> :=|+=|-= <value>"
        )
    kind: Kind = "event" if e.group(1) else "action"
    subject, relation = _unquote(e.group(3)), _unquote_rel(e.group(4))
    symbol, value = e.group(5), _unquote(e.group(9))
    if e.group(6) is not None:
        if symbol != ":=" or (_unquote(e.group(6)), _unquote_rel(e.group(7))) != (
            subject,
            relation,
        ):
            raise RulesError(f"action {action!r}: an increment must read x.r := x.r + <value>")
        op = "inc" if e.group(8) == "+" else "dec"
    else:
        op = _OP_OF[symbol]
    for slot in _SLOT.findall(" ".join([subject, value] + [c[0] for c in conditions])):
        if f"{{{slot}}}" not in template:
            raise RulesError(f"slot {{{slot}}} is not in the template {template!r}")
    if not (isinstance(confidence, int | float) and 0.0 <= confidence <= 1.0):
        raise RulesError(f"confidence {confidence!r} is outside [0, 1]")
    if math.isnan(confidence):
        raise RulesError("confidence is NaN")
    return Rule(
        source,  # type: ignore[arg-type]
        template,
        tuple(sorted(conditions)) if source == "command" else (),
        Atom(kind, op, subject, relation, value),
        predicts=e.group(2) is None,
        confidence=float(confidence),
    )
