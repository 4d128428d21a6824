"""The Vault family's pure core, ``VaultFuncEnv``: Gymnasium's ``FuncEnv`` over ``VaultState``.

A transition is draft -> handler -> events -> chatter -> freeze; ground truth (``truth``)
and the probes are read off a state, never stored in it.
"""

from __future__ import annotations

from typing import Any

from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic.core import CoreDefaults, episode_seed, text_spaces
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import changes_delta, truth_info
from wmkit.envs.vault.commands import command
from wmkit.envs.vault.rules import Draft, run_events
from wmkit.envs.vault.state import LOCKED, VaultParams, VaultState, state_hash, vector
from wmkit.envs.vault.text import LINE_MAX, VOICE
from wmkit.envs.vault.world import EpisodeMemo, VaultWorld
from wmkit.world.types import Fact, Probe

__all__ = ["PROBE_STREAM", "VaultFuncEnv"]

PROBE_STREAM = 0x5EED  # probes draw from (seed ^ this, step): apart from the transition's

_FORMS = VOICE.forms


def _max_lines(p: VaultParams) -> int:
    # Reply + move + description (player, four exits, levers, items) or inventory, one
    # event per door, chatter; generous headroom.
    n = p.load
    doors, items, levers = 3 * n + 1, 2 * n + 6, n + n // 3
    return 8 + 2 * doors + items + levers + p.distractors


class VaultFuncEnv(CoreDefaults, FuncEnv[VaultState, str, str, int, bool, None, VaultParams]):
    """The Vault family as pure functions over an immutable ``VaultState``.

    ``transition(state, action)`` is deterministic: its randomness is drawn from the
    episode seed carried in the state and the step number (``StepRng``), so the same
    code serves as the planner's simulator and the state value is the snapshot. The
    ``rng`` and ``params`` arguments of the ``FuncEnv`` signatures are accepted but only
    ``initial`` uses them. The core keeps the memo tables of the episode it last stepped
    (:class:`~wmkit.envs.vault.world.EpisodeMemo`); they change no result.

    Args:
        params: the episode parameters; defaults to ``VaultParams()``.
    """

    def __init__(self, params: VaultParams | None = None) -> None:
        self._params = params or VaultParams()
        super().__init__()
        self.observation_space, self.action_space = text_spaces(LINE_MAX * _max_lines(self._params))
        self._memo = EpisodeMemo(None)

    def memo(self, world: VaultWorld) -> EpisodeMemo:
        """Return the memo tables of ``world``'s episode (new ones for a new episode)."""
        if self._memo.world is not world:
            self._memo = EpisodeMemo(world)
        return self._memo

    def initial(self, rng: Any, params: VaultParams | None = None) -> VaultState:
        """Return the state at reset: a fresh house, the player at its entrance, step 0.

        The episode seed is one draw from ``rng`` (a numpy ``Generator``), or ``rng``
        itself when it is an int; ``params``, if given, replace the core's.
        """
        params = params or self._params
        w = VaultWorld(episode_seed(rng), params)
        blank = VaultState(
            w, 0, 0, w.initial_doors, w.initial_latches, (0,) * len(w.levers),
            tuple(item.home for item in w.items), 0, 0, (), 0, 0, frozenset(),
            (-1,) * len(w.slots), (), "", (), (), (), 0, 0, False,
        )  # fmt: skip
        d = Draft(blank, self.memo(w), 0)
        d.say("intro")
        d.describe(0)
        d.chatter()
        return d.freeze(0, ())

    def transition(
        self, state: VaultState, action: str, rng: Any = None, params: Any = None
    ) -> VaultState:
        """Apply the agent's command, then the mechanisms due at the next step.

        A command that cannot be carried out gets a reply and changes nothing, but the
        move is spent and the mechanisms still run.
        """
        memo = self._memo if self._memo.world is state.world else self.memo(state.world)
        d = Draft(state, memo, state.step + 1)
        handler, args = command(memo, action)
        reward = handler(d, *args)
        acted = d.take_changes() if d.changes else ()
        if d.pending and d.pending[0][0] <= d.step:
            run_events(d)
        d.chatter()
        return d.freeze(reward, acted)

    def terminal(self, state: VaultState, rng: Any = None, params: Any = None) -> bool:
        """Return True once the treasure has been taken."""
        return state.won

    def state_info(self, state: VaultState, params: Any = None) -> dict[str, Any]:
        """Return the agent-visible info: admissible actions, score, max_score, moves."""
        return {
            "admissible_actions": list(state.actions),
            "score": state.score,
            "max_score": state.world.max_score,
            "moves": state.step,
        }

    def truth(self, state: VaultState) -> dict[str, Any]:
        """Return the ground-truth ``wm.*`` info of ``state`` (fresh containers).

        Besides the common keys, ``wm.rules`` lists the hidden rules (sorted facts).
        """
        vec = vector(state)
        return truth_info(
            state=self.facts(state, vec),
            action=changes_delta(state.action_changes),
            event=changes_delta(state.event_changes),
            probes=_probes(state, vec),
            state_hash=state_hash(state, vec),
            mentioned=[v[p] for kind, _, v in state.messages for p in _FORMS[kind].entities],
            rules=list(state.world.rules),
            step=state.step,
        )

    def facts(self, state: VaultState, vec: tuple[int, ...] | None = None) -> list[Fact]:
        """Return the true facts of ``state``, sorted (``wm.state``); a fresh list.

        ``vec`` is ``vector(state)`` when the caller has it.
        """
        w = state.world
        vec = vec or vector(state)
        known = self.memo(w).known
        found = known.get(vec)
        if found is None:
            plan, order = w.fact_plan
            found = [f for k in order if (f := plan[k][1][vec[plan[k][0]]]) is not None]
            if len(known) >= 20_000:
                known.clear()
            known[vec] = found
        return found.copy()

    def probes(self, state: VaultState) -> list[Probe]:
        """Return the probes due at ``state``."""
        return list(_probes(state))


