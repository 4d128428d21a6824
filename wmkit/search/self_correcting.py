"""``SelfCorrectingPolicy``: search, act, check the prediction, and correct (seed 004).

Each step the policy searches from the real state with a simulator (``rules``: a world
model over the tracked facts that can be wrong; ``env_snapshot``: the real engine),
takes the chosen action, and at the next step compares the change the search
predicted for that action with the change it observed: the difference of its tracked
states before and after (what its reader saw, never ground truth). On a mismatch it

1. penalises the node of the taken action in its tree (:meth:`Tree.penalise`);
2. raises curiosity: a :class:`~wmkit.knowledge.scenes.Curiosity` whose flag text
   (``FLAG_CURIOSITY: yes`` / ``CURIOSITY_REASON: ...``) goes in the trace;
3. teaches the simulator an exception for that command in that situation
   (:meth:`RulesSimulator.correct`), so later searches predict it right;
4. backtracks: if the observed state is one it searched from within the last
   ``max_backtrack`` steps (a failed command usually changes nothing), it goes on
   searching that tree, where the failed node is penalised and its siblings keep what
   they learned: the next action is the best sibling (same state) or the best other
   child of an ancestor; otherwise it searches afresh.

A loop penalty (``loop_penalty`` times the real visits of a state) is taken off the
reward of every imagined step into a state the episode has already been in, so the
search stops walking in circles. Every verified step leaves a :class:`TraceRecord` in
:attr:`SelfCorrectingPolicy.trace` (JSON-ready through :meth:`TraceRecord.model_dump`).

With ``correct=False`` the same policy is plain MCTS over the same simulator: it still
records mismatches in the trace but neither penalises, learns, backtracks nor applies
the loop penalty; that is the baseline self-correction is measured against.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from wmkit.knowledge.scenes import Curiosity, format_curiosity
from wmkit.search.rules_sim import UNKNOWN, NaiveVaultRules, Predictor, RulesSimulator
from wmkit.search.search import search, ucb1
from wmkit.search.simulators import EnvSnapshotSimulator, admissible_proposal
from wmkit.search.tree import Tree
from wmkit.search.types import Budget, ProposeFn, SearchOutput, SelectFn, Transition, ValueFn
from wmkit.search.values import HeuristicValue, reset_value, visit_value
from wmkit.world.types import Delta, Fact, WorldState

__all__ = ["BUILTIN_RULES", "SelfCorrectingPolicy", "TraceRecord", "compare"]

BUILTIN_RULES = {"naive_vault": NaiveVaultRules}
"""Hand-written predictors by name (the ``rules`` argument may name one)."""

_SHOWN = 4  # facts named per list in a curiosity reason


class TraceRecord(BaseModel):
    """One verified step of a :class:`SelfCorrectingPolicy` (serialised as JSON).

    Attributes:
        step: the real step the action was taken at (0: the first action).
        action: the action taken.
        predicted: the change the search predicted, ``{"added": [...], "removed":
            [...]}`` of ``[subject, relation, object]``; None when the simulator
            predicts none.
        observed: the change of the tracked state over the step, same shape.
        mismatch: the prediction failed (a predicted change did not happen, or a known
            fact changed without being predicted).
        curiosity: the curiosity flag text raised for the mismatch, or None.
        penalty: the mismatch penalty put on the action's node.
        loop_penalty: the loop penalty the action's predicted state carried.
        correction: the exception learned, same shape as ``predicted``, or None.
        backtrack: ``"sibling"`` (the observed state is the one acted from: its other
            children), ``"ancestor"`` (an earlier state), ``"none"`` (searched
            afresh), or None when there was no mismatch or no correction.
        backtrack_depth: real steps back to the backtrack target (1: the state acted
            from), or None.
        next_action: the action taken after the correction, or None.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    step: int
    action: str
    predicted: dict[str, list[list[str]]] | None
    observed: dict[str, list[list[str]]]
    mismatch: bool
    curiosity: str | None = None
    penalty: float = 0.0
    loop_penalty: float = 0.0
    correction: dict[str, list[list[str]]] | None = None
    backtrack: Literal["sibling", "ancestor", "none"] | None = None
    backtrack_depth: int | None = None
    next_action: str | None = None


def _as_json(delta: Delta | None) -> dict[str, list[list[str]]] | None:
    if delta is None:
        return None
    return {"added": [list(f) for f in delta.added], "removed": [list(f) for f in delta.removed]}


