"""A finished run rescored from its records, without replaying: real suites, real files."""

import json

import gymnasium
import pytest
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wmkit.evals import runner, suite
from wmkit.evals.leaderboard import write_leaderboard
from wmkit.evals.metrics import score_episode
from wmkit.evals.records import RecordError, read_record, record_path, record_paths
from wmkit.evals.rescore import rescore_run
from wmkit.evals.results import ResultsFile
from wmkit.evals.suite import EnvSpec, EvalConfig, run_suite
from wmkit.scripts.score import main as wmkit_score


def _config(**update):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        raw = OmegaConf.to_container(compose("eval"), resolve=True)
    config = EvalConfig.model_validate(raw)
    base = {
        "envs": {"parcel": config.envs["parcel"]},
        "agents": {name: config.agents[name] for name in ("oracle", "window")},
        "horizons": [30],
        "seeds": [0, 1],
        "progress": False,
    }
    return config.model_copy(update=base | update)


def _rows(run_dir):
    return [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]


def _as_json(row):
    # Through JSON as a results row is: NaN (a metric with nothing to measure) is then
    # the decoder's one NaN object, equal to the rows read back.
    return json.loads(json.dumps(row))


def _key(row):
    return row["agent"], row["seed"]


def _no_replay(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("rescoring replayed an episode")

    monkeypatch.setattr(gymnasium, "make", refuse)
    monkeypatch.setattr(runner, "play_episode", refuse)
    monkeypatch.setattr(suite, "play_episode", refuse)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A tiny finished run with records: one env, one horizon, two agents, two seeds."""
    run_dir = tmp_path_factory.mktemp("run")
    run_suite(_config(), run_dir)
    return run_dir, _rows(run_dir), (run_dir / "leaderboard.md").read_text()


@pytest.fixture
def run(finished, tmp_path):
    """A copy of the finished run to alter."""
    source, rows, board = finished
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "records").mkdir()
    for path in [source / "results.jsonl", *record_paths(source)]:
        (run_dir / path.relative_to(source)).write_bytes(path.read_bytes())
    return run_dir, rows, board


def test_the_run_keeps_one_record_per_episode_named_after_it(finished):
    run_dir, rows, _ = finished
    assert len(rows) == 4
    names = [p.name for p in record_paths(run_dir)]
    assert names == sorted(
        f"parcel__h30__{agent}__s{seed}.jsonl.gz"
        for agent in ("oracle", "window")
        for seed in (0, 1)
    )
    for row in rows:
        record, identity = read_record(
            record_path(run_dir, "parcel", 30, row["agent"], row["seed"])
        )
        assert _as_json(score_episode(record) | identity) == row


def test_deleted_or_altered_results_come_back_identical_without_replaying(run, monkeypatch):
    run_dir, rows, board = run
    _no_replay(monkeypatch)
    (run_dir / "results.jsonl").unlink()
    done = rescore_run(run_dir)
    assert (done.rescored, done.failed) == (4, 0)
    assert sorted(_rows(run_dir), key=_key) == sorted(rows, key=_key)  # in file-name order
    assert (run_dir / "leaderboard.md").read_text() == board
    # An altered row is scored again from its record, in its place.
    altered = [dict(r) for r in rows]
    altered[2]["drift"] = {"mean": 0.5}
    altered[2]["score"] = 99
    ResultsFile(run_dir / "results.jsonl").rewrite(altered)
    rescore_run(run_dir)
    assert _rows(run_dir) == rows


def test_a_new_metric_is_added_to_every_row_without_replaying(run, monkeypatch):
    run_dir, rows, _ = run
    _no_replay(monkeypatch)

    def with_commands(record):
        return score_episode(record) | {"commands": sorted({s.action for s in record.steps[1:]})}

    rescore_run(run_dir, with_commands)
    new = _rows(run_dir)
    assert all(row["commands"] for row in new)
    assert [{k: v for k, v in r.items() if k != "commands"} for r in new] == rows


def test_rows_from_before_causal_confusion_gain_it_through_wmkit_score(run, monkeypatch, capsys):
    run_dir, rows, _ = run
    _no_replay(monkeypatch)
    old = [{k: v for k, v in r.items() if k != "confusion"} for r in rows]
    ResultsFile(run_dir / "results.jsonl").rewrite(old)
    assert "| – | – | – | – | – | – |" in write_leaderboard(old, run_dir)["markdown"].read_text()
    wmkit_score([str(run_dir)])
    assert "rescored 4 episodes" in capsys.readouterr().out
    new = _rows(run_dir)
    assert new == rows and all(set(r["confusion"]) >= {"action_f1", "event_f1"} for r in new)
    board = (run_dir / "leaderboard.md").read_text()
    confusion = board[board.index("### parcel: causal confusion") :]
    oracle = next(line for line in confusion.splitlines() if "| oracle † |" in line)
    assert "1.000 [1.000, 1.000]" in oracle  # the true state read: every change right
    assert "| window ‡ |" in confusion and "ceiling of reading" in confusion


def test_failed_rows_are_kept_and_unrecorded_rows_refused(run):
    run_dir, rows, _ = run
    results = ResultsFile(run_dir / "results.jsonl")
    failed = dict(rows[0], seed=7, failed="episode x failed: crashed")
    for key in ("drift", "drift_series", "probes", "score", "steps"):
        failed.pop(key)
    results.append(failed)
    done = rescore_run(run_dir)
    assert (done.rescored, done.failed) == (4, 1)
    assert _rows(run_dir) == [*rows, failed]
    # A finished row whose record is gone (made with records=false) is not silently mixed in.
    record_path(run_dir, "parcel", 30, "window", 1).unlink()
    before = results.path.read_bytes()
    with pytest.raises(ValueError, match=r"1 finished episodes .* have no record .*window seed=1"):
        rescore_run(run_dir)
    assert results.path.read_bytes() == before


def test_a_record_without_its_row_is_scored_too(run):
    # Killed after the record was written and before its row: the record is a whole episode.
    run_dir, rows, _ = run
    ResultsFile(run_dir / "results.jsonl").rewrite(rows[:3])
    rescore_run(run_dir)
    assert _rows(run_dir) == [*rows[:3], rows[3]]


def test_a_run_without_records_is_a_clear_error(tmp_path):
    run_suite(_config(records=False, seeds=[0]), tmp_path)
    assert len(_rows(tmp_path)) == 2 and not (tmp_path / "records").exists()
    with pytest.raises(ValueError, match=r"no episode records .*records=true"):
        rescore_run(tmp_path)
    with pytest.raises(FileNotFoundError, match="no such run folder"):
        rescore_run(tmp_path / "nope")


def test_a_corrupt_record_stops_the_rescoring_naming_it_and_changes_nothing(run):
    run_dir, _, _ = run
    path = record_path(run_dir, "parcel", 30, "oracle", 1)
    path.write_bytes(path.read_bytes()[:100])
    before = (run_dir / "results.jsonl").read_bytes()
    with pytest.raises(RecordError, match=r"parcel__h30__oracle__s1\.jsonl\.gz"):
        rescore_run(run_dir)
    assert (run_dir / "results.jsonl").read_bytes() == before


def test_resume_skips_recorded_episodes_and_plays_only_the_new_ones(run, monkeypatch):
    run_dir, rows, _ = run
    played = []
    original = suite.play_episode

    def counting(env, agent, seed):
        played.append((agent.name, seed))
        return original(env, agent, seed)

    monkeypatch.setattr(suite, "play_episode", counting)
    run_suite(_config(seeds=[0, 1, 2]), run_dir)
    assert sorted(played) == [("oracle", 2), ("window", 2)]
    assert _rows(run_dir)[:4] == rows and len(record_paths(run_dir)) == 6


def test_an_isolated_episode_returns_its_record_from_the_worker(tmp_path):
    spec = _config().envs["parcel"].model_dump()
    config = _config(
        envs={"parcel": EnvSpec(**spec | {"isolate": True})},
        agents={"window": _config().agents["window"]},
        seeds=[0],
    )
    run_suite(config, tmp_path)
    (row,) = _rows(tmp_path)
    record, identity = read_record(record_path(tmp_path, "parcel", 30, "window", 0))
    assert _as_json(score_episode(record) | identity) == row and record.length == 30
