"""The world graph of one environment: what the agent learned, with its evidence (seed 001).

Nodes (entities and states), edges (``transition``, ``containment``, ``episodic``) and
rules (condition -> action) live in memory with indexes: nodes by id, edges by
``(src, relation, dst, trigger)`` and by source, rules by a token index for similarity
lookup. ``merge`` folds a validated delta in; it is all or nothing.

Evidence and confidence. Every row (a node, each value stated for a node property, an
edge, a rule) counts its reports: ``support`` (distinct scenes), ``weight`` (the sum of
the reports' confidences, each in [0, 1]) and ``evidence`` (the latest ``evidence_cap``
scene ids; older ones only count). Its confidence is the mean of a Beta(1, 1) prior
updated with soft counts -- a report of confidence c adds c to successes and 1 - c to
failures, and a report of a rival value of the same property adds its c to failures::

    confidence = (1 + weight) / (2 + support + rival_weight)

A node's confidence is the lowest of its own (``rival_weight`` 0) and those of its
properties' winning values. Conflicts (a door stated ``locked: true`` in one scene and
``locked: false`` in another) are decided by evidence: the value with the larger
``weight`` wins, a tie goes to the value reported last. Losing values stay in the row
(``claims``) with their evidence, and win if their evidence grows.

Edges with the same key merge their evidence. A rule merges into the most similar
rule already held when their similarity reaches ``rule_threshold``, else it is new.
Similarity is the Jaccard index of their token sets (``text_tokens`` of the condition
and of the action, kept apart); rules are bucketed by the first token of their action
(``open`` in ``open_door_fail``) and never merge across buckets. Lookup does not scan
all rules: every rule is indexed under each of its tokens, and a rule A can only reach
Jaccard >= t with a rule B that holds one of any ``|A| - ceil(t|A|) + 1`` tokens of A
(prefix filtering), so only the postings of that many of A's rarest tokens are read.

Persistence. A graph bound to a directory keeps ``nodes.jsonl``, ``edges.jsonl``,
``rules.jsonl`` (journals: a changed row is appended again, the last row of an id
wins), ``merged.jsonl`` (one row per merged scene) and ``meta.json`` (format, env name,
version = commit count, last_updated, stats, rejection counts, settings, and the row
count of each journal at the last commit). ``flush`` appends only what changed since
the last commit, so an update costs O(new scenes), then rewrites ``meta.json``
atomically: that rename is the commit. ``load`` reads each journal up to its committed
row count, so rows of a flush that died midway are ignored on every file alike (and cut
off before the next append), and a torn last line is skipped. ``compact`` rewrites
each journal to one row per id (temporary file + rename); ``flush`` compacts by itself
when the journals hold more than ``compact_factor`` times the live rows (amortised
O(1) per appended row).

Rows are NamedTuples: an update builds a few per part, about 3.5x cheaper than copying
pydantic models, and being immutable they let a merge stage its rows and publish them
at once. Rows read back from disk are validated by pydantic against the same
annotations (``TypeAdapter``; unknown keys are refused).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import to_json

from wmkit.jsonl import JsonlLog, fsync_path
from wmkit.knowledge.delta import (
    DeltaEntity,
    DeltaState,
    KnowledgeDelta,
    PropertyValue,
    Relation,
    ValidatedDelta,
    text_tokens,
    validate_delta,
)

__all__ = [
    "FORMAT",
    "EdgeKey",
    "EdgeRow",
    "GraphError",
    "GraphStats",
    "MergeError",
    "MergeReport",
    "NodeRow",
    "RuleRow",
    "ValueClaim",
    "WorldGraph",
    "property_confidence",
    "row_dict",
    "rule_similarity",
]

FORMAT = "wmkit.world_graph/1"
_FILES = ("nodes.jsonl", "edges.jsonl", "rules.jsonl", "merged.jsonl")
_META = "meta.json"
_MAX_LIST = 64  # longest union of conditions / linked nodes kept on a row

Support = Annotated[int, Field(ge=0)]
Weight = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Unit = Annotated[float, Field(ge=0.0, le=1.0)]


class GraphError(ValueError):
    """A world graph refused an operation; its message names what is wrong."""


class MergeError(GraphError):
    """A delta could not be merged (validated against another graph); nothing changed."""


class ValueClaim(NamedTuple):
    """One value stated for a node property, with its evidence.

    Attributes:
        value: the value.
        evidence: the latest ``evidence_cap`` scene ids that stated it, oldest first.
        support: how many distinct scenes stated it.
        weight: the sum of those reports' confidences.
        last: merge sequence number of the latest report (0 = first scene merged).
    """

    value: PropertyValue
    evidence: tuple[str, ...]
    support: Support
    weight: Weight
    last: int


class NodeRow(NamedTuple):
    """A node of ``nodes.jsonl``.

    Attributes:
        id: node id.
        kind: ``"entity"`` or ``"state"``.
        type: what it is (``"room"``, ``"door"``); fixed when the node is created.
        name: display name (the first one stated).
        properties: the winning value of each property.
        conditions: for states, every condition stated (first seen first, at most 64).
        claims: per property, every value stated with its evidence, the winner first.
        evidence, support, weight, last: the node's own reports, as in ``ValueClaim``.
        confidence: see the module docstring.
    """

    id: str
    kind: Literal["entity", "state"]
    type: str
    name: str
    properties: dict[str, PropertyValue]
    conditions: tuple[str, ...]
    claims: dict[str, tuple[ValueClaim, ...]]
    evidence: tuple[str, ...]
    support: Support
    weight: Weight
    last: int
    confidence: Unit


class EdgeRow(NamedTuple):
    """An edge of ``edges.jsonl``; its key is ``(src_ref, relation, dst_ref, trigger)``.

    Attributes:
        relation: ``transition``, ``containment`` or ``episodic``.
        src_ref, dst_ref: node ids (containment: ``src_ref`` holds ``dst_ref``).
        trigger: the action that takes a transition, or None.
        conditions: every condition stated for it (first seen first, at most 64).
        evidence, support, weight, last: its reports, as in ``ValueClaim``.
        confidence: see the module docstring.
    """

    relation: Relation
    src_ref: str
    dst_ref: str
    trigger: str | None
    conditions: tuple[str, ...]
    evidence: tuple[str, ...]
    support: Support
    weight: Weight
    last: int
    confidence: Unit

    @property
    def key(self) -> EdgeKey:
        """``(src_ref, relation, dst_ref, trigger or "")``."""
        return (self.src_ref, self.relation, self.dst_ref, self.trigger or "")


class RuleRow(NamedTuple):
    """A rule of ``rules.jsonl``: when ``condition`` holds, ``action`` results.

    ``condition`` and ``action`` keep the wording of the first report; reports merged
    into the rule by similarity add evidence, linked nodes, and a recovery if it had
    none.

    Attributes:
        id: ``"rule:"`` + a digest of the first wording's tokens.
        condition, action, recovery: as in ``DeltaRule``.
        linked_nodes: every node linked by a report (first seen first, at most 64).
        evidence, support, weight, last: its reports, as in ``ValueClaim``.
        confidence: see the module docstring.
    """

    id: str
    condition: str
    action: str
    recovery: str | None
    linked_nodes: tuple[str, ...]
    evidence: tuple[str, ...]
    support: Support
    weight: Weight
    last: int
    confidence: Unit


EdgeKey = tuple[str, str, str, str]
_Row = ValueClaim | NodeRow | EdgeRow | RuleRow


class _Merged(NamedTuple):
    """A row of ``merged.jsonl``: one merged scene, in merge order."""

    scene: str


_ADAPTERS = {
    "nodes.jsonl": TypeAdapter(NodeRow),
    "edges.jsonl": TypeAdapter(EdgeRow),
    "rules.jsonl": TypeAdapter(RuleRow),
    "merged.jsonl": TypeAdapter(_Merged),
}


def row_dict(row: NodeRow | EdgeRow | RuleRow) -> dict[str, Any]:
    """A row as the dict its JSONL line holds (field order kept)."""
    out = row._asdict()
    if isinstance(row, NodeRow):
        out["claims"] = {k: [c._asdict() for c in v] for k, v in row.claims.items()}
    return out


class GraphStats(NamedTuple):
    """Row counts: nodes, edges, rules, and scenes merged."""

    nodes: int
    edges: int
    rules: int
    scenes: int


class MergeReport(NamedTuple):
    """What one ``merge`` did.

    Attributes:
        scene: the delta's scene id.
        duplicate: the scene had been merged before; nothing changed.
        nodes_added, nodes_updated: nodes created / given more evidence.
        conflicts: properties stated with a value other than their current winner.
        edges_added, edges_merged: edges created / duplicates merged into one.
        rules_added, rules_merged: rules created / merged into a similar rule.
        rejections: dropped parts by reason (from validation).
    """

    scene: str
    duplicate: bool = False
    nodes_added: int = 0
    nodes_updated: int = 0
    conflicts: int = 0
    edges_added: int = 0
    edges_merged: int = 0
    rules_added: int = 0
    rules_merged: int = 0
    rejections: Mapping[str, int] = {}


def _confidence(weight: float, support: int, rival_weight: float = 0.0) -> float:
    return (1.0 + weight) / (2.0 + support + rival_weight)


def _reported(
    row: _Row, scene: str, confidence: float, seq: int, cap: int
) -> tuple[tuple[str, ...], int, float, int]:
    """``(evidence, support, weight, last)`` of ``row`` after one more report.

    Unchanged when this merge already counted for the row (a scene counts once).
    """
    if row.last == seq:
        return row.evidence, row.support, row.weight, row.last
    return (*row.evidence, scene)[-cap:], row.support + 1, row.weight + confidence, seq


def _same(a: PropertyValue, b: PropertyValue) -> bool:
    # The type check keeps True, 1 and 1.0 apart (Python calls them equal).
    return a.__class__ is b.__class__ and a == b


def _claim_rank(claim: ValueClaim) -> tuple[float, int]:
    return (-claim.weight, -claim.last)  # winner first: most weight, then latest


def _union(old: tuple[str, ...], new: tuple[str, ...]) -> tuple[str, ...]:
    if not new:
        return old
    extra = [x for x in dict.fromkeys(new) if x not in old]
    return (*old, *extra)[:_MAX_LIST] if extra else old


def _node_confidence(
    weight: float, support: int, claims: Mapping[str, tuple[ValueClaim, ...]]
) -> float:
    conf = _confidence(weight, support)
    for held in claims.values():  # usually none or one
        rivals = sum(c.weight for c in held[1:])
        conf = min(conf, _confidence(held[0].weight, held[0].support, rivals))
    return conf


def property_confidence(node: NodeRow, key: str) -> float:
    """Confidence of the winning value of property ``key`` of ``node``.

    Raises:
        KeyError: the node has no such property.
    """
    held = node.claims[key]
    return _confidence(held[0].weight, held[0].support, sum(c.weight for c in held[1:]))


@functools.lru_cache(maxsize=1 << 16)  # rule texts recur across scenes
def _rule_tokens(condition: str, action: str) -> frozenset[str]:
    """Tokens of a rule, tagged with its bucket and the side they come from."""
    act = text_tokens(action)
    bucket = act[0]
    return frozenset(
        [f"{bucket}\x1fc\x1f{t}" for t in text_tokens(condition)]
        + [f"{bucket}\x1fa\x1f{t}" for t in act]
    )


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    common = len(a & b)
    return common / (len(a) + len(b) - common)


def rule_similarity(a: tuple[str, str], b: tuple[str, str]) -> float:
    """Similarity of two ``(condition, action)`` pairs, in [0, 1], as merging uses it.

    The Jaccard index of their tagged token sets; 0 across buckets (different first
    action token).
    """
    return _jaccard(_rule_tokens(*a), _rule_tokens(*b))


def _rule_id(condition: str, action: str) -> str:
    text = " ".join(text_tokens(condition)) + "\x00" + " ".join(text_tokens(action))
    return "rule:" + hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


class _RuleIndex:
    """Rules indexed by tagged token, for similarity lookup without an all-pairs scan."""

    def __init__(self) -> None:
        self.postings: dict[str, list[str]] = {}
        self.tokens: dict[str, frozenset[str]] = {}

    def add(self, rule_id: str, tokens: frozenset[str]) -> None:
        self.tokens[rule_id] = tokens
        for t in tokens:
            self.postings.setdefault(t, []).append(rule_id)

    def best(
        self, tokens: frozenset[str], threshold: float, staged: Mapping[str, frozenset[str]]
    ) -> str | None:
        """Return the id of the rule most similar to ``tokens``, if it reaches ``threshold``.

        Looks among indexed rules (prefix filter) and ``staged`` ones (rules new in the
        merge under way: a handful). Ties go to the smallest rule id, so the answer
        does not depend on the order rules entered the index.
        """
        n = len(tokens)
        prefix = n - math.ceil(threshold * n - 1e-9) + 1
        lists = sorted((self.postings.get(t, ()) for t in tokens), key=len)[:prefix]
        candidates = {rule_id for posting in lists for rule_id in posting}
        low, high = threshold * n - 1e-9, n / threshold + 1e-9
        best: tuple[float, str] | None = None
        for rule_id, other in [(r, self.tokens[r]) for r in candidates] + list(staged.items()):
            if not low <= len(other) <= high:
                continue  # Jaccard <= min/max of the sizes: cannot reach the threshold
            sim = _jaccard(tokens, other)
            if sim >= threshold - 1e-12 and (
                best is None or sim > best[0] or (sim == best[0] and rule_id < best[1])
            ):
                best = (sim, rule_id)
        return None if best is None else best[1]


_COUNTS = MergeReport._fields[2:-1]


class WorldGraph:
    """The knowledge graph of one environment, in memory, optionally bound to a directory.

    Args:
        env_name: the environment it describes (recorded in ``meta.json``).
        rule_threshold: similarity at or above which a rule merges into a held one,
            in (0, 1].
        evidence_cap: scene ids kept per row (older reports only count), >= 1.
        compact_factor: ``flush`` compacts when the journals hold more than this many
            times the live rows, plus ``compact_min_rows``; None never compacts by itself.
        compact_min_rows: journal rows always tolerated (small graphs are not rewritten).
    """

    def __init__(
        self,
        env_name: str = "",
        *,
        rule_threshold: float = 0.8,
        evidence_cap: int = 10,
        compact_factor: float | None = 3.0,
        compact_min_rows: int = 1024,
    ) -> None:
        if not 0.0 < rule_threshold <= 1.0:
            raise GraphError(f"rule_threshold must be in (0, 1], got {rule_threshold}")
        if evidence_cap < 1:
            raise GraphError(f"evidence_cap must be >= 1, got {evidence_cap}")
        if compact_factor is not None and compact_factor < 1.0:
            raise GraphError(f"compact_factor must be >= 1 or None, got {compact_factor}")
        if compact_min_rows < 0:
            raise GraphError(f"compact_min_rows must be >= 0, got {compact_min_rows}")
        self.env_name = env_name
        self.rule_threshold = float(rule_threshold)
        self.evidence_cap = int(evidence_cap)
        self.compact_factor = compact_factor
        self.compact_min_rows = int(compact_min_rows)
        self._nodes: dict[str, NodeRow] = {}
        self._edges: dict[EdgeKey, EdgeRow] = {}
        self._out: dict[str, dict[EdgeKey, None]] = {}
        self._rules: dict[str, RuleRow] = {}
        self._index = _RuleIndex()
        self._scenes: dict[str, None] = {}  # merge order; a scene's position is its seq
        self._rejections: Counter[str] = Counter()
        # Persistence: the bound directory, what changed since the last commit, and
        # the committed row count of each journal.
        self._dir: Path | None = None
        self._dirty: dict[str, dict[Any, None]] = {"nodes": {}, "edges": {}, "rules": {}}
        self._new_scenes: list[str] = []
        self._rows: dict[str, int] = dict.fromkeys(_FILES, 0)
        self._version = 0
        self._stale = False  # rows past the last commit may lie in the journal files

    # --- reading -------------------------------------------------------------------

    def node(self, node_id: str) -> NodeRow | None:
        """Return node ``node_id``, or None."""
        return self._nodes.get(node_id)

    def node_kind_type(self, node_id: str) -> tuple[str, str] | None:
        """Return ``(kind, type)`` of node ``node_id``, or None (for ``validate_delta``)."""
        node = self._nodes.get(node_id)
        return None if node is None else (node.kind, node.type)

    def edge(self, src: str, relation: str, dst: str, trigger: str | None = None) -> EdgeRow | None:
        """Return the edge with this key, or None."""
        return self._edges.get((src, relation, dst, trigger or ""))

    def edges_from(self, src: str, relation: str | None = None) -> list[EdgeRow]:
        """Return the edges out of ``src`` (of ``relation`` if given), sorted by key."""
        keys = sorted(self._out.get(src, ()))
        return [self._edges[k] for k in keys if relation is None or k[1] == relation]

    def rule(self, rule_id: str) -> RuleRow | None:
        """Return rule ``rule_id``, or None."""
        return self._rules.get(rule_id)

    def find_rule(self, condition: str, action: str) -> tuple[RuleRow, float] | None:
        """Return the held rule a report ``condition -> action`` would merge into.

        Returns:
            ``(rule, similarity)``, or None when no rule reaches ``rule_threshold``.

        Raises:
            GraphError: the condition or action has no words.
        """
        if not text_tokens(action) or not text_tokens(condition):
            raise GraphError(f"a rule needs words in condition and action: {condition!r}")
        tokens = _rule_tokens(condition, action)
        found = self._index.best(tokens, self.rule_threshold, {})
        if found is None:
            return None
        return self._rules[found], _jaccard(tokens, self._index.tokens[found])

    def nodes(self) -> Iterator[NodeRow]:
        """Iterate over the nodes, in creation order."""
        return iter(self._nodes.values())

    def edges(self) -> Iterator[EdgeRow]:
        """Iterate over the edges, in creation order."""
        return iter(self._edges.values())

    def rules(self) -> Iterator[RuleRow]:
        """Iterate over the rules, in creation order."""
        return iter(self._rules.values())

    def has_scene(self, scene: str) -> bool:
        """Whether a delta of ``scene`` has been merged (each scene merges once)."""
        return scene in self._scenes

    @property
    def stats(self) -> GraphStats:
        """Row counts."""
        return GraphStats(len(self._nodes), len(self._edges), len(self._rules), len(self._scenes))

    @property
    def rejections(self) -> Counter[str]:
        """Parts dropped by validation over every merge, by reason (a copy)."""
        return Counter(self._rejections)

    @property
    def directory(self) -> Path | None:
        """The directory the graph is bound to, or None."""
        return self._dir

    def records(self) -> dict[str, list[dict[str, Any]]]:
        """Every row as a dict (``row_dict``), sorted by key: for comparing graphs."""
        return {
            "nodes": [row_dict(r) for _, r in sorted(self._nodes.items())],
            "edges": [row_dict(r) for _, r in sorted(self._edges.items())],
            "rules": [row_dict(r) for _, r in sorted(self._rules.items())],
        }

    def summary(self, limit: int = 20) -> str:
        """A short text of what the graph holds, for a distiller prompt.

        Lists the ``limit`` best supported nodes and rules, with confidences.
        """
        nodes = sorted(self._nodes.values(), key=lambda r: (-r.support, r.id))[:limit]
        rules = sorted(self._rules.values(), key=lambda r: (-r.support, r.id))[:limit]
        lines = [f"world graph {self.env_name or '?'}: {self.stats}"]
        lines += [f"node {n.id} ({n.type}) {n.properties} conf={n.confidence:.2f}" for n in nodes]
        lines += [
            f"rule {r.condition} -> {r.action} conf={r.confidence:.2f} support={r.support}"
            for r in rules
        ]
        return "\n".join(lines)

    # --- merging -------------------------------------------------------------------

    def validate(
        self, raw: Mapping[str, Any] | str | bytes | KnowledgeDelta, *, scene: str
    ) -> ValidatedDelta:
        """``validate_delta(raw, self, scene=scene)``."""
        return validate_delta(raw, self, scene=scene)

    def merge(
        self,
        delta: ValidatedDelta | Mapping[str, Any] | str | bytes | KnowledgeDelta,
        *,
        scene: str | None = None,
    ) -> MergeReport:
        """Merge one scene's delta: all of its valid parts, or nothing.

        Every new row is computed first, from the rows held now; only then are they
        stored, so an error (a delta validated against another graph) leaves the graph
        exactly as it was. A scene merges once: a second delta for it changes nothing.

        Args:
            delta: a ``ValidatedDelta``, or raw input validated here against this graph.
            scene: the scene id, required with raw input (a ``ValidatedDelta`` has one).

        Raises:
            MergeError: a part refers to a node this graph lacks, or a node's kind or
                type differs from the graph's (the delta was validated elsewhere).
            ValueError: raw input without ``scene``.
        """
        if not isinstance(delta, ValidatedDelta):
            if scene is None:
                raise ValueError("merge of a raw delta needs scene=")
            if scene in self._scenes:  # before validating it: a replay costs nothing
                return MergeReport(scene, duplicate=True)
            delta = validate_delta(delta, self, scene=scene)
        elif scene is not None and scene != delta.scene:
            raise ValueError(f"scene {scene!r} differs from the delta's {delta.scene!r}")
        scene = delta.scene
        if scene in self._scenes:
            return MergeReport(scene, duplicate=True)
        seq, cap = len(self._scenes), self.evidence_cap
        counts = dict.fromkeys(_COUNTS, 0)

        nodes: dict[str, NodeRow] = {}
        for part in delta.nodes:
            old = self._nodes.get(part.node_id)
            if old is None:
                nodes[part.node_id] = _new_node(part, scene, seq)
                counts["nodes_added"] += 1
                continue
            if (old.kind, old.type) != (part.kind, part.type):
                raise MergeError(
                    f"node {old.id!r} is a {old.kind} of type {old.type!r}, the delta "
                    f"says {part.kind} of type {part.type!r}: validate against this graph"
                )
            nodes[part.node_id], conflicts = _update_node(old, part, scene, seq, cap)
            counts["nodes_updated"] += 1
            counts["conflicts"] += conflicts

        def check(refs: Iterable[str], what: str) -> None:
            for ref in refs:
                if ref not in nodes and ref not in self._nodes:
                    raise MergeError(f"{what} {ref!r} is not a node of this graph")

        edges: dict[EdgeKey, EdgeRow] = {}
        for part in delta.edges:
            check((part.src_ref, part.dst_ref), "edge endpoint")
            conf = part.confidence
            old = self._edges.get(part.key)
            if old is None:
                edges[part.key] = EdgeRow(
                    part.relation,
                    part.src_ref,
                    part.dst_ref,
                    part.trigger or None,
                    part.conditions[:_MAX_LIST],
                    (scene,),
                    1,
                    conf,
                    seq,
                    _confidence(conf, 1),
                )
                counts["edges_added"] += 1
            else:
                evidence, support, weight, last = _reported(old, scene, conf, seq, cap)
                edges[part.key] = EdgeRow(
                    *old[:4],  # relation, src_ref, dst_ref, trigger
                    _union(old.conditions, part.conditions),
                    evidence,
                    support,
                    weight,
                    last,
                    _confidence(weight, support),
                )
                counts["edges_merged"] += 1

        rules: dict[str, RuleRow] = {}
        new_rules: dict[str, frozenset[str]] = {}
        for part in delta.rules:
            check(part.linked_nodes, "rule link")
            conf = part.confidence
            tokens = _rule_tokens(part.condition, part.action)
            match = self._index.best(tokens, self.rule_threshold, new_rules)
            if match is None:
                rule_id = _rule_id(part.condition, part.action)
                links = tuple(dict.fromkeys(part.linked_nodes))[:_MAX_LIST]
                rules[rule_id] = RuleRow(
                    rule_id,
                    part.condition,
                    part.action,
                    part.recovery,
                    links,
                    (scene,),
                    1,
                    conf,
                    seq,
                    _confidence(conf, 1),
                )
                new_rules[rule_id] = tokens
                counts["rules_added"] += 1
            else:
                old = rules.get(match) or self._rules[match]
                evidence, support, weight, last = _reported(old, scene, conf, seq, cap)
                rules[match] = RuleRow(
                    *old[:3],  # id, condition, action
                    old.recovery if old.recovery is not None else part.recovery,
                    _union(old.linked_nodes, part.linked_nodes),
                    evidence,
                    support,
                    weight,
                    last,
                    _confidence(weight, support),
                )
                counts["rules_merged"] += 1

        # Publish: plain dict stores from here on, nothing that can fail on input.
        self._nodes.update(nodes)
        self._dirty["nodes"].update(dict.fromkeys(nodes))
        for key, row in edges.items():
            self._edges[key] = row
            self._out.setdefault(key[0], {})[key] = None
        self._dirty["edges"].update(dict.fromkeys(edges))
        self._rules.update(rules)
        for rule_id, tokens in new_rules.items():
            self._index.add(rule_id, tokens)
        self._dirty["rules"].update(dict.fromkeys(rules))
        rejected = dict(delta.counts)
        self._rejections.update(rejected)
        self._scenes[scene] = None
        self._new_scenes.append(scene)
        return MergeReport(scene, False, **counts, rejections=rejected)

    # --- persistence ---------------------------------------------------------------

    @classmethod
    def load(
        cls,
        directory: str | os.PathLike[str],
        *,
        create: bool = False,
        env_name: str | None = None,
        **settings: Any,
    ) -> WorldGraph:
        """Load the graph kept in ``directory`` and bind it there for ``flush``.

        Reads each journal up to the row count committed in ``meta.json`` (all of it
        when there is no ``meta.json``), the last row of each id winning; a torn last
        line is skipped with a ``TornLineWarning``.

        Args:
            directory: the graph's directory.
            create: start an empty graph when the directory holds none.
            env_name: the env name for a new graph (a stored one is kept otherwise).
            **settings: ``rule_threshold``, ``evidence_cap``, ``compact_factor``,
                ``compact_min_rows``; given ones override those stored in ``meta.json``.

        Raises:
            FileNotFoundError: no graph there and ``create`` is false.
            GraphError: ``meta.json`` is of another format, or a journal row is invalid.
            ValueError: a journal line other than the last is not JSON (corruption).
        """
        path = Path(directory)
        meta_path = path / _META
        meta: dict[str, Any] = {}
        if meta_path.exists():
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            if meta.get("format") != FORMAT:
                raise GraphError(f"{meta_path}: format {meta.get('format')!r} is not {FORMAT}")
        elif not create and not any((path / f).exists() for f in _FILES):
            raise FileNotFoundError(f"no world graph in {path} (pass create=True)")
        graph = cls(
            env_name if env_name is not None else meta.get("env_name", ""),
            **{**meta.get("settings", {}), **settings},
        )
        committed = meta.get("committed", {})
        rows = {name: graph._read(path / name, committed.get(name)) for name in _FILES}
        for node in rows["nodes.jsonl"]:
            graph._nodes[node.id] = node
        for edge in rows["edges.jsonl"]:
            graph._edges[edge.key] = edge
            graph._out.setdefault(edge.src_ref, {})[edge.key] = None
        for rule in rows["rules.jsonl"]:
            if rule.id not in graph._rules:
                graph._index.add(rule.id, _rule_tokens(rule.condition, rule.action))
            graph._rules[rule.id] = rule
        for merged in rows["merged.jsonl"]:
            graph._scenes[merged.scene] = None
        graph._rejections.update(meta.get("rejections", {}))
        graph._version = int(meta.get("version", 0))
        graph._dir = path
        return graph

    def _read(self, path: Path, committed: int | None) -> list[Any]:
        """The validated rows of one journal, up to its committed count."""
        raw = list(JsonlLog(path).rows())
        if committed is not None and len(raw) > committed:
            raw = raw[:committed]  # rows of a flush that died before its commit
            self._stale = True  # ... are cut from the file before the next append
        self._rows[path.name] = len(raw)
        adapter = _ADAPTERS[path.name]
        try:
            return [adapter.validate_python(row) for row in raw]
        except ValidationError as exc:
            raise GraphError(f"{path}: a row is not valid: {exc}") from None

    def save(self, directory: str | os.PathLike[str]) -> None:
        """Write the whole graph to ``directory`` and bind it there.

        Files already there are replaced one by one: give it a new directory, or the
        one the graph is bound to (then this is ``compact``).
        """
        if self._dir is not None and Path(directory) == self._dir:
            self.compact()
            return
        self._dir = Path(directory)
        self._stale = False
        self._rewrite_files(scenes=True)

    def flush(self) -> int:
        """Append what changed since the last commit to the journals, then commit.

        Costs O(rows changed + scenes merged since the last flush), plus now and then
        a compaction (see ``compact_factor``), amortised O(1) per appended row.

        Returns:
            Rows appended (0 when nothing changed).

        Raises:
            GraphError: the graph is not bound to a directory.
        """
        written = self._commit()
        live = len(self._nodes) + len(self._edges) + len(self._rules)
        journal = sum(self._rows[f] for f in _FILES[:3])
        limit = None if self.compact_factor is None else self.compact_factor * live
        if limit is not None and journal > limit + self.compact_min_rows:
            self._rewrite_files(scenes=False)
        return written

    def compact(self) -> None:
        """Commit what changed, then rewrite each journal to one row per id.

        Each file is written to a temporary file, fsync'd and renamed over the old
        one. A crash between renames leaves every file whole and holding the committed
        state: the old journal, or the new compact file, whose row count is at most
        the count ``meta.json`` names, so it is read whole.

        Raises:
            GraphError: the graph is not bound to a directory.
        """
        self._commit()
        self._rewrite_files(scenes=False)

    def _commit(self) -> int:
        """Append the changed rows to the journals and rewrite ``meta.json`` (the commit)."""
        if self._dir is None:
            raise GraphError("flush needs a directory: use save(directory) or load(...)")
        self._dir.mkdir(parents=True, exist_ok=True)
        if self._stale:  # rows past the last commit may lie in the files: cut them
            for name in _FILES:
                _truncate_rows(self._dir / name, self._rows[name])
            self._stale = False
        batches = {
            "nodes.jsonl": [self._nodes[k] for k in self._dirty["nodes"]],
            "edges.jsonl": [self._edges[k] for k in self._dirty["edges"]],
            "rules.jsonl": [self._rules[k] for k in self._dirty["rules"]],
            "merged.jsonl": [_Merged(s) for s in self._new_scenes],
        }
        if not any(batches.values()):
            return 0
        counts = dict(self._rows)
        self._stale = True  # until meta.json names the new counts
        for name, batch in batches.items():
            if batch:
                counts[name] += _append(self._dir / name, batch)
        self._write_meta(counts)
        self._rows, self._stale = counts, False
        self._clear_dirty()
        return sum(len(batch) for batch in batches.values())

    def _rewrite_files(self, *, scenes: bool) -> None:
        """Write every row from memory, one file at a time (temporary file + rename).

        ``merged.jsonl`` holds one row per scene already: rewriting it (O(scenes), not
        O(graph)) is only for a new directory.
        """
        assert self._dir is not None
        self._dir.mkdir(parents=True, exist_ok=True)
        content: dict[str, Iterable[Any]] = {
            "nodes.jsonl": self._nodes.values(),
            "edges.jsonl": self._edges.values(),
            "rules.jsonl": self._rules.values(),
        }
        if scenes:
            content["merged.jsonl"] = (_Merged(s) for s in self._scenes)
        counts = dict(self._rows)
        counts.update(
            {name: _write_atomic(self._dir / name, rows) for name, rows in content.items()}
        )
        self._write_meta(counts)
        self._rows = counts
        self._clear_dirty()

    def _clear_dirty(self) -> None:
        for dirty in self._dirty.values():
            dirty.clear()
        self._new_scenes = []

    def _write_meta(self, counts: Mapping[str, int]) -> None:
        assert self._dir is not None
        meta = {
            "format": FORMAT,
            "env_name": self.env_name,
            "version": self._version + 1,
            "last_updated": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "stats": self.stats._asdict(),
            "rejections": dict(sorted(self._rejections.items())),
            "settings": {
                "rule_threshold": self.rule_threshold,
                "evidence_cap": self.evidence_cap,
                "compact_factor": self.compact_factor,
                "compact_min_rows": self.compact_min_rows,
            },
            "committed": dict(counts),
        }
        data = (json.dumps(meta, indent=2) + "\n").encode()
        _write_atomic(self._dir / _META, None, data=data)
        self._version += 1


def _new_node(part: DeltaEntity | DeltaState, scene: str, seq: int) -> NodeRow:
    conf = part.confidence
    claims = {k: (ValueClaim(v, (scene,), 1, conf, seq),) for k, v in part.properties.items()}
    return NodeRow(
        part.node_id,
        part.kind,
        part.type,
        part.name,
        dict(part.properties),
        part.conditions[:_MAX_LIST] if isinstance(part, DeltaState) else (),
        claims,
        (scene,),
        1,
        conf,
        seq,
        _node_confidence(conf, 1, claims),
    )


def _update_node(
    old: NodeRow, part: DeltaEntity | DeltaState, scene: str, seq: int, cap: int
) -> tuple[NodeRow, int]:
    """The node after one more report, and how many properties it contradicted."""
    conf = part.confidence
    conflicts = 0
    claims, properties = old.claims, old.properties
    if part.properties:
        claims = dict(claims)
        for key, value in part.properties.items():
            held = claims.get(key, ())
            if held and not _same(held[0].value, value):
                conflicts += 1
            for i, claim in enumerate(held):
                if _same(claim.value, value):
                    evidence, support, weight, last = _reported(claim, scene, conf, seq, cap)
                    claim = ValueClaim(value, evidence, support, weight, last)
                    held = (*held[:i], claim, *held[i + 1 :])
                    break
            else:
                held = (*held, ValueClaim(value, (scene,), 1, conf, seq))
            # The losers stay, with their evidence: more of it can make one win.
            claims[key] = tuple(sorted(held, key=_claim_rank)) if len(held) > 1 else held
        properties = {k: c[0].value for k, c in claims.items()}
    conditions = old.conditions
    if isinstance(part, DeltaState) and part.conditions:
        conditions = _union(conditions, part.conditions)
    evidence, support, weight, last = _reported(old, scene, conf, seq, cap)
    node = NodeRow(
        old.id,
        old.kind,
        old.type,
        old.name,
        properties,
        conditions,
        claims,
        evidence,
        support,
        weight,
        last,
        _node_confidence(weight, support, claims),
    )
    return node, conflicts


def _encode(row: Any) -> bytes:
    """One JSONL line: pydantic-core's encoder, ~3x faster than ``json.dumps``."""
    return to_json(row_dict(row) if not isinstance(row, _Merged) else row._asdict()) + b"\n"


