"""Run an episode in a worker process, so a crash or a hang fails that episode only.

An emulator (Jericho's frotz) runs C code in the caller's process: a segfault kills the
caller, an infinite loop holds the GIL forever, and a fatal error calls ``exit()``. The
unit of isolation is the episode: :func:`run_isolated` runs ``fn(*args, **kwargs)``
in a fresh worker process and watches it; the steps inside stay in-process (a round
trip per step would cost more than the 12-200 us a step takes).

The worker proves it is alive through a shared heartbeat counter: :func:`beat` bumps
it, and the :class:`Heartbeat` wrapper calls it after every ``reset`` and ``step``. A
worker that goes ``heartbeat_timeout`` seconds without a beat is taken to hang and is
killed. The worker's stdout and stderr go to files, so an emulator's last words
("Fatal error: Story file read error") end up in the error; on success they are passed on
to the caller's stdout and stderr.

The worker dies with its caller: a caller killed with ``SIGKILL`` (no ``finally`` runs)
would otherwise leave an emulator stuck in a loop spinning forever. The worker holds the
read end of a pipe whose only write end the caller holds, which closes however the caller
dies. On Linux the kernel itself then sends the worker ``SIGKILL`` (``O_ASYNC`` with
``F_SETSIG``), which works even while the emulator's C code holds the GIL and whatever
the process tree; the worker also asks for ``SIGKILL`` when its parent dies
(``prctl(PR_SET_PDEATHSIG)``: the caller under ``spawn``; under ``forkserver`` the parent
is the fork server, which stays up while any of its children lives, hence the pipe).
Elsewhere a thread in the worker waits on that pipe and ends the worker.

    result = run_isolated(play_episode, "905.z5", 0, label="905.z5", heartbeat_timeout=60)

``fn``, its arguments and its result must pickle (a module-level function, or a
``functools.partial`` of one); the worker starts with ``forkserver`` where it exists
(``spawn`` elsewhere), never by forking the caller. The fork server imports ``fn``'s
module and the ``preload`` modules (an emulator's env module) once, when the first
worker starts, so each later worker is a fork that has them: a TextWorld episode's
worker starts in ~0.1 s instead of the ~2 s a fresh interpreter takes to import them.
The fork server is one per process: what the first call preloads stays for the run
(a later call's other modules are imported by its workers themselves).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import gymnasium

try:
    import fcntl
except ImportError:  # not on Windows; there the watching thread alone ends the worker
    fcntl = None  # type: ignore[assignment]

__all__ = [
    "EpisodeFailed",
    "Heartbeat",
    "beat",
    "die_with_caller",
    "run_isolated",
    "worker_context",
]

T = TypeVar("T")

_BEATS: Any = None  # the shared counter, set in a worker process only
_POLL_S = 0.02
_OUTPUT_TAIL = 4000  # characters of the worker's stdout, and of its stderr, kept in the error
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>
_ORPHANED = 70  # exit code of a worker whose caller died (nobody is left to read it)


class EpisodeFailed(RuntimeError):
    """An isolated episode crashed, hung, timed out or raised.

    Attributes:
        label: what the episode was (the game file, for Jericho).
        reason: what went wrong, in words.
        exitcode: the worker's exit code (negative: killed by that signal), or None.
        traceback: the worker's traceback when ``fn`` raised, else None.
        output: the end of what the worker wrote to stderr.
        stdout: the end of what the worker wrote to stdout.

    The message (``str(error)``, what a results row keeps) holds the reason and both
    ends of output.
    """

    def __init__(
        self,
        label: str,
        reason: str,
        *,
        exitcode: int | None = None,
        traceback: str | None = None,
        output: str = "",
        stdout: str = "",
    ) -> None:
        message = f"episode {label} failed: {reason}"
        for name, text in (("stdout", stdout), ("stderr", output)):
            if text.strip():
                message += f"\n--- worker {name} (end) ---\n{text.rstrip()}"
        super().__init__(message)
        self.label = label
        self.reason = reason
        self.exitcode = exitcode
        self.traceback = traceback
        self.output = output
        self.stdout = stdout

    def __reduce__(self) -> tuple:
        # Picklable (a sweep may ship it between processes) despite the keyword init.
        keywords = {
            "exitcode": self.exitcode,
            "traceback": self.traceback,
            "output": self.output,
            "stdout": self.stdout,
        }
        return (functools.partial(type(self), **keywords), (self.label, self.reason))


def beat() -> None:
    """Tell the watching process this worker is alive; a no-op outside a worker."""
    if _BEATS is not None:
        _BEATS.value += 1


class Heartbeat(gymnasium.Wrapper):
    """Calls :func:`beat` after every ``reset`` and ``step`` of the wrapped env.

    Outside a worker of :func:`run_isolated` it only passes calls through.
    """

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:  # noqa: D102
        out = self.env.reset(**kwargs)
        beat()
        return out

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:  # noqa: D102
        out = self.env.step(action)
        beat()
        return out


def _worker(
    fn: Callable[..., Any],
    args: tuple,
    kwargs: dict[str, Any],
    sender: Any,
    beats: Any,
    out_path: str,
    err_path: str,
    caller: Any,
) -> None:
    global _BEATS
    die_with_caller(caller)
    for stream, fd, path in ((sys.stdout, 1, out_path), (sys.stderr, 2, err_path)):
        if stream is not None:
            stream.flush()  # what was written before belongs where it was going
        log = os.open(path, os.O_WRONLY | os.O_APPEND)
        os.dup2(log, fd)  # C code writes to fds 1 and 2 directly: redirect the descriptors
        os.close(log)
        if stream is not None and hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)  # a crash keeps every printed line
    _BEATS = beats
    beat()
    try:
        message: tuple = ("ok", fn(*args, **kwargs))
    except BaseException as error:
        message = ("error", f"{type(error).__name__}: {error}", traceback.format_exc())
    try:
        sender.send(message)
    except Exception as error:  # the result or the exception does not pickle
        sender.send(("error", f"cannot send the result back: {error!r}", traceback.format_exc()))
    finally:
        sys.stdout.flush()
        sys.stderr.flush()


def die_with_caller(caller: Any) -> None:
    """End this worker when the process that runs it dies, even by ``SIGKILL``.

    ``caller`` is the read end of a pipe whose only write end the caller holds: it
    closes when the caller exits, however it exits. Each step is best effort; the
    thread started last works everywhere, unless C code holds the GIL.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if hasattr(fcntl, "F_SETSIG"):  # Linux: the pipe's hang-up sends this process SIGKILL
        fd = caller.fileno()
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
            fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGKILL)
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
    # A caller that died before all that was in place sent no signal: the pipe tells.
    if caller.poll(0):
        os._exit(_ORPHANED)
    threading.Thread(target=_await_caller_exit, args=(caller,), daemon=True).start()


