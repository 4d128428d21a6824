"""Metric definitions (ARCHITECTURE §4, evals): drift, breakage, stale use, causal confusion.

These functions are the contract: leaderboards, tests and later suites all call them.

Stale use is the share of an episode's decisions and answers that rely on a released or
superseded fact, judged from ground truth alone (never from what the agent says about
itself). :class:`TruthHistory` records, per ``(subject, relation)`` slot of the true
state, the objects it holds at the current step and every object it held at any step
so far. A tracked value is *stale* when the slot held it at an earlier step but does
not hold it now: it was superseded (the slot has another value) or released (the slot
is gone). Then, per episode:

- an *answer* is a due probe (every kind but ``abstention``), answered from the tracked state at its
  step; it is a *stale answer* when that answer is stale (a wrong answer that was
  never true, or no answer, is wrong but not stale);
- a *decision* is a command the agent sends; it is a *stale decision* when the env
  penalised it (reward < 0) and the tracked state it was chosen from held a stale
  value about an entity the command names (:func:`names_entity`). Reliance is read
  off the reward and the named entity because the runner cannot see inside a policy;
  a stale fact about another entity (Booking's trip class behind a flight booking)
  is not counted, so this undercounts rather than overcounts;
- ``stale use = (stale answers + stale decisions) / (answers + decisions)``.

Causal confusion (:func:`confusion_scores`) asks whether the agent puts a change down
to the right cause: the command, or the world moving on its own. At each step t >= 1
(step 0 is the reset, which no command caused) the *agent's change* is the tracker's
own prediction for the step (:attr:`~wmkit.evals.records.StepRecord.predicted`) where
the record has one, else the change its tracked state shows (``believed`` =
tracked_t minus tracked_t-1). The true change comes split into its action-driven and
event-driven parts (``true_action``, ``true_event``). The agent's change is split the
same way by *slot* ``(subject, relation)``, as signed facts (``+`` added, ``-``
removed):

- a fact on a slot only the true action part touches goes to the agent's action part;
  on a slot only the true event part touches, to its event part;
- on a slot both touch, to the part whose true facts contain it (both, if both do),
  else to the action part;
- on a slot neither touches it is a change that did not happen, charged to both parts
  (a false positive of each).

Then, for each part P: *exact* = share of the steps whose true P is not empty where the
agent's P equals it exactly; *F1* = fact F1 of the agent's P against the true P, tp,
fp and fn summed over those same steps (:class:`~wmkit.world.delta_score.DeltaTally`).
A change the agent makes on a step where the true P is empty is not scored in P
(drift counts it). *Probe accuracy* = share of the due ``confusion`` probes
(increments applied as overwrites, future conditions applied now, cancelled rules that
still fire, corrections taken for new orders) answered right from the tracked state
(:func:`probe_outcomes`). Each is NaN for an episode with no such step or probe.
Where a tracker predicted any step, the row also keeps the delta scores of its tracked
state's change alone (``confusion["tracked"]``, ``predictions=False``).

*Abstention* = share of the due ``abstention`` probes (questions about an entity the
episode never had, whose right answer is ``UNKNOWN``) answered unknown: a tracker that
holds nothing there abstains, one that guesses is caught. Abstention probes are no
chain (breakage and its half-life leave them out) and no fact (stale use leaves them
out); NaN for an episode with none.

Every metric is a pure function of an :class:`~wmkit.evals.records.EpisodeRecord`
(:func:`drift_series`, :func:`probe_outcomes`, :func:`stale_counts`,
:func:`confusion_scores`), and
:func:`score_episode` makes the results row from them, so a recorded run can be
rescored with a new metric without replaying (``wmkit-score``).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from wmkit.evals.records import EpisodeRecord, StepRecord
from wmkit.evals.stats import Interval, pooled_ratios
from wmkit.world.delta_score import DeltaTally, signed_facts
from wmkit.world.types import UNKNOWN, Delta, Fact, WorldState

__all__ = [
    "BREAKAGE_BINS",
    "DRIFT_HORIZONS",
    "Confusion",
    "ProbeOutcome",
    "ScoreFn",
    "StaleCounts",
    "TruthHistory",
    "agent_change",
    "breakage_by_chain",
    "breakage_counts",
    "breakage_half_life",
    "breakage_intervals",
    "confusion_scores",
    "drift",
    "drift_series",
    "drift_summary",
    "f1",
    "names_entity",
    "probe_outcomes",
    "score_episode",
    "split_change",
    "stale_counts",
]

DRIFT_HORIZONS = (10, 50, 100, 200, 500)
"""Steps at which drift is reported (those the episode reaches)."""

BREAKAGE_BINS = (0, 5, 10, 20, 50, 100, 200, 500)
"""Lower edges of the chain-length bins; the last bin is open-ended."""


def f1(predicted: WorldState, truth: WorldState) -> float:
    """Return the F1 score of ``predicted`` facts against ``truth`` facts.

    Two empty states agree perfectly (F1 = 1); one empty and one not score 0.
    """
    if not predicted and not truth:
        return 1.0
    hits = len(predicted.facts & truth.facts)
    if hits == 0:
        return 0.0
    precision = hits / len(predicted)
    recall = hits / len(truth)
    return 2 * precision * recall / (precision + recall)


def drift(tracked: WorldState, truth: WorldState, mentioned: set[str] | frozenset[str]) -> float:
    """Return state drift at one step: ``1 - F1(tracked, truth restricted to mentioned)``.

    Args:
        tracked: the agent's tracked state.
        truth: the full true state at the same step.
        mentioned: entity ids mentioned in observations so far; only their true facts
            are expected of a tracker. Tracked facts about anything else count as errors.
    """
    return 1.0 - f1(tracked, truth.restrict(mentioned))


def drift_summary(series: Sequence[float]) -> dict[str, float]:
    """Summarise one episode's per-step drift.

    Args:
        series: drift at steps 0, 1, 2, ... (index = step).

    Returns:
        ``mean``; ``at_<h>`` for each horizon in :data:`DRIFT_HORIZONS` the episode
        reaches (drift at step h); ``slope`` = least-squares drift change per 100 steps.
    """
    values = np.asarray(series, dtype=float)
    out = {"mean": float(values.mean()) if values.size else float("nan")}
    for h in DRIFT_HORIZONS:
        if h < values.size:
            out[f"at_{h}"] = float(values[h])
    if values.size >= 2:
        out["slope"] = float(np.polyfit(np.arange(values.size), values, 1)[0] * 100)
    return out


@dataclass(frozen=True)
class ProbeOutcome:
    """One probe as answered from the tracked state.

    Attributes:
        chain: chain length, probe step - anchor step (>= 0).
        correct: whether the tracked state gave the true answer.
        kind: the probe's kind (drift, breakage, confusion, stale).
    """

    chain: int
    correct: bool
    kind: str


def breakage_by_chain(outcomes: Sequence[ProbeOutcome]) -> dict[int, tuple[float, int]]:
    """Return ``{bin lower edge: (share answered wrong, probe count)}`` by chain length.

    Bins follow :data:`BREAKAGE_BINS` (the last is open-ended); empty bins are left out.
    """
    counts: dict[int, list[int]] = {}
    for o in outcomes:
        lo = BREAKAGE_BINS[bisect.bisect_right(BREAKAGE_BINS, o.chain) - 1]
        wrong_total = counts.setdefault(lo, [0, 0])
        wrong_total[0] += not o.correct
        wrong_total[1] += 1
    return {lo: (wrong / total, total) for lo, (wrong, total) in sorted(counts.items())}


def breakage_half_life(outcomes: Sequence[ProbeOutcome]) -> float:
    """Return the chain length where breakage first reaches 50%, or inf if it never does.

    Breakage is computed per bin of :data:`BREAKAGE_BINS`; the answer is the lower edge
    of the first bin at or above 50%, so it is a conservative (short) estimate.
    """
    for lo, (share, _) in breakage_by_chain(outcomes).items():
        if share >= 0.5:
            return float(lo)
    return float("inf")


def breakage_counts(outcomes: Iterable[ProbeOutcome]) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(wrong, total)`` probe counts per bin of :data:`BREAKAGE_BINS`, as int arrays."""
    wrong, total = np.zeros(len(BREAKAGE_BINS), int), np.zeros(len(BREAKAGE_BINS), int)
    for o in outcomes:
        i = bisect.bisect_right(BREAKAGE_BINS, o.chain) - 1
        wrong[i] += not o.correct
        total[i] += 1
    return wrong, total