def _append(path: Path, rows: list[Any]) -> int:
    """Append rows with one write and one fsync; return how many.

    What ``JsonlLog.extend`` does (it is used to repair a torn tail first), with rows
    encoded by pydantic-core: flush is the hot path of an update.
    """
    data = b"".join(_encode(row) for row in rows)
    JsonlLog(path).repair()
    created = not path.exists()
    with path.open("ab") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    if created:
        fsync_path(path.parent)
    return len(rows)


def _truncate_rows(path: Path, keep: int) -> None:
    """Cut ``path`` after its first ``keep`` rows (non-blank lines, as ``JsonlLog`` counts)."""
    if not path.exists():
        return
    with path.open("r+b") as fh:
        offset = rows = 0
        while rows < keep:
            line = fh.readline()
            if not line:
                break
            offset += len(line)
            rows += bool(line.strip())
        if offset < fh.seek(0, os.SEEK_END):
            fh.truncate(offset)
            fh.flush()
            os.fsync(fh.fileno())


def _write_atomic(path: Path, rows: Iterable[Any] | None, *, data: bytes = b"") -> int:
    """Write ``rows`` (or ``data``) to ``path`` via a temporary file and a rename.

    Returns:
        The number of rows written.
    """
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    count = 0
    try:
        with os.fdopen(fd, "wb") as fh:
            if rows is None:
                fh.write(data)
            else:
                for row in rows:
                    fh.write(_encode(row))
                    count += 1
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_path(path.parent)
    return count
