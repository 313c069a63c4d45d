"""SQLite storage: the one adapter between the pure rules and a database file.

Each command runs in one ``BEGIN IMMEDIATE`` transaction: receipt lookup, rule decision,
revision and sequence allocation, resource, change, receipt, mailbox index and search terms are
written together or not at all. Because the revision check happens inside that transaction,
two writers racing on one revision cannot both win, in threads or in separate processes.
WAL with ``synchronous=NORMAL`` survives ``kill -9`` of the process (the answer is sent only
after COMMIT returns); surviving power loss would need ``synchronous=FULL``.

Everything storage-specific stays behind this class, so another backend (PostgreSQL) can
replace it without touching the rules or the HTTP adapter.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from ._canonical import canonical_json
from ._commands import Command
from ._errors import LedgerError
from ._ledger import Stored, Write
from ._search import term_counts

__all__ = ["SQLiteStore", "Scheduler", "Membership", "SearchView", "ProvisionError", "SCHEMA_VERSION"]

SCHEMA_VERSION: Final = 4  # what upstream's SQLite store reports in /health
BUSY_TIMEOUT_MS: Final = 5_000  # upstream sqlite/lib.rs busy timeout

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants(
  tenant_id TEXT PRIMARY KEY, display_name TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active', created_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS projects(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, project_epoch TEXT NOT NULL,
  head_seq INTEGER NOT NULL DEFAULT 0, display_name TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active', created_at_ms INTEGER NOT NULL,
  PRIMARY KEY(tenant_id, project_id));
CREATE TABLE IF NOT EXISTS actors(
  tenant_id TEXT NOT NULL, actor_id TEXT NOT NULL, display_name TEXT NOT NULL,
  kind TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active', created_at_ms INTEGER NOT NULL,
  PRIMARY KEY(tenant_id, actor_id));
CREATE TABLE IF NOT EXISTS memberships(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  role TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active',
  PRIMARY KEY(tenant_id, project_id, actor_id));
CREATE TABLE IF NOT EXISTS token_bindings(
  token_sha256 BLOB PRIMARY KEY CHECK(length(token_sha256) = 32),
  tenant_id TEXT NOT NULL, actor_id TEXT NOT NULL, active INTEGER NOT NULL DEFAULT 1,
  created_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS resources(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL,
  revision INTEGER NOT NULL, deleted INTEGER NOT NULL, body TEXT,
  PRIMARY KEY(tenant_id, project_id, kind, id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipts(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, command_id TEXT NOT NULL,
  actor_id TEXT NOT NULL, fingerprint TEXT NOT NULL, kind TEXT NOT NULL, id TEXT NOT NULL,
  receipt TEXT NOT NULL,
  PRIMARY KEY(tenant_id, project_id, command_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS changes(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, seq INTEGER NOT NULL,
  kind TEXT NOT NULL, id TEXT NOT NULL, operation TEXT NOT NULL, revision INTEGER NOT NULL,
  actor_id TEXT NOT NULL, committed_at_ms INTEGER NOT NULL, body TEXT,
  operation_name TEXT NOT NULL,
  PRIMARY KEY(tenant_id, project_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS handoff_index(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, handoff_id TEXT NOT NULL,
  from_actor TEXT NOT NULL, to_actor TEXT NOT NULL, source_id TEXT, status TEXT NOT NULL,
  updated_seq INTEGER NOT NULL, revision INTEGER NOT NULL,
  PRIMARY KEY(tenant_id, project_id, handoff_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS handoff_inbox ON handoff_index(tenant_id, project_id, to_actor, updated_seq);
CREATE INDEX IF NOT EXISTS handoff_outbox ON handoff_index(tenant_id, project_id, from_actor, updated_seq);
CREATE TABLE IF NOT EXISTS search_docs(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, fact_id TEXT NOT NULL, length INTEGER NOT NULL,
  PRIMARY KEY(tenant_id, project_id, fact_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS search_terms(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, term TEXT NOT NULL, fact_id TEXT NOT NULL,
  tf INTEGER NOT NULL,
  PRIMARY KEY(tenant_id, project_id, term, fact_id)) WITHOUT ROWID;
"""


class Scheduler(Protocol):
    """Called at transaction boundaries so a simulation can force an interleaving."""

    def point(self, name: str) -> None: ...