def _half_lives(rates: np.ndarray) -> np.ndarray:
    """Half-life per row of ``(rows, bins)`` breakage rates (NaN: an empty bin); inf: never."""
    reached = np.nan_to_num(rates, nan=0.0) >= 0.5
    edges = np.asarray(BREAKAGE_BINS, dtype=float)
    return np.where(reached.any(axis=1), edges[reached.argmax(axis=1)], np.inf)


def breakage_intervals(
    episodes: Sequence[Sequence[ProbeOutcome]], *, reps: int = 2000, seed: int = 0
) -> tuple[dict[int, Interval], Interval]:
    """Breakage per chain-length bin and the half-life, with 95% bootstrap intervals.

    The point values are those of the episodes' outcomes pooled
    (:func:`breakage_by_chain`, :func:`breakage_half_life`); the intervals resample the
    episodes with replacement and pool each resample's outcomes
    (:func:`~wmkit.evals.stats.pooled_ratios`). A bin's interval is taken over the
    resamples that have a probe in it. The half-life takes values on the bin edges or
    inf, so its interval is the lower 2.5% and upper 97.5% order statistics.

    Args:
        episodes: per episode, its probe outcomes.
        reps: bootstrap replicates.
        seed: seed of the resampling.

    Returns:
        ``({bin lower edge: Interval of its breakage}, Interval of the half-life)``;
        bins without probes are left out, and the half-life is inf (all three) when
        no probe was due.
    """
    counts = [breakage_counts(e) for e in episodes]
    inf = float("inf")
    if not counts or not sum(total.sum() for _, total in counts):
        return {}, Interval(inf, inf, inf)
    wrong = np.stack([w for w, _ in counts])
    total = np.stack([t for _, t in counts])
    boot = pooled_ratios(wrong, total, reps=reps, seed=seed)
    pooled_wrong, pooled_total = wrong.sum(axis=0), total.sum(axis=0)
    bins = {}
    for i, edge in enumerate(BREAKAGE_BINS):
        if pooled_total[i]:
            lo, hi = np.nanpercentile(boot[:, i], [2.5, 97.5])
            bins[edge] = Interval(pooled_wrong[i] / pooled_total[i], float(lo), float(hi))
    with np.errstate(invalid="ignore", divide="ignore"):
        point = _half_lives((pooled_wrong / pooled_total)[None, :])[0]
    lives = _half_lives(boot)
    half_life = Interval(
        float(point),
        float(np.percentile(lives, 2.5, method="lower")),
        float(np.percentile(lives, 97.5, method="higher")),
    )
    return bins, half_life


