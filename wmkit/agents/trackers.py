"""World-state trackers: the oracle bound, the ``window(K)`` baseline, ``llm``, ``rules``."""

from __future__ import annotations

import ast
import dataclasses
import logging
import os
import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from wmkit.knowledge.rules import RuleSet
from wmkit.llm.errors import LLMError
from wmkit.llm.prompts import TRACKER_SYSTEM, tracker_user
from wmkit.llm.schema import bounded_schema
from wmkit.llm.structured import ask_structured
from wmkit.llm.types import ChatModel
from wmkit.world.actions import (
    AddRelation,
    AtomicAction,
    Query,
    RemoveRelation,
    ScheduleEvent,
    UpdateEntity,
    parse_action,
    parse_actions,
)
from wmkit.world.errors import ConditionError, UnknownEntityError, WorldError
from wmkit.world.registry import EntityContract, EntityRegistry, canonical_id
from wmkit.world.transition import World, advance, apply, register
from wmkit.world.types import Claim, Fact, Reader, WorldState

__all__ = [
    "ClaimMemory",
    "LLMTracker",
    "LLMTrackerStats",
    "NullTracker",
    "OracleTracker",
    "RulesTracker",
    "WindowTracker",
]

log = logging.getLogger(__name__)


class ClaimMemory:
    """A ``{(subject, relation): object}`` map that claims are applied to, in order.

    A claim sets its ``(subject, relation)``, replacing the earlier object. A claim
    whose subject is a description is resolved against what the memory holds: it
    names the unique subject holding every listed ``(relation, object)``; one that
    matches no subject or several is dropped (the tracker cannot tell what it means).
    """

    def __init__(self) -> None:
        self.facts: dict[tuple[str, str], str] = {}
        # Reverse index (relation, object) -> subjects, kept in step with `facts`, so a
        # description resolves in O(matches) rather than a scan of every fact.
        self._holders: dict[tuple[str, str], set[str]] = {}

    def resolve(self, subject: str | tuple[tuple[str, str], ...]) -> str | None:
        """Return the entity id a claim subject names, or None if it is not unique."""
        if isinstance(subject, str):
            return subject
        candidates: set[str] | None = None
        for relation, obj in subject:
            found = self._holders.get((relation, obj), set())
            candidates = set(found) if candidates is None else candidates & found
        return next(iter(candidates)) if candidates and len(candidates) == 1 else None

    def apply(self, claims: Iterable[Claim]) -> ClaimMemory:
        """Apply ``claims`` in order and return self."""
        for claim in claims:
            subject = self.resolve(claim.subject)
            if subject is None:
                continue
            key = (subject, claim.relation)
            old = self.facts.get(key)
            if old is not None:
                self._holders[(claim.relation, old)].discard(subject)
            self.facts[key] = claim.object
            self._holders.setdefault((claim.relation, claim.object), set()).add(subject)
        return self

    def state(self) -> WorldState:
        """Return the held facts as a world state."""
        return WorldState(Fact(s, r, o) for (s, r), o in self.facts.items())


class WindowTracker:
    """The "context is the world" baseline: keeps only the last ``k`` observations.

    Its state is what a perfect reader gets from the last ``k`` observations alone;
    anything established earlier is forgotten. ``k=None`` keeps every observation
    (perfect memory), the ceiling of a reader-based tracker.

    Args:
        reader: reads one observation into claims (the env's ``reader``).
        k: window length in observations, or None for no limit.
    """

    def __init__(self, reader: Reader, k: int | None = 10) -> None:
        if k is not None and k < 1:
            raise ValueError(f"window tracker needs k >= 1 or None, got k={k}")
        self.reader = reader
        self.k = k
        self._window: deque[list[Claim]] = deque(maxlen=k)
        self._memory = ClaimMemory()
        self._state = WorldState()

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._window.clear()
        self._memory = ClaimMemory()
        self._observe(observation)

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._observe(observation)

    def _observe(self, observation: str) -> None:
        claims = self.reader(observation)
        if self.k is None:
            self._state = self._memory.apply(claims).state()
        else:
            # Re-read the window from scratch: what scrolled out is forgotten entirely.
            self._window.append(claims)
            self._state = ClaimMemory().apply(c for seen in self._window for c in seen).state()

    @property
    def state(self) -> WorldState:  # noqa: D102
        return self._state


