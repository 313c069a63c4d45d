"""Everything ``aidememo_client`` raises, the client and its recovery planner alike.

One root, split the way h11 splits local from remote protocol errors, so a caller can tell what
to do next::

    AideMemoClientError        anything this package raises
    ├── ClientRefusal          refused here, before sending: nothing reached the server
    │   └── MalformedAnswer    an answer the rules needed lacks a field or has the wrong type
    ├── AideMemoHTTPError      the server answered with an error status (.status, .code)
    ├── OutcomeUnknown         no usable answer: a write may or may not have been applied
    └── inside the package only, turned into OutcomeUnknown at the seam (``client._send``):
        ``NoAnswer`` (``_wire``) and the plain wire's ``TransportError`` family (``_plain``)

No message carries the token.
"""

from __future__ import annotations

__all__ = ["AideMemoClientError", "ClientRefusal", "MalformedAnswer", "AideMemoHTTPError", "OutcomeUnknown"]


class AideMemoClientError(Exception):
    """The root of every error ``AideMemoClient`` raises."""


class ClientRefusal(AideMemoClientError):
    """Refused before sending: the input is invalid, or going on would be unsafe. Nothing was sent."""


class MalformedAnswer(ClientRefusal):
    """A server's answer lacks a field the rules need, or has it with the wrong type (upstream's
    ``Internal``): nothing was sent after it."""


class AideMemoHTTPError(AideMemoClientError):
    """The server answered with a non-2xx status; ``code`` is the wire error code, if it sent one."""

    def __init__(self, status: int, code: str | None, message: str, body: bytes) -> None:
        super().__init__(f"HTTP {status} {code or '-'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body


class OutcomeUnknown(AideMemoClientError):
    """No usable answer arrived, so a write may or may not have been applied.

    Raised after the one identical retry of a POST also failed in transport, when a GET failed
    in transport, or when a 2xx answer was not JSON. Resume by calling the same method again;
    ``cause`` is the underlying error.
    """

    def __init__(self, method: str, path: str, reason: str, cause: Exception | None = None) -> None:
        super().__init__(f"{method} {path}: outcome unknown: {reason}")
        self.method = method
        self.path = path
        self.cause = cause


for _public in (AideMemoClientError, ClientRefusal, MalformedAnswer, AideMemoHTTPError, OutcomeUnknown):
    _public.__module__ = "aidememo_client"  # the public path, in reprs and tracebacks (httpx does the same)
