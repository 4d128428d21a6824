"""``wmkit-eval``: the main job. Runs the evaluation suite and writes the leaderboard.

Examples:
    wmkit-eval                                   # the default benchmark
    wmkit-eval experiment=debug                  # a tiny run
    wmkit-eval horizons=[50,100] seeds=[0,1,2]   # override the suite
    wmkit-eval -m agents.window.tracker.k=5,10,20  # a sweep, one job per value
"""

from __future__ import annotations

from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from pydantic import ValidationError
from rich.console import Console

from wmkit.evals.suite import EvalConfig, run_suite


def run(cfg: DictConfig) -> dict[str, Path]:
    """Validate the composed config and run the suite in Hydra's output folder."""
    raw = OmegaConf.to_container(cfg, resolve=True)
    try:
        config = EvalConfig.model_validate(raw)
    except ValidationError as err:
        raise SystemExit(f"wmkit-eval: invalid configuration:\n{err}") from None
    console = Console(stderr=True)
    hydra_cfg = HydraConfig.get()
    out = Path(hydra_cfg.runtime.output_dir)
    # A sweep job's own overrides tell it apart from its siblings in a merged leaderboard.
    variant = ",".join(o for o in hydra_cfg.overrides.task if not o.startswith("hydra"))
    try:
        paths = run_suite(config, out, variant=variant, console=console)
    except ValueError as err:
        raise SystemExit(f"wmkit-eval: {err}") from None
    console.print(f"results: {paths['results']}")
    console.print(f"leaderboard: {paths['markdown']} (plot: {paths['plot']})")
    if hydra_cfg.mode.name != "MULTIRUN":
        print(paths["markdown"].read_text())
    return paths


@hydra.main(version_base="1.3", config_path="pkg://wmkit.configs", config_name="eval")
def main(cfg: DictConfig) -> None:
    """Run the evaluation suite (see ``wmkit-eval --help``)."""
    run(cfg)


if __name__ == "__main__":
    main()