def _fmt(facts: list[tuple[str, Fact]]) -> str:
    """``+(s, r, o) -(s, r, o) ...``: signed facts, the first few, the rest counted."""
    shown = " ".join(f"{sign}({s}, {r}, {o})" for sign, (s, r, o) in facts[:_SHOWN])
    more = len(facts) - _SHOWN
    return shown + (f" and {more} more" if more > 0 else "")


def compare(
    predicted: Delta, before: WorldState, after: WorldState
) -> tuple[list[Fact], list[Fact]]:
    """What a prediction got wrong: ``(missing, surprising)`` facts, each sorted.

    ``missing``: predicted additions absent from ``after`` (one with object
    :data:`~wmkit.search.rules_sim.UNKNOWN` is absent when ``after`` holds no object
    for its subject and relation) and predicted removals still in it. ``surprising``:
    facts of ``before`` gone from ``after`` that the prediction did not remove (a known
    fact changed unforeseen); a predicted fact sets its subject and relation, so the
    fact it replaces counts as removed (a prediction read from text names only the new
    value). Facts that are simply new (a room seen for the first time) surprise
    nobody: the prediction could not name them.
    """
    missing = [
        f
        for f in predicted.added
        if (not after.objects(f.subject, f.relation) if f.object == UNKNOWN else f not in after)
    ]
    missing += [f for f in predicted.removed if f in after]
    expected_gone = set(predicted.removed)
    set_slots = {(f.subject, f.relation) for f in predicted.added}
    surprising = [
        f
        for f in before.facts - after.facts
        if f not in expected_gone and (f.subject, f.relation) not in set_slots
    ]
    return sorted(missing), sorted(surprising)


class _LoopPenalised:
    """A simulator whose steps into states the episode has visited cost extra reward."""

    __slots__ = ("penalty", "sim", "visits")

    def __init__(self, sim: Any, visits: Counter[Hashable], penalty: float) -> None:
        self.sim, self.visits, self.penalty = sim, visits, penalty

    def step(self, token: Any, action: str) -> Transition:
        t = self.sim.step(token, action)
        seen = self.visits.get(_loop_key(t), 0) if self.penalty else 0
        return t._replace(reward=t.reward - self.penalty * seen) if seen else t


def _loop_key(t: Transition) -> Hashable:
    return t.key if t.key is not None else t.observation


class _Pending:
    """The action in flight: what was predicted, from where, in which tree."""

    __slots__ = ("action", "before", "loop", "node", "predicted", "step", "tree")

    def __init__(
        self,
        step: int,
        action: str,
        before: WorldState,
        tree: Tree,
        node: int | None,
        predicted: Delta | None,
        loop: float,
    ) -> None:
        self.step, self.action, self.before = step, action, before
        self.tree, self.node, self.predicted, self.loop = tree, node, predicted, loop


