"""The one core the diagnostic families share.

- :mod:`~wmkit.envs.diagnostic.core`: the :class:`FamilyCore` Protocol (the ``FuncEnv``
  shape plus ``truth`` and ``probes``), :class:`CoreDefaults` and :class:`StepDraft`.
- :mod:`~wmkit.envs.diagnostic.params`: :class:`FamilyParams`, the parameters every
  family has, and their checks.
- :mod:`~wmkit.envs.diagnostic.rng`: :class:`StepRng`, the step random generator.
- :mod:`~wmkit.envs.diagnostic.text`: :class:`TextBook` (templates -> renderer and
  reader) and :class:`Voice` (the renderer compiled once for the step path).
- :mod:`~wmkit.envs.diagnostic.truth`: :func:`changes_delta` and :func:`truth_info`,
  the one builder of the ``wm.*`` keys; :func:`split_by_counterfactual` and
  :func:`fact_slot`, the by-slot split of an env that learns causes from a ``wait`` run.
- :mod:`~wmkit.envs.diagnostic.shell`: :class:`DiagnosticEnv`, the Gymnasium shell.
- :mod:`~wmkit.envs.diagnostic.reference`: the reference family, the template for a
  new one (``wmkit/Reference-v0``).
"""

from wmkit.envs.diagnostic.core import (
    CoreDefaults,
    FamilyCore,
    StepDraft,
    episode_seed,
    text_spaces,
)
from wmkit.envs.diagnostic.params import FamilyParams, check_int, check_rate
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.shell import DiagnosticEnv
from wmkit.envs.diagnostic.text import TextBook, Voice
from wmkit.envs.diagnostic.truth import (
    NO_DELTA,
    Change,
    Slot,
    changes_delta,
    fact_slot,
    split_by_counterfactual,
    truth_info,
)

__all__ = [
    "NO_DELTA",
    "Change",
    "CoreDefaults",
    "DiagnosticEnv",
    "FamilyCore",
    "FamilyParams",
    "Slot",
    "StepDraft",
    "StepRng",
    "TextBook",
    "Voice",
    "changes_delta",
    "check_int",
    "check_rate",
    "episode_seed",
    "fact_slot",
    "split_by_counterfactual",
    "text_spaces",
    "truth_info",
]
