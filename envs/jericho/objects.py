"""The object tree in the z-machine's dynamic memory: links, the player's room, scope.

Pure functions of the object table's rows (a ``(count, entry)`` byte array) and of the
parent/sibling/child links read from them; :class:`~wmkit.envs.jericho.env.JerichoEnv`
reads the rows from the emulator's RAM and calls these.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ROOMS_MIN", "ROOMS_RATIO", "in_scope", "links", "player_room"]


def links(rows: np.ndarray, version: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return ``(parent, sibling, child)`` object numbers per row of the object table.

    Versions 1-3 keep each link in a byte (entry bytes 4, 5, 6), later ones in a
    big-endian word (bytes 6-11).
    """
    if version <= 3:
        return (
            rows[:, 4].astype(np.int64),
            rows[:, 5].astype(np.int64),
            rows[:, 6].astype(np.int64),
        )
    words = rows[:, 6:12].astype(np.int64)
    return (
        words[:, 0] << 8 | words[:, 1],
        words[:, 2] << 8 | words[:, 3],
        words[:, 4] << 8 | words[:, 5],
    )


ROOMS_RATIO = 2
"""A top-level object holding, directly, at least this many times as many objects as
there are top-level objects is a container of rooms (:func:`player_room`)."""
ROOMS_MIN = 10
"""Nor is an object holding fewer than this many objects, directly, a container of rooms."""


def player_room(parents: Sequence[int] | np.ndarray, player: int) -> int:
    """Return the object number of the room the player is in; 0 if none is found.

    Args:
        parents: the object tree's parent links: ``parents[i]`` is the parent of object
            ``i + 1`` (0: none).
        player: the player's object number.

    The player's ancestors are climbed to the top-level one (parent 0), ``top``.

    * Inform games keep every room at the top level: the room is ``top``, also when
      the player sits in a vehicle, on a bed or in a box inside it.
    * Infocom's story files put every room inside one container object (``ROOMS`` in
      their ZIL source), itself top-level: the room is then the ancestor just below
      ``top``, the player in a vehicle inside the room included.

    ``top`` is taken for a container of rooms when the player is not its direct child
    and it directly holds at least :data:`ROOMS_RATIO` times as many objects as there
    are top-level objects, and at least :data:`ROOMS_MIN`. A container of rooms holds
    every room of the game, while the rooms being inside it leaves few objects at the
    top (Zork I's source puts its 110 rooms in ``ROOMS``; beside it at the top are
    the globals' container and the objects not in play at the start); an Inform room
    holds its own things, and the top holds every room besides the library's and the
    compiler's own objects. None of the free games has the Infocom layout, so the
    threshold is set from the Inform side with room to spare: on the walkthrough
    states of the 28 free games the rule gives the room the old one gave (the
    player's outermost container), the largest ratio of the player's room being 1.55
    (acorncourt.z5, one room, the player never inside anything there) and 0.38 at
    the states where the player sits in something (905.z5, in bed). A ZIL game with fewer
    than twice as many rooms as top-level objects would be read as Inform, its scope
    then every noun of the game as before. ``scripts/compare_valid_actions.py rooms``
    redoes the check. (Objects a ZIL room lists as its local globals, such as Zork I's
    kitchen window, are not in the tree under the room, so they are not in scope.)
    """
    count = len(parents)
    chain: list[int] = []  # the player's ancestors, nearest first
    here = player
    while 0 < here <= count and len(chain) <= count:  # a damaged tree must not loop us
        here = int(parents[here - 1])
        if here == 0:
            break
        chain.append(here)
    if not chain or here != 0:
        return 0
    top = chain[-1]
    if len(chain) >= 2:
        tree = np.asarray(parents)
        held = int(np.count_nonzero(tree == top))
        if held >= ROOMS_MIN and held >= ROOMS_RATIO * int(np.count_nonzero(tree == 0)):
            return chain[-2]
    return top


def in_scope(
    parents: np.ndarray, siblings: np.ndarray, children: np.ndarray, player: int
) -> list[int]:
    """The player's room (:func:`player_room`) and what is in it, at any depth.

    The room first, then the tree below it depth first; the player is left out. An
    empty list when no room is found.
    """
    root, count = player_room(parents, player), len(parents)
    found: list[int] = [root] if root else []
    seen: set[int] = set()
    stack = [int(children[root - 1])] if root else []
    while stack:
        num = stack.pop()
        if not 0 < num <= count or num in seen:  # a damaged tree must not loop us
            continue
        seen.add(num)
        if num != player:
            found.append(num)
        stack += (int(siblings[num - 1]), int(children[num - 1]))
    return found
