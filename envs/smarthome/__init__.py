"""``wmkit/SmartHome-v0``: conditions and time (seed 000, §2.1 third case).

The family on the shared diagnostic core, one concern a module: ``text`` (what it says,
and the reader), ``state`` (parameters, records, the immutable state and its hash),
``commands`` (parsing), ``draft`` (one transition's scratch state), ``rules`` (the
agent's commands, the world's events, the chatter), ``truth`` (ground truth, derived
when asked), ``core`` (the pure ``FuncEnv`` core; its docstring describes the family)
and ``solver`` (a scripted solver over the true state). Here: the Gymnasium env, the
shared shell with the family's names filled in.
"""

from wmkit.envs.diagnostic.shell import DiagnosticEnv
from wmkit.envs.smarthome.core import SmartHomeFuncEnv
from wmkit.envs.smarthome.solver import solve
from wmkit.envs.smarthome.state import (
    Rule,
    SmartHomeParams,
    SmartHomeState,
    Task,
    state_hash,
)
from wmkit.envs.smarthome.state import _apply as _apply  # a name the tests import
from wmkit.envs.smarthome.text import LINE_MAX, TEXT, VOICE, read

_LINE_MAX = LINE_MAX

__all__ = [
    "LINE_MAX",
    "TEXT",
    "VOICE",
    "Rule",
    "SmartHomeEnv",
    "SmartHomeFuncEnv",
    "SmartHomeParams",
    "SmartHomeState",
    "Task",
    "read",
    "solve",
    "state_hash",
]


class SmartHomeEnv(DiagnosticEnv):
    """``wmkit/SmartHome-v0``: the shared diagnostic shell over ``SmartHomeFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ``max_score`` counts the
    instructions given so far (none comes at the horizon's minute). ``terminated`` is
    always False; the episode ends at ``horizon``. ``SmartHomeEnv.reader`` is the
    family's perfect reader, ``read``; ``SmartHomeEnv.solver`` its scripted solver,
    ``solve`` (an oracle: it reads the true state, ``snapshot()``).

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        **params: :class:`SmartHomeParams`; ``horizon`` counts minutes, ``load`` rooms
            (a light and blinds each), ``people`` the household.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = SmartHomeFuncEnv
    params_class = SmartHomeParams
    reader = staticmethod(read)
    solver = staticmethod(solve)
