"""Gymnasium environments, registered under ``wmkit/`` with string entry points.

Importing this module imports no environment code: ``gymnasium.make`` loads the entry
point on first use.
"""

import gymnasium

__all__ = ["ENV_IDS"]

ENV_IDS = ("wmkit/Parcel-v0",)

gymnasium.register("wmkit/Parcel-v0", entry_point="wmkit.envs.parcel:ParcelEnv")
