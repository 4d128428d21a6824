"""The story file and the emulator's text: what the env reads before Jericho runs.

A z-machine story file is checked (:func:`check_story`) before the emulator sees it, and
its object names and parser words are decoded here from the file itself (versions 3+),
never through Jericho's ``get_object`` (it overflows its 64-byte name buffer on long
names). The text rules (what an observation may hold, which commands touch files) sit
here too: they are the contract of the emulator's input and output.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = [
    "ACTION_MAX_BYTES",
    "GAMES_DIR_VAR",
    "OBS_CHARSET",
    "PLAYER",
    "REFUSED",
    "check_story",
    "find_game",
]

GAMES_DIR_VAR = "WMKIT_GAMES_DIR"
"""Environment variable naming the folder bare game file names are looked up in."""

ACTION_MAX_BYTES = 198
"""The longest command the emulator reads (Jericho truncates longer ones)."""

PLAYER = "player"
_MIN_NAME = 3

# Every character Jericho can return (it decodes cp1252) minus control characters;
# tabs and newlines stay, the other whitespace controls become spaces.
_CP1252 = bytes(range(256)).decode("cp1252", errors="ignore")
OBS_CHARSET = "".join(c for c in _CP1252 if c.isprintable() or c in "\n\t")
_STRIP = re.compile("[" + re.escape("".join(c for c in _CP1252 if c not in OBS_CHARSET)) + "]")
_SPACES = {ord(c): " " for c in "\r\x0b\x0c\xa0"}
# Backslashes are accepted (escaped, counting twice) but left out of the space, so that
# every string the space holds fits the emulator's buffer.
_ACTION_CHARSET = "".join(chr(c) for c in range(32, 127) if chr(c) != "\\")
# Story verbs that make the interpreter read or write files in the working directory.
_FILE_VERBS = r"save|restore|script|transcript?|unscript|noscript|recording|replay"
_FILE_COMMAND = re.compile(rf"(?:^|[.,;!?]|\bthen\b)\s*(?:{_FILE_VERBS})\b")
REFUSED = "[wmkit: that command makes the story read or write files; it was not run.]"
"""The observation for a refused file command."""


def _clean(text: str) -> str:
    # Jericho passes bell characters and other controls through; the space forbids them.
    # (The isprintable() test is a fast path: a regex scan costs more than the wrapper.)
    if text.replace("\n", "").isprintable() or _STRIP.search(text) is None:
        return text
    return _STRIP.sub("", text.translate(_SPACES))


# --- the story file ---------------------------------------------------------------------


def find_game(game: str | os.PathLike[str]) -> Path:
    """Return the story file ``game`` names: a path, or a bare name in ``$WMKIT_GAMES_DIR``.

    Raises:
        FileNotFoundError: neither exists.
    """
    path = Path(game).expanduser()
    if path.is_file():
        return path.resolve()
    games_dir = os.environ.get(GAMES_DIR_VAR)
    if games_dir and path.parent == Path():
        candidate = Path(games_dir) / path
        if candidate.is_file():
            return candidate.resolve()
        raise FileNotFoundError(f"game file {str(game)!r} not found, nor in {games_dir}")
    hint = f" (set {GAMES_DIR_VAR} to look bare names up in a folder)" if not games_dir else ""
    raise FileNotFoundError(f"game file {str(game)!r} not found{hint}")


def _word(data: bytes | np.ndarray, address: int) -> int:
    return int(data[address]) << 8 | int(data[address + 1])


def check_story(path: str | os.PathLike[str]) -> bytes:
    """Return the story file's bytes after checking its header is a z-machine header.

    Catches files the emulator would ``exit()`` or crash on: not a story at all, a
    version byte outside 1..8, header addresses outside the file, a truncated file.

    Raises:
        ValueError: the file is not a usable z-machine story; the message names it.
    """
    data = Path(path).read_bytes()

    def refuse(why: str) -> ValueError:
        return ValueError(f"{path} is not a z-machine story file: {why}")

    if len(data) < 64:
        raise refuse(f"{len(data)} bytes, shorter than the 64-byte header")
    version = data[0]
    if not 1 <= version <= 8:
        raise refuse(f"version byte is {version}, not 1..8")
    size = len(data)
    static = _word(data, 0x0E)
    if not 64 <= static <= size:
        raise refuse(f"static memory starts at {static}, outside the file")
    for name, offset, limit in (("object table", 0x0A, static), ("dictionary", 0x08, size)):
        address = _word(data, offset)
        if not 64 <= address < limit:
            raise refuse(f"{name} address {address} is outside the file")
    scale = 2 if version <= 3 else 4 if version <= 5 else 8
    length = _word(data, 0x1A) * scale
    if length > size:
        raise refuse(f"truncated: the header says {length} bytes, the file has {size}")
    return data


# Z-machine text (standard §3): three 5-bit characters a word, alphabets A0-A2.
_A2 = " \n0123456789.,!?_#'\"/\\-:()"  # z-characters 6..31 of A2; 6 is the ZSCII escape
_EXTRA = "äöüÄÖÜß»«ëïÿËÏáéíóúýÁÉÍÓÚÝàèìòùÀÈÌÒÙâêîôûÂÊÎÔÛåÅøØãñõÃÑÕæÆçÇþðÞÐ£œŒ¡¿"


def _zscii(code: int) -> str:
    if 32 <= code <= 126:
        return chr(code)
    if code == 13:
        return "\n"
    if 155 <= code < 155 + len(_EXTRA):
        return _EXTRA[code - 155]
    return "?"


def _alphabets(data: bytes) -> tuple[str, str, str]:
    custom = _word(data, 0x34) if data[0] >= 5 else 0
    if not custom:
        return "abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz".upper(), _A2
    table = "".join(_zscii(b) for b in data[custom : custom + 78])
    return table[:26], table[26:52], table[52] + "\n" + table[54:]


def _zstring(data: bytes, address: int, alphabets: tuple[str, str, str], depth: int = 0) -> str:
    """Decode the z-string at ``address`` (versions 3+; abbreviations one level deep)."""
    codes: list[int] = []
    while address + 1 < len(data):
        word = _word(data, address)
        address += 2
        codes += ((word >> 10) & 31, (word >> 5) & 31, word & 31)
        if word & 0x8000:
            break
    out, shift, i = [], 0, 0
    while i < len(codes):
        code = codes[i]
        i += 1
        if code == 0:
            out.append(" ")
        elif code <= 3:
            if i < len(codes) and depth == 0:
                entry = _word(data, 0x18) + 2 * (32 * (code - 1) + codes[i])
                out.append(_zstring(data, 2 * _word(data, entry), alphabets, 1))
            i += 1
        elif code <= 5:
            shift = code - 3
            continue
        elif shift == 2 and code == 6:
            if i + 1 < len(codes):
                out.append(_zscii(codes[i] << 5 | codes[i + 1]))
            i += 2
        else:
            out.append(alphabets[shift][code - 6])
        shift = 0
    return "".join(out)


class _Layout(NamedTuple):
    """Where the object table lies: object ``i`` (1-based) is the ``i-1``-th row."""

    version: int
    start: int
    entry: int
    count: int

    @property
    def attr_bytes(self) -> int:
        return 4 if self.version <= 3 else 6


def _layout(data: bytes) -> _Layout:
    version = data[0]
    small = version <= 3
    entry = 9 if small else 14
    start = _word(data, 0x0A) + (62 if small else 126)  # after the property defaults
    # The table ends where the first property table begins (as infodump counts).
    lowest, count = len(data), 0
    while start + (count + 1) * entry <= lowest and count < 65535:
        prop = _word(data, start + count * entry + entry - 2)
        if prop < start + (count + 1) * entry:
            break
        lowest = min(lowest, prop)
        count += 1
    return _Layout(version, start, entry, count)


def _names(data: bytes, layout: _Layout) -> list[str]:
    """Return the short name of every object, index 0 unused; "" for unnamed."""
    alphabets = _alphabets(data)
    names = [""]
    for i in range(layout.count):
        prop = _word(data, layout.start + i * layout.entry + layout.entry - 2)
        names.append(" ".join(_zstring(data, prop + 1, alphabets).split()) if data[prop] else "")
    return names


def _parser_words(data: bytes, layout: _Layout) -> list[list[str]]:
    """Return the words the parser knows each object by, index 0 unused.

    Inform stores them in property 1 (``name``) as dictionary addresses; where that
    property is missing or holds anything else (other compilers), the list is empty.
    """
    alphabets = _alphabets(data)
    dictionary = _word(data, 0x08)
    start = dictionary + 1 + data[dictionary]  # after the word separators
    entry, count = data[start], _word(data, start + 1)
    first, end = start + 3, start + 3 + entry * count
    words: list[list[str]] = [[]]
    for i in range(layout.count):
        address = _word(data, layout.start + i * layout.entry + layout.entry - 2)
        address += 1 + 2 * data[address]  # skip the short name
        found: list[str] = []
        while address < len(data) and data[address]:
            size = data[address]
            if layout.version <= 3:
                number, length, address = size & 31, (size >> 5) + 1, address + 1
            elif size & 0x80:
                number, length = size & 63, data[address + 1] & 63 or 64
                address += 2
            else:
                number, length, address = size & 63, 2 if size & 0x40 else 1, address + 1
            if number == 1 and length % 2 == 0:
                refs = [_word(data, address + k) for k in range(0, length, 2)]
                if all(first <= r < end and (r - first) % entry == 0 for r in refs):
                    found = [_zstring(data, r, alphabets) for r in refs]
                break
            if number < 1:
                break
            address += length
        words.append(found)
    return words


def _entity_ids(names: list[str], player: int) -> list[str]:
    lowered = [name.lower() for name in names]
    counts: dict[str, int] = {}
    for name in lowered[1:]:
        counts[name] = counts.get(name, 0) + 1
    counts[PLAYER] = counts.get(PLAYER, 0) + 1
    ids = [""]
    for num, name in enumerate(lowered[1:], start=1):
        if num == player:
            ids.append(PLAYER)
        elif not name:
            ids.append(f"#{num}")
        else:
            ids.append(name if counts[name] == 1 else f"{name}#{num}")
    return ids
