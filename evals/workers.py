"""Run a suite's episodes in worker processes; their results come back as each finishes.

:func:`run_tasks` plays :class:`Task` s one at a time in this process (``workers=1``),
or up to ``workers`` at once in worker processes. The caller appends results, writes
records and moves its progress bar as they arrive, in the order they finish; what an
episode computes does not depend on where it ran, so the rows are those of
``workers=1`` in another order.

A plain task runs in a :class:`~concurrent.futures.ProcessPoolExecutor` whose
processes start as :mod:`wmkit.evals.isolation`'s workers do (the fork server, with the
task's package and the ``preload`` modules already imported; never a fork of the
caller) and end with the caller, however it dies. An error raised by a plain task is
raised here, as it is with ``workers=1``. An isolated task (``Task.isolate``) runs in a
watched worker of its own (:func:`~wmkit.evals.isolation.run_isolated`), from a thread of
this process: a crash or a hang fails that task only, and its result is the
:class:`~wmkit.evals.isolation.EpisodeFailed`.
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from wmkit.evals.isolation import EpisodeFailed, die_with_caller, run_isolated, worker_context

__all__ = ["Isolation", "Task", "run_tasks"]


class Isolation(NamedTuple):
    """How an isolated task's worker is watched (see :func:`~wmkit.evals.isolation.run_isolated`).

    Attributes:
        label: names the episode in errors (the game file).
        heartbeat_timeout: seconds without a beat before the worker is taken to hang.
    """

    label: str
    heartbeat_timeout: float


class Task(NamedTuple):
    """One call ``fn(*args)`` to make, isolated or not.

    Attributes:
        key: the caller's name for it (an episode's plan entry), handed back with the result.
        fn: a module-level function (it must pickle, as must ``args`` and the result).
        args: its positional arguments.
        isolate: run it in a watched worker of its own (None: a plain task).
    """

    key: Hashable
    fn: Callable[..., Any]
    args: tuple
    isolate: Isolation | None = None


def _run_isolated(task: Task, preload: Sequence[str]) -> Any:
    assert task.isolate is not None
    try:
        return run_isolated(
            task.fn,
            *task.args,
            label=task.isolate.label,
            heartbeat_timeout=task.isolate.heartbeat_timeout,
            preload=preload,
        )
    except EpisodeFailed as err:
        return err


def _serial(
    tasks: Iterable[Task], preload: Sequence[str], started: Callable[[Task], None]
) -> Iterator[tuple[Task, Any]]:
    for task in tasks:
        started(task)
        if task.isolate is not None:
            yield task, _run_isolated(task, preload)
        else:
            yield task, task.fn(*task.args)


def run_tasks(
    tasks: Iterable[Task],
    *,
    workers: int = 1,
    preload: Sequence[str] = (),
    started: Callable[[Task], None] | None = None,
) -> Iterator[tuple[Task, Any]]:
    """Run ``tasks``, at most ``workers`` at once, and yield ``(task, result)`` as each ends.

    Tasks start in the order given; ``started(task)`` is called as each starts. A
    failed isolated task yields its :class:`~wmkit.evals.isolation.EpisodeFailed`.

    Args:
        tasks: what to run.
        workers: how many run at once; 1 runs plain tasks in this process, in order.
        preload: modules the worker processes import before their first task (an
            emulator's env module).
        started: called with each task as it starts (a progress bar's description).

    Raises:
        ValueError: ``workers`` is not positive.
        Exception: whatever a plain task raised; the tasks not yet started are dropped.
    """
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    started = started or (lambda task: None)
    if workers == 1:
        yield from _serial(tasks, preload, started)
        return
    pending = iter(tasks)
    running: dict[cf.Future, Task] = {}
    threads = cf.ThreadPoolExecutor(workers, thread_name_prefix="wmkit-isolated")
    pool: cf.ProcessPoolExecutor | None = None
    alive = None  # this process's end of the pipe whose closing ends the pool's workers
    finished = False
    try:
        while True:
            while len(running) < workers and (task := next(pending, None)) is not None:
                started(task)
                if task.isolate is not None:
                    future = threads.submit(_run_isolated, task, preload)
                else:
                    if pool is None:
                        ctx = worker_context(task.fn, preload)
                        caller, alive = ctx.Pipe(duplex=False)
                        pool = cf.ProcessPoolExecutor(
                            workers, mp_context=ctx, initializer=die_with_caller, initargs=(caller,)
                        )
                    future = pool.submit(task.fn, *task.args)
                running[future] = task
            if not running:
                finished = True
                return
            done, _ = cf.wait(running, return_when=cf.FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: list(running).index(f)):
                yield running.pop(future), future.result()
    finally:
        threads.shutdown(wait=finished, cancel_futures=True)
        if pool is not None:
            pool.shutdown(wait=finished, cancel_futures=True)
        if alive is not None:
            alive.close()
