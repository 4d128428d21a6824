"""The append-only JSONL log on real files, with a real writer killed mid-write."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from wmkit.evals.results import ResultsFile
from wmkit.evals.results import TornLineWarning as ResultsTornLineWarning
from wmkit.jsonl import JsonlLog, TornLineWarning


def _rows_quietly(log):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        return list(log.rows())


def test_a_batch_is_appended_in_order_and_counted(tmp_path):
    log = JsonlLog(tmp_path / "deep" / "er" / "log.jsonl")
    assert list(log.rows()) == []
    assert log.extend([]) == 0
    assert not log.path.exists()
    assert log.extend({"i": i, "text": "line\nbreak"} for i in range(3)) == 3
    log.append({"i": 3})
    assert [r["i"] for r in log.rows()] == [0, 1, 2, 3]
    assert log.path.read_bytes().count(b"\n") == 4  # newlines inside strings are escaped
    assert next(log.rows())["text"] == "line\nbreak"


def test_a_batch_with_a_bad_row_writes_nothing(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl")
    log.append({"i": 0})
    before = log.path.read_bytes()
    with pytest.raises(TypeError, match="not JSON serializable"):
        log.extend([{"i": 1}, {"i": object()}])
    with pytest.raises(TypeError, match="must be a mapping"):
        log.extend([{"i": 1}, ["not", "a", "mapping"]])
    assert log.path.read_bytes() == before


def test_torn_tail_is_reported_on_read_and_cut_before_the_next_batch(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl")
    log.extend([{"i": 0}, {"i": 1}])
    with log.path.open("ab") as fh:
        fh.write(b'{"i": 2, "pad": "xx')  # the writer died here
    with pytest.warns(TornLineWarning, match=r"line 3 is torn .* skipped 19 bytes"):
        assert [r["i"] for r in log.rows()] == [0, 1]
    with pytest.warns(TornLineWarning, match="dropped a torn last line .19 bytes at byte offset"):
        log.extend([{"i": 2}, {"i": 3}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # clean now: no warning at all
        assert [r["i"] for r in log.rows()] == [0, 1, 2, 3]


def test_a_whole_object_missing_only_its_newline_is_kept(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl")
    log.path.write_bytes(b'{"i": 0}\n{"i": 1}')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["i"] for r in log.rows()] == [0, 1]
        assert log.repair() == 0
    assert log.path.read_bytes() == b'{"i": 0}\n{"i": 1}\n'


def test_a_file_that_is_only_a_torn_line_is_emptied(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl")
    log.path.write_bytes(b'{"i": 0, "x"')
    with pytest.warns(TornLineWarning):
        assert log.repair() == 12
    assert log.path.read_bytes() == b""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"i": 0}\nnot json\n{"i": 2}\n', r"line 2 is not valid JSON"),
        (b'{"i": 0}\n\n[1, 2]\n{"i": 3}\n', r"line 3 is not a JSON object \(got list\)"),
        (b'{"i": 0}\n{"i": "\xff"}\n', r"line 2 is not valid JSON"),
    ],
)
def test_corruption_in_the_middle_is_an_error_naming_file_and_line(tmp_path, content, message):
    path = tmp_path / "log.jsonl"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message) as err:
        list(JsonlLog(path).rows())
    assert str(path) in str(err.value)


def _bytes_read() -> int:
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="needs Linux /proc/self/io")
def test_repair_before_a_batch_reads_the_tail_not_the_file(tmp_path):
    """The bytes read by this process, as the kernel counts them: O(1), not O(file)."""
    log = JsonlLog(tmp_path / "log.jsonl")
    pad = "x" * 1000
    log.extend({"i": i, "pad": pad} for i in range(20_000))  # ~20 MB
    size = log.path.stat().st_size
    start = _bytes_read()
    log.extend([{"i": "clean"}])
    clean = _bytes_read() - start
    with log.path.open("ab") as fh:
        fh.write(b'{"i": "torn", "pad": "' + b"y" * 5000)
    start = _bytes_read()
    with pytest.warns(TornLineWarning):
        log.extend([{"i": "after"}])
    torn = _bytes_read() - start
    assert clean < 1024, clean  # the last byte, plus reading /proc/self/io itself
    assert torn < 3 * 65536, torn  # the chunks scanned back to the torn line's start
    assert size > 100 * torn
    rows = list(log.rows())
    assert len(rows) == 20_002 and rows[-1]["i"] == "after" and rows[-2]["i"] == "clean"


_WRITER = """
import sys
from wmkit.jsonl import JsonlLog
log = JsonlLog(sys.argv[1])
run, pad = sys.argv[2], "x" * (int(sys.argv[3]) << 20)
log.extend([{"run": run, "i": 0}])
print("ready", flush=True)
i = 1
while True:
    log.extend([{"run": run, "i": i, "pad": pad}, {"run": run, "i": i + 1}])
    i += 2
"""


def _kill_mid_write(path: Path, run: str, megabytes: int) -> None:
    """Start a writer, wait until its next batch starts landing, SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_WRITER), str(path), run, str(megabytes)],
        stdout=subprocess.PIPE,
    )
    try:
        assert proc.stdout.readline().strip() == b"ready"
        base = path.stat().st_size
        while path.stat().st_size == base and proc.poll() is None:
            pass
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


def test_sigkill_mid_write_loses_no_complete_row_and_the_next_run_appends_cleanly(tmp_path):
    path = tmp_path / "log.jsonl"
    torn_seen = 0
    for run in range(3):
        # A batch of tens of MB takes milliseconds to copy in: the kill lands inside it.
        _kill_mid_write(path, f"r{run}", 24)
        data = path.read_bytes()
        torn_seen += not data.endswith(b"\n")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = list(JsonlLog(path).rows())
        if not data.endswith(b"\n"):
            assert any("is torn" in str(w.message) for w in caught)
        assert len(rows) == data.count(b"\n")  # every complete line is a row
        mine = [r["i"] for r in rows if r["run"] == f"r{run}"]
        assert mine == list(range(len(mine))) and mine  # in order, nothing missing
        assert all(len(r["pad"]) == 24 << 20 for r in rows if "pad" in r)
    assert torn_seen >= 1, "no kill landed mid-write in 3 tries"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        JsonlLog(path).append({"run": "final", "i": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows = list(JsonlLog(path).rows())
    assert [r["run"] for r in rows if r["i"] == 0] == ["r0", "r1", "r2", "final"]
    assert json.loads(path.read_bytes().splitlines()[-1]) == {"run": "final", "i": 0}


def test_results_file_is_the_same_log_and_keeps_its_names():
    assert issubclass(ResultsFile, JsonlLog)
    assert ResultsTornLineWarning is TornLineWarning
