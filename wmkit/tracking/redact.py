"""Which config keys are secrets, and a config with them redacted: one rule for everything.

:func:`redact` gives the config a run records (``config.yaml``, W&B's run config);
:func:`wmkit.evals.suite.fingerprint` leaves the same keys out of its hash (a rotated
credential is not a new setting). Both ask :func:`is_secret`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "SECRET_KEYS", "SECRET_SUFFIXES", "is_secret", "redact"]

SECRET_KEYS = frozenset({"api_key", "secret", "password", "token"})
"""Config keys that hold a credential, by their whole name (case-insensitive)."""
SECRET_SUFFIXES = ("_key", "_token", "_password", "_secret")
"""Endings of such keys' names (``openai_api_key``, ``hf_token``, ``db_password``)."""
REDACTED = "[redacted]"
"""What a secret's value is replaced by (``None`` stays ``None``: nothing was set)."""

# scheme://user:password@host -> the password part (e.g. a PostgreSQL URL).
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s@]+(?=@)")


def is_secret(key: Any) -> bool:
    """Whether the config key ``key`` names a credential (:data:`SECRET_KEYS`, suffixes)."""
    if not isinstance(key, str):
        return False
    name = key.lower()
    return name in SECRET_KEYS or name.endswith(SECRET_SUFFIXES)


def redact(value: Any) -> Any:
    """``value`` with every secret replaced by :data:`REDACTED`, at any depth.

    A secret is the value of a key :func:`is_secret` names (unless it is ``None``), or
    the password of a URL in any string (``postgresql://me:pw@host`` ->
    ``postgresql://me:[redacted]@host``). Mappings become dicts and tuples lists; the
    input is not changed.
    """
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if v is not None else None) if is_secret(k) else redact(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED, value)
    return value
