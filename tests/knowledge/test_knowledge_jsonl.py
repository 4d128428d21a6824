"""The append-only JSONL log on real files, with a real writer killed mid-write."""

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest

from wmkit.evals.results import ResultsFile
from wmkit.evals.results import TornLineWarning as ResultsTornLineWarning
from wmkit.jsonl import CorruptLineWarning, JsonlLog, TornLineWarning


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
        closed = data[: data.rfind(b"}\n") + 2]  # up to the end of the last whole batch
        assert len(rows) == closed.count(b"\n")  # every line of a whole batch is a row
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


# --- salvage: corruption in the middle ---------------------------------------------------------


def _damaged_file(path: Path) -> None:
    log = JsonlLog(path)
    log.extend([{"i": 0}, {"i": 1}])
    with path.open("ab") as fh:
        fh.write(b'{"i": "half a row\n')  # line 3: edited or damaged, not cut short
    log.extend([{"i": 2}, {"i": 3}, {"i": 4}])
    with path.open("ab") as fh:
        fh.write(b"\xff\xfe binary junk " + b"z" * 100 + b"\n")  # line 7
        fh.write(b"[1, 2]\n")  # line 8: JSON, but not an object
    log.append({"i": 5})


def test_strict_read_refuses_a_corrupt_middle_line_and_names_the_salvage_read(tmp_path):
    path = tmp_path / "log.jsonl"
    _damaged_file(path)
    with pytest.raises(ValueError, match=r"line 3 is not valid JSON") as err:
        list(JsonlLog(path).rows())
    message = str(err.value)
    assert str(path) in message and '\'{"i": "half a row\'' in message
    assert ".salvage()" in message and "rows(salvage=True)" in message


def test_salvage_keeps_every_later_row_and_reports_each_corrupt_line(tmp_path):
    path = tmp_path / "log.jsonl"
    _damaged_file(path)
    before = path.read_bytes()
    got = JsonlLog(path).salvage()
    assert [r["i"] for r in got.rows] == [0, 1, 2, 3, 4, 5]
    assert [(d.line, d.count, d.torn) for d in got.damaged] == [
        (3, 1, False),
        (7, 1, False),
        (8, 1, False),
    ]
    assert all(d.path == path for d in got.damaged)
    assert "not valid JSON" in got.damaged[0].problem
    assert got.damaged[1].excerpt.startswith("'\\\\xff\\\\xfe binary junk zz") and got.damaged[
        1
    ].excerpt.endswith("...")
    assert "not a JSON object (got list)" in str(got.damaged[2])
    assert str(got.damaged[2]).startswith(f"{path}: line 8 ")
    with pytest.warns(CorruptLineWarning) as caught:
        assert [r["i"] for r in JsonlLog(path).rows(salvage=True)] == [0, 1, 2, 3, 4, 5]
    assert [str(w.message).split(" is not")[0] for w in caught] == [
        f"{path}: line {n}" for n in (3, 7, 8)
    ]
    assert path.read_bytes() == before  # a salvage read changes nothing


