"""Fault trials with real processes: SIGKILL the writer and two governors, then check.

Each trial (``wmkit.scripts.fault_memory.run_trial``) forks a writer and two
governors, kills each at a random point of either release phase, restarts, and checks
that no FACT is lost, nothing pending or released is served, every pending release
completes, and none is committed twice. ``scripts/fault_memory.py`` runs the same
trials at scale (200+ per backend).
"""

import os

from wmkit.scripts.fault_memory import run_trials

TRIALS = int(os.environ.get("WMKIT_FAULT_TRIALS", "24"))


def test_fault_trials_keep_every_invariant(backend, location):
    url, _ = location
    sqlite = backend == "sqlite"
    results = run_trials(
        backend,
        TRIALS,
        seed=7,
        ops=60,
        postgres_url=None if sqlite else url,
    )
    broken = {f"seed {r.seed}": r.violations for r in results if r.violations}
    assert broken == {}, broken
    # The trials must have hurt: writers killed inside transactions, governors killed
    # while committing, and releases left pending for the restart to finish.
    assert sum(r.writer_kill.startswith("event:") for r in results) >= TRIALS // 4
    in_release = {"claim", "apply", "log", "commit"}
    assert sum(bool(in_release & set(r.governor_kills)) for r in results) >= 1
    assert sum(r.pending_at_restart for r in results) >= 1
    assert sum(r.recovered for r in results) >= sum(r.pending_at_restart for r in results)
    assert sum(r.facts_checked for r in results) >= TRIALS
