"""The leaderboard: causal-confusion columns, and the marks of privileged configurations."""

import math

import pytest
from hydra import compose, initialize_config_module
from matplotlib.figure import Figure
from omegaconf import OmegaConf

from wmkit.evals.leaderboard import PRIVILEGES, render_markdown, summarise, write_leaderboard
from wmkit.evals.suite import EvalConfig

NAN = math.nan


def _row(agent, seed, confusion=None, **identity):
    row = {
        "env": "parcel",
        "horizon": 20,
        "agent": agent,
        "seed": seed,
        "drift": {"mean": 0.1},
        "drift_series": [0.0, 0.1, 0.2],
        "score": 1,
        "probes": [[1, True, "confusion"]],
        "stale_use": 0.0,
    }
    if confusion is not None:
        row["confusion"] = confusion
    return row | identity


def _confusion(action_f1, event_f1, probe_accuracy=1.0, action_steps=4, event_steps=2):
    return {
        "action_exact": action_f1 / 2,
        "action_f1": action_f1,
        "event_exact": 1.0,
        "event_f1": event_f1,
        "probe_accuracy": probe_accuracy,
        "action_steps": action_steps,
        "event_steps": event_steps,
        "probes": 3,
    }


ROWS = [
    _row("memory", 0, _confusion(0.8, 1.0), privileged=["env_parser"]),
    _row("memory", 1, _confusion(0.6, 1.0), privileged=["env_parser"]),
    _row("memory", 2, _confusion(0.7, NAN, NAN, event_steps=0), privileged=["env_parser"]),
    _row("oracle", 0, _confusion(1.0, 1.0), oracle=True, privileged=[]),
    _row("mcts", 0, _confusion(0.5, 0.5), privileged=["env_parser", "exact_simulator"]),
    _row("old", 0),  # written before confusion and privileged parts existed
]


def _table(board, title):
    lines = board.splitlines()
    start = lines.index(title) + 2
    end = next(i for i in range(start, len(lines)) if not lines[i].startswith("|"))
    return lines[start:end], lines[end + 1]  # the table, the note under it


def test_summaries_aggregate_confusion_leaving_nan_episodes_out():
    (memory,) = [s for s in summarise(ROWS) if s["agent"] == "memory"]
    assert memory["confusion_action_f1"].n == 3
    assert memory["confusion_action_f1"].mean == pytest.approx(0.7)
    assert memory["confusion_event_f1"].n == 2  # seed 2 had no event to score
    assert memory["confusion_probe_accuracy"].n == 2
    assert memory["confusion_steps"] == (12, 4)
    assert memory["privileged"] == ["env_parser"] and not memory["oracle"]


def test_the_confusion_table_has_its_columns_with_cis_and_dashes_for_old_rows():
    board = render_markdown(summarise(ROWS))
    table, _ = _table(board, "### parcel: causal confusion")
    assert table[0] == (
        "| horizon | agent | action F1 [95% CI] | action exact | event F1 [95% CI] | "
        "event exact | confusion probes [95% CI] | steps action/event |"
    )
    rows = {line.split(" | ")[1]: line for line in table[2:]}
    assert rows["memory ‡"].startswith("| 20 | memory ‡ | 0.700 [0.600, 0.800] | 0.350 |")
    assert "| 1.000 [1.000, 1.000] | 1.000 | 1.000 [1.000, 1.000] | 12/4 |" in rows["memory ‡"]
    assert rows["old"] == "| 20 | old | – | – | – | – | – | – |"
    assert "oracle †" in rows and "mcts ‡" in rows
    assert "Causal confusion" in board and "action/event F1" in board


def test_every_table_explains_the_marks_of_its_rows():
    board = render_markdown(summarise(ROWS))
    for title in ("## parcel", "### parcel: causal confusion"):
        table, note = _table(board, title)
        assert any("| oracle † |" in line for line in table)
        assert "† reads ground truth" in note
        assert "‡ has a part no real agent has" in note and "ceiling of reading" in note
        assert f"Parts here: {PRIVILEGES['env_parser']}: mcts, memory;" in note
        assert f"{PRIVILEGES['exact_simulator']}: mcts." in note
    # Marks are explained where they appear only.
    plain = render_markdown(summarise([_row("old", 0)]))
    assert "†" not in plain and "‡" not in plain


def test_the_plot_legends_carry_the_marks(tmp_path, monkeypatch):
    drawn = []
    savefig = Figure.savefig
    monkeypatch.setattr(
        Figure, "savefig", lambda fig, *a, **k: drawn.append(fig) or savefig(fig, *a, **k)
    )
    paths = write_leaderboard(ROWS, tmp_path)
    assert paths["plot"].stat().st_size > 10_000
    (fig,) = drawn  # one env, one row of plots
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    (legend,) = [lg for lg in legends if lg.get_title().get_text() != "bars"]
    labels = {t.get_text() for t in legend.get_texts()}
    assert {"memory ‡", "oracle †", "mcts ‡", "old"} <= labels
    assert "† ground truth" in legend.get_title().get_text()
    assert "‡ env's parser / exact simulator" in legend.get_title().get_text()


def _agents():
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        raw = OmegaConf.to_container(
            compose("eval", ["agents=[oracle,window,memory,random,mcts]"]), resolve=True
        )
    return EvalConfig.model_validate(raw).agents


def test_privileged_parts_follow_from_what_the_config_hands_an_agent():
    agents = _agents()
    assert agents["oracle"].oracle and agents["oracle"].privileged == ()
    for name in ("window", "memory", "random"):  # the env's reader
        assert agents[name].privileged == ("env_parser",), name
    assert agents["mcts"].privileged == ("env_parser", "exact_simulator")  # + the live env
    assert all(p in PRIVILEGES for spec in agents.values() for p in spec.privileged)
    # Not part of the fingerprint: resuming a run made before it is still allowed.
    assert "privileged" not in agents["window"].model_dump()


def test_drift_at_a_step_counts_the_episodes_that_lasted_that_long():
    # A won Vault episode ends early: it has no drift at steps it never reached.
    rows = [
        _row("oracle", 0, drift={"mean": 0.1, "at_10": 0.1, "at_50": 0.3}),
        _row("oracle", 1, drift={"mean": 0.2, "at_10": 0.2}),
    ]
    (oracle,) = summarise(rows)
    assert oracle["drift_at_10"].n == 2 and oracle["drift_at_10"].mean == pytest.approx(0.15)
    assert oracle["drift_at_50"].n == 1 and oracle["drift_at_50"].mean == pytest.approx(0.3)
    assert "drift@50" in render_markdown([oracle])
