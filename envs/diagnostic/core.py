"""The contract of a diagnostic family's core, and what the cores share.

A core is Gymnasium's ``FuncEnv`` shape over an immutable state (ARCHITECTURE §5,
DIAGNOSTICS.md): pure ``initial``/``transition``/``observation``/``reward``/``terminal``,
plus ``state_info`` (what an agent may see), ``truth`` (the ``wm.*`` keys) and
``probes`` (the questions due at a state). :class:`FamilyCore` states it as a Protocol;
:class:`CoreDefaults` holds the methods most cores share; :class:`StepDraft` is the
scratch state of one transition (its lines, the entities they name, its changes).

The reference family (:mod:`wmkit.envs.diagnostic.reference`) is the smallest core that
uses all of it: copy it to start a new family.
"""

from __future__ import annotations

import string
from typing import Any, ClassVar, Protocol, TypeVar, runtime_checkable

import numpy as np

from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.text import Voice
from wmkit.envs.diagnostic.truth import Change
from wmkit.envs.spaces import TextSpace
from wmkit.world.types import Probe

__all__ = ["CHARSET", "CoreDefaults", "FamilyCore", "StepDraft", "episode_seed", "text_spaces"]

StateT = TypeVar("StateT")

CHARSET = string.ascii_letters + string.digits + string.punctuation + " "
"""What commands may hold; observations may hold newlines too (one message a line)."""


def text_spaces(max_observation: int, max_action: int = 512) -> tuple[TextSpace, TextSpace]:
    """Return a family's ``(observation_space, action_space)``: printable text.

    Gymnasium's ``spaces.Text`` needs the explicit charset, or ``check_env`` fails on
    real text; a :class:`~wmkit.envs.spaces.TextSpace` also refuses an async vector
    env's shared memory, which would return garbage.
    """
    return (
        TextSpace(max_length=max_observation, min_length=1, charset=CHARSET + "\n"),
        TextSpace(max_length=max_action, min_length=0, charset=CHARSET),
    )


def episode_seed(rng: Any) -> int:
    """The episode seed ``initial`` draws: one draw from a numpy ``Generator``, or an int."""
    return int(rng.integers(2**62)) if hasattr(rng, "integers") else int(rng)


@runtime_checkable
class FamilyCore(Protocol[StateT]):
    """What :class:`~wmkit.envs.diagnostic.shell.DiagnosticEnv` needs of a family's core.

    States are immutable values that carry ``step`` (moves so far) and ``params`` (the
    family's :class:`~wmkit.envs.diagnostic.params.FamilyParams`); a transition's
    randomness is a function of (episode seed, step) (:class:`StepRng`), so a state is a
    complete snapshot.
    """

    observation_space: TextSpace
    action_space: TextSpace

    def initial(self, rng: np.random.Generator, params: Any = None) -> StateT:
        """Return the first state of an episode; the episode seed is drawn from ``rng``."""

    def transition(self, state: StateT, action: str, rng: Any = None, params: Any = None) -> StateT:
        """Apply the agent's command, then the world's events; never mutates ``state``."""

    def observation(self, state: StateT, rng: Any = None, params: Any = None) -> str:
        """Return the text of the step into ``state``, one message per line."""

    def reward(
        self, state: StateT, action: str, next_state: StateT, rng: Any = None, params: Any = None
    ) -> float:
        """Return the reward of the step from ``state`` into ``next_state``."""

    def terminal(self, state: StateT, rng: Any = None, params: Any = None) -> bool:
        """Return True when the episode is won or lost (the horizon is the shell's)."""

    def state_info(self, state: StateT, params: Any = None) -> dict[str, Any]:
        """Return the agent-visible info (``admissible_actions``, ``score``, ...)."""

    def truth(self, state: StateT) -> dict[str, Any]:
        """Return the ``wm.*`` keys of ``state`` (build them with ``truth_info``)."""

    def probes(self, state: StateT) -> list[Probe]:
        """Return the probes due at ``state`` (the ``wm.probes`` of ``truth``)."""


class StepDraft:
    """Base of a family's mutable scratch state for one transition: text and changes.

    A subclass sets ``voice`` (its family's :class:`Voice`) and gives its instances
    ``rng`` (a :class:`StepRng`), ``params`` (with ``paraphrase_rate``),
    ``lines`` (list[str]), ``mentioned`` (an insertion-ordered dict of entity ids, for
    determinism) and ``changes`` (``(subject, relation)`` -> ``[before, after]`` for the
    current phase: agent command, then world events, to split the delta by cause).
    """

    __slots__ = ()
    voice: ClassVar[Voice]
    rng: StepRng
    params: Any
    lines: list[str]
    mentioned: dict[str, None]
    changes: dict[tuple[str, str], list[str | None]]

    def say(self, kind: str, **values: str) -> None:
        """Add a line of message kind ``kind``; a paraphrase at ``paraphrase_rate``."""
        templates, entities = self.voice.kinds[kind]
        n = len(templates)
        rng = self.rng
        variant = (
            rng.below(n - 1) + 1 if n > 1 and rng.random() < self.params.paraphrase_rate else 0
        )
        if values:
            to_text = self.voice.to_text
            line = templates[variant].format_map({k: to_text[k](v) for k, v in values.items()})
            for slot in entities:
                if slot in values:
                    self.mentioned[values[slot]] = None
        else:
            line = templates[variant]
        self.lines.append(line)

    def note(self, subject: str, relation: str, before: str | None, after: str) -> None:
        """Record a change of ``(subject, relation)``; the first ``before`` is kept."""
        entry = self.changes.setdefault((subject, relation), [before, after])
        entry[1] = after

    def take_changes(self) -> tuple[Change, ...]:
        """Return and forget this phase's net changes."""
        if not self.changes:
            return ()
        out = tuple((s, r, b, a) for (s, r), (b, a) in self.changes.items() if b != a)
        self.changes = {}
        return out


class CoreDefaults:
    """The methods the family cores share; list it before ``FuncEnv`` in the bases.

    Assumes the core keeps its parameters in ``self._params`` and that its states carry
    ``text`` (the step's observation), ``reward`` (of the step into them),
    ``admissible``, ``score``, ``max_score`` and ``step``. A family with a win or loss,
    or other state fields, overrides :meth:`terminal` or :meth:`state_info`; one that
    overrides none of the four step methods is stepped by :class:`DiagnosticEnv` with
    their code inline (one call into the core a step).
    """

    _params: Any

    def get_default_params(self, **kwargs: Any) -> Any:
        """Return the parameters this core was built with."""
        return self._params

    def observation(self, state: Any, rng: Any = None, params: Any = None) -> str:
        """Return the text of ``state``'s step, one message per line."""
        return state.text

    def reward(
        self, state: Any, action: str, next_state: Any, rng: Any = None, params: Any = None
    ) -> int:
        """Return the reward of the step into ``next_state`` (see the family's docs)."""
        return next_state.reward

    def terminal(self, state: Any, rng: Any = None, params: Any = None) -> bool:
        """Return False: the family has no win or loss, only the horizon."""
        return False

    def state_info(self, state: Any, params: Any = None) -> dict[str, Any]:
        """Return the agent-visible info: admissible actions, score, max_score, moves."""
        return {
            "admissible_actions": list(state.admissible),
            "score": state.score,
            "max_score": state.max_score,
            "moves": state.step,
        }
