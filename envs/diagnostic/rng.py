"""The step random generator of the diagnostic families.

A transition's randomness is a function of (episode seed, step), so a state value is
all a planner needs to replay a step: no generator object travels with the state.
"""

from __future__ import annotations

from typing import Any

__all__ = ["StepRng"]

_M48 = (1 << 48) - 1
_M64 = (1 << 64) - 1


class StepRng:
    """A tiny 48-bit LCG (java.util.Random's constants) seeded by (episode seed, step).

    Seeding ``random.Random`` costs ~7 us, a third of a step's budget; this costs a
    fraction of a microsecond and is plenty random for episode generation. Draws use
    the high bits (the good ones of an LCG).

    Args:
        seed: the episode seed.
        step: the step number (any int; families use -1 for the reset).
    """

    __slots__ = ("x",)

    def __init__(self, seed: int, step: int) -> None:
        z = (seed * 0x9E3779B97F4A7C15 + step * 0xBF58476D1CE4E5B9 + 1) & _M64
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
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

    def chance(self, p: float) -> bool:
        """Return True with probability ``p``."""
        return self.random() < p

    def choice(self, seq: Any) -> Any:
        """Return a uniformly chosen element of the non-empty sequence ``seq``."""
        return seq[self.below(len(seq))]

    def sample(self, seq: Any, k: int) -> list[Any]:
        """Return ``k`` distinct elements of ``seq`` (``k <= len(seq)``), in draw order."""
        pool = list(seq)
        out = []
        for _ in range(k):
            out.append(pool.pop(self.below(len(pool))))
        return out