class OracleTracker:
    """Reads the true state: the upper bound every other tracker is measured against.

    It holds the true facts of the entities mentioned in observations so far, which
    is exactly what drift is scored against, so its drift is zero by construction.
    It needs the full ``info`` (``wm.state``, ``wm.mentioned``): only an agent marked
    ``oracle`` gets it.
    """

    def __init__(self) -> None:
        self._mentioned: set[str] = set()
        self._state = WorldState()

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._mentioned = set()
        self._observe(info)

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._observe(info)

    def _observe(self, info: Mapping[str, Any]) -> None:
        if "wm.state" not in info:
            raise KeyError(
                "OracleTracker needs ground truth: build the env with ground_truth=True "
                "and mark the agent oracle=true"
            )
        self._mentioned.update(info["wm.mentioned"])
        self._state = WorldState(info["wm.state"]).restrict(self._mentioned)

    @property
    def state(self) -> WorldState:  # noqa: D102
        return self._state


# --- the LLM tracker -------------------------------------------------------------------

_NO_STATUS = "?"
"""Status of an entity created by a name alone (the registry requires one); not a fact."""
_TYPED_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*):.")
_ACTIONS_HINT = "The JSON must be a list of atomic action objects, [] if nothing changed."


@dataclasses.dataclass
class LLMTrackerStats:
    """What happened to the model's replies and actions during one episode.

    Attributes:
        replies: steps whose reply gave valid actions (``repaired`` included).
        repaired: of those, the ones repaired from a THINK block or after a correction.
        failed: steps where no reply validated, even after the corrections.
        request_errors: steps lost to a transient request error (timeout, 429/5xx after
            the client's retries, a garbled response).
        applied: actions applied to the world.
        dropped: valid actions the world refused (unknown entity, bad attribute...).
        events_fired: scheduled events that fired.
        events_dropped: scheduled events dropped (condition never held, or invalid).
    """

    replies: int = 0
    repaired: int = 0
    failed: int = 0
    request_errors: int = 0
    applied: int = 0
    dropped: int = 0
    events_fired: int = 0
    events_dropped: int = 0


