"""``aidememo-ref serve``: the reference ledger over HTTP with uvicorn.

Binds loopback by default; any other address needs ``--allow-insecure-http``, as upstream.
Prints one line with the URL once the socket is bound (``--bind HOST:0`` picks a free port);
SIGINT and SIGTERM stop it cleanly.
"""

from __future__ import annotations

import ipaddress
import os

from ._args import Parser, fail

__all__ = ["run"]


def parse_bind(value: str) -> tuple[str, int]:
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit() or int(port_text) > 65535:
        fail(f"--bind must be IP:PORT, got {value!r}")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        fail(f"--bind needs an IP literal, not a hostname: {host!r}")
    return host, int(port_text)


def run(argv: list[str]) -> int:
    parser = Parser(prog="aidememo-ref serve", description="Serve the reference ledger over HTTP.")
    parser.add_argument("--canonical-backend", choices=["sqlite"], default="sqlite")
    parser.add_argument("--database", required=True)
    parser.add_argument("--bind", default="127.0.0.1:3030")
    parser.add_argument("--allow-insecure-http", action="store_true")
    parser.add_argument("--auth-bindings-file", metavar="PATH",
                        help="bind bearer tokens to one source_id and actor_id on the MCP gateway (kit extension)")
    parser.add_argument(
        "--test-clock", action="store_true",
        help="serve GET/POST /__test__/clock so a test can move the lease clock (never in production)",
    )
    args = parser.parse_args(argv)
    host, port = parse_bind(args.bind)
    if not ipaddress.ip_address(host).is_loopback and not args.allow_insecure_http:
        fail(f"refusing to serve plain HTTP on non-loopback address {host} without --allow-insecure-http")
    parent = os.path.dirname(os.path.abspath(args.database))
    if not os.path.isdir(parent):
        fail(f"database directory does not exist: {parent}")

    import uvicorn

    from .._clock import OffsetClock
    from .._gateway import BindingsError, load_bindings
    from .._reference import ReferenceLedger, bind_socket

    try:
        bindings = None if args.auth_bindings_file is None else load_bindings(args.auth_bindings_file)
    except BindingsError as exc:
        fail(str(exc))
    try:
        ledger = ReferenceLedger(args.database, clock=OffsetClock() if args.test_clock else None, test_clock=args.test_clock,
                                 bindings=bindings)
    except Exception as exc:  # a corrupt or unreadable file: one line, not a traceback
        fail(f"cannot open database {args.database}: {exc}")
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        fail(f"cannot bind {args.bind}: {exc.strerror}")
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"aidememo-ref serving http://{shown}:{bound_port} database={args.database}", flush=True)
    config = uvicorn.Config(ledger.asgi, log_level="warning", lifespan="off", access_log=False)
    _graceful_server_class()(config).run(sockets=[sock])
    ledger.close()
    return 0


def _graceful_server_class() -> type:
    import signal
    from collections.abc import Iterator
    from contextlib import contextmanager

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