class TruthHistory:
    """What each ``(subject, relation)`` slot of the true state holds now and held before.

    Call :meth:`observe` with the true state at every step, in order; then
    :meth:`is_stale` says whether a value was true at an earlier step and is not now.
    A step costs a set difference with the previous state plus O(facts added).
    """

    __slots__ = ("_ever", "_now")

    def __init__(self) -> None:
        self._now: frozenset[Fact] = frozenset()
        self._ever: dict[tuple[str, str], set[str]] = {}

    def observe(self, truth: WorldState | Iterable[Fact]) -> None:
        """Take in the true state of the next step."""
        facts = truth.facts if isinstance(truth, WorldState) else WorldState(truth).facts
        ever = self._ever
        for subject, relation, obj in facts - self._now:
            ever.setdefault((subject, relation), set()).add(obj)
        self._now = facts

    def is_stale(self, subject: str, relation: str, value: str | None) -> bool:
        """Whether ``value`` was an object of the slot at an earlier step but is not now."""
        return (
            value is not None
            and (subject, relation, value) not in self._now
            and value in self._ever.get((subject, relation), ())
        )

    def stale_facts(self, tracked: WorldState) -> list[Fact]:
        """Return the tracked facts whose object is stale, sorted."""
        return sorted(f for f in tracked if self.is_stale(*f))


def names_entity(command: str, entity: str) -> bool:
    """Whether ``command`` names ``entity``: the id's name part is among its words.

    The name part is what follows the kind (``hotel:azure`` -> ``azure``, ``flight:tp123``
    -> ``tp123``); it must appear as whole, consecutive words, case ignored.
    """
    name = entity.split(":", 1)[-1].lower().split()
    words = command.lower().split()
    n = len(name)
    return n > 0 and any(words[i : i + n] == name for i in range(len(words) - n + 1))


