"""The reward model of a rule set: what a command earns, from the state it is sent in.

Rules say what a command does to the facts; a :class:`RewardModel` says what it earns.
It is learned from logged transitions by counting (:mod:`wmkit.trainers.rewards`),
with the reading the command rules use (:mod:`wmkit.knowledge.rules`): the command's
template (``reroute {parcel} to {v}``) and the preconditions the state before it
offers for its slots (:func:`~wmkit.knowledge.rules.features`:
``{parcel}.requested_address == {v}``, ``{parcel}.status == delivered``).

Per template the model is a decision list of :class:`RewardGroup` records, like the
command rules: a group is a set of preconditions with the support, mean and spread of
the logged rewards it covers, the first group whose preconditions hold decides, and
the last group of every template has none (the *rest*: the steps no earlier group
covered). So "a reroute to the parcel's requested address earns +1" comes first and
the rest of the reroutes, penalised, last; the rest is not the template's mean, which
the +1s would water down. A command of a template never seen is neutral: 0, with
support 0.

A rule set carries its reward model (``RuleSet.rewards``) and saves its groups in the
rules file, a row each (``"source": "reward"``), so the pipeline caches both as one
artifact.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

# A precondition, as wmkit.knowledge.rules names it (``Feature``); rules.py imports this
# module, so the alias is spelled out here rather than imported.
Feature = tuple[str, str, str]

__all__ = ["RewardEstimate", "RewardGroup", "RewardModel"]


class RewardGroup(NamedTuple):
    """The logged rewards a template earned under some preconditions.

    Attributes:
        template: the command template (``"book {hotel}"``).
        conditions: preconditions over the state before the step, sorted; empty for
            the template's rest, its last group.
        support: logged steps the group covers (those an earlier group of the
            template covers are not its).
        mean: their mean reward.
        sd: the standard deviation of their rewards (population).
    """

    template: str
    conditions: tuple[Feature, ...]
    support: int
    mean: float
    sd: float


class RewardEstimate(NamedTuple):
    """A predicted reward and what it rests on.

    Attributes:
        mean: the predicted reward (0 for a command never seen).
        support: logged steps behind it (0: never seen, the neutral guess).
        conditions: the preconditions of the deciding group (empty: the rest).
        sd: the spread of the rewards behind it.
    """

    mean: float = 0.0
    support: int = 0
    conditions: tuple[Feature, ...] = ()
    sd: float = 0.0

    @property
    def cautious(self) -> float:
        """The mean less one standard error (``sd / sqrt(support)``; 0 when never seen).

        What to count on: a command whose rewards were as often -1 as +1 is worth
        less than a sure 0, and one that always earned the same is worth just that.
        """
        if not self.support:
            return 0.0
        return self.mean - self.sd / math.sqrt(self.support)


_NEUTRAL = RewardEstimate()


class RewardModel:
    """Decision lists of reward groups by template: the first group that holds decides.

    Args:
        groups: each template's groups in decision order; the last of each template
            has no conditions (the rest), and only the last.

    Raises:
        ValueError: a template's groups do not end with exactly one group without
            conditions, or a group has support < 1, a mean that is not finite or a
            spread that is negative or not finite.
    """

    def __init__(self, groups: Iterable[RewardGroup] = ()) -> None:
        self._lists: dict[str, list[RewardGroup]] = {}
        for g in groups:
            if g.support < 1 or not (math.isfinite(g.mean) and math.isfinite(g.sd) and g.sd >= 0):
                raise ValueError(f"not a reward group (support >= 1, finite mean, sd >= 0): {g}")
            found = self._lists.setdefault(g.template, [])
            if found and not found[-1].conditions:
                raise ValueError(f"template {g.template!r} has a reward group after its rest")
            found.append(g)
        for template, found in self._lists.items():
            if found[-1].conditions:
                raise ValueError(
                    f"template {template!r}: its last reward group must have no conditions "
                    "(the rest of its steps)"
                )

    def __len__(self) -> int:
        return sum(map(len, self._lists.values()))

    def __iter__(self) -> Iterator[RewardGroup]:
        """Every group, templates sorted, each template's in decision order."""
        for template in sorted(self._lists):
            yield from self._lists[template]

    @property
    def templates(self) -> Mapping[str, Sequence[RewardGroup]]:
        """Each template's groups, in decision order."""
        return self._lists

    def estimate(self, template: str, have: Iterable[Feature]) -> RewardEstimate:
        """The reward of ``template`` in a state offering the preconditions ``have``."""
        found = self._lists.get(template)
        if found is None:
            return _NEUTRAL
        have = have if isinstance(have, frozenset | set) else frozenset(have)
        for g in found:
            if all(c in have for c in g.conditions):
                return RewardEstimate(g.mean, g.support, g.conditions, g.sd)
        raise AssertionError("unreachable: every template's last group holds")

    def rows(self) -> list[dict[str, Any]]:
        """The groups as JSON-ready rows (``"source": "reward"``), in :meth:`__iter__` order."""
        return [
            {
                "source": "reward",
                "template": g.template,
                "conditions": [list(c) for c in g.conditions],
                "support": g.support,
                "mean": round(g.mean, 6),
                "sd": round(g.sd, 6),
            }
            for g in self
        ]

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]]) -> RewardModel:
        """The model of rows written by :meth:`rows` (each template's in decision order).

        Raises:
            ValueError: as the constructor.
        """
        return cls(
            RewardGroup(
                r["template"],
                tuple(sorted(tuple(c) for c in r["conditions"])),
                int(r["support"]),
                float(r["mean"]),
                float(r["sd"]),
            )
            for r in rows
        )
