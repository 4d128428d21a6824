"""Simulators the search steps: ``env_snapshot`` (the real env, restored exactly).

:class:`EnvSnapshotSimulator` plays any env that offers ``snapshot()``/``restore(token)``
(ARCHITECTURE §3): Jericho games (``get_state``/``set_state``, never ``copy()``),
TextWorld games and the diagnostic families (whose token is their immutable state).
Each step restores the token, steps the env and snapshots the result: one restore, one
step and one snapshot of the real engine per simulation. With ``lazy=True`` the token of
a new state is its parent's token and the action instead, and the state is snapshotted
only when the search steps from it, by replaying that one action (exact: the envs are
deterministic from a snapshot). That saves the memory of a snapshot per leaf (a Jericho
snapshot holds ~9 kB of emulator memory) but costs a replayed step per leaf the search
expands later, and UCB1 expands nearly every node it visits twice: on 905.z5 at 2000
simulations, 38% more steps for snapshots that cost a tenth of a step. So it is off by
default; turn it on when the tree's memory, not time, is the limit.

Honesty (ARCHITECTURE §2): the simulator never reads ``wm.*``. The transposition key is
the env's own identity of its state, read through the planning interface: the snapshot
token itself when it is hashable (the diagnostic families' immutable states: Parcel and
Vault; hashed once per state, no text to build), else the env's ``state_hash()`` when it
has one (Jericho and TextWorld, whose tokens hold emulator arrays), else None (no
transpositions: SmartHome and Booking, whose states hold dicts and whose shell has no
``state_hash()``). The predicted delta is what a ``reader`` (text only) reads in the
predicted observation, or None without one. :func:`truth_hash` and :func:`truth_delta`
read the ground-truth keys instead: explicit opt-ins for configurations marked
``oracle`` only.

The learned ``rules`` simulator is :class:`~wmkit.search.rules_sim.RulesSimulator`,
behind the same :class:`~wmkit.search.types.Simulator` Protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from wmkit.search.types import Proposal, Transition
from wmkit.world.types import GROUND_TRUTH_PREFIX, Delta, Fact, Reader, WorldState, agent_view

__all__ = [
    "EnvSnapshotSimulator",
    "TokenKey",
    "admissible_proposal",
    "read_delta",
    "truth_delta",
    "truth_hash",
]


class _Lazy:
    """A state not snapshotted yet: one ``action`` from the snapshot ``parent``."""

    __slots__ = ("action", "parent", "token")

    def __init__(self, parent: Any, action: str) -> None:
        self.parent = parent
        self.action = action
        self.token: Any = None

    def __repr__(self) -> str:
        return f"<state after {self.action!r}{'' if self.token is None else ', snapshotted'}>"


_tuple = tuple.__new__  # builds a Transition without its Python-level __new__

KeyFn = Callable[[Mapping[str, Any]], Hashable | None]
"""Returns the transposition key of the state an env ``info`` (all keys) describes."""

DeltaFn = Callable[[Mapping[str, Any]], Delta | None]
"""Returns the change of a step from the env ``info`` (all keys) it came with."""


class TokenKey:
    """A hashable snapshot token as a transposition key, its hash computed once.

    A diagnostic family's state hashes in microseconds, as long as a step takes: the
    tree looks a key up several times per step, so the hash is kept. Equal keys are
    equal tokens (hash first, then the token's own equality).

    Raises:
        TypeError: the token is not hashable.
    """

    __slots__ = ("_hash", "token")

    def __init__(self, token: Hashable) -> None:
        self._hash = hash(token)
        self.token = token

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            type(other) is TokenKey
            and other._hash == self._hash
            and (other.token is self.token or other.token == self.token)
        )

    def __repr__(self) -> str:
        return f"TokenKey({self._hash:#x})"


def read_delta(reader: Reader, observation: str) -> Delta:
    """What ``reader`` reads in ``observation``, as the facts a step sets (text only).

    Claims about an entity named by id become added facts; claims whose subject is a
    description are left out (resolving them needs the tracked state). Nothing is
    removed: a set fact replaces the object its subject and relation had, which
    :func:`~wmkit.agents.self_correcting.compare` takes into account.
    """
    facts = {
        Fact(c.subject, c.relation, c.object) for c in reader(observation) if type(c.subject) is str
    }
    return Delta(tuple(sorted(facts)), ())


def truth_hash(info: Mapping[str, Any]) -> Hashable | None:
    """Ground truth, oracle configurations only: the env's ``wm.state_hash``, or None.

    A non-oracle agent must not use it (ARCHITECTURE §2); the default key of
    :class:`EnvSnapshotSimulator` is the env's own state identity instead.
    """
    return info.get("wm.state_hash")


def truth_delta(info: Mapping[str, Any]) -> Delta | None:
    """Ground truth, oracle configurations only: the net change from ``wm.delta``, or None.

    The action's change then the events'; a fact the command added and a later event
    removed (or the reverse) is no change. A non-oracle agent must not use it
    (ARCHITECTURE §2); it predicts deltas by reading observations (``reader``).
    """
    raw = info.get("wm.delta")
    if raw is None:
        return None
    action, event = raw["action"], raw["event"]
    a_add, a_rem = set(map(Fact._make, action["added"])), set(map(Fact._make, action["removed"]))
    e_add, e_rem = set(map(Fact._make, event["added"])), set(map(Fact._make, event["removed"]))
    added = (a_add - e_rem) | (e_add - a_rem)
    removed = (a_rem - e_add) | (e_rem - a_add)
    return Delta(tuple(sorted(added)), tuple(sorted(removed)))


def admissible_proposal(transition: Transition) -> Proposal:
    """Propose the state's ``admissible_actions`` (env order: sorted).

    With the env's ``action_priors`` (one weight per admissible action: the Jericho env's
    counted prior over its unverified candidates) as the priors; else uniform.

    Raises:
        ValueError: ``action_priors`` and ``admissible_actions`` differ in length.
    """
    info = transition.info
    actions = tuple(info.get("admissible_actions", ()))
    priors = info.get("action_priors")
    if priors is None:
        return Proposal(actions)
    if len(priors) != len(actions):
        raise ValueError(
            f"info has {len(priors)} action_priors for {len(actions)} admissible_actions"
        )
    return Proposal(actions, tuple(priors))


class EnvSnapshotSimulator:
    """Steps a live env from its own snapshot tokens (exact: the env is the model).

    The search then knows exactly what each action does. Transition ``info`` is the
    agent view (``wm.*`` removed). The transposition key is the env's own identity of
    the state (module doc: its ``state_hash()``, else a hashable token, else None) and
    the predicted delta is what ``reader`` reads in the step's observation (None
    without a reader): nothing is read from ``wm.*``. ``key_fn`` and ``delta_fn``
    replace them with functions of the env's full info; :func:`truth_hash` and
    :func:`truth_delta` there are for configurations marked ``oracle`` only.

    The env's wrappers are bypassed (``env.unwrapped`` is stepped): a wrapper's own
    counters (``TimeLimit``'s elapsed steps) must not count imagined steps. Stepping
    moves the live env: run searches inside :meth:`preserve` (or restore the root token
    after) so the real episode goes on from where it was. Tokens of stepped states are
    this simulator's own (lazy ones are not env snapshots): put the env in one with
    :meth:`restore`, not with the env's ``restore``.

    Args:
        env: the env to simulate with; it (or what it wraps) has ``snapshot()`` and
            ``restore(token)``.
        key_fn: transposition key from the full info, instead of the env's identity
            (oracle only when it reads ``wm.*``, as :func:`truth_hash` does).
        delta_fn: predicted delta from the full info, instead of ``reader``'s (oracle
            only when it reads ``wm.*``, as :func:`truth_delta` does).
        reader: reads an observation into claims (the env's text reader); gives the
            predicted delta (:func:`read_delta`) when there is no ``delta_fn``.
        lazy: snapshot a state only when the search steps from it, by replaying its
            action (see the module doc: less memory, more steps).

    Raises:
        TypeError: the env has no ``snapshot``/``restore``.
    """

    def __init__(
        self,
        env: Any,
        *,
        key_fn: KeyFn | None = None,
        delta_fn: DeltaFn | None = None,
        reader: Reader | None = None,
        lazy: bool = False,
    ) -> None:
        core = getattr(env, "unwrapped", env)
        if not (
            callable(getattr(core, "snapshot", None)) and callable(getattr(core, "restore", None))
        ):
            raise TypeError(
                f"{type(core).__name__} has no snapshot()/restore(): the env_snapshot "
                "simulator needs an env that can save and restore its state"
            )
        self.env = core
        self.key_fn = key_fn
        self.delta_fn = delta_fn
        self.reader = reader
        self.lazy = lazy
        hasher = getattr(core, "state_hash", None)
        self._hasher: Callable[[], Hashable] | None = hasher if callable(hasher) else None
        self._hashable = True  # until a token refuses to hash
        self._has_truth: bool | None = None
        self.steps = 0
        """Env steps taken so far, replays included (a cost counter)."""
        self.replays = 0
        """Steps taken again to snapshot a state the search went on from."""

    def state_key(self, token: Any = None) -> Hashable | None:
        """The env's own identity of its current state (``token``: its snapshot, if taken).

        The snapshot token (as a :class:`TokenKey`) if it is hashable, else the env's
        ``state_hash()`` if it has one, else None.
        """
        if self._hashable:
            try:
                return TokenKey(self.env.snapshot() if token is None else token)
            except TypeError:
                self._hashable = False  # tokens of this env never hash: stop trying
        return None if self._hasher is None else self._hasher()

    def root(
        self,
        observation: str,
        info: Mapping[str, Any],
        tracked: WorldState | None = None,
        *,
        step: int = 0,
        terminal: bool = False,
    ) -> Transition:
        """The transition record of the env's current state, to search from.

        Args:
            observation: the last observation the env gave.
            info: the info it came with (the full info or the agent view).
            tracked: the agent's tracked state; unused (the env holds the real one).
            step: the real step number; unused (the env counts its own).
            terminal: whether the episode is over.
        """
        token = self.env.snapshot()
        key = self.state_key(token) if self.key_fn is None else self.key_fn(info)
        return Transition(token, observation, 0.0, terminal, agent_view(info), key, None)

    def step(self, token: Any, action: str) -> Transition:
        """Put the env in ``token``'s state, send ``action`` and return what it led to."""
        # The hot path of a search: one restore, step and snapshot, the rest inline.
        env = self.env
        if type(token) is _Lazy:
            token = self._enter(token)
        else:
            env.restore(token)
        observation, reward, terminated, truncated, info = env.step(action)
        self.steps += 1
        if self.key_fn is not None:
            new = _Lazy(token, action) if self.lazy else env.snapshot()
            key = self.key_fn(info)
        elif self.lazy:
            new = _Lazy(token, action)
            key = self.state_key()
        else:
            new = env.snapshot()
            if self._hashable:
                try:
                    key = TokenKey(new)
                except TypeError:
                    self._hashable = False  # tokens of this env never hash: stop trying
                    key = self.state_key(new)
            else:
                key = None if self._hasher is None else self._hasher()
        if self.delta_fn is not None:
            delta = self.delta_fn(info)
        else:
            delta = None if self.reader is None else read_delta(self.reader, observation)
        truth = self._has_truth
        if truth is None:
            truth = self._truth(info)
        return _tuple(
            Transition,
            (
                new,
                observation,
                reward if type(reward) is float else float(reward),
                bool(terminated or truncated),
                agent_view(info) if truth else info,
                key,
                delta,
            ),
        )

    def _truth(self, info: Mapping[str, Any]) -> bool:
        """Whether infos carry ground truth to strip (decided once: the env's flag)."""
        if self._has_truth is None:
            self._has_truth = any(k.startswith(GROUND_TRUTH_PREFIX) for k in info)
        return self._has_truth

    def restore(self, token: Any) -> None:
        """Put the env in the state ``token`` stands for (one of this simulator's tokens)."""
        self._enter(token)

    def _enter(self, token: Any) -> Any:
        """Put the env in ``token``'s state and return the env snapshot of that state."""
        env = self.env
        if type(token) is _Lazy:
            if token.token is None:
                # Replay the one step from the parent's snapshot; the env is then there.
                env.restore(token.parent)
                env.step(token.action)
                token.token = env.snapshot()
                self.steps += 1
                self.replays += 1
                return token.token
            token = token.token
        env.restore(token)
        return token

    def reset(self) -> None:
        """Start an episode: nothing to forget (the env is the model)."""

    def correct(self, state: WorldState, action: str, observed: Delta) -> None:
        """Nothing to learn: the env is exact (a misread prediction is the reader's)."""
        return None

    @contextmanager
    def preserve(self) -> Iterator[Any]:
        """Snapshot the env, yield the token, and restore it on the way out, always."""
        token = self.env.snapshot()
        try:
            yield token
        finally:
            self.env.restore(token)
