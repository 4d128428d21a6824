"""Experiment tracking: one logger interface, JSONL, TensorBoard and W&B behind it.

:class:`RunLogger` is the interface every entry point logs through (metrics by step and
namespace, the config, tables, images, HTML pages, artifacts, the exit code);
:func:`open_logger` opens the backends a validated :class:`LoggerConfig` (the Hydra
group ``logger``) names: :class:`JsonlLogger`, :class:`TensorBoardLogger`,
:class:`WandbLogger` (offline by default), several at once (:class:`FanOutLogger`) or
none (:class:`NullLogger`). :func:`redact` gives the config a run records, secrets
replaced; :func:`wandb_runs` reads offline W&B runs back from their files.

The W&B and TensorBoard modules import their packages only when a logger is made.
"""

from wmkit.tracking.base import (
    FanOutLogger,
    NullLogger,
    RunInfo,
    RunLogger,
    flatten,
    namespaced,
)
from wmkit.tracking.config import (
    JsonlSettings,
    LoggerConfig,
    TensorBoardSettings,
    WandbSettings,
    open_logger,
)
from wmkit.tracking.jsonl_logger import METRICS_FILE, JsonlLogger
from wmkit.tracking.redact import REDACTED, SECRET_KEYS, SECRET_SUFFIXES, is_secret, redact
from wmkit.tracking.tensorboard_logger import TensorBoardLogger
from wmkit.tracking.wandb_files import WandbRun, read_records, read_run, wandb_runs
from wmkit.tracking.wandb_logger import WANDB_DIRS, WandbLogger, import_wandb

__all__ = [
    "METRICS_FILE",
    "REDACTED",
    "SECRET_KEYS",
    "SECRET_SUFFIXES",
    "WANDB_DIRS",
    "FanOutLogger",
    "JsonlLogger",
    "JsonlSettings",
    "LoggerConfig",
    "NullLogger",
    "RunInfo",
    "RunLogger",
    "TensorBoardLogger",
    "TensorBoardSettings",
    "WandbLogger",
    "WandbRun",
    "WandbSettings",
    "flatten",
    "import_wandb",
    "is_secret",
    "namespaced",
    "open_logger",
    "read_records",
    "read_run",
    "redact",
    "wandb_runs",
]
