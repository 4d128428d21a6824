"""Policies that act on what the agent tracks, one per diagnostic family, and their dispatch.

:class:`TrackedPolicy` is the policy of the tracking agents (oracle, memory, window,
rules): handed the episode's registered env id by the suite (``needs: {policy:
[env_id]}``), it plays that family's policy, so every tracker is compared under the same
policy and the task score says how good the tracked picture is. A family's policy reads
only what any agent is shown: the observation, ``admissible_actions`` and the tracked
state (the suite strips the ``wm.*`` keys for a non-oracle agent; these policies never
read them either way). Parcel's policy is :class:`~wmkit.agents.policies.GreedyPolicy`,
Booking's :class:`~wmkit.agents.policies.BookingPolicy`, Vault's
:class:`~wmkit.agents.vault.VaultPolicy`; SmartHome's and the reference family's are
here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from wmkit.agents.policies import BookingPolicy, GreedyPolicy, _admissible
from wmkit.agents.vault import VaultPolicy
from wmkit.world.types import Policy, WorldState

__all__ = ["FAMILY_POLICIES", "ReferencePolicy", "SmartHomePolicy", "TrackedPolicy"]


def _lines(observation: str) -> list[str]:
    return [line.strip().lower() for line in observation.split("\n")]


class SmartHomePolicy:
    """Carries out the instruction just given (``wmkit/SmartHome-v0``), else waits.

    An instruction states no fact (the family's reader reads nothing from it: its
    wording is the task), so no tracker holds it; what the env shows of it is the
    admissible commands it brings (the right one and its confusable twins: an increment
    as an overwrite, a condition applied now). The policy decides between them by the
    wording of the instruction's line in this step's observation, which ends with the
    change it asks for: ``the <device> to|at <setting>.`` (a set), ``the <device> up by
    <n>.``, ``raise the <device> by <n>.``, ``the <device> up a little.``, ``the <device>
    a bit higher.`` (an increment; ``down``, ``lower`` for a decrement). A future
    condition (``when``, ``in <n> minutes``) is carried out as the schedule command the
    env admits for that change, never as the change now.

    A cancellation is where the tracked state counts: ``please cancel rule R3.`` names
    the rule, but ``forget the hall light rule for Leo, please.`` (or ``... the hall
    light timer ...``) names it by its device and trigger, and the policy cancels the
    pending (``armed`` or ``waiting``) rule its tracked state holds with that ``device``
    and ``trigger``: a tracker that forgot or misread the rule leaves it pending, and
    its firing costs a point. An instruction it cannot place is left (``wait``).
    """

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        pass

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        actions = _admissible(info)
        lines = _lines(observation)
        # Schedules first: a future instruction's change is also admitted as a change now.
        changes = sorted(
            (c for c in actions if c.split(" ", 1)[0] in ("set", "adjust", "schedule")),
            key=lambda c: not c.startswith("schedule "),
        )
        for command in changes:
            change = _change(command)
            if change is not None and any(line.endswith(_asked(*change)) for line in lines):
                return command
        cancels = [c for c in actions if c.startswith("cancel ")]
        for line in lines:
            for command in cancels:  # a rule named by its id
                name = command.split(" ", 1)[1]
                if line in (f"please cancel rule {name}.", f"i no longer need {name}; cancel it."):
                    return command
            if not line.startswith(("forget ", "i changed my mind ")):
                continue
            for rule in _described(line, tracked):  # a rule named by what it does
                if (command := "cancel " + rule.split(":", 1)[1]) in cancels:
                    return command
        return "wait" if "wait" in actions else actions[0]


def _change(command: str) -> tuple[str, str, str] | None:
    """``(device words, op, value)`` of ``set``/``adjust`` or of a schedule's change."""
    head, colon, tail = command.partition(": ")
    words = (tail if colon and head.startswith("schedule ") else command).split()
    if len(words) < 4 or words[-2] != ("to" if words[0] == "set" else "by"):
        return None
    return " ".join(words[1:-2]), words[0], words[-1]