class LLMTracker:
    """A model reads each observation into atomic actions applied to a ``World``.

    Each step the model gets the tracked facts (newest entities first, at most
    ``max_facts``), the pending events, the command and the observation
    (``wmkit.llm.prompts``), and answers with a JSON list of atomic actions, validated
    by the pydantic schema through ``ask_structured``. Every valid action is applied on
    its own; one the world refuses is dropped and counted. A step whose reply never
    validates, or whose request fails transiently, changes nothing: the tracked state
    stays exactly as it was. Between steps the world clock advances one step, so
    scheduled events fire when due.

    The model names entities ``type:name`` as the env's facts do (``parcel:px-4821``);
    the tracker maps each name to the world's canonical id (``canonical_id(type,
    name)``), creating the entity the first time an update or a relation names it, and
    reports facts under the names again. Entity types and their attributes are open:
    a contract grows when an action uses a new attribute. In conditions, the subject
    of ``fact()``/``has()`` may be a name; other strings are compared as written.

    Args:
        client: the chat model (a ``wmkit.llm.ChatClient``).
        max_repairs: correction rounds per step after a reply that does not validate.
        max_facts: most facts shown to the model per step (bounds the prompt).
        hints: text added to the system prompt (env-specific naming advice).
        params: request fields for every request, e.g. ``{"temperature": 0}``.
        keep_notes: how many recent problem notes ``notes`` keeps.
        constrained: send the atomic-action list's JSON schema with every request
            (bounded: :func:`wmkit.llm.schema.bounded_schema`), so a server that can
            constrain its output (the client's ``constrain``) writes only valid shapes.
        max_actions: the most actions one reply may hold, with ``constrained``.

    Attributes:
        stats: counters for the current episode (reset by ``reset``).
        notes: the latest problems, one line each (failed replies, dropped actions).

    ``reset`` and ``update`` raise the ``LLMError`` of a request that retrying cannot
    fix (refused connection, 4xx such as 401): the run is misconfigured, and an empty
    tracked state at every step would hide it, so it stops with the cause.
    """

    def __init__(
        self,
        client: ChatModel,
        *,
        max_repairs: int = 1,
        max_facts: int = 300,
        hints: str = "",
        params: Mapping[str, Any] | None = None,
        keep_notes: int = 100,
        constrained: bool = False,
        max_actions: int = 6,
    ) -> None:
        if max_repairs < 0 or max_facts < 0:
            raise ValueError(
                f"max_repairs and max_facts must be >= 0, got {max_repairs}, {max_facts}"
            )
        self.client = client
        self.max_repairs = max_repairs
        self.max_facts = max_facts
        self.system = TRACKER_SYSTEM + (f"\n{hints}" if hints else "")
        self.params = dict(params or {})
        self.constrained = constrained
        self._schema = (
            bounded_schema(list[AtomicAction], max_string=48, max_items=max_actions)
            if constrained
            else None
        )
        self.stats = LLMTrackerStats()
        self.notes: deque[str] = deque(maxlen=keep_notes)
        self._world = World.create(())
        self._touched: dict[str, int] = {}  # name -> step it last changed (prompt order)
        self._state = WorldState()

    @property
    def world(self) -> World:
        """The tracked world (canonical ids; ``state`` gives its facts under names)."""
        return self._world

    @property
    def state(self) -> WorldState:  # noqa: D102
        return self._state

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._world = World.create(())
        self._touched = {}
        self._state = WorldState()
        self.stats = LLMTrackerStats()
        self.notes.clear()
        self._observe(None, observation)
        self._state = _facts(self._world)

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        result = advance(self._world, 1)
        self._world = result.world
        self.stats.events_fired += len(result.events)
        for violation in result.violations:
            self.stats.events_dropped += 1
            self._note(f"event: {violation.message}")
        if result.events:  # the model must see what the events changed
            self._state = _facts(self._world)
        self._observe(action, observation)
        self._state = _facts(self._world)

    def _note(self, line: str) -> None:
        line = f"step {self._world.step}: {line}"
        self.notes.append(line)
        log.info("LLMTracker %s", line)

    def _observe(self, command: str | None, observation: str) -> None:
        facts, omitted = self._shown_facts()
        step = self._world.step
        events = [
            f"{e.event_id}: "
            + (
                f"due in {e.due - step} steps"
                if e.due > step
                else f"waits for its condition, at most {e.deadline - step} more steps"
            )
            + f" ({e.reason})"
            for e in self._world.timeline.events()
        ]
        messages = [
            {"role": "system", "content": self.system},
            {
                "role": "user",
                "content": tracker_user(facts, events, command, observation, omitted=omitted),
            },
        ]
        try:
            result = ask_structured(
                self.client,
                messages,
                parse_fn=_parse_actions,
                max_repairs=self.max_repairs,
                hint=_ACTIONS_HINT,
                params=self.params,
                json_schema=self._schema,
            )
        except LLMError as err:
            if not err.transient:
                raise
            self.stats.request_errors += 1
            self._note(f"request failed, step skipped: {err}")
            return
        if not result.ok:
            self.stats.failed += 1
            self._note(f"no valid reply after {result.attempts} tries: {result.reason}")
            return
        self.stats.replies += 1
        self.stats.repaired += result.status == "repaired"
        for action in result.value or ():
            self._apply(action)

    def _apply(self, action: AtomicAction) -> None:
        result = None
        try:
            world = _admit(self._world, action)
            result = apply(world, _to_ids(action))
            why = "; ".join(v.message for v in result.violations)
        except WorldError as err:  # a name, attribute or condition the world refuses
            why = str(err)
        if why or result is None:
            self.stats.dropped += 1
            self._note(f"dropped {action.model_dump_json()[:300]}: {why}")
            return
        self._world = result.world
        self.stats.applied += 1
        for name in _names(action, created=True):
            self._touched[name] = self._world.step

    def _shown_facts(self) -> tuple[list[Fact], int]:
        """The facts of the most recently changed entities, up to ``max_facts``."""
        by_entity: dict[str, list[Fact]] = {}
        for fact in self._state:
            by_entity.setdefault(fact.subject, []).append(fact)
        shown: list[Fact] = []
        for name in sorted(by_entity, key=lambda n: (-self._touched.get(n, -1), n)):
            if len(shown) + len(by_entity[name]) > self.max_facts:
                break
            shown.extend(by_entity[name])
        return sorted(shown), len(self._state) - len(shown)


