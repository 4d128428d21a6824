"""The main job's language model: start the ``llm`` group's local server when it is needed.

``llm=local`` names a model this machine can serve (``serve:``): when the suite has an
agent with a chat client (any ``wmkit.llm.ChatClient`` node in its tracker or policy)
and nothing answers at the client's ``base_url``, :func:`serving` starts llama.cpp's
server there (:class:`wmkit.llm.local.LocalServer`) for the run and stops it after,
its output in ``<run folder>/llm-server.log``. A server already answering is used as it
is (one served by ``python -m wmkit.llm.local serve``, or CI's). With
``llm=openai_compatible`` (``serve: null``) nothing is started: the server is yours.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rich.console import Console

from wmkit.evals.specs import EvalConfig

__all__ = ["LOG_FILE", "chat_base_urls", "serving"]

LOG_FILE = "llm-server.log"
"""The local server's output, in the run folder."""

_CLIENT = "wmkit.llm.ChatClient"


def chat_base_urls(config: EvalConfig) -> set[str]:
    """The ``base_url`` of every chat client the suite's agents would build."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            if node.get("_target_") == _CLIENT and node.get("base_url"):
                found.add(str(node["base_url"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)

    for spec in config.agents.values():
        walk(spec.model_dump())
    return found


@contextlib.contextmanager
def serving(config: EvalConfig, out: Path, console: Console) -> Iterator[None]:
    """Serve the ``llm`` group's local model for the duration, if the suite needs it.

    Raises:
        ValueError: the suite needs a model that nothing serves and ``serve`` cannot
            start (another host than this machine's loopback, or several base URLs).
        wmkit.llm.local.LocalServerError: the server did not start (the message quotes
            its log); LocalServerUnavailable: llama-cpp-python or the model is missing.
    """
    serve = config.llm.serve
    urls = chat_base_urls(config)
    if not serve or not urls:
        yield
        return
    from wmkit.llm.local import LocalServer, reachable  # only runs that serve need it

    waiting = sorted(url for url in urls if not reachable(url))
    if not waiting:
        yield
        return
    parts = urlsplit(waiting[0])
    if len(waiting) > 1 or parts.hostname not in ("127.0.0.1", "localhost"):
        raise ValueError(
            f"nothing answers at {', '.join(waiting)}, and llm.serve starts one local server "
            "on 127.0.0.1 only: start the server yourself, or point WMKIT_LLM_BASE_URL at one"
        )
    server = LocalServer(
        serve.model,
        port=parts.port or serve.port,
        host=parts.hostname,
        n_ctx=serve.n_ctx,
        threads=serve.threads,
        log=out / LOG_FILE,
    )
    out.mkdir(parents=True, exist_ok=True)
    with server:
        console.print(
            f"serving {server.model} at {server.base_url} (up in {server.startup_seconds:.1f} s; "
            f"log: {server.log_path}); it stops when the run ends",
            markup=False,
        )
        yield
