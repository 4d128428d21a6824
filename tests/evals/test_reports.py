"""The reports write_leaderboard writes: overall ranking, CSVs, plots and the HTML page."""

import csv
import io
import math
import re

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from PIL import Image
from report_rows import AGENTS, ENVS, HORIZONS, row, rows, write_records

from wmkit.evals import plots
from wmkit.evals.cells import cells
from wmkit.evals.leaderboard import (
    episode_metrics,
    improvements,
    overall,
    summarise,
    write_leaderboard,
)
from wmkit.evals.stats import aggregate
from wmkit.evals.tables import TIDY_COLUMNS

ROWS = rows()
REPS = 300  # enough for the shapes checked here, and quick


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("board")
    recorded = [r for r in ROWS if r["agent"] == "window"]  # only some episodes kept records
    write_records(out, recorded)
    return out, write_leaderboard(ROWS, out, reps=REPS)


def _csv(path):
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_episode_metrics_normalise_the_score_where_a_maximum_exists():
    m = episode_metrics(row("parcel", 20, "window", 0))
    assert m["normalised_score"] == pytest.approx(m["score"] / 10)
    assert m["breakage"] == pytest.approx(
        sum(not ok for _, ok, _ in row("parcel", 20, "window", 0)["probes"]) / 8
    )
    old = {"drift": {"mean": 0.1}, "score": 3, "probes": [], "confusion": {"event_f1": None}}
    m = episode_metrics(old)  # no max_score, no probes, null confusion: left out
    assert "normalised_score" not in m and "breakage" not in m and "confusion_event_f1" not in m
    assert "normalised_score" not in episode_metrics({**old, "max_score": 0})


def test_the_overall_aggregate_is_stratified_by_task():
    ranking = overall(ROWS, reps=REPS)
    assert [e["rank"] for e in ranking] == list(range(1, len(AGENTS) + 1))
    window = next(e for e in ranking if e["agent"] == "window")
    assert len(window["tasks"]) == len(ENVS) * len(HORIZONS) and window["episodes"] == 8
    strata = [
        [r["drift"]["mean"] for r in ROWS if (r["env"], r["horizon"], r["agent"]) == (*t, "window")]
        for t in window["tasks"]
    ]
    assert window["drift"] == aggregate(strata, reps=REPS)
    drift = [e["drift"].iqm for e in ranking]
    assert drift == sorted(drift)  # ranked by drift IQM, lowest first
    assert ranking[-1]["agent"] == "rules"


def test_probability_of_improvement_between_configurations():
    pairs = improvements(ROWS, "drift", reps=REPS)
    assert pairs[("window", "rules")].probability == 1.0  # window always drifts less
    assert pairs[("rules", "window")].probability == 0.0
    assert pairs[("oracle", "memory")].probability == 0.5  # identical: every pair ties
    assert pairs[("window", "rules")].tasks == 4
    # Tasks not in common are left out; none in common, no pair.
    only = [r for r in ROWS if r["env"] == "parcel" or r["agent"] != "rules"]
    only += [row("vault", 20, "governed", s) for s in range(2)]
    pairs = improvements(only, "drift", reps=REPS)
    assert pairs[("window", "rules")].tasks == 2
    assert ("governed", "rules") not in pairs


def test_summaries_carry_intervals_for_half_life_and_every_breakage_bin():
    (s,) = [s for s in summarise(ROWS, reps=REPS) if (s["env"], s["horizon"], s["agent"]) == (
        "parcel", 40, "rules")]  # fmt: skip
    assert s["breakage_by_chain_ci"].keys() == s["breakage_by_chain"].keys()
    for edge, interval in s["breakage_by_chain_ci"].items():
        assert interval.value == s["breakage_by_chain"][edge][0]
        assert interval.ci_low <= interval.value <= interval.ci_high
    assert s["half_life"] == s["half_life_ci"].value
    assert s["half_life_ci"].ci_low <= s["half_life"] <= s["half_life_ci"].ci_high
    assert s["normalised_score"].n == 2


def test_write_leaderboard_returns_every_report(written):
    out, paths = written
    assert set(paths) == {"markdown", "plot", "csv", "tidy", "html"}
    assert {p.name for p in paths.values()} == {
        "leaderboard.md", "leaderboard.png", "leaderboard.csv", "results_tidy.csv",
        "leaderboard.html",
    }  # fmt: skip
    assert all(p.parent == out and p.stat().st_size > 0 for p in paths.values())


def test_the_markdown_ranks_configurations_and_compares_them(written):
    board = written[1]["markdown"].read_text()
    assert "## Overall ranking" in board and "## Probability of improvement" in board
    ranking = board[board.index("## Overall ranking") :].splitlines()
    assert ranking[2].startswith("| rank | configuration | tasks | episodes | drift IQM")
    assert "| 1 | memory ‡ | 4 | 8 |" in board or "| 1 | oracle † | 4 | 8 |" in board
    assert "† reads ground truth" in ranking[2 + 2 + len(AGENTS) + 1]
    assert "half-life [95% CI]" in board and "norm. score [95% CI]" in board


def test_the_cells_csv_has_one_row_per_cell_with_marks_and_bounds(written):
    records = _csv(written[1]["csv"])
    assert len(records) == len(ENVS) * len(HORIZONS) * len(AGENTS)
    oracle = next(r for r in records if r["agent"] == "oracle")
    assert oracle["marks"] == "†" and oracle["oracle"] == "True"
    memory = next(r for r in records if r["agent"] == "memory")
    assert memory["marks"] == "‡" and memory["privileged"] == "env_parser"
    for r in records:
        low, mid, high = (float(r[f"drift_{k}"]) for k in ("ci_low", "iqm", "ci_high"))
        assert low <= mid <= high
        assert float(r["drift_mean_ci_low"]) <= float(r["drift_mean"])
        assert r["half_life"] in {"inf"} | {f"{float(e)}" for e in (0, 5, 10, 20)}
    assert "breakage_chain_0_ci_high" in records[0]


