"""The reference family (``wmkit/Reference-v0``): the template for a new diagnostic family.

Copy this folder to start one. It has what every family has, each concern in a file:
``text.py`` (the message kinds: one declaration renders and reads), ``state.py`` (the
parameters and the immutable state), ``rules.py`` (the pure core: ``initial``,
``transition``, ``truth``, ``probes``), ``solver.py`` (a scripted solver over the true
state) and, here, the Gymnasium env: the shared shell with the three names filled in.
"""

from wmkit.envs.diagnostic.reference.rules import ReferenceCore
from wmkit.envs.diagnostic.reference.solver import solve
from wmkit.envs.diagnostic.reference.state import ReferenceParams, ReferenceState
from wmkit.envs.diagnostic.reference.text import read
from wmkit.envs.diagnostic.shell import DiagnosticEnv

__all__ = ["ReferenceCore", "ReferenceEnv", "ReferenceParams", "ReferenceState", "read", "solve"]


class ReferenceEnv(DiagnosticEnv):
    """Boxes on shelves, a porter, requests, one timer and one conditional.

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        **params: :class:`ReferenceParams` (``horizon``, ``load``, ``paraphrase_rate``,
            ``distractors``, ``indirection``, ``probe_rate``).
    """

    core_class = ReferenceCore
    params_class = ReferenceParams
    reader = staticmethod(read)
    solver = staticmethod(solve)
