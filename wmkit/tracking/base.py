"""The one logger interface (:class:`RunLogger`), the run it logs, and the two plain loggers.

A logger records one run of an entry point (a sweep job is one run): its config once,
metrics as they come (by step, under a namespace such as ``episode`` or
``train_value/parcel``), tables, images, HTML pages and artifacts (files or folders:
rules, checkpoints), and how the run ended. The backends (JSONL, TensorBoard, W&B) each
implement it; :class:`FanOutLogger` sends every call to several, :class:`NullLogger`
to none. A logger is a context manager: leaving the block finishes the run, with exit
code 1 when an exception left it.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = ["FanOutLogger", "NullLogger", "RunInfo", "RunLogger", "flatten", "namespaced"]


@dataclass(frozen=True)
class RunInfo:
    """Who a run is: where it writes and how a tracker files it.

    Attributes:
        dir: the run folder (Hydra's output folder); every backend writes inside it.
        job_type: the entry point or stage (``eval``, ``collect``, ``distill``,
            ``train_value``).
        group: what the run belongs to: the sweep (its folder's name), else the run
            folder's name.
        name: the run's own label (a sweep job's overrides).
    """

    dir: Path
    job_type: str
    group: str
    name: str


def flatten(tree: Mapping[str, Any], sep: str = "/") -> dict[str, Any]:
    """The leaves of a nested mapping, keyed by their path (``{"a": {"b": 1}}`` -> ``a/b``)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out |= {f"{key}{sep}{k}": v for k, v in flatten(value, sep).items()}
        else:
            out[str(key)] = value
    return out


def namespaced(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The finite numbers of ``metrics`` as floats, keys under ``prefix/`` when given.

    Booleans count as numbers (0/1); ``None``, NaN, infinities and non-numbers are left
    out (a metric an episode had nothing to measure with).
    """
    head = prefix.strip("/")
    out = {}
    for key, value in metrics.items():
        if isinstance(value, bool | int | float) and math.isfinite(value):
            out[f"{head}/{key}" if head else str(key)] = float(value)
    return out


class RunLogger(ABC):
    """Records one run.

    Every method may be called any number of times, in any order, until :meth:`finish`;
    names may hold ``/`` (a namespace).
    """

    @abstractmethod
    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, *, prefix: str = ""
    ) -> None:
        """Record scalar metrics at ``step`` (None: the backend's next step).

        Args:
            metrics: name -> number; non-finite values and non-numbers are skipped.
            step: the x-axis value (episode number, training step), per ``prefix``: two
                namespaces may count their steps apart.
            prefix: the namespace the names go under (``train_value/parcel``).
        """

    @abstractmethod
    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record the run's (resolved, redacted) config."""

    @abstractmethod
    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Record a table: ``rows`` of cells in the order of ``columns``."""

    @abstractmethod
    def log_image(self, name: str, path: str | Path) -> None:
        """Record the image file at ``path`` (a PNG)."""

    @abstractmethod
    def log_html(self, name: str, path: str | Path) -> None:
        """Record the HTML page at ``path`` (a self-contained file)."""

    @abstractmethod
    def log_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Record the file or folder at ``path`` as a versioned artifact.

        Args:
            name: the artifact's name (``rules-parcel``).
            kind: what it is (W&B's artifact type: ``rules``, ``model``, ``results``).
            path: a file or a folder (all of it).
        """

    @abstractmethod
    def finish(self, exit_code: int = 0) -> None:
        """End the run (``exit_code`` 0: it succeeded); nothing is logged after."""

    def __enter__(self) -> RunLogger:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        code = 0
        if isinstance(error, SystemExit):
            code = error.code if isinstance(error.code, int) else int(error.code is not None)
        elif error is not None:
            code = 1
        self.finish(exit_code=code)


class NullLogger(RunLogger):
    """Records nothing (``logger=none``)."""

    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, *, prefix: str = ""
    ) -> None:
        """Record nothing."""

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record nothing."""

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Record nothing."""

    def log_image(self, name: str, path: str | Path) -> None:
        """Record nothing."""

    def log_html(self, name: str, path: str | Path) -> None:
        """Record nothing."""

    def log_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Record nothing."""

    def finish(self, exit_code: int = 0) -> None:
        """Do nothing."""


class FanOutLogger(RunLogger):
    """Sends every call to each of ``loggers``, in order (``logger=[wandb,tensorboard]``).

    :meth:`finish` finishes every one, even when an earlier one raises (the first error
    is raised after).
    """

    def __init__(self, loggers: Sequence[RunLogger]) -> None:
        self.loggers = tuple(loggers)

    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, *, prefix: str = ""
    ) -> None:
        """Record the metrics in every logger."""
        for logger in self.loggers:
            logger.log_metrics(metrics, step, prefix=prefix)

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Record the config in every logger."""
        for logger in self.loggers:
            logger.log_config(config)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Record the table in every logger."""
        for logger in self.loggers:
            logger.log_table(name, columns, rows)

    def log_image(self, name: str, path: str | Path) -> None:
        """Record the image in every logger."""
        for logger in self.loggers:
            logger.log_image(name, path)

    def log_html(self, name: str, path: str | Path) -> None:
        """Record the page in every logger."""
        for logger in self.loggers:
            logger.log_html(name, path)

    def log_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Record the artifact in every logger."""
        for logger in self.loggers:
            logger.log_artifact(name, kind, path)

    def finish(self, exit_code: int = 0) -> None:
        """Finish every logger."""
        first: BaseException | None = None
        for logger in self.loggers:
            try:
                logger.finish(exit_code)
            except Exception as err:  # finish the others, then raise the first
                first = first or err
        if first is not None:
            raise first
