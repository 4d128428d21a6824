"""Episodes in worker processes: the same rows as in-process, failures isolated, resume retries."""

import io
import json
import os

import pytest
from rich.console import Console
from small_suite import small_config

from wmkit.evals.isolation import EpisodeFailed
from wmkit.evals.records import record_path
from wmkit.evals.results import ResultsFile, episode_key
from wmkit.evals.suite import EnvSpec, run_suite
from wmkit.evals.workers import Isolation, Task, run_tasks


def _pid(_: int) -> int:
    return os.getpid()


def _square(x: int) -> int:
    return x * x


def _raise(message: str) -> None:
    raise KeyError(message)


def _rows(path):
    """The rows by episode, their wall time left out (the one thing two runs differ in)."""
    rows = ResultsFile(path / "results.jsonl").rows()
    return {episode_key(r): {k: v for k, v in r.items() if k != "seconds"} for r in rows}


def test_two_workers_give_the_rows_of_one_in_another_order(tmp_path):
    config = small_config("[window,random]", ["parcel", "smarthome"], horizons=[20], seeds=[0, 1])
    run_suite(config, tmp_path / "one")
    run_suite(config.model_copy(update={"workers": 2, "records": True}), tmp_path / "two")
    one, two = _rows(tmp_path / "one"), _rows(tmp_path / "two")
    assert len(one) == 2 * 2 * 2 and one == two  # envs x seeds x agents, row for row
    records = sorted(p.name for p in (tmp_path / "two" / "records").iterdir())
    assert len(records) == len(two)  # every row's record, written by the parent


def test_run_tasks_runs_plain_tasks_in_as_many_processes_and_yields_each_result():
    tasks = [Task(i, _square, (i,)) for i in range(6)]
    started = []
    results = dict(
        (task.key, result) for task, result in run_tasks(tasks, workers=2, started=started.append)
    )
    assert results == {i: i * i for i in range(6)} and [t.key for t in started] == list(range(6))
    pids = {result for _, result in run_tasks([Task(i, _pid, (i,)) for i in range(6)], workers=2)}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    serial = {result for _, result in run_tasks([Task(0, _pid, (0,))], workers=1)}
    assert serial == {os.getpid()}  # workers=1: in this process


def test_a_failed_isolated_task_is_its_result_and_a_plain_error_is_raised():
    tasks = [
        Task("ok", _square, (3,), Isolation("square", 30.0)),
        Task("bad", _raise, ("no such game",), Isolation("bad.z5", 30.0)),
    ]
    for workers in (1, 2):
        results = {task.key: result for task, result in run_tasks(tasks, workers=workers)}
        assert results["ok"] == 9
        assert isinstance(results["bad"], EpisodeFailed) and "no such game" in str(results["bad"])
        with pytest.raises(KeyError, match="plain"):
            list(run_tasks([Task(0, _square, (2,)), Task(1, _raise, ("plain",))], workers=workers))
    with pytest.raises(ValueError, match="workers must be >= 1"):
        list(run_tasks(tasks, workers=0))


def _failing_parcel(config, key):
    """Parcel, isolated, with a constructor argument it refuses: every episode fails."""
    spec = config.envs["parcel"].model_dump()
    spec |= {"isolate": True, "kwargs": {**spec["kwargs"], key: 1}}
    return config.model_copy(update={"envs": {"parcel": EnvSpec.model_validate(spec)}})


def test_failed_episodes_keep_the_brackets_of_their_message_on_the_console(tmp_path):
    config = small_config("[window]", ["parcel"], horizons=[20], seeds=[0])
    config = _failing_parcel(config, "x[jericho]")
    out = io.StringIO()
    run_suite(config, tmp_path, console=Console(file=out, width=400))
    (row,) = _rows(tmp_path).values()
    assert "x[jericho]" in row["failed"]
    assert "'x[jericho]'" in out.getvalue()  # rich would have swallowed [jericho] as markup


def test_resume_retries_failed_episodes_and_replaces_their_rows(tmp_path):
    config = small_config("[window]", ["parcel"], horizons=[20], seeds=[0, 1], records=True)
    run_suite(config, tmp_path)
    good = _rows(tmp_path)
    results = tmp_path / "results.jsonl"
    lines = results.read_text().splitlines()
    failed = json.loads(lines[1])  # as a crashed episode's row is written: identity + failed
    identity = {k: failed[k] for k in ("env", "env_id", "horizon", "seed", "agent", "oracle",
                                       "privileged", "variant", "spec")}  # fmt: skip
    lines[1] = json.dumps({"failed": "crashed: the worker was killed by SIGSEGV"} | identity)
    results.write_text("\n".join(lines) + "\n")
    record = record_path(tmp_path, "parcel", 20, "window", failed["seed"])
    record.unlink()  # a failed episode has no record
    kept = small_config("[window]", ["parcel"], horizons=[20], seeds=[0, 1], retry_failed=False)
    run_suite(kept, tmp_path)
    assert results.read_text().splitlines()[1] == lines[1]  # told not to: kept, not played
    out = io.StringIO()
    run_suite(config, tmp_path, console=Console(file=out, width=200))
    assert "retrying 1 failed episodes" in out.getvalue()
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert len(rows) == 2 and not any("failed" in r for r in rows)  # replaced, not added
    assert _rows(tmp_path) == good and record.exists()
