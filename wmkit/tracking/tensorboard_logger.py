"""``logger=tensorboard``: TensorBoard event files in the run folder.

Written by torch's :class:`torch.utils.tensorboard.SummaryWriter` (torch is a core
dependency; the writer needs the ``tensorboard`` package: ``pip install
'wmkit[tensorboard]'``). Metrics are scalars tagged ``<prefix>/<name>``; the config,
tables, HTML pages and artifacts are text (tables as Markdown, pages and artifacts by
path); images are images. Look with ``tensorboard --logdir <run or sweep folder>``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wmkit.tracking.base import RunLogger, namespaced

__all__ = ["TensorBoardLogger"]

_MISSING = "logger=tensorboard needs the tensorboard package: pip install 'wmkit[tensorboard]'"


def _markdown(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        if isinstance(value, float):
            return f"{value:.4g}"
        return "" if value is None else str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


class TensorBoardLogger(RunLogger):
    """Writes one TensorBoard run into ``log_dir``.

    Args:
        log_dir: the event files' folder (made).

    Raises:
        ModuleNotFoundError: the ``tensorboard`` package is not installed (the message
            names the extra).
    """

    def __init__(self, log_dir: str | Path) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ModuleNotFoundError as err:  # torch's writer imports tensorboard
            raise ModuleNotFoundError(_MISSING, name="tensorboard") from err
        self.log_dir = Path(log_dir)
        self._writer = SummaryWriter(log_dir=str(self.log_dir))
        self._steps: dict[str, int] = {}

    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, *, prefix: str = ""
    ) -> None:
        """Add one scalar per finite metric at ``step`` (None: this prefix's next)."""
        if step is None:
            step = self._steps.get(prefix, -1) + 1
        self._steps[prefix] = step
        for tag, value in namespaced(metrics, prefix).items():
            self._writer.add_scalar(tag, value, global_step=step)

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Add the config as text (JSON, in a code block)."""
        text = json.dumps(config, indent=2, sort_keys=True, default=str)
        self._writer.add_text("config", "```\n" + text + "\n```")

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Add the table as Markdown text."""
        self._writer.add_text(name, _markdown(columns, rows))

    def log_image(self, name: str, path: str | Path) -> None:
        """Add the image file (read with matplotlib) as an image."""
        from matplotlib import image

        pixels = image.imread(str(path))  # height x width x channels, floats in [0, 1]
        self._writer.add_image(name, pixels, dataformats="HWC" if pixels.ndim == 3 else "HW")

    def log_html(self, name: str, path: str | Path) -> None:
        """Add the page's path as text (TensorBoard shows no HTML)."""
        self._writer.add_text(name, f"HTML page: `{path}`")

    def log_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Add the artifact's path as text."""
        self._writer.add_text(f"artifacts/{name}", f"{kind}: `{path}`")

    def finish(self, exit_code: int = 0) -> None:
        """Flush and close the event file."""
        self._writer.close()
