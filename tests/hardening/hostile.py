"""Tiny hostile HTTP servers on 127.0.0.1 (port 0) for testing the kit's own robustness.

Each behaviour is a function of (connection, stop event); the server answers every connection
with it until stopped. They speak just enough HTTP to be dangerous: nothing here is a server
anyone should point a client at on purpose.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

__all__ = ["BEHAVIOURS", "hostile_server"]

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
