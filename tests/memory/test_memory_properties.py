"""Property-based tests of conflict resolution, against a reference model (issue 16, 8).

Hypothesis draws sequences of writes (every authority, small steps so ties are
common), releases and governor drains on three keys, runs them on a real store of
each backend, and checks each answer against a few lines of model:

- authority, then recency decides: a write wins over the live version if it outranks
  it, or has the same authority and a step at least as large; a live SYSTEM version
  is never replaced by a write;
- history: every persisted write is a version, numbered 1..n in write order, with
  its value, and at most one version of a key is live;
- TEMPORARY is never stored: no TEMPORARY row in any table, and a TEMPORARY write
  holds only a key no persisted state holds;
- PENDING_RELEASE is never served: ``get_state`` returns nothing whose version is
  pending release or archived, before or after the governor commits.

The budget is fixed per test (``max_examples``) so CI stays fast; the keys of each
example are fresh (a uuid prefix), so examples share one store without meeting.
"""

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wmkit.memory import (
    Authority,
    Governor,
    Lifecycle,
    MissingStateError,
    StateManager,
)
from wmkit.memory.types import GovernedState, StoredState

KEYS = ("a", "b", "c")
AUTHORITIES = tuple(Authority)
LIVE = (Lifecycle.ACTIVE, Lifecycle.STABLE)

writes = st.tuples(
    st.just("set"), st.sampled_from(KEYS), st.sampled_from(AUTHORITIES), st.integers(0, 4)
)
releases = st.tuples(st.just("release"), st.sampled_from(KEYS))
drains = st.tuples(st.just("drain"))
operations = st.lists(st.one_of(writes, writes, writes, releases, drains), min_size=1, max_size=25)

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    # One store per test, not per example: each example writes its own keys.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


def wins(head: tuple[Authority, int] | None, authority: Authority, step: int) -> bool:
    """The reference rule: authority first, then recency (ties go to the later write)."""
    if head is None:
        return True
    held, held_step = head
    if held is Authority.SYSTEM:
        return False
    if authority.rank != held.rank:
        return authority.rank > held.rank
    return step >= held_step


class Model:
    """What the memory must answer: per key, the live head, pending flag and temporary."""

    def __init__(self) -> None:
        self.head: dict[str, tuple[Authority, int, int]] = {}  # key -> authority, step, value
        self.pending: set[str] = set()
        self.temporary: dict[str, int] = {}
        self.persisted: dict[str, list[int]] = {k: [] for k in KEYS}
        self.temporary_values: set[int] = set()

    def set(self, key: str, authority: Authority, step: int, value: int) -> bool:
        head = self.head.get(key)
        if authority is Authority.TEMPORARY:
            self.temporary_values.add(value)
            if head is not None:
                return False
            self.temporary[key] = value
            return True
        self.persisted[key].append(value)
        if not wins(None if head is None else head[:2], authority, step):
            return False
        self.head[key] = (authority, step, value)
        self.temporary.pop(key, None)
        return True

    def served(self, key: str, floor: Authority) -> int | None:
        head = self.head.get(key)
        if head is not None:
            return head[2] if head[0].rank >= floor.rank else None
        return self.temporary.get(key) if floor is Authority.TEMPORARY else None


def check_served(memory: StateManager, model: Model, name: dict[str, str]) -> None:
    for key in KEYS:
        for floor in (Authority.TEMPORARY, Authority.ASSUMPTION):
            lookup = memory.get_state(name[key], min_authority=floor)
            expected = model.served(key, floor)
            got = None if lookup.state is None else lookup.state.value
            assert got == expected, (key, floor, lookup)
            if isinstance(lookup.state, StoredState):
                # Never a version pending release or released: it is live right now.
                now = {s.id: s.lifecycle for s in memory.history(name[key])}
                assert now[lookup.state.id] in LIVE, (key, lookup)
            elif lookup.state is not None:
                assert isinstance(lookup.state, GovernedState)
                assert lookup.state.authority is Authority.TEMPORARY
                assert lookup.reason == "temporary"


def run(memory: StateManager, governor: Governor, ops) -> None:
    prefix = uuid.uuid4().hex[:8]
    name = {k: f"{prefix}:{k}" for k in KEYS}
    model = Model()
    for value, op in enumerate(ops):
        if op[0] == "set":
            _, key, authority, step = op
            result = memory.set_state(
                name[key], value, source="prop", authority=authority, step=step
            )
            assert result.accepted == model.set(key, authority, step, value), (op, result)
            if authority is Authority.TEMPORARY:
                assert result.version is None
            else:
                assert result.version == len(model.persisted[key])
        elif op[0] == "release":
            key = op[1]
            try:
                entries = memory.mark_for_release(name[key], "ARCHIVE", "prop")
            except MissingStateError:
                assert key not in model.head and key not in model.pending
                assert key not in model.temporary
            else:
                if key in model.head:
                    assert len(entries) == 1
                    del model.head[key]
                    model.pending.add(key)
                elif key in model.pending:
                    assert entries  # idempotent: the entries already pending
                else:
                    assert entries == () and model.temporary.pop(key) is not None
        else:
            governor.drain()
            model.pending.clear()
        check_served(memory, model, name)

    for key in KEYS:
        history = memory.history(name[key])
        assert [s.version for s in history] == list(range(1, len(history) + 1))
        assert [s.value for s in history] == model.persisted[key]
        assert all(s.authority is not Authority.TEMPORARY for s in history)
        live = [s for s in history if s.lifecycle in LIVE]
        assert len(live) == (key in model.head)
        if live:
            assert live[0].value == model.head[key][2]
        pending = [s for s in history if s.lifecycle is Lifecycle.PENDING_RELEASE]
        assert bool(pending) == (key in model.pending)
    # TEMPORARY writes never reached any table.
    rows = memory.store.dump()["wm_states"]
    assert not any(Authority.TEMPORARY.value in row for row in rows)
    stored = {s.value for k in KEYS for s in memory.history(name[k])}
    assert not stored & model.temporary_values


@SETTINGS
@given(ops=operations)
def test_conflicts_resolve_as_the_model_says(memory, governor, ops):
    run(memory, governor, ops)


@settings(SETTINGS, max_examples=30)
@given(
    authorities=st.lists(st.sampled_from(AUTHORITIES[1:]), min_size=2, max_size=12),
    steps=st.lists(st.integers(0, 3), min_size=12, max_size=12),
)
def test_the_live_version_is_the_best_by_authority_then_step_then_order(memory, authorities, steps):
    # The order-free statement of the rule, for persisted writes without SYSTEM
    # blocking: the live version is the highest authority; among those the largest
    # step; among those the last written.
    key = f"{uuid.uuid4().hex[:8]}:k"
    pairs = zip(authorities, steps[: len(authorities)], strict=True)
    writes = [(a, s) for a, s in pairs if a is not Authority.SYSTEM]
    if not writes:
        return
    for i, (authority, step) in enumerate(writes):
        memory.set_state(key, i, source="prop", authority=authority, step=step)
    best = max(range(len(writes)), key=lambda i: (writes[i][0].rank, writes[i][1], i))
    assert memory.get_state(key).state.value == best
    assert len(memory.history(key)) == len(writes)