def _asked(device: str, op: str, value: str) -> tuple[str, ...]:
    """The endings of an instruction line that asks for this change."""
    the = f"the {device}"
    if op == "set":
        return f"{the} to {value}.", f"{the} at {value}."
    amount = value[1:]
    if value.startswith("+"):
        return (
            f"{the} up by {amount}.",
            f"raise {the} by {amount}.",
            f"{the} up a little.",
            f"{the} a bit higher.",
        )
    return (
        f"{the} down by {amount}.",
        f"lower {the} by {amount}.",
        f"{the} down a little.",
        f"{the} a bit lower.",
    )


def _device_words(device: str) -> str:
    """How a command names a device id: ``light:hall`` -> ``hall light``."""
    kind, _, room = device.partition(":")
    return (
        "thermostat" if kind == "thermostat" else f"{room} {'blinds' if kind == 'blind' else kind}"
    )


def _described(line: str, tracked: WorldState) -> list[str]:
    """The pending tracked rules ``line`` asks to cancel by device and trigger, newest first."""
    asked = []
    for rule in sorted({s for s, r, _ in tracked if s.startswith("rule:") and r == "status"}):
        if tracked.value(rule, "status") not in ("armed", "waiting"):
            continue
        device, trigger = tracked.value(rule, "device"), tracked.value(rule, "trigger")
        if device is None or trigger is None:
            continue
        what = _device_words(device) + (
            " timer" if trigger == "clock" else f" rule for {trigger.split(':', 1)[-1]}"
        )
        if line in (
            f"forget the {what}, please.",
            f"i changed my mind about the {what}: cancel it.",
        ):
            asked.append(rule)
    return sorted(asked, key=lambda r: int(r[6:]) if r[6:].isdigit() else 0, reverse=True)


class ReferencePolicy:
    """Serves the request just made (``wmkit/Reference-v0``), else waits.

    A request (``Please get box 3 onto shelf B.``, ``Box 3 belongs on shelf B.``) states
    no fact, like SmartHome's instructions: the policy sends the admissible ``move box
    <n> to shelf <x>`` its line asks for, unless the tracked state already has the box
    on that shelf (``(box:<n>, on, shelf:<x>)``).
    """

    def reset(self, rng: np.random.Generator) -> None:  # noqa: D102
        pass

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:  # noqa: D102
        actions = _admissible(info)
        lines = set(_lines(observation))
        for command in actions:
            words = command.split()
            if words[:2] != ["move", "box"] or len(words) != 6:
                continue
            box, shelf = words[2], words[5].lower()
            asked = {
                f"please get box {box} onto shelf {shelf}.",
                f"box {box} belongs on shelf {shelf}.",
            }
            if lines & asked and tracked.value(f"box:{box}", "on") != f"shelf:{shelf}":
                return command
        return "wait" if "wait" in actions else actions[0]


FAMILY_POLICIES: dict[str, Callable[[], Policy]] = {
    "wmkit/Parcel-v0": GreedyPolicy,
    "wmkit/SmartHome-v0": SmartHomePolicy,
    "wmkit/Booking-v0": BookingPolicy,
    "wmkit/Vault-v0": VaultPolicy,
    "wmkit/Reference-v0": ReferencePolicy,
}
"""Registered env id -> the family's tracked-state policy (a new family adds its own)."""


class TrackedPolicy:
    """The family's tracked-state policy for the episode's env (a Policy).

    The suite hands it the env's registered id (``needs: {policy: [env_id]}``, public:
    not ground truth) and it plays :data:`FAMILY_POLICIES` of that id, so the tracking
    agents share one policy per family and differ only in their trackers.

    Args:
        env_id: the episode's registered env id (``wmkit/Vault-v0``).

    Raises:
        ValueError: no family policy is known for ``env_id`` (real games: use
            ``greedy_games``).
    """

    def __init__(self, env_id: str) -> None:
        factory = FAMILY_POLICIES.get(env_id)
        if factory is None:
            raise ValueError(
                f"no tracked-state policy for env {env_id!r}; known: "
                f"{sorted(FAMILY_POLICIES)} (real games have their own agents: greedy_games, "
                "mcts_games)"
            )
        self.env_id = env_id
        self.policy = factory()

    def reset(self, rng: np.random.Generator) -> None:
        """Start a new episode of the family's policy."""
        self.policy.reset(rng)

    def act(self, observation: str, info: Mapping[str, Any], tracked: WorldState) -> str:
        """Return the family's policy's command."""
        return self.policy.act(observation, info, tracked)
