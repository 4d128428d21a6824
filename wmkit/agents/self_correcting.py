"""``SelfCorrectingPolicy``: search, act, check the prediction, and correct (seed 004).

Self-correction is a policy around search, not a branch inside it: each step the
policy searches from the real state through a plain
:class:`~wmkit.agents.mcts.MCTSPolicy` over its simulator (``configs/simulator/``: a
rule model over the tracked facts that can be wrong, or the live env), takes the
chosen action, and at the next step compares the change the search predicted for that
action with the change it observed: the difference of its tracked states before and
after (what its reader saw, never ground truth). On a mismatch it

1. penalises the node of the taken action in its tree (:meth:`Tree.penalise`);
2. raises curiosity: a :class:`~wmkit.knowledge.types.Curiosity` whose flag text
   (``FLAG_CURIOSITY: yes`` / ``CURIOSITY_REASON: ...``) goes in the trace;
3. teaches the simulator what the command really did there
   (:meth:`~wmkit.search.types.EpisodeSimulator.correct`: the rules simulator keeps an
   exception, so later searches predict it right; the live env has nothing to learn);
4. backtracks: if the observed state is one it searched from within the last
   ``max_backtrack`` steps (a failed command usually changes nothing), it goes on
   searching that tree, where the failed node is penalised and its siblings keep what
   they learned: the next action is the best sibling (same state) or the best other
   child of an ancestor; otherwise it searches afresh.

A loop penalty (``loop_penalty`` times the real visits of a state) is taken off the
reward of every imagined step into a state the episode has already been in, so the
search stops walking in circles; a step predicted to change nothing is no loop (it
stays put). When the action the search found is predicted worse than staying put, the
policy stays (:func:`~wmkit.agents.mcts.stand_still`). Every verified step leaves a
:class:`TraceRecord` in :attr:`SelfCorrectingPolicy.trace` (JSON-ready through
:meth:`TraceRecord.model_dump`).

The baseline self-correction is measured against is the plain
:class:`~wmkit.agents.mcts.MCTSPolicy` over the same simulator (``mcts_rules``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from wmkit.agents.mcts import MCTSPolicy, stand_still
from wmkit.knowledge.scenes import format_curiosity
from wmkit.knowledge.types import Curiosity
from wmkit.search.rules_sim import UNKNOWN
from wmkit.search.tree import Tree
from wmkit.search.types import (
    Budget,
    EpisodeSimulator,
    ProposeFn,
    SearchOutput,
    SelectFn,
    Transition,
    ValueFn,
)
from wmkit.world.types import Delta, Fact, WorldState

__all__ = ["SelfCorrectingPolicy", "TraceRecord", "compare"]

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
    """A simulator whose steps into states the episode has visited cost extra reward.

    A step predicted to change nothing (an empty predicted delta) stays where it is:
    that is no loop, and it is left as it is for the search to prune as a no-op.
    """

    __slots__ = ("penalty", "sim", "visits")

    def __init__(self, sim: Any, visits: Counter[Hashable], penalty: float) -> None:
        self.sim, self.visits, self.penalty = sim, visits, penalty

    def step(self, token: Any, action: str) -> Transition:
        t = self.sim.step(token, action)
        if t.delta is not None and not t.delta.added and not t.delta.removed:
            return t
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
        simulator: what the search steps (``configs/simulator/``). The rules simulator
            learns exceptions from corrections; an env snapshot simulator's predicted
            delta is what its ``reader`` (if any) reads in the predicted observation,
            never ground truth.
        budget: simulations per step, depth limit and node cap (an int: simulations).
        select_fn: the selection rule (default UCB1).
        value_fn: leaf values (default a :class:`~wmkit.search.values.HeuristicValue`,
            reset per episode).
        propose_fn: actions to try at a state (default as :class:`MCTSPolicy`'s).
        discount: per-step discount in [0, 1].
        max_backtrack: real steps back a backtrack may go, >= 0 (0: never reuse a tree).
        mismatch_penalty: Q penalty on the node of a failed prediction, >= 0.
        loop_penalty: reward taken off per earlier real visit of an imagined state, >= 0.

    Raises:
        ValueError: a negative setting, or a budget field out of range.
        TypeError: a bad budget type.
    """

    def __init__(
        self,
        simulator: EpisodeSimulator,
        *,
        budget: Budget | int = 64,
        select_fn: SelectFn | None = None,
        value_fn: ValueFn | None = None,
        propose_fn: ProposeFn | None = None,
        discount: float = 0.95,
        max_backtrack: int = 3,
        mismatch_penalty: float = 1.0,
        loop_penalty: float = 0.25,
    ) -> None:
        for name, value in (("mismatch_penalty", mismatch_penalty), ("loop_penalty", loop_penalty)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {value}")
        if isinstance(max_backtrack, bool) or max_backtrack < 0:
            raise ValueError(f"max_backtrack must be an int >= 0, got {max_backtrack!r}")
        self.mcts = MCTSPolicy(
            simulator,
            budget=budget,
            select_fn=select_fn,
            propose_fn=propose_fn,
            value_fn=value_fn,
            discount=discount,
            reuse_tree=False,  # trees are kept here, by the states they were searched from
        )
        """The plain MCTS this policy searches through (its pieces, its rng)."""
        self.max_backtrack = int(max_backtrack)
        self.mismatch_penalty = float(mismatch_penalty)
        self.loop_penalty = float(loop_penalty)
        self.trace: list[TraceRecord] = []
        """Verified steps of the episode, oldest first."""
        self.curiosities: list[Curiosity] = []
        """Curiosity raised this episode, oldest first."""
        self._visits: Counter[Hashable] = Counter()
        self._history: list[tuple[WorldState, Tree]] = []
        self._pending: _Pending | None = None

    @property
    def simulator(self) -> EpisodeSimulator:
        """The simulator the search steps (the MCTS's)."""
        return self.mcts.simulator

    @property
    def value_fn(self) -> ValueFn:
        """The leaf value function (the MCTS's)."""
        return self.mcts.value_fn

    @property
    def last(self) -> SearchOutput | None:
        """The last search's output."""
        return self.mcts.last

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode: forget trees, trace, visits and learned exceptions."""
        self.mcts.reset(rng)
        self._visits.clear()
        self._history.clear()
        self._pending = None
        self.trace, self.curiosities = [], []

    def trace_json(self) -> list[dict[str, Any]]:
        """The trace as JSON-ready dicts."""
        return [r.model_dump(mode="json") for r in self.trace]

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Verify the last action, correct on a mismatch, search, and return the next one.

        Raises:
            RuntimeError: the search found no action (the state proposes none).
        """
        mcts = self.mcts
        root = mcts.root(observation, info, tracked)
        self._visits[_loop_key(root)] += 1
        target, record = self._verify(tracked)
        grown: Transition | Tree = root
        before: dict[str, int] = {}
        if target is not None:
            target.replace_root_record(root)
            before = {a: target.visits(c) for a, c in target.live_children(target.root).items()}
            grown = target
        out = mcts.search(grown, _LoopPenalised(mcts.simulator, self._visits, self.loop_penalty))
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
        with self.simulator.preserve():
            stay = stand_still(tree, action, self.simulator)
        node: int | None = kids[action]
        predicted = tree.delta[node]
        if stay is not None:  # predicted worse than staying put: stay
            action, node, predicted = stay
        loop = 0.0
        if node is not None:
            loop = self.loop_penalty * self._visits.get(_loop_key(_transition_of(tree, node)), 0)
        if record is not None:
            if record.backtrack is not None:
                record = record.model_copy(update={"next_action": action})
            self.trace.append(record)
        self._pending = _Pending(mcts.step, action, tracked, tree, node, predicted, loop)
        self._remember(tracked, tree)
        mcts.step += 1
        return action

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
        # A simulator that learns keeps an exception (returned); the live env learns nothing.
        fields["correction"] = _as_json(
            self.simulator.correct(pending.before, pending.action, observed)
        )
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
