"""The reference family's rules: the pure core (``initial``, ``transition``, truth, probes).

A storeroom of four shelves. Boxes arrive, a porter moves them about (named by number,
or by colour at the ``indirection`` rate), customers ask for a box on a shelf (+1 when
the agent puts it there), and two delayed effects test what a tracker does with time:
the timer (a courier collects a box some steps after saying so) and the conditional (a
box is labelled fragile once it reaches a given shelf).
"""

from __future__ import annotations

import hashlib
from typing import Any

from gymnasium.experimental.functional import FuncEnv

from wmkit.envs.diagnostic.core import CoreDefaults, StepDraft, episode_seed, text_spaces
from wmkit.envs.diagnostic.reference.state import Box, ReferenceParams, ReferenceState
from wmkit.envs.diagnostic.reference.text import COLOURS, SHELVES, VOICE
from wmkit.envs.diagnostic.rng import StepRng
from wmkit.envs.diagnostic.truth import changes_delta, truth_info
from wmkit.world.types import Fact, Probe

__all__ = ["ReferenceCore"]

P_MOVE, P_ARRIVE, P_PICKUP, P_REQUEST = 0.25, 0.08, 0.05, 0.1
PICKUP_DELAY = (3, 9)  # steps between the courier's notice and the collection
PROBE_STREAM = 0x5EED  # probes draw from (seed ^ this, step): apart from the transition's


def _box(i: int) -> str:
    return f"box:{i + 1}"


class _Draft(StepDraft):
    """One transition's scratch state: the boxes as a list, the lines, the changes."""

    __slots__ = ("boxes", "changes", "lines", "mentioned", "params", "rng", "stated", "step")
    voice = VOICE

    def __init__(self, state: ReferenceState, rng: StepRng, step: int) -> None:
        self.rng, self.params, self.step = rng, state.params, step
        self.lines, self.mentioned, self.changes = [], {}, {}
        self.boxes, self.stated = list(state.boxes), list(state.stated)

    def place(self, i: int, on: str, kind: str, **values: str) -> None:
        """Put box ``i`` on ``on`` and say so with message ``kind``."""
        self.note(_box(i), "on", self.boxes[i].on, on)
        self.boxes[i] = self.boxes[i]._replace(on=on)
        self.stated[i] = self.step
        self.say(kind, **values)

    def arrive(self) -> None:
        """A new box, of a colour no box had yet, arrives on a random shelf."""
        used = {box.colour for box in self.boxes}
        colour = self.rng.choice([c for c in COLOURS if c not in used])
        i, shelf = len(self.boxes), self.rng.choice(SHELVES)
        self.boxes.append(Box(shelf, colour))
        self.stated.append(self.step)
        for relation, value in (("on", shelf), ("colour", colour), ("label", "plain")):
            self.note(_box(i), relation, None, value)
        self.say("arrived", box=_box(i), shelf=shelf, colour=colour)

    def present(self, avoid: tuple[int, ...] = ()) -> list[int]:
        """The boxes still in the storeroom, less ``avoid``."""
        return [i for i, b in enumerate(self.boxes) if b.on != "courier" and i not in avoid]


def _parse(action: Any, n_boxes: int) -> tuple[str, int, str]:
    """``(verb, box index, shelf)`` of a command; verb ``?`` when it is not one."""
    words = action.lower().split() if isinstance(action, str) else []
    if words == ["wait"]:
        return "wait", -1, ""
    if len(words) >= 3 and words[:2] in (["check", "box"], ["move", "box"]) and words[2].isdigit():
        i = int(words[2]) - 1
        if 0 <= i < n_boxes:
            if words[0] == "check" and len(words) == 3:
                return "check", i, ""
            if words[3:5] == ["to", "shelf"] and len(words) == 6 and f"shelf:{words[5]}" in SHELVES:
                return "move", i, f"shelf:{words[5]}"
    return "?", -1, ""


