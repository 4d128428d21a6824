"""scripts/bench_eval.py smoke-run with a tiny budget: both bootstraps, the same intervals."""

from wmkit.evals.results import ResultsFile
from wmkit.scripts.bench_eval import main, synthetic_rows


def test_the_leaderboard_part_times_both_bootstraps_and_finds_them_identical(tmp_path, capsys):
    results = ResultsFile(tmp_path / "results.jsonl")
    results.extend(r for r in synthetic_rows((20,), seeds=2) if r["env"] in ("parcel", "textworld"))
    main(["--part", "leaderboard", "--results", str(results.path), "--reps", "20"])
    out = capsys.readouterr().out
    assert "leaderboard step: 26 episodes, 13 cells" in out
    assert "loop bootstrap (before)" in out and "vectorised (after)" in out
    assert "ratio before/after: summarise" in out
    assert "intervals identical: yes" in out
