"""The ground truth of a step: its change as a ``Delta``, split by cause, and the ``wm.*`` keys.

Every family builds its ``wm.*`` info with :func:`truth_info` (one shape, fresh
containers, ARCHITECTURE §3) and its deltas with :func:`changes_delta` from the raw
changes its transition noted, split by cause: the agent's command, then world events.
An env that cannot see causes (an emulator) splits with :func:`split_by_counterfactual`
against a run where the agent only waited; both keep every :func:`fact_slot` in one part.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from wmkit.world.types import Delta, Fact, Probe, delta_info

__all__ = [
    "NO_DELTA",
    "Change",
    "Slot",
    "changes_delta",
    "fact_slot",
    "split_by_counterfactual",
    "truth_info",
]

Change = tuple[str, str, str | None, str]
"""One net fact change of a step: ``(subject, relation, before or None, after)``."""

NO_DELTA = Delta()

Slot = tuple[str, str, str | None]
"""What a fact is a value of: ``(subject, relation, None)``, or ``(subject, relation,
object)`` for a set-valued relation (:func:`fact_slot`)."""


def changes_delta(changes: Iterable[Change]) -> Delta:
    """Return the ``Delta`` of a step's raw changes (sorted added and removed facts)."""
    # Built only when asked (ground truth on): the step path keeps raw changes.
    if not changes:
        return NO_DELTA
    added = sorted(Fact(s, r, after) for s, r, _, after in changes)
    removed = sorted(Fact(s, r, before) for s, r, before, _ in changes if before is not None)
    return Delta(tuple(added), tuple(removed))


def fact_slot(fact: Fact, set_valued: Collection[str] = ()) -> Slot:
    """Return the slot ``fact`` fills: one value of one subject's relation.

    A relation holds one object per subject (``in``: an object has one parent), so its
    slot is ``(subject, relation, None)`` and a change of value removes one fact of the
    slot and adds another. A relation in ``set_valued`` holds any number of objects
    (z-machine attributes: each is set or not), so each of its facts is a yes/no slot
    of its own, ``(subject, relation, object)``.
    """
    subject, relation, obj = fact
    return (subject, relation, obj if relation in set_valued else None)


def split_by_counterfactual(
    before: Iterable[Fact],
    after: Iterable[Fact],
    waited: Iterable[Fact],
    set_valued: Collection[str] = (),
) -> tuple[Delta, Delta]:
    """Split the change ``before`` -> ``after`` into its action and event parts, by slot.

    ``waited`` is the counterfactual: the facts had the agent waited instead of acting,
    from the same state. The rule, per :func:`fact_slot`:

    * a slot the command changed and waiting left as it was is *action*-driven;
    * a slot the command changed and waiting changed too is *event*-driven, whatever
      value each run gave it: the world was moving it anyway (a wanderer in a stochastic
      game whose command drew its random numbers differently ends in another room than
      under ``wait``, and that is still one move of his, not the command's);
    * a slot only waiting changed is no change at all (the command prevented it).

    So the added and removed facts of one slot always land in the same part, and the
    two parts together are exactly the change ``before`` -> ``after``. A command that
    overrides a slot the world was changing anyway (stopping a wanderer mid-move)
    counts as the event's: one counterfactual cannot tell the two apart.

    The three may leave out any subject the command did not change (none of its slots
    can be in either part), but must hold all the facts of every subject they include:
    a fact missing from ``waited`` reads as one waiting removed.

    Args:
        before: the facts before the step.
        after: the facts after the command.
        waited: the facts after the counterfactual ``wait`` from ``before``.
        set_valued: the relations whose facts are each their own slot.

    Returns:
        ``(action, event)`` deltas, each with sorted fact lists.
    """
    before, after = set(before), set(after)
    added, removed = after - before, before - after
    if not (added or removed):
        return NO_DELTA, NO_DELTA
    moving = {fact_slot(f, set_valued) for f in before.symmetric_difference(waited)}
    parts: dict[bool, tuple[list[Fact], list[Fact]]] = {True: ([], []), False: ([], [])}
    for fact in added:
        parts[fact_slot(fact, set_valued) in moving][0].append(fact)
    for fact in removed:
        parts[fact_slot(fact, set_valued) in moving][1].append(fact)
    action, event = (
        Delta(tuple(sorted(add)), tuple(sorted(rem))) if add or rem else NO_DELTA
        for add, rem in (parts[False], parts[True])
    )
    return action, event


def truth_info(
    *,
    state: Iterable[Fact],
    action: Delta,
    event: Delta,
    probes: Iterable[Probe],
    state_hash: str,
    mentioned: Iterable[str],
    **extra: Any,
) -> dict[str, Any]:
    """Return a step's ``wm.*`` info (fresh containers, so callers may keep or change it).

    Args:
        state: the true facts now, sorted.
        action: the change the agent's command made.
        event: the change the world's events made.
        probes: the questions due now.
        state_hash: a fast hash of the true state (transposition, caching).
        mentioned: the entity ids the observation names (any order, repeats allowed).
        **extra: family-specific keys, given without the ``wm.`` prefix.
    """
    info = {
        "wm.state": list(state),
        "wm.delta": delta_info(action, event),
        "wm.probes": list(probes),
        "wm.state_hash": state_hash,
        "wm.mentioned": sorted(set(mentioned)),
    }
    for key, value in extra.items():
        info[f"wm.{key}"] = value
    return info
