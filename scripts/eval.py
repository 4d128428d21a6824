"""``wmkit-eval``: the main job. Trains what its agents need, runs the suite, ranks them.

First the training stages (:mod:`wmkit.scripts.pipeline`: collect, distill, train the
value network, on ``train_seeds``, each cached by a fingerprint of its inputs and
settings) for the envs whose agents need them; then every agent on every env, horizon
and seed; then the leaderboard. ``<run folder>/pipeline.json`` names the stage folders
the agents were given.

Examples:
    wmkit-eval                                   # the default benchmark
    wmkit-eval experiment=debug                  # a tiny run
    wmkit-eval horizons=[50,100] seeds=[0,1,2]   # override the suite
    wmkit-eval -m agents.window.tracker.k=5,10,20  # a sweep, one job per value
"""

from __future__ import annotations

import json
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from pydantic import ValidationError

from wmkit.evals.results import ResultsFile
from wmkit.evals.runner import env_module
from wmkit.evals.suite import EvalConfig, run_suite
from wmkit.llm.errors import LLMError
from wmkit.scripts.entry import check_budget, check_failures, hydra_entry, run_console
from wmkit.scripts.expert_iteration import log_rounds, rounds_table, write_rounds
from wmkit.scripts.llm_backend import serving
from wmkit.scripts.pipeline import PipelineConfig, run_pipeline, stage_table
from wmkit.scripts.tracking import episode_logger, log_leaderboard, pop_logger, start_run
from wmkit.tracking import RunLogger

PIPELINE_FILE = "pipeline.json"


def run(cfg: DictConfig) -> dict[str, Path]:
    """Validate the composed config, run the training stages, then the suite.

    Everything happens in Hydra's output folder but the stages' outputs, which go to
    the shared cache (``pipeline.cache_dir``).
    """
    resolved = OmegaConf.to_container(cfg, resolve=True)
    logger_config, raw = pop_logger(resolved, "wmkit-eval")
    try:
        config = EvalConfig.model_validate(raw)
        pipeline = PipelineConfig.model_validate(config.pipeline)
    except ValidationError as err:
        raise SystemExit(f"wmkit-eval: invalid configuration:\n{err}") from None
    with start_run(logger_config, resolved, job_type="eval", app="wmkit-eval") as logger:
        return _evaluate(config, pipeline, logger)


def _evaluate(config: EvalConfig, pipeline: PipelineConfig, logger: RunLogger) -> dict[str, Path]:
    """The validated run: the stages, the suite and the leaderboard, logged as they finish."""
    console = run_console(stderr=True)
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    # A sweep job's own overrides tell it apart from its siblings in a merged leaderboard.
    variant = ",".join(o for o in hydra_cfg.overrides.task if not o.startswith("hydra"))
    try:
        for spec in config.envs.values():  # a missing extra stops the run before any stage
            env_module(spec.id)
        artifacts, stages = run_pipeline(config, pipeline, console=console, logger=logger)
        if stages:
            run_console(stderr=True, width=140).print(stage_table(stages))
        out.mkdir(parents=True, exist_ok=True)
        record = {
            "stages": [s._replace(path=str(s.path))._asdict() for s in stages],
            "artifacts": {env: a.model_dump() for env, a in artifacts.items()},
        }
        (out / PIPELINE_FILE).write_text(json.dumps(record, indent=2) + "\n")
        rounds = write_rounds(stages, out)  # expert iteration's, when it ran
        if rounds:
            run_console(stderr=True, width=140).print(rounds_table(rounds))
            log_rounds(logger, rounds, out)
        with serving(config, out, console):  # llm=local: its model, when none answers
            paths = run_suite(
                config, out, variant=variant, console=console, artifacts=artifacts,
                on_episode=episode_logger(logger),
            )  # fmt: skip
    except (ValueError, FileNotFoundError, LLMError) as err:
        raise SystemExit(f"wmkit-eval: {err}") from None
    budget = paths.pop("budget", None)  # the BudgetSpent that stopped the run, if one did
    rows = list(ResultsFile(paths["results"]).rows())
    log_leaderboard(logger, rows, paths)
    console.print(f"results: {paths['results']}", markup=False)
    console.print(
        f"leaderboard: {paths['markdown']} (page: {paths['html']}, plot: {paths['plot']}, "
        f"table: {paths['csv']})",
        markup=False,
    )
    if hydra_cfg.mode.name != "MULTIRUN":
        print(paths["markdown"].read_text())
    check_budget("wmkit-eval", None if budget is None else budget.message, console)
    check_failures("wmkit-eval", len(rows), sum("failed" in r for r in rows), console)
    return paths


@hydra_entry("eval", scratch=[PIPELINE_FILE])
def main(cfg: DictConfig) -> None:
    """Run the evaluation suite (see ``wmkit-eval --help``)."""
    run(cfg)


if __name__ == "__main__":
    main()
