"""The canonical-backend flags ``bootstrap`` and ``serve`` share, with upstream's rules and texts.

Flags, defaults, order of checks and refusal texts are ``aidememo-server``'s (``srv/main.rs``
``validate_bootstrap_args``, ``validate_serve_args``, ``validate_postgres_*``,
``postgres_url_from_env``). The PostgreSQL URL is only ever read from the environment variable
named by ``--postgres-url-env``, never from argv, and is never printed.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from refkit.args import Parser, fail

if TYPE_CHECKING:
    from .._postgres import PostgresSettings

__all__ = ["add_backend_flags", "check_backend", "postgres_url", "settings"]

_I32_MAX = (1 << 31) - 1
TLS_REFUSAL = ("PostgreSQL TLS is required by default and is not yet implemented; local/test use must "
               "explicitly select --postgres-transport insecure-no-tls")


def add_backend_flags(parser: Parser, *, serve: bool) -> None:
    parser.add_argument("--canonical-backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--database")
    parser.add_argument("--postgres-url-env", default="AIDEMEMO_POSTGRES_URL")
    parser.add_argument("--postgres-transport", choices=["require-tls", "insecure-no-tls"], default="require-tls")
    if serve:
        parser.add_argument("--postgres-pool-size", type=int, default=8)
        parser.add_argument("--postgres-acquire-timeout-ms", type=int, default=500)
        parser.add_argument("--postgres-operation-timeout-ms", type=int, default=10_000)
    parser.add_argument("--postgres-statement-timeout-ms", type=int, default=8_000)
    parser.add_argument("--postgres-lock-timeout-ms", type=int, default=2_000)
    if serve:
        # The reference serves no artifact routes; the flag exists so upstream's invocations run
        # unchanged, with upstream's rule that PostgreSQL needs it disabled.
        parser.add_argument("--artifact-backend", choices=["disabled", "local", "s3"], default="local")


def _session_timeouts(statement_ms: int, lock_ms: int) -> None:
    if statement_ms <= 0 or lock_ms <= 0:
        fail("PostgreSQL statement and lock timeouts must be greater than zero")
    if lock_ms > statement_ms:
        fail("PostgreSQL lock timeout must not exceed statement timeout")
    if statement_ms > _I32_MAX or lock_ms > _I32_MAX:
        fail("PostgreSQL statement/lock timeout exceeds supported millisecond range")


def check_backend(args: argparse.Namespace, *, serve: bool) -> None:
    """Refuse a flag combination upstream refuses, with its text (exit 1); PostgreSQL without the
    kit's ``postgres`` extra installed is refused with the pip command that adds it (exit 2)."""
    if args.canonical_backend == "sqlite":
        if args.database is None:
            fail("SQLite canonical backend requires --database" if serve else "SQLite bootstrap requires --database")
        return
    if args.database is not None:
        fail("--database is SQLite-only and must be omitted for PostgreSQL")
    if serve and args.artifact_backend != "disabled":
        fail("PostgreSQL canonical backend currently requires --artifact-backend disabled because artifact "
             "catalog metadata is node-local SQLite")
    if args.postgres_transport == "require-tls":
        fail(TLS_REFUSAL)
    if serve:
        if args.postgres_pool_size <= 0 or args.postgres_acquire_timeout_ms <= 0 \
                or args.postgres_operation_timeout_ms <= 0:
            fail("PostgreSQL pool size, acquire timeout, and operation timeout must be greater than zero")
    _session_timeouts(args.postgres_statement_timeout_ms, args.postgres_lock_timeout_ms)
    if serve and args.postgres_statement_timeout_ms >= args.postgres_operation_timeout_ms:
        fail("PostgreSQL statement timeout must be shorter than operation timeout")
    if not args.postgres_url_env.strip():
        fail("PostgreSQL URL environment variable name must not be empty")
    from refkit.extras import MissingExtra, require  # here: bootstrap on SQLite loads nothing it does not need

    try:  # after upstream's refusals, which need no driver
        require("postgres", "--canonical-backend postgres")
    except MissingExtra as exc:
        fail(str(exc), code=2)


def postgres_url(args: argparse.Namespace) -> str:
    name = args.postgres_url_env
    value = os.environ.get(name)
    if value is None:
        fail(f"PostgreSQL URL environment variable {name} is not set")
    if not value.strip():
        fail(f"PostgreSQL URL environment variable {name} is empty")
    return value


def settings(args: argparse.Namespace) -> PostgresSettings:
    from .._postgres import PostgresSettings

    return PostgresSettings(
        pool_size=getattr(args, "postgres_pool_size", 1),
        acquire_timeout_ms=getattr(args, "postgres_acquire_timeout_ms", 5_000),
        statement_timeout_ms=args.postgres_statement_timeout_ms,
        lock_timeout_ms=args.postgres_lock_timeout_ms,
    )
