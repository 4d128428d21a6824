"""Gymnasium environments, registered under ``wmkit/`` with string entry points.

Importing this module imports no environment code: ``gymnasium.make`` loads the entry
point on first use.
"""

import gymnasium

__all__ = ["DIAGNOSTIC_IDS", "ENV_IDS", "GAME_IDS"]

DIAGNOSTIC_IDS = ("wmkit/Parcel-v0", "wmkit/SmartHome-v0", "wmkit/Booking-v0", "wmkit/Vault-v0")
"""The procedurally generated diagnostic families (pure Python, no extra install)."""

GAME_IDS = ("wmkit/Jericho-v0", "wmkit/TextWorld-v0")
"""Real text games (extras ``jericho`` and ``textworld``)."""

ENV_IDS = DIAGNOSTIC_IDS + GAME_IDS

_ENTRY_POINTS = {
    "wmkit/Parcel-v0": "wmkit.envs.parcel:ParcelEnv",
    "wmkit/SmartHome-v0": "wmkit.envs.smarthome:SmartHomeEnv",
    "wmkit/Booking-v0": "wmkit.envs.booking:BookingEnv",
    "wmkit/Vault-v0": "wmkit.envs.vault:VaultEnv",
    "wmkit/Jericho-v0": "wmkit.envs.jericho_env:JerichoEnv",
    "wmkit/TextWorld-v0": "wmkit.envs.textworld_env:TextWorldEnv",
}

for _env_id, _entry_point in _ENTRY_POINTS.items():
    gymnasium.register(_env_id, entry_point=_entry_point)
