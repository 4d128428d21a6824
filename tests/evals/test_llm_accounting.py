"""LLM accounting downstream of the runner: records, rows, the leaderboard, the logs, the budget.

The budget is tested on a real suite: the ``llm_window`` agent against a real local
chat-completions server (``tests/chat_server.py``) that reports tokens, so every row's
``llm`` is what the client counted.
"""

from __future__ import annotations

import csv
import dataclasses
import gzip
import io
import json

import pytest
from chat_server import ChatServer, ok
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf
from pydantic import ValidationError
from report_rows import row as report_row
from rich.console import Console

from wmkit.agents.tracked import TrackedPolicy
from wmkit.agents.trackers import WindowTracker
from wmkit.agents.types import Agent
from wmkit.evals.cells import LLM_METRICS, episode_metrics
from wmkit.evals.leaderboard import write_leaderboard
from wmkit.evals.metrics import score_episode
from wmkit.evals.records import USAGE_KEYS, RecordError, read_record, write_record
from wmkit.evals.rescore import rescore_run
from wmkit.evals.results import ResultsFile
from wmkit.evals.runner import make_env, play_episode
from wmkit.evals.suite import EvalConfig, LLMBudget, fingerprint, llm_spent, run_suite
from wmkit.evals.tables import LLM_COLUMNS, LLM_NOTE
from wmkit.llm.types import Usage
from wmkit.scripts.tracking import episode_metrics as logged_metrics

USAGE = Usage(
    calls=10, cached=2, tokens_in=900, tokens_out=100, seconds=4.0, cost=0.25,
    valid=6, repaired=1, failed=1,
).as_dict()  # fmt: skip


def _record(usage=None):
    env = make_env("wmkit/Parcel-v0", 20, {})
    agent = Agent(
        "window", WindowTracker(env.unwrapped.reader, k=3), TrackedPolicy(env_id="wmkit/Parcel-v0")
    )
    try:
        record = play_episode(env, agent, seed=0)
    finally:
        env.close()
    assert record.usage is None  # no model in this agent
    return dataclasses.replace(record, usage=usage)


def _header(path):
    return json.loads(gzip.decompress(path.read_bytes()).splitlines()[0])


def test_a_record_keeps_its_usage_and_one_without_reads_as_before(tmp_path):
    with_usage, without = _record(USAGE), _record()
    write_record(tmp_path / "a.jsonl.gz", with_usage, {"env": "parcel"})
    write_record(tmp_path / "b.jsonl.gz", without)
    back, meta = read_record(tmp_path / "a.jsonl.gz")
    assert back == with_usage and meta == {"env": "parcel"}
    assert back.usage == USAGE and isinstance(back.usage["calls"], int)  # ints stay ints
    assert read_record(tmp_path / "b.jsonl.gz")[0] == without
    assert "usage" not in _header(tmp_path / "b.jsonl.gz")  # the old layout, byte for byte
    assert sorted(USAGE_KEYS) == sorted(USAGE)


def test_usage_of_other_keys_is_refused_writing_and_reading(tmp_path):
    with pytest.raises(ValueError, match="usage has keys"):
        write_record(tmp_path / "a.jsonl.gz", _record({"calls": 1}))
    assert not (tmp_path / "a.jsonl.gz").exists()
    write_record(tmp_path / "a.jsonl.gz", _record(USAGE))
    lines = gzip.decompress((tmp_path / "a.jsonl.gz").read_bytes()).splitlines()
    header = json.loads(lines[0]) | {"usage": {"calls": 1, "tokens": 5}}
    lines[0] = json.dumps(header).encode()
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(b"\n".join(lines) + b"\n"))
    with pytest.raises(RecordError, match=r"(?s)line 1 is not a record header.*usage has keys"):
        read_record(tmp_path / "a.jsonl.gz")


def test_the_row_carries_the_usage_as_llm_only_when_there_is_one():
    assert score_episode(_record(USAGE))["llm"] == USAGE
    row = score_episode(_record())
    assert "llm" not in row
    assert not any(k.startswith("llm_") for k in episode_metrics(row))


def test_episode_metrics_derive_latency_and_reply_shares_from_the_usage():
    row = report_row("parcel", 20, "llm_window", 0) | {"llm": USAGE}
    got = {k: v for k, v in episode_metrics(row).items() if k.startswith("llm_")}
    assert got == {
        "llm_calls": 10.0,
        "llm_tokens_in": 900.0,
        "llm_tokens_out": 100.0,
        "llm_latency": 4.0 / 8,  # seconds per request the server answered (2 were cached)
        "llm_cost": 0.25,
        "llm_valid_share": 7 / 8,
        "llm_first_try_share": 6 / 8,
    }
    assert tuple(got) == LLM_METRICS == tuple(LLM_COLUMNS)
    cached = dict(USAGE, cached=10, seconds=0.0, valid=0, repaired=0, failed=0)
    derived = episode_metrics(row | {"llm": cached})
    assert {"llm_latency", "llm_valid_share", "llm_first_try_share"}.isdisjoint(derived)
    assert derived["llm_calls"] == 10.0  # nothing to measure latency or validity by
    logged = logged_metrics(row)  # the tracking logs' numbers are the same
    assert {k: v for k, v in logged.items() if k.startswith("llm_")} == got


