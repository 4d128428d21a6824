"""``wmkit-score``: rescore a finished ``wmkit-eval`` run from its episode records.

Examples:
    wmkit-score runs/eval/<date_time>                      # today's metrics again
    wmkit-score runs/eval/<date_time> --scorer mypkg.metrics:score   # a new metric
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from wmkit.evals.metrics import ScoreFn, score_episode
from wmkit.evals.rescore import rescore_run

EPILOG = """\
The run must have been made with records=true (wmkit-eval's default): each finished
episode is then kept in RUN_DIR/records/<env>__h<h>__<agent>__s<seed>.jsonl.gz.
results.jsonl is rewritten atomically (rows of failed episodes are kept as they were),
then the leaderboard (leaderboard.md, .csv, .png, .html; results_tidy.csv). A scorer
is a function taking a wmkit.evals.records.EpisodeRecord and returning the row's
metrics as a JSON-ready dict; start from wmkit.evals.metrics:score_episode and add keys.
"""


def _scorer(spec: str) -> ScoreFn:
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise argparse.ArgumentTypeError(f"expected MODULE:FUNCTION, got {spec!r}")
    try:
        fn = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise argparse.ArgumentTypeError(f"cannot load {spec!r}: {err}") from None
    if not callable(fn):
        raise argparse.ArgumentTypeError(f"{spec!r} is not a function")
    return fn


def main(argv: Sequence[str] | None = None) -> None:
    """Rescore every recorded episode of a run without replaying; rewrite its results."""
    parser = argparse.ArgumentParser(
        prog="wmkit-score",
        description="Rescore a finished wmkit-eval run from its episode records, "
        "without replaying any episode.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run_dir", metavar="RUN_DIR", help="the run folder (runs/eval/<time>)")
    parser.add_argument(
        "--scorer",
        type=_scorer,
        default=score_episode,
        metavar="MODULE:FUNCTION",
        help="the scoring function (default: wmkit.evals.metrics:score_episode)",
    )
    args = parser.parse_args(argv)
    try:
        done = rescore_run(args.run_dir, args.scorer)
    except (OSError, ValueError, TypeError) as err:
        parser.exit(2, f"wmkit-score: {err}\n")
    kept = f", {done.failed} failed rows kept" if done.failed else ""
    print(f"rescored {done.rescored} episodes{kept} -> {done.paths['results']}")
    print(f"leaderboard: {done.paths['markdown']} (page: {done.paths['html']})")


if __name__ == "__main__":
    main()