def test_the_tidy_table_has_one_row_per_episode_and_metric(written):
    records = _csv(written[1]["tidy"])
    assert tuple(records[0]) == TIDY_COLUMNS
    expected = sum(len(episode_metrics(r)) for r in ROWS)
    assert len(records) == expected
    one = [r for r in records if (r["env"], r["horizon"], r["agent"], r["seed"]) == (
        "vault", "40", "window", "1")]  # fmt: skip
    values = {r["metric"]: float(r["value"]) for r in one}
    assert values == pytest.approx(episode_metrics(row("vault", 40, "window", 1)))
    assert {r["privileged"] for r in one} == {"env_parser"}
    pandas = pytest.importorskip("pandas")
    frame = pandas.read_csv(written[1]["tidy"])
    assert len(frame) == expected and frame["value"].dtype.kind == "f"


def _draw(monkeypatch, rows_):
    drawn = []
    savefig = Figure.savefig
    monkeypatch.setattr(
        Figure, "savefig", lambda fig, *a, **k: drawn.append(fig) or savefig(fig, *a, **k)
    )
    groups = cells(rows_)
    pngs = plots.env_pngs(groups, summarise(rows_, reps=REPS))
    for fig in drawn:  # closed once saved: give each a canvas again to measure it
        FigureCanvasAgg(fig).draw()
    return drawn, pngs


def test_the_plots_draw_every_horizon_with_bands_and_keep_curves_apart(monkeypatch):
    drawn, pngs = _draw(monkeypatch, ROWS)
    assert list(pngs) == sorted(ENVS) and len(drawn) == len(ENVS)
    for fig in drawn:
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        for h in HORIZONS:
            assert any(t.endswith(f"drift, horizon {h}") for t in titles), titles
        drift_axes = [ax for ax in fig.axes if "drift, horizon" in ax.get_title()]
        for ax in drift_axes:
            assert len(ax.collections) == len(AGENTS)  # one IQR band per configuration
            lines = {line.get_label(): line for line in ax.get_lines()}
            # oracle and memory draw identical curves: their styles keep both visible.
            oracle, memory = lines["oracle"], lines["memory"]
            assert list(oracle.get_ydata()) == list(memory.get_ydata())
            assert oracle.get_linewidth() != memory.get_linewidth()
            assert (oracle.get_linestyle(), oracle.get_marker()) != (
                memory.get_linestyle(), memory.get_marker())  # fmt: skip
        breakage = next(ax for ax in fig.axes if "breakage" in ax.get_title())
        assert breakage.collections  # bootstrap bands
        # Legends sit outside every axis's data area.
        renderer = fig.canvas.get_renderer()
        for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                if ax.get_visible():
                    assert not box.overlaps(ax.get_window_extent(renderer)), legend
    stacked = Image.open(io.BytesIO(pngs[ENVS[0]]))
    assert stacked.width > 800


def test_the_png_stacks_every_env(written):
    image = Image.open(written[1]["plot"])
    rows_high = [Image.open(io.BytesIO(p)).height for p in plots.env_pngs(
        cells(ROWS), summarise(ROWS, reps=50)).values()]  # fmt: skip
    assert image.height == sum(rows_high)


def test_the_html_page_is_self_contained_and_links_existing_records(written):
    out, paths = written
    page = paths["html"].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched
    assert "@import" not in page and "<link" not in page
    assert page.count('<table class="sortable"') == 1 + len(ENVS)
    assert page.count('src="data:image/png;base64,') == len(ENVS)
    assert "Overall ranking" in page and "Probability of improvement" in page
    assert "oracle †" in page and "memory ‡" in page and "reads ground truth" in page
    links = re.findall(r'href="(records/[^"]+)"', page)
    assert len(links) == len([r for r in ROWS if r["agent"] == "window"])
    assert all((out / link).is_file() for link in links)
    assert all("__window__" in link for link in links)  # no link to a record that is absent


def test_reports_tolerate_failed_and_old_rows(tmp_path):
    old = {"env": "parcel", "horizon": 20, "agent": "old", "seed": 0, "drift": {"mean": 0.2},
           "score": 1, "probes": []}  # fmt: skip
    failed = {"env": "parcel", "horizon": 20, "agent": "old", "seed": 1, "failed": "hung"}
    paths = write_leaderboard([old, failed], tmp_path, reps=50)
    board = paths["markdown"].read_text()
    assert "| 20 | old | 1 (1 failed) |" in board
    (record,) = _csv(paths["csv"])
    assert record["failed"] == "1" and record["normalised_score_iqm"] == ""
    assert math.isinf(float(record["half_life"]))
    assert len(_csv(paths["tidy"])) == len(episode_metrics(old))


def test_drift_bands_take_percentiles_over_the_episodes_that_reached_each_step():
    rng = np.random.default_rng(0)
    series = rng.random((5, 30))
    series[3, 12:] = np.nan  # an episode that ended at step 11
    series[1, 25:] = np.nan
    expected = np.nanpercentile(series, [25, 50, 75], axis=0)
    np.testing.assert_allclose(plots._column_percentiles(series, (25, 50, 75)), expected)
