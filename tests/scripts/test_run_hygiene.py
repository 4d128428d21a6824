"""Run hygiene of the entry points: the run's log, exit codes, no empty run folders, hints."""

import logging
import subprocess
import sys

import pytest

from wmkit.scripts.entry import CONSOLE_LOGGER, EXIT_CODES, run_console

EVAL = [sys.executable, "-m", "wmkit.scripts.eval"]
OTHERS = ["booking", "vault", "textworld", "textworld_cooking", "textworld_treasure"]
TINY = ["experiment=debug", "agents=[window]", "horizons=[20]", "seeds=[0]"]
TINY += [f"~env@envs.{name}" for name in OTHERS]  # parcel and smarthome remain
BROKEN_PARCEL = ["+envs.parcel.isolate=true", "+envs.parcel.kwargs.bogus=1"]  # fails in its worker


def _eval(*args, cwd):
    return subprocess.run([*EVAL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_run_log_holds_the_consoles_lines_and_one_line_per_episode(tmp_path):
    run_dir = tmp_path / "run"
    proc = _eval(*TINY, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = (run_dir / "eval.log").read_text()
    assert "episode 1/2 parcel h=20 seed=0 window: score" in log
    assert "episode 2/2 smarthome h=20 seed=0 window: score" in log
    assert f"results: {run_dir / 'results.jsonl'}" in log  # what the console printed
    assert "[wmkit.evals.suite][INFO]" not in proc.stdout + proc.stderr  # the log's alone


@pytest.mark.parametrize(
    ("drop", "code", "says"),
    [
        (["~env@envs.smarthome"], 2, "every episode failed (1 of 1"),
        ([], 3, "1 of 2 episodes failed"),
    ],
    ids=["all-failed", "some-failed"],
)
def test_failed_episodes_set_the_exit_code_and_say_so(tmp_path, drop, code, says):
    run_dir = tmp_path / "run"
    proc = _eval(*TINY, *drop, *BROKEN_PARCEL, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == code, proc.stderr[-3000:]
    assert says in proc.stderr and says in (run_dir / "eval.log").read_text()
    assert "unexpected keyword argument 'bogus'" in (run_dir / "results.jsonl").read_text()


@pytest.mark.parametrize(
    ("override", "message"),
    [("horizons=[fifty]", "invalid configuration"), ("horizons=[8]", "horizon must be in")],
    ids=["pydantic", "env-check"],
)
def test_a_configuration_error_leaves_no_run_folder_but_an_earlier_run_stays(
    tmp_path, override, message
):
    run_dir = tmp_path / "runs" / "new"
    proc = _eval(*TINY, override, f"hydra.run.dir={run_dir}", cwd=tmp_path)
    assert proc.returncode == 1 and message in proc.stderr
    assert not run_dir.exists()
    if override == "horizons=[fifty]":
        return  # refused before anything ran; the other case, after: one check of both is enough
    done = tmp_path / "runs" / "done"  # a finished run's folder, resumed with a mistake
    first = _eval(*TINY, "~env@envs.smarthome", f"hydra.run.dir={done}", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before = sorted(p.name for p in done.iterdir())
    proc = _eval(*TINY, "~env@envs.smarthome", override, f"hydra.run.dir={done}", cwd=tmp_path)
    assert proc.returncode == 1 and message in proc.stderr
    assert sorted(p.name for p in done.iterdir()) == before  # nothing of it removed
    assert message in (done / "eval.log").read_text()  # the error is in its log too


def test_the_console_logs_plain_text_and_keeps_brackets(caplog):
    console = run_console(width=80, file=open("/dev/null", "w"))  # noqa: SIM115
    with caplog.at_level(logging.INFO, logger=CONSOLE_LOGGER):
        console.print("[red]episode failed[/red]: pip install 'wmkit\\[jericho]'")
        console.print("pip install 'wmkit[textworld]'", markup=False)
    assert caplog.messages == [
        "episode failed: pip install 'wmkit[jericho]'",
        "pip install 'wmkit[textworld]'",
    ]


def test_help_documents_the_exit_codes(tmp_path):
    proc = _eval("--help", cwd=tmp_path)
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    assert "Exit codes: 0 every episode finished; 1 a usage, configuration or run error" in text
    assert "2 every episode failed; 3 some episodes failed" in text
    assert set(EXIT_CODES) == {0, 1, 2, 3, 4}
    assert "4 the LLM budget (llm.budget: max_tokens, max_calls, max_cost" in text


def test_a_sweep_job_whose_episodes_all_failed_fails_and_the_others_still_run(tmp_path):
    sweep = tmp_path / "sweep"
    proc = _eval(
        "-m", *TINY, "~env@envs.smarthome", *BROKEN_PARCEL, "seeds=[0],[1]",
        f"hydra.sweep.dir={sweep}", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 1
    assert "EpisodesFailed: wmkit-eval: every episode failed (1 of 1" in proc.stderr
    assert sorted(p.parent.name for p in sweep.glob("*/results.jsonl")) == ["0", "1"]
