"""Labels for the rows of a merged sweep: only the overrides that differ, only where they act.

Every row of a sweep job carries its job's overrides as ``variant``
(``"agents=[window,memory],agents.window.tracker.k=2"``, Hydra's syntax, joined by
commas). A merged leaderboard labels a row by the overrides that differ between the
jobs *and* act on the row:

- ``agents.<name>.…`` acts on agent ``<name>`` only, ``envs.<name>.…`` on env
  ``<name>`` only (its prefix is dropped in the label: the row names them already);
- keys that choose which episodes run (:data:`SELECTION_KEYS`) and ``hydra.…`` act on
  no row's settings: the row's own identity (env, horizon, seed, agent) says it;
- any other override (``experiment=…``, ``pipeline.…``) acts on every row.

Rows an override does not act on (other agents in a sweep over one agent's setting)
merge across jobs into one row labelled without a variant. A row's ``spec`` (the
fingerprint of its settings, :func:`~wmkit.evals.suite.fingerprint`) keeps this honest:
rows that the overrides would merge but whose settings differ stay apart, labelled by
their fingerprint.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SELECTION_KEYS", "Labeller", "override_key", "split_overrides", "touches"]

SELECTION_KEYS = frozenset({"agents", "envs", "seeds", "horizons", "resume", "progress", "records"})
"""Override keys that choose what runs (or how it is shown), not how an agent acts."""

_OPEN, _CLOSE = "[{(", "]})"


def split_overrides(variant: str) -> list[str]:
    """Split a ``variant`` at its top-level commas (not those inside brackets or quotes).

    >>> split_overrides("agents=[a,b],agents.a.k=5,x='p,q'")
    ['agents=[a,b]', 'agents.a.k=5', "x='p,q'"]

    Raises:
        ValueError: a bracket or quote is not closed, or closes what it did not open.
    """
    parts, depth, quote, start = [], [], "", 0
    for i, ch in enumerate(variant):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _OPEN:
            depth.append(_CLOSE[_OPEN.index(ch)])
        elif ch in _CLOSE:
            if not depth or depth.pop() != ch:
                raise ValueError(f"variant {variant!r}: unbalanced {ch!r} at {i}")
        elif ch == "," and not depth:
            parts.append(variant[start:i])
            start = i + 1
    if depth or quote:
        raise ValueError(f"variant {variant!r}: {quote or depth[-1]!r} is never closed")
    parts.append(variant[start:])
    return [p.strip() for p in parts if p.strip()]


def override_key(override: str) -> str:
    """Return the config path an override sets: ``+a.b=1`` -> ``a.b``, ``g@p.x=y`` -> ``p.x``."""
    key = override.split("=", 1)[0].lstrip("~+")
    return key.split("@", 1)[1] if "@" in key else key


def touches(key: str, env: str, agent: str) -> bool:
    """Whether an override of ``key`` acts on the rows of ``agent`` on ``env`` (module doc)."""
    head, _, rest = key.partition(".")
    if head == "hydra" or (key in SELECTION_KEYS and not rest):
        return False
    if head == "agents" and rest:
        return rest.split(".", 1)[0] == agent
    if head == "envs" and rest:
        return rest.split(".", 1)[0] == env
    return True


def _short(override: str, env: str, agent: str) -> str:
    # The row names its agent and env already: agents.window.tracker.k=2 -> tracker.k=2.
    for prefix in (f"agents.{agent}.", f"envs.{env}."):
        for lead in ("", "+", "++", "~"):
            if override.startswith(lead + prefix):
                return lead + override[len(lead + prefix) :]
    return override


class Labeller:
    """Labels the rows of one merge: ``agent`` or ``agent (override, …)``.

    Args:
        rows: every row of the merge (their ``variant`` strings are compared).
    """

    def __init__(self, rows: Iterable[Mapping[str, Any]]) -> None:
        variants = {str(row.get("variant") or "") for row in rows}
        parsed = {v: split_overrides(v) for v in variants}
        # An override differs when some job lacks it (the same key with the same value).
        common = set.intersection(*(set(o) for o in parsed.values())) if parsed else set()
        self._differing = {
            v: [o for o in overrides if o not in common] for v, overrides in parsed.items()
        }
        self._all_differing = {o for overrides in self._differing.values() for o in overrides}

    def variant(self, row: Mapping[str, Any]) -> str:
        """The differing overrides that act on ``row``, shortened, joined by ``", "``.

        ``"defaults"`` when none of the row's own does but another job's acts on its
        agent and env (the row ran with the defaults those jobs changed).
        """
        env, agent = str(row["env"]), str(row["agent"])
        own = self._differing.get(str(row.get("variant") or ""), [])
        mine = [_short(o, env, agent) for o in own if touches(override_key(o), env, agent)]
        if mine:
            return ", ".join(mine)
        others = any(touches(override_key(o), env, agent) for o in self._all_differing)
        return "defaults" if others else ""

    def label(self, row: Mapping[str, Any]) -> str:
        """The row's label: its agent, then the overrides of :meth:`variant` in brackets."""
        variant = self.variant(row)
        return f"{row['agent']} ({variant})" if variant else str(row["agent"])
