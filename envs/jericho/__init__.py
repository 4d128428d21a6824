"""``wmkit/Jericho-v0``: any z-machine story through Jericho, ground truth from its object tree.

``gymnasium.make("wmkit/Jericho-v0", game="905.z5", horizon=200, ground_truth=True)``.
A bare file name is looked up in ``$WMKIT_GAMES_DIR``. A file that is not a z-machine
story (wrong version byte, header pointing outside the file, truncated) is refused at
construction with a ``ValueError`` naming it, before the emulator sees it: the emulator
would ``exit()`` the whole process on such a file.

Seeding. ``reset(seed=s)`` seeds ``np_random``, and the emulator's seed is drawn from
it (in ``[1000, 2**31)``: frotz treats 0 as "seed from the clock" and 1..999 as a
counting mode that is not random), so ``seed=0`` is a seed like any other and is never
replaced by the walkthrough's seed. ``reset(options={"walkthrough_seed": True})`` asks
for the seed Jericho's walkthrough was recorded with, explicitly.

Ground truth (``ground_truth=True``) is read from the z-machine object table in the
emulator's memory, with object names decoded from the story file (versions 3+; Jericho's
own ``get_object`` overflows its 64-byte name buffer on long names, which corrupts the
heap, and caps some games at 255 objects; neither is used here).

* Entity ids: the object's short name, lower-case (``"gold watch"``); a name shared by
  several objects gets ``#<number>`` (``"door#42"``), an unnamed object is ``"#<number>"``,
  and the player object is ``"player"``. Ids are fixed when the game is loaded.
* Facts: ``(obj, "in", parent)`` for every object with a parent (rooms have none), and
  ``(obj, "attr", "<n>")`` for every attribute set (z-machine attribute numbers; what
  they mean is the game's own business).
* ``wm.delta``: the fact changes of the step, split by a counterfactual. Before the
  command runs, ``wait`` is tried from the same state (RNG included) and undone. The
  split goes by slot (an object's parent; each attribute on its own): a slot the
  command changed that waiting changes too (a daemon, a timer, an NPC on its rounds)
  is an *event*, whatever value each run gave it; every other changed slot is the
  *action*'s (``truth.split_by_counterfactual``). A command may draw the emulator's
  random numbers differently from ``wait``, so a wanderer can end in another room
  than waiting would have put him in: that is still one event, never an action half
  and an event half. The parts are disjoint and make up the whole change. Games
  without a ``wait`` verb get no events. This doubles the emulator's work per step.
* ``wm.state_hash``: blake2b of the object table plus the RAM addresses Jericho marks
  as world state for the game; a few microseconds, so it is computed every step.
* ``wm.mentioned``: the objects whose full name appears, as whole words and ignoring
  case, in the observation (names under 3 letters and the player excluded; a name
  several objects share names those in the player's scope if any, else all of them).
* ``wm.probes``: where-is questions ``(obj, "in", parent, anchor, "breakage")``. An
  object is anchored at the last step its name appeared in the observation (the player:
  the name of the player's parent, as in a room heading); a probe is asked, with
  probability ``probe_rate`` a step, about one object anchored before this step that
  has not moved since, so the answer is what the text showed at the anchor.

TextWorld ``.z8`` files (names must start with ``tw-`` for Jericho to read their score)
and other Inform 7 stories keep most object names in routines, not in the tree: those
objects get ``#<number>`` ids, so they are never mentioned nor probed (TextWorld's own
facts belong to ``wmkit/TextWorld-v0``); the words the parser knows them by still feed
the valid-action search. Games Jericho does not know report score, max score and victory
as 0/False (Jericho cannot read them), ``moves`` counts steps, and the player object is
Jericho's guess (object 20, right for most Inform 6 games).

``admissible_actions`` come from :mod:`wmkit.envs.jericho.actions` (templates x
nouns in scope, filtered by trying them; cached by state hash). The full generator
(``admissible_actions=True``) costs a search per new state: under a second to tens of
seconds on big games. ``admissible_actions="quick"`` tries the candidates in a fixed
order (movement, then by verb usage) and stops after ``quick_outcomes`` distinct
world-changing outcomes or ``quick_tries`` commands, whichever comes first: at most
``quick_tries`` tries a state, and a subset of the full generator's outcomes (same
contract: world change or information, never ground truth). Every agent playing the
env sees the same list, so comparisons stay fair. ``informative_actions=False`` leaves
the commands that only inform out of either list where the state has a world-changing
one. ``admissible_actions=False`` skips the search and reports an empty list.

``admissible_actions="candidates"`` tries nothing: ``admissible_actions`` holds the
state's unverified candidates (every template filled with the nouns in scope, two-noun
templates under the same pair budget, ``look`` and ``inventory`` included; a few ms a
new state, cached by state hash) and ``info["action_priors"]`` their counted prior,
aligned with the list and summing to 1: the basic actions (moves, ``enter``, ``exit``,
``take all``) first, then by the verb's ClubFloyd usage, two-noun commands below the
one-noun ones of their verb, the commands that only look last
(:func:`~wmkit.envs.jericho.actions.prior_weight`). Most candidates change nothing: a
search is to try them in prior order and drop those that lead back to the same state
hash without reward. Only this mode puts ``action_priors`` in ``info``; with
``informative_actions=False`` the commands that only inform (``look``, ``inventory``,
``examine X``) are left out of the candidates.

The nouns in scope are those of the player's room and everything in it (the player
excluded). The room is found in the object tree (:func:`~wmkit.envs.jericho.objects.player_room`):
the player's top-level ancestor in Inform games, a player sitting in a vehicle or on a
bed included; the ancestor just below it where that ancestor is a container of rooms,
as every room of an Infocom story file sits in one (``ROOMS``), so that not every
noun of the game is in scope everywhere.

Commands that make the interpreter touch files (``save``, ``restore``, ``script``,
``recording``, ``replay``: they would write into the working directory or read from it,
outside any snapshot) are refused: the observation is :data:`REFUSED`, the move is
spent and the story does not run. A backslash is passed as a literal character (the
interpreter's front end would take a line starting with a backslash and a letter as its
own command, and loops forever on some).

``snapshot()`` returns a token holding the emulator state (``get_state``) and the env's
own bookkeeping; ``restore(token)`` continues from it exactly.
"""

from wmkit.envs.jericho.actions import QUICK_OUTCOMES, QUICK_TRIES
from wmkit.envs.jericho.env import EmulatorHalted, JerichoEnv, JerichoToken
from wmkit.envs.jericho.objects import player_room
from wmkit.envs.jericho.story import (
    ACTION_MAX_BYTES,
    GAMES_DIR_VAR,
    PLAYER,
    REFUSED,
    check_story,
    find_game,
)

__all__ = [
    "ACTION_MAX_BYTES",
    "GAMES_DIR_VAR",
    "PLAYER",
    "QUICK_OUTCOMES",
    "QUICK_TRIES",
    "REFUSED",
    "EmulatorHalted",
    "JerichoEnv",
    "JerichoToken",
    "check_story",
    "find_game",
    "player_room",
]