class SelfCorrectingPolicy:
    """Search, act, compare predicted with observed change, and correct (a Policy).

    Args:
        env: the live env (the suite injects it); needed by ``env_snapshot`` only, whose
            transposition key is the env's own state identity and whose predicted delta
            is what the env's text ``reader`` (if any) reads in the predicted
            observation; never ground truth.
        simulator: ``"rules"`` or ``"env_snapshot"``.
        rules: for ``rules``: a predictor, a path to a ``rules.jsonl`` (the
            distiller's), or a :data:`BUILTIN_RULES` name (``"naive_vault"``).
        budget: simulations per step, depth limit and node cap (an int: simulations).
        select_fn: the selection rule (default UCB1).
        value_fn: leaf values (default a :class:`HeuristicValue`, one per episode).
        propose_fn: actions to try at a state (default its ``admissible_actions``).
        discount: per-step discount in [0, 1].
        max_backtrack: real steps back a backtrack may go, >= 0 (0: never reuse a tree).
        mismatch_penalty: Q penalty on the node of a failed prediction, >= 0.
        loop_penalty: reward taken off per earlier real visit of an imagined state, >= 0.
        correct: False makes this plain MCTS over the same simulator (see module doc).

    Raises:
        ValueError: an unknown simulator or rules name, a negative setting, or
            ``rules`` missing for the rules simulator.
        TypeError: ``env_snapshot`` with an env that cannot snapshot and restore.
    """

    def __init__(
        self,
        env: Any = None,
        *,
        simulator: Literal["rules", "env_snapshot"] = "rules",
        rules: Predictor | str | Path | None = None,
        budget: Budget | int = 64,
        select_fn: SelectFn | None = None,
        value_fn: ValueFn | None = None,
        propose_fn: ProposeFn | None = None,
        discount: float = 0.95,
        max_backtrack: int = 3,
        mismatch_penalty: float = 1.0,
        loop_penalty: float = 0.25,
        correct: bool = True,
    ) -> None:
        for name, value in (("mismatch_penalty", mismatch_penalty), ("loop_penalty", loop_penalty)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if isinstance(max_backtrack, bool) or max_backtrack < 0:
            raise ValueError(f"max_backtrack must be an int >= 0, got {max_backtrack!r}")
        if simulator == "rules":
            self.simulator: RulesSimulator | EnvSnapshotSimulator = RulesSimulator(
                _predictor(rules)
            )
        elif simulator == "env_snapshot":
            if env is None:
                raise ValueError("the env_snapshot simulator needs the live env (env=...)")
            # Predicted deltas are read from the predicted text by the env's own reader
            # (text only; none on Jericho/TextWorld: no prediction, no mismatch).
            core = getattr(env, "unwrapped", env)
            self.simulator = EnvSnapshotSimulator(env, reader=getattr(core, "reader", None))
        else:
            raise ValueError(f"simulator must be 'rules' or 'env_snapshot', got {simulator!r}")
        self.budget = budget
        self.select_fn = select_fn or ucb1()
        self.value_fn = value_fn or HeuristicValue()
        self.propose_fn = propose_fn or admissible_proposal
        self.discount = discount
        self.max_backtrack = int(max_backtrack)
        self.mismatch_penalty = float(mismatch_penalty)
        self.loop_penalty = float(loop_penalty) if correct else 0.0
        self.correct = bool(correct)
        self.trace: list[TraceRecord] = []
        """Verified steps of the episode, oldest first."""
        self.curiosities: list[Curiosity] = []
        """Curiosity raised this episode, oldest first."""
        self.last: SearchOutput | None = None
        """The last search's output."""
        self._rng = np.random.default_rng(0)
        self._step = 0
        self._visits: Counter[Hashable] = Counter()
        self._history: list[tuple[WorldState, Tree]] = []
        self._pending: _Pending | None = None

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode: forget trees, trace, visits and learned exceptions."""
        self._rng = rng
        self._step = 0
        self._visits.clear()
        self._history.clear()
        self._pending = None
        self.trace, self.curiosities, self.last = [], [], None
        if isinstance(self.simulator, RulesSimulator):
            self.simulator.reset()
        reset_value(self.value_fn)

    def trace_json(self) -> list[dict[str, Any]]:
        """The trace as JSON-ready dicts."""
        return [r.model_dump(mode="json") for r in self.trace]

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Verify the last action, correct on a mismatch, search, and return the next one.

        Raises:
            RuntimeError: the search found no action (the state proposes none).
        """
        sim = self.simulator
        if isinstance(sim, RulesSimulator):
            root = sim.root(observation, info, tracked, step=self._step)
        else:
            root = sim.root(observation, info)
        self._visits[_loop_key(root)] += 1
        visit_value(self.value_fn, root)
        target, record = self._verify(tracked)
        grown: Transition | Tree = root
        before: dict[str, int] = {}
        if target is not None:
            target.replace_root_record(root)
            before = {a: target.visits(c) for a, c in target.live_children(target.root).items()}
            grown = target
        wrapped = _LoopPenalised(sim, self._visits, self.loop_penalty)
        if isinstance(sim, EnvSnapshotSimulator):
            with sim.preserve():
                out = self._search(grown, wrapped)
        else:
            out = self._search(grown, wrapped)
        self.last = out
        tree = out.tree
        kids = tree.live_children(tree.root)
        if not kids:
            raise RuntimeError(
                "SelfCorrectingPolicy found no action to take: nothing is proposed here "
                f"(admissible_actions={list(info.get('admissible_actions', []))[:5]})"
            )
        order = {a: i for i, a in enumerate(tree.slot_actions[tree.slot[tree.root]])}
        # Visits of this search only: on a tree backtracked to, the failed action still
        # holds the visits of the search that chose it.
        action = max(
            kids,
            key=lambda a: (
                tree.visits(kids[a]) - before.get(a, 0),
                tree.q(kids[a]),
                -order.get(a, 0),
            ),
        )
        if record is not None:
            if record.backtrack is not None:
                record = record.model_copy(update={"next_action": action})
            self.trace.append(record)
        node = kids[action]
        loop = self.loop_penalty * self._visits.get(_loop_key(_transition_of(tree, node)), 0)
        self._pending = _Pending(self._step, action, tracked, tree, node, tree.delta[node], loop)
        self._remember(tracked, tree)
        self._step += 1
        return action

    def _search(self, root: Transition | Tree, sim: _LoopPenalised) -> SearchOutput:
        return search(
            root,
            simulator=sim,
            propose_fn=self.propose_fn,
            value_fn=self.value_fn,
            select_fn=self.select_fn,
            budget=self.budget,
            rng=self._rng,
            discount=self.discount,
        )

    def _remember(self, state: WorldState, tree: Tree) -> None:
        self._history = [(s, t) for s, t in self._history if t is not tree and s != state]
        self._history.append((state, tree))
        del self._history[: max(0, len(self._history) - self.max_backtrack)]

    def _verify(self, tracked: WorldState) -> tuple[Tree | None, TraceRecord | None]:
        """Check the action in flight against ``tracked``; return the tree to go on with."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None, None
        observed = Delta.between(pending.before, tracked)
        fields: dict[str, Any] = {
            "step": pending.step,
            "action": pending.action,
            "predicted": _as_json(pending.predicted),
            "observed": _as_json(observed),
            "loop_penalty": pending.loop,
            "mismatch": False,
        }
        if pending.predicted is None:
            return None, TraceRecord(**fields)
        missing, surprising = compare(pending.predicted, pending.before, tracked)
        if not (missing or surprising):
            return None, TraceRecord(**fields)
        fields["mismatch"] = True
        if not self.correct:
            return None, TraceRecord(**fields)
        reasons = []
        if missing:
            gained = set(pending.predicted.added)
            signed = [("+" if f in gained else "-", f) for f in missing]
            reasons.append(f"expected {_fmt(signed)}")
        if surprising:
            reasons.append(f"did not expect {_fmt([('-', f) for f in surprising])}")
        curiosity = Curiosity(f"{pending.action!r} failed its prediction: " + "; ".join(reasons))
        self.curiosities.append(curiosity)
        fields["curiosity"] = format_curiosity(curiosity)
        tree, node = pending.tree, pending.node
        if node is not None and tree.alive(node) and self.mismatch_penalty:
            tree.penalise(node, self.mismatch_penalty)
            fields["penalty"] = self.mismatch_penalty
        if isinstance(self.simulator, RulesSimulator):
            kept = self.simulator.correct(pending.before, pending.action, observed)
            fields["correction"] = _as_json(kept)
        # Backtrack: the nearest remembered state equal to what is observed now.
        target, kind, depth = None, "none", None
        for back, (state, remembered) in enumerate(reversed(self._history), start=1):
            if state == tracked:
                target, depth = remembered, back
                kind = "sibling" if remembered is tree else "ancestor"
                break
        fields["backtrack"], fields["backtrack_depth"] = kind, depth
        return target, TraceRecord(**fields)


def _transition_of(tree: Tree, node: int) -> Transition:
    return Transition(
        tree.token[node],
        tree.observation[node] or "",
        tree.reward[node],
        bool(tree.terminal[node]),
        tree.info[node] or {},
        tree.slot_key[tree.slot[node]],
        tree.delta[node],
    )


def _predictor(rules: Predictor | str | Path | None) -> Predictor:
    if rules is None:
        raise ValueError(
            "the rules simulator needs rules: a rules.jsonl path (wmkit-distill), a "
            f"predictor, or one of {sorted(BUILTIN_RULES)}"
        )
    if isinstance(rules, (str, Path)):
        name = str(rules)
        if name in BUILTIN_RULES:
            return BUILTIN_RULES[name]()
        from wmkit.knowledge.rules import RuleSet

        path = Path(name)
        if not path.is_file():
            raise ValueError(
                f"rules {name!r} is neither a file nor a built-in rule set "
                f"({sorted(BUILTIN_RULES)})"
            )
        return RuleSet.load(path)
    return rules
