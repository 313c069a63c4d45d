"""The remote flow's exception tree.

Upstream reports every remote failure through the embedded core's error type, so each of these
is a ``LocalError`` and prints as upstream does (``invalid input: …`` or ``internal error: …``)
where the local CLI catches its root::

    RemoteError              anything the remote flow raises
    ├── RemoteRefusal        refused before or instead of a write (bad input, unsafe retry)
    ├── RemoteHTTPError      the server answered an error status (.status, .wire_code)
    └── RemoteUnavailable    no answer, even after the one identical retry: outcome unknown

The kit's client (``aidememo_client``) raises its own tree; ``client_errors`` is the one place
its errors become these, wherever the flow calls into it (the request seam and the planner).
No message ever carries a token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from aidememo_cli._local._errors import LocalError, LocalErrorCode
from aidememo_client.errors import AideMemoClientError, AideMemoHTTPError, ClientRefusal, MalformedAnswer, OutcomeUnknown

__all__ = ["RemoteError", "RemoteRefusal", "RemoteHTTPError", "RemoteUnavailable", "refusal", "internal",
           "client_errors"]


class RemoteError(LocalError):
    """The root of the remote flow's errors."""


class RemoteRefusal(RemoteError):
    """Refused here: nothing unsafe was sent."""


class RemoteHTTPError(RemoteError):
    """The server answered with a non-2xx status; ``wire_code`` is its error code, if it sent one."""

    def __init__(self, status: int, code: str | None, message: str) -> None:
        # Upstream's wording (`remote_error` in cmd/remote_handoff.rs); the server's message only.
        super().__init__(LocalErrorCode.INVALID_INPUT, f"remote server returned HTTP {status}: {message}")
        self.status = status
        self.wire_code = code
        self.message = message


class RemoteUnavailable(RemoteError):
    """No usable answer: a write may or may not have been applied. Run the same command again."""

    def __init__(self, detail: str) -> None:
        super().__init__(LocalErrorCode.INTERNAL, f"remote server request failed: {detail}")


def refusal(detail: str) -> RemoteRefusal:
    """An ``invalid input`` refusal (upstream's ``InvalidInput``)."""
    return RemoteRefusal(LocalErrorCode.INVALID_INPUT, detail)


def internal(detail: str) -> RemoteRefusal:
    """An ``internal error`` refusal (upstream's ``Internal``: a malformed answer, a local I/O failure)."""
    return RemoteRefusal(LocalErrorCode.INTERNAL, detail)


def _converted(exc: AideMemoClientError) -> RemoteError:
    if isinstance(exc, AideMemoHTTPError):
        return RemoteHTTPError(exc.status, exc.code, exc.message or "remote request failed")
    if isinstance(exc, MalformedAnswer):
        return internal(str(exc))
    if isinstance(exc, ClientRefusal):
        return refusal(str(exc))
    if isinstance(exc, OutcomeUnknown):
        # The client's message names method and path; upstream's names the transport's failure.
        cause = exc.cause if exc.cause is not None else exc
        return RemoteUnavailable(f"{type(cause).__name__}: {cause}")
    raise AssertionError(f"unmapped client error {type(exc).__name__}")  # the client tree has four leaves


@contextmanager
def client_errors() -> Iterator[None]:
    """Turn what ``aidememo_client`` raises into this tree with upstream's wording (also a decorator)."""
    try:
        yield
    except AideMemoClientError as exc:
        raise _converted(exc) from None
