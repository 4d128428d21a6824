"""Tests for wmkit.evals.isolation: results come back, crashes and hangs fail one episode."""

from __future__ import annotations

import ctypes
import math
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import gymnasium
import pytest

import wmkit.envs  # noqa: F401  (registers the ids)
from wmkit.evals import isolation
from wmkit.evals.isolation import EpisodeFailed, Heartbeat, beat, run_isolated

# Helpers run inside the worker, which imports this module by name.


def beating(beats: int, pause: float) -> int:
    for _ in range(beats):
        time.sleep(pause)
        beat()
    return beats


def beat_forever(pause: float) -> None:
    while True:
        time.sleep(pause)
        beat()


def say_and_exit(text: str, code: int) -> None:
    os.write(2, text.encode())
    os._exit(code)


def print_and_exit(text: str, code: int) -> None:
    print(text, end="")
    sys.stdout.flush()
    os._exit(code)


def parcel_beats(steps: int) -> int:
    env = Heartbeat(gymnasium.make("wmkit/Parcel-v0", horizon=20))
    env.reset(seed=0)
    for _ in range(steps):
        env.step("wait")
    return isolation._BEATS.value


def unpicklable() -> object:
    return lambda: None


def chatter(crash: bool) -> str:
    print("printed to stdout")  # Python's buffered stdout
    os.write(1, b"written to fd 1, as C code does\n")
    print("printed to stderr", file=sys.stderr)
    if crash:
        ctypes.string_at(0)
    return "done"


# --- results ---------------------------------------------------------------------------------


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_returns_the_result(start_method):
    assert run_isolated(math.factorial, 10, start_method=start_method) == 3628800
    assert run_isolated(int, "ff", base=16) == 255


def test_a_beating_worker_may_outlive_the_heartbeat_timeout():
    started = time.monotonic()
    assert run_isolated(beating, 8, 0.25, heartbeat_timeout=1.0) == 8
    assert time.monotonic() - started >= 2.0


def test_the_heartbeat_wrapper_beats_once_per_reset_and_step():
    # The worker beats once when it starts, then once per reset and per step.
    assert run_isolated(parcel_beats, 5) == 1 + 1 + 5
    env = Heartbeat(gymnasium.make("wmkit/Parcel-v0", horizon=20))
    assert isolation._BEATS is None  # outside a worker it only passes calls through
    observation, _ = env.reset(seed=0)
    assert isinstance(observation, str) and env.step("wait")[0]


# --- failures ----------------------------------------------------------------------------------


def test_an_exception_fails_the_episode_with_its_traceback():
    with pytest.raises(EpisodeFailed, match=r"episode parse failed: raised ValueError") as failed:
        run_isolated(int, "x", label="parse")
    assert failed.value.label == "parse" and "invalid literal" in failed.value.reason
    assert "Traceback" in failed.value.traceback


def test_the_error_pickles_with_its_details():
    error = EpisodeFailed("g.z5", "hung", exitcode=-9, traceback="tb", output="out")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.label, copy.reason, copy.exitcode, copy.traceback, copy.output) == (
        "g.z5",
        "hung",
        -9,
        "tb",
        "out",
    )
    assert str(copy) == str(error)


def test_a_segfault_fails_the_episode():
    with pytest.raises(EpisodeFailed, match="killed by SIGSEGV") as failed:
        run_isolated(ctypes.string_at, 0, label="null pointer")
    assert failed.value.exitcode == -11


def test_an_exit_fails_the_episode_with_the_workers_last_words():
    with pytest.raises(EpisodeFailed, match="exited with code 3") as failed:
        run_isolated(say_and_exit, "Fatal error: Story file read error\n", 3, label="g.z5")
    assert failed.value.exitcode == 3
    assert "Story file read error" in failed.value.output
    assert "Story file read error" in str(failed.value)


def test_a_crash_reports_the_end_of_the_workers_stdout_and_stderr():
    with pytest.raises(EpisodeFailed, match="killed by SIGSEGV") as failed:
        run_isolated(chatter, True, label="g.z5")
    error = failed.value
    assert "printed to stdout" in error.stdout and "written to fd 1" in error.stdout
    assert "printed to stderr" in error.output and "printed to stdout" not in error.output
    message = str(error)  # what a results row keeps
    assert message.index("--- worker stdout (end) ---") < message.index("printed to stdout")
    assert message.index("--- worker stderr (end) ---") < message.index("printed to stderr")
    copy = pickle.loads(pickle.dumps(error))
    assert copy.stdout == error.stdout and str(copy) == message


def test_a_long_stdout_keeps_its_end_in_the_error():
    with pytest.raises(EpisodeFailed) as failed:
        run_isolated(say_and_exit, "", 1)  # nothing said: no empty section
    assert "--- worker" not in str(failed.value)
    lines = "".join(f"line {i}\n" for i in range(2000))
    with pytest.raises(EpisodeFailed) as failed:
        run_isolated(print_and_exit, lines, 2)
    assert failed.value.stdout.endswith("line 1999\n") and "line 0\n" not in failed.value.stdout
    assert len(failed.value.stdout) <= isolation._OUTPUT_TAIL


