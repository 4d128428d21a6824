"""The Gymnasium shell of the diagnostic families: one thin stateful env over any core.

A family's env subclasses :class:`DiagnosticEnv` and names its core class, its parameter
class and its reader; nothing else.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium

from wmkit.envs.diagnostic.core import CoreDefaults
from wmkit.world.types import Reader

__all__ = ["DiagnosticEnv"]


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
            info.update(core.truth(after))
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
            info.update(self.core.truth(self._state))
        return info
