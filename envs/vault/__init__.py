"""``wmkit/Vault-v0``: hidden rules to discover (seed 001's door, seed 004's self-correction).

A house of rooms joined by doors; the vault lies behind ``load`` locked doors in a row,
and the goal is to reach it and take the treasure inside. Each door on the way has a
mechanism, and the rules of the mechanisms vary by seed and are never stated:

* a *keyhole* door opens with one of the keys lying about (which one is hidden; some
  keys fit nothing);
* a *keyhole and latch* door: the right key turns the lock, yet the door will not open
  until its latch is lifted (other doors carry latches that do nothing);
* a *barred* door is worked by a lever somewhere else in the house; the bar moves some
  steps after the pull (the delay is hidden; some levers work nothing);
* the vault door has a *keypad*; its code is on a note that lies near the start, among
  decoy notes, so the code read early is needed much later;
* some side doors are on springs: they swing shut some steps after being opened.

Facts (canonical lowercase; ``*`` marks facts that never change):

==========================  ==================================================
fact                        object
==========================  ==================================================
``(player, at, R)``         the room the player is in, ``room:hall``
``(door:D, <side>, R)`` *   room R lies on the ``north|east|south|west`` side
                            of the door (two facts per door)
``(door:D, state, S)``      ``locked`` | ``closed`` | ``open``
``(door:D, lock, L)`` *     ``keyhole`` | ``bar`` | ``keypad`` | ``none``
``(door:D, latch, S)``      ``down`` | ``up`` (doors with a latch only)
``(key:K, in, X)``          a room, or ``player`` (carried); likewise notes
                            and the treasure (``note:N``, ``treasure:T``)
``(note:N, code, C)``       the four digits on the note; joins the true state
                            when the note is first read (unread writing is
                            hidden, like the rules)
``(lever:L, in, R)`` *      the room the lever is in
``(lever:L, state, S)``     ``up`` | ``down``
==========================  ==================================================

Every fact of an entity is stated in the observation that first names it (a room is
described in full on the first visit and on ``look``, briefly on later visits), and
every later change of a named entity is stated when it happens, by name or, with
probability ``indirection``, by description ("the bar of the door north of the Hall
slides back"). Changes to entities not yet named happen silently. So a perfect reader
with perfect memory (``read``) reconstructs the true facts of every named entity.

The hidden rules are not facts: they live in ``VaultWorld``, and ground truth exposes
them separately as ``info["wm.rules"]`` (sorted facts such as
``(key:brass, fits, door:oak)``, ``(door:oak, latch_blocks, yes)``,
``(lever:rusty, operates, door:iron)``, ``(lever:rusty, delay, 4)``,
``(note:torn, opens, door:steel)``, ``(door:ash, shuts_after, 3)``; ``nothing`` for
decoys) for scoring rule discovery.

Actions (case and spacing ignored): ``look``, ``inventory``, ``wait``, ``go <dir>`` (or
``north``, ``n``, ...), ``take|drop <thing>``, ``open|close <door>``, ``unlock <door>
with <key>``, ``lift|lower latch on <door>`` (``lift latch`` alone when one door here
has a latch), ``pull <lever>``, ``read <note>``, ``enter code <digits>``. A command the
game cannot carry out gets a reply saying so and changes nothing, but time passes:
scheduled mechanisms still move. Admissible actions are the commands that apply here,
wrong keys included (choosing is the puzzle); at the keypad they offer the code of every
note read so far, decoys included, but never a code the player has not read.

Rewards: +1 the first time each door on the way to the vault is opened, +10 for taking
the treasure, which ends the episode (``terminated``); ``max_score = load + 10``. The
scripted solver (``solve``, an oracle that reads the hidden rules) earns it: with the
default parameters within 50 steps (at most 43 over 20,000 seeds); a bigger house or
longer delays need a longer horizon (``load`` 6 takes it up to 70 steps, 10 up to 138,
over 1,000 seeds), and a horizon shorter than that leaves ``max_score`` out of reach.

Ground truth splits each step's change into the agent's command (``action``) and the
mechanisms (``event``: delayed lever effects, doors shutting on springs). Probes ask
where a thing is or what state a lever is in (``drift``), what a note read long ago
said (``breakage``; also asked whenever the player stands at the locked keypad), and
the state of a door last changed by a mechanism (``confusion``).

The pure core, ``VaultFuncEnv``, has Gymnasium's ``FuncEnv`` shape over an immutable
``VaultState``; a transition is a deterministic function of ``(state, action)`` whose
randomness (wording, chatter) comes from the episode seed and the step. ``VaultEnv`` is
the thin ``gymnasium.Env[str, str]`` shell. One concern a file, on the shared core
(:mod:`wmkit.envs.diagnostic`): ``text.py`` (what the family says; the reader),
``state.py`` (parameters, entities, the state and its hash), ``world.py`` (the layout
and hidden rules made from the seed), ``commands.py`` (parser, handlers, admissible
actions), ``rules.py`` (the transition's draft and the mechanisms), ``core.py`` (the
``FuncEnv`` core, ground truth and probes), ``solver.py`` (the scripted solver).
"""

from wmkit.envs.diagnostic.shell import DiagnosticEnv
from wmkit.envs.vault.core import VaultFuncEnv
from wmkit.envs.vault.solver import solve
from wmkit.envs.vault.state import (
    CLOSED,
    HELD,
    LOCKED,
    MAX_LOAD,
    OPEN,
    Door,
    Item,
    Lever,
    VaultParams,
    VaultState,
    state_hash,
)
from wmkit.envs.vault.text import (
    DOOR_NAMES,
    KEY_NAMES,
    LEVER_NAMES,
    LINE_MAX,
    NOTE_NAMES,
    ROOM_NAMES,
    TEXT,
    TREASURES,
    VOICE,
    read,
)
from wmkit.envs.vault.world import VaultWorld

__all__ = [
    "CLOSED",
    "DOOR_NAMES",
    "HELD",
    "KEY_NAMES",
    "LEVER_NAMES",
    "LINE_MAX",
    "LOCKED",
    "MAX_LOAD",
    "NOTE_NAMES",
    "OPEN",
    "ROOM_NAMES",
    "TEXT",
    "TREASURES",
    "VOICE",
    "Door",
    "Item",
    "Lever",
    "VaultEnv",
    "VaultFuncEnv",
    "VaultParams",
    "VaultState",
    "VaultWorld",
    "read",
    "solve",
    "state_hash",
]

_LINE_MAX = LINE_MAX  # the name the tests knew


class VaultEnv(DiagnosticEnv):
    """``wmkit/Vault-v0``: the shared diagnostic shell over ``VaultFuncEnv``.

    Besides the common keys (see ``DiagnosticEnv``), ground truth adds ``wm.rules``: the
    episode's hidden rules as sorted facts. ``terminated`` is True once the treasure is
    taken; the episode is truncated at ``horizon``. ``VaultEnv.reader`` is the family's
    perfect reader, ``read``; ``VaultEnv.solver`` its scripted solver, ``solve`` (an
    oracle: it reads the hidden rules).

    Args:
        ground_truth: add the ``wm.*`` keys to ``info``.
        **params: :class:`VaultParams` (``horizon``, ``load``: the locked doors on the way
            to the vault, ``paraphrase_rate``, ``distractors``, ``indirection``: how often a
            mechanism event names its door by where it is, ``probe_rate``, ``delay``: the
            ``(low, high)`` steps of lever delays and spring doors), checked as
            ``DiagnosticEnv`` says.
    """

    core_class = VaultFuncEnv
    params_class = VaultParams
    reader = staticmethod(read)
    solver = staticmethod(solve)