class ReferenceCore(
    CoreDefaults, FuncEnv[ReferenceState, str, str, int, bool, None, ReferenceParams]
):
    """The reference family's pure core; see the module doc.

    Args:
        params: the episode parameters; defaults to ``ReferenceParams()``.
    """

    def __init__(self, params: ReferenceParams | None = None) -> None:
        self._params = params or ReferenceParams()
        super().__init__()
        lines = 12 + len(COLOURS) + self._params.distractors  # the reset says the most
        self.observation_space, self.action_space = text_spaces(96 * lines)

    def initial(self, rng: Any, params: ReferenceParams | None = None) -> ReferenceState:
        """Return step 0: ``load`` boxes, the conditional announced; ``rng`` draws the seed."""
        params = params or self._params
        seed = episode_seed(rng)
        blank = ReferenceState(
            params, seed, 0, (), (), None, (0, "", False), (), "", (), (), (), (), 0, 0, 0
        )
        d = _Draft(blank, StepRng(seed, -1), 0)
        d.say("intro")
        for _ in range(params.load):
            d.arrive()
        i = d.rng.below(params.load)
        shelf = d.rng.choice([s for s in SHELVES if s != d.boxes[i].on])
        d.say("rule", box=_box(i), shelf=shelf)
        return self._freeze(d, blank._replace(rule=(i, shelf, False)), (), 0)

    def transition(
        self, state: ReferenceState, action: str, rng: Any = None, params: Any = None
    ) -> ReferenceState:
        """Apply the agent's command, then the world's events; a bad command spends the move."""
        step = state.step + 1
        d = _Draft(state, StepRng(state.seed, step), step)
        verb, i, shelf = _parse(action, len(state.boxes))
        reward, requests = 0, state.requests
        if verb == "wait":
            d.say("waited")
        elif verb != "?" and d.boxes[i].on == "courier":
            d.say("gone", box=_box(i))
        elif verb == "check":
            d.stated[i] = step
            d.say("checked", box=_box(i), shelf=d.boxes[i].on)
        elif verb == "move":
            d.place(i, shelf, "put", box=_box(i), shelf=shelf)
            if (i, shelf) in requests:
                reward, requests = 1, tuple(r for r in requests if r != (i, shelf))
                d.say("thanks", box=_box(i))
        else:
            d.say("not_understood")
        acted = d.take_changes()
        pickup = state.pickup
        if pickup is not None and pickup[1] <= step:
            d.place(pickup[0], "courier", "collected", box=_box(pickup[0]))
            pickup = None
        if d.rng.random() < P_MOVE and (boxes := d.present()):
            j = d.rng.choice(boxes)
            to = d.rng.choice([s for s in SHELVES if s != d.boxes[j].on])
            if d.rng.random() < state.params.indirection:
                d.place(j, to, "moved_desc", colour=d.boxes[j].colour, shelf=to)
            else:
                d.place(j, to, "moved", box=_box(j), shelf=to)
        rule_box, rule_shelf, fired = state.rule
        if not fired and d.boxes[rule_box].on == rule_shelf:
            d.note(_box(rule_box), "label", "plain", "fragile")
            d.boxes[rule_box] = d.boxes[rule_box]._replace(label="fragile")
            d.say("labelled", box=_box(rule_box))
            fired = True
        if d.rng.random() < P_ARRIVE and len(d.boxes) < len(COLOURS):
            d.arrive()
        wanted = tuple(r[0] for r in requests)
        keep = wanted if fired else (*wanted, rule_box)  # the courier leaves these alone
        if pickup is None and d.rng.random() < P_PICKUP and (boxes := d.present(keep)):
            low, high = PICKUP_DELAY
            j, delay = d.rng.choice(boxes), low + d.rng.below(high - low + 1)
            pickup = (j, step + delay)
            d.say("pickup", box=_box(j), delay=str(delay))
        busy, issued = (*wanted, pickup[0]) if pickup else wanted, 0
        last = step >= state.params.horizon - 1  # a request must leave a step to serve it
        if not last and d.rng.random() < P_REQUEST and (boxes := d.present(busy)):
            j = d.rng.choice(boxes)
            to = d.rng.choice([s for s in SHELVES if s != d.boxes[j].on])
            requests, issued = (*requests, (j, to)), 1
            d.say("request", box=_box(j), shelf=to)
        new = state._replace(
            step=step,
            pickup=pickup,
            rule=(rule_box, rule_shelf, fired),
            requests=requests,
            max_score=state.max_score + issued,
        )
        return self._freeze(d, new, acted, reward)

    @staticmethod
    def _freeze(d: _Draft, state: ReferenceState, acted: tuple, reward: int) -> ReferenceState:
        events = d.take_changes()
        for _ in range(d.params.distractors):
            d.lines.insert(1 + d.rng.below(len(d.lines)), d.rng.choice(VOICE.kinds["chatter"][0]))
        boxes = [_box(i) for i, b in enumerate(d.boxes) if b.on != "courier"]
        admissible = sorted(
            ["wait"]
            + [f"check box {b[4:]}" for b in boxes]
            + [f"move box {b[4:]} to shelf {s[-1].upper()}" for b in boxes for s in SHELVES]
        )
        return state._replace(
            boxes=tuple(d.boxes), stated=tuple(d.stated), text="\n".join(d.lines),
            mentioned=tuple(d.mentioned), action_changes=acted, event_changes=events,
            admissible=tuple(admissible), reward=reward, score=state.score + reward,
        )  # fmt: skip

    def truth(self, state: ReferenceState) -> dict[str, Any]:
        """Return the ``wm.*`` keys of ``state`` (fresh containers)."""
        facts = sorted(
            Fact(_box(i), relation, value)
            for i, box in enumerate(state.boxes)
            for relation, value in (("on", box.on), ("colour", box.colour), ("label", box.label))
        )
        key = repr((state.seed, state.step, state.boxes, state.pickup, state.rule, state.requests))
        return truth_info(
            state=facts,
            action=changes_delta(state.action_changes),
            event=changes_delta(state.event_changes),
            probes=self.probes(state),
            state_hash=hashlib.blake2b(key.encode(), digest_size=8).hexdigest(),
            mentioned=state.mentioned,
            step=state.step,
        )

    def probes(self, state: ReferenceState) -> list[Probe]:
        """At ``probe_rate``: where is a random box? Anchored where that was last said."""
        rng = StepRng(state.seed ^ PROBE_STREAM, state.step)
        if not state.boxes or rng.random() >= state.params.probe_rate:
            return []
        i = rng.below(len(state.boxes))
        chain = state.step - state.stated[i]
        kind = "breakage" if chain >= 20 else "drift"
        return [Probe(_box(i), "on", state.boxes[i].on, state.stated[i], kind)]
