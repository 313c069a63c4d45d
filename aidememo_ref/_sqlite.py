"""SQLite storage: the ``Store`` of a single database file.

A write runs in one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock before
the first read: receipt lookup, the rules' reads, sequence and revision allocation, resource,
change (which is also the receipt) and the mailbox and search indexes are written together or
not at all, and two writers racing on one revision cannot both win, in threads or in separate
processes. WAL with ``synchronous=NORMAL`` survives ``kill -9`` of the process (the answer is
sent only after COMMIT returns); surviving power loss would need ``synchronous=FULL``.

A command costs two statements inside its transaction, three for typed kinds: the receipt
lookup; one change insert, which computes the project sequence (the feed's last ``seq`` plus
one, so no counter row is rewritten) and the resource's next revision itself, while a trigger
writes the resource row; and for typed kinds one index write. The change row carries the
command id and fingerprint, so it doubles as the receipt: a replay rebuilds the same bytes from
it. Statement texts are constants, so the driver's statement cache keeps each one prepared.
``docs/hardening.md`` measures what this costs against raw one-row transactions.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final

from ._commands import Command
from ._errors import LedgerError
from ._ledger import Write
from ._records import FACT, Change, Fact, Handoff, Membership, Receipt, Resource, Role
from ._search import term_counts
from ._sqlitefile import BUSY_TIMEOUT_MS, Connections, is_busy, transaction
from ._store import (
    Denied,
    FeedRead,
    MembershipChanged,
    MailboxQuery,
    MailboxRow,
    Posting,
    ProvisionError,
    SearchIndex,
    Snapshot,
    StoreError,
)
from ._visibility import PARTICIPANT_KINDS

__all__ = ["SQLiteStore", "ProvisionError", "SCHEMA_VERSION", "LAYOUT_VERSION", "BUSY_TIMEOUT_MS"]

SCHEMA_VERSION: Final = 4  # what upstream's SQLite store reports in /health
LAYOUT_VERSION: Final = 3  # this file's table layout (PRAGMA user_version); 4 and 2 were earlier ones
_TRIGGERLESS_LAYOUT: Final = 2  # layout 3's tables without its triggers: opened files are upgraded

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tenants(
  tenant_id TEXT PRIMARY KEY, display_name TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'active', created_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS projects(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, project_epoch TEXT NOT NULL,
  display_name TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'active', created_at_ms INTEGER NOT NULL,
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
CREATE TABLE IF NOT EXISTS changes(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, seq INTEGER NOT NULL,
  kind TEXT NOT NULL, id TEXT NOT NULL, revision INTEGER NOT NULL, actor_id TEXT NOT NULL,
  committed_at_ms INTEGER NOT NULL, body TEXT, command_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
  PRIMARY KEY(tenant_id, project_id, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX IF NOT EXISTS changes_command ON changes(tenant_id, project_id, command_id);
CREATE TABLE IF NOT EXISTS handoff_index(
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, handoff_id TEXT NOT NULL,
  from_actor TEXT NOT NULL, to_actor TEXT NOT NULL, source_id TEXT, status TEXT NOT NULL,
  updated_seq INTEGER NOT NULL,
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

_TABLES: Final = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))

# A change moves its resource row to the change's revision and body (one statement per write;
# an UPDATE, not an upsert, for an existing row: ON CONFLICT costs about three times as much).
_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS change_creates_resource AFTER INSERT ON changes WHEN NEW.revision = 1 BEGIN "
    "INSERT INTO resources(tenant_id, project_id, kind, id, revision, deleted, body) "
    "VALUES (NEW.tenant_id, NEW.project_id, NEW.kind, NEW.id, 1, NEW.body IS NULL, NEW.body); END",
    "CREATE TRIGGER IF NOT EXISTS change_moves_resource AFTER INSERT ON changes WHEN NEW.revision > 1 BEGIN "
    "UPDATE resources SET revision=NEW.revision, deleted=NEW.body IS NULL, body=NEW.body "
    "WHERE tenant_id=NEW.tenant_id AND project_id=NEW.project_id AND kind=NEW.kind AND id=NEW.id; END",
)
_HEAD = "SELECT coalesce(max(seq), 0) FROM changes WHERE tenant_id=? AND project_id=?"
_PROJECT = (f"SELECT project_epoch, ({_HEAD}) FROM projects WHERE tenant_id=? AND project_id=?")
_AUTHENTICATE = (
    "SELECT b.tenant_id, b.actor_id, m.role, p.project_epoch FROM token_bindings b "
    "JOIN tenants t ON t.tenant_id=b.tenant_id AND t.status='active' "
    "JOIN actors a ON a.tenant_id=b.tenant_id AND a.actor_id=b.actor_id AND a.status='active' "
    "LEFT JOIN memberships m ON m.tenant_id=b.tenant_id AND m.project_id=? AND m.actor_id=b.actor_id "
    "AND m.status='active' "
    "LEFT JOIN projects p ON p.tenant_id=m.tenant_id AND p.project_id=m.project_id AND p.status='active' "
    "WHERE b.token_sha256=? AND b.active=1"
)
_RESOURCE = "SELECT revision, body FROM resources WHERE tenant_id=? AND project_id=? AND kind=? AND id=?"
_MEMBER_ROLE = (
    "SELECT m.role FROM memberships m JOIN actors a ON a.tenant_id=m.tenant_id AND a.actor_id=m.actor_id "
    "WHERE m.tenant_id=? AND m.project_id=? AND m.actor_id=? AND m.status='active' AND a.status='active'"
)
_REPLAY = (
    "SELECT actor_id, fingerprint, kind, id, seq, revision, committed_at_ms FROM changes "
    "WHERE tenant_id=? AND project_id=? AND command_id=?"
)
# The next sequence of the project and the next revision of the resource, computed under the
# write lock (held since BEGIN IMMEDIATE); the triggers above move the resource row to it.
_INSERT_CHANGE = (
    "INSERT INTO changes(tenant_id, project_id, seq, kind, id, revision, actor_id, committed_at_ms, body, "
    "command_id, fingerprint) VALUES (?1, ?2, "
    "(SELECT coalesce(max(seq), 0) + 1 FROM changes WHERE tenant_id=?1 AND project_id=?2), ?3, ?4, "
    "coalesce((SELECT revision FROM resources WHERE tenant_id=?1 AND project_id=?2 AND kind=?3 AND id=?4), 0) + 1, "
    "?5, ?6, ?7, ?8, ?9) RETURNING seq, revision"
)
_INDEX_HANDOFF = (
    "INSERT OR REPLACE INTO handoff_index(tenant_id, project_id, handoff_id, from_actor, to_actor, source_id, "
    "status, updated_seq) VALUES (?,?,?,?,?,?,?,?)"
)
_FEED = (
    "SELECT c.seq, c.kind, c.id, c.revision, c.actor_id, c.committed_at_ms, c.body, r.revision, r.body "
    "FROM changes c LEFT JOIN resources r ON c.kind IN ('handoff', 'handoff_context') "
    "AND r.tenant_id=c.tenant_id AND r.project_id=c.project_id AND r.kind=c.kind AND r.id=c.id "
    "WHERE c.tenant_id=? AND c.project_id=? AND c.seq>? ORDER BY c.seq LIMIT ?"
)
_IDENTITY_TABLES: Final = ("tenants", "projects", "actors", "memberships")


def _map(exc: BaseException) -> LedgerError:
    """Storage faults on the wire: lock timeouts are 503 (retryable), the rest 500."""
    return LedgerError.storage_failure(unavailable=is_busy(exc))


class _Tx:
    """A transaction bound to one member's project: the rules' view, replay and apply."""

    __slots__ = ("_conn", "_member", "_mode", "_tenant", "_project", "_check")

    def __init__(self, conn: sqlite3.Connection, member: Membership, mode: str,
                 check: Callable[[sqlite3.Connection], None] | None = None) -> None:
        self._conn, self._member, self._mode, self._check = conn, member, mode, check
        self._tenant, self._project = member.tenant_id, member.project_id

    def __enter__(self) -> _Tx:
        try:
            self._conn.execute(self._mode)
            if self._check is not None:
                self._check(self._conn)  # a deferred membership, checked inside the transaction
        except sqlite3.DatabaseError as exc:
            self._abandon()
            raise _map(exc) from exc
        except MembershipChanged:
            self._abandon()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            try:
                self._conn.execute("COMMIT")
            except sqlite3.DatabaseError as fault:
                self._abandon()
                raise _map(fault) from fault
            return
        self._abandon()
        if isinstance(exc, sqlite3.DatabaseError):
            raise _map(exc) from exc

    def _abandon(self) -> None:
        """Roll back whatever is open; the connection must be reusable after any failure."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.DatabaseError:
                pass  # the original failure is the one worth reporting

    # -- View --------------------------------------------------------------------------------
    def resource(self, kind: str, resource_id: str) -> Resource | None:
        row = self._conn.execute(_RESOURCE, (self._tenant, self._project, kind, resource_id)).fetchone()
        return None if row is None else Resource(kind=kind, resource_id=resource_id, revision=row[0], body=row[1])

    def member_role(self, actor_id: str) -> Role | None:
        row = self._conn.execute(_MEMBER_ROLE, (self._tenant, self._project, actor_id)).fetchone()
        return None if row is None else Role(row[0])

    # -- primitives ------------------------------------------------------------------------------
    def replay(self, command: Command) -> Receipt | None:
        row = self._conn.execute(_REPLAY, (self._tenant, self._project, command.command_id)).fetchone()
        if row is None:
            return None
        actor, fingerprint, kind, rid, seq, revision, committed = row
        if (actor, fingerprint, kind, rid) != (self._member.actor_id, command.fingerprint, command.kind,
                                               command.resource_id):
            raise LedgerError.command_conflict()
        return Receipt(command_id=command.command_id, fingerprint=fingerprint, tenant_id=self._tenant,
                       project_id=self._project, actor_id=actor, project_seq=seq, kind=kind, resource_id=rid,
                       revision=revision, committed_at_ms=committed)

    def apply(self, command: Command, write: Write, now_ms: int) -> Receipt:
        conn, tenant, project, actor = self._conn, self._tenant, self._project, self._member.actor_id
        kind, rid = write.kind, write.resource_id
        seq, revision = conn.execute(_INSERT_CHANGE, (tenant, project, kind, rid, actor, now_ms, write.body,
                                                      command.command_id, command.fingerprint)).fetchone()
        record = write.record
        if isinstance(record, Handoff):
            conn.execute(_INDEX_HANDOFF, (tenant, project, rid, record.from_actor, record.to_actor, record.source_id,
                                          record.status.value, seq))
        elif isinstance(record, Fact) and kind == FACT and revision == 1:
            # Facts are create-only, so their terms are indexed exactly once.
            counts, length = term_counts(record.content)
            conn.execute("INSERT INTO search_docs(tenant_id, project_id, fact_id, length) VALUES (?,?,?,?)",
                         (tenant, project, rid, length))
            conn.executemany("INSERT INTO search_terms(tenant_id, project_id, term, fact_id, tf) VALUES (?,?,?,?,?)",
                             [(tenant, project, term, rid, tf) for term, tf in counts.items()])
        return Receipt(command_id=command.command_id, fingerprint=command.fingerprint, tenant_id=tenant,
                       project_id=project, actor_id=actor, project_seq=seq, kind=kind, resource_id=rid,
                       revision=revision, committed_at_ms=now_ms)


