"""``logger=wandb``: one Weights & Biases run per run (a sweep job), offline by default.

``wandb`` is imported when a logger is made (``pip install 'wmkit[wandb]'``). The run is
offline unless ``WANDB_MODE`` (or the ``mode`` setting) says otherwise, and everything
W&B writes stays in the run folder: ``WANDB_DIR``, ``WANDB_CACHE_DIR``, ``WANDB_DATA_DIR``
and ``WANDB_CONFIG_DIR`` point inside it unless they are set (and are put back when the
run finishes, so the next job of a launcher's worker gets its own). The offline run is
``<run folder>/wandb/offline-run-<time>-<id>/``; ``wandb sync`` on it uploads it later.

Metrics logged with a step count it per namespace: a prefix ``p`` logs ``p/step`` beside
its metrics and is charted against it (``define_metric``), so episodes and training
steps each keep their own axis in one run. Tables are ``wandb.Table``, images
``wandb.Image``, pages ``wandb.Html``, artifacts ``wandb.Artifact`` (a file or a whole
folder).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from wmkit.tracking.base import RunInfo, RunLogger, namespaced

__all__ = ["WANDB_DIRS", "WandbLogger", "import_wandb"]

WANDB_DIRS = {
    "WANDB_DIR": ".",  # W&B makes <WANDB_DIR>/wandb/
    "WANDB_CACHE_DIR": "wandb/cache",
    "WANDB_DATA_DIR": "wandb/data",  # artifacts' staging
    "WANDB_CONFIG_DIR": "wandb/config",
}
"""W&B's folders, relative to the run folder, unless the variable is set already."""

Mode = Literal["offline", "online", "disabled"]


def import_wandb() -> Any:
    """``import wandb``, or an error that names the extra to install.

    Raises:
        ModuleNotFoundError: wandb is not installed.
    """
    try:
        import wandb
    except ModuleNotFoundError as err:
        raise ModuleNotFoundError(
            "logger=wandb needs the wandb package: pip install 'wmkit[wandb]'", name="wandb"
        ) from err
    return wandb


def _artifact_name(name: str) -> str:
    # W&B artifact names: letters, digits, dashes, underscores, dots.
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "artifact"


def _cell(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


class WandbLogger(RunLogger):
    """One W&B run for ``run``.

    Args:
        run: the run folder, job type, group and name.
        project: the W&B project.
        entity: the W&B entity (None: the default one).
        mode: ``offline``, ``online`` or ``disabled``; None: ``$WANDB_MODE``, else offline.
        group: the group (None: ``run.group``).
        tags: the run's tags.
        notes: the run's notes.

    Raises:
        ModuleNotFoundError: wandb is not installed (the message names the extra).
    """

    def __init__(
        self,
        run: RunInfo,
        *,
        project: str = "wmkit",
        entity: str | None = None,
        mode: Mode | None = None,
        group: str | None = None,
        tags: Sequence[str] = (),
        notes: str | None = None,
    ) -> None:
        self._wandb = wandb = import_wandb()
        self._restore: dict[str, str | None] = {}
        for var, sub in WANDB_DIRS.items():
            if not os.environ.get(var):
                folder = (run.dir / sub).resolve()
                folder.mkdir(parents=True, exist_ok=True)
                self._restore[var] = os.environ.get(var)
                os.environ[var] = str(folder)
        mode = mode or os.environ.get("WANDB_MODE") or "offline"  # type: ignore[assignment]
        try:
            self.run = wandb.init(
                project=project,
                entity=entity,
                mode=mode,
                dir=str(run.dir.resolve()),
                group=group or run.group,
                job_type=run.job_type,
                name=run.name[:128],
                tags=list(tags),
                notes=notes,
                reinit="finish_previous",
            )
        except BaseException:
            self._put_back()
            raise
        self._axes: set[str] = set()

    def _put_back(self) -> None:
        for var, value in self._restore.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        self._restore = {}

    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, *, prefix: str = ""
    ) -> None:
        """Log the finite metrics; with a step, as ``<prefix>/step`` (the prefix's axis)."""
        values: dict[str, Any] = namespaced(metrics, prefix)
        if not values:
            return
        if step is not None:
            head = prefix.strip("/")
            axis = f"{head}/step" if head else "step"
            if axis not in self._axes:
                self._axes.add(axis)
                self.run.define_metric(axis, hidden=True)
                self.run.define_metric(f"{head}/*" if head else "*", step_metric=axis)
            values[axis] = step
        self.run.log(values)

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Update the run's config."""
        self.run.config.update(dict(config), allow_val_change=True)

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Log a ``wandb.Table``."""
        data = [[_cell(c) for c in row] for row in rows]
        self.run.log({name: self._wandb.Table(columns=list(columns), data=data)})

    def log_image(self, name: str, path: str | Path) -> None:
        """Log a ``wandb.Image`` of the file."""
        self.run.log({name: self._wandb.Image(str(path))})

    def log_html(self, name: str, path: str | Path) -> None:
        """Log a ``wandb.Html`` of the page."""
        with open(path, encoding="utf-8") as page:
            self.run.log({name: self._wandb.Html(page)})

    def log_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Log the file or folder as an artifact of type ``kind``."""
        where = Path(path)
        artifact = self._wandb.Artifact(_artifact_name(name), type=kind)
        if where.is_dir():
            artifact.add_dir(str(where))
        else:
            artifact.add_file(str(where))
        self.run.log_artifact(artifact)

    def finish(self, exit_code: int = 0) -> None:
        """Finish the run with ``exit_code``, wait for W&B to write it, put its folders back.

        ``run.finish`` can return before W&B's service has written the run's last
        records; ``wandb.teardown`` waits for it (W&B's own exit hook does so too, but
        not reliably in a launcher's worker process).
        """
        try:
            self.run.finish(exit_code=exit_code)
            self._wandb.teardown()
        finally:
            self._put_back()
