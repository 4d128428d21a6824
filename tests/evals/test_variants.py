"""Merged sweeps: rows labelled only by the overrides that differ and act on them."""

import csv

import pytest
from report_rows import row, write_records

from wmkit.evals.cells import cells
from wmkit.evals.leaderboard import main
from wmkit.evals.results import ResultsFile
from wmkit.evals.variants import Labeller, override_key, split_overrides, touches


def test_overrides_split_at_top_level_commas_only():
    variant = "agents=[window,memory],agents.window.tracker.k=2,x={a: 1, b: [2,3]},y='p,q'"
    assert split_overrides(variant) == [
        "agents=[window,memory]", "agents.window.tracker.k=2", "x={a: 1, b: [2,3]}", "y='p,q'",
    ]  # fmt: skip
    assert split_overrides("") == []
    for broken in ("agents=[a,b", "x=a]", "y='open"):
        with pytest.raises(ValueError, match="variant"):
            split_overrides(broken)


def test_which_rows_an_override_acts_on():
    assert override_key("+agents.window.k=3") == "agents.window.k"
    assert override_key("~env@envs.textworld") == "envs.textworld"
    assert override_key("agent@agents.mine=window") == "agents.mine"
    assert touches("agents.window.tracker.k", "parcel", "window")
    assert not touches("agents.window.tracker.k", "parcel", "memory")
    assert touches("envs.booking.kwargs.expiry_notice", "booking", "memory")
    assert not touches("envs.booking.kwargs.expiry_notice", "parcel", "memory")
    for selection in ("agents", "seeds", "horizons", "hydra.launcher.n_jobs"):
        assert not touches(selection, "parcel", "window"), selection
    assert touches("experiment", "parcel", "memory")  # could change anything


def _sweep(k_values=(2, 20), seeds=(0, 1)):
    """Two jobs of a sweep over window's k: memory's rows are alike in both."""
    out = []
    for k in k_values:
        variant = f"experiment=debug,agents=[window,memory],agents.window.tracker.k={k}"
        for seed in seeds:
            out.append(row("parcel", 20, "window", seed, variant=variant, spec=f"w{k}"))
            out.append(row("parcel", 20, "memory", seed, variant=variant, spec="m"))
    return out


def test_a_sweep_labels_only_what_it_changed_and_merges_the_rest():
    groups = {c.agent: c for c in cells(_sweep())}
    assert sorted(groups) == ["memory", "window (tracker.k=2)", "window (tracker.k=20)"]
    memory = groups["memory"]
    assert memory.variant == "" and [r["seed"] for r in memory.rows] == [0, 1]  # not 0,0,1,1
    assert groups["window (tracker.k=2)"].variant == "tracker.k=2"
    assert groups["window (tracker.k=2)"].base_agent == "window"


def test_rows_whose_settings_differ_never_merge():
    rows = _sweep()
    for r in rows:  # memory ran differently in one job, though no override says so
        if r["agent"] == "memory" and r["variant"].endswith("k=20"):
            r["spec"] = "m2"
    labels = sorted(c.agent for c in cells(rows))
    assert labels == [
        "memory (spec=m)", "memory (spec=m2)", "window (tracker.k=2)", "window (tracker.k=20)",
    ]  # fmt: skip


def test_a_job_on_the_defaults_is_labelled_so():
    rows = [row("parcel", 20, "window", 0, variant="", spec="a")]
    rows.append(row("parcel", 20, "window", 0, variant="agents.window.tracker.k=5", spec="b"))
    rows.append(row("parcel", 20, "memory", 0, variant="", spec="m"))
    labeller = Labeller(rows)
    assert [labeller.label(r) for r in rows] == [
        "window (defaults)", "window (tracker.k=5)", "memory",
    ]  # fmt: skip
    # One run, no variants: plain agent names.
    assert Labeller([row("parcel", 20, "window", 0)]).label(rows[0]) == "window"


def test_a_finished_try_wins_over_a_failed_one_of_the_same_seed():
    done = row("parcel", 20, "window", 0)
    failed = {**done, "failed": "hung"}
    for ordered in ([failed, done], [done, failed]):
        (cell,) = cells(ordered)
        assert len(cell.rows) == 1 and "failed" not in cell.rows[0]


def test_merging_a_sweep_folder_writes_the_reports_with_links_into_each_job(tmp_path, capsys):
    by_job = {}
    for r in _sweep():
        by_job.setdefault(r["variant"], []).append(r)
    for i, job_rows in enumerate(by_job.values()):
        job = tmp_path / "sweep" / str(i)
        ResultsFile(job / "results.jsonl").extend(job_rows)
        write_records(job, job_rows)
    main([str(tmp_path / "sweep")])
    printed = capsys.readouterr().out
    assert "8 episodes from 2 files" in printed and "leaderboard.html" in printed
    board = (tmp_path / "sweep" / "leaderboard.md").read_text()
    assert "| 20 | window (tracker.k=2) ‡ |" in board and "| 20 | memory ‡ |" in board
    assert "agents=[" not in board and "experiment=debug" not in board
    with (tmp_path / "sweep" / "leaderboard.csv").open(newline="") as f:
        labels = sorted(r["agent"] for r in csv.DictReader(f))
    assert labels == ["memory", "window (tracker.k=2)", "window (tracker.k=20)"]
    page = (tmp_path / "sweep" / "leaderboard.html").read_text()
    assert 'href="0/records/parcel__h20__window__s0.jsonl.gz"' in page
    assert 'href="1/records/parcel__h20__window__s1.jsonl.gz"' in page