class _Thread(threading.local):
    """What one thread's connection remembers about the file's identity tables."""

    members: dict[tuple[bytes, str], Membership]
    seen: tuple[int, int] = (-1, -1)  # (PRAGMA data_version, store generation) the members are valid for
    pending: tuple[bytes, str, Membership] | None = None  # a deferred answer no transaction has checked yet

    def __init__(self) -> None:
        self.members = {}


class SQLiteStore:
    """The ledger's SQLite file. Safe to share between threads and processes.

    Authentication results are remembered per connection while ``PRAGMA data_version`` says no
    other connection committed and this store changed no identity (``_generation``): the join
    over tokens, tenants, actors, memberships and projects then runs once per caller, not once
    per request, and any suspension or revocation, from any process, still applies to the next
    request.
    """

    _MEMBERS_PER_THREAD: Final = 256

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._connections = Connections(path, busy_timeout_ms=busy_timeout_ms)
        self._conn: Callable[[], sqlite3.Connection] = self._connections.get  # this thread's
        self._local = _Thread()
        self._generation = 0
        with self._exclusive() as conn:
            layout = conn.execute("PRAGMA user_version").fetchone()[0]
            if layout not in (0, _TRIGGERLESS_LAYOUT, LAYOUT_VERSION):
                raise StoreError(f"{self.path} has table layout {layout}, not this reference's "
                                 f"{LAYOUT_VERSION}; start from a new database file")
            if layout == 0:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
            if layout == _TRIGGERLESS_LAYOUT and not _TABLES <= {
                    str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}:
                raise StoreError(f"{self.path} is not a reference ledger file (user_version 2 without the "
                                 "ledger's tables); start from a new database file")
            if layout != LAYOUT_VERSION:
                # Layout 2 has the same tables and rows: adding the triggers upgrades it in place.
                for statement in _TRIGGERS:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")

    # -- plumbing ---------------------------------------------------------------------------
    @contextmanager
    def _exclusive(self) -> Iterator[sqlite3.Connection]:
        """A write transaction outside any project (schema, bootstrap); faults mapped once.

        A file that cannot be opened is a StoreError with SQLite's own words ("file is not a
        database"): the operator's answer, not an internal error."""
        try:
            opened = self._conn()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} cannot be opened: {exc}") from exc
        try:
            with transaction(opened) as conn:
                yield conn
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc

    def _read_one(self, sql: str, args: tuple[object, ...]) -> tuple[object, ...] | None:
        try:
            row: tuple[object, ...] | None = self._conn().execute(sql, args).fetchone()
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc
        return row

    def close(self) -> None:
        self._connections.close()
        self._local = _Thread()

    def schema_version(self) -> int:
        return SCHEMA_VERSION

    # -- identity ---------------------------------------------------------------------------
    def authenticate(self, digest: bytes, project_id: str, *, deferred: bool = False) -> Membership | Denied:
        local = self._local
        if deferred and local.seen[1] == self._generation:
            member = local.members.get((digest, project_id))
            if member is not None:
                # Checked by the next transaction's first statement (``_check_pending``), which
                # saves this request a read transaction of its own.
                local.pending = (digest, project_id, member)
                return member
        local.pending = None
        try:
            conn = self._conn()
            self._current(local, conn)
            return self._membership(local, conn, digest, project_id)
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc

    def confirm(self) -> None:
        if self._local.pending is not None:
            try:
                self._check_pending(self._conn())
            except sqlite3.DatabaseError as exc:
                raise _map(exc) from exc

    def _current(self, local: _Thread, conn: sqlite3.Connection) -> None:
        """Forget the remembered members if another connection or this store changed the file."""
        seen = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self._generation)
        if seen != local.seen:
            local.members.clear()
            local.seen = seen

    def _membership(self, local: _Thread, conn: sqlite3.Connection, digest: bytes,
                    project_id: str) -> Membership | Denied:
        member = local.members.get((digest, project_id))
        if member is not None:
            return member
        row = conn.execute(_AUTHENTICATE, (project_id, digest)).fetchone()
        if row is None:
            return Denied.BAD_TOKEN
        tenant, actor, role, epoch = row
        if role is None or epoch is None:
            return Denied.NOT_MEMBER
        member = Membership(tenant_id=str(tenant), project_id=project_id, actor_id=str(actor), role=Role(str(role)),
                            project_epoch=str(epoch))
        if len(local.members) < self._MEMBERS_PER_THREAD:
            local.members[(digest, project_id)] = member
        return member

    def _check_pending(self, conn: sqlite3.Connection) -> None:
        """Check a deferred answer against the file as ``conn`` sees it now; sqlite3 errors pass."""
        local = self._local
        pending, local.pending = local.pending, None
        if pending is None:
            return
        digest, project_id, member = pending
        self._current(local, conn)
        if self._membership(local, conn, digest, project_id) != member:
            raise MembershipChanged()

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
        try:
            with self._exclusive() as conn:
                return self._provision(conn, tenant_id, project_id, actor_id, token_digest, role, actor_kind,
                                       project_epoch, new_epoch, tenant_name, project_name, actor_name, now_ms)
        finally:
            self._generation += 1  # after the commit: this connection's own commits do not move data_version

    @staticmethod
    def _provision(conn: sqlite3.Connection, tenant_id: str, project_id: str, actor_id: str, token_digest: bytes,
                   role: str, actor_kind: str, project_epoch: str | None, new_epoch: str, tenant_name: str,
                   project_name: str, actor_name: str, now_ms: int) -> str:
        conn.execute("INSERT OR IGNORE INTO tenants(tenant_id, display_name, created_at_ms) VALUES (?,?,?)",
                     (tenant_id, tenant_name, now_ms))
        row = conn.execute("SELECT project_epoch FROM projects WHERE tenant_id=? AND project_id=?",
                           (tenant_id, project_id)).fetchone()
        if row is None:
            epoch = project_epoch or new_epoch
            conn.execute("INSERT INTO projects(tenant_id, project_id, project_epoch, display_name, created_at_ms) "
                         "VALUES (?,?,?,?,?)", (tenant_id, project_id, epoch, project_name, now_ms))
        else:
            epoch = str(row[0])
            if project_epoch is not None and project_epoch != epoch:
                raise ProvisionError(
                    f"project epoch conflict: project {project_id} already has epoch {epoch}, not {project_epoch}")
        row = conn.execute("SELECT kind FROM actors WHERE tenant_id=? AND actor_id=?", (tenant_id, actor_id)).fetchone()
        if row is None:
            conn.execute("INSERT INTO actors(tenant_id, actor_id, display_name, kind, created_at_ms) VALUES (?,?,?,?,?)",
                         (tenant_id, actor_id, actor_name, actor_kind, now_ms))
        elif row[0] != actor_kind:
            raise ProvisionError(f"actor identity conflict: actor {actor_id} is a {row[0]}, not a {actor_kind}")
        row = conn.execute("SELECT role FROM memberships WHERE tenant_id=? AND project_id=? AND actor_id=?",
                           (tenant_id, project_id, actor_id)).fetchone()
        if row is None:
            conn.execute("INSERT INTO memberships(tenant_id, project_id, actor_id, role) VALUES (?,?,?,?)",
                         (tenant_id, project_id, actor_id, role))
        elif row[0] != role:
            raise ProvisionError(f"membership conflict: actor {actor_id} is a {row[0]} of {project_id}, not a {role}")
        row = conn.execute("SELECT tenant_id, actor_id FROM token_bindings WHERE token_sha256=?",
                           (token_digest,)).fetchone()
        if row is None:
            conn.execute("INSERT INTO token_bindings(token_sha256, tenant_id, actor_id, created_at_ms) VALUES (?,?,?,?)",
                         (token_digest, tenant_id, actor_id, now_ms))
        elif (row[0], row[1]) != (tenant_id, actor_id):
            raise ProvisionError("token binding conflicts: this token is already bound to another actor")
        return epoch

    def _admin(self, sql: str, args: tuple[object, ...]) -> None:
        try:
            self._conn().execute(sql, args)  # autocommit: one statement, one transaction
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc
        finally:
            self._generation += 1  # after the commit: this connection's own commits do not move data_version

    def set_status(self, table: str, status: str, **key: str) -> None:
        if table not in _IDENTITY_TABLES:
            raise ValueError(table)
        where = " AND ".join(f"{name}=?" for name in key)
        self._admin(f"UPDATE {table} SET status=? WHERE {where}", (status, *key.values()))

    def revoke_token(self, digest: bytes) -> None:
        self._admin("UPDATE token_bindings SET active=0 WHERE token_sha256=?", (digest,))

    # -- transactions -----------------------------------------------------------------------
    def writing(self, member: Membership) -> _Tx:
        return _Tx(self._conn(), member, "BEGIN IMMEDIATE",
                   None if self._local.pending is None else self._check_pending)

    def reading(self, member: Membership) -> _Tx:
        return _Tx(self._conn(), member, "BEGIN DEFERRED",
                   None if self._local.pending is None else self._check_pending)

    # -- reads ------------------------------------------------------------------------------
    def resource(self, member: Membership, kind: str, resource_id: str) -> Resource | None:
        row = self._read_one(_RESOURCE, (member.tenant_id, member.project_id, kind, resource_id))
        if row is None:
            return None
        revision, body = row
        assert isinstance(revision, int) and (body is None or isinstance(body, str))
        return Resource(kind=kind, resource_id=resource_id, revision=revision, body=body)

    def _project(self, conn: sqlite3.Connection, member: Membership) -> tuple[str, int]:
        t, p = member.tenant_id, member.project_id
        epoch, head = conn.execute(_PROJECT, (t, p, t, p)).fetchone()
        return str(epoch), int(head)

    def snapshot(self, member: Membership, max_rows: int) -> Snapshot | None:
        with self.reading(member) as tx:
            epoch, at_seq = self._project(tx._conn, member)
            rows = tx._conn.execute(
                "SELECT kind, id, revision, body FROM resources WHERE tenant_id=? AND project_id=? "
                "ORDER BY kind, id LIMIT ?", (member.tenant_id, member.project_id, max_rows + 1)).fetchall()
        if len(rows) > max_rows:
            return None
        return Snapshot(epoch=epoch, at_seq=at_seq, resources=[
            Resource(kind=r[0], resource_id=r[1], revision=r[2], body=r[3]) for r in rows])

    def changes(self, member: Membership, after_seq: int, limit: int) -> FeedRead:
        with self.reading(member) as tx:
            epoch, head = self._project(tx._conn, member)
            # Clamped: a cursor beyond the head (answered 409 by the read rules) may exceed the
            # i64 that SQLite can bind.
            rows = tx._conn.execute(_FEED, (member.tenant_id, member.project_id, min(after_seq, head),
                                            limit + 1)).fetchall()
        changes: list[Change] = []
        current: dict[tuple[str, str], Resource] = {}
        for seq, kind, rid, revision, actor, committed, body, now_revision, now_body in rows:
            changes.append(Change(seq=seq, kind=kind, resource_id=rid, revision=revision, actor_id=actor,
                                  committed_at_ms=committed, body=body))
            if kind in PARTICIPANT_KINDS:
                current[(kind, rid)] = Resource(kind=kind, resource_id=rid, revision=now_revision, body=now_body)
        return FeedRead(epoch=epoch, head=head, changes=changes, current=current)

    def mailbox(self, member: Membership, query: MailboxQuery) -> list[MailboxRow]:
        column = "to_actor" if query.inbox else "from_actor"
        sql = [
            "SELECT h.updated_seq, r.revision, r.body FROM handoff_index h JOIN resources r "
            "ON r.tenant_id=h.tenant_id AND r.project_id=h.project_id AND r.kind='handoff' AND r.id=h.handoff_id "
            f"WHERE h.tenant_id=? AND h.project_id=? AND h.{column}=? AND r.deleted=0"
        ]
        args: list[object] = [member.tenant_id, member.project_id, query.actor_id]
        if query.source_id is not None:
            sql.append("AND h.source_id=?")
            args.append(query.source_id)
        if not query.include_completed:
            sql.append("AND h.status<>'completed'")
        if query.before_seq is not None:
            sql.append("AND h.updated_seq<?")
            args.append(query.before_seq)
        sql.append("ORDER BY h.updated_seq DESC LIMIT ?")
        args.append(query.limit + 1)
        try:
            rows = self._conn().execute(" ".join(sql), args).fetchall()
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc
        return [MailboxRow(project_seq=r[0], revision=r[1], body=r[2]) for r in rows]

    def search(self, member: Membership, terms: list[str]) -> SearchIndex:
        t, p = member.tenant_id, member.project_id
        with self.reading(member) as tx:
            conn = tx._conn
            epoch, head = self._project(conn, member)
            resources = conn.execute("SELECT count(*) FROM resources WHERE tenant_id=? AND project_id=?",
                                     (t, p)).fetchone()[0]
            n_docs, total = conn.execute(
                "SELECT count(*), coalesce(sum(length), 0) FROM search_docs WHERE tenant_id=? AND project_id=?",
                (t, p)).fetchone()
            df: dict[str, int] = {}
            postings: list[Posting] = []
            facts: dict[str, str] = {}
            for term in terms:
                rows = conn.execute(
                    "SELECT t.fact_id, t.tf, d.length, r.body FROM search_terms t JOIN search_docs d "
                    "ON d.tenant_id=t.tenant_id AND d.project_id=t.project_id AND d.fact_id=t.fact_id "
                    "JOIN resources r ON r.tenant_id=t.tenant_id AND r.project_id=t.project_id "
                    "AND r.kind='fact' AND r.id=t.fact_id AND r.deleted=0 "
                    "WHERE t.tenant_id=? AND t.project_id=? AND t.term=?", (t, p, term)).fetchall()
                df[term] = len(rows)
                postings.extend(Posting(term=term, fact_id=r[0], tf=r[1], doc_len=r[2]) for r in rows)
                facts.update((r[0], r[3]) for r in rows)
        return SearchIndex(epoch=epoch, head=head, resources=resources, n_docs=n_docs,
                           avg_len=total / n_docs if n_docs else 0.0, df=df, postings=postings, facts=facts)

