"""The Parcel family's pure core: ``initial``, ``transition``, ground truth and probes."""

from __future__ import annotations

from typing import Any

import immutables
from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic.core import CoreDefaults, episode_seed, text_spaces
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import truth_info
from wmkit.envs.parcel.commands import NOT_UNDERSTOOD, PARSES
from wmkit.envs.parcel.rules import (
    HANDLERS,
    Draft,
    book,
    chatter,
    freeze,
    reject,
    run_events,
    say_intro,
)
from wmkit.envs.parcel.state import (
    _ADDRESS,
    _ADDRESS_AT,
    _BOOKED_AT,
    _CORRECTED,
    _ID,
    _LOCATION,
    _LOCATION_AT,
    _RECEIVER,
    _REQUESTED,
    _REQUESTED_AT,
    _SENDER,
    _STATUS,
    _STATUS_AT,
    ParcelParams,
    ParcelState,
    _carry_world,
    _changes,
    _deltas,
    _hash,
    _new,
    _Record,
    _world,
)
from wmkit.envs.parcel.text import _LINE_MAX
from wmkit.world.types import Probe

__all__ = ["ParcelFuncEnv"]


class ParcelFuncEnv(CoreDefaults, FuncEnv[ParcelState, str, str, int, bool, None, ParcelParams]):
    """The Parcel family as pure functions over an immutable ``ParcelState``.

    ``transition(state, action)`` is deterministic: its randomness is drawn from the
    episode seed carried in the state and the step number, so the same code serves as
    the planner's simulator and the state value is the snapshot. The ``rng`` and
    ``params`` arguments of the ``FuncEnv`` signatures are accepted but only ``initial``
    uses them: later steps read the parameters stored in the state.

    Args:
        params: the episode parameters; defaults to ``ParcelParams()``.
    """

    def __init__(self, params: ParcelParams | None = None) -> None:
        self._params = params or ParcelParams()
        self._truth = False  # whether ground truth was ever asked of this core
        self._starts: dict[int, list[int]] = {}  # seed -> StepRng(seed, step).x by step
        self._rng = StepRng(0, 0)  # the transition's generator and draft: see transition
        self._draft = Draft.__new__(Draft)
        super().__init__()
        p = self._params
        # Lines per step: reply, one event per active parcel, a booking per delivery,
        # three customer/depot messages, the chatter; plus headroom.
        self.observation_space, self.action_space = text_spaces(
            _LINE_MAX * (2 * p.load + p.distractors + 8)
        )

    def initial(self, rng: Any, params: ParcelParams | None = None) -> ParcelState:
        """Return the state at reset: ``load`` fresh bookings, step 0.

        Args:
            rng: a ``numpy.random.Generator`` (one draw makes the episode seed) or an int
                used as the episode seed directly.
            params: overrides the core's parameters for this episode.
        """
        params = params or self._params
        seed, empty = episode_seed(rng), immutables.Map()
        blank = _new(
            ParcelState,
            (
                params, seed, 0, (), (), empty, empty, empty, "", (), False, ((), ()), (),
                None, None, 0, 0, 0,
            ),
        )  # fmt: skip
        d = Draft(blank, StepRng(seed, -1), 0)  # steps draw from (seed, step >= 1)
        self._episode_starts(seed)
        say_intro(d)
        for _ in range(params.load):
            book(d)
        chatter(d, params.distractors)
        return freeze(d, advanced=False)

    def transition(
        self, state: ParcelState, action: str, rng: Any = None, params: Any = None
    ) -> ParcelState:
        """Apply the agent's command, then the world events due at the next step.

        A rejected command (unparsable, unknown parcel or person, bad address) spends the
        move with a reply and leaves the world as it was: no events, no probes; events
        that fell due meanwhile happen at the next accepted command.
        """
        command = PARSES[action] if isinstance(action, str) else NOT_UNDERSTOOD
        params, seed, step = state[0], state[1], state[2] + 1  # (by position: see Draft)
        starts = self._starts.get(seed) or self._episode_starts(seed)
        # One generator and one draft per core, moved to the step's start (fresh ones
        # each step cost ~3% of a step): a transition is their only user, start to end,
        # so a core must not run transitions in two threads at once (none in wmkit does).
        rng = self._rng
        rng.x = starts[step] if step < len(starts) else StepRng(seed, step).x
        d = self._draft.start(state, rng, step)
        if (reply := HANDLERS[command[0]](d, command)) is not None:
            new = reject(state, d, reply)
        else:
            run_events(d, params.load, params.indirection)
            chatter(d, params.distractors)
            new = freeze(d)
        if self._truth:  # facts and digest follow from the last state's, once known
            _carry_world(state, new)
        return new

    def _episode_starts(self, seed: int) -> list[int]:
        """Where the generator starts at each step of episode ``seed``, kept by seed.

        Seeding a ``StepRng`` costs ~0.45 us, a few percent of a step: an episode's
        starts are made at once (``StepRng.starts``) and each step resumes its own.
        """
        if len(self._starts) >= 64:
            self._starts.clear()
        starts = self._starts[seed] = StepRng.starts(seed, 0, self._params.horizon + 1)
        return starts

    def truth(self, state: ParcelState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers)."""
        # From now on transitions carry the facts and digest over (see _carry_world):
        # without ground truth they are never computed at all. The step's changes are
        # found once, for both the world and the deltas.
        self._truth = True
        changes = _changes(state)
        facts, digest = _world(state, changes)
        action, event = _deltas(changes)
        return truth_info(
            state=facts,
            action=action,
            event=event,
            probes=self.probes(state),
            state_hash=_hash(state, digest),
            mentioned=state.said,
            step=state.step,
        )

    def probes(self, state: ParcelState) -> list[Probe]:
        """Return the probes due at ``state`` (none after a rejected command)."""
        return list(_probes(state)) if state.advanced else []

    @staticmethod
    def admissible_actions(state: ParcelState) -> list[str]:
        """Return the commands that do something here, sorted.

        ``wait``; ``track``/``escalate`` for each active parcel; ``notify`` for each
        receiver of an active parcel; ``reroute <id> to <address>`` for each active
        parcel and each address of an open request (so wrong reroutes are admissible
        too: choosing the right parcel is the task).
        """
        return list(state.admissible)


# --- probes ----------------------------------------------------------------------------

_PROBE_STREAM = 0x9B0BE5  # probes draw from (seed ^ this, step): apart from the transition's
_PROBE_KINDS = ("drift", "breakage", "confusion")
_BREAKAGE = (("sender", _SENDER), ("receiver", _RECEIVER))  # relation, record field


def _corrected(state: ParcelState, rng: StepRng) -> _Record | None:
    """A uniformly chosen parcel whose address or request changed, or None if none did."""
    # By rejection (most parcels of a long episode were corrected), then by a scan.
    booked, record = len(state.index), state.record
    for _ in range(16):
        if (p := record(rng.below(booked)))[_CORRECTED]:
            return p
    corrected = [p for i in range(booked) if (p := record(i))[_CORRECTED]]
    return rng.choice(corrected) if corrected else None


def _probes(state: ParcelState) -> tuple[Probe, ...]:
    """Questions due at ``state``'s step, about parcels already mentioned; old and recent.

    A function of the state alone, so it is computed only when ground truth is asked for.
    """
    rng = StepRng(state.seed ^ _PROBE_STREAM, state.step)
    if rng.random() >= state.params.probe_rate:
        return ()
    booked, record = len(state.index), state.record
    probes: dict[tuple[str, str], Probe] = {}
    # Records read by field position and probes built as plain tuples: this runs at
    # every third step with ground truth on (see state._ParcelFields on why).
    for _ in range(1 + (rng.random() < 0.5) + (rng.random() < 0.25)):
        kind = rng.choice(_PROBE_KINDS)
        if kind == "confusion" and (p := _corrected(state, rng)) is not None:
            if p[_REQUESTED] and rng.random() < 0.5:
                probe = (p[_ID], "requested_address", p[_REQUESTED], p[_REQUESTED_AT], kind)
            else:
                probe = (p[_ID], "address", p[_ADDRESS], p[_ADDRESS_AT], kind)
        else:
            # Half the picks among every parcel ever booked (mostly old, long chains),
            # half among the active ones (recent, short chains).
            p = record(rng.below(booked)) if rng.random() < 0.5 else rng.choice(state.live)
            if kind == "breakage":
                relation, field = rng.choice(_BREAKAGE)
                probe = (p[_ID], relation, p[field], p[_BOOKED_AT], kind)
            elif rng.random() < 0.5:
                probe = (p[_ID], "location", p[_LOCATION], p[_LOCATION_AT], "drift")
            else:
                probe = (p[_ID], "status", p[_STATUS], p[_STATUS_AT], "drift")
        if probe[:2] not in probes:
            probes[probe[:2]] = _new(Probe, probe)
    return tuple(probes.values())
