"""The campaign's own loopback proxy in front of the target: it forwards each request whole and,
when armed, loses the answer of the next POSTs or resets their connections.

A dropped answer is read whole from the server (the command ran) and then the client's
connection is closed without a byte of it; a reset closes the connection with a TCP RST, before
the request is forwarded (it never ran) or after the server answered (it ran). To the client
both are transport failures: exactly what the protocol's one identical retry is for. Only
``POST /v1/...`` requests are faulted (writes are what a lost answer puts in doubt); the test
clock and reads pass untouched. A server that went away (killed, restarting) resets the
client's connection too.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import struct
import threading
from dataclasses import dataclass
from io import BufferedIOBase
from urllib.parse import urlsplit

__all__ = ["Answer", "FaultProxy", "Request", "forward", "read_request", "send_answer"]

_UPSTREAM_TIMEOUT_S = 120  # longer than any client's: a paused server is waited for, the client gives up first
_MAX_HEAD_LINES = 200
_MAX_BODY = 64 * 1024 * 1024


@dataclass(slots=True)
class _Armed:
    kind: str  # "drop-answers" or "reset"
    count: int
    before: bool


class FaultProxy:
    """A threaded HTTP/1.1 proxy on a free loopback port (``url``) in front of ``upstream``."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._armed: _Armed | None = None
        self._lock = threading.Lock()
        self.dropped = 0
        self.resets = 0
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                try:
                    while proxy._one(self.rfile, self.connection):
                        pass
                except (OSError, ValueError, http.client.HTTPException):
                    _reset(self.connection)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="aidememo-sim-proxy")

    def start(self) -> FaultProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def arm(self, kind: str, count: int, *, before: bool = False) -> None:
        """Fault the next ``count`` POSTs: ``drop-answers`` or ``reset`` (``before``: unforwarded)."""
        with self._lock:
            self._armed = _Armed(kind, count, before)

    def disarm(self) -> None:
        with self._lock:
            self._armed = None

    def _take(self, method: str, path: str) -> _Armed | None:
        if method != "POST" or not path.startswith("/v1/"):
            return None
        with self._lock:
            armed = self._armed
            if armed is None or armed.count <= 0:
                return None
            armed.count -= 1
            if armed.kind == "reset":
                self.resets += 1
            else:
                self.dropped += 1
            return armed

    def _one(self, reader: BufferedIOBase, connection: socket.socket) -> bool:
        request = read_request(reader)
        if request is None:
            return False
        fault = self._take(request.method, request.path)
        if fault is not None and fault.kind == "reset" and fault.before:
            _reset(connection)
            return False
        answer = forward(self._host, self._port, request, _UPSTREAM_TIMEOUT_S)
        if fault is not None:
            if fault.kind == "reset":
                _reset(connection)
            else:
                connection.shutdown(socket.SHUT_RDWR)  # the command ran; its answer is lost
            return False
        send_answer(connection, answer)
        return True


@dataclass(frozen=True, slots=True)
class Request:
    """One HTTP/1.1 request as the client sent it."""

    method: str
    target: str  # path and query
    headers: tuple[tuple[str, str], ...]
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


def read_request(reader: BufferedIOBase) -> Request | None:
    """The next request on a client's connection (head lines and body bounded), or None at its end."""
    line = reader.readline(65536)
    if not line:
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: list[tuple[str, str]] = []
    length = 0
    for _ in range(_MAX_HEAD_LINES):
        raw = reader.readline(65536)
        if raw in (b"\r\n", b"\n", b""):
            break
        name, _, value = raw.decode("latin-1").partition(":")
        headers.append((name.strip(), value.strip()))
        if name.strip().lower() == "content-length":
            length = min(int(value.strip()), _MAX_BODY)
    return Request(method, target, tuple(headers), reader.read(length) if length else b"")


def forward(host: str, port: int, request: Request, timeout_s: float) -> Answer:
    """Send ``request`` to the server on its own connection and read its whole answer."""
    upstream = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        upstream.putrequest(request.method, request.target, skip_host=True, skip_accept_encoding=True)
        for name, value in request.headers:
            if name.lower() != "connection":
                upstream.putheader(name, value)
        upstream.endheaders(request.body or None)
        answer = upstream.getresponse()
        return Answer(answer.status, answer.reason, tuple(answer.getheaders()), answer.read())
    finally:
        upstream.close()


def send_answer(connection: socket.socket, answer: Answer) -> None:
    """Write ``answer`` back to the client, framed by its length (the connection stays open)."""
    out = [f"HTTP/1.1 {answer.status} {answer.reason}\r\n".encode("latin-1")]
    for name, value in answer.headers:
        if name.lower() not in ("connection", "transfer-encoding", "content-length"):
            out.append(f"{name}: {value}\r\n".encode("latin-1"))
    out.append(f"content-length: {len(answer.body)}\r\n\r\n".encode("latin-1"))
    connection.sendall(b"".join(out) + answer.body)


def _reset(connection: socket.socket) -> None:
    """Close with a TCP RST rather than a FIN (SO_LINGER on, zero seconds)."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    except OSError:
        pass
