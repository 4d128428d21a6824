"""Memory trackers: what a reader takes from the text, kept in governed memory or a dict.

Both trackers read every observation with the env's reader and label what they take in
with one small, explicit mapping (:class:`Labels`, set from the agent's config):

- a claim read from the text is a FACT (source ``obs:<step>``), unless its relation is
  one of ``assumptions`` (the desk's stated assumptions, e.g. Booking's
  ``assumed_class``): then an ASSUMPTION;
- a claim whose object is one of ``releases`` (``released``, ``expired``) says that the
  slot's earlier value is out of service: that value is released before the new one is
  written;
- a relation in ``ttl_steps`` is valid for that many steps after it was read (a fixed
  validity period);
- a relation in ``ttl_from`` states a validity period in the text: its claim
  ``(subject, "valid_for", "6")`` is no fact but the TTL, in steps, of the subject's
  ``ttl_from[relation]`` value read in the same observation (Booking without expiry
  notices: "Hotel Azure: quote valid for 6 steps.");
- a relation in ``lapses`` takes that value when its TTL runs out (Booking: a lapsed
  ``quote`` is ``expired``): the governed memory writes it as a FACT (the text stated
  the period), which the next observed value replaces;
- ``effects`` are rule predictions: the effect a command is expected to have on the
  entity it names (``book hotel azure`` -> ``hotel:azure status booked``), written as
  ASSUMPTIONs when the command is sent, before its reply is read;
- :meth:`~GovernedTracker.scratch` takes search scratch, which is TEMPORARY.

:class:`GovernedTracker` keeps all of it in a :class:`~wmkit.memory.StateManager`
(seed 002): conflicts go by authority, then recency, so an observed fact overrides an
assumption and an assumption never overrides a fact; releases go through
``mark_for_release`` and an in-process :class:`~wmkit.memory.Governor`; TEMPORARY never
reaches the store; and its ``state`` is exactly what the memory serves, so a released,
expired or superseded value is never used. :class:`DictTracker` is the plain-memory
baseline with the same reader, labels and predictions over a
:class:`~wmkit.agents.trackers.ClaimMemory` dict: last write wins, labels are ignored,
nothing is released.

An entity is named by a command ``<verb> <kind> <name...>`` as ``<kind>:<name...>``
(``book flight tp123`` -> ``flight:tp123``), and only an entity the tracker already
knows gets predictions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from wmkit.agents.trackers import ClaimMemory
from wmkit.memory import Authority, Governor, MissingStateError, StateManager, fact_key
from wmkit.world.types import Claim, Fact, Reader, WorldState

__all__ = ["DictTracker", "GovernedTracker", "Labels"]


@dataclass(frozen=True)
class Labels:
    """How a memory tracker labels what it takes in (see the module docstring).

    Attributes:
        assumptions: relations whose claims are stated assumptions (ASSUMPTION).
        releases: objects that mark the slot's earlier value as released.
        ttl_steps: relation -> steps a read value of it stays valid (>= 1).
        effects: command verb -> ``{relation: object}`` predicted for the entity the
            command names.
        ttl_from: relation stating a validity period in steps -> the relation of the
            same subject that the period applies to.
        lapses: relation -> the value it takes when its TTL runs out.

    Raises:
        TypeError: a name is not a string, or a TTL not an int.
        ValueError: a TTL is below 1.
    """

    assumptions: frozenset[str] = frozenset()
    releases: frozenset[str] = frozenset()
    ttl_steps: Mapping[str, int] = field(default_factory=dict)
    effects: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    ttl_from: Mapping[str, str] = field(default_factory=dict)
    lapses: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def build(
        cls,
        assumptions: Iterable[str] = (),
        releases: Iterable[str] = (),
        ttl_steps: Mapping[str, int] | None = None,
        effects: Mapping[str, Mapping[str, str]] | None = None,
        ttl_from: Mapping[str, str] | None = None,
        lapses: Mapping[str, str] | None = None,
    ) -> Labels:
        """Return labels from plain (or Hydra) containers, checked."""
        ttl = {_name("ttl_steps key", k): v for k, v in (ttl_steps or {}).items()}
        for relation, steps in ttl.items():
            if isinstance(steps, bool) or not isinstance(steps, int):
                raise TypeError(f"ttl_steps[{relation!r}] must be an int, got {steps!r}")
            if steps < 1:
                raise ValueError(f"ttl_steps[{relation!r}] must be >= 1, got {steps}")
        rules = {
            _name("effects verb", verb).lower(): {
                _name("effects relation", r): _name("effects object", o)
                for r, o in dict(outcome).items()
            }
            for verb, outcome in (effects or {}).items()
        }
        return cls(
            assumptions=frozenset(_name("assumption", a) for a in assumptions),
            releases=frozenset(_name("release", r) for r in releases),
            ttl_steps=ttl,
            effects=rules,
            ttl_from={
                _name("ttl_from key", k): _name("ttl_from relation", v)
                for k, v in (ttl_from or {}).items()
            },
            lapses={
                _name("lapses key", k): _name("lapses value", v) for k, v in (lapses or {}).items()
            },
        )


def _steps(claim: Claim) -> int:
    """The validity period a ``ttl_from`` claim states, in steps (>= 1)."""
    try:
        steps = int(claim.object)
    except ValueError:
        steps = 0
    if steps < 1:
        raise ValueError(f"{claim}: a validity period must be a whole number of steps >= 1")
    return steps


def _name(what: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError(f"{what} must be a non-empty string, got {value!r}")
    return value


class _LabellingTracker:
    """Reads, labels and predicts; subclasses say where the labelled values go."""

    def __init__(
        self,
        reader: Reader,
        *,
        assumptions: Iterable[str] = (),
        releases: Iterable[str] = (),
        ttl_steps: Mapping[str, int] | None = None,
        effects: Mapping[str, Mapping[str, str]] | None = None,
        ttl_from: Mapping[str, str] | None = None,
        lapses: Mapping[str, str] | None = None,
    ) -> None:
        self.reader = reader
        self.labels = Labels.build(assumptions, releases, ttl_steps, effects, ttl_from, lapses)
        self.step = 0
        self._state = WorldState()

    def reset(self, observation: str, info: Mapping[str, Any]) -> None:
        """Start an episode from its first observation (step 0)."""
        self._start_episode()
        self.step = 0
        self._read(observation)
        self._end_step()

    def update(self, action: str, observation: str, info: Mapping[str, Any]) -> None:
        """Predict what ``action`` does (ASSUMPTIONs), then read its reply (step + 1)."""
        self.step += 1
        self._start_step()
        verb = action.split(maxsplit=1)[0].lower() if action.strip() else ""
        for fact in self.predict(action):
            self._write(fact, Authority.ASSUMPTION, f"rule:{verb}")
        self._read(observation)
        self._end_step()

    @property
    def state(self) -> WorldState:
        """The tracked state now (what the memory serves, for the governed tracker)."""
        return self._state

    def predict(self, action: str) -> list[Fact]:
        """Return what the ``effects`` rules predict ``action`` does, sorted.

        Empty when the verb has no rule or the command names no entity the tracker
        knows (a command on an unknown item is refused by the env anyway).
        """
        words = action.lower().split()
        outcome = self.labels.effects.get(words[0]) if words else None
        if not outcome or len(words) < 3:
            return []
        subject = f"{words[1]}:{' '.join(words[2:])}"
        if not self._knows(subject):
            return []
        return [Fact(subject, r, o) for r, o in sorted(outcome.items())]

    def _read(self, observation: str) -> None:
        labels, source = self.labels, f"obs:{self.step}"
        claims = self.reader(observation)
        # Stated validity periods first: the line giving one may follow the value's.
        stated: dict[tuple[str, str], int] = {}
        if labels.ttl_from:
            for claim in claims:
                target = labels.ttl_from.get(claim.relation)
                if target is not None and isinstance(claim.subject, str):
                    stated[(claim.subject, target)] = _steps(claim)
        for claim in claims:
            if claim.relation in labels.ttl_from:
                continue  # a validity period is no fact about the world
            subject = self._resolve(claim.subject)
            if subject is None:
                continue  # a description matching no entity or several: meaningless here
            fact = Fact(subject, claim.relation, claim.object)
            if claim.object in labels.releases:
                self._release(fact, f"{source}: {claim.relation} {claim.object}")
            authority = (
                Authority.ASSUMPTION if claim.relation in labels.assumptions else Authority.FACT
            )
            ttl = stated.get((subject, claim.relation), labels.ttl_steps.get(claim.relation))
            self._write(fact, authority, source, ttl)

    # Where the values go: the subclasses.

    def _start_episode(self) -> None:
        raise NotImplementedError

    def _start_step(self) -> None:
        pass

    def _knows(self, subject: str) -> bool:
        return subject in self._state.subjects()

    def _resolve(self, subject: str | tuple[tuple[str, str], ...]) -> str | None:
        raise NotImplementedError

    def _write(
        self, fact: Fact, authority: Authority, source: str, ttl_steps: int | None = None
    ) -> None:
        raise NotImplementedError

    def _release(self, fact: Fact, reason: str) -> None:
        raise NotImplementedError

    def _end_step(self) -> None:
        raise NotImplementedError


class GovernedTracker(_LabellingTracker):
    """A tracker whose memory is a :class:`~wmkit.memory.StateManager` (seed 002).

    Keys are ``fact_key(subject, relation)``; values are the claims' objects. After
    every observation the tracker commits its releases (and TTL expiries) with its
    governor, then asks ``get_state(key, ASSUMPTION)`` for every key the step wrote,
    released or saw expire: ``state`` holds exactly what the memory serves, never a
    TEMPORARY, released, expired or superseded value. (Only this tracker writes to
    its memory, so a key it did not touch cannot have changed.)

    Args:
        reader: reads one observation into claims (the env's ``reader``).
        memory: an empty memory for one episode; the caller opens and closes it.
        assumptions: relations whose claims are ASSUMPTIONs (see :class:`Labels`).
        releases: objects that release the slot's earlier value.
        ttl_steps: relation -> validity period in steps.
        effects: command verb -> predicted ``{relation: object}`` of the named entity.
        ttl_from: relation stating a validity period -> the relation it applies to.
        lapses: relation -> its value once its TTL ran out (a FACT).
        governor: commits releases; default an in-process one without retry delay.

    Raises:
        RuntimeError: at ``reset``, when the memory already holds states (one memory
            per episode: a second episode would inherit the first one's facts).
    """

    def __init__(
        self,
        reader: Reader,
        memory: StateManager,
        *,
        assumptions: Iterable[str] = (),
        releases: Iterable[str] = (),
        ttl_steps: Mapping[str, int] | None = None,
        effects: Mapping[str, Mapping[str, str]] | None = None,
        ttl_from: Mapping[str, str] | None = None,
        lapses: Mapping[str, str] | None = None,
        governor: Governor | None = None,
    ) -> None:
        super().__init__(
            reader, assumptions=assumptions, releases=releases, ttl_steps=ttl_steps,
            effects=effects, ttl_from=ttl_from, lapses=lapses,
        )  # fmt: skip
        if not isinstance(memory, StateManager):
            raise TypeError(f"memory must be a StateManager, got {type(memory).__name__}")
        self.memory = memory
        self.governor = governor or Governor(
            memory.store, worker="governed-tracker", backoff_s=0.0, max_backoff_s=0.0
        )
        self._values: dict[tuple[str, str], str] = {}  # what the memory serves, by slot
        self._touched: set[tuple[str, str]] = set()  # slots to ask the memory about
        self._expiry: dict[tuple[str, str], int] = {}  # slot -> step its TTL lapses
        self._released = False
        # The served values as a ClaimMemory: resolves descriptions ("the Lisbon hotel
        # in the old town") against what the memory holds, this observation included.
        self._index = ClaimMemory()

    def scratch(self, subject: str, relation: str, value: str) -> None:
        """Note search scratch: a TEMPORARY value, never persisted and never in ``state``.

        It lives in this process only while no persisted state holds the key (the
        manager's rule), and ``get_state(key)`` with the default floor serves it.
        """
        self.memory.set_state(
            fact_key(subject, relation), value, source="search", authority=Authority.TEMPORARY,
            step=self.step,
        )  # fmt: skip

    def _start_episode(self) -> None:
        held = len(self.memory.store.dump()["wm_states"])
        if held:
            raise RuntimeError(
                f"GovernedTracker needs an empty memory at reset (one per episode); this one "
                f"already holds {held} state versions"
            )
        self._values, self._touched, self._expiry = {}, set(), {}
        self._index = ClaimMemory()
        self._state = WorldState()
        self._released = False

    def _start_step(self) -> None:
        # Only advance() moves the memory clock (a write's step may not run ahead of it
        # by more than the store's skew bound), so the clock follows every step.
        self.memory.advance(self.step)
        if not self._expiry:
            return
        due = [slot for slot, at in self._expiry.items() if at <= self.step]
        if not due:
            return
        for slot in due:
            del self._expiry[slot]
        self._touched.update(due)
        # Commit the expiries now, so that a lapse value can take the slot's place.
        self.governor.drain(timeout_s=10.0)
        for subject, relation in due:
            value = self.labels.lapses.get(relation)
            if value is not None:
                # A FACT: the text stated the period, so the lapse is as observed as
                # the value was (and a rule prediction must not override it).
                self._write(Fact(subject, relation, value), Authority.FACT, f"ttl:{self.step}")

    def _resolve(self, subject: str | tuple[tuple[str, str], ...]) -> str | None:
        return self._index.resolve(subject)

    def _write(
        self, fact: Fact, authority: Authority, source: str, ttl_steps: int | None = None
    ) -> None:
        result = self.memory.set_state(
            fact_key(fact.subject, fact.relation), fact.object, source=source,
            authority=authority, step=self.step, ttl_steps=ttl_steps,
        )  # fmt: skip
        if result.accepted and authority is not Authority.TEMPORARY:
            slot = (fact.subject, fact.relation)
            self._touched.add(slot)
            self._index.apply([Claim(*fact)])
            if ttl_steps is None:
                self._expiry.pop(slot, None)
            else:
                self._expiry[slot] = self.step + ttl_steps

    def _release(self, fact: Fact, reason: str) -> None:
        # What is held now, this observation's earlier writes included.
        held = self._index.facts.get((fact.subject, fact.relation))
        if held is None or held == fact.object:
            return  # nothing served to release, or the text restates what is held
        try:
            self.memory.mark_for_release(
                fact_key(fact.subject, fact.relation), "ARCHIVE", reason, step=self.step
            )
        except MissingStateError:
            return
        self._touched.add((fact.subject, fact.relation))
        self._released = True

    def _end_step(self) -> None:
        if self._released:
            # Phase two now. Fail-closed either way: a pending release is already unusable.
            self.governor.drain(timeout_s=10.0)
            self._released = False
        if not self._touched:
            return
        removed = False
        for slot in self._touched:
            lookup = self.memory.get_state(fact_key(*slot), Authority.ASSUMPTION)
            if lookup.found:
                self._values[slot] = lookup.state.value
            elif self._values.pop(slot, None) is not None:
                removed = True
        self._touched.clear()
        self._state = WorldState(Fact(s, r, o) for (s, r), o in self._values.items())
        if removed:  # a ClaimMemory cannot forget: rebuild it from what is served
            self._index = ClaimMemory().apply(Claim(*f) for f in self._state)


class DictTracker(_LabellingTracker):
    """The plain-memory baseline: the same reading and predictions, kept in a dict.

    A :class:`~wmkit.agents.trackers.ClaimMemory`: every write replaces the slot's
    value (last write wins, whatever its label), nothing is released, nothing expires,
    and search scratch lands in the dict like everything else. With no ``effects`` it
    is exactly ``WindowTracker(reader, k=None)``.

    Args:
        reader: reads one observation into claims (the env's ``reader``).
        assumptions, releases, ttl_steps, effects, ttl_from, lapses: as for
            :class:`GovernedTracker`; only ``effects`` changes what a dict holds (the
            others are labels a dict cannot keep; a stated validity period is read,
            like by the governed tracker, as no fact, and then forgotten).
    """

    def __init__(
        self,
        reader: Reader,
        *,
        assumptions: Iterable[str] = (),
        releases: Iterable[str] = (),
        ttl_steps: Mapping[str, int] | None = None,
        effects: Mapping[str, Mapping[str, str]] | None = None,
        ttl_from: Mapping[str, str] | None = None,
        lapses: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(
            reader, assumptions=assumptions, releases=releases, ttl_steps=ttl_steps,
            effects=effects, ttl_from=ttl_from, lapses=lapses,
        )  # fmt: skip
        self._memory = ClaimMemory()

    def scratch(self, subject: str, relation: str, value: str) -> None:
        """Note search scratch: a plain dict keeps it like any other value."""
        self._write(Fact(subject, relation, value), Authority.TEMPORARY, "search")
        self._end_step()

    def _start_episode(self) -> None:
        self._memory = ClaimMemory()

    def _resolve(self, subject: str | tuple[tuple[str, str], ...]) -> str | None:
        return self._memory.resolve(subject)

    def _write(
        self, fact: Fact, authority: Authority, source: str, ttl_steps: int | None = None
    ) -> None:
        self._memory.apply([Claim(*fact)])

    def _release(self, fact: Fact, reason: str) -> None:
        pass  # a dict has no release: the new value simply overwrites the old one

    def _end_step(self) -> None:
        self._state = self._memory.state()
