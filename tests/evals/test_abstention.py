"""Abstention: questions about an entity the episode never had, scored apart from breakage."""

from __future__ import annotations

import math

from wmkit.agents.policies import RandomPolicy
from wmkit.agents.trackers import WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.cells import episode_metrics
from wmkit.evals.metrics import probe_outcomes, score_episode, stale_counts
from wmkit.evals.runner import make_env, play_episode


class Guesser(WindowTracker):
    """The window tracker, but it never says unknown: a question about an entity it does
    not hold gets the value another entity of that type has (a confident guess)."""

    def answer(self, questions):
        answers = []
        for subject, relation in questions:
            held = self.state.value(subject, relation)
            kind = subject.split(":")[0] + ":"
            guess = next(
                (
                    f.object
                    for f in self.state
                    if f.subject.startswith(kind) and f.relation == relation
                ),
                "yes",
            )
            answers.append(held if held is not None else guess)
        return answers


def _rows(family: str, seed: int = 1):
    env = make_env(f"wmkit/{family}-v0", 100, {})
    reader = env.unwrapped.reader
    honest = play_episode(env, Agent("window", WindowTracker(reader, k=None), RandomPolicy()), seed)
    guess = play_episode(env, Agent("guess", Guesser(reader, k=None), RandomPolicy()), seed)
    return honest, guess


def test_a_tracker_that_holds_nothing_abstains_and_one_that_guesses_is_caught():
    for family in ("Parcel", "SmartHome", "Booking", "Vault"):
        honest, guess = _rows(family)
        kinds = [o.kind for o in probe_outcomes(honest)]
        assert "abstention" in kinds, family
        assert episode_metrics(score_episode(honest))["abstention"] == 1.0
        assert episode_metrics(score_episode(guess))["abstention"] == 0.0


def test_breakage_and_stale_use_leave_the_abstention_probes_out():
    honest, guess = _rows("Booking")
    # The guesser answers every other probe as the honest tracker does (it holds the
    # same facts), so only the abstention probes could tell them apart.
    a, b = episode_metrics(score_episode(honest)), episode_metrics(score_episode(guess))
    assert a["breakage"] == b["breakage"]
    assert (
        stale_counts(honest).answers
        == stale_counts(guess).answers
        == sum(o.kind != "abstention" for o in probe_outcomes(honest))
    )
    chains = [o for o in probe_outcomes(honest) if o.kind != "abstention"]
    assert math.isclose(a["breakage"], sum(not o.correct for o in chains) / len(chains))
