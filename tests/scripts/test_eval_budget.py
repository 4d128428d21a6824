"""wmkit-eval's LLM budget: taken from the llm group, and a spent one exits 4 and resumes."""

import json
import subprocess
import sys

from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from wmkit.evals.suite import EvalConfig, LLMBudget
from wmkit.llm.types import Usage
from wmkit.scripts.entry import EXIT_BUDGET_SPENT, EXIT_CODES, EXIT_OK

EVAL = [sys.executable, "-m", "wmkit.scripts.eval"]
SMALL = ["experiment=debug", "agents=[window]", "horizons=[20]", "~env@envs.smarthome"]
SMALL += ["~env@envs.booking", "~env@envs.vault"]  # parcel only, for speed


def _config(*overrides):
    with initialize_config_module("wmkit.configs", version_base="1.3"):
        cfg = compose("eval", ["agents=[window]", *overrides])
    return EvalConfig.model_validate(OmegaConf.to_container(cfg, resolve=True))


def test_the_budget_is_the_llm_groups_and_none_caps_nothing():
    assert _config().llm.budget == LLMBudget()  # the group's budget: every cap null
    capped = _config("llm.budget.max_tokens=7", "llm.budget.max_cost=0.5")
    assert capped.llm.budget == LLMBudget(max_tokens=7, max_cost=0.5)
    assert _config("~llm").llm.budget == LLMBudget()  # no llm node at all
    assert _config("llm=local", "llm.budget.max_calls=3").llm.budget.max_calls == 3


def _run(*args, cwd):
    return subprocess.run([*EVAL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_spent_budget_exits_4_saying_so_and_a_larger_one_plays_the_rest(tmp_path):
    run = tmp_path / "run"
    first = _run(*SMALL, "seeds=[0]", f"hydra.run.dir={run}", cwd=tmp_path)
    assert first.returncode == EXIT_OK, first.stderr[-3000:]
    # The rows of a real run, as if its agent had called a model: 600 tokens spent.
    usage = Usage(calls=2, tokens_in=500, tokens_out=100, valid=2).as_dict()
    rows = [row | {"llm": usage} for row in _lines(run / "results.jsonl")]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    stopped = _run(
        *SMALL, "seeds=[0,1]", "llm.budget.max_tokens=600", f"hydra.run.dir={run}", cwd=tmp_path
    )
    assert stopped.returncode == EXIT_BUDGET_SPENT == 4 and 4 in EXIT_CODES, stopped.stderr[-3000:]
    said = " ".join(stopped.stderr.split())
    assert (
        "LLM budget spent: 600 tokens of max_tokens=600; 1 episode not played; rerun the "
        "same command with a larger llm.budget to go on; exit code 4"
    ) in said
    assert _lines(run / "results.jsonl") == rows  # nothing played
    assert "wmkit leaderboard" in stopped.stdout  # the leaderboard of what finished

    larger = _run(
        *SMALL, "seeds=[0,1]", "llm.budget.max_tokens=601", f"hydra.run.dir={run}", cwd=tmp_path
    )
    assert larger.returncode == EXIT_OK, larger.stderr[-3000:]
    assert sorted(r["seed"] for r in _lines(run / "results.jsonl")) == [0, 1]