class ProvisionError(Exception):
    """Bootstrap refused: the message is one line for the command line."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchView:
    """One read of the search index: head, corpus statistics, postings and the matched facts."""

    epoch: str
    head: int
    resources: int  # all resource rows, for the snapshot bound
    n_docs: int
    avg_len: float
    df: dict[str, int]
    postings: list[tuple[str, str, int, int]]  # (term, fact_id, tf, doc_len)
    facts: dict[str, str]  # fact_id -> canonical body


@dataclass(frozen=True, slots=True)
class Membership:
    tenant_id: str
    project_id: str
    actor_id: str
    role: str
    project_epoch: str


class _TxView:
    """The rules' window on the open write transaction of one project."""

    __slots__ = ("_conn", "_tenant", "_project")

    def __init__(self, conn: sqlite3.Connection, tenant: str, project: str) -> None:
        self._conn, self._tenant, self._project = conn, tenant, project

    def get(self, kind: str, resource_id: str) -> Stored | None:
        row = self._conn.execute(
            "SELECT revision, deleted, body FROM resources WHERE tenant_id=? AND project_id=? AND kind=? AND id=?",
            (self._tenant, self._project, kind, resource_id),
        ).fetchone()
        if row is None:
            return None
        return Stored(row[0], bool(row[1]), None if row[2] is None else json.loads(row[2]))

    def member_role(self, actor_id: str) -> str | None:
        row = self._conn.execute(
            "SELECT m.role FROM memberships m JOIN actors a ON a.tenant_id=m.tenant_id AND a.actor_id=m.actor_id "
            "WHERE m.tenant_id=? AND m.project_id=? AND m.actor_id=? AND m.status='active' AND a.status='active'",
            (self._tenant, self._project, actor_id),
        ).fetchone()
        return None if row is None else str(row[0])


def _receipt_json(
    command: Command, tenant: str, actor: str, seq: int, revision: int, committed_at_ms: int
) -> str:
    # Field order as upstream serializes CommandReceipt (wire spec §1.2).
    return (
        f'{{"command_id":{json.dumps(command.command_id)},"fingerprint":"{command.fingerprint}",'
        f'"tenant_id":{json.dumps(tenant)},"project_id":{json.dumps(command.project_id)},'
        f'"actor_id":{json.dumps(actor)},"project_seq":{seq},'
        f'"resource":{{"kind":{json.dumps(command.kind)},"id":{json.dumps(command.resource_id)}}},'
        f'"revision":{revision},"committed_at_ms":{committed_at_ms}}}'
    )


