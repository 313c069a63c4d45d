"""``aidememo-ref serve``: the reference ledger over HTTP with uvicorn.

Binds loopback by default; any other address needs ``--allow-insecure-http``, as upstream.
Prints one line with the URL once the socket is bound (``--bind HOST:0`` picks a free port);
SIGINT and SIGTERM stop it cleanly (``_serving``, shared with ``aidememo-ref xmemo serve``).
"""

from __future__ import annotations

from refkit.args import Parser, fail
from ._backend import add_backend_flags, check_backend, postgres_url, settings
from refkit.serving import add_listen_flags, listen_address, require_database_dir, serve

__all__ = ["run"]


def run(argv: list[str]) -> int:
    parser = Parser(prog="aidememo-ref serve", description="Serve the reference ledger over HTTP.")
    add_backend_flags(parser, serve=True)
    add_listen_flags(parser, "127.0.0.1:3030")
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
    host, port = listen_address(args)
    check_backend(args, serve=True)
    url = postgres_url(args) if args.canonical_backend == "postgres" else None
    if url is None:
        require_database_dir(args.database)

    from refkit.clock import OffsetClock
    from .._gateway import BindingsError, load_bindings
    from .._reference import ReferenceLedger
    from .._state import LEASE_MS

    where = f"database={args.database}" if url is None else "backend=postgres"  # the URL is never printed
    try:
        bindings = None if args.auth_bindings_file is None else load_bindings(args.auth_bindings_file)
    except BindingsError as exc:
        fail(str(exc))
    try:
        ledger = ReferenceLedger(args.database, postgres_url=url, postgres=settings(args) if url else None,
                                 clock=OffsetClock() if args.test_clock else None, test_clock=args.test_clock,
                                 bindings=bindings,
                                 lease_ms=LEASE_MS if args.claim_lease_ms is None else args.claim_lease_ms)
    except Exception as exc:  # a corrupt file, an unreachable server: one line, not a traceback
        fail(f"cannot open the canonical store ({where}): {exc}")
    serve(ledger.asgi, host=host, port=port, bind=args.bind, name="aidememo-ref", where=where)
    ledger.close()
    return 0

