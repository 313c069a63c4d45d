"""A TCP proxy between the client and a real server that can lose answers the server already applied.

Each request is forwarded whole; the server's answer is read whole; then, if a drop rule
matches, the client's connection is closed without a byte of it. To the client this is a
transport failure after the write committed: exactly the case the one identical retry and
``recovered: true`` exist for.
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from simulations.faults.proxy import forward, read_request, send_answer

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

    def _one(self, rfile: Any, connection: socket.socket) -> bool:
        request = read_request(rfile)  # the fault campaigns' relay, so the two proxies cannot drift
        if request is None:
            return False
        with self._lock:
            self.seen.append((request.method, request.path))
        answer = forward(self._host, self._port, request, 30)
        if self._should_drop(request.method, request.path):
            connection.shutdown(socket.SHUT_RDWR)  # applied upstream, answer lost
            return False
        send_answer(connection, answer)
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
