"""Tiny hostile HTTP servers on 127.0.0.1 (port 0) for testing the kit's own robustness.

Each behaviour is a function of (connection, stop event); the server answers every connection
with it until stopped. They speak just enough HTTP to be dangerous: nothing here is a server
anyone should point a client at on purpose.
"""

from __future__ import annotations

import http.client
import json
import random
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import urlsplit

__all__ = ["BEHAVIOURS", "REWRITES", "hostile_proxy", "hostile_server"]

Behaviour = Callable[[socket.socket, threading.Event], None]
TRICKLE_INTERVAL_S: Final = 0.2


def _read_head(conn: socket.socket) -> bytes:
    data = b""
    conn.settimeout(5)
    try:
        while b"\r\n\r\n" not in data and len(data) < 1 << 20:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    return data


def hang(conn: socket.socket, stop: threading.Event) -> None:
    """Read the request, then say nothing, holding the connection open."""
    _read_head(conn)
    stop.wait()


def reset(conn: socket.socket, stop: threading.Event) -> None:
    """Read the request, then abort the connection with a TCP RST."""
    _read_head(conn)
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def trickle(conn: socket.socket, stop: threading.Event) -> None:
    """Answer one byte at a time, never finishing: each read succeeds, the answer never ends."""
    _read_head(conn)
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\n\r\n"
    stream = iter(head + b"[" + b"0," * 600_000)
    while not stop.is_set():
        try:
            conn.sendall(bytes([next(stream)]))
        except (OSError, StopIteration):
            return
        stop.wait(TRICKLE_INTERVAL_S)


def garbage(conn: socket.socket, stop: threading.Event) -> None:
    """Answer bytes that are not HTTP at all, then close."""
    _read_head(conn)
    rng = random.Random(len(threading.enumerate()))
    try:
        conn.sendall(b"\x00\xffSSH-2.0-nope\r\n" + bytes(rng.randrange(256) for _ in range(512)))
    except OSError:
        pass


def junk_json(conn: socket.socket, stop: threading.Event) -> None:
    """Well-formed HTTP whose bodies are not the protocol: a 200 with broken JSON, every time."""
    _read_head(conn)
    body = b'{"command_id": [1, 2, "not a receipt"'
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n" % len(body) + body)
    except OSError:
        pass