def _parse_actions(text: str) -> tuple[AtomicAction, ...]:
    """Parse a JSON list of actions; a lone action object is taken as a list of one."""
    if text.lstrip().startswith("{"):
        return (parse_action(text),)
    return parse_actions(text)


def _type_of(name: str) -> str:
    match = _TYPED_NAME.match(name)
    return match.group(1) if match else "entity"


def _id_of(name: str) -> str:
    return canonical_id(_type_of(name), name)


def _names(action: AtomicAction, *, created: bool) -> list[str]:
    """Entity names ``action`` uses: those it may create (``created``), or must find."""
    if isinstance(action, UpdateEntity):
        return [action.entity_id] if created else []
    if isinstance(action, AddRelation):
        return [action.src, action.dst] if created else []
    if isinstance(action, RemoveRelation):
        return [] if created else [action.src, action.dst]
    if isinstance(action, Query):
        return [] if created else [action.subject]
    if isinstance(action, ScheduleEvent):
        return [n for a in action.actions for n in _names(a, created=created)]
    return []


def _admit(world: World, action: AtomicAction) -> World:
    """Return ``world`` with the entities and attributes ``action`` needs made known.

    Raises:
        UnknownEntityError: the action removes or asks about a name never created.
        UnknownFieldError: an attribute name the registry reserves.
    """
    for name in _names(action, created=False):
        if _id_of(name) not in world.registry:
            raise UnknownEntityError(f"unknown entity {name!r}")
    wanted: dict[str, set[str]] = {}
    for sub in (*getattr(action, "actions", ()), action):
        if isinstance(sub, UpdateEntity):
            wanted.setdefault(_type_of(sub.entity_id), set()).update(sub.attributes)
    for name in _names(action, created=True):
        wanted.setdefault(_type_of(name), set())
    contracts = dict(world.registry.contracts)
    grown = False
    for entity_type, attributes in wanted.items():
        old = contracts.get(entity_type)
        if old is None or not attributes <= old.allowed:
            known = old.attributes if old else frozenset()
            contracts[entity_type] = EntityContract(entity_type, known | (attributes - {"status"}))
            grown = True
    if grown:
        # Contracts are fixed per registry: re-register everything under the wider ones
        # (O(entities), once per new attribute name, so rare after the first steps).
        registry = EntityRegistry(contracts.values()).register_many(
            ((e.entity_type, e.raw_id, e.attributes) for e in world.registry), step=world.step
        )
        world = dataclasses.replace(world, registry=registry)
    for name in _names(action, created=True):
        if _id_of(name) not in world.registry:
            world = register(world, _type_of(name), name, {"status": _NO_STATUS})
    return world


def _to_ids(action: AtomicAction) -> AtomicAction:
    """Return ``action`` with entity names replaced by canonical ids."""
    if isinstance(action, UpdateEntity):
        return action.model_copy(update={"entity_id": _id_of(action.entity_id)})
    if isinstance(action, (AddRelation, RemoveRelation)):
        return action.model_copy(update={"src": _id_of(action.src), "dst": _id_of(action.dst)})
    if isinstance(action, Query):
        return action.model_copy(update={"subject": _id_of(action.subject)})
    if isinstance(action, ScheduleEvent):
        update: dict[str, Any] = {"actions": tuple(_to_ids(a) for a in action.actions)}
        if action.condition is not None:
            update["condition"] = _condition_to_ids(action.condition)
        return action.model_copy(update=update)
    return action


def _condition_to_ids(condition: str) -> str:
    """Rename the subject of every ``fact()``/``has()`` call; the world re-checks the rest."""
    try:
        tree = ast.parse(condition, mode="eval")
    except SyntaxError as err:
        raise ConditionError(f"condition {condition!r} does not parse: {err.msg}") from None
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("fact", "has")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            node.args[0] = ast.Constant(_id_of(node.args[0].value))
    return ast.unparse(tree)


