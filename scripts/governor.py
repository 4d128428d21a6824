"""``wmkit-governor``: run the memory governor as its own process.

Commits pending releases and expires states past their TTL (``wmkit.memory.governor``)
until stopped by SIGTERM or SIGINT; several may run against one PostgreSQL store
(``FOR UPDATE SKIP LOCKED`` gives each its own releases) or one SQLite file.

    wmkit-governor runs/x/memory.db                  # until stopped
    wmkit-governor "$WMKIT_POSTGRES_URL" --drain     # until nothing is pending, then exit
    wmkit-governor runs/x/memory.db --status         # counts, as JSON
    wmkit-governor runs/x/memory.db --requeue-dead   # retry every dead letter

Exit status: 0; with ``--drain``, 1 if releases were still pending at the timeout or
dead letters remain.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading

import sqlalchemy as sa

from wmkit.memory import Governor, Store
from wmkit.memory.store import release_log, states

__all__ = ["main", "status"]


def status(store: Store) -> dict[str, dict[str, int]]:
    """Return release counts by status and state counts by lifecycle."""
    with store.read() as conn:
        releases = conn.execute(
            sa.select(release_log.c.status, sa.func.count()).group_by(release_log.c.status)
        ).all()
        lifecycles = conn.execute(
            sa.select(states.c.lifecycle, sa.func.count()).group_by(states.c.lifecycle)
        ).all()
    return {"releases": dict(releases), "states": dict(lifecycles)}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and run the governor; return the exit status."""
    parser = argparse.ArgumentParser(prog="wmkit-governor", description=__doc__.split("\n")[0])
    parser.add_argument("url", help="store URL (sqlite:///..., postgresql+psycopg://...) or path")
    parser.add_argument("--schema", help="PostgreSQL schema of the store")
    parser.add_argument("--worker", help="name in the log and audit (default host:pid)")
    parser.add_argument("--poll", type=float, default=0.5, help="idle poll interval, seconds")
    parser.add_argument("--batch", type=int, default=500, help="releases per round")
    parser.add_argument("--max-attempts", type=int, default=5, help="failures before DEAD")
    parser.add_argument("--backoff", type=float, default=0.5, help="first retry delay, s")
    parser.add_argument("--max-backoff", type=float, default=60.0, help="retry delay cap, s")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--drain", action="store_true", help="exit once nothing is pending")
    mode.add_argument("--status", action="store_true", help="print counts and exit")
    mode.add_argument("--requeue-dead", action="store_true", help="requeue dead letters, exit")
    parser.add_argument("--timeout", type=float, default=600.0, help="--drain time limit, s")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every round")
    args = parser.parse_args(argv)

    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    with Store.open(args.url, schema=args.schema) as store:
        if args.status:
            print(json.dumps(status(store), sort_keys=True))
            return 0
        governor = Governor(
            store,
            worker=args.worker,
            max_attempts=args.max_attempts,
            backoff_s=args.backoff,
            max_backoff_s=args.max_backoff,
            batch=args.batch,
        )
        if args.requeue_dead:
            print(json.dumps({"requeued": governor.requeue()}))
            return 0
        if args.drain:
            report = governor.drain(timeout_s=args.timeout)
            left, dead = governor.pending(), len(governor.dead_letters())
            print(json.dumps({**report._asdict(), "pending": left, "dead_letters": dead}))
            return 1 if left or dead else 0
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        report = governor.run(poll_s=args.poll, stop=stop)
        print(json.dumps(report._asdict()))
        return 0


if __name__ == "__main__":
    sys.exit(main())
