import json
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest

from wmkit.evals.results import ResultsFile, TornLineWarning


def test_torn_last_line_is_reported_skipped_and_appended_after(tmp_path):
    results = ResultsFile(tmp_path / "results.jsonl")
    results.append({"i": 1})
    results.append({"i": 2})
    with results.path.open("ab") as fh:
        fh.write(b'{"i": 3, "drift": [0.1, 0.')  # killed mid-write
    with pytest.warns(TornLineWarning, match="line 3 is torn"):
        assert [r["i"] for r in results.rows()] == [1, 2]
    results.append({"i": 4})
    assert [r["i"] for r in results.rows()] == [1, 2, 4]


def test_corruption_in_the_middle_is_an_error_naming_the_line(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"i": 1}\nnot json\n{"i": 3}\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        list(ResultsFile(path).rows())


def test_sigkill_mid_append_loses_no_complete_row(tmp_path):
    """A real writer process killed while appending: complete rows all survive."""
    path = tmp_path / "results.jsonl"
    script = textwrap.dedent(
        f"""
        import sys
        from wmkit.evals.results import ResultsFile
        results = ResultsFile({str(path)!r})
        i = 0
        while True:
            results.append({{"i": i, "pad": "x" * 20000}})
            i += 1
            if i == 20:
                print("ready", flush=True)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"ready"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TornLineWarning)
        rows = list(ResultsFile(path).rows())
    assert len(rows) >= 20
    assert [r["i"] for r in rows] == list(range(len(rows)))
    complete = path.read_bytes().count(b"\n")
    assert len(rows) == complete
    ResultsFile(path).append({"i": "after"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(ResultsFile(path).rows())[-1]["i"] == "after"
    assert json.loads(path.read_bytes().splitlines()[-1])["i"] == "after"
