"""World-state trackers: the oracle upper bound and the ``window(K)`` baseline."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from wmkit.agents.types import Reader
from wmkit.world.types import Claim, Fact, WorldState

__all__ = ["ClaimMemory", "OracleTracker", "WindowTracker"]


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
