"""Value functions: ``heuristic``, ``value_net``, ``llm`` and ``hybrid`` (cheap, then costly).

A value function estimates the future return of a newly reached, non-terminal state
from its :class:`~wmkit.search.types.Transition` (agent-visible info only). The search
adds the rewards along the path itself, and calls the value function once per new
state (transpositions reuse the first estimate).

* :class:`HeuristicValue`: novelty (few real visits to the state), optionally plus score.
* :class:`ValueNetValue`: the network ``wmkit-train-value`` trained on recorded
  trajectories (:mod:`wmkit.search.value_net`), in reward units, cached by its input;
  with a policy head it is also a proposer (:meth:`ValueNetValue.propose`): the
  commands a base proposer offers, with the network's prior, from the same forward
  pass that values the state.
* :class:`LLMValue`: a chat model's judgement in [0, 1] with a short reason, through
  :mod:`wmkit.llm`; a failed, malformed or slow reply gives a fixed fallback value and
  is counted, never raised, so a search never stops half way.
* :class:`HybridValue`: a cheap value first; the costly one only where it is promising.
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from wmkit.llm.errors import LLMError
from wmkit.llm.prompts import VALUE_HINT, VALUE_SYSTEM, value_user
from wmkit.llm.structured import ask_structured
from wmkit.llm.types import ChatModel
from wmkit.search.simulators import admissible_proposal
from wmkit.search.types import Proposal, ProposeFn, Transition, ValueFn

if TYPE_CHECKING:
    from wmkit.search.value_net import ValueInput

__all__ = [
    "HeuristicValue",
    "HybridValue",
    "LLMValue",
    "LLMValueStats",
    "ValueNetValue",
    "ValueReply",
    "reset_value",
    "visit_value",
]

log = logging.getLogger(__name__)


class HeuristicValue:
    """``novelty_weight / sqrt(1 + visits) + score_weight * score``.

    Novelty is a count-based exploration bonus: ``visits`` counts how often the episode
    has really been in the state since :meth:`reset`, as the search policies report
    each state they act from (:func:`visit_value`). A search's own look-ahead does not
    count: a state it has looked at a hundred times but never entered stays bright, and
    the states an episode keeps coming back to grow dull, so a stuck agent is drawn out
    of the loop. A state counts as what the agent sees of it, its observation text: no
    ground truth, no step counter, and a door opened and closed again is no news (by
    the env's state key, every combination of open and closed containers was a new
    state, and MCTS spent TextWorld treasure hunts toggling them).

    ``score`` is the state's ``info["score"]`` over ``info["max_score"]`` when that is
    positive (so in [0, 1] for games that bound it), else the raw score. Its weight is
    0 by default: the search already adds the rewards along the path, so the score
    earned so far is counted twice, and a state that ends the episode (value 0) loses
    the bonus: with it, a won game looks worse than one that plays on (on TextWorld's
    ``simple`` game, MCTS stopped one point short of the win in every episode).

    Args:
        score_weight: weight of the score term, finite.
        novelty_weight: weight of the novelty term, finite.

    Raises:
        ValueError: a weight is not finite.
    """

    def __init__(self, score_weight: float = 0.0, novelty_weight: float = 1.0) -> None:
        for name, weight in (("score_weight", score_weight), ("novelty_weight", novelty_weight)):
            if not math.isfinite(weight):
                raise ValueError(f"{name} must be finite, got {weight}")
        self.score_weight = float(score_weight)
        self.novelty_weight = float(novelty_weight)
        self.visits: Counter[str] = Counter()
        """Real visits per observation text this episode."""

    def reset(self) -> None:
        """Forget the visits (a new episode)."""
        self.visits.clear()

    def visit(self, transition: Transition) -> None:
        """Count a real visit to the state ``transition`` reached."""
        self.visits[transition.observation] += 1

    def __call__(self, transition: Transition) -> float:
        """Return the heuristic value of the state ``transition`` reached."""
        info = transition.info
        score = float(info.get("score", 0) or 0)
        max_score = float(info.get("max_score", 0) or 0)
        if max_score > 0:
            score /= max_score
        novelty = 1.0 / math.sqrt(1 + self.visits[transition.observation])
        return self.novelty_weight * novelty + self.score_weight * score


def reset_value(value_fn: ValueFn) -> None:
    """Start a new episode for ``value_fn``: call its ``reset()`` if it has one.

    Value functions may keep per-episode memory (a heuristic's visit counts); the
    search policies call this from their own ``reset``.
    """
    reset = getattr(value_fn, "reset", None)
    if callable(reset):
        reset()


def visit_value(value_fn: ValueFn, transition: Transition) -> None:
    """Tell ``value_fn`` the episode is in the state ``transition`` reached, if it asks.

    The search policies call this with each state they act from (a heuristic counts
    them for its novelty); value functions without a ``visit()`` ignore it.
    """
    visit = getattr(value_fn, "visit", None)
    if callable(visit):
        visit(transition)


class HybridValue:
    """A cheap value first; the costly one only where the cheap one is promising.

    Returns ``cheap(t)`` when it is below ``threshold`` (not worth a costly look),
    else ``costly(t)``. The counters say how often each ran.

    Args:
        cheap: a fast value function (a heuristic, rules).
        costly: a slow one (a value network, an LLM).
        threshold: cheap values below it skip the costly call.
    """

    def __init__(self, cheap: ValueFn, costly: ValueFn, threshold: float) -> None:
        if math.isnan(threshold):
            raise ValueError("threshold must be a number, got nan")
        self.cheap = cheap
        self.costly = costly
        self.threshold = float(threshold)
        self.cheap_calls = 0
        self.costly_calls = 0

    def reset(self) -> None:
        """Start a new episode for both parts."""
        reset_value(self.cheap)
        reset_value(self.costly)

    def visit(self, transition: Transition) -> None:
        """Report a real visit to both parts."""
        visit_value(self.cheap, transition)
        visit_value(self.costly, transition)

    def __call__(self, transition: Transition) -> float:
        """Return the cheap value if it is below the threshold, else the costly one."""
        self.cheap_calls += 1
        value = self.cheap(transition)
        if value < self.threshold:
            return value
        self.costly_calls += 1
        return self.costly(transition)


class ValueNetValue:
    """The learned value (and prior) of a state: a ``wmkit-train-value`` checkpoint.

    Reads what the agent sees (:func:`~wmkit.search.value_net.value_input`: the
    observation, the admissible actions, the tracked facts a simulator puts in
    ``info`` and the normalised score; never ``wm.*``) and returns the network's
    discounted return-to-go estimate, in reward units, times ``scale`` (plus the value of
    ``heuristic``, when given).

    A network with a policy head is a proposer too: :meth:`propose` returns the commands
    ``proposer`` offers at the state (default: its admissible actions, with the env's
    ``action_priors`` when it gives them) with the network's prior over them, mixed with
    the base prior by ``prior_mix``. The value and the prior of a state come from one
    forward pass, whichever is asked first (a search asks both of every new state;
    :class:`~wmkit.agents.mcts.MCTSPolicy` takes a value function's ``propose`` as its
    proposer when it is given none). Without a trained policy head :meth:`propose` is
    the base proposer.

    Results are cached by the network's input (the observation text, plus the actions,
    facts and score when the network reads them, plus the candidates when it ranks
    them): a search meets the same text again and again, and a hit costs a dict lookup
    instead of a forward pass. The cache is emptied when it holds ``cache_size`` entries.

    The checkpoint's discount should be the search's: the network learned returns
    discounted by it (``spec.target.discount``).

    Args:
        checkpoint: the ``value.pt`` written by ``wmkit-train-value``.
        device: where the network runs; CPU by default (one state at a time is too
            small a job to gain from a GPU).
        scale: multiplies every value (1: reward units).
        cache_size: most cached values, >= 0 (0: no cache).
        proposer: the base proposer whose commands the policy head ranks.
        prior_mix: weight of the base proposal's prior in the prior returned, in
            [0, 1] (0: the network's alone).
        heuristic: a value function added to the network's (a :class:`HeuristicValue`:
            its novelty bonus remembers the episode's real visits, which the network
            cannot); it is reset and told the visits as this one is. With ``scale=0``
            the network is a prior only, the heuristic the value.

    Attributes:
        spec: the checkpoint's spec (features, sizes, target, data, metrics).
        calls: values and proposals asked for; hits: of those, answered from the cache;
        passes: forward passes run.

    Raises:
        FileNotFoundError: no checkpoint there.
        CheckpointError: unreadable, not a value-network checkpoint, or weights that
            do not match its spec.
        ValueError: a bad scale, cache size or mix.
    """

    def __init__(
        self,
        checkpoint: str | os.PathLike[str],
        *,
        device: str = "cpu",
        scale: float = 1.0,
        cache_size: int = 100_000,
        proposer: ProposeFn | None = None,
        prior_mix: float = 0.0,
        heuristic: ValueFn | None = None,
    ) -> None:
        if not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")
        if cache_size < 0:
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        if not 0.0 <= prior_mix <= 1.0:
            raise ValueError(f"prior_mix must be in [0, 1], got {prior_mix}")
        # torch is imported here, not with the module: it takes seconds, and most
        # searches never use a network.
        import torch

        from wmkit.search.value_net import SingleStateForward, load_value_net, value_input

        self._torch = torch
        self._input = value_input
        self.device = torch.device(device)
        self.spec, self.model, self.featurizer = load_value_net(checkpoint, self.device)
        self._single = (
            SingleStateForward(self.model, self.featurizer) if self.device.type == "cpu" else None
        )
        self.scale = float(scale)
        self.cache_size = cache_size
        self.proposer = proposer or admissible_proposal
        self.prior_mix = float(prior_mix)
        self.heuristic = heuristic
        self.calls = 0
        self.hits = 0
        self.passes = 0
        self._cache: dict[Any, tuple[float, Proposal | None]] = {}
        self._last: tuple[Transition | None, tuple[float, Proposal | None]] = (None, (0.0, None))

    @property
    def policy(self) -> bool:
        """Whether :meth:`propose` ranks commands: a policy head that was trained.

        A network trained on episodes with no search logged has an untrained policy
        head (``spec.data.policy_examples`` is 0); its prior would be noise.
        """
        data = self.spec.data
        return bool(self.model.policy) and data is not None and data.policy_examples > 0

    def reset(self) -> None:
        """Start a new episode for the heuristic part, if any."""
        if self.heuristic is not None:
            reset_value(self.heuristic)

    def visit(self, transition: Transition) -> None:
        """Report a real visit to the heuristic part, if any."""
        if self.heuristic is not None:
            visit_value(self.heuristic, transition)

    def __call__(self, transition: Transition) -> float:
        """Return the value of the state ``transition`` reached (plus the heuristic's)."""
        value = self._evaluate(transition)[0]
        if self.heuristic is not None:
            value += self.heuristic(transition)
        return value

    def propose(self, transition: Transition) -> Proposal:
        """The base proposer's commands at the state, with the network's prior."""
        if not self.policy:
            return self.proposer(transition)
        return self._evaluate(transition)[1]  # type: ignore[return-value]

    def _evaluate(self, transition: Transition) -> tuple[float, Proposal | None]:
        self.calls += 1
        last, found = self._last
        if last is transition:  # the search asks the value and the prior of one state
            self.hits += 1
            return found
        x = self._input(transition.observation, transition.info)
        base = self.proposer(transition) if self.policy else None
        key = self.featurizer.key(x) if base is None else (self.featurizer.key(x), base.actions)
        cached = self._cache.get(key)
        if cached is not None:
            self.hits += 1
        else:
            cached = self._forward([x], [base])[0]
            if self.cache_size:
                if len(self._cache) >= self.cache_size:
                    self._cache.clear()
                self._cache[key] = cached
        if base is not None:  # the prior is asked next: keep the pass for it
            self._last = (transition, cached)
        return cached

    def _forward(
        self, inputs: Sequence[ValueInput], bases: Sequence[Proposal | None]
    ) -> list[tuple[float, Proposal | None]]:
        """Values and proposals of many states in one forward pass (no cache).

        One state on the CPU goes through the numpy twin of the network
        (:class:`~wmkit.search.value_net.SingleStateForward`, several times faster
        than torch for one state); a batch goes through torch.
        """
        self.passes += 1
        rows: list[tuple[float, Any]]
        if len(inputs) == 1 and self._single is not None:
            base = bases[0]
            rows = [self._single(inputs[0], base.actions if base is not None else None)]
        else:
            rows = self._torch_forward(inputs, bases)
        mean, std = self.spec.target.mean, self.spec.target.std
        out: list[tuple[float, Proposal | None]] = []
        for (z, logits), base in zip(rows, bases, strict=True):
            proposal = base
            if base is not None and base.actions and logits is not None:
                prior = np.exp(logits - logits.max())
                prior /= prior.sum()
                if self.prior_mix and base.priors is not None:
                    given = np.asarray(base.priors, dtype=float)
                    prior = (1 - self.prior_mix) * prior + self.prior_mix * given / given.sum()
                proposal = Proposal(base.actions, tuple(prior.tolist()))
            out.append((self.scale * (mean + std * z), proposal))
        return out

    def _torch_forward(
        self, inputs: Sequence[ValueInput], bases: Sequence[Proposal | None]
    ) -> list[tuple[float, Any]]:
        """Standardised values and candidate logits of a batch, through torch."""
        torch, featurizer, device = self._torch, self.featurizer, self.device
        ranked = [b.actions for b in bases if b is not None and b.actions]
        with torch.inference_mode():
            candidates = featurizer.candidates(ranked, device) if ranked else None
            z, logits = self.model.evaluate(*featurizer.batch(inputs, device), candidates)
            flat = None if logits is None else logits.float().cpu().numpy()
        rows, at = [], 0
        for value, base in zip(z.tolist(), bases, strict=True):
            if flat is None or base is None or not base.actions:
                rows.append((value, None))
            else:
                rows.append((value, flat[at : at + len(base.actions)]))
                at += len(base.actions)
        return rows

    def predict(self, inputs: Sequence[ValueInput]) -> list[float]:
        """Values of many states in one forward pass (no cache), times ``scale``."""
        if not inputs:
            return []
        return [v for v, _ in self._forward(inputs, [None] * len(inputs))]

    def batch(self, transitions: Sequence[Transition]) -> list[float]:
        """Values of the states ``transitions`` reached, in one forward pass (no cache)."""
        return self.predict([self._input(t.observation, t.info) for t in transitions])

    def evaluate_batch(self, transitions: Sequence[Transition]) -> list[tuple[float, Proposal]]:
        """Values and proposals of many states in one forward pass (no cache)."""
        if not transitions:
            return []
        inputs = [self._input(t.observation, t.info) for t in transitions]
        bases = [self.proposer(t) for t in transitions]
        out = self._forward(inputs, bases if self.policy else [None] * len(inputs))
        return [(v, p if p is not None else b) for (v, p), b in zip(out, bases, strict=True)]


class ValueReply(BaseModel):
    """A model's judgement of a state (the ```json block of its reply).

    Attributes:
        value: how promising the state is for reaching the goal, 0 (hopeless) to 1
            (about to succeed).
        reason: a short reason.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    value: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    reason: str


@dataclass
class LLMValueStats:
    """What happened to the value requests of an :class:`LLMValue`.

    Attributes:
        calls: values asked for.
        replies: calls answered with a valid value (``repaired`` included).
        repaired: of those, valid only from a THINK block or after the correction.
        failed: calls whose replies never validated (malformed JSON, a value out of
            [0, 1], a missing reason), even after the correction: fallback.
        request_errors: calls whose request failed (timeout, HTTP error, refused
            connection, garbled response) after the client's retries: fallback.
    """

    calls: int = 0
    replies: int = 0
    repaired: int = 0
    failed: int = 0
    request_errors: int = 0

    @property
    def fallbacks(self) -> int:
        """Calls answered with the fallback value."""
        return self.failed + self.request_errors


class LLMValue:
    """A chat model judges each state: a JSON value in [0, 1] with a short reason.

    The model gets the goal, the score, the admissible actions (at most
    ``max_actions``) and the observation (:func:`~wmkit.llm.prompts.value_user`), and
    answers in the seed's format (a THINK line, then a ```json block), validated as
    :class:`ValueReply` by :func:`~wmkit.llm.structured.ask_structured` with
    ``max_repairs`` format-correction rounds. The value returned is ``scale * value``.

    Never raises mid-search: a reply that never validates, or a request that fails
    (timeout, HTTP error, refused connection, garbled response, after the client's own
    retries), gives ``scale * fallback`` and is counted in :attr:`stats`; the last
    problems are kept in :attr:`notes` and logged. A misconfigured endpoint therefore
    shows as ``stats.request_errors == stats.calls``, not as an exception: check the
    stats after a run. Identical requests are answered by the client's cache (give the
    ``ChatClient`` a ``ReplyCache``): asked about the same state twice, it sends nothing.

    Args:
        client: the chat model (a ``wmkit.llm.ChatClient``).
        goal: the task's goal in words, shown to the model ("" to leave it out).
        max_repairs: format-correction rounds after an invalid reply.
        fallback: the value in [0, 1] used when no valid value came (0.5: no opinion).
        scale: multiplies values (the search adds rewards in reward units).
        max_actions: most admissible actions shown.
        params: request fields for every request, e.g. ``{"temperature": 0}``.
        keep_notes: how many recent problem notes are kept.

    Attributes:
        stats: counters since construction or :meth:`reset_stats`.
        notes: the latest problems, one line each.
    """

    def __init__(
        self,
        client: ChatModel,
        *,
        goal: str = "",
        max_repairs: int = 1,
        fallback: float = 0.5,
        scale: float = 1.0,
        max_actions: int = 30,
        params: Mapping[str, Any] | None = None,
        keep_notes: int = 100,
    ) -> None:
        if max_repairs < 0 or max_actions < 0:
            raise ValueError(
                f"max_repairs and max_actions must be >= 0, got {max_repairs}, {max_actions}"
            )
        if not 0.0 <= fallback <= 1.0:
            raise ValueError(f"fallback must be in [0, 1], got {fallback}")
        if not math.isfinite(scale):
            raise ValueError(f"scale must be finite, got {scale}")
        self.client = client
        self.goal = goal
        self.max_repairs = max_repairs
        self.fallback = float(fallback)
        self.scale = float(scale)
        self.max_actions = max_actions
        self.params = dict(params or {})
        self.stats = LLMValueStats()
        self.notes: deque[str] = deque(maxlen=keep_notes)

    def reset_stats(self) -> None:
        """Zero the counters and forget the notes."""
        self.stats = LLMValueStats()
        self.notes.clear()

    def _fail(self, line: str) -> float:
        self.notes.append(line)
        log.warning("LLMValue: %s; fallback value %s", line, self.fallback)
        return self.scale * self.fallback

    def __call__(self, transition: Transition) -> float:
        """Return the model's value of the state ``transition`` reached (or the fallback)."""
        self.stats.calls += 1
        info = transition.info
        actions = list(info.get("admissible_actions") or ())
        messages = [
            {"role": "system", "content": VALUE_SYSTEM},
            {
                "role": "user",
                "content": value_user(
                    transition.observation,
                    goal=self.goal,
                    score=info.get("score"),
                    max_score=info.get("max_score"),
                    actions=actions[: self.max_actions],
                    omitted=max(0, len(actions) - self.max_actions),
                ),
            },
        ]
        try:
            result = ask_structured(
                self.client,
                messages,
                schema=ValueReply,
                max_repairs=self.max_repairs,
                hint=VALUE_HINT,
                params=self.params,
            )
        except LLMError as err:
            self.stats.request_errors += 1
            return self._fail(f"request failed: {err}")
        if not result.ok or result.value is None:
            self.stats.failed += 1
            return self._fail(f"no valid value after {result.attempts} replies: {result.reason}")
        self.stats.replies += 1
        self.stats.repaired += result.status == "repaired"
        return self.scale * result.value.value
