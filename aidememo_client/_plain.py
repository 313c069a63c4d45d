"""HTTP/1.1 over a standard-library socket, for ``http://`` servers when no transport is given.

A remote command line spends most of its run starting, and importing httpx, ``http.client`` (it
loads the ``email`` parser and ``ssl``) or h11 is a large part of a start-up (docs/remote.md,
start-up; ``python bench/cli.py`` times ``remote inbox``).
An AideMemo exchange needs little of HTTP: one request per connection (``Connection: close``,
so no pool and no stale connection), a JSON body, and an answer framed by ``Content-Length``,
by chunks, or by the connection's end (RFC 9112 §6.3). ``read_answer`` is that framing, with
no I/O of its own. Failures carry httpx's names (``ConnectError``, ``ReadTimeout``, …), which
is what the command line shows after ``remote server request failed:``.

    TransportError             no usable answer (the client wraps it in ``NoAnswer``)
    ├── ConnectError           the connection was refused or could not be made
    ├── ConnectTimeout         ... within the timeout
    ├── ReadError              the connection failed while sending or reading
    ├── ReadTimeout            the server sent nothing within the timeout
    └── RemoteProtocolError    the answer is not HTTP/1.x, or it ended early
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from typing import BinaryIO
from urllib.parse import quote, urlencode, urlsplit

from ._wire import Answer, NoAnswer, Query, charset
from .errors import AideMemoClientError, ClientRefusal

__all__ = ["PlainWire", "read_answer", "TransportError", "ConnectError", "ConnectTimeout", "ReadError",
           "ReadTimeout", "RemoteProtocolError"]

MAX_LINE = 65_536  # bytes in a status or header line (h11 allows 16 KiB for the whole head)
MAX_HEADERS = 256


class TransportError(AideMemoClientError):
    """No usable answer arrived."""


class ConnectError(TransportError):
    """The connection could not be made."""


class ConnectTimeout(TransportError):
    """The connection was not made within the timeout."""


class ReadError(TransportError):
    """The connection failed after it was made."""


class ReadTimeout(TransportError):
    """The server sent nothing within the timeout."""


class RemoteProtocolError(TransportError):
    """The server broke HTTP/1.1 framing, or closed the connection mid-answer."""


def _line(reader: BinaryIO) -> bytes:
    line = reader.readline(MAX_LINE + 1)
    if not line.endswith(b"\n"):
        raise RemoteProtocolError("header line too long" if len(line) > MAX_LINE else
                                  "peer closed connection without sending complete message")
    return line.rstrip(b"\r\n")


def _head(reader: BinaryIO) -> tuple[int, dict[str, str]]:
    version, _, rest = _line(reader).partition(b" ")
    code = rest[:3]
    if not version.startswith(b"HTTP/1.") or len(code) != 3 or not code.isdigit() or rest[3:4] not in (b"", b" "):
        raise RemoteProtocolError("the answer does not start with an HTTP/1.x status line")
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADERS):
        line = _line(reader)
        if not line:
            return int(code), headers
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name or name != name.strip():
            raise RemoteProtocolError("malformed header line")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    raise RemoteProtocolError(f"more than {MAX_HEADERS} header lines")


def _exactly(reader: BinaryIO, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise RemoteProtocolError("peer closed connection without sending complete message body")
    return data


def _chunks(reader: BinaryIO) -> bytes:
    parts: list[bytes] = []
    while True:
        size_text = _line(reader).split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise RemoteProtocolError("malformed chunk size") from None
        if size == 0:
            while _line(reader):  # trailer fields, ignored
                pass
            return b"".join(parts)
        parts.append(_exactly(reader, size))
        if _line(reader):
            raise RemoteProtocolError("chunk not followed by CRLF")


def read_answer(reader: BinaryIO) -> Answer:
    """One answer from ``reader``, framed as RFC 9112 §6.3 says (1xx interim answers skipped).

    Raises:
        RemoteProtocolError: not HTTP/1.x, or the answer ended before its framing said.
    """
    status, headers = _head(reader)
    while 100 <= status < 200:
        status, headers = _head(reader)
    kind = charset(headers.get("content-type"))
    if status in (204, 304):
        return Answer(status, b"", kind)
    if "transfer-encoding" in headers:
        if headers["transfer-encoding"].lower().rsplit(",", 1)[-1].strip() != "chunked":
            return Answer(status, reader.read(), kind)
        return Answer(status, _chunks(reader), kind)
    if "content-length" in headers:
        lengths = {value.strip() for value in headers["content-length"].split(",")}
        if len(lengths) != 1 or not (length := lengths.pop()).isdigit():
            raise RemoteProtocolError("malformed Content-Length")
        return Answer(status, _exactly(reader, int(length)), kind)
    return Answer(status, reader.read(), kind)


class PlainWire:
    """Requests to one ``http://`` base URL, each on its own connection."""

    def __init__(self, base_url: str, headers: Mapping[str, str], timeout: float) -> None:
        try:
            parts = urlsplit(base_url)
            port = parts.port or 80
        except ValueError as exc:
            raise ClientRefusal(f"invalid server URL: {exc}") from None
        if parts.scheme != "http" or not parts.hostname:
            raise ClientRefusal("invalid server URL: expected http://HOST[:PORT][/PATH]")
        name = parts.hostname
        # Bytes, so resolving an ASCII name does not load the IDNA codec (start-up: bench/cli.py).
        self._address = (name.encode("ascii") if name.isascii() else name.encode("idna"), port)
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        fields = {"Host": host if parts.port is None else f"{host}:{port}", "Accept": "*/*", **headers,
                  "Connection": "close"}
        self._fields = "".join(f"{name}: {value}\r\n" for name, value in fields.items())
        self._prefix = parts.path.rstrip("/")
        self._timeout = timeout

    def exchange(self, method: str, path: str, query: Query, body: Mapping[str, object] | None) -> Answer:
        target = quote(self._prefix + path, safe="/:@!$&'()*+,;=~%")
        if query:
            target += "?" + urlencode(query)  # spaces as "+", as httpx writes them
        fields = self._fields
        payload = b""
        if body is not None:  # encoded exactly as httpx encodes ``json=``
            payload = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
            fields += f"Content-Length: {len(payload)}\r\nContent-Type: application/json\r\n"
        request = f"{method} {target} HTTP/1.1\r\n{fields}\r\n".encode("ascii") + payload
        try:
            return self._send(request)
        except TransportError as exc:
            raise NoAnswer(exc) from exc

    def _send(self, request: bytes) -> Answer:
        try:
            sock = socket.create_connection(self._address, timeout=self._timeout)  # type: ignore[arg-type]  # bytes hosts resolve too
        except TimeoutError:
            raise ConnectTimeout("timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc)) from None
        with sock, sock.makefile("rb") as reader:
            try:
                sock.sendall(request)
                return read_answer(reader)
            except TimeoutError:
                raise ReadTimeout("timed out") from None
            except OSError as exc:
                raise ReadError(str(exc)) from None

    def close(self) -> None:
        """Nothing to release: no connection outlives its request."""
