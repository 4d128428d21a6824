"""SmartHome's scripted solver: it reads the true state's open instructions, so it is an oracle.

It proves every episode can be won in full by carrying out each instruction the minute
after it is given. A minute brings at most one instruction, never at the horizon's
minute, and the agent's command runs before that next minute's events, so:

- a ``now`` change meets the level the instruction was worded against (nobody changes
  a device an open instruction is about by hand, and no house rule is made on it);
- a ``when``/``nested`` condition is scheduled before the person it waits for can come
  or go (were it scheduled after, the instruction would be void), and no pending rule
  can clash, as the instruction is only given where none covers that trigger and device;
- a ``cancel`` lands before the rule can fire (rules due fire before the minute's
  instruction), and the household never cancels a rule the user asked to cancel.

Each instruction earns +1 (``max_score`` counts them), so the solver scores
``max_score``. From a state with several open instructions (another policy played
before) it carries them out oldest first.
"""

from __future__ import annotations

from wmkit.envs.smarthome.state import SmartHomeState

__all__ = ["solve"]


def solve(state: SmartHomeState) -> str:
    """Return the command that carries out the oldest open instruction, or ``wait``.

    Args:
        state: the env's true state (``SmartHomeEnv.snapshot()``).

    Returns:
        An admissible command: the instruction's own command (its first admissible
        one, ``Task.commands[0]``), ``cancel r<n>`` for a cancellation, or ``wait``.
    """
    if not state.tasks:
        return "wait"
    task = state.tasks[0]
    if task.kind == "cancel":
        return f"cancel r{task.rule + 1}"
    return task.commands[0]
