"""SQLite storage for the XMemo reference: keys, memories, idempotency answers, MCP sessions.

Each write is one ``BEGIN IMMEDIATE`` transaction: idempotency lookup, the rules' lookups and
decision, the row write and the stored answer commit together or not at all, so two replays of
one key racing in threads or processes yield one memory. The file is opened as the AideMemo
ledger's (``aidememo_ref._sqlitefile``): an answered write survives ``kill -9`` of the server
(answers leave only after COMMIT returns). Raw API keys are never stored, only SHA-256.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from .._sqlitefile import BUSY_TIMEOUT_MS, Connections, is_busy, transaction
from ._errors import ProvisionError, RequestError
from ._records import Kind, Memory, MemoryType, Principal, Tenant, Trust
from ._store import IdempotencyClaim, Plan, ReadFilter
from ._writes import Outcome, Remember

if TYPE_CHECKING:
    from .._store import Scheduler

__all__ = ["SQLiteXMemoStore"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys(
  key_sha256 BLOB PRIMARY KEY CHECK(length(key_sha256) = 32),
  owner_id TEXT NOT NULL, organization_id TEXT NOT NULL, workspace_id TEXT NOT NULL, project_id TEXT NOT NULL,
  scopes TEXT NOT NULL, agent_id TEXT, active INTEGER NOT NULL DEFAULT 1, created_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS memories(
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
  owner_id TEXT NOT NULL, organization_id TEXT NOT NULL, workspace_id TEXT NOT NULL, project_id TEXT NOT NULL,
  kind TEXT NOT NULL, content TEXT NOT NULL, path TEXT NOT NULL, bucket TEXT NOT NULL, scope TEXT, team_id TEXT,
  memory_type TEXT NOT NULL, status TEXT NOT NULL, importance REAL, confidence REAL, semantic_key TEXT,
  state_key TEXT, event_type TEXT, session_id TEXT, source TEXT, agent_id TEXT, agent_instance_id_hash TEXT,
  agent_trust TEXT NOT NULL, metadata TEXT NOT NULL, version INTEGER NOT NULL, created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL, expires_at_ms INTEGER);
CREATE INDEX IF NOT EXISTS memories_tenant
  ON memories(owner_id, organization_id, workspace_id, project_id, updated_at_ms);
CREATE UNIQUE INDEX IF NOT EXISTS memories_state_slot
  ON memories(owner_id, organization_id, workspace_id, project_id, bucket, ifnull(scope, ''), state_key)
  WHERE kind = 'state';
CREATE INDEX IF NOT EXISTS memories_semantic_key
  ON memories(owner_id, organization_id, workspace_id, project_id, semantic_key) WHERE semantic_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS idempotency(
  owner_id TEXT NOT NULL, organization_id TEXT NOT NULL, workspace_id TEXT NOT NULL, project_id TEXT NOT NULL,
  idempotency_key TEXT NOT NULL, fingerprint TEXT NOT NULL, answer TEXT NOT NULL,
  PRIMARY KEY(owner_id, organization_id, workspace_id, project_id, idempotency_key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS mcp_sessions(
  session_id TEXT PRIMARY KEY, key_sha256 BLOB NOT NULL, protocol_version TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL) WITHOUT ROWID;
"""

_TENANT = "owner_id=? AND organization_id=? AND workspace_id=? AND project_id=?"
_COLUMNS = (
    "id, kind, content, path, bucket, scope, team_id, memory_type, status, importance, confidence, semantic_key, "
    "state_key, event_type, session_id, source, agent_id, agent_instance_id_hash, agent_trust, metadata, version, "
    "created_at_ms, updated_at_ms, expires_at_ms"
)
_LIVE = "(expires_at_ms IS NULL OR expires_at_ms > ?)"


def _key(tenant: Tenant) -> tuple[str, str, str, str]:
    return tenant.owner_id, tenant.organization_id, tenant.workspace_id, tenant.project_id


# The schema's column types are the record's (TEXT, INTEGER, REAL or NULL), so rows go in as they come.
_KINDS: Final = {k.value: k for k in Kind}
_TYPES: Final = {t.value: t for t in MemoryType}
_TRUSTS: Final = {t.value: t for t in Trust}


def _memory(tenant: Tenant, row: Any) -> Memory:
    (mid, kind, content, path, bucket, scope, team_id, memory_type, status, importance, confidence, semantic_key,
     state_key, event_type, session_id, source, agent_id, instance, trust, metadata, version, created, updated,
     expires) = row
    return Memory(
        id=mid, tenant=tenant, kind=_KINDS[kind], content=content, path=path, bucket=bucket,
        scope=scope, team_id=team_id, memory_type=_TYPES[memory_type], status=status,
        importance=importance, confidence=confidence,
        semantic_key=semantic_key, state_key=state_key, event_type=event_type, session_id=session_id,
        source=source, agent_id=agent_id, agent_instance_id_hash=instance, agent_trust=_TRUSTS[trust],
        metadata_json=metadata, version=version, created_at_ms=created, updated_at_ms=updated, expires_at_ms=expires,
    )