class SQLiteStore:
    """The ledger's SQLite file. Safe to share between threads and processes."""

    def __init__(
        self, path: str | Path, *, scheduler: Scheduler | None = None, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        self.path = str(path)
        self.scheduler = scheduler
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        conn = self._conn()
        with self._guard():
            conn.executescript(_SCHEMA)
            conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    # -- plumbing ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=self.busy_timeout_ms / 1000
            )
            conn.execute(f"PRAGMA busy_timeout={self.busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
            with self._lock:
                self._connections.append(conn)
        return conn

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Map storage faults to the wire: lock timeouts are 503 (retryable), the rest 500."""
        try:
            yield
        except sqlite3.OperationalError as exc:
            text = str(exc)
            if "locked" in text or "busy" in text:
                raise LedgerError.storage_failure(unavailable=True) from exc
            raise LedgerError.storage_failure() from exc
        except sqlite3.DatabaseError as exc:
            raise LedgerError.storage_failure() from exc

    @contextmanager
    def _transaction(self, mode: str) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        with self._guard():
            conn.execute(f"BEGIN {mode}")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _point(self, name: str) -> None:
        if self.scheduler is not None:
            self.scheduler.point(name)

    def close(self) -> None:
        with self._lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    # -- identity ---------------------------------------------------------------------------
    def schema_version(self) -> int:
        """``PRAGMA user_version``, which ``/health`` reports; upstream reads it on every call too."""
        with self._guard():
            return int(self._conn().execute("PRAGMA user_version").fetchone()[0])

    def member_by_token(self, digest: bytes, project: str) -> Membership | None | bool:
        """One read for a request: False for a bad token, None for no active membership."""
        with self._guard():
            row = self._conn().execute(
                "SELECT b.tenant_id, b.actor_id, m.role, p.project_epoch FROM token_bindings b "
                "JOIN tenants t ON t.tenant_id=b.tenant_id AND t.status='active' "
                "JOIN actors a ON a.tenant_id=b.tenant_id AND a.actor_id=b.actor_id AND a.status='active' "
                "LEFT JOIN memberships m ON m.tenant_id=b.tenant_id AND m.project_id=? AND m.actor_id=b.actor_id "
                "AND m.status='active' "
                "LEFT JOIN projects p ON p.tenant_id=m.tenant_id AND p.project_id=m.project_id AND p.status='active' "
                "WHERE b.token_sha256=? AND b.active=1",
                (project, digest),
            ).fetchone()
        if row is None:
            return False
        if row[2] is None or row[3] is None:
            return None
        return Membership(row[0], project, row[1], row[2], row[3])

    def provision(
        self,
        *,
        tenant_id: str,
        project_id: str,
        actor_id: str,
        token_digest: bytes,
        role: str,
        actor_kind: str,
        project_epoch: str | None,
        new_epoch: str,
        tenant_name: str,
        project_name: str,
        actor_name: str,
        now_ms: int,
    ) -> str:
        """Idempotent bootstrap of tenant, project, actor, membership and token binding.

        Re-running with the same arguments changes nothing; a conflicting epoch, actor kind,
        role or token owner is refused and rolls the whole bootstrap back.
        """
        with self._transaction("IMMEDIATE") as conn:
            conn.execute(
                "INSERT OR IGNORE INTO tenants(tenant_id, display_name, created_at_ms) VALUES (?,?,?)",
                (tenant_id, tenant_name, now_ms),
            )
            row = conn.execute(
                "SELECT project_epoch FROM projects WHERE tenant_id=? AND project_id=?", (tenant_id, project_id)
            ).fetchone()
            if row is None:
                epoch = project_epoch or new_epoch
                conn.execute(
                    "INSERT INTO projects(tenant_id, project_id, project_epoch, display_name, created_at_ms) VALUES (?,?,?,?,?)",
                    (tenant_id, project_id, epoch, project_name, now_ms),
                )
            else:
                epoch = row[0]
                if project_epoch is not None and project_epoch != epoch:
                    raise ProvisionError(
                        f"project epoch conflict: project {project_id} already has epoch {epoch}, not {project_epoch}"
                    )
            row = conn.execute(
                "SELECT kind FROM actors WHERE tenant_id=? AND actor_id=?", (tenant_id, actor_id)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO actors(tenant_id, actor_id, display_name, kind, created_at_ms) VALUES (?,?,?,?,?)",
                    (tenant_id, actor_id, actor_name, actor_kind, now_ms),
                )
            elif row[0] != actor_kind:
                raise ProvisionError(f"actor identity conflict: actor {actor_id} is a {row[0]}, not a {actor_kind}")
            row = conn.execute(
                "SELECT role FROM memberships WHERE tenant_id=? AND project_id=? AND actor_id=?",
                (tenant_id, project_id, actor_id),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO memberships(tenant_id, project_id, actor_id, role) VALUES (?,?,?,?)",
                    (tenant_id, project_id, actor_id, role),
                )
            elif row[0] != role:
                raise ProvisionError(f"membership conflict: actor {actor_id} is a {row[0]} of {project_id}, not a {role}")
            row = conn.execute(
                "SELECT tenant_id, actor_id FROM token_bindings WHERE token_sha256=?", (token_digest,)
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO token_bindings(token_sha256, tenant_id, actor_id, created_at_ms) VALUES (?,?,?,?)",
                    (token_digest, tenant_id, actor_id, now_ms),
                )
            elif (row[0], row[1]) != (tenant_id, actor_id):
                raise ProvisionError("token binding conflicts: this token is already bound to another actor")
        return str(epoch)

    def set_status(self, table: str, status: str, **key: str) -> None:
        """Suspend or reactivate an identity row (there is no HTTP route for this upstream)."""
        if table not in ("tenants", "projects", "actors", "memberships"):
            raise ValueError(table)
        where = " AND ".join(f"{name}=?" for name in key)
        with self._transaction("IMMEDIATE") as conn:
            conn.execute(f"UPDATE {table} SET status=? WHERE {where}", (status, *key.values()))

    def revoke_token(self, digest: bytes) -> None:
        with self._transaction("IMMEDIATE") as conn:
            conn.execute("UPDATE token_bindings SET active=0 WHERE token_sha256=?", (digest,))

    # -- writes -----------------------------------------------------------------------------
    def execute(
        self,
        member: Membership,
        command: Command,
        now_ms: int,
        decide: Callable[[Command, str, Any, int], Write],
    ) -> str:
        """Replay or decide and commit one command; returns the receipt JSON text."""
        with self._transaction("IMMEDIATE") as conn:
            self._point("begin")
            stored = self._replay(conn, member, command)
            if stored is not None:
                return stored
            write = decide(command, member.actor_id, _TxView(conn, member.tenant_id, member.project_id), now_ms)
            self._point("decided")
            return self._apply(conn, member, command, write, now_ms)

    @staticmethod
    def _replay(conn: sqlite3.Connection, member: Membership, command: Command) -> str | None:
        """The stored receipt of an identical earlier command, None for a new command id.

        The same id from another actor, or with another fingerprint or coordinate, is
        ``command_conflict`` (wire spec §2.4).
        """
        row = conn.execute(
            "SELECT actor_id, fingerprint, kind, id, receipt FROM receipts "
            "WHERE tenant_id=? AND project_id=? AND command_id=?",
            (member.tenant_id, member.project_id, command.command_id),
        ).fetchone()
        if row is None:
            return None
        if (row[0], row[1], row[2], row[3]) == (member.actor_id, command.fingerprint, command.kind, command.resource_id):
            return str(row[4])
        raise LedgerError.command_conflict()

    def _apply(self, conn: sqlite3.Connection, member: Membership, command: Command, write: Write, now_ms: int) -> str:
        tenant, project, actor = member.tenant_id, member.project_id, member.actor_id
        seq = conn.execute(
            "UPDATE projects SET head_seq=head_seq+1 WHERE tenant_id=? AND project_id=? RETURNING head_seq",
            (tenant, project),
        ).fetchone()[0]
        body = None if write.deleted else canonical_json(write.body)
        revision = conn.execute(
            "INSERT INTO resources(tenant_id, project_id, kind, id, revision, deleted, body) VALUES (?,?,?,?,1,?,?) "
            "ON CONFLICT DO UPDATE SET revision=revision+1, deleted=excluded.deleted, body=excluded.body "
            "RETURNING revision",
            (tenant, project, write.kind, write.resource_id, int(write.deleted), body),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO changes(tenant_id, project_id, seq, kind, id, operation, revision, actor_id, committed_at_ms, body, operation_name) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (tenant, project, seq, write.kind, write.resource_id, "delete" if write.deleted else "upsert",
             revision, actor, now_ms, body, command.operation),
        )
        receipt = _receipt_json(command, tenant, actor, seq, revision, now_ms)
        conn.execute(
            "INSERT INTO receipts(tenant_id, project_id, command_id, actor_id, fingerprint, kind, id, receipt) VALUES (?,?,?,?,?,?,?,?)",
            (tenant, project, command.command_id, actor, command.fingerprint, command.kind, command.resource_id, receipt),
        )
        if write.kind == "handoff":
            record = write.body
            conn.execute(
                "INSERT OR REPLACE INTO handoff_index(tenant_id, project_id, handoff_id, from_actor, to_actor, source_id, status, updated_seq, revision) "
                "VALUES (?,?,?,?,?,?,?,?,?)",
                (tenant, project, write.resource_id, record["from_actor"], record["to_actor"], record["source_id"],
                 record["status"], seq, revision),
            )
        elif write.kind == "fact" and revision == 1:
            # Facts are create-only, so their terms are indexed exactly once.
            counts, length = term_counts(write.body["content"])
            conn.execute(
                "INSERT INTO search_docs(tenant_id, project_id, fact_id, length) VALUES (?,?,?,?)",
                (tenant, project, write.resource_id, length),
            )
            conn.executemany(
                "INSERT INTO search_terms(tenant_id, project_id, term, fact_id, tf) VALUES (?,?,?,?,?)",
                [(tenant, project, term, write.resource_id, tf) for term, tf in counts.items()],
            )
        self._point("commit")
        return receipt

    # -- reads ------------------------------------------------------------------------------
    def resource(self, tenant: str, project: str, kind: str, resource_id: str) -> tuple[int, bool, str | None] | None:
        with self._guard():
            row = self._conn().execute(
                "SELECT revision, deleted, body FROM resources WHERE tenant_id=? AND project_id=? AND kind=? AND id=?",
                (tenant, project, kind, resource_id),
            ).fetchone()
        return None if row is None else (row[0], bool(row[1]), row[2])

    def snapshot(
        self, tenant: str, project: str, max_rows: int
    ) -> tuple[str, int, list[tuple[str, str, int, bool, str | None]]] | None:
        """(epoch, at_seq, rows) read atomically, or None when the project has too many rows."""
        with self._transaction("DEFERRED") as conn:
            epoch, at_seq = conn.execute(
                "SELECT project_epoch, head_seq FROM projects WHERE tenant_id=? AND project_id=?", (tenant, project)
            ).fetchone()
            rows = conn.execute(
                "SELECT kind, id, revision, deleted, body FROM resources WHERE tenant_id=? AND project_id=? "
                "ORDER BY kind, id LIMIT ?",
                (tenant, project, max_rows + 1),
            ).fetchall()
        if len(rows) > max_rows:
            return None
        return epoch, at_seq, [(r[0], r[1], r[2], bool(r[3]), r[4]) for r in rows]

    def changes(
        self, tenant: str, project: str, after_seq: int, limit: int
    ) -> tuple[str, int, list[tuple[Any, ...]], dict[tuple[str, str], tuple[bool, str | None]]]:
        """(epoch, head, up to limit+1 change rows, current state of their participant-scoped resources)."""
        with self._transaction("DEFERRED") as conn:
            epoch, head = conn.execute(
                "SELECT project_epoch, head_seq FROM projects WHERE tenant_id=? AND project_id=?", (tenant, project)
            ).fetchone()
            # Clamped: a cursor beyond the head (the service answers 409 for it) may exceed the
            # i64 that SQLite can bind.
            rows = conn.execute(
                "SELECT seq, kind, id, operation, revision, actor_id, committed_at_ms, body FROM changes "
                "WHERE tenant_id=? AND project_id=? AND seq>? ORDER BY seq LIMIT ?",
                (tenant, project, min(after_seq, head), limit + 1),
            ).fetchall()
            current: dict[tuple[str, str], tuple[bool, str | None]] = {}
            for row in rows:
                key = (row[1], row[2])
                if row[1] in ("handoff", "handoff_context") and key not in current:
                    state = conn.execute(
                        "SELECT deleted, body FROM resources WHERE tenant_id=? AND project_id=? AND kind=? AND id=?",
                        (tenant, project, *key),
                    ).fetchone()
                    current[key] = (bool(state[0]), state[1])
        return epoch, head, rows, current

    def mailbox(
        self,
        tenant: str,
        project: str,
        *,
        actor: str,
        box: str,
        source_id: str | None,
        include_completed: bool,
        before_seq: int | None,
        limit: int,
    ) -> list[tuple[int, int, str]]:
        """Up to limit+1 (updated_seq, revision, body) rows, newest transition first."""
        column = "to_actor" if box == "inbox" else "from_actor"
        sql = [
            "SELECT h.updated_seq, h.revision, r.body FROM handoff_index h JOIN resources r "
            "ON r.tenant_id=h.tenant_id AND r.project_id=h.project_id AND r.kind='handoff' AND r.id=h.handoff_id "
            f"WHERE h.tenant_id=? AND h.project_id=? AND h.{column}=? AND r.deleted=0"
        ]
        args: list[Any] = [tenant, project, actor]
        if source_id is not None:
            sql.append("AND h.source_id=?")
            args.append(source_id)
        if not include_completed:
            sql.append("AND h.status<>'completed'")
        if before_seq is not None:
            sql.append("AND h.updated_seq<?")
            args.append(before_seq)
        sql.append("ORDER BY h.updated_seq DESC LIMIT ?")
        args.append(limit + 1)
        with self._guard():
            return [(r[0], r[1], r[2]) for r in self._conn().execute(" ".join(sql), args).fetchall()]

    def search(self, tenant: str, project: str, terms: list[str]) -> SearchView:
        """Everything a lexical search needs, read in one transaction (one snapshot)."""
        with self._transaction("DEFERRED") as conn:
            epoch, head = conn.execute(
                "SELECT project_epoch, head_seq FROM projects WHERE tenant_id=? AND project_id=?", (tenant, project)
            ).fetchone()
            resources = conn.execute(
                "SELECT count(*) FROM resources WHERE tenant_id=? AND project_id=?", (tenant, project)
            ).fetchone()[0]
            n_docs, total = conn.execute(
                "SELECT count(*), coalesce(sum(length), 0) FROM search_docs WHERE tenant_id=? AND project_id=?",
                (tenant, project),
            ).fetchone()
            df: dict[str, int] = {}
            postings: list[tuple[str, str, int, int]] = []
            facts: dict[str, str] = {}
            for term in terms:
                rows = conn.execute(
                    "SELECT t.fact_id, t.tf, d.length, r.body FROM search_terms t JOIN search_docs d "
                    "ON d.tenant_id=t.tenant_id AND d.project_id=t.project_id AND d.fact_id=t.fact_id "
                    "JOIN resources r ON r.tenant_id=t.tenant_id AND r.project_id=t.project_id "
                    "AND r.kind='fact' AND r.id=t.fact_id AND r.deleted=0 "
                    "WHERE t.tenant_id=? AND t.project_id=? AND t.term=?",
                    (tenant, project, term),
                ).fetchall()
                df[term] = len(rows)
                postings.extend((term, r[0], r[1], r[2]) for r in rows)
                facts.update((r[0], r[3]) for r in rows)
        return SearchView(
            epoch=epoch, head=head, resources=resources, n_docs=n_docs,
            avg_len=total / n_docs if n_docs else 0.0, df=df, postings=postings, facts=facts,
        )