def wrong_shapes(conn: socket.socket, stop: threading.Event) -> None:
    """Valid JSON of the wrong shape: errors without codes, 200s that are lists, odd statuses."""
    head = _read_head(conn)
    # Seeded by the request without its Host line (the port changes between runs).
    rng = random.Random(b"\r\n".join(line for line in head.split(b"\r\n") if not line.lower().startswith(b"host:")))
    status, body = rng.choice([(200, []), (200, {"revision": "one"}), (409, {"error": "stale"}),
                               (400, {"error": {"code": 7}}), (418, {}), (200, None), (299, {"ok": True})])
    raw = json.dumps(body).encode()
    try:
        conn.sendall(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n" % (status, len(raw)) + raw)
    except OSError:
        pass


def gigantic(conn: socket.socket, stop: threading.Event) -> None:
    """A 200 that claims 16 GiB and streams as fast as the client reads."""
    _read_head(conn)
    chunk = b"[" + b"1," * 32_767
    try:
        conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 17179869184\r\n\r\n")
        while not stop.is_set():
            conn.sendall(chunk)
    except OSError:
        pass


BEHAVIOURS: Final[dict[str, Behaviour]] = {
    "hang": hang, "reset": reset, "trickle": trickle, "garbage": garbage, "junk-json": junk_json,
    "wrong-shapes": wrong_shapes, "gigantic": gigantic,
}


@contextmanager
def hostile_server(behaviour: str) -> Iterator[str]:
    """Serve ``behaviour`` on a free loopback port; yields the base URL."""
    act = BEHAVIOURS[behaviour]
    stop = threading.Event()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    listener.settimeout(0.1)
    connections: list[socket.socket] = []

    def serve_one(conn: socket.socket) -> None:
        try:
            act(conn, stop)
        finally:
            conn.close()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connections.append(conn)
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept_loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


# -- a proxy that bends a real server's answers -------------------------------------------------
#
# The servers above never answer well enough to get past provisioning; these rewrites sit in front
# of a working reference and bend each answer it gives (the identity read excepted where noted, so
# that ``diff`` gets as far as its steps), each the way a broken or hostile server would.

Answer = tuple[int, list[tuple[bytes, bytes]], bytes]
DEEP_BODY: Final = b"[" * 10_000 + b"]" * 10_000
HUGE_BYTES: Final = 1 << 20


def _is_identity(path: str) -> bool:
    return path.split("?")[0].endswith("/identity")


def _swap_types(value: Any) -> Any:
    """Each field of an object as another JSON type: a string as 1, a number as "1", and so on."""
    if not isinstance(value, dict):
        return {"items": value} if isinstance(value, list) else [value]
    swapped = {str: 1, int: "1", bool: "true", float: [], list: {}, dict: [], type(None): 0}
    return {key: swapped[type(item)] for key, item in value.items()}


def _deep(method: str, path: str, answer: Answer) -> Answer:
    status, headers, body = answer
    return answer if _is_identity(path) else (status, headers, DEEP_BODY)


def _wrong_types(method: str, path: str, answer: Answer) -> Answer:
    status, headers, body = answer
    try:
        return status, headers, json.dumps(_swap_types(json.loads(body))).encode()
    except ValueError:
        return answer


def _huge(method: str, path: str, answer: Answer) -> Answer:
    """The answer with a 1 MB string field added (what a server echoing big payloads sends)."""
    status, headers, body = answer
    try:
        doc = json.loads(body)
    except ValueError:
        return answer
    if not isinstance(doc, dict) or _is_identity(path):
        return answer
    return status, headers, json.dumps({**doc, "padding": "x" * HUGE_BYTES}).encode()


def _bad_utf8(method: str, path: str, answer: Answer) -> Answer:
    status, headers, body = answer
    if _is_identity(path):
        return answer
    bent = body[:-1] + b',"note":"\xff\xfe\xc3"}' if body.endswith(b"}") and len(body) > 2 else b'"\xff\xfe"'
    return status, headers, bent


def _cr_header(method: str, path: str, answer: Answer) -> Answer:
    status, headers, body = answer
    return answer if _is_identity(path) else (status, [*headers, (b"x-note", b"bare\rcarriage")], body)


def _lf_header(method: str, path: str, answer: Answer) -> Answer:
    status, headers, body = answer
    return answer if _is_identity(path) else (status, [*headers, (b"x-note", b"split\nx-injected: 1")], body)


REWRITES: Final[dict[str, Callable[[str, str, Answer], Answer]]] = {
    "deep": _deep, "wrong-types": _wrong_types, "huge": _huge, "bad-utf8": _bad_utf8,
    "cr-header": _cr_header, "lf-header": _lf_header,
}


@contextmanager
def hostile_proxy(upstream: str, rewrite: str) -> Iterator[str]:
    """Forward every request to ``upstream`` and bend its answer with ``REWRITES[rewrite]``; yields the URL."""
    bend = REWRITES[rewrite]
    target = urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def forward(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            upstream_conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port, timeout=60)
            try:
                sent = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                upstream_conn.request(self.command, self.path, body=body or None, headers=sent)
                got = upstream_conn.getresponse()
                answer: Answer = (got.status, [(k.encode("latin-1"), v.encode("latin-1")) for k, v in got.getheaders()
                                               if k.lower() not in ("content-length", "connection", "transfer-encoding")],
                                  got.read())
            finally:
                upstream_conn.close()
            status, headers, data = bend(self.command, self.path, answer)
            head = [b"HTTP/1.1 %d X" % status, *(k + b": " + v for k, v in headers),
                    b"content-length: %d" % len(data), b"connection: close"]
            self.wfile.write(b"\r\n".join(head) + b"\r\n\r\n" + data)
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
