"""The leaderboard's plots: drift per step at every horizon, breakage by chain, confusion.

One row of axes per env: drift against the step at each horizon (median over seeds,
the band their interquartile range), breakage against chain length at the env's
largest horizon (pooled share, the band its 95% bootstrap interval over episodes), and
causal-confusion bars at that horizon (IQM over seeds, whiskers its 95% CI). Each
configuration keeps one colour, line style, marker and width everywhere; widths shrink
and markers are staggered along the curve in drawing order, so identical curves (the
oracle and a perfect tracker, two agents on one tracker) stay visible on top of each
other. The legend sits to the right of each row, outside the data.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wmkit.evals.cells import Cell, finished
from wmkit.evals.marks import Summary, display_name, legend_title
from wmkit.evals.metrics import BREAKAGE_BINS

__all__ = ["Style", "draw", "env_pngs", "styles", "write_png"]

_LINESTYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "v", "D", "P", "X", "*", "<", ">")
_CONFUSION_BARS = (
    ("confusion_action_f1", "action F1", ""),
    ("confusion_event_f1", "event F1", "//"),
    ("confusion_probe_accuracy", "confusion probes", ".."),
)

Style = dict[str, Any]
"""Matplotlib keyword arguments of one configuration's lines."""


def styles(labels: Sequence[str]) -> dict[str, Style]:
    """One distinct style per configuration label, in the order given."""
    import matplotlib

    colours = matplotlib.colormaps["tab10" if len(labels) <= 10 else "tab20"].colors
    n = max(len(labels), 1)
    return {
        label: dict(
            color=colours[i % len(colours)],
            linestyle=_LINESTYLES[i % len(_LINESTYLES)],
            marker=_MARKERS[i % len(_MARKERS)],
            linewidth=3.4 - 2.2 * i / n,
            markersize=7 - 3 * i / n,
            markevery=(0.04 * (i % 10) / 10 + 0.01, 0.08),
            alpha=0.9,
        )
        for i, label in enumerate(labels)
    }


def _column_percentiles(values: np.ndarray, qs: Sequence[float]) -> list[np.ndarray]:
    """Percentiles of each column over its non-NaN values (numpy's linear method).

    ``np.nanpercentile`` does the same one column at a time in Python, 100x slower on
    the drift series of a long horizon.
    """
    ordered = np.sort(values, axis=0)  # NaN sorts last
    count = (~np.isnan(values)).sum(axis=0)
    columns = np.arange(values.shape[1])
    out = []
    for q in qs:
        position = q / 100 * (count - 1)
        low = np.floor(position).astype(int)
        high = np.minimum(low + 1, count - 1)
        below, above = ordered[low, columns], ordered[high, columns]
        out.append(below + (position - low) * (above - below))
    return out


def _drift_axis(ax: Any, env: str, horizon: int, groups: Sequence[Cell], style: dict) -> None:
    for cell in groups:
        series = [r["drift_series"] for r in finished(cell) if r.get("drift_series")]
        if cell.env != env or cell.horizon != horizon or not series:
            continue
        length = max(len(s) for s in series)
        # Episodes that ended early (a won Vault) count only at the steps they reached.
        padded = np.full((len(series), length), np.nan)
        for i, s in enumerate(series):
            padded[i, : len(s)] = s
        low, mid, high = _column_percentiles(padded, (25, 50, 75))
        steps = np.arange(length)
        ax.fill_between(steps, low, high, color=style[cell.agent]["color"], alpha=0.12, lw=0)
        ax.plot(steps, mid, label=cell.agent, **style[cell.agent])
    ax.set(
        title=f"{env}: drift, horizon {horizon}",
        xlabel="step",
        ylabel="drift (median, IQR band)",
        ylim=(-0.03, 1.03),
    )


def _breakage_axis(ax: Any, env: str, cells: Sequence[Summary], style: dict) -> None:
    for s in cells:
        ci = s["breakage_by_chain_ci"]
        if not ci:
            continue
        x = [BREAKAGE_BINS.index(edge) for edge in ci]
        ax.fill_between(
            x,
            [i.ci_low for i in ci.values()],
            [i.ci_high for i in ci.values()],
            color=style[s["agent"]]["color"],
            alpha=0.12,
            lw=0,
        )
        line = dict(style[s["agent"]], markevery=None)
        ax.plot(x, [i.value for i in ci.values()], label=s["agent"], **line)
    ax.set_xticks(range(len(BREAKAGE_BINS)), [f"{e}+" for e in BREAKAGE_BINS])
    ax.axhline(0.5, color="grey", linestyle=":", lw=1)
    horizon = cells[0]["horizon"] if cells else "-"
    ax.set(
        title=f"{env}: breakage by chain, horizon {horizon}",
        xlabel="chain length (steps)",
        ylabel="share wrong (95% CI band)",
        ylim=(-0.03, 1.03),
    )


