"""A small ``wmkit-eval`` config for suite tests: the default config, a few agents and envs.

Test files import it as ``from small_suite import small_config`` (pytest's ``prepend``
import mode puts this folder on ``sys.path``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wmkit.evals.suite import EvalConfig


def small_config(agents: str, families: Iterable[str], **update: Any) -> EvalConfig:
    """The default config with ``agents`` (e.g. ``"[solver,random]"``), on ``families`` only.

    Horizon 50, seeds 0-2, no progress bar, no records; ``update`` overrides any key.
    """
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        raw = OmegaConf.to_container(compose("eval", [f"agents={agents}"]), resolve=True)
    config = EvalConfig.model_validate(raw)
    base = {
        "envs": {name: config.envs[name] for name in families},
        "horizons": [50],
        "seeds": [0, 1, 2],
        "progress": False,
        "records": False,
    }
    return config.model_copy(update=base | update)
