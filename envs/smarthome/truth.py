"""SmartHome's ground truth, derived when ``truth`` asks: facts, net changes, probes.

Nothing here runs on the step path with ground truth off.
"""

from __future__ import annotations

from itertools import compress
from operator import is_not

from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import Change
from wmkit.envs.smarthome.commands import rule_name
from wmkit.envs.smarthome.state import (
    Rule,
    SmartHomeState,
    _Home,
    _level_text,
    _rule_digest,
    _rule_facts_of,
    _tuple,
)
from wmkit.world.types import Fact, Probe

__all__ = ["RuleTruth", "net_changes", "probes", "world_facts"]


def net_changes(changes: tuple, home: _Home) -> tuple[Change, ...]:
    """Return the net changes: per fact, its first ``before`` and last ``after`` if they differ.

    A new rule is recorded as ``(id, None, None, the rule as made)``: each fact new.
    """
    if not changes:
        return ()
    if len(changes) == 1 and changes[0][1] is not None:
        return changes if changes[0][2] != changes[0][3] else ()
    net: dict[tuple[str, str], list[str | None]] = {}
    for subject, relation, before, after in changes:
        if relation is None:
            for fact in _rule_facts_of(after, home):
                net[subject, fact.relation] = [None, fact.object]
            continue
        entry = net.get((subject, relation))
        if entry is None:
            net[subject, relation] = [before, after]
        else:
            entry[1] = after
    return tuple([(s, r, b, a) for (s, r), (b, a) in net.items() if b != a])


class RuleTruth:
    """The ground truth of a tuple of rules, brought up to date from the last one.

    Consecutive steps change a rule or two (or make one): only rules that are not the
    very same objects as last time are derived again, and the facts sorted by rule id
    are patched in place. Anything else (a new episode, a restore) starts again.

    Attributes:
        rules: the rules it is the truth of.
        facts: their facts, six per rule, sorted by rule id.
        order: rule indices sorted by rule id.
        digests: per rule, its share of the state hash; ``digest`` their sum mod 2**64.
    """

    __slots__ = ("digest", "digests", "facts", "order", "rules")

    def __init__(self) -> None:
        self.rules: tuple[Rule, ...] = ()
        self.facts: list[Fact] = []
        self.order: list[int] = []
        self.digests: list[int] = []
        self.digest = 0

    def update(self, rules: tuple[Rule, ...], home: _Home) -> None:
        """Become the truth of ``rules`` (of the house ``home``)."""
        last = self.rules
        changed = list(compress(range(len(last)), map(is_not, rules, last)))
        if len(rules) < len(last) or len(changed) > 8:
            self.__init__()
            changed = []
        facts, order, digests, digest = self.facts, self.order, self.digests, self.digest
        for i in changed:
            k = order.index(i)
            facts[6 * k : 6 * k + 6] = _rule_facts_of(rules[i], home)
            new = _rule_digest(rules[i])
            digest += new - digests[i]
            digests[i] = new
        for i in range(len(digests), len(rules)):  # new rules, in order of making
            k = rule_name(i).rank  # where its id sorts among those made before it
            order.insert(k, i)
            facts[6 * k : 6 * k] = _rule_facts_of(rules[i], home)
            digests.append(_rule_digest(rules[i]))
            digest += digests[i]
        self.digest = digest % 2**64
        self.rules = rules


def world_facts(state: SmartHomeState, cache: dict[int, Fact]) -> tuple[tuple[Fact, ...], Fact]:
    """Return the facts of the lights, blinds and people, sorted, and the thermostat's.

    ``cache`` is the episode's ``Memo.facts``.
    """
    home, levels = state.home, state.levels
    out = []
    for i in home.device_ids:
        key = (i << 7) | levels[i]  # levels are below 128
        fact = cache.get(key)
        if fact is None:
            text = _level_text(home.types[i], levels[i])
            fact = cache[key] = _tuple(Fact, (home.devices[i], home.relation[i], text))
        out.append(fact)
    thermostat = out.pop()  # the thermostat is the last device
    out += [pair[here] for pair, here in zip(home.locations, state.present, strict=True)]
    return tuple(out), thermostat


def probes(state: SmartHomeState) -> tuple[Probe, ...]:
    """Questions due at ``state``'s step about mentioned entities, old and recent alike.

    Drawn from where the step's generator stood after its text (``probe_x``).
    """
    x = state.probe_x
    if x < 0:
        return ()
    rng = StepRng.at(x)
    if rng.random() >= state.params.probe_rate:
        return ()
    home, rules, relative = state.home, state.rules, state.relative
    due: dict[tuple[str, str], Probe] = {}
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        roll = rng.below(3)
        if roll == 2 and rules:
            # Breakage: what a rule does, stated once when it was made.
            rule = rules[rng.below(len(rules))]
            fact = _rule_facts_of(rule, home)[rng.choice((1, 2, 5))]  # device, effect, trigger
            probe = Probe(rule.id, fact.relation, fact.object, rule.created, "breakage")
        elif roll == 1 and (relative or rules):
            # Confusion: a level after an increment, or whether a rule is still pending.
            if relative and (not rules or rng.random() < 0.5):
                probe = _level_probe(state, rng.choice(sorted(relative)), "confusion")
            else:
                rule = rules[rng.below(len(rules))]
                probe = Probe(rule.id, "status", rule.status, rule.status_at, "confusion")
        elif rng.random() < 0.75:
            probe = _level_probe(state, rng.below(len(home.devices)), "drift")
        else:
            p = rng.below(len(home.persons))
            where = "home" if state.present[p] else "away"
            probe = Probe(home.persons[p], "location", where, state.present_at[p], "drift")
        due.setdefault((probe.subject, probe.relation), probe)
    return tuple(due.values())


def _level_probe(state: SmartHomeState, device: int, kind: str) -> Probe:
    home = state.home
    value = _level_text(home.types[device], state.levels[device])
    return Probe(home.devices[device], home.relation[device], value, state.level_at[device], kind)
