"""The text spaces of wmkit's envs: Gymnasium's ``Text``, kept out of shared memory.

Gymnasium's ``AsyncVectorEnv`` passes observations back through shared memory by
default, and a ``Text`` observation does not survive it: the vector env reads the
buffer into strings once, when it is made, so every later ``reset`` and ``step``
returns those same strings (max_length times the first character of the charset). The
workers' observations never reach the caller, and nothing says so.

:class:`TextSpace` is ``gymnasium.spaces.Text`` in every other way; for it, making the
shared buffer raises a ``ValueError`` that says what to do instead:

    gymnasium.make_vec("wmkit/Parcel-v0", 4, vectorization_mode="async",
                       vector_kwargs={"shared_memory": False})

(``vectorization_mode="sync"`` needs nothing: its envs run in the caller's process.)
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces
from gymnasium.vector.utils.shared_memory import create_shared_memory

__all__ = ["SHARED_MEMORY_ERROR", "TextSpace"]

SHARED_MEMORY_ERROR = (
    "wmkit's text observations cannot live in shared memory: Gymnasium's async vector env "
    "would read them once and return the same strings at every step. Make it with "
    "shared_memory=False: gymnasium.make_vec(env_id, n, vectorization_mode='async', "
    "vector_kwargs={'shared_memory': False}), or AsyncVectorEnv(fns, shared_memory=False); "
    "or use vectorization_mode='sync'"
)


class TextSpace(spaces.Text):
    """``gymnasium.spaces.Text`` that refuses an async vector env's shared memory (module doc)."""


@create_shared_memory.register(TextSpace)
def _refuse_shared_memory(space: TextSpace, n: int = 1, ctx: Any = None) -> Any:
    raise ValueError(SHARED_MEMORY_ERROR)