def _usage(seed: int) -> dict[str, float]:
    return Usage(
        calls=10 + seed, tokens_in=1000 * (seed + 1), tokens_out=50, seconds=2.0 + seed,
        cost=0.01 * (seed + 1), valid=8, repaired=seed, failed=2 - seed,
    ).as_dict()  # fmt: skip


def _rows(with_llm: bool):
    pairs = [(env, agent) for env in ("parcel", "vault") for agent in ("oracle", "window")]
    rows = [report_row(env, 20, agent, seed) for env, agent in pairs for seed in range(3)]
    if with_llm:
        rows += [report_row("parcel", 20, "llm_window", s) | {"llm": _usage(s)} for s in range(3)]
    return rows


def _csv(path):
    return list(csv.DictReader(path.open(encoding="utf-8")))


def test_the_leaderboard_shows_llm_usage_only_where_a_row_has_it(tmp_path):
    plain = write_leaderboard(_rows(False), tmp_path / "plain", reps=50)
    used = write_leaderboard(_rows(True), tmp_path / "llm", reps=50)
    assert "LLM" not in plain["markdown"].read_text()
    assert not any(k.startswith("llm_") for k in _csv(plain["csv"])[0])
    assert not any(r["metric"].startswith("llm_") for r in _csv(plain["tidy"]))
    assert "s/call" not in plain["html"].read_text()

    md = used["markdown"].read_text()
    assert md.count(": LLM usage") == 1 and LLM_NOTE in md  # parcel only: vault has no LLM
    table = md.split("### parcel: LLM usage")[1].split("\n\n")[1].splitlines()
    assert table[0].split(" | ")[2:4] == ["LLM calls", "tokens in"]
    assert len(table) == 3 and "llm_window" in table[2]  # header, rule, the one LLM cell
    cells = [c.strip() for c in table[2].strip("|").split("|")]
    # means per episode over the 3 seeds: calls 11, tokens in 2000, out 50, s/call
    # mean(2/10, 3/11, 4/12), cost 0.02, valid (8+s)/10 -> 0.9, first try 8/(10) -> 0.8
    latency = (2 / 10 + 3 / 11 + 4 / 12) / 3
    assert cells[2:] == ["11.0", "2000", "50", f"{latency:.3f}", "0.02", "0.900", "0.800"]

    by_agent = {(r["env"], r["agent"]): r for r in _csv(used["csv"])}
    llm = by_agent[("parcel", "llm_window")]
    assert float(llm["llm_tokens_in_mean"]) == pytest.approx(2000.0)
    assert float(llm["llm_latency_mean"]) == pytest.approx(latency)
    assert float(llm["llm_cost_mean"]) == pytest.approx(0.02)
    assert float(llm["llm_tokens_in_n"]) == 3
    assert by_agent[("parcel", "window")]["llm_tokens_in_mean"] == ""  # no model there
    tidy = [r for r in _csv(used["tidy"]) if r["metric"] == "llm_tokens_out"]
    assert sorted(float(r["value"]) for r in tidy) == [50.0] * 3

    page = used["html"].read_text()
    parcel, vault = page.split('id="env-parcel"')[1].split('id="env-vault"')
    assert "s/call" in parcel and LLM_NOTE in parcel and "s/call" not in vault


# --- the budget, on a real suite -----------------------------------------------------


def _suite(server: ChatServer, monkeypatch, *overrides: str, **update) -> EvalConfig:
    monkeypatch.setenv("WMKIT_LLM_BASE_URL", server.url)
    monkeypatch.setenv("WMKIT_LLM_MODEL", "test-model")
    monkeypatch.delenv("WMKIT_LLM_CACHE", raising=False)
    monkeypatch.delenv("WMKIT_LLM_API_KEY", raising=False)
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("eval", ["agents=[llm_window]", "llm.client.max_retries=0", *overrides])
    config = EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True))
    base = dict(
        envs={"parcel": config.envs["parcel"]}, horizons=[20], seeds=[0, 1, 2], progress=False,
        records=False,
    )  # fmt: skip
    if "budget" in update:
        update["llm"] = _capped(config, update.pop("budget")).llm
    return config.model_copy(update=base | update)


def _capped(config: EvalConfig, budget: LLMBudget) -> EvalConfig:
    """``config`` with the llm group's budget replaced."""
    return config.model_copy(update={"llm": config.llm.model_copy(update={"budget": budget})})


