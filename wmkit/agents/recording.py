"""Recording what a searching policy found: the training targets of a policy/value network.

:class:`RecordingPolicy` wraps an agent's policy the way
:class:`~wmkit.knowledge.recording.RecordingTracker` wraps its tracker: any loop that
drives the agent (the eval runner's, for one) then annotates the
:class:`~wmkit.knowledge.recording.Recorder`'s latest row, the state the policy acted
from, with the statistics of the search that chose the command (:func:`search_stats`):
the root's visit distribution over the commands it proposed is the policy target of
``wmkit-train-value``, the root value a value estimate. A policy that ran no search
(a random or greedy one) leaves the row's ``search`` empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from wmkit.knowledge.recording import Recorder, SearchChild, SearchStats
from wmkit.search.types import SearchOutput
from wmkit.world.types import Policy, WorldState, agent_view

__all__ = ["RecordingPolicy", "record_policy", "search_stats"]


def search_stats(output: SearchOutput) -> SearchStats:
    """What one search found, as a trajectory row stores it.

    The children are the root's expanded commands in proposal order, with their visits
    and Q values; a proposed command the search never expanded (or pruned as a no-op on
    its first step) has no child and counts as 0 visits.
    """
    tree = output.tree
    top = tree.depth[tree.root]
    deepest = max(tree.depth[n] for n in tree.nodes()) - top
    return SearchStats(
        simulations=output.simulations,
        nodes=len(tree),
        max_depth=deepest,
        root_value=output.root_value,
        children=tuple(SearchChild(a, n, output.qvalues[a]) for a, n in output.visits.items()),
    )


class RecordingPolicy:
    """A policy that reports each search it acts on to a :class:`Recorder`.

    Passes every call through to ``policy``; after each :meth:`act` it annotates the
    recorder's latest row (the state acted from) with the policy's ``last`` search
    output when that search was run for this very call.

    Args:
        policy: the agent's policy (an ``MCTSPolicy``, a ``SelfCorrectingPolicy``, ...).
        recorder: the recorder wrapped around the env the agent plays.
    """

    def __init__(self, policy: Policy, recorder: Recorder) -> None:
        self.policy = policy
        self.recorder = recorder

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        self.policy.reset(rng)

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        before = getattr(self.policy, "last", None)
        action = self.policy.act(observation, info, tracked)
        output = getattr(self.policy, "last", None)
        if isinstance(output, SearchOutput) and output is not before:
            self.recorder.annotate(search=search_stats(output))
        return action

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)


def record_policy(recorder: Recorder, policy: Policy, seeds: Iterable[int]) -> list[float]:
    """Play one episode per seed with ``policy``, recorded with its searches, then close.

    The policy sees the full ``info`` of an env without ground truth (the agent view of
    one with it) and no tracked facts; it is reset with a generator seeded by the
    episode's seed. Closing hands the last episode to the recorder's sink.

    Returns:
        Each episode's summed reward.
    """
    recording = RecordingPolicy(policy, recorder)
    scores = []
    for seed in seeds:
        observation, info = recorder.reset(seed=seed)
        recording.reset(np.random.default_rng(seed))
        total, done = 0.0, False
        while not done:
            action = recording.act(observation, agent_view(info), WorldState())
            observation, reward, terminated, truncated, info = recorder.step(action)
            total += float(reward)
            done = terminated or truncated
        scores.append(total)
    recorder.close()
    return scores
