"""The ground truth of a step: its change as a ``Delta``, split by cause, and the ``wm.*`` keys.

Every family builds its ``wm.*`` info with :func:`truth_info` (one shape, fresh
containers, ARCHITECTURE §3) and its deltas with :func:`changes_delta` from the raw
changes its transition noted, split by cause: the agent's command, then world events.
An env that cannot see causes (an emulator) splits with :func:`split_by_counterfactual`
against a run where the agent only waited; both keep every :func:`fact_slot` in one part.

Given the step, :func:`truth_info` adds the step's abstention probes
(:func:`abstention_probes`): questions about an entity the episode never had, whose
right answer is ``UNKNOWN``, so a tracker that guesses is caught.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterable, Sequence
from typing import Any

from wmkit.world.types import UNKNOWN, Delta, Fact, Probe, delta_info

__all__ = [
    "NONCE_NAMES",
    "NO_DELTA",
    "Change",
    "Slot",
    "abstention_probes",
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


NONCE_NAMES = ("quillon", "marrow", "tansy", "orpine", "sorrel", "vetch", "hollin", "brume")
"""Names no family gives an entity, for the abstention probes of entities named by word
(tests/envs/test_family_contract.py checks that no family's text uses one)."""


def _never_had(subject: str, taken: Collection[str], digest: bytes) -> str | None:
    """An id of ``subject``'s type that is not in ``taken``, chosen by ``digest``.

    A name with digits keeps its letters and gets other digits (``parcel:px-8960`` ->
    ``parcel:px-4173``); a name of words gets a :data:`NONCE_NAMES` word. None for a
    subject without a ``type:`` prefix (``player``) or when every try is taken.
    """
    kind, sep, name = subject.partition(":")
    if not sep or not name:
        return None
    for attempt in range(4):
        if any(c.isdigit() for c in name):
            digits = iter(digest[attempt * 8 :] + digest)
            new = "".join(str(next(digits) % 10) if c.isdigit() else c for c in name)
        else:
            new = NONCE_NAMES[(digest[attempt] + attempt) % len(NONCE_NAMES)]
        candidate = f"{kind}:{new}"
        if candidate not in taken:
            return candidate
    return None


def abstention_probes(
    state: Sequence[Fact], probes: Sequence[Probe], step: int, key: str
) -> list[Probe]:
    """The abstention probe of a step: a question whose right answer is ``UNKNOWN``.

    At a step with probes due, the first due probe about a typed entity gives its
    relation and the type of the entity asked about; the question is about another
    entity of that type that the episode does not have (:func:`_never_had`: in no true
    fact as subject or object, a word no family uses or digits of its own). A later
    step may hand out a numbered id so drawn (a new parcel); up to the step asked, no
    observation stated it, which is what the probe asks. Chosen from ``key``
    (the state's hash, itself a function of the episode's seed and the step), so it
    draws nothing from the family's generators: the episode is the same with or without
    it. Kind ``abstention``, anchored at ``step`` (chain length 0: it measures guessing,
    not memory).

    Args:
        state: the true facts now.
        probes: the probes due now (the family's).
        step: the step they are asked at.
        key: a per-state string (the state hash).
    """
    asked = next((p for p in probes if ":" in p.subject), None)
    if asked is None:
        return []
    taken = {f.subject for f in state} | {f.object for f in state}
    digest = hashlib.blake2b(f"{key}|{step}".encode(), digest_size=32).digest()
    subject = _never_had(asked.subject, taken, digest)
    if subject is None:
        return []
    return [Probe(subject, asked.relation, UNKNOWN, step, "abstention")]


def truth_info(
    *,
    state: Iterable[Fact],
    action: Delta,
    event: Delta,
    probes: Iterable[Probe],
    state_hash: str,
    mentioned: Iterable[str],
    step: int | None = None,
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
        step: the step; given, the step's abstention probe (:func:`abstention_probes`)
            follows the family's probes.
        **extra: family-specific keys, given without the ``wm.`` prefix.
    """
    facts, due = list(state), list(probes)
    if step is not None and due:
        due += abstention_probes(facts, due, step, state_hash)
    info = {
        "wm.state": facts,
        "wm.delta": delta_info(action, event),
        "wm.probes": due,
        "wm.state_hash": state_hash,
        "wm.mentioned": sorted(set(mentioned)),
    }
    for key, value in extra.items():
        info[f"wm.{key}"] = value
    return info
