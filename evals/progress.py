"""The progress display of the main job's stages (collect, evaluate): one look for all."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["episode_description", "progress_bar"]


def progress_bar(console: Console, *, disable: bool = False) -> Progress:
    """A rich progress display: what runs, a bar, share done, time spent, time left.

    The description names the stage and the episode it is at. The estimate is rich's,
    from the speed of recent progress: weigh a task's units by their cost (an episode
    by its steps) for it to mean something.
    """
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        disable=disable,
    )


def episode_description(
    stage: str, i: int, n: int, env: str, horizon: int, seed: int, agent: str
) -> str:
    """The bar's description at episode ``i`` of ``n``: the stage and the episode it is at."""
    return f"{stage} {i}/{n} {env} h={horizon} seed={seed} {agent}"