@pytest.fixture
def server():
    with ChatServer(responder=lambda request: ok("[]", tokens=(100, 10))) as chat:
        yield chat


def _played(run):
    return ResultsFile(run / "results.jsonl").rows()


def test_a_spent_budget_stops_the_run_cleanly_and_a_larger_one_resumes_it(
    server, monkeypatch, tmp_path
):
    budget = LLMBudget(max_tokens=100)  # one episode spends more than that
    config = _suite(server, monkeypatch, budget=budget)
    out = io.StringIO()
    paths = run_suite(config, tmp_path, console=Console(file=out, width=400))
    rows = list(_played(tmp_path))
    assert len(rows) == 1 and rows[0]["llm"]["calls"] > 0  # the first episode, then none
    spent = llm_spent(rows)["tokens"]
    assert spent == rows[0]["llm"]["tokens_in"] + rows[0]["llm"]["tokens_out"] > 100
    stop = paths["budget"]
    assert (stop.cap, stop.spent, stop.limit, stop.unplayed) == ("max_tokens", spent, 100, 2)
    message = (
        f"LLM budget spent: {spent:.0f} tokens of max_tokens=100; 2 episodes not played; "
        "rerun the same command with a larger llm.budget to go on"
    )
    assert stop.message == message and message in out.getvalue()
    assert "llm_window" in paths["markdown"].read_text()  # the leaderboard of what finished

    requests = len(server.requests)
    again = run_suite(config, tmp_path, console=Console(file=io.StringIO()))
    assert len(server.requests) == requests and len(list(_played(tmp_path))) == 1
    assert again["budget"].unplayed == 2  # the same command plays nothing and says so

    larger = _capped(config, LLMBudget(max_tokens=10**6))
    done = run_suite(larger, tmp_path, console=Console(file=io.StringIO()))
    assert "budget" not in done  # the cap is no part of the fingerprint: it resumed
    assert sorted(r["seed"] for r in _played(tmp_path)) == [0, 1, 2]


def test_with_workers_the_overshoot_is_the_episodes_already_running(server, monkeypatch, tmp_path):
    config = _suite(
        server, monkeypatch, seeds=[0, 1, 2, 3], workers=2, budget=LLMBudget(max_calls=1)
    )
    paths = run_suite(config, tmp_path, console=Console(file=io.StringIO()))
    assert len(list(_played(tmp_path))) == 2 and paths["budget"].unplayed == 2
    assert paths["budget"].cap == "max_calls"


def test_resumed_rows_count_against_the_budget(server, monkeypatch, tmp_path):
    config = _suite(server, monkeypatch, seeds=[0])
    run_suite(config, tmp_path, console=Console(file=io.StringIO()))
    (row,) = _played(tmp_path)
    # a row of an earlier, costlier try of the same settings: it spent the budget alone
    ResultsFile(tmp_path / "results.jsonl").rewrite([row | {"llm": dict(row["llm"], cost=2.5)}])
    capped = _capped(config, LLMBudget(max_cost=2)).model_copy(update={"seeds": [0, 1, 2]})
    requests = len(server.requests)
    paths = run_suite(capped, tmp_path, console=Console(file=io.StringIO()))
    assert len(server.requests) == requests and paths["budget"].unplayed == 2
    assert paths["budget"].message.startswith("LLM budget spent: a cost of 2.5 of max_cost=2;")


def test_the_budget_is_no_part_of_the_fingerprint_and_no_cap_is_the_default(server, monkeypatch):
    config = _suite(server, monkeypatch)
    assert config.llm.budget == LLMBudget() and LLMBudget().reached(llm_spent([])) is None
    capped = _suite(server, monkeypatch, "llm.budget.max_tokens=5", "llm.budget.max_cost=1")
    assert capped.llm.budget.max_tokens == 5  # in the composed llm group...
    for name in ("parcel",):  # ... and in nothing an agent is built from
        specs = [(c.envs[name], c.agents["llm_window"]) for c in (config, capped)]
        assert fingerprint(*specs[0]) == fingerprint(*specs[1])
    with pytest.raises(ValidationError, match="greater than 0"):
        LLMBudget(max_tokens=0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        LLMBudget.model_validate({"max_token": 5})


def test_rescoring_keeps_each_episodes_usage(server, monkeypatch, tmp_path):
    run_suite(_suite(server, monkeypatch, seeds=[0, 1], records=True), tmp_path)
    before = {r["seed"]: r["llm"] for r in _played(tmp_path)}
    assert all(u["calls"] > 0 and u["tokens_in"] == 100 * u["calls"] for u in before.values())
    (tmp_path / "results.jsonl").unlink()
    requests = len(server.requests)
    rescore_run(tmp_path)
    assert {r["seed"]: r["llm"] for r in _played(tmp_path)} == before
    assert len(server.requests) == requests  # from the records, no episode replayed