def _row(memory: Memory) -> tuple[object, ...]:
    m = memory
    return (
        m.id, m.kind.value, m.content, m.path, m.bucket, m.scope, m.team_id, m.memory_type.value, m.status,
        m.importance, m.confidence, m.semantic_key, m.state_key, m.event_type, m.session_id, m.source, m.agent_id,
        m.agent_instance_id_hash, m.agent_trust.value, m.metadata_json, m.version, m.created_at_ms,
        m.updated_at_ms, m.expires_at_ms,
    )


class _Existing:
    """The rules' window on the open write transaction, confined to one tenant."""

    __slots__ = ("_conn", "_tenant")

    def __init__(self, conn: sqlite3.Connection, tenant: Tenant) -> None:
        self._conn, self._tenant = conn, tenant

    def _one(self, where: str, args: tuple[object, ...]) -> Memory | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM memories WHERE {_TENANT} AND {where} ORDER BY seq LIMIT 1",
            (*_key(self._tenant), *args),
        ).fetchone()
        return None if row is None else _memory(self._tenant, row)

    def by_semantic_key(self, scope: str | None, semantic_key: str) -> Memory | None:
        return self._one("kind='memory' AND semantic_key=? AND scope IS ?", (semantic_key, scope))

    def duplicate(self, write: Remember) -> Memory | None:
        return self._one(
            "kind='memory' AND content=? AND path=? AND bucket=? AND scope IS ? AND team_id IS ? AND memory_type=?",
            (write.content, write.path, write.bucket, write.scope, write.team_id, write.memory_type.value),
        )

    def slot(self, bucket: str, scope: str | None, state_key: str) -> Memory | None:
        return self._one("kind='state' AND bucket=? AND ifnull(scope, '')=? AND state_key=?",
                         (bucket, scope or "", state_key))

    def by_id(self, memory_id: str) -> Memory | None:
        return self._one("id=?", (memory_id,))


