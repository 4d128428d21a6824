"""The errors of ``wmkit.llm``: one small hierarchy under ``LLMError``.

These are errors of the *request*: the endpoint could not be reached, refused, timed out
or answered with something that is not a chat completion. Bad *content* (a reply whose
JSON is malformed or fails its schema) is not an error: ``ask_structured`` reports it in
its result. ``transient`` tells a caller that keeps going (a tracker) which errors it may
count and skip, and which mean the setup is wrong and must stop the run.
"""

from __future__ import annotations

__all__ = [
    "LLMConfigError",
    "LLMConnectionError",
    "LLMEmptyReplyError",
    "LLMError",
    "LLMRedirectError",
    "LLMResponseError",
    "LLMStatusError",
    "LLMTimeoutError",
    "LLMTransportError",
]

BODY_EXCERPT_CHARS = 500
"""Most characters of a response body quoted in an error message."""


class LLMError(RuntimeError):
    """Base class of every error raised by ``wmkit.llm``."""

    transient = False
    """True when the same request may well succeed later (timeouts, 429, 5xx, a garbled
    response); False when retrying cannot help (bad configuration, refused connection,
    authentication, a request the server rejects)."""


class LLMConfigError(LLMError, ValueError):
    """A client built or called with bad arguments (no base URL, no model, bad messages)."""


class LLMConnectionError(LLMError):
    """The endpoint could not be reached (refused, DNS, a failing proxy); not retried."""


class LLMTimeoutError(LLMError):
    """No answer within the client's timeout, or a reply unfinished at its deadline; retried."""

    transient = True


class LLMTransportError(LLMError):
    """The exchange broke after the connection was made; retried.

    A body shorter than its ``Content-Length``, a connection reset or closed mid-reply,
    a status line or chunked framing that is not HTTP, a body that does not decode from
    its ``Content-Encoding``: the server (or something between) failed this once, and
    the same request may well succeed.
    """

    transient = True


class LLMStatusError(LLMError):
    """The server answered with a non-2xx HTTP status.

    Attributes:
        status: the HTTP status code.
        body: the start of the response body (at most ``BODY_EXCERPT_CHARS`` characters).
        retry_after: seconds the server asked to wait (``Retry-After``), or None.
    """

    def __init__(self, status: int, body: str, url: str, retry_after: float | None = None) -> None:
        self.status = status
        self.body = body[:BODY_EXCERPT_CHARS]
        self.retry_after = retry_after
        super().__init__(f"HTTP {status} from {url}: {self.body or '(empty body)'}")

    @property
    def transient(self) -> bool:  # type: ignore[override]
        """429 (rate limited), 408 (request timeout) and 5xx are worth retrying."""
        return self.status in (408, 429) or self.status >= 500


class LLMRedirectError(LLMStatusError):
    """A 3xx answer, refused: redirects are never followed.

    The request carries the API key and a redirect may point anywhere, so the base URL
    has to name the server that answers.

    Attributes:
        location: the ``Location`` the server named ("" when it named none).
    """

    def __init__(self, status: int, location: str, url: str) -> None:
        super().__init__(status, "", url)
        self.location = location
        where = f"redirects to {location!r}" if location else "redirects (no Location)"
        self.args = (
            f"HTTP {status} from {url} {where}; redirects are not followed, so the API key "
            "never goes to another address: set base_url to the address that answers",
        )


class LLMResponseError(LLMError):
    """A 2xx response that is not a chat completion (not JSON, missing fields)."""

    transient = True


class LLMEmptyReplyError(LLMResponseError):
    """A chat completion with no choices, or whose message has no text content."""
