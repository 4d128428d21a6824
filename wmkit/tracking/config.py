"""The ``logger`` config (Hydra group ``configs/logger/``), validated, and the logger it opens.

``logger=wandb`` or ``logger=[wandb,tensorboard,jsonl]``: each option puts its settings
under its own key of one ``logger`` node, so a list merges into one node with a key per
backend; ``logger=none`` (the default) adds none. :class:`LoggerConfig` refuses an
unknown key (a typo) with pydantic's error; :func:`open_logger` makes the backends.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from wmkit.tracking.base import FanOutLogger, NullLogger, RunInfo, RunLogger
from wmkit.tracking.jsonl_logger import METRICS_FILE, JsonlLogger

__all__ = [
    "JsonlSettings",
    "LoggerConfig",
    "TensorBoardSettings",
    "WandbSettings",
    "open_logger",
]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JsonlSettings(_Strict):
    """``logger=jsonl``: ``file`` is the JSONL file, relative to the run folder."""

    file: str = METRICS_FILE


class TensorBoardSettings(_Strict):
    """``logger=tensorboard``: ``dir`` is the event files' folder, relative to the run folder."""

    dir: str = "tensorboard"


class WandbSettings(_Strict):
    """``logger=wandb``: see :class:`~wmkit.tracking.wandb_logger.WandbLogger`.

    ``mode`` None: ``$WANDB_MODE``, else offline; ``group`` None: the sweep's folder name
    (a single run: its run folder's).
    """

    project: str = Field(default="wmkit", min_length=1)
    entity: str | None = None
    mode: Literal["offline", "online", "disabled"] | None = None
    group: str | None = None
    tags: list[str] = Field(default_factory=list)
    notes: str | None = None


class LoggerConfig(_Strict):
    """The ``logger`` node: one optional section per backend (absent: not used)."""

    jsonl: JsonlSettings | None = None
    tensorboard: TensorBoardSettings | None = None
    wandb: WandbSettings | None = None

    @property
    def backends(self) -> list[str]:
        """The backends chosen, in the order they are opened."""
        return [name for name in ("jsonl", "tensorboard", "wandb") if getattr(self, name)]


def open_logger(
    config: LoggerConfig, run: RunInfo, run_config: Mapping[str, Any] | None = None
) -> RunLogger:
    """Open the backends of ``config`` for ``run``: one logger, a fan-out, or a no-op.

    Args:
        config: the validated ``logger`` node.
        run: the run folder and how trackers file the run.
        run_config: the run's config, resolved and redacted, given to every backend's
            ``log_config``.

    Raises:
        ModuleNotFoundError: a backend's package is not installed (the message names
            the extra); the backends opened before it are finished first.
    """
    loggers: list[RunLogger] = []
    try:
        if config.jsonl is not None:
            loggers.append(JsonlLogger(run.dir / config.jsonl.file))
        if config.tensorboard is not None:
            from wmkit.tracking.tensorboard_logger import TensorBoardLogger

            loggers.append(TensorBoardLogger(run.dir / config.tensorboard.dir))
        if config.wandb is not None:
            from wmkit.tracking.wandb_logger import WandbLogger

            loggers.append(WandbLogger(run, **config.wandb.model_dump()))
    except BaseException:
        for logger in loggers:
            logger.finish(exit_code=1)
        raise
    if run_config is not None:
        for logger in loggers:
            logger.log_config(run_config)
    if not loggers:
        return NullLogger()
    return loggers[0] if len(loggers) == 1 else FanOutLogger(loggers)