class SQLiteXMemoStore:
    """The XMemo reference's SQLite file. Safe to share between threads and processes."""

    def __init__(
        self, path: str | Path, *, scheduler: Scheduler | None = None, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        self.path = str(path)
        self.scheduler = scheduler
        self._connections = Connections(path, busy_timeout_ms=busy_timeout_ms)
        with self._guard():
            self._conn().executescript(_SCHEMA)

    # -- plumbing ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """Storage faults leave as 503 (lock wait ran out: retryable) or 500, details never on the wire."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise (RequestError.unavailable() if is_busy(exc) else RequestError.internal()) from exc

    @contextmanager
    def _transaction(self, mode: str) -> Iterator[sqlite3.Connection]:
        with self._guard(), transaction(self._conn(), mode) as conn:
            yield conn

    def _point(self, name: str) -> None:
        if self.scheduler is not None:
            self.scheduler.point(name)

    def close(self) -> None:
        self._connections.close()

    # -- keys -------------------------------------------------------------------------------
    def principal(self, key_digest: bytes) -> Principal | None:
        with self._guard():
            row = self._conn().execute(
                "SELECT owner_id, organization_id, workspace_id, project_id, scopes, agent_id FROM api_keys "
                "WHERE key_sha256=? AND active=1", (key_digest,),
            ).fetchone()
        if row is None:
            return None
        tenant = Tenant(owner_id=row[0], organization_id=row[1], workspace_id=row[2], project_id=row[3])
        return Principal(tenant=tenant, scopes=tuple(row[4].split(",")), bound_agent_id=row[5])

    def provision(self, *, key_digest: bytes, principal: Principal, now_ms: int) -> bool:
        wanted = (*_key(principal.tenant), ",".join(principal.scopes), principal.bound_agent_id)
        with self._transaction("IMMEDIATE") as conn:
            row = conn.execute(
                "SELECT owner_id, organization_id, workspace_id, project_id, scopes, agent_id FROM api_keys "
                "WHERE key_sha256=?", (key_digest,),
            ).fetchone()
            if row is None:
                conn.execute(
                    "INSERT INTO api_keys(key_sha256, owner_id, organization_id, workspace_id, project_id, scopes, "
                    "agent_id, created_at_ms) VALUES (?,?,?,?,?,?,?,?)", (key_digest, *wanted, now_ms),
                )
                return True
        if tuple(row) != wanted:
            raise ProvisionError(
                "key binding conflict: this key is already bound to another owner, tenant, scope set or agent"
            )
        return False

    def deactivate(self, key_digest: bytes) -> None:
        """Revoke a key (no HTTP route does this; tests use it for the inactive-key case)."""
        with self._transaction("IMMEDIATE") as conn:
            conn.execute("UPDATE api_keys SET active=0 WHERE key_sha256=?", (key_digest,))

    # -- writes -----------------------------------------------------------------------------
    def write(self, tenant: Tenant, *, idempotency: IdempotencyClaim | None, plan: Plan) -> tuple[str, bool]:
        # Scheduler points as the AideMemo store names them: "begin" once the write lock is held.
        with self._transaction("IMMEDIATE") as conn:
            self._point("begin")
            if idempotency is not None:
                replay = self._replay(conn, tenant, idempotency)
                if replay is not None:
                    return replay, True
            decision, answer = plan(_Existing(conn, tenant))
            self._point("decided")
            self._apply(conn, tenant, decision.outcome, decision.memory)
            if idempotency is not None:
                self._remember_answer(conn, tenant, idempotency, answer)
            self._point("commit")
        return answer, False

    @staticmethod
    def _remember_answer(conn: sqlite3.Connection, tenant: Tenant, claim: IdempotencyClaim, answer: str) -> None:
        conn.execute(
            "INSERT INTO idempotency(owner_id, organization_id, workspace_id, project_id, idempotency_key, "
            "fingerprint, answer) VALUES (?,?,?,?,?,?,?)",
            (*_key(tenant), claim.key, claim.fingerprint, answer),
        )

    @staticmethod
    def _replay(conn: sqlite3.Connection, tenant: Tenant, claim: IdempotencyClaim) -> str | None:
        row = conn.execute(
            f"SELECT fingerprint, answer FROM idempotency WHERE {_TENANT} AND idempotency_key=?",
            (*_key(tenant), claim.key),
        ).fetchone()
        if row is None:
            return None
        if row[0] != claim.fingerprint:
            raise RequestError.conflict("Idempotency key was already used with a different request")
        return str(row[1])

    @staticmethod
    def _apply(conn: sqlite3.Connection, tenant: Tenant, outcome: Outcome, memory: Memory) -> None:
        if outcome is Outcome.UNCHANGED:
            return
        if outcome is Outcome.CREATED:
            conn.execute(
                f"INSERT INTO memories(owner_id, organization_id, workspace_id, project_id, {_COLUMNS}) "
                f"VALUES ({','.join('?' * 28)})", (*_key(tenant), *_row(memory)),
            )
            return
        assignments = ", ".join(f"{name.strip()}=?" for name in _COLUMNS.split(",")[1:])
        conn.execute(f"UPDATE memories SET {assignments} WHERE {_TENANT} AND id=?",
                     (*_row(memory)[1:], *_key(tenant), memory.id))

    # -- reads ------------------------------------------------------------------------------
    def visible(self, tenant: Tenant, filters: ReadFilter, now_ms: int) -> list[Memory]:
        where, args = [_TENANT, _LIVE], [*_key(tenant), now_ms]
        for column, value in (("scope", filters.scope), ("bucket", filters.bucket), ("team_id", filters.team_id),
                              ("memory_type", None if filters.memory_type is None else filters.memory_type.value)):
            if value is not None:
                where.append(f"{column}=?")
                args.append(value)
        if filters.path is not None:
            if filters.path.endswith(("%", "*")):
                where.append("substr(path, 1, ?)=?")
                args += [len(filters.path) - 1, filters.path[:-1]]
            else:
                where.append("path=?")
                args.append(filters.path)
        if filters.since_ms is not None:
            where.append("created_at_ms>=?")
            args.append(filters.since_ms)
        if filters.until_ms is not None:
            where.append("created_at_ms<?")
            args.append(filters.until_ms)
        with self._guard():
            rows = self._conn().execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {' AND '.join(where)} ORDER BY seq", args
            ).fetchall()
        return [_memory(tenant, row) for row in rows]

    def get(self, tenant: Tenant, memory_id: str, now_ms: int) -> Memory | None:
        with self._guard():
            row = self._conn().execute(
                f"SELECT {_COLUMNS} FROM memories WHERE {_TENANT} AND id=? AND {_LIVE}",
                (*_key(tenant), memory_id, now_ms),
            ).fetchone()
        return None if row is None else _memory(tenant, row)

    def count(self, tenant: Tenant) -> int:
        """How many rows the tenant has, expired included (tests and the simulator's checks)."""
        with self._guard():
            return int(self._conn().execute(f"SELECT count(*) FROM memories WHERE {_TENANT}", _key(tenant)).fetchone()[0])

    # -- MCP sessions -----------------------------------------------------------------------
    def open_session(self, session_id: str, key_digest: bytes, protocol_version: str, now_ms: int) -> None:
        with self._transaction("IMMEDIATE") as conn:
            conn.execute("INSERT INTO mcp_sessions(session_id, key_sha256, protocol_version, created_at_ms) "
                         "VALUES (?,?,?,?)", (session_id, key_digest, protocol_version, now_ms))

    def session_owner(self, session_id: str) -> bytes | None:
        with self._guard():
            row = self._conn().execute("SELECT key_sha256 FROM mcp_sessions WHERE session_id=?",
                                       (session_id,)).fetchone()
        return None if row is None else bytes(row[0])

    def end_session(self, session_id: str) -> None:
        with self._transaction("IMMEDIATE") as conn:
            conn.execute("DELETE FROM mcp_sessions WHERE session_id=?", (session_id,))
