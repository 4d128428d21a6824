"""``logger=jsonl``: the run's log as one JSON Lines file in the run folder.

Every call is one row of ``<run folder>/metrics.jsonl`` (through :class:`wmkit.jsonl.JsonlLog`:
a killed run loses at most its last row), told apart by ``kind``:

- ``metrics``: ``{"kind": "metrics", "step": 3, "time": ..., "metrics": {"episode/drift": 0.2}}``
- ``config``: ``{"kind": "config", "config": {...}}``
- ``table``: ``{"kind": "table", "name": ..., "columns": [...], "rows": [[...], ...]}``
- ``image``, ``html``, ``artifact``: ``{"kind": ..., "name": ..., "path": ..., "type": ...}``
  (the file stays where it is; ``type`` for artifacts only)
- ``finish``: ``{"kind": "finish", "exit_code": 0, "time": ...}``

Read the metrics back with ``[r for r in JsonlLog(path).rows() if r["kind"] == "metrics"]``
(``pandas.json_normalize`` flattens them).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from wmkit.jsonl import JsonlLog
from wmkit.tracking.base import RunLogger, namespaced

__all__ = ["METRICS_FILE", "JsonlLogger"]

METRICS_FILE = "metrics.jsonl"


def _cell(value: Any) -> Any:
    """A JSON-ready table cell: NaN as None, paths and other objects as text."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return str(value)


class JsonlLogger(RunLogger):
    """Appends every call to ``path`` as a row (see the module docstring).

    Args:
        path: the JSONL file (its folder is made).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._log = JsonlLog(self.path)
        self._steps: dict[str, int] = {}

    def log_metrics(
        self, metrics: Mapping[str, Any], step: int | None = None, *, prefix: str = ""
    ) -> None:
        """Append a ``metrics`` row (step None: one more than this prefix's last)."""
        values = namespaced(metrics, prefix)
        if not values:
            return
        if step is None:
            step = self._steps.get(prefix, -1) + 1
        self._steps[prefix] = step
        self._log.append({"kind": "metrics", "step": step, "time": time.time(), "metrics": values})

    def log_config(self, config: Mapping[str, Any]) -> None:
        """Append a ``config`` row."""
        self._log.append({"kind": "config", "config": dict(config)})

    def log_table(self, name: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Append a ``table`` row."""
        cells = [[_cell(c) for c in row] for row in rows]
        self._log.append({"kind": "table", "name": name, "columns": list(columns), "rows": cells})

    def log_image(self, name: str, path: str | Path) -> None:
        """Append an ``image`` row naming the file."""
        self._log.append({"kind": "image", "name": name, "path": str(path)})

    def log_html(self, name: str, path: str | Path) -> None:
        """Append an ``html`` row naming the file."""
        self._log.append({"kind": "html", "name": name, "path": str(path)})

    def log_artifact(self, name: str, kind: str, path: str | Path) -> None:
        """Append an ``artifact`` row naming the file or folder."""
        self._log.append({"kind": "artifact", "name": name, "type": kind, "path": str(path)})

    def finish(self, exit_code: int = 0) -> None:
        """Append the ``finish`` row."""
        self._log.append({"kind": "finish", "exit_code": exit_code, "time": time.time()})
