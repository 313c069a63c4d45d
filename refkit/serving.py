"""Serving either reference over a socket: what every ``... serve`` command shares (the listen
flags and their checks, the socket, the one-line banner, a uvicorn server that stops cleanly on
SIGINT and SIGTERM) and ``serve_in_thread`` for tests and campaigns.

Loopback by default; any other address needs ``--allow-insecure-http`` (upstream's rule and
refusal text). ``--bind HOST:0`` picks a free port: the banner, printed once the socket is bound,
names the port actually taken, so scripts and tests read the URL from it.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from .args import fail

if TYPE_CHECKING:
    import socket

    from .asgi import ASGIApp

__all__ = ["add_listen_flags", "listen_address", "require_database_dir", "serve", "bind_socket", "Servable",
           "serve_in_thread"]


def add_listen_flags(parser: argparse.ArgumentParser, default_bind: str) -> None:
    parser.add_argument("--bind", default=default_bind)
    parser.add_argument("--allow-insecure-http", action="store_true")


def _parse_bind(value: str) -> tuple[str, int]:
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        fail(f"--bind must be IP:PORT, got {value!r}")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        fail(f"--bind needs an IP literal, not a hostname: {host!r}")
    return host, int(port_text)


def listen_address(args: argparse.Namespace) -> tuple[str, int]:
    """``--bind`` checked: an IP literal and a port, loopback unless ``--allow-insecure-http``."""
    host, port = _parse_bind(args.bind)
    if not ipaddress.ip_address(host).is_loopback and not args.allow_insecure_http:
        fail("non-loopback plaintext HTTP requires --allow-insecure-http; prefer a TLS ingress")
    return host, port


def require_database_dir(database: str) -> None:
    """A missing directory is the caller's typo; SQLite would only say it cannot open the file."""
    parent = os.path.dirname(os.path.abspath(database))
    if not os.path.isdir(parent):
        fail(f"database directory does not exist: {parent}")


def serve(app: ASGIApp, *, host: str, port: int, bind: str, name: str, where: str) -> None:
    """Serve ``app`` on ``host:port`` until SIGINT or SIGTERM, after printing the banner
    ``<name> serving http://HOST:PORT <where>`` (``where`` names the store, never a secret)."""
    import uvicorn

    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        fail(f"cannot bind {bind}: {exc.strerror}")
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"{name} serving http://{shown}:{bound_port} {where}", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    _graceful_server_class()(config).run(sockets=[sock])


def _graceful_server_class() -> type:
    import uvicorn

    class GracefulServer(uvicorn.Server):
        """Stops on SIGINT/SIGTERM and exits 0 (uvicorn re-raises the signal after shutdown)."""

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            def stop(signum: int, frame: object) -> None:
                self.should_exit = True

            previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return GracefulServer


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one), inheritable by a child process."""
    import socket  # here, not at the top: every ``serve --help`` and ``xmemo bootstrap`` imports this module

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY on accepted sockets only when the proto
    # says TCP, and without it a kept-alive client waits ~40 ms per answer (errata 9).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(1024)
    sock.set_inheritable(True)
    return sock


class Servable(Protocol):
    """Anything with an ASGI app: either reference, or a test's wrapper around one."""

    @property
    def asgi(self) -> ASGIApp: ...


@contextmanager
def serve_in_thread(ledger: Servable, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Serve ``ledger`` (a ``ReferenceLedger``, an ``XMemoReference``, or anything with an ``asgi``
    app) with uvicorn on a background thread; yields the base URL."""
    import threading

    import uvicorn

    sock = bind_socket(host, port)
    config = uvicorn.Config(ledger.asgi, log_level="warning", lifespan="off", access_log=False)
    server = _prompt_server_class()(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("the reference server thread stopped during start-up")
            threading.Event().wait(0.005)
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        yield f"http://{shown}:{bound[1]}"
    finally:
        server.stop()
        thread.join(timeout=10)
        sock.close()


def _prompt_server_class() -> type:
    import asyncio

    import uvicorn

    class PromptServer(uvicorn.Server):
        """Stops as soon as ``stop`` is called: uvicorn looks at ``should_exit`` every 0.1 s, which
        was most of the time a thread's server took to stop (a run stops one at its end)."""

        _loop: asyncio.AbstractEventLoop | None = None
        _wake: asyncio.Event | None = None

        async def main_loop(self) -> None:
            # uvicorn's loop (on_tick keeps the date header fresh and reads should_exit), with the
            # 0.1 s sleep cut short by stop().
            self._wake = asyncio.Event()
            self._loop = asyncio.get_running_loop()
            counter = 0
            while not await self.on_tick(counter):
                counter = (counter + 1) % 864000
                try:
                    await asyncio.wait_for(self._wake.wait(), 0.1)
                except asyncio.TimeoutError:
                    pass

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if self.config.lifespan != "off" or self.server_state.connections or self.server_state.tasks:
                await super().shutdown(sockets)  # uvicorn's: asks each connection to close, waits 0.1 s and for them
                return
            # Every client has gone (a run closes its wires first): nothing to ask or wait for.
            for server in self.servers:
                server.close()
            for sock in sockets or []:
                sock.close()
            for server in self.servers:
                await server.wait_closed()

        def stop(self) -> None:
            self.should_exit = True
            loop, wake = self._loop, self._wake
            if loop is not None and wake is not None:
                try:
                    loop.call_soon_threadsafe(wake.set)
                except RuntimeError:  # the loop has already closed
                    pass

    return PromptServer