def _facts(world: World) -> WorldState:
    """The world's facts with canonical ids turned back into names."""
    name = {e.id: e.raw_id for e in world.registry}
    facts = [
        Fact(e.raw_id, attribute, str(value))
        for e in world.registry
        for attribute, value in e.attributes.items()
        if not (attribute == "status" and value == _NO_STATUS)
    ]
    facts.extend(Fact(name[e.src], e.relation, name[e.dst]) for e in world.graph.edges())
    return WorldState(facts)


# --- the rules tracker -----------------------------------------------------------------


class _FactTable:
    """Facts by ``(subject, relation)`` with a reverse index, for applying claims."""

    def __init__(self, facts: Iterable[Fact]) -> None:
        self.objects: dict[tuple[str, str], set[str]] = {}
        self.holders: dict[tuple[str, str], set[str]] = {}
        for s, r, o in facts:
            self.add(s, r, o)

    def add(self, s: str, r: str, o: str) -> None:
        self.objects.setdefault((s, r), set()).add(o)
        self.holders.setdefault((r, o), set()).add(s)

    def set(self, s: str, r: str, o: str) -> None:
        for old in self.objects.pop((s, r), ()):
            self.holders[(r, old)].discard(s)
        self.add(s, r, o)

    def resolve(self, subject: str | tuple[tuple[str, str], ...]) -> str | None:
        if isinstance(subject, str):
            return subject
        found: set[str] | None = None
        for relation, obj in subject:
            holding = self.holders.get((relation, obj), set())
            found = set(holding) if found is None else found & holding
        return next(iter(found)) if found and len(found) == 1 else None

    def state(self) -> WorldState:
        return WorldState(
            Fact(s, r, o) for (s, r), objects in self.objects.items() for o in objects
        )


class RulesTracker:
    """Tracks the state with learned rules: each step, apply the predicted change.

    The rules (``wmkit-distill``'s ``rules.jsonl``, a :class:`~wmkit.knowledge.rules.
    RuleSet`) predict the change of each step from the tracked state, the command
    and the observation; the tracked state is the last one with that change applied.
    When a ``reader`` is given (the env's), what it reads from the observation is
    applied after the prediction, so text facts override predicted ones (a claim sets
    its ``(subject, relation)``; a claim whose described subject is not unique is
    dropped, as in :class:`ClaimMemory`). Without a reader the rules alone read the
    text: their observation rules are a learned reader.

    Args:
        rules: a rule set, or the path of a rules file.
        reader: reads one observation into claims; None to use the rules alone.
        observation: give the rules the observation; False predicts from the command
            alone (what a simulator knows before acting).
        min_confidence: observation rules below it are ignored (when loading a path).

    Raises:
        FileNotFoundError: ``rules`` names no file.
        RulesError: the file is not a rules file.
    """

    def __init__(
        self,
        rules: RuleSet | str | os.PathLike[str],
        reader: Reader | None = None,
        *,
        observation: bool = True,
        min_confidence: float = 0.0,
    ) -> None:
        self.rules = (
            rules
            if isinstance(rules, RuleSet)
            else RuleSet.load(rules, min_confidence=min_confidence)
        )
        self.reader = reader
        self.observation = observation
        self._state = WorldState()

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._state = WorldState()
        self._step(None, observation)

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        self._step(action, observation)

    def _step(self, action: str | None, observation: str) -> None:
        delta = self.rules.predict(self._state, action, observation if self.observation else None)
        facts = set(self._state.facts)
        facts.difference_update(delta.removed)
        facts.update(delta.added)
        claims = self.reader(observation) if self.reader is not None else ()
        if claims:
            table = _FactTable(facts)
            for claim in claims:
                subject = table.resolve(claim.subject)
                if subject is not None:
                    table.set(subject, claim.relation, claim.object)
            self._state = table.state()
        else:
            self._state = WorldState(facts)

    @property
    def state(self) -> WorldState:  # noqa: D102
        return self._state


class NullTracker:
    """Keeps no facts: the tracker of agents on envs without a reader (Jericho, TextWorld).

    Its state is always empty, so drift is 1 wherever anything was mentioned and every
    probe is answered wrong; what such an agent is measured on is its score. It reads
    nothing, not even the observation: a policy that needs text gets it directly.
    """

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        pass

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:  # noqa: D102
        pass

    @property
    def state(self) -> WorldState:  # noqa: D102
        return _NOTHING


_NOTHING = WorldState()
