"""Gymnasium environments, registered under ``wmkit/`` with string entry points.

Importing this module imports no environment code: ``gymnasium.make`` loads the entry
point on first use.
"""

import gymnasium

__all__ = ["DIAGNOSTIC_IDS", "ENV_IDS", "EXTRAS", "GAME_IDS"]

DIAGNOSTIC_IDS = (
    "wmkit/Parcel-v0",
    "wmkit/SmartHome-v0",
    "wmkit/Booking-v0",
    "wmkit/Vault-v0",
    "wmkit/Reference-v0",
)
"""The procedurally generated diagnostic families (pure Python, no extra install); the
last, ``Reference``, is the small template a new family starts from."""

GAME_IDS = ("wmkit/Jericho-v0", "wmkit/TextWorld-v0")
"""Real text games (extras ``jericho`` and ``textworld``, :data:`EXTRAS`)."""

EXTRAS = {"wmkit/Jericho-v0": "jericho", "wmkit/TextWorld-v0": "textworld"}
"""Env id -> the package extra its code needs (``pip install 'wmkit[textworld]'``)."""

ENV_IDS = DIAGNOSTIC_IDS + GAME_IDS

_ENTRY_POINTS = {
    "wmkit/Parcel-v0": "wmkit.envs.parcel:ParcelEnv",
    "wmkit/SmartHome-v0": "wmkit.envs.smarthome:SmartHomeEnv",
    "wmkit/Booking-v0": "wmkit.envs.booking:BookingEnv",
    "wmkit/Vault-v0": "wmkit.envs.vault:VaultEnv",
    "wmkit/Reference-v0": "wmkit.envs.diagnostic.reference:ReferenceEnv",
    "wmkit/Jericho-v0": "wmkit.envs.jericho:JerichoEnv",
    "wmkit/TextWorld-v0": "wmkit.envs.textworld_env:TextWorldEnv",
}

# The diagnostic families step in ~15 us: gymnasium's passive checker and order
# enforcer would add ~5% to every step for checks their tests already make
# (``check_env`` over every id; ``DiagnosticEnv.step`` refuses to run before ``reset``).
_LEAN = {"disable_env_checker": True, "order_enforce": False}

for _env_id, _entry_point in _ENTRY_POINTS.items():
    gymnasium.register(
        _env_id, entry_point=_entry_point, **(_LEAN if _env_id in DIAGNOSTIC_IDS else {})
    )
