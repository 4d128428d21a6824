"""``wmkit/Parcel-v0``: the logistics diagnostic family (seed 000, §2.1 first case).

Senders book parcels to receivers; parcels advance from hub to hub by scan events, are
sometimes delayed, and get delivered, and new bookings keep ``load`` parcels active.
Customers write in asking for a parcel to go to a new address, often naming it only by
who sent it to whom, and sometimes correct that request. The agent must reroute the
right parcel before it is delivered, which needs the booking it read long ago.

Facts (all canonical lowercase; subjects are parcels, ``parcel:px-4821``):

========================  ===================================================
relation                  object
========================  ===================================================
``sender``, ``receiver``  ``person:ann`` (never change)
``address``               ``12 elm st`` (booking, depot fix, agent reroute)
``location``              ``hub:lyon`` (origin hub, then each scan)
``status``                ``booked`` | ``in_transit`` | ``delayed`` | ``delivered``
``requested_address``     set by a customer request or its correction; kept
                          after the request is served (it then equals ``address``)
========================  ===================================================

Every fact is stated in the observation of the step that sets or changes it, so a
perfect reader with perfect memory reconstructs the state from the text alone (``read``
is that reader, one observation at a time).

Actions (case and spacing are ignored): ``wait``, ``track <id>``, ``escalate <id>``,
``notify <person>``, ``reroute <id> to <address>``. A command that does not parse, or
names an unknown parcel or person, or an address we cannot ship to, is *rejected*: the
reply says so, the move is spent and the world does not advance (events that fall due
meanwhile happen at the next accepted command). Rewards: +1 when a reroute sends a
parcel to its open requested address, -1 when a reroute changes an address to anything
else, 0 otherwise.

The pure core, ``ParcelFuncEnv``, has Gymnasium's ``FuncEnv`` shape; its state is an
immutable ``ParcelState`` and a transition is a deterministic function of
``(state, action)``: per-step randomness comes from the episode seed in the state and
the step number. ``ParcelEnv`` is the thin ``gymnasium.Env[str, str]`` shell.

The package, by concern: ``text`` (what the family says, and the reader), ``state``
(parameters, records, the state and its ground truth), ``commands`` (parsing and the
admissible commands), ``rules`` (a step: the command's handler, then the world's
events), ``core`` (the pure core, and the probes) and ``solver`` (a scripted solver
over the true state).
"""

from wmkit.envs.diagnostic.shell import DiagnosticEnv
from wmkit.envs.parcel.core import ParcelFuncEnv
from wmkit.envs.parcel.solver import solve
from wmkit.envs.parcel.state import Parcel, ParcelParams, ParcelState, state_hash
from wmkit.envs.parcel.text import TEXT, VOICE, read

__all__ = [
    "TEXT",
    "VOICE",
    "Parcel",
    "ParcelEnv",
    "ParcelFuncEnv",
    "ParcelParams",
    "ParcelState",
    "read",
    "solve",
    "state_hash",
]


class ParcelEnv(DiagnosticEnv):
    """``wmkit/Parcel-v0``: the shared diagnostic shell over ``ParcelFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ``max_score`` counts the requests
    issued so far (none comes at the horizon's step). ``terminated`` is always False;
    the episode ends at ``horizon``. ``ParcelEnv.reader`` is the family's perfect
    reader, ``read``; ``ParcelEnv.solver`` its scripted solver, ``solve`` (an oracle:
    it reads the true state, ``snapshot()``).

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        horizon: steps per episode, 20..1000 (default 200).
        load: parcels active at once, >= 1 (default 4).
        paraphrase_rate: probability a message uses a non-canonical template, 0..1.
        distractors: chatter lines per step, 0..50.
        indirection: probability a customer message names its parcel by description.
        probe_rate: probability that probes are due at a step, 0..1.

    Raises:
        TypeError: a parameter has the wrong type or is unknown.
        ValueError: a parameter is out of range.
    """

    core_class = ParcelFuncEnv
    params_class = ParcelParams
    reader = staticmethod(read)
    solver = staticmethod(solve)
