"""The parameters every diagnostic family has, and their checks.

A family's parameter class is a frozen dataclass that subclasses :class:`FamilyParams`,
adds its own fields (with defaults), and extends :meth:`FamilyParams.__post_init__` with
their checks. ``MAX_LOAD`` bounds ``load`` (None: no upper bound).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

__all__ = ["FamilyParams", "check_int", "check_rate"]


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


@dataclass(frozen=True)
class FamilyParams:
    """Episode parameters every family has (DIAGNOSTICS.md); validated on construction.

    Attributes:
        horizon: steps per episode, 20..1000.
        load: concurrent entities (what counts is the family's), 1..``MAX_LOAD``.
        paraphrase_rate: probability a message uses a non-canonical template.
        distractors: chatter lines per step, 0..50.
        indirection: probability a later message refers back by description, not by id.
        probe_rate: probability that probes are due at a step.

    Raises:
        TypeError: a parameter has the wrong type (unknown names too: dataclass init).
        ValueError: a parameter is out of range.
    """

    MAX_LOAD: ClassVar[int | None] = None

    horizon: int = 200
    load: int = 4
    paraphrase_rate: float = 0.5
    distractors: int = 1
    indirection: float = 0.5
    probe_rate: float = 0.3

    def __post_init__(self) -> None:
        check_int("horizon", self.horizon, 20, 1000)
        check_int("load", self.load, 1, self.MAX_LOAD)
        check_int("distractors", self.distractors, 0, 50)
        for name in ("paraphrase_rate", "indirection", "probe_rate"):
            check_rate(name, getattr(self, name))