def test_a_worker_that_succeeds_passes_its_output_on(capfd):
    assert run_isolated(chatter, False) == "done"
    out, err = capfd.readouterr()
    assert "printed to stdout" in out and "written to fd 1" in out
    assert "printed to stderr" in err


def test_a_hang_is_killed_after_the_heartbeat_timeout():
    started = time.monotonic()
    with pytest.raises(EpisodeFailed, match=r"hung: no heartbeat for 0\.5 s"):
        run_isolated(time.sleep, 60, heartbeat_timeout=0.5, label="sleeper")
    assert time.monotonic() - started < 30


def test_a_worker_that_never_starts_is_killed_after_the_start_timeout():
    # The heartbeat clock starts with the first beat; before it, start_timeout rules.
    # Spawn: a fresh interpreter needs far more than 10 ms to import the worker's code (a
    # fork of the fork server, which has it imported, may not).
    with pytest.raises(EpisodeFailed, match=r"did not start within 0\.01 s"):
        run_isolated(math.factorial, 3, start_timeout=0.01, start_method="spawn")


def test_the_total_timeout_stops_a_worker_that_beats_forever():
    with pytest.raises(EpisodeFailed, match=r"timed out after 1\.5 s"):
        run_isolated(beat_forever, 0.05, heartbeat_timeout=5, total_timeout=1.5)


def test_a_result_that_does_not_pickle_is_an_error():
    with pytest.raises(EpisodeFailed, match="cannot send the result back"):
        run_isolated(unpicklable)


def test_the_caller_goes_on_after_failures():
    for fn, args in ((ctypes.string_at, (0,)), (os._exit, (1,)), (int, ("x",))):
        with pytest.raises(EpisodeFailed):
            run_isolated(fn, *args)
    assert run_isolated(math.gcd, 12, 18) == 6


def test_the_label_defaults_to_the_game_keyword():
    with pytest.raises(EpisodeFailed, match=r"episode 905\.z5 failed: raised TypeError"):
        run_isolated(int, "7", game="905.z5")  # int() takes no "game"


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"heartbeat_timeout": 0}, ValueError, "heartbeat_timeout must be > 0"),
        ({"total_timeout": -1}, ValueError, "total_timeout must be > 0"),
        ({"start_timeout": 0}, ValueError, "start_timeout must be > 0"),
        ({"start_method": "fork"}, ValueError, "start_method must be"),
    ],
)
def test_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        run_isolated(math.factorial, 3, **kwargs)
    with pytest.raises(TypeError, match="fn must be callable"):
        run_isolated(3)


# --- a killed caller leaves no worker behind ---------------------------------------------------

_CALLER = """
import os, re, sys
from wmkit.evals.isolation import run_isolated

def hang(pid_file, how):
    with open(pid_file + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(pid_file + ".tmp", pid_file)
    if how == "C code holding the GIL":  # like an emulator stuck in its C loop
        re.match(r"(a*)*b", "a" * 64)  # backtracks for ~2**64 steps, never releasing the GIL
    while True:  # a Python loop
        pass

if __name__ == "__main__":
    run_isolated(hang, sys.argv[1], sys.argv[2], start_method=sys.argv[3])
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is dead: it only waits to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
@pytest.mark.parametrize("how", ["a Python loop", "C code holding the GIL"])
def test_a_hung_worker_dies_with_its_caller_killed_by_sigkill(tmp_path, start_method, how):
    script, pid_file = tmp_path / "caller.py", tmp_path / "worker.pid"
    script.write_text(textwrap.dedent(_CALLER))
    caller = subprocess.Popen([sys.executable, str(script), str(pid_file), how, start_method])
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert caller.poll() is None, f"the caller exited with {caller.returncode}"
            assert time.monotonic() < deadline, "the worker did not start within 60 s"
            time.sleep(0.02)
        worker = int(pid_file.read_text())
        time.sleep(0.3)  # into its loop
        assert _running(worker)
        os.kill(caller.pid, signal.SIGKILL)  # no finally, no atexit: the kernel ends it
        caller.wait()
        gone_by = time.monotonic() + 5
        while _running(worker) and time.monotonic() < gone_by:
            time.sleep(0.05)
        assert not _running(worker), f"worker {worker} outlived its killed caller by 5 s"
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()
        if worker is not None and _running(worker):
            os.kill(worker, signal.SIGKILL)


def test_the_fork_server_preloads_what_this_process_has_of_the_functions_package():
    # A worker re-runs the caller's main script; what that imports of the package is
    # then already in the fork server (wmkit-eval: the pipeline and torch).
    from functools import partial

    from wmkit.evals import suite

    names = isolation._preloads(suite._episode)
    assert names[-1] == "wmkit.evals.suite"
    assert {"wmkit", "wmkit.envs", "wmkit.evals.isolation", "wmkit.evals.runner"} <= set(names)
    assert all(n == "wmkit" or n.startswith("wmkit.") for n in names)
    assert isolation._preloads(partial(suite._episode, "wmkit/Parcel-v0")) == names
    main_only = type(beating)(beating.__code__, {"__name__": "__main__"})
    main_only.__module__ = "__main__"
    assert isolation._preloads(main_only) == []
