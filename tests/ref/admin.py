"""Suspensions and revocations as an operator makes them: a statement of their own on the ledger's
database, from another connection (upstream has no HTTP route for them, and neither has the
reference: they are not part of the server)."""

from __future__ import annotations

import sqlite3

from aidememo_ref import ReferenceLedger

_TABLES = ("tenants", "projects", "actors", "memberships")


def _execute(ledger: ReferenceLedger, sqlite_sql: str, args: tuple[object, ...], postgres_url: str | None) -> None:
    if postgres_url is not None:
        import psycopg

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(sqlite_sql.replace("?", "%s").replace("UPDATE ", "UPDATE ssot_"), args)
        return
    assert ledger.database is not None
    conn = sqlite3.connect(ledger.database)
    try:
        with conn:
            conn.execute(sqlite_sql, args)
    finally:
        conn.close()


def set_status(ledger: ReferenceLedger, table: str, status: str, *, postgres_url: str | None = None,
               **key: str) -> None:
    """Suspend or reactivate a tenant, project, actor or membership."""
    assert table in _TABLES, table
    where = " AND ".join(f"{column} = ?" for column in key)
    _execute(ledger, f"UPDATE {table} SET status = ? WHERE {where}", (status, *key.values()), postgres_url)


def revoke_token(ledger: ReferenceLedger, digest: bytes, *, postgres_url: str | None = None) -> None:
    _execute(ledger, "UPDATE token_bindings SET active = FALSE WHERE token_sha256 = ?", (digest,), postgres_url)
