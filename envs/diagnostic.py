"""The shared Gymnasium shell of the diagnostic families.

Each family is a pure core with Gymnasium's ``FuncEnv`` shape over an immutable state,
plus a frozen parameter dataclass and a text reader. :class:`DiagnosticEnv` is the one
thin stateful shell over any such core: a subclass names its core, its parameters and
its reader, and nothing else.

A core must provide ``initial(rng)``, ``transition(state, action)``,
``observation(state)``, ``reward(state, action, next_state)``, ``terminal(state)``,
``state_info(state)`` (agent-visible info) and ``truth_info(state)`` (the ``wm.*``
keys), and ``observation_space``/``action_space``; its states carry ``step`` and
``params``.

The module also holds what the families share on their parameter and step paths:
:func:`check_int` and :func:`check_rate` validate parameters, :class:`StepRng` is a
cheap generator seeded by (episode seed, step), :class:`StepDraft` the text and change
bookkeeping of a transition's scratch state, and :func:`changes_delta` turns its raw
changes into a ``Delta``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import gymnasium
import numpy as np

from wmkit.envs.text import Voice
from wmkit.world.types import Delta, Fact, Reader

Change = tuple[str, str, str | None, str]
"""One net fact change of a step: ``(subject, relation, before or None, after)``."""

__all__ = [
    "Change",
    "CoreDefaults",
    "DiagnosticEnv",
    "StepDraft",
    "StepRng",
    "changes_delta",
    "check_int",
    "check_rate",
]


def check_int(name: str, value: Any, low: int, high: int | None = None) -> None:
    """Check that parameter ``name`` is an int in ``[low, high]`` (``>= low`` if no high).

    Raises:
        TypeError: ``value`` is not an int (bools are refused).
        ValueError: ``value`` is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"in [{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")


