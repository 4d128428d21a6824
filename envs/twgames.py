"""TextWorld games made by ``tw-make`` on demand and cached on disk by their options.

A game is named by a challenge and its generator options, the same names as on the
command line (``tw-make tw-simple --help``): ``make_game("simple", {"rewards": "dense",
"goal": "brief", "seed": 3})`` runs ``tw-make tw-simple --rewards dense --goal brief
--seed 3`` once and returns the cached ``game.z8`` every later time. The generation
``seed`` is an option like any other (default 0), so it names the game.

Options are normalised before hashing (keys lower case with ``_`` for ``-``, the
challenge's defaults filled in, ``False`` flags dropped), so ``{"Level": 2}`` and
``{"level": 2, "seed": 0}`` are the same game. The cache key also holds the TextWorld
version, since another version may make another game from the same options.

Layout: ``<cache_dir>/<challenge>-<key>/`` holds ``game.z8``, ``game.json`` (the
TextWorld metadata the env reads facts from), ``game.ni`` (Inform 7 source) and
``options.json``. A game is generated into a ``.tmp-*`` folder beside it and renamed into
place only when complete, so a killed or failed generation never leaves half a game; a
leftover ``.tmp-*`` folder is never read and is safe to delete. Two processes making the
same game at once both generate; the first rename wins and the other copy is dropped.

``tw-make`` runs as a child process in its own session, so a timeout kills it with the
Inform 7 compilers it started.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

__all__ = [
    "CHALLENGES",
    "DEFAULT_OPTIONS",
    "GameGenerationError",
    "GameSpec",
    "default_cache_dir",
    "make_game",
    "normalise",
]

CHALLENGES = {
    "simple": "tw-simple",
    "cooking": "tw-cooking",
    "coin_collector": "tw-coin_collector",
    "treasure_hunter": "tw-treasure_hunter",
    "custom": "custom",
}
"""Our challenge names -> ``tw-make`` subcommands."""

DEFAULT_OPTIONS: dict[str, dict[str, Any]] = {
    "simple": {"rewards": "dense", "goal": "detailed", "seed": 0},
    "cooking": {"seed": 0},
    "coin_collector": {"level": 1, "seed": 0},
    "treasure_hunter": {"level": 1, "seed": 0},
    "custom": {"seed": 0},
}
"""Options filled in when not given: ``tw-make`` requires some, and the seed names the game."""

# Set by make_game itself: where the game goes, its format, and the console output.
_RESERVED = frozenset(
    {"output", "format", "force", "f", "silent", "verbose", "v", "overview", "save_overview"}
    | {"third_party", "help", "h"}
)
_KEY = re.compile(r"[a-z][a-z0-9_]*")


class GameGenerationError(RuntimeError):
    """``tw-make`` failed or ran out of time; the message names the challenge and options."""


class GameSpec(NamedTuple):
    """A normalised game request: the challenge and its sorted ``(option, value)`` pairs."""

    challenge: str
    options: tuple[tuple[str, int | str | bool], ...]

    @property
    def key(self) -> str:
        """Return the cache key: 16 hex digits of a hash of the spec and TextWorld version."""
        import textworld

        doc = {"challenge": self.challenge, "options": dict(self.options)}
        doc["textworld"] = textworld.__version__
        raw = json.dumps(doc, sort_keys=True).encode()
        return hashlib.sha256(raw).hexdigest()[:16]

    def argv(self) -> list[str]:
        """Return the ``tw-make`` arguments after the program name, without ``--output``."""
        args = [CHALLENGES[self.challenge]]
        for name, value in self.options:
            flag = "--" + name.replace("_", "-")
            args += [flag] if value is True else [flag, str(value)]
        return args

    def describe(self) -> str:
        """Return ``challenge {options}`` for error messages."""
        return f"challenge={self.challenge!r} options={dict(self.options)}"


def normalise(challenge: str, options: Mapping[str, Any] | None = None) -> GameSpec:
    """Validate a challenge and its options and return them in normal form.

    Values must be ints, strings or bools (bools are ``tw-make`` flags: ``True`` passes
    ``--flag``, ``False`` is the same as leaving it out). Whether an option exists for
    the challenge, and its range, is left to ``tw-make`` itself (see ``make_game``).

    Raises:
        ValueError: unknown challenge, malformed or reserved option name, bad seed.
        TypeError: ``options`` is not a mapping, or a value has the wrong type.
    """
    if challenge not in CHALLENGES:
        raise ValueError(f"unknown challenge {challenge!r}; expected one of {sorted(CHALLENGES)}")
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise TypeError(f"options must be a mapping, got {type(options).__name__}")
    merged: dict[str, int | str | bool] = dict(DEFAULT_OPTIONS[challenge])
    for raw_key, value in options.items():
        key = str(raw_key).strip().lstrip("-").lower().replace("-", "_")
        if not _KEY.fullmatch(key):
            raise ValueError(f"bad option name {raw_key!r} for challenge {challenge!r}")
        if key in _RESERVED:
            raise ValueError(f"option {raw_key!r} is set by wmkit, not by the caller")
        if not isinstance(value, (bool, int, str)):
            raise TypeError(
                f"option {key!r} must be an int, str or bool, got {type(value).__name__}"
            )
        merged[key] = value
    seed = merged["seed"]
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"option 'seed' must be an int in [0, 2**32), got {seed!r}")
    pairs = tuple(sorted((k, v) for k, v in merged.items() if v is not False))
    return GameSpec(challenge, pairs)


def default_cache_dir() -> Path:
    """Return ``$WMKIT_CACHE_DIR/textworld``, or ``~/.cache/wmkit/textworld``."""
    root = os.environ.get("WMKIT_CACHE_DIR") or Path.home() / ".cache" / "wmkit"
    return Path(root).expanduser() / "textworld"


def make_game(
    challenge: str = "simple",
    options: Mapping[str, Any] | None = None,
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    timeout: float = 600.0,
) -> Path:
    """Return the path of the game's ``.z8``, generating it first if it is not cached.

    Args:
        challenge: one of ``CHALLENGES``.
        options: ``tw-make`` options of the challenge (``level``, ``seed``,
            ``world_size``, ...); see ``normalise``.
        cache_dir: where games are kept; default ``default_cache_dir()``.
        timeout: seconds ``tw-make`` may run (some treasure-hunter levels take minutes).

    Raises:
        ValueError: bad options, including those ``tw-make`` rejects.
        GameGenerationError: ``tw-make`` crashed, timed out or is not installed.
    """
    spec = normalise(challenge, options)
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    final = root / f"{spec.challenge}-{spec.key}"
    game = final / "game.z8"
    if game.is_file() and game.with_suffix(".json").is_file():
        return game
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{final.name}-", dir=root))
    try:
        _run_tw_make(spec, tmp / "game.z8", timeout)
        doc = {"challenge": spec.challenge, "options": dict(spec.options), "argv": spec.argv()}
        (tmp / "options.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        if final.exists():  # incomplete (files deleted by hand) or made meanwhile by a peer
            if game.is_file() and game.with_suffix(".json").is_file():
                return game
            shutil.rmtree(final)
        try:
            os.rename(tmp, final)
        except OSError:
            if not game.is_file():  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return game


def _tw_make() -> str:
    beside = Path(sys.executable).with_name("tw-make")
    found = str(beside) if beside.is_file() else shutil.which("tw-make")
    if found is None:
        raise GameGenerationError("tw-make not found; install wmkit[textworld] (textworld 1.7)")
    return found


def _run_tw_make(spec: GameSpec, output: Path, timeout: float) -> None:
    argv = [sys.executable, _tw_make(), *spec.argv(), "--output", str(output), "--silent", "-f"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except BaseException as exc:
        # Timeout or interrupt: kill tw-make and the compilers it started, then report.
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise GameGenerationError(
                f"tw-make timed out after {timeout:g} s for {spec.describe()}"
            ) from None
        raise
    if proc.returncode == 0 and output.is_file() and output.with_suffix(".json").is_file():
        return
    lines = [line for line in err.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else f"exit status {proc.returncode}, no message"
    # argparse errors exit with 2; challenge range checks raise ValueError (exit 1).
    if proc.returncode == 2 or last.startswith("ValueError"):
        raise ValueError(f"tw-make rejected {spec.describe()}: {last}")
    tail = "\n".join(lines[-15:])
    raise GameGenerationError(f"tw-make failed for {spec.describe()}:\n{tail}")
