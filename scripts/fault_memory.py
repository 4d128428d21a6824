"""Fault trials for governed memory: SIGKILL the writer and the governors, then check.

Each trial starts a fresh store and forks three real processes: a writer running a
seeded random workload (FACT and ASSUMPTION writes with dependencies and TTLs,
releases of every kind, stabilize, clock advances, rollbacks) and two governors
running their loops side by side. Each process is killed with SIGKILL at a random
point: on its N-th database event (a statement or a commit, so inside phase one or
phase two transactions), right after an operation committed (writer), or after a
random delay. The writer journals every operation before and after it runs (a line
per write, so the journal survives the kill). Then, as a restarted process would,
the trial checks the store against the journal:

- served: no state that is pending release or released is returned by ``get_state``
  (checked before and after recovery);
- orphans: every PENDING_RELEASE state has a PENDING log entry and vice versa (phase
  one is all or nothing);
- facts: every FACT the journal says was accepted is in history with its value, and
  each key whose last journaled write is a FACT still serves exactly that version;
- drained: a recovery governor completes every pending release (none left PENDING,
  none DEAD, no PENDING_RELEASE state);
- double: every release was committed exactly once (the audit table), despite two
  governors racing.

    python scripts/fault_memory.py --trials 200 --backend both
    python scripts/fault_memory.py --trials 20 --backend sqlite --ops 40

Exit status 1 if any trial broke an invariant.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import multiprocessing
import os
import random
import re
import signal
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from wmkit.memory import GovernanceError, Governor, StateManager, Store
from wmkit.memory import governor as governor_module
from wmkit.memory.store import LIVE, release_attempts, release_log, states
from wmkit.memory.types import Lifecycle, ReleaseStatus

__all__ = ["TrialResult", "main", "run_trial", "run_trials"]

KEYS = [f"k{i}" for i in range(10)]
INVARIANTS = ("served", "orphans", "facts", "drained", "double")
_CTX = multiprocessing.get_context("fork")


@dataclass
class TrialResult:
    """What one trial did and which invariants it broke.

    Attributes:
        seed: the trial's seed (reproduces the workload and the kill plan).
        writer_kill: where the writer died (``event:<op>``, ``after_op:<op>``,
            ``timer``) or ``finished``.
        governor_kills: where each governor died: in a release transaction after
            claiming the entry (``claim``), while changing the state (``apply``),
            logging (``log``) or committing (``commit``); in TTL expiry's phase one
            (``expire``); by timer (``timer``); or when the trial ended (``end``).
        ops_done: operations the journal shows completed.
        pending_at_restart: releases PENDING when the processes were dead.
        recovered: releases the recovery governor committed.
        facts_checked: FACT keys whose served version was checked.
        retried: failed commit attempts that were retried (e.g. a DOWNGRADE whose
            copy collided with a concurrent write of the same key).
        violations: invariant -> messages.
    """

    seed: int
    writer_kill: str = ""
    governor_kills: list[str] = field(default_factory=list)
    ops_done: int = 0
    pending_at_restart: int = 0
    recovered: int = 0
    facts_checked: int = 0
    retried: int = 0
    violations: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, invariant: str, message: str) -> None:
        """Record a broken invariant."""
        self.violations.setdefault(invariant, []).append(message)


# ------------------------------------------------------------------- the children


def _arm(
    engine: sa.Engine, at: int, marker: Path, activity: list[str], counted: set[str] | None
) -> None:
    """SIGKILL this process on its ``at``-th statement or commit, noting where.

    Only events while ``activity[0]`` is in ``counted`` count (None: all of them).
    """
    counter = itertools.count(1)

    def on_event(statement: str) -> None:
        if counted is not None and activity[0] not in counted:
            return
        if next(counter) == at:
            # Written whole or not at all: the runner may SIGKILL this process while it
            # writes (the writer finished and the governors are stopped), and a torn
            # marker would be read as a kill point.
            partial = marker.with_suffix(".partial")
            partial.write_text(f"{activity[0]}|{' '.join(statement.split())[:80]}")
            os.replace(partial, marker)
            os.kill(os.getpid(), signal.SIGKILL)

    sa.event.listen(engine, "before_cursor_execute", lambda c, cur, stmt, *a: on_event(stmt))
    sa.event.listen(engine, "commit", lambda c: on_event("COMMIT"))


def _plan(rng: random.Random, step: int) -> dict[str, Any]:
    i = rng.randrange(len(KEYS))
    key = KEYS[i]
    r = rng.random()
    if r < 0.55:
        fact = r < 0.30
        deps = rng.sample(KEYS[:i], k=min(i, rng.randint(1, 2))) if rng.random() < 0.3 else []
        return {
            "op": "set",
            "key": key,
            "value": f"{key}@{rng.randrange(10**9)}",
            "authority": "FACT" if fact else "ASSUMPTION",
            "step": step,
            "ttl": None if fact or rng.random() < 0.6 else rng.randint(1, 4),
            "deps": deps,
        }
    if r < 0.80:
        kind = rng.choices(["ARCHIVE", "DOWNGRADE", "CASCADE"], [3, 1, 1])[0]
        return {"op": "mark", "key": key, "kind": kind}
    if r < 0.86:
        return {"op": "stabilize", "key": key}
    if r < 0.97:
        return {"op": "advance", "step": step + rng.randint(1, 2)}
    return {"op": "rollback", "to": max(0, step - rng.randint(1, 5))}


def _apply(memory: StateManager, op: dict[str, Any]) -> dict[str, Any]:
    kind = op["op"]
    if kind == "set":
        result = memory.set_state(
            op["key"],
            op["value"],
            source="fault",
            authority=op["authority"],
            step=op["step"],
            ttl_steps=op["ttl"],
            dependencies=op["deps"],
        )
        return {"accepted": result.accepted, "version": result.version}
    if kind == "mark":
        operation = "ARCHIVE" if op["kind"] == "CASCADE" else op["kind"]
        entries = memory.mark_for_release(
            op["key"], operation, "fault trial", cascade=op["kind"] == "CASCADE"
        )
        return {"keys": [e.key for e in entries]}
    if kind == "stabilize":
        memory.stabilize(op["key"])
        return {}
    if kind == "advance":
        return {"clock": memory.advance(op["step"])}
    result = memory.rollback(op["to"])
    return {
        "rolled_back": list(result.rolled_back),
        "invalidated": list(result.invalidated),
        "restored": list(result.restored),
    }


def _writer(url: str, schema: str | None, workdir: Path, seed: int, ops: int, kill: tuple) -> None:
    store = Store.open(url, schema=schema, create=False)
    mode, at = kill
    if mode == "event":
        _arm(store.engine, at, workdir / "writer.kill", ["writer"], None)
    memory = StateManager(store)
    rng = random.Random(seed)
    step = 0
    with open(workdir / "journal.jsonl", "a", buffering=1) as journal:
        for i in range(ops):
            op = _plan(rng, step)
            journal.write(json.dumps({"i": i, "begin": op}) + "\n")
            try:
                result = _apply(memory, op)
            except GovernanceError as exc:
                result = {"error": type(exc).__name__}
            if mode == "after_op" and at == i:
                os.kill(os.getpid(), signal.SIGKILL)
            journal.write(json.dumps({"i": i, "end": result}) + "\n")
            if op["op"] == "advance":
                step = max(step, op["step"])
            elif rng.random() < 0.3:
                step += 1
    store.close()


def _governor(url: str, schema: str | None, workdir: Path, name: str, kill: tuple) -> None:
    # Failed attempts are expected here (and counted from the audit table): keep quiet.
    logging.getLogger(governor_module.__name__).setLevel(logging.CRITICAL)
    store = Store.open(url, schema=schema, create=False)
    governor = Governor(store, worker=name, backoff_s=0.02, max_backoff_s=0.2)
    mode, at = kill
    if mode == "event":
        # Count only the events of real work (a claimed release from the moment its
        # state is read, or an expiry from its first phase-one write, through to the
        # commit), so the kill lands inside phase two or expiry, not in an idle poll.
        activity = ["idle"]
        _arm(store.engine, at, workdir / f"{name}.kill", activity, {"release", "expire"})
        for method in ("release_one", "expire"):
            setattr(governor, method, _tagged(getattr(governor, method), "idle", activity))
        governor._commit = _tagged(governor._commit, "release", activity, reset=False)
        governor_module.prepare_release = _tagged(
            governor_module.prepare_release, "expire", activity, reset=False
        )
    governor.run(poll_s=0.002)


def _tagged(fn: Any, tag: str, activity: list[str], *, reset: bool = True) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        activity[0] = tag
        try:
            return fn(*args, **kwargs)
        finally:
            if reset:
                activity[0] = "idle"

    return wrapper


# -------------------------------------------------------------------- one trial


def _kill_plan(rng: random.Random, ops: int, writer: bool) -> tuple[str, float]:
    modes = ["event", "after_op", "timer"] if writer else ["event", "timer"]
    mode = rng.choices(modes, [6, 2, 2] if writer else [7, 3])[0]
    if mode == "event":
        # A writer op makes about five events; a governor's release about eight.
        return mode, rng.randint(1, 5 * ops if writer else 25)
    if mode == "after_op":
        return mode, rng.randrange(ops)
    return mode, rng.uniform(0.0, 0.6)


def _classify_governor(marker: Path) -> str:
    """Name the point a governor died at from its marker: see ``TrialResult``."""
    if not marker.exists():
        return ""
    activity, statement = marker.read_text().split("|", 1)
    if activity != "release":
        return activity
    # Drop the PostgreSQL schema prefix (``fault_x.wm_states`` -> ``wm_states``).
    upper = re.sub(r"\b\w+\.(WM_\w+)", r"\1", statement.upper())
    if upper == "COMMIT":
        return "commit"
    if upper.startswith("UPDATE WM_STATES") or upper.startswith("INSERT INTO WM_STATES"):
        return "apply"
    if "WM_RELEASE_LOG" in upper or "WM_RELEASE_ATTEMPTS" in upper:
        return "log"
    return "claim"  # reading the claimed entry's state and the clock


def _journal(workdir: Path) -> tuple[list[tuple[dict, dict]], dict | None]:
    """Return the completed ``(op, result)`` pairs and the in-flight op, if any."""
    done, begun = [], None
    path = workdir / "journal.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines:
        entry = json.loads(line)
        if "begin" in entry:
            begun = entry["begin"]
        else:
            done.append((begun, entry["end"]))
            begun = None
    return done, begun


def run_trial(url: str, schema: str | None, seed: int, *, ops: int = 60) -> TrialResult:
    """Run one trial against a fresh store at ``url`` (and ``schema``); return its result.

    The store's tables are created here and left for the caller to drop.
    """
    rng = random.Random(seed)
    result = TrialResult(seed)
    Store.open(url, schema=schema).close()  # create before forking: no engine crosses fork
    with tempfile.TemporaryDirectory(prefix="wmkit-fault-") as tmp:
        workdir = Path(tmp)
        writer_kill = _kill_plan(rng, ops, writer=True)
        gov_kills = [_kill_plan(rng, ops, writer=False) for _ in range(2)]
        procs = [
            _CTX.Process(target=_writer, args=(url, schema, workdir, seed, ops, writer_kill)),
            *(
                _CTX.Process(target=_governor, args=(url, schema, workdir, f"g{i}", k))
                for i, k in enumerate(gov_kills)
            ),
        ]
        start = time.monotonic()
        for p in procs:
            p.start()
        timers = [
            (p, k[1])
            for p, k in zip(procs, [writer_kill, *gov_kills], strict=True)
            if k[0] == "timer"
        ]
        end_of_writer = None
        while any(p.is_alive() for p in procs):
            now = time.monotonic() - start
            for p, delay in timers:
                if p.is_alive() and now >= delay:
                    os.kill(p.pid, signal.SIGKILL)
            if end_of_writer is None and not procs[0].is_alive():
                end_of_writer = now + rng.uniform(0.0, 0.2)
            if end_of_writer is not None and now >= end_of_writer:
                for p in procs[1:]:
                    if p.is_alive():
                        os.kill(p.pid, signal.SIGKILL)
            if now > 120:
                for p in procs:
                    if p.is_alive():
                        os.kill(p.pid, signal.SIGKILL)
                result.fail("drained", "trial processes did not finish in 120 s")
            time.sleep(0.002)
        for p in procs:
            p.join()

        done, in_flight = _journal(workdir)
        result.ops_done = len(done)
        writer_code = procs[0].exitcode
        if writer_code == 0:
            result.writer_kill = "finished"
        elif writer_code != -signal.SIGKILL:
            result.fail("drained", f"writer crashed with exit code {writer_code}")
            result.writer_kill = f"crash:{writer_code}"
        else:
            op = in_flight["op"] if in_flight else "-"
            result.writer_kill = f"{writer_kill[0]}:{op}" if writer_kill[0] != "timer" else "timer"
        for i, (p, k) in enumerate(zip(procs[1:], gov_kills, strict=True)):
            where = _classify_governor(workdir / f"g{i}.kill")
            if p.exitcode != -signal.SIGKILL:
                result.fail("drained", f"governor g{i} exited with code {p.exitcode}")
            result.governor_kills.append(where or ("timer" if k[0] == "timer" else "end"))

        with Store.open(url, schema=schema, create=False) as store:
            memory = StateManager(store)
            result.pending_at_restart = Governor(store).pending()
            _check_served(memory, store, result, "before recovery")
            _check_orphans(store, result)
            report = Governor(store, worker="recovery", backoff_s=0.0).drain(timeout_s=60)
            result.recovered = report.released
            _check_drained(store, result)
            _check_served(memory, store, result, "after recovery")
            _check_facts(memory, done, in_flight, result)
            _check_double(store, result)
    return result


# ------------------------------------------------------------------- the checks


def _check_served(memory: StateManager, store: Store, result: TrialResult, when: str) -> None:
    with store.read() as conn:
        released = set(conn.execute(sa.select(release_log.c.state_id)).scalars())
        lifecycle = dict(conn.execute(sa.select(states.c.id, states.c.lifecycle)).all())
    for key in KEYS:
        state = memory.get_state(key).state
        if state is None:
            continue
        if state.id in released or lifecycle[state.id] not in LIVE:
            result.fail("served", f"{when}: {key} served state {state.id} ({lifecycle[state.id]})")


def _check_orphans(store: Store, result: TrialResult) -> None:
    with store.read() as conn:
        pending_states = set(
            conn.execute(
                sa.select(states.c.id).where(states.c.lifecycle == Lifecycle.PENDING_RELEASE.value)
            ).scalars()
        )
        logged = set(
            conn.execute(
                sa.select(release_log.c.state_id).where(
                    release_log.c.status == ReleaseStatus.PENDING.value
                )
            ).scalars()
        )
    if pending_states != logged:
        result.fail(
            "orphans",
            f"PENDING_RELEASE states without a pending entry {sorted(pending_states - logged)}, "
            f"pending entries on other states {sorted(logged - pending_states)}",
        )


def _check_drained(store: Store, result: TrialResult) -> None:
    with store.read() as conn:
        statuses = Counter(conn.execute(sa.select(release_log.c.status)).scalars())
        stuck = conn.execute(
            sa.select(sa.func.count()).where(states.c.lifecycle == Lifecycle.PENDING_RELEASE.value)
        ).scalar_one()
        done_not_archived = conn.execute(
            sa.select(sa.func.count())
            .select_from(release_log.join(states, states.c.id == release_log.c.state_id))
            .where(
                release_log.c.status == ReleaseStatus.DONE.value,
                states.c.lifecycle != Lifecycle.ARCHIVED.value,
            )
        ).scalar_one()
    if statuses[ReleaseStatus.PENDING.value] or statuses[ReleaseStatus.DEAD.value] or stuck:
        result.fail("drained", f"after recovery: {dict(statuses)}, {stuck} PENDING_RELEASE states")
    if done_not_archived:
        result.fail("drained", f"{done_not_archived} DONE releases whose state is not ARCHIVED")


def _check_facts(
    memory: StateManager, done: list[tuple[dict, dict]], in_flight: dict | None, result: TrialResult
) -> None:
    heads: dict[str, tuple[int, str] | None] = {}  # key -> (version, value) of a FACT head
    facts = []
    for op, res in done:
        if "error" in res:
            continue
        if op["op"] == "set" and res["accepted"]:
            fact = op["authority"] == "FACT"
            heads[op["key"]] = (res["version"], op["value"]) if fact else None
            if fact:
                facts.append((op["key"], res["version"], op["value"]))
        elif op["op"] == "mark":
            for key in res["keys"]:
                heads[key] = None
        elif op["op"] == "rollback":
            for key in res["rolled_back"] + res["invalidated"] + res["restored"]:
                heads[key] = None  # restored versions are not modelled: not checked
    unknown: set[str] = set()
    if in_flight is not None:
        if in_flight["op"] == "rollback" or in_flight.get("kind") == "CASCADE":
            unknown = set(KEYS)
        elif in_flight["op"] in ("set", "mark"):
            unknown = {in_flight["key"]}
    for key, version, value in facts:
        kept = {s.version: s for s in memory.history(key)}
        if version not in kept or kept[version].value != value:
            result.fail("facts", f"FACT {key} v{version} missing from history")
    for key, head in heads.items():
        if head is None or key in unknown:
            continue
        result.facts_checked += 1
        lookup = memory.get_state(key)
        if not lookup.found or (lookup.state.version, lookup.state.value) != head:
            got = None if lookup.state is None else (lookup.state.version, lookup.state.value)
            result.fail("facts", f"FACT {key} v{head[0]} lost: get_state gives {got}")


def _check_double(store: Store, result: TrialResult) -> None:
    with store.read() as conn:
        commits = Counter(
            conn.execute(
                sa.select(release_attempts.c.release_id).where(
                    release_attempts.c.outcome == "committed"
                )
            ).scalars()
        )
        done = set(
            conn.execute(
                sa.select(release_log.c.id).where(release_log.c.status == ReleaseStatus.DONE.value)
            ).scalars()
        )
        result.retried = conn.execute(
            sa.select(sa.func.count()).where(release_attempts.c.outcome == "failed")
        ).scalar_one()
    twice = sorted(r for r, n in commits.items() if n > 1)
    if twice or set(commits) != done:
        result.fail(
            "double", f"released twice {twice}; commits vs DONE differ: {set(commits) ^ done}"
        )


# --------------------------------------------------------------------- the runs


def run_trials(
    backend: str, trials: int, *, seed: int = 0, ops: int = 60, postgres_url: str | None = None
) -> list[TrialResult]:
    """Run ``trials`` trials on ``backend`` (``sqlite`` or ``postgres``), each on a fresh store."""
    results = []
    with tempfile.TemporaryDirectory(prefix="wmkit-fault-db-") as tmp:
        for t in range(trials):
            trial_seed = seed * 100_003 + t
            if backend == "sqlite":
                url, schema = str(Path(tmp) / f"trial{t}.db"), None
            else:
                url, schema = postgres_url, f"fault_{uuid.uuid4().hex[:12]}"
            try:
                results.append(run_trial(url, schema, trial_seed, ops=ops))
            finally:
                if schema is not None:
                    engine = sa.create_engine(url)
                    with engine.begin() as conn:
                        conn.execute(sa.schema.DropSchema(schema, cascade=True, if_exists=True))
                    engine.dispose()
                else:
                    for suffix in ("", "-wal", "-shm"):
                        Path(url + suffix).unlink(missing_ok=True)
    return results


def _summary(backend: str, results: list[TrialResult], seconds: float) -> Table:
    table = Table(title=f"fault trials — {backend} ({len(results)} trials, {seconds:.0f} s)")
    table.add_column("measure")
    table.add_column("value", justify="right")
    writer = Counter(r.writer_kill.partition(":")[0] for r in results)
    in_tx = Counter(
        r.writer_kill.partition(":")[2] for r in results if r.writer_kill.startswith("event:")
    )
    governors = Counter(k for r in results for k in r.governor_kills)

    def counts(counter: Counter, names: tuple[str, ...]) -> str:
        return " / ".join(str(counter[n]) for n in names)

    rows = [
        ("writer killed inside a transaction", writer["event"]),
        (
            "  ... during set / mark / rollback / stabilize / advance",
            counts(in_tx, ("set", "mark", "rollback", "stabilize", "advance")),
        ),
        ("writer killed after a commit, before journaling", writer["after_op"]),
        ("writer killed by timer / ran to the end", f"{writer['timer']} / {writer['finished']}"),
        (
            "governor killed in a release: claim / apply / log / commit",
            counts(governors, ("claim", "apply", "log", "commit")),
        ),
        (
            "governor killed in expiry / by timer / at trial end",
            counts(governors, ("expire", "timer", "end")),
        ),
        ("operations journaled", sum(r.ops_done for r in results)),
        ("releases pending at restart", sum(r.pending_at_restart for r in results)),
        ("releases committed by recovery", sum(r.recovered for r in results)),
        ("failed commit attempts, retried", sum(r.retried for r in results)),
        ("FACT heads checked", sum(r.facts_checked for r in results)),
    ]
    rows += [
        (f"trials violating '{name}'", sum(name in r.violations for r in results))
        for name in INVARIANTS
    ]
    for name, value in rows:
        table.add_row(name, str(value))
    return table


def main(argv: list[str] | None = None) -> int:
    """Run the trials, print a summary per backend; exit 1 on any violation."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="trials per backend")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--ops", type=int, default=60, help="writer operations per trial")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("WMKIT_POSTGRES_URL"),
        help="default: $WMKIT_POSTGRES_URL",
    )
    args = parser.parse_args(argv)
    # Retried failures are part of the test and counted in the table; dead letters
    # (errors) still print.
    logging.getLogger(governor_module.__name__).setLevel(logging.ERROR)
    console = Console()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    if "postgres" in backends and not args.postgres_url:
        if args.backend == "postgres":
            parser.error("postgres needs --postgres-url or WMKIT_POSTGRES_URL")
        console.print("postgres skipped: WMKIT_POSTGRES_URL is not set")
        backends.remove("postgres")
    failed = False
    for backend in backends:
        start = time.monotonic()
        results = run_trials(
            backend, args.trials, seed=args.seed, ops=args.ops, postgres_url=args.postgres_url
        )
        console.print(_summary(backend, results, time.monotonic() - start))
        for r in results:
            for invariant, messages in r.violations.items():
                failed = True
                console.print(f"[red]seed {r.seed}: {invariant}[/red]: {messages[:3]}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
