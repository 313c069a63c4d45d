"""The campaign's own loopback proxy in front of the target: it forwards each request whole and,
when armed, loses the answer of the next POSTs or resets their connections.

A dropped answer is read whole from the server (the command ran) and then the client's
connection is closed without a byte of it; a reset closes the connection with a TCP RST, before
the request is forwarded (it never ran) or after the server answered (it ran). To the client
both are transport failures: exactly what the protocol's one identical retry is for. Only
``POST /v1/...`` requests are faulted (writes are what a lost answer puts in doubt); the test
clock and reads pass untouched. A server that went away (killed, restarting) resets the
client's connection too.

A kill is timed by the proxy too (``arm_answer``): it falls the moment a server's answer to a
write it accepted (200) is in the proxy's hands, before that answer is passed on. Timed by an
event rather than a clock, it falls at the same point of the batch in a replay, and a server
that answers before it commits always loses the write whose answer the client then gets.

In front of several servers on one database (a target file's ``[[serve]]`` list) it balances
the requests over them, one request at a time, and sends none to a server the nemesis marked
down (killed, restarting) while another is up. The test clock is every server's: a move
(``POST /__test__/clock``) goes to each of them, and the proxy keeps their sum, so that a
restarted server whose test clock started again from its wall clock (the reference keeps its
offset in memory) is moved back to where the others are (``restore_clock``) before it is up.
"""

from __future__ import annotations

import http.client
import json
import socket
import socketserver
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from io import BufferedIOBase
from urllib.parse import urlsplit

__all__ = ["Answer", "FaultProxy", "Request", "forward", "read_request", "send_answer"]

_UPSTREAM_TIMEOUT_S = 120  # longer than any client's: a paused server is waited for, the client gives up first
_MAX_HEAD_LINES = 200
_MAX_BODY = 64 * 1024 * 1024
_CLOCK_PATH = "/__test__/clock"
_KEPT_MS = 1_000  # a restarted server's test clock this close to a sum of moves kept that sum


@dataclass(slots=True)
class _Armed:
    kind: str  # "drop-answers" or "reset"
    count: int
    before: bool


class FaultProxy:
    """A threaded HTTP/1.1 proxy on a free loopback port (``url``) in front of ``upstreams``."""

    def __init__(self, *upstreams: str) -> None:
        if not upstreams:
            raise ValueError("a proxy needs a server to forward to")
        self._upstreams = [_host_port(url) for url in upstreams]
        self._down: set[int] = set()
        self._turn = 0
        self._armed: _Armed | None = None
        self._lock = threading.Lock()
        # (server, its accepted writes still to answer before it, what to run then); held while
        # that runs, so a disarm that finds it gone returns once it has run
        self._trigger: tuple[int, int, Callable[[], None]] | None = None
        self._trigger_lock = threading.Lock()
        self._clock_lock = threading.Lock()  # moves of the test clock and restores, one at a time
        self.clock_moved_ms = 0  # the sum of the test clock's moves every server answered
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

    def arm_answer(self, server: int, after: int, fire: Callable[[], None]) -> None:
        """Run ``fire`` when ``server`` has answered 200 to a write after ``after`` others (from
        now), before that answer is passed on."""
        with self._trigger_lock:
            self._trigger = (server, after, fire)

    def disarm_answer(self) -> Callable[[], None] | None:
        """The armed ``fire``, if it never ran (once this returns, one that did has finished)."""
        with self._trigger_lock:
            trigger, self._trigger = self._trigger, None
        return None if trigger is None else trigger[2]

    def _answered(self, server: int, request: Request, answer: Answer) -> None:
        if answer.status != 200 or request.method != "POST" or not request.path.startswith("/v1/"):
            return
        with self._trigger_lock:
            if self._trigger is None or self._trigger[0] != server:
                return
            _, left, fire = self._trigger
            self._trigger = None if left == 0 else (server, left - 1, fire)
            if left == 0:
                fire()

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

    def down(self, server: int) -> None:
        """Send ``server`` nothing until ``up`` (it was killed; with no other up, requests are reset)."""
        with self._lock:
            self._down.add(server)

    def up(self, server: int) -> None:
        with self._lock:
            self._down.discard(server)

    def _pick(self) -> int:
        with self._lock:
            up = [i for i in range(len(self._upstreams)) if i not in self._down]
            if not up:
                raise ConnectionRefusedError("every server is down")
            self._turn += 1
            return up[self._turn % len(up)]

    def _move_clock(self, request: Request) -> Answer:
        """A move of the test clock, sent to every server that is up; the first one's answer."""
        with self._clock_lock:
            with self._lock:
                targets = [u for i, u in enumerate(self._upstreams) if i not in self._down]
            if not targets:
                raise ConnectionRefusedError("every server is down")
            answers = [forward(host, port, request, _UPSTREAM_TIMEOUT_S) for host, port in targets]
            moved = _advance_of(request.body)
            if moved is not None and all(a.status == 200 for a in answers):
                self.clock_moved_ms += moved
            return answers[0]

    def restore_clock(self, server: int, token: str) -> None:
        """Move a restarted ``server``'s test clock by what it lost of the moves (nothing when it
        kept them, or none were made; ``token`` is any actor's, for the clock route)."""
        with self._clock_lock:
            if self.clock_moved_ms == 0:
                return
            host, port = self._upstreams[server]
            headers = (("Host", f"{host}:{port}"), ("Authorization", f"Bearer {token}"))
            answer = forward(host, port, Request("GET", _CLOCK_PATH, headers, b""), _UPSTREAM_TIMEOUT_S)
            now = _now_of(answer)
            if now is None:
                return  # no test clock there: nothing to restore
            # Both clocks run on this machine's wall clock: what it kept is its offset from it.
            kept = now - time.time_ns() // 1_000_000
            missing = self.clock_moved_ms if abs(kept) <= _KEPT_MS else self.clock_moved_ms - kept
            if missing > _KEPT_MS:
                body = json.dumps({"advance_ms": missing}).encode()
                forward(host, port, Request("POST", _CLOCK_PATH, (*headers, ("Content-Type", "application/json"),
                                                                  ("Content-Length", str(len(body)))), body),
                        _UPSTREAM_TIMEOUT_S)

    def _one(self, reader: BufferedIOBase, connection: socket.socket) -> bool:
        request = read_request(reader)
        if request is None:
            return False
        if request.method == "POST" and request.path == _CLOCK_PATH:
            send_answer(connection, self._move_clock(request))
            return True
        fault = self._take(request.method, request.path)
        if fault is not None and fault.kind == "reset" and fault.before:
            _reset(connection)
            return False
        server = self._pick()
        answer = forward(*self._upstreams[server], request, _UPSTREAM_TIMEOUT_S)
        self._answered(server, request, answer)
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


def _host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 80


def _advance_of(body: bytes) -> int | None:
    try:
        doc = json.loads(body)
    except ValueError:
        return None
    advance = doc.get("advance_ms") if isinstance(doc, dict) else None
    return advance if isinstance(advance, int) and not isinstance(advance, bool) else None


def _now_of(answer: Answer) -> int | None:
    if answer.status != 200:
        return None
    try:
        doc = json.loads(answer.body)
    except ValueError:
        return None
    now = doc.get("now_ms") if isinstance(doc, dict) else None
    return now if isinstance(now, int) and not isinstance(now, bool) else None


def _reset(connection: socket.socket) -> None:
    """Close with a TCP RST rather than a FIN (SO_LINGER on, zero seconds)."""
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()
    except OSError:
        pass