def _await_caller_exit(caller: Any) -> None:
    # The caller never writes: recv returns only at end of file, when it is gone.
    with contextlib.suppress(EOFError, OSError):
        caller.recv_bytes()
    os._exit(_ORPHANED)  # no cleanup: the main thread may be stuck in the emulator


def _describe_exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"crashed: the worker was killed by {name}"
    return f"crashed: the worker exited with code {code} before returning a result"


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - _OUTPUT_TAIL))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _preloads(fn: Callable[..., Any]) -> list[str]:
    """The modules of ``fn``'s package this process has imported, and ``fn``'s own.

    Each worker re-runs the caller's main script before ``fn`` (multiprocessing does, to
    find ``fn``): with what that script imports of the package already imported in the
    fork server (``wmkit-eval``: the pipeline and torch, ~1.5 s), it costs nothing.
    """
    module = getattr(getattr(fn, "func", fn), "__module__", None) or "__main__"
    package = module.split(".")[0]
    if package == "__main__":
        return []
    return [*sorted(n for n in list(sys.modules) if n.split(".")[0] == package), module]


def _default_start_method() -> str:
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def worker_context(
    fn: Callable[..., Any], preload: Sequence[str] = (), start_method: str | None = None
) -> Any:
    """The multiprocessing context workers of ``fn`` start in (see the module doc).

    ``forkserver`` where it exists (``spawn`` elsewhere), never a fork of the caller; the
    fork server imports ``fn``'s package and the ``preload`` modules before its first
    worker (no effect once this process's fork server runs).

    Raises:
        ValueError: the start method would fork the caller.
    """
    method = start_method or _default_start_method()
    if method not in ("forkserver", "spawn"):
        raise ValueError(f"start_method must be 'forkserver' or 'spawn', got {method!r}")
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["__main__", *_preloads(fn), *preload])
    return ctx


