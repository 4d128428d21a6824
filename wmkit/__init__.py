"""wmkit: long-horizon textual world modeling.

The library (``wmkit.world``, ``wmkit.agents``, ...) never imports ``wmkit.envs``,
``wmkit.trainers``, ``wmkit.evals`` or ``wmkit.scripts``; those import the library.
"""

__version__ = "0.1.0"
