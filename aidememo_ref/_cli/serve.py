"""``aidememo-ref serve``: the reference ledger over HTTP with uvicorn.

Binds loopback by default; any other address needs ``--allow-insecure-http``, as upstream.
Prints one line with the URL once the socket is bound (``--bind HOST:0`` picks a free port);
SIGINT and SIGTERM stop it cleanly.
"""

from __future__ import annotations

import ipaddress
import os

from ._args import Parser, fail
from ._backend import add_backend_flags, check_backend, postgres_url, settings

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
    add_backend_flags(parser, serve=True)
    parser.add_argument("--bind", default="127.0.0.1:3030")
    parser.add_argument("--allow-insecure-http", action="store_true")
    parser.add_argument("--auth-bindings-file", metavar="PATH",
                        help="bind bearer tokens to one source_id and actor_id on the MCP gateway (kit extension)")
    parser.add_argument(
        "--test-clock", action="store_true",
        help="serve GET/POST /__test__/clock so a test can move the lease clock (never in production)",
    )
    parser.add_argument(
        "--claim-lease-ms", type=int, metavar="MS",
        help="reference-only: grant claim leases of MS milliseconds (100..120000) instead of 120000, so the "
             "conformance suite's real-time lease checks wait seconds, not minutes (never in production)",
    )
    args = parser.parse_args(argv)
    if args.claim_lease_ms is not None:
        if not 100 <= args.claim_lease_ms <= 120_000:
            fail(f"--claim-lease-ms must be between 100 and 120000, got {args.claim_lease_ms}")
        from .. import _state

        # Process-wide on purpose: this process serves one ledger, and the rules read the constant
        # when they grant or renew a lease.
        setattr(_state, "LEASE_MS", args.claim_lease_ms)
    host, port = parse_bind(args.bind)
    if not ipaddress.ip_address(host).is_loopback and not args.allow_insecure_http:
        fail("non-loopback plaintext HTTP requires --allow-insecure-http; prefer a TLS ingress")
    check_backend(args, serve=True)
    url = postgres_url(args) if args.canonical_backend == "postgres" else None
    if url is None:
        parent = os.path.dirname(os.path.abspath(args.database))
        if not os.path.isdir(parent):
            fail(f"database directory does not exist: {parent}")

    import uvicorn

    from .._clock import OffsetClock
    from .._gateway import BindingsError, load_bindings
    from .._reference import ReferenceLedger, bind_socket

    where = f"database={args.database}" if url is None else "backend=postgres"  # the URL is never printed
    try:
        bindings = None if args.auth_bindings_file is None else load_bindings(args.auth_bindings_file)
    except BindingsError as exc:
        fail(str(exc))
    try:
        ledger = ReferenceLedger(args.database, postgres_url=url, postgres=settings(args) if url else None,
                                 clock=OffsetClock() if args.test_clock else None, test_clock=args.test_clock,
                                 bindings=bindings)
    except Exception as exc:  # a corrupt file, an unreachable server: one line, not a traceback
        fail(f"cannot open the canonical store ({where}): {exc}")
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        fail(f"cannot bind {args.bind}: {exc.strerror}")
    bound_host, bound_port = sock.getsockname()[:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    print(f"aidememo-ref serving http://{shown}:{bound_port} {where}", flush=True)
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