def _confusion_axis(ax: Any, env: str, cells: Sequence[Summary], style: dict) -> None:
    width = 0.8 / len(_CONFUSION_BARS)
    x = np.arange(len(cells))
    for j, (key, name, hatch) in enumerate(_CONFUSION_BARS):
        values = np.array([s[key].iqm if s[key].n else np.nan for s in cells])
        low = np.array([s[key].ci_low if s[key].n else np.nan for s in cells])
        high = np.array([s[key].ci_high if s[key].n else np.nan for s in cells])
        err = np.nan_to_num(np.vstack([values - low, high - values]))
        ax.bar(
            x + (j - 1) * width,
            np.nan_to_num(values),
            width,
            yerr=err,
            color=[style[s["agent"]]["color"] for s in cells],
            hatch=hatch,
            edgecolor="black",
            linewidth=0.5,
            label=name,
            capsize=2,
        )
    ax.set_xticks(x, [display_name(s) for s in cells], rotation=60, ha="right", fontsize=7)
    horizon = cells[0]["horizon"] if cells else "-"
    ax.set(title=f"{env}: causal confusion, horizon {horizon}", ylabel="IQM (95% CI)")
    ax.set_ylim(0, 1.05)


def draw(
    groups: Sequence[Cell], summaries: Sequence[Summary], env: str, columns: int | None = None
) -> Any:
    """Draw one env's row of plots into a new matplotlib figure.

    Args:
        groups: the cells.
        summaries: their summaries.
        env: the env.
        columns: axes in the row (default: the env's horizons, then breakage and
            confusion); unused drift axes are hidden, so rows of several envs line up.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    style = styles(sorted({c.agent for c in groups}))
    horizons = sorted({c.horizon for c in groups if c.env == env})
    columns = max(columns or 0, len(horizons) + 2)
    width, height = 4.4 * columns + 3.2, 5.0
    fig, axes = plt.subplots(1, columns, figsize=(width, height), squeeze=False)
    row = axes[0]
    # A fixed layout: room for the rotated names under the bars and the legend at the
    # right (tight_layout would draw the figure once more only to measure it).
    fig.subplots_adjust(
        left=0.55 / width, right=1 - 3.0 / width, bottom=1.45 / height, top=1 - 0.4 / height,
        wspace=0.28,
    )  # fmt: skip
    for col, horizon in enumerate(horizons):
        _drift_axis(row[col], env, horizon, groups, style)
    for ax in row[len(horizons) : columns - 2]:
        ax.set_visible(False)
    last = horizons[-1] if horizons else None
    cells = [s for s in summaries if s["env"] == env and s["horizon"] == last]
    _breakage_axis(row[columns - 2], env, cells, style)
    _confusion_axis(row[columns - 1], env, cells, style)
    bars = row[columns - 1].legend(
        [Patch(facecolor="white", edgecolor="black", hatch=h) for _, _, h in _CONFUSION_BARS],
        [name for _, name, _ in _CONFUSION_BARS],
        title="bars",
        fontsize=7,
        title_fontsize=7,
        loc="lower left",
        bbox_to_anchor=(1.04, 0.0),
        borderaxespad=0.0,
    )
    env_cells = [s for s in summaries if s["env"] == env]
    names = {s["agent"]: display_name(s) for s in env_cells}
    handles = [Line2D([], [], **dict(style[label], markevery=None)) for label in names]
    row[columns - 1].legend(
        handles,
        list(names.values()),
        title=legend_title(env_cells),
        loc="upper left",
        bbox_to_anchor=(1.04, 1.0),
        fontsize=8,
        title_fontsize=8,
        borderaxespad=0.0,
    )
    row[columns - 1].add_artist(bars)  # the second legend call replaced the first
    return fig


def env_pngs(groups: Sequence[Cell], summaries: Sequence[Summary]) -> dict[str, bytes]:
    """Draw each env's row of plots once; return ``{env: PNG bytes}``, envs sorted."""
    import matplotlib.pyplot as plt

    envs = sorted({c.env for c in groups})
    columns = max((len({c.horizon for c in groups if c.env == e}) for e in envs), default=0) + 2
    out = {}
    for env in envs:
        fig = draw(groups, summaries, env, columns)
        buf = io.BytesIO()
        fig.savefig(buf, dpi=72, format="png")
        plt.close(fig)
        out[env] = buf.getvalue()
    return out


def write_png(pngs: dict[str, bytes], path: str | Path) -> Path:
    """Stack the envs' rows (:func:`env_pngs`) into one PNG at ``path``; return the path."""
    from PIL import Image

    images = [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs.values()]
    if not images:
        images = [Image.new("RGB", (320, 80), "white")]
    canvas = Image.new(
        "RGB", (max(i.width for i in images), sum(i.height for i in images)), "white"
    )
    top = 0
    for image in images:
        canvas.paste(image, (0, top))
        top += image.height
    canvas.save(path, format="PNG", optimize=False)
    return Path(path)