def _probes(state: VaultState, vec: tuple[int, ...] | None = None) -> tuple[Probe, ...]:
    """Questions due now about named entities: drawn from (seed ^ PROBE_STREAM, step)."""
    w, mentioned = state.world, state.mentioned
    probes: dict[int, Probe] = {}
    # Decision point: at the locked keypad, the code read long ago is what matters.
    note = w.true_note
    at_keypad = (
        w.keypad in w.adjacent[state.player]
        and state.doors[w.keypad] == LOCKED
        and state.read >> note & 1
    )
    rng = StepRng(w.seed ^ PROBE_STREAM, state.step)
    due = rng.random() < state.params.probe_rate
    if not (due or at_keypad):
        return ()
    plan = w.fact_plan[0]
    vec = vec or vector(state)

    def ask(slot: int, kind: str) -> None:
        pos, table = plan[slot]
        fact = table[vec[pos]]
        if fact is not None and slot not in probes:
            probes[slot] = Probe(*fact, state.anchors[slot], kind)

    if at_keypad:
        ask(w.item_slots[note][1], "breakage")
    if not due:
        return tuple(probes.values())
    for _ in range(1 + (rng.random() < 0.5)):
        kind = ("drift", "breakage", "confusion")[rng.below(3)]
        pool: list[int] = []
        if kind == "confusion":
            pool = [
                w.door_slots[i][2]
                for i, d in enumerate(w.doors)
                if state.evented >> i & 1 and d.id in mentioned
            ]
        elif kind == "breakage":
            pool = [w.item_slots[j][1] for j in range(len(w.items)) if state.read >> j & 1]
            if not pool or rng.random() < 0.3:
                # The door sides: stated once, when a room was last described.
                pool += [
                    w.door_slots[i][rng.below(2)]
                    for i, d in enumerate(w.doors)
                    if d.id in mentioned
                ]
        if not pool:
            kind = "drift"
            pool = [w.item_slots[j][0] for j, it in enumerate(w.items) if it.id in mentioned]
            pool += [w.lever_slots[k][1] for k, lv in enumerate(w.levers) if lv.id in mentioned]
            pool += [w.door_slots[i][2] for i, d in enumerate(w.doors) if d.id in mentioned]
            pool.append(0)
        ask(pool[rng.below(len(pool))], kind)
    return tuple(probes.values())