def test_salvage_reports_a_torn_end_after_the_corrupt_lines(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_bytes(b'{"i": 0}\nnot json\n{"i": 1}\n{"i": 2, "x')
    got = JsonlLog(path).salvage()
    assert [r["i"] for r in got.rows] == [0, 1]
    assert [(d.line, d.torn) for d in got.damaged] == [(2, False), (4, True)]
    assert got.damaged[1].size == 11 and "is torn" in got.damaged[1].problem


# --- batches: whole or not at all --------------------------------------------------------------


def _encoded_batch(tmp_path: Path, rows: list[dict]) -> bytes:
    scratch = tmp_path / "scratch.jsonl"
    JsonlLog(scratch).extend(rows)
    data = scratch.read_bytes()
    scratch.unlink()
    return data


def _cut_points(batch: bytes) -> dict[str, int]:
    ends = [i + 1 for i, byte in enumerate(batch) if byte == ord("\n")]
    return {
        "inside the first line": ends[0] // 2,
        "after the first line": ends[0],
        "after the first line's tab": ends[0] - 1,
        "after the second line": ends[1],
        "inside the last line": (ends[1] + ends[2]) // 2,
    }


@pytest.mark.parametrize("where", list(_cut_points(b"a\nb\nc\n")))
def test_a_batch_cut_short_anywhere_is_skipped_whole_and_cut_before_the_next(tmp_path, where):
    path = tmp_path / "log.jsonl"
    log = JsonlLog(path)
    log.extend([{"i": 0}, {"i": 1}])
    kept = path.read_bytes()
    batch = _encoded_batch(tmp_path, [{"i": 2}, {"i": 3}, {"i": 4, "pad": "x" * 50}])
    assert batch.count(b"\t\n") == 2  # "more to come" on every line but the last
    with path.open("ab") as fh:
        fh.write(batch[: _cut_points(batch)[where]])  # what a killed writer left
    left = path.stat().st_size - len(kept)
    with pytest.warns(TornLineWarning, match=r"line.? 3.* skipped \d+ bytes"):
        assert [r["i"] for r in log.rows()] == [0, 1]
    got = log.salvage()
    assert [r["i"] for r in got.rows] == [0, 1] and [d.torn for d in got.damaged] == [True]
    with pytest.warns(TornLineWarning, match=r"dropped (a torn last line|an unfinished batch)"):
        assert log.repair() == left
    assert path.read_bytes() == kept
    log.extend([{"i": 2}, {"i": 3}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["i"] for r in log.rows()] == [0, 1, 2, 3]


def test_a_batch_whose_closing_line_lost_only_its_newline_is_kept(tmp_path):
    path = tmp_path / "log.jsonl"
    batch = _encoded_batch(tmp_path, [{"i": 0}, {"i": 1}, {"i": 2}])
    path.write_bytes(batch[:-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["i"] for r in JsonlLog(path).rows()] == [0, 1, 2]
        assert JsonlLog(path).repair() == 0
    assert path.read_bytes() == batch


def test_batch_lines_are_plain_json_lines(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl")
    log.extend([{"i": 0, "tab": "a\tb"}, {"i": 1}])
    lines = log.path.read_text().splitlines()
    assert [json.loads(line)["i"] for line in lines] == [0, 1]  # any JSON Lines reader
    assert lines[0].endswith("}\t") and "a\\tb" in lines[0]  # a tab in a string is escaped


def test_repairing_an_unfinished_batch_reads_the_batch_not_the_file(tmp_path):
    log = JsonlLog(tmp_path / "log.jsonl")
    log.extend({"i": i, "pad": "x" * 1000} for i in range(10_000))  # ~10 MB, one batch
    kept = log.path.stat().st_size
    batch = _encoded_batch(tmp_path, [{"i": i} for i in range(1000)])  # ~10 KB
    with log.path.open("ab") as fh:
        fh.write(b"".join(batch.splitlines(keepends=True)[:500]))  # 500 lines of 1000
    start = _bytes_read()
    with pytest.warns(TornLineWarning, match="an unfinished batch of 500 lines"):
        log.repair()
    assert _bytes_read() - start < 3 * 65536
    assert log.path.stat().st_size == kept


_BATCH_WRITER = """
import random, sys, warnings
from wmkit.jsonl import JsonlLog
warnings.simplefilter("ignore")  # the repair of the previous writer's batch
log = JsonlLog(sys.argv[1])
run, pad = sys.argv[2], "x" * int(sys.argv[3])
rng = random.Random(run)
print("ready", flush=True)
batch = 0
while True:
    size = rng.randint(2, 32)
    log.extend({"run": run, "batch": batch, "size": size, "i": i, "pad": pad} for i in range(size))
    batch += 1
"""


def test_batches_are_whole_after_30_sigkills_at_random_moments(tmp_path):
    """Each kill lands at a random moment as a batch starts landing in the file.

    At least 30 kills, and more (up to 150) until 5 of them cut a batch short, so that
    a loaded machine cannot make the test pass by missing every write. Measured against
    the previous code (one buffered write per batch, no batch marker): 25 of 30 kills
    left a partial batch that later reads returned.
    """
    path, rng = tmp_path / "log.jsonl", random.Random(16)
    kills = unfinished = 0
    while kills < 30 or (unfinished < 5 and kills < 150):
        proc = subprocess.Popen(
            [sys.executable, "-c", _BATCH_WRITER, str(path), f"r{kills}", str(16 << 10)],
            stdout=subprocess.PIPE,
        )
        try:
            assert proc.stdout.readline().strip() == b"ready"
            time.sleep(rng.uniform(0.005, 0.04))
            base, deadline = _size(path), time.monotonic() + 2
            while _size(path) == base and time.monotonic() < deadline:
                pass  # kill it while (or just after) its next batch lands
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        kills += 1
        with path.open("rb") as fh:
            fh.seek(-2, os.SEEK_END)
            unfinished += fh.read() != b"}\n"  # cut short: torn, or a batch left open
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        rows = list(JsonlLog(path).rows())
    batches: dict[tuple[str, int], list[dict]] = {}
    for row in rows:
        batches.setdefault((row["run"], row["batch"]), []).append(row)
    partial = [key for key, got in batches.items() if len(got) != got[0]["size"]]
    assert not partial, f"{len(partial)} partial batches of {len(batches)}: {partial[:5]}"
    assert all([r["i"] for r in got] == list(range(len(got))) for got in batches.values())
    for run in range(kills):  # every batch of a run up to the one it was killed in
        ids = sorted(b for r, b in batches if r == f"r{run}")
        assert ids == list(range(len(ids)))
    assert unfinished >= 5, f"only {unfinished} of {kills} kills landed mid-batch"
    print(f"{kills} kills, {unfinished} left an unfinished batch, {len(batches)} batches whole")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        JsonlLog(path).append({"run": "final", "batch": 0, "size": 1, "i": 0})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(JsonlLog(path).rows())[-1]["run"] == "final"


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
