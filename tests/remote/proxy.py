"""A TCP proxy between the client and a real server that can lose answers the server already applied.

Each request is forwarded whole; the server's answer is read whole; then, if a drop rule
matches, the client's connection is closed without a byte of it. To the client this is a
transport failure after the write committed: exactly the case the one identical retry and
``recovered: true`` exist for.
"""

from __future__ import annotations

import http.client
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit

Rule = Callable[[str, str], bool]  # (method, path) -> drop this answer?


@dataclass
class Drops:
    """Drop the next ``count`` answers whose (method, path) match ``rule``."""

    rule: Rule
    count: int
    dropped: list[tuple[str, str]] = field(default_factory=list)


class DroppingProxy:
    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 80
        self._drops: list[Drops] = []
        self._lock = threading.Lock()
        self.seen: list[tuple[str, str]] = []
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                while proxy._one(self.rfile, self.connection):
                    pass

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def drop(self, rule: Rule, count: int = 1) -> Drops:
        drops = Drops(rule, count)
        with self._lock:
            self._drops.append(drops)
        return drops

    def _should_drop(self, method: str, path: str) -> bool:
        with self._lock:
            for drops in self._drops:
                if drops.count > 0 and drops.rule(method, path):
                    drops.count -= 1
                    drops.dropped.append((method, path))
                    return True
        return False

    def _one(self, rfile: object, connection: socket.socket) -> bool:
        reader = rfile  # a buffered reader over the client socket
        line = reader.readline()  # type: ignore[attr-defined]
        if not line:
            return False
        method, target, _ = line.decode("latin-1").split(" ", 2)
        headers: list[tuple[str, str]] = []
        length = 0
        while True:
            raw = reader.readline()  # type: ignore[attr-defined]
            if raw in (b"\r\n", b"\n", b""):
                break
            name, _, value = raw.decode("latin-1").partition(":")
            headers.append((name.strip(), value.strip()))
            if name.strip().lower() == "content-length":
                length = int(value.strip())
        body = reader.read(length) if length else b""  # type: ignore[attr-defined]
        path = target.split("?", 1)[0]
        with self._lock:
            self.seen.append((method, path))
        upstream = http.client.HTTPConnection(self._host, self._port, timeout=30)
        try:
            upstream.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
            for name, value in headers:
                if name.lower() != "connection":
                    upstream.putheader(name, value)
            upstream.endheaders(body or None)
            answer = upstream.getresponse()
            payload = answer.read()
            status, reason, answer_headers = answer.status, answer.reason, answer.getheaders()
        finally:
            upstream.close()
        if self._should_drop(method, path):
            connection.shutdown(socket.SHUT_RDWR)  # applied upstream, answer lost
            return False
        out = [f"HTTP/1.1 {status} {reason}\r\n".encode("latin-1")]
        for name, value in answer_headers:
            if name.lower() not in ("connection", "transfer-encoding", "content-length"):
                out.append(f"{name}: {value}\r\n".encode("latin-1"))
        out.append(f"content-length: {len(payload)}\r\n\r\n".encode("latin-1"))
        connection.sendall(b"".join(out) + payload)
        return True

    def start(self) -> DroppingProxy:
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def dropping_proxy(upstream: str) -> Iterator[DroppingProxy]:
    proxy = DroppingProxy(upstream).start()
    try:
        yield proxy
    finally:
        proxy.close()
