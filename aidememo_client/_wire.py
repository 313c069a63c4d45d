"""The client's one I/O seam: a wire sends one request and hands back the server's answer.

``AideMemoClient`` decides (query encoding, the one identical retry, decoding, its error tree);
a wire only moves bytes. Two exist: ``HttpxWire`` for a caller's httpx transport and for
``https://`` (certificates and proxies as httpx takes them from the environment), and
``PlainWire`` (``_plain``) for ``http://`` without a transport, which a command line starts in
a fraction of httpx's import time. Both raise only ``NoAnswer`` (the request may or may not have
reached the server) or ``ClientRefusal`` (nothing was sent).
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple, Protocol

from refkit.records import distinct

from .errors import AideMemoClientError, ClientRefusal

if TYPE_CHECKING:
    import httpx

__all__ = ["Answer", "NoAnswer", "Wire", "HttpxWire", "charset"]

Query = Mapping[str, str | int]


@distinct
class Answer(NamedTuple):
    """What the server sent: the status, the body's bytes, and the charset its text is in."""

    status: int
    content: bytes
    charset: str

    @property
    def text(self) -> str:
        return self.content.decode(self.charset, "replace")


class NoAnswer(AideMemoClientError):
    """No usable answer arrived; ``cause`` is the transport's own exception (its name is shown)."""

    def __init__(self, cause: Exception) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Wire(Protocol):
    def exchange(self, method: str, path: str, query: Query, body: Mapping[str, object] | None) -> Answer:
        """Send one request for ``path`` (absolute, under the base URL) and return its answer."""

    def close(self) -> None: ...


def charset(content_type: str | None) -> str:
    """The ``charset`` parameter of a Content-Type, if Python knows it, else UTF-8 (as httpx)."""
    for param in (content_type or "").split(";")[1:]:
        key, _, value = param.partition("=")
        if key.strip().lower() == "charset":
            try:
                return codecs.lookup(value.strip().strip('"')).name
            except LookupError:
                break
    return "utf-8"


class HttpxWire:
    """Requests through an ``httpx.Client`` (the caller's transport, or httpx's default)."""

    def __init__(self, base_url: str, headers: Mapping[str, str], transport: httpx.BaseTransport | None,
                 timeout: float) -> None:
        import httpx  # here, not at the top: a plain-HTTP command line never pays its import

        try:
            self._http = httpx.Client(base_url=base_url, transport=transport, timeout=timeout, headers=dict(headers))
        except httpx.InvalidURL as exc:
            raise ClientRefusal(f"invalid server URL: {exc}") from None

    def exchange(self, method: str, path: str, query: Query, body: Mapping[str, object] | None) -> Answer:
        import httpx

        try:
            response = self._http.request(method, path, params=query, json=body)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ClientRefusal(f"{method} {path}: {exc}") from None
        except httpx.TransportError as exc:
            raise NoAnswer(exc) from exc
        return Answer(response.status_code, response.content, response.encoding or "utf-8")

    def close(self) -> None:
        self._http.close()
