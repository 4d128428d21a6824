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

    def variant(self, paraphrases: int, rate: float) -> int:
        """Return which template a message uses, in one draw (the step path's hottest).

        0 (the canonical template) with probability ``1 - rate``, else a uniform int in
        ``[1, paraphrases]``: a draw under ``rate`` is uniform below it, so it picks the
        paraphrase too. With ``paraphrases == 0`` it returns 0 (and still draws).
        """
        self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
        u = x * 3.552713678800501e-15
        if u >= rate:
            return 0
        v = int(u / rate * paraphrases)
        return v + 1 if v < paraphrases else paraphrases

    def line(self, form: Any, rate: float, texts: tuple[str, ...]) -> str:
        """Return a line of ``form``: a paraphrase drawn as :meth:`variant` does, filled.

        ``form`` is a :class:`~wmkit.envs.diagnostic.text.Form` and ``texts`` its surface
        texts in its ``order``: what ``form.line(self.variant(form.paraphrases, rate),
        texts)`` returns, in one call (the step path draws a few lines a step); a form
        without paraphrases draws nothing.
        """
        variant = 0
        if paraphrases := form.paraphrases:
            self.x = x = (self.x * 0x5DEECE66D + 11) & _M48
            u = x * 3.552713678800501e-15
            if u < rate:
                v = int(u / rate * paraphrases)
                variant = v + 1 if v < paraphrases else paraphrases
        if not texts:
            return form.formats[variant]
        reorder = form.reorders[variant]
        return form.formats[variant] % (texts if reorder is None else reorder(texts))

    @classmethod
    def at(cls, x: int) -> StepRng:
        """Return a generator standing at position ``x``, without seeding.

        ``x`` is a ``.x`` read before (where a step's draws stopped) or one of
        :meth:`starts`.
        """
        rng = cls.__new__(cls)
        rng.x = x
        return rng

    @staticmethod
    def starts(seed: int, first: int, n: int) -> list[int]:
        """Return ``StepRng(seed, step).x`` for the ``n`` steps from ``first``, at once.

        numpy's uint64 arithmetic wraps modulo 2**64 as the seeding's masks do: one pass
        over an episode's steps costs less than seeding them one by one (~0.6 us each),
        for a family that keeps its episode's starts and resumes them with :meth:`at`.
        """
        import numpy as np  # only here: the step path never seeds through numpy

        mix = np.uint64(0xBF58476D1CE4E5B9)
        base = (seed * 0x9E3779B97F4A7C15 + first * 0xBF58476D1CE4E5B9 + 1) & _M64
        z = np.uint64(base) + np.arange(n, dtype=np.uint64) * mix
        z = (z ^ (z >> np.uint64(30))) * mix
        return ((z ^ (z >> np.uint64(31))) & np.uint64(_M48)).tolist()