class StaleCounts(NamedTuple):
    """One episode's stale-use counts (see the module docstring).

    Attributes:
        answers: probes answered.
        stale_answers: probes answered with a stale value.
        decisions: commands sent.
        stale_decisions: penalised commands about an entity with a stale tracked value.
    """

    answers: int = 0
    stale_answers: int = 0
    decisions: int = 0
    stale_decisions: int = 0

    @property
    def share(self) -> float:
        """Stale use: stale answers and decisions over all of them (NaN when none)."""
        total = self.answers + self.decisions
        return (self.stale_answers + self.stale_decisions) / total if total else float("nan")


# --- metrics of an episode record --------------------------------------------------------

ScoreFn = Callable[[EpisodeRecord], dict[str, Any]]
"""Makes the JSON-ready results row of one episode record (:func:`score_episode`)."""


States = Sequence[tuple[WorldState, WorldState]]
"""``(tracked, truth)`` at every step: ``list(record.states())``, to rebuild them once."""


def drift_series(record: EpisodeRecord, states: States | None = None) -> list[float]:
    """Return drift at every step (index = step), final step included.

    Each step compares the tracked state with the true facts of the entities mentioned
    at that step or before (:func:`drift`). ``states``: the record's, when at hand.
    """
    mentioned: set[str] = set()
    series = []
    states = record.states() if states is None else states
    for step, (tracked, truth) in zip(record.steps, states, strict=True):
        mentioned.update(step.mentioned)
        series.append(drift(tracked, truth, mentioned))
    return series


def probe_outcomes(record: EpisodeRecord) -> list[ProbeOutcome]:
    """Return every probe as answered from the tracked state, in step then env order.

    The probes of the final step are left out: the suite asks the probes of a step
    before the agent acts on it, and no command follows the last one. An answer of None
    (the tracker holds nothing there) is ``UNKNOWN``: right for an ``abstention`` probe,
    wrong for every other.
    """
    return [
        ProbeOutcome(
            chain=t - probe.anchor_step,
            correct=(UNKNOWN if answer is None else answer) == probe.answer,
            kind=probe.kind,
        )
        for t, step in enumerate(record.steps[:-1])
        for probe, answer in zip(step.probes, step.answers, strict=True)
    ]


def stale_counts(record: EpisodeRecord, states: States | None = None) -> StaleCounts:
    """Count stale answers and decisions over the episode (module docstring).

    An answer at step t is judged against the truth of steps 0..t; the command sent
    from step t (the action of step t + 1) by the tracked state of step t, the truth of
    steps 0..t and the reward it got. The final step's probes are not answers
    (:func:`probe_outcomes`). ``states``: the record's, when at hand.
    """
    history = TruthHistory()
    states = record.states() if states is None else states
    answers = stale_answers = stale_decisions = 0
    # The last step's states are never used: no command follows it.
    pairs = zip(record.steps, record.steps[1:], states, strict=False)
    for step, after, (tracked, truth) in pairs:
        history.observe(truth)
        for probe, answer in zip(step.probes, step.answers, strict=True):
            if probe.kind == "abstention":  # about no fact at all: nothing to be stale
                continue
            answers += 1
            stale_answers += history.is_stale(probe.subject, probe.relation, answer)
        if after.reward < 0 and any(
            names_entity(after.action or "", fact.subject) for fact in history.stale_facts(tracked)
        ):
            stale_decisions += 1
    return StaleCounts(answers, stale_answers, record.length, stale_decisions)


def split_change(change: Delta, true_action: Delta, true_event: Delta) -> tuple[Delta, Delta]:
    """Split an agent's change into action- and event-driven parts, by slot as the truth is.

    See the module docstring: a fact goes to the part whose true facts touch its
    ``(subject, relation)`` slot; on a slot both touch, to the part that holds the same
    signed fact (both, if both do), else to the action part; on a slot neither touches,
    to both (a change that did not happen is an error of each part).

    Returns:
        ``(action part, event part)``.
    """
    action_facts, event_facts = signed_facts(true_action), signed_facts(true_event)
    action_slots = {fact[:2] for _, fact in action_facts}
    event_slots = {fact[:2] for _, fact in event_facts}
    parts: tuple[tuple[list[Fact], list[Fact]], ...] = (([], []), ([], []))  # (added, removed)
    for signed in signed_facts(change):
        sign, fact = signed
        to_action, to_event = fact[:2] in action_slots, fact[:2] in event_slots
        if to_action and to_event:
            to_event = signed in event_facts
            to_action = signed in action_facts or not to_event
        elif not (to_action or to_event):
            to_action = to_event = True
        for (added, removed), chosen in zip(parts, (to_action, to_event), strict=True):
            if chosen:
                (added if sign == "+" else removed).append(fact)
    action, event = (Delta(tuple(sorted(a)), tuple(sorted(r))) for a, r in parts)
    return action, event