def run_isolated(
    fn: Callable[..., T],
    /,
    *args: Any,
    label: str | None = None,
    heartbeat_timeout: float = 120.0,
    total_timeout: float | None = None,
    start_timeout: float = 120.0,
    start_method: str | None = None,
    preload: Sequence[str] = (),
    **kwargs: Any,
) -> T:
    """Run ``fn(*args, **kwargs)`` in a watched worker process and return its result.

    Args:
        fn: a picklable callable (module-level function or a partial of one).
        *args: its positional arguments (picklable).
        label: names the episode in errors; default: ``kwargs["game"]`` if given,
            else the function's name. Pass the game file.
        heartbeat_timeout: seconds without a :func:`beat` after which the worker is
            taken to hang and killed. It must exceed the slowest single step (or
            whatever ``fn`` does between beats).
        total_timeout: seconds after which the worker is killed anyway; None: no limit.
        start_timeout: seconds the worker may take to start (a fresh interpreter
            importing ``fn``'s module) before its first beat.
        start_method: ``"forkserver"`` or ``"spawn"``; default forkserver where it exists.
        preload: modules the fork server imports, with ``fn``'s, before its first worker
            (forkserver only; see the module doc).
        **kwargs: keyword arguments of ``fn`` (picklable).

    Returns:
        What ``fn`` returned.

    Raises:
        EpisodeFailed: the worker crashed (signal or exit code), hung, ran past
            ``total_timeout``, or ``fn`` raised; the reason says which.
        TypeError: ``fn`` is not callable.
        ValueError: a timeout is not positive, or the start method would fork the caller.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not heartbeat_timeout > 0:
        raise ValueError(f"heartbeat_timeout must be > 0 seconds, got {heartbeat_timeout}")
    if total_timeout is not None and not total_timeout > 0:
        raise ValueError(f"total_timeout must be > 0 seconds or None, got {total_timeout}")
    if not start_timeout > 0:
        raise ValueError(f"start_timeout must be > 0 seconds, got {start_timeout}")
    ctx = worker_context(fn, preload, start_method)
    if label is None:
        label = str(kwargs["game"]) if "game" in kwargs else getattr(fn, "__qualname__", repr(fn))

    beats = ctx.Value("Q", 0, lock=False)
    receiver, sender = ctx.Pipe(duplex=False)
    caller, alive = ctx.Pipe(duplex=False)  # the worker holds `caller`; this process `alive`
    paths = []
    for stream in ("stdout", "stderr"):
        fd, path = tempfile.mkstemp(prefix=f"wmkit-worker-{stream}-", suffix=".log")
        os.close(fd)
        paths.append(path)
    out_path, err_path = paths
    process = ctx.Process(
        target=_worker, args=(fn, args, kwargs, sender, beats, out_path, err_path, caller)
    )  # not a daemon, so that fn may start processes of its own; killed below if alive
    try:
        process.start()
        sender.close()
        caller.close()
        message = _watch(process, receiver, beats, heartbeat_timeout, total_timeout, start_timeout)
        process.join(5.0)  # it returned a result; a worker stuck in its exit is not our error
        output, stdout = _tail(err_path), _tail(out_path)
        if isinstance(message, str):
            raise EpisodeFailed(
                label, message, exitcode=process.exitcode, output=output, stdout=stdout
            )
        if message[0] == "ok":
            _pass_on(out_path, sys.stdout)
            if output:
                sys.stderr.write(output)
            return message[1]
        raise EpisodeFailed(
            label,
            f"raised {message[1]}",
            exitcode=process.exitcode,
            traceback=message[2],
            output=output,
            stdout=stdout,
        )
    finally:
        if process.is_alive():
            process.kill()
            process.join()
        for connection in (receiver, sender, caller, alive):
            connection.close()
        for path in paths:
            os.unlink(path)


def _pass_on(path: str, stream: Any) -> None:
    """Copy what the worker wrote to ``path`` onto ``stream`` (the caller's stdout)."""
    if stream is None or not os.path.getsize(path):
        return
    with open(path, encoding="utf-8", errors="replace") as f:
        shutil.copyfileobj(f, stream)
    stream.flush()


def _watch(
    process: Any,
    receiver: Any,
    beats: Any,
    heartbeat_timeout: float,
    total_timeout: float | None,
    start_timeout: float,
) -> tuple | str:
    """Wait for the worker's message; return it, or the reason it never came."""
    start = last_change = time.monotonic()
    last = beats.value
    while True:
        if receiver.poll(_POLL_S):
            try:
                return receiver.recv()
            except (EOFError, OSError):  # died while sending, or closed without a word
                process.join(5.0)
                return _describe_exit(process.exitcode)
        if not process.is_alive():
            if receiver.poll(0):  # it sent its message just before exiting
                continue
            process.join()
            return _describe_exit(process.exitcode)
        now, count = time.monotonic(), beats.value
        if count != last:
            last, last_change = count, now
        elif count == 0 and now - start > start_timeout:
            process.kill()
            return f"did not start within {start_timeout:g} s; the worker was killed"
        elif count and now - last_change > heartbeat_timeout:
            process.kill()
            return (
                f"hung: no heartbeat for {heartbeat_timeout:g} s after {count} beats; "
                "the worker was killed"
            )
        if total_timeout is not None and now - start > total_timeout:
            process.kill()
            return f"timed out after {total_timeout:g} s ({count} beats); the worker was killed"