def check_rate(name: str, value: Any) -> None:
    """Check that parameter ``name`` is a finite number in ``[0, 1]``.

    Raises:
        TypeError: ``value`` is not a number (bools are refused).
        ValueError: ``value`` is not finite or outside ``[0, 1]``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in [0, 1], got {type(value).__name__}")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be in [0, 1], got {value}")


_M48 = (1 << 48) - 1


class StepRng:
    """A tiny 48-bit LCG (java.util.Random's constants) seeded by (episode seed, step).

    Seeding ``random.Random`` costs ~7 us, a third of a step's budget; this costs a
    fraction of a microsecond and is plenty random for episode generation.

    Args:
        seed: the episode seed.
        step: the step number (any int; families use -1 for the reset).
    """

    __slots__ = ("x",)

    def __init__(self, seed: int, step: int) -> None:
        z = (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + 1) & ((1 << 64) - 1)
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & ((1 << 64) - 1)
        self.x = (z ^ (z >> 31)) & _M48

    def random(self) -> float:
        """Return a float in [0, 1)."""
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return x * 3.552713678800501e-15

    def bits(self) -> int:
        """Return 48 random bits; the low bits of an LCG are weak, so they are mixed."""
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return x ^ (x >> 24) ^ ((x * 0x9E3779B1) & _M48)

    def below(self, n: int) -> int:
        """Return an int in [0, n)."""
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        return ((x >> 16) * n) >> 32

    def choice(self, seq: Any) -> Any:
        """Return a uniformly chosen element of the non-empty sequence ``seq``."""
        return seq[self.below(len(seq))]


_NO_DELTA = Delta()


def changes_delta(changes: tuple[Change, ...]) -> Delta:
    """Return the ``Delta`` of a step's raw changes (sorted added and removed facts)."""
    # Built only when asked (ground truth on): the step path keeps raw changes.
    if not changes:
        return _NO_DELTA
    added = sorted(Fact(s, r, after) for s, r, _, after in changes)
    removed = sorted(Fact(s, r, before) for s, r, before, _ in changes if before is not None)
    return Delta(tuple(added), tuple(removed))


class StepDraft:
    """Base of a family's mutable scratch state for one transition: text and changes.

    A subclass sets ``voice`` (its family's :class:`~wmkit.envs.text.Voice`) and gives
    its instances ``rng`` (a :class:`StepRng`), ``params`` (with ``paraphrase_rate``),
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


class DiagnosticEnv(gymnasium.Env[str, str]):
    """A thin ``gymnasium.Env[str, str]`` over a diagnostic family's pure core.

    Info keys every step: ``admissible_actions`` (sorted list[str]), ``score``,
    ``max_score``, ``moves``, plus the family's own. With ``ground_truth=True`` also
    ``wm.state``, ``wm.delta``, ``wm.probes``, ``wm.state_hash`` and ``wm.mentioned``
    (ARCHITECTURE §3); without it, no ``wm.*`` key at all.

    ``terminated`` comes from the core (win or loss); ``truncated`` is True once the step
    count reaches ``horizon``. ``snapshot()`` returns the immutable state (the token is
    the state itself) and ``restore(token)`` resumes from it.

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        **params: the family's parameters (``horizon``, ``load``, ...), validated by its
            parameter class.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}
    core_class: ClassVar[type]
    params_class: ClassVar[type]
    reader: ClassVar[Reader]

    def __init__(self, *, ground_truth: bool = False, **params: Any) -> None:
        if not isinstance(ground_truth, bool):
            raise TypeError(f"ground_truth must be a bool, got {ground_truth!r}")
        self.params = self.params_class(**params)
        self.core = self.core_class(self.params)
        self.observation_space = self.core.observation_space
        self.action_space = self.core.action_space
        self.ground_truth = ground_truth
        self._state: Any = None
        core_class = type(self.core)
        self._fused = all(
            getattr(core_class, name) is getattr(CoreDefaults, name)
            for name in ("observation", "reward", "terminal", "state_info")
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode; ``options`` is accepted and unused."""
        super().reset(seed=seed)
        self._state = self.core.initial(self.np_random)
        return self.core.observation(self._state), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply a command; returns ``(observation, reward, terminated, truncated, info)``."""
        before, core = self._state, self.core
        if before is None:
            raise RuntimeError("call reset() before step()")
        self._state = after = core.transition(before, action)
        if self._fused:
            # The core keeps CoreDefaults' step methods: their code, inline (four Python
            # calls fewer a step on the hot path; a test checks both paths agree).
            reward, terminated, observation = float(after.reward), False, after.text
            info = {
                "admissible_actions": list(after.admissible),
                "score": after.score,
                "max_score": after.max_score,
                "moves": after.step,
            }
        else:
            reward = float(core.reward(before, action, after))
            terminated = bool(core.terminal(after))
            observation = core.observation(after)
            info = core.state_info(after)  # what _info() does, inline on the hot path
        truncated = not terminated and after.step >= self.params.horizon
        if self.ground_truth:
            info.update(core.truth_info(after))
        return observation, reward, terminated, truncated, info

    def snapshot(self) -> Any:
        """Return the current state; it is immutable, so the token is the state itself."""
        if self._state is None:
            raise RuntimeError("call reset() before snapshot()")
        return self._state

    def restore(self, token: Any) -> None:
        """Continue from a ``snapshot()`` token of an env with the same parameters.

        Raises:
            TypeError: ``token`` is not a state of this family.
            ValueError: ``token`` was taken with different parameters.
        """
        expected = type(self._state) if self._state is not None else None
        if not hasattr(token, "params") or (expected and not isinstance(token, expected)):
            name = expected.__name__ if expected else "state"
            raise TypeError(f"restore() needs a {name} token, got {type(token).__name__}")
        if token.params != self.params:
            raise ValueError(f"token has parameters {token.params}, this env {self.params}")
        self._state = token

    def _info(self) -> dict[str, Any]:
        info = self.core.state_info(self._state)
        if self.ground_truth:
            info.update(self.core.truth_info(self._state))
        return info