class Confusion(NamedTuple):
    """One episode's causal-confusion scores (see the module docstring).

    Attributes:
        action_exact: share of steps with a true action-driven change that the agent's
            action part matches exactly (NaN when there is no such step).
        action_f1: fact F1 of the agent's action parts, pooled over those steps.
        event_exact, event_f1: the same for the event-driven part.
        probe_accuracy: share of the due ``confusion`` probes answered right (NaN
            when none was due).
        action_steps, event_steps: the steps scored for each part.
        probes: the ``confusion`` probes answered.
    """

    action_exact: float
    action_f1: float
    event_exact: float
    event_f1: float
    probe_accuracy: float
    action_steps: int
    event_steps: int
    probes: int


def agent_change(step: StepRecord, predictions: bool = True) -> Delta:
    """The agent's change at a step: its prediction where it has one, else ``believed``.

    Args:
        step: a step of a record.
        predictions: False scores the tracked state's change even where the tracker
            predicted one.
    """
    return step.predicted if predictions and step.predicted is not None else step.believed


def confusion_scores(record: EpisodeRecord, *, predictions: bool = True) -> Confusion:
    """Score the agent's change of each step against the true one, split by cause.

    Args:
        record: the episode.
        predictions: use the tracker's prediction as the agent's change where the step
            has one (the definition); False scores the tracked state's change alone.

    Returns:
        The episode's :class:`Confusion` (module docstring).
    """
    action, event = DeltaTally(), DeltaTally()
    for step in record.steps[1:]:  # step 0 is the reset: no command caused it
        mine = split_change(agent_change(step, predictions), step.true_action, step.true_event)
        for tally, agent_part, true_part in zip(
            (action, event), mine, (step.true_action, step.true_event), strict=True
        ):
            if true_part.added or true_part.removed:
                tally.add(agent_part, true_part)
    due = [o.correct for o in probe_outcomes(record) if o.kind == "confusion"]
    a, e = action.score(), event.score()
    nan = float("nan")
    return Confusion(
        action_exact=a.exact_changed,
        action_f1=a.f1 if a.changed else nan,
        event_exact=e.exact_changed,
        event_f1=e.f1 if e.changed else nan,
        probe_accuracy=sum(due) / len(due) if due else nan,
        action_steps=a.changed,
        event_steps=e.changed,
        probes=len(due),
    )


def score_episode(record: EpisodeRecord) -> dict[str, Any]:
    """Score one episode record: the results row of ``wmkit-eval`` (without its identity).

    Returns:
        A JSON-ready row: ``steps``, ``score``, ``max_score`` (the final step's),
        ``drift`` (:func:`drift_summary`), ``drift_series`` (per step, rounded to 4
        places), ``probes`` (``[chain, correct, kind]`` triples of
        :func:`probe_outcomes`), ``stale`` (:func:`stale_counts` as a dict),
        ``stale_use`` (their share) and ``confusion`` (:func:`confusion_scores` as a
        dict; where the tracker predicted any step, ``confusion["tracked"]`` holds the
        delta scores of its tracked state's change alone); ``llm``, the record's
        ``usage`` (what the agent's language models cost), when it has one; and
        ``seconds`` (the episode's wall time), when it was timed.
    """
    states = list(record.states())
    series = drift_series(record, states)
    stale = stale_counts(record, states)
    last = record.steps[-1]
    row: dict[str, Any] = {
        "steps": record.length,
        "score": last.score,
        "max_score": last.max_score,
        "drift": drift_summary(series),
        "drift_series": [round(d, 4) for d in series],
        "probes": [[o.chain, o.correct, o.kind] for o in probe_outcomes(record)],
        "stale": stale._asdict(),
        "stale_use": stale.share,
        "confusion": _confusion_row(record),
    }
    if record.usage is not None:
        row["llm"] = dict(record.usage)
    if record.seconds is not None:
        row["seconds"] = record.seconds
    return row


def _confusion_row(record: EpisodeRecord) -> dict[str, Any]:
    row: dict[str, Any] = confusion_scores(record)._asdict()
    if any(step.predicted is not None for step in record.steps[1:]):
        tracked = confusion_scores(record, predictions=False)._asdict()
        row["tracked"] = {k: v for k, v in tracked.items() if not k.startswith("probe")}
    return row
