"""PostgreSQL storage: the ``Store`` of one PostgreSQL database, shared by any number of processes.

Locking follows upstream ``pg/lib.rs``: a write runs at READ COMMITTED and first locks its
project's row (``SELECT ... FOR UPDATE`` on ``ssot_projects``) before reading a receipt or a
revision, so the writers of one project are serialized across every connection and process,
and the rules decide on the state they then overwrite, without serialization retries. Reads
that must be one snapshot (snapshot, feeds, search) run REPEATABLE READ READ ONLY. Every
connection carries upstream's ``statement_timeout`` and ``lock_timeout``; a lock wait or a
statement cut off by them, a full pool, or a lost server answer 503 (retryable), any other
database fault 500.

Tables and columns are upstream's (``pg/schema.sql``: ``ssot_*``, ``aidememo_schema`` with
component ``canonical_store`` at version 2), plus two tables for the lexical search index,
which upstream keeps elsewhere. psycopg 3 with a bounded ``psycopg_pool`` (upstream's pool
size and acquire timeout).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from types import TracebackType
from typing import Final

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors

from ._commands import Command
from aidememo_wire.errors import LedgerError
from ._ledger import Write
from ._records import FACT, Change, Handoff, LedgerFact, Membership, Receipt, Resource, Role
from refkit.search import term_counts
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

__all__ = ["PostgresStore", "SCHEMA_VERSION", "PostgresSettings"]

SCHEMA_COMPONENT: Final = "canonical_store"
SCHEMA_VERSION: Final = 2  # pg/lib.rs SCHEMA_VERSION, what /health reports on PostgreSQL
MIGRATION_LOCK: Final = 0x4169_6465_4D65_6D6F  # pg/lib.rs SCHEMA_MIGRATION_LOCK_KEY ("AideMemo")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS ssot_tenants (
  tenant_id TEXT PRIMARY KEY, display_name TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'archived')),
  revision BIGINT NOT NULL DEFAULT 1, created_at_ms BIGINT NOT NULL, updated_at_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS ssot_projects (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, project_epoch TEXT NOT NULL,
  next_seq BIGINT NOT NULL CHECK (next_seq >= 0), display_name TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'archived')),
  revision BIGINT NOT NULL DEFAULT 1, created_at_ms BIGINT NOT NULL DEFAULT 0, updated_at_ms BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (tenant_id, project_id));
CREATE TABLE IF NOT EXISTS ssot_actors (
  tenant_id TEXT NOT NULL, actor_id TEXT NOT NULL, display_name TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('human', 'agent', 'service')),
  status TEXT NOT NULL CHECK (status IN ('active', 'suspended', 'archived')),
  revision BIGINT NOT NULL DEFAULT 1, created_at_ms BIGINT NOT NULL, updated_at_ms BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, actor_id));
CREATE TABLE IF NOT EXISTS ssot_memberships (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('owner', 'admin', 'writer', 'reader')),
  status TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
  PRIMARY KEY (tenant_id, project_id, actor_id));
CREATE TABLE IF NOT EXISTS ssot_token_bindings (
  token_sha256 BYTEA PRIMARY KEY CHECK (octet_length(token_sha256) = 32),
  tenant_id TEXT NOT NULL, actor_id TEXT NOT NULL, active BOOLEAN NOT NULL, created_at_ms BIGINT NOT NULL);
CREATE TABLE IF NOT EXISTS ssot_resources (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, resource_kind TEXT NOT NULL, resource_id TEXT NOT NULL,
  revision BIGINT NOT NULL CHECK (revision > 0), deleted BOOLEAN NOT NULL, body_json BYTEA,
  CHECK ((NOT deleted AND body_json IS NOT NULL) OR (deleted AND body_json IS NULL)),
  PRIMARY KEY (tenant_id, project_id, resource_kind, resource_id));
CREATE TABLE IF NOT EXISTS ssot_receipts (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, command_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
  actor_id TEXT NOT NULL, project_seq BIGINT NOT NULL CHECK (project_seq > 0), resource_kind TEXT NOT NULL,
  resource_id TEXT NOT NULL, revision BIGINT NOT NULL CHECK (revision > 0), committed_at_ms BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, project_id, command_id), UNIQUE (tenant_id, project_id, project_seq));
CREATE TABLE IF NOT EXISTS ssot_changes (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, project_epoch TEXT NOT NULL,
  seq BIGINT NOT NULL CHECK (seq > 0), resource_kind TEXT NOT NULL, resource_id TEXT NOT NULL,
  operation TEXT NOT NULL CHECK (operation IN ('upsert', 'delete')), revision BIGINT NOT NULL CHECK (revision > 0),
  actor_id TEXT NOT NULL, committed_at_ms BIGINT NOT NULL, body_json BYTEA,
  PRIMARY KEY (tenant_id, project_id, seq));
CREATE TABLE IF NOT EXISTS ssot_audit (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, project_seq BIGINT NOT NULL, command_id TEXT NOT NULL,
  operation TEXT NOT NULL, resource_kind TEXT NOT NULL, resource_id TEXT NOT NULL, actor_id TEXT NOT NULL,
  committed_at_ms BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, project_id, project_seq), UNIQUE (tenant_id, project_id, command_id));
CREATE TABLE IF NOT EXISTS ssot_handoff_index (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, handoff_id TEXT NOT NULL,
  resource_kind TEXT NOT NULL DEFAULT 'handoff' CHECK (resource_kind = 'handoff'),
  from_actor TEXT NOT NULL, to_actor TEXT NOT NULL, source_id TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'accepted', 'completed')),
  revision BIGINT NOT NULL CHECK (revision > 0), updated_seq BIGINT NOT NULL CHECK (updated_seq > 0),
  PRIMARY KEY (tenant_id, project_id, handoff_id));
CREATE INDEX IF NOT EXISTS ssot_handoff_inbox_idx ON ssot_handoff_index (tenant_id, project_id, to_actor, updated_seq DESC);
CREATE INDEX IF NOT EXISTS ssot_handoff_outbox_idx ON ssot_handoff_index (tenant_id, project_id, from_actor, updated_seq DESC);
CREATE TABLE IF NOT EXISTS aidememo_ref_search_docs (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, fact_id TEXT NOT NULL, length BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, project_id, fact_id));
CREATE TABLE IF NOT EXISTS aidememo_ref_search_terms (
  tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, term TEXT NOT NULL, fact_id TEXT NOT NULL, tf BIGINT NOT NULL,
  PRIMARY KEY (tenant_id, project_id, term, fact_id));
"""

_AUTHENTICATE = (
    "SELECT b.tenant_id, b.actor_id, m.role, p.project_epoch FROM ssot_token_bindings b "
    "JOIN ssot_tenants t ON t.tenant_id = b.tenant_id AND t.status = 'active' "
    "JOIN ssot_actors a ON a.tenant_id = b.tenant_id AND a.actor_id = b.actor_id AND a.status = 'active' "
    "LEFT JOIN ssot_memberships m ON m.tenant_id = b.tenant_id AND m.project_id = %s AND m.actor_id = b.actor_id "
    "AND m.status = 'active' "
    "LEFT JOIN ssot_projects p ON p.tenant_id = m.tenant_id AND p.project_id = m.project_id AND p.status = 'active' "
    "WHERE b.token_sha256 = %s AND b.active"
)
_RESOURCE = ("SELECT revision, body_json FROM ssot_resources "
             "WHERE tenant_id = %s AND project_id = %s AND resource_kind = %s AND resource_id = %s")
_MEMBER_ROLE = (
    "SELECT m.role FROM ssot_memberships m JOIN ssot_actors a ON a.tenant_id = m.tenant_id AND a.actor_id = m.actor_id "
    "WHERE m.tenant_id = %s AND m.project_id = %s AND m.actor_id = %s AND m.status = 'active' AND a.status = 'active'"
)
_PROJECT = "SELECT project_epoch, next_seq FROM ssot_projects WHERE tenant_id = %s AND project_id = %s"
# The same, with a deferred membership checked in the same statement (``authenticate``).
_PROJECT_AND_MEMBER = (
    "SELECT p.project_epoch, p.next_seq, a.tenant_id, a.actor_id, a.role, a.project_epoch FROM ssot_projects p "
    f"LEFT JOIN ({_AUTHENTICATE}) a ON TRUE WHERE p.tenant_id = %s AND p.project_id = %s")
# A write's receipt lookup and the resource the command names, in one statement after the
# project's lock: always one row, the receipt's columns NULL when there is none, the resource's
# when it does not exist (its revision is never NULL otherwise).
# The receipt is found as the first command id at or after the one asked for, kept only if it is
# that one: the same row, through a plan only the primary key serves. Asked by equality, the
# planner costs the (tenant, project, project_seq) key the same whenever it expects at most one
# row of the project (tables not analyzed yet; or, prepared, many tenants taken as independent of
# their projects) and takes that smaller key, which walks every receipt of the project.
_RECEIPT_AND_RESOURCE: Final = (
    "SELECT rc.actor_id, rc.fingerprint, rc.resource_kind, rc.resource_id, rc.project_seq, rc.revision, "
    "rc.committed_at_ms, rs.revision, rs.body_json FROM (SELECT 1) one "
    "LEFT JOIN (SELECT command_id, actor_id, fingerprint, resource_kind, resource_id, project_seq, revision, "
    "committed_at_ms FROM ssot_receipts WHERE tenant_id = %(t)s AND project_id = %(p)s AND command_id >= %(cmd)s "
    "ORDER BY command_id LIMIT 1) rc ON rc.command_id = %(cmd)s "
    "LEFT JOIN ssot_resources rs ON rs.tenant_id = %(t)s AND rs.project_id = %(p)s AND rs.resource_kind = %(kind)s "
    "AND rs.resource_id = %(rid)s")
_MEMBERS_PER_THREAD: Final = 1024
# A command's writes as one statement (one round trip, one parse once prepared): the resource's
# upsert, then from its new revision the receipt, the change and (for a handoff) the mailbox index
# row; the audit row and the project's next sequence.
_APPLY_RESOURCE: Final = (
    "WITH r AS (INSERT INTO ssot_resources (tenant_id, project_id, resource_kind, resource_id, revision, deleted, "
    "body_json) VALUES (%(t)s, %(p)s, %(kind)s, %(rid)s, 1, %(deleted)s, %(body)s) "
    "ON CONFLICT (tenant_id, project_id, resource_kind, resource_id) DO UPDATE SET "
    "revision = ssot_resources.revision + 1, deleted = EXCLUDED.deleted, body_json = EXCLUDED.body_json "
    "RETURNING revision), "
    "rc AS (INSERT INTO ssot_receipts (tenant_id, project_id, command_id, fingerprint, actor_id, project_seq, "
    "resource_kind, resource_id, revision, committed_at_ms) SELECT %(t)s::text, %(p)s::text, %(cmd)s::text, "
    "%(fp)s::text, %(actor)s::text, %(seq)s::bigint, %(kind)s::text, %(rid)s::text, r.revision, %(now)s::bigint "
    "FROM r), "
    "ch AS (INSERT INTO ssot_changes (tenant_id, project_id, project_epoch, seq, resource_kind, resource_id, "
    "operation, revision, actor_id, committed_at_ms, body_json) SELECT %(t)s::text, %(p)s::text, %(epoch)s::text, "
    "%(seq)s::bigint, %(kind)s::text, %(rid)s::text, %(op)s::text, r.revision, %(actor)s::text, %(now)s::bigint, "
    "%(body)s::bytea FROM r), "
    "au AS (INSERT INTO ssot_audit (tenant_id, project_id, project_seq, command_id, operation, resource_kind, "
    "resource_id, actor_id, committed_at_ms) VALUES (%(t)s, %(p)s, %(seq)s, %(cmd)s, %(command_op)s, %(kind)s, "
    "%(rid)s, %(actor)s, %(now)s)), "
    "pj AS (UPDATE ssot_projects SET next_seq = %(seq)s WHERE tenant_id = %(t)s AND project_id = %(p)s)"
)
_HANDOFF_INDEX: Final = (
    ", hi AS (INSERT INTO ssot_handoff_index (tenant_id, project_id, handoff_id, from_actor, to_actor, source_id, "
    "status, revision, updated_seq) SELECT %(t)s::text, %(p)s::text, %(rid)s::text, %(from)s::text, %(to)s::text, "
    "%(source)s::text, %(status)s::text, r.revision, %(seq)s::bigint FROM r "
    "ON CONFLICT (tenant_id, project_id, handoff_id) DO UPDATE SET from_actor = EXCLUDED.from_actor, "
    "to_actor = EXCLUDED.to_actor, source_id = EXCLUDED.source_id, status = EXCLUDED.status, "
    "revision = EXCLUDED.revision, updated_seq = EXCLUDED.updated_seq)")
_RETURNING: Final = " SELECT revision FROM r"
# When the transaction has read the resource under the project's lock, its new revision is known
# before the write, so the write travels with the COMMIT instead of costing a round trip of its
# own. It still checks that revision: any other (a writer that skipped the lock) divides by zero,
# which fails the statement and with it the COMMIT, so no receipt with a wrong revision is given.
_CHECKED: Final = " SELECT 1 / (revision = %(expect)s::bigint)::int FROM r"
_APPLY: Final = {  # (a handoff, its revision known) -> the statement
    (False, False): _APPLY_RESOURCE + _RETURNING, (True, False): _APPLY_RESOURCE + _HANDOFF_INDEX + _RETURNING,
    (False, True): _APPLY_RESOURCE + _CHECKED, (True, True): _APPLY_RESOURCE + _HANDOFF_INDEX + _CHECKED}
_UNAVAILABLE: Final = (pg_errors.LockNotAvailable, pg_errors.QueryCanceled, pg_errors.SerializationFailure,
                       pg_errors.DeadlockDetected, psycopg.OperationalError, psycopg_pool.PoolTimeout)


def _map(exc: BaseException) -> LedgerError:
    """Storage faults on the wire: waits cut off by a timeout or a lost server are 503, the rest 500."""
    return LedgerError.storage_failure(unavailable=isinstance(exc, _UNAVAILABLE))


def _membership(row: tuple[object, ...] | None, project_id: str) -> Membership | Denied:
    """``_AUTHENTICATE``'s answer: no row is a bad token, no role or epoch no membership."""
    if row is None or row[0] is None:
        return Denied.BAD_TOKEN
    tenant, actor, role, epoch = row
    if role is None or epoch is None:
        return Denied.NOT_MEMBER
    return Membership(tenant_id=str(tenant), project_id=project_id, actor_id=str(actor), role=Role(str(role)),
                      project_epoch=str(epoch))


class _Thread(threading.local):
    """Memberships this thread proved, and the one ``authenticate`` answered from them that no
    statement has checked yet."""

    def __init__(self) -> None:
        self.members: dict[tuple[bytes, str], Membership] = {}
        self.pending: tuple[bytes, str, Membership] | None = None


def _text(body: object) -> str | None:
    """A bytea column as text (psycopg types a row's columns as ``Any``-free ``object``)."""
    if body is None:
        return None
    assert isinstance(body, (bytes, memoryview)), type(body)
    return bytes(body).decode("utf-8")


class PostgresSettings:
    """Upstream's PostgreSQL profile knobs (``aidememo-server serve`` defaults)."""

    def __init__(self, *, pool_size: int = 8, acquire_timeout_ms: int = 500, statement_timeout_ms: int = 8_000,
                 lock_timeout_ms: int = 2_000) -> None:
        self.pool_size = pool_size
        self.acquire_timeout_ms = acquire_timeout_ms
        self.statement_timeout_ms = statement_timeout_ms
        self.lock_timeout_ms = lock_timeout_ms


class _Tx:
    """A transaction on one member's project, on one pooled connection."""

    def __init__(self, store: PostgresStore, member: Membership, *, write: bool) -> None:
        self._store, self._member, self._write = store, member, write
        self._tenant, self._project = member.tenant_id, member.project_id
        self._cm: AbstractContextManager[psycopg.Connection[tuple[object, ...]]] | None = None
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._pipeline: AbstractContextManager[psycopg.Pipeline] | None = None
        self._epoch = ""
        self._head = 0
        self._pending: tuple[bytes, str, Membership] | None = None
        self._lock_row: psycopg.Cursor[tuple[object, ...]] | None = None  # the project row, not fetched yet
        # The resource the command names, read with its receipt lookup: (kind, id), then
        # (revision, body) or None when it does not exist.
        self._ahead: tuple[tuple[str, str], tuple[object, ...] | None] | None = None
        self._known: dict[tuple[str, str], int] = {}  # revisions read under the lock (0: none)

    def __enter__(self) -> _Tx:
        # One pipeline per transaction: statements whose answer is not needed yet (BEGIN, the
        # project's row, the writes but the last, COMMIT) travel with the next one that is, so a
        # command costs a round trip per read it needs instead of one per statement. A write's
        # project row comes back with its receipt lookup: the server runs them in order, the
        # lookup once the lock is held.
        pending, self._store._local.pending = self._store._local.pending, None
        self._pending = pending
        try:
            self._cm = self._store._pool.connection(timeout=self._store._acquire_s)
            conn = self._conn = self._cm.__enter__()
            pipeline = self._pipeline = conn.pipeline()
            pipeline.__enter__()
            conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED" if self._write
                         else "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            # For a write, the project row is the lock every writer of this project takes first.
            if pending is None:
                self._lock_row = conn.execute(_PROJECT + (" FOR UPDATE" if self._write else ""),
                                              (self._tenant, self._project))
            else:
                self._lock_row = conn.execute(_PROJECT_AND_MEMBER + (" FOR UPDATE OF p" if self._write else ""),
                                              (pending[1], pending[0], self._tenant, self._project))
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            self._release(exc)
            self._store._local.pending = pending  # unchecked still: ``confirm`` checks it
            raise _map(exc) from exc
        if not self._write:  # a read's first statement needs the row: nothing to send with it
            try:
                self._locked()
            except psycopg.Error as exc:
                self._release(exc)
                raise _map(exc) from exc
            except BaseException:
                self._release(None)
                raise
        return self

    def _locked(self) -> None:
        """The project's row, read once: its epoch and head, and the deferred membership check.
        A database fault leaves the membership unchecked (``confirm`` checks it)."""
        cursor, self._lock_row = self._lock_row, None
        if cursor is None:
            return
        pending = self._pending
        try:
            row = cursor.fetchone()
        except psycopg.Error:
            self._store._local.pending = pending
            raise
        if pending is not None and (row is None or _membership(row[2:], pending[1]) != pending[2]):
            self._store._local.members.pop((pending[0], pending[1]), None)
            raise MembershipChanged()  # nothing read or written: the caller checks afresh
        if row is None:
            raise LedgerError.unauthorized(self._project)
        self._epoch, self._head = str(row[0]), int(str(row[1]))

    def _end(self, statement: str, exc: BaseException | None) -> psycopg.Error | None:
        """Send ``statement`` (COMMIT or ROLLBACK) with whatever is queued, close the pipeline,
        and leave the connection idle (rolled back) if that failed; returns the failure."""
        conn, pipeline, self._pipeline = self._conn, self._pipeline, None
        fault: psycopg.Error | None = None
        if conn is None:
            return None
        if pipeline is not None:
            # The first failure is the one to answer: after it, the pipeline's end fails too,
            # with "pipeline aborted", which alone would read as a lost server (503).
            try:
                conn.execute(statement)
            except psycopg.Error as error:
                fault = error
            try:
                pipeline.__exit__(type(exc) if exc else None, exc, None)
            except psycopg.Error as error:
                fault = fault or error
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            try:
                conn.execute("ROLLBACK")
            except psycopg.Error:
                pass  # the pool discards a connection it cannot reset
        return fault

    def _release(self, exc: BaseException | None) -> None:
        cm, self._cm = self._cm, None
        self._end("ROLLBACK", exc)
        if cm is not None:
            try:
                cm.__exit__(type(exc) if exc else None, exc, None)
            except psycopg.Error:
                pass  # the original failure is the one worth reporting

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        cm, self._cm = self._cm, None
        assert cm is not None
        fault = self._end("COMMIT" if exc is None else "ROLLBACK", exc)
        try:
            cm.__exit__(kind, exc, tb)  # back to the pool, idle
        except psycopg.Error as error:
            fault = fault or error
        if fault is not None and exc is None:
            raise _map(fault) from fault
        if isinstance(exc, (psycopg.Error, psycopg_pool.PoolTimeout)):
            raise _map(exc) from exc

    @property
    def conn(self) -> psycopg.Connection[tuple[object, ...]]:
        assert self._conn is not None
        self._locked()
        return self._conn

    # -- View --------------------------------------------------------------------------------
    def resource(self, kind: str, resource_id: str) -> Resource | None:
        ahead, self._ahead, key = self._ahead, None, (kind, resource_id)
        if ahead is not None and ahead[0] == key:
            row = ahead[1]
        else:
            row = self.conn.execute(_RESOURCE, (self._tenant, self._project, kind, resource_id)).fetchone()
        if row is None:
            self._known[key] = 0
            return None
        revision = self._known[key] = int(str(row[0]))
        return Resource(kind=kind, resource_id=resource_id, revision=revision, body=_text(row[1]))

    def member_role(self, actor_id: str) -> Role | None:
        row = self.conn.execute(_MEMBER_ROLE, (self._tenant, self._project, actor_id)).fetchone()
        return None if row is None else Role(str(row[0]))

    # -- primitives ------------------------------------------------------------------------------
    def replay(self, command: Command) -> Receipt | None:
        assert self._conn is not None
        # With the lookup, the resource the command names, which the rules read next unless
        # this is a replay: the same statement, so the same round trip, under the same lock.
        found = self._conn.execute(_RECEIPT_AND_RESOURCE, {
            "t": self._tenant, "p": self._project, "cmd": command.command_id, "kind": command.kind,
            "rid": command.resource_id})
        self._locked()
        row = found.fetchone()
        assert row is not None
        key = (command.kind, command.resource_id)
        self._ahead = (key, None if row[7] is None else (row[7], row[8]))
        self._known[key] = 0 if row[7] is None else int(str(row[7]))
        if row[0] is None:
            return None
        actor, fingerprint, kind, rid, seq, revision, committed = (str(v) for v in row[:7])
        if (actor, fingerprint, kind, rid) != (self._member.actor_id, command.fingerprint, command.kind,
                                               command.resource_id):
            raise LedgerError.command_conflict()
        return Receipt(command_id=command.command_id, fingerprint=fingerprint, tenant_id=self._tenant,
                       project_id=self._project, actor_id=actor, project_seq=int(seq), kind=kind, resource_id=rid,
                       revision=int(revision), committed_at_ms=int(committed))

    def apply(self, command: Command, write: Write, now_ms: int) -> Receipt:
        conn, tenant, project, actor = self.conn, self._tenant, self._project, self._member.actor_id
        if not self._write:
            raise LedgerError.storage_failure()  # a write in a read-only transaction is a bug
        kind, rid = write.kind, write.resource_id
        body = None if write.body is None else write.body.encode("utf-8")
        seq = self._head + 1
        self._head = seq
        record = write.record
        params: dict[str, object] = {
            "t": tenant, "p": project, "kind": kind, "rid": rid, "seq": seq, "actor": actor, "now": now_ms,
            "cmd": command.command_id, "fp": command.fingerprint, "epoch": self._epoch, "deleted": body is None,
            "body": body, "op": "delete" if body is None else "upsert", "command_op": command.op.value}
        handoff = isinstance(record, Handoff)
        if isinstance(record, Handoff):
            params |= {"from": record.from_actor, "to": record.to_actor, "source": record.source_id,
                       "status": record.status.value}
        known = self._known.get((kind, rid))
        if known is None:
            row = conn.execute(_APPLY[(handoff, False)], params).fetchone()
            assert row is not None
            revision = int(str(row[0]))
        else:
            revision = params["expect"] = known + 1
            conn.execute(_APPLY[(handoff, True)], params)  # answered with the COMMIT
        self._known[(kind, rid)] = revision
        if isinstance(record, LedgerFact) and kind == FACT and revision == 1:
            # Facts are create-only: indexed once. Queued: sent with the COMMIT.
            counts, length = term_counts(record.content)
            conn.execute("INSERT INTO aidememo_ref_search_docs (tenant_id, project_id, fact_id, length) "
                         "VALUES (%s, %s, %s, %s)", (tenant, project, rid, length))
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO aidememo_ref_search_terms (tenant_id, project_id, term, fact_id, tf) "
                                "VALUES (%s, %s, %s, %s, %s)",
                                [(tenant, project, term, rid, tf) for term, tf in counts.items()])
        return Receipt(command_id=command.command_id, fingerprint=command.fingerprint, tenant_id=tenant,
                       project_id=project, actor_id=actor, project_seq=seq, kind=kind, resource_id=rid,
                       revision=revision, committed_at_ms=now_ms)


class PostgresStore:
    """A ledger in one PostgreSQL database; any number of stores (processes) may share it."""

    def __init__(self, url: str, settings: PostgresSettings | None = None) -> None:
        self.settings = settings or PostgresSettings()
        self._acquire_s = self.settings.acquire_timeout_ms / 1000
        self._local = _Thread()
        options = (f"-c statement_timeout={self.settings.statement_timeout_ms} "
                   f"-c lock_timeout={self.settings.lock_timeout_ms}")
        try:
            self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[tuple[object, ...]]] = (
                psycopg_pool.ConnectionPool(url, min_size=1, max_size=self.settings.pool_size, open=True,
                                            # Autocommit: a one-statement read is its own
                                            # transaction (no BEGIN and COMMIT round trips);
                                            # ``_Tx`` and provisioning open theirs explicitly.
                                            kwargs={"options": options, "autocommit": True}, timeout=max(self._acquire_s, 5.0)))
            self._pool.wait(timeout=10)
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {_first_line(exc)}") from exc
        try:
            self._migrate()
        except psycopg.Error as exc:
            self._pool.close()
            raise StoreError(f"cannot prepare the PostgreSQL schema: {_first_line(exc)}") from exc

    def _migrate(self) -> None:
        with self._pool.connection() as conn, conn.transaction():
            # The advisory lock serializes first-start DDL across processes (as upstream).
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS aidememo_schema (component TEXT PRIMARY KEY, "
                         "version INTEGER NOT NULL CHECK (version > 0))")
            row = conn.execute("SELECT version FROM aidememo_schema WHERE component = %s",
                               (SCHEMA_COMPONENT,)).fetchone()
            if row is None:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO aidememo_schema (component, version) VALUES (%s, %s)",
                             (SCHEMA_COMPONENT, SCHEMA_VERSION))
            elif row[0] != SCHEMA_VERSION:
                raise StoreError(f"unsupported PostgreSQL canonical schema {row[0]}; expected {SCHEMA_VERSION}")

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
        try:
            with self._pool.connection(timeout=self._acquire_s) as conn:
                yield conn
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise _map(exc) from exc

    def close(self) -> None:
        self._pool.close()

    def schema_version(self) -> int:
        return SCHEMA_VERSION

    # -- identity ---------------------------------------------------------------------------
    def authenticate(self, digest: bytes, project_id: str, *, deferred: bool = False) -> Membership | Denied:
        local = self._local
        if deferred:
            member = local.members.get((digest, project_id))
            if member is not None:
                # Checked by the next transaction's first statement (``_Tx``), which saves this
                # request a round trip of its own.
                local.pending = (digest, project_id, member)
                return member
        local.pending = None
        return self._read_membership(digest, project_id)

    def _read_membership(self, digest: bytes, project_id: str) -> Membership | Denied:
        with self._connection() as conn:
            found = _membership(conn.execute(_AUTHENTICATE, (project_id, digest)).fetchone(), project_id)
        members = self._local.members
        if not isinstance(found, Membership):
            members.pop((digest, project_id), None)
        elif len(members) < _MEMBERS_PER_THREAD:
            members[(digest, project_id)] = found
        return found

    def confirm(self) -> None:
        pending, self._local.pending = self._local.pending, None
        if pending is not None and self._read_membership(pending[0], pending[1]) != pending[2]:
            raise MembershipChanged()

    def provision(self, *, tenant_id: str, project_id: str, actor_id: str, token_digest: bytes, role: str,
                  actor_kind: str, project_epoch: str | None, new_epoch: str, tenant_name: str, project_name: str,
                  actor_name: str, now_ms: int) -> str:
        with self._connection() as conn, conn.transaction():
            conn.execute("INSERT INTO ssot_tenants (tenant_id, display_name, status, created_at_ms, updated_at_ms) "
                         "VALUES (%s, %s, 'active', %s, %s) ON CONFLICT (tenant_id) DO NOTHING",
                         (tenant_id, tenant_name, now_ms, now_ms))
            epoch = project_epoch or new_epoch
            conn.execute("INSERT INTO ssot_projects (tenant_id, project_id, project_epoch, next_seq, display_name, "
                         "created_at_ms, updated_at_ms) VALUES (%s, %s, %s, 0, %s, %s, %s) "
                         "ON CONFLICT (tenant_id, project_id) DO NOTHING",
                         (tenant_id, project_id, epoch, project_name, now_ms, now_ms))
            row = conn.execute("SELECT project_epoch FROM ssot_projects WHERE tenant_id = %s AND project_id = %s "
                               "FOR UPDATE", (tenant_id, project_id)).fetchone()
            assert row is not None
            current = str(row[0])
            if project_epoch is not None and project_epoch != current:
                raise ProvisionError(
                    f"project epoch conflict: project {project_id} already has epoch {current}, not {project_epoch}")
            conn.execute("INSERT INTO ssot_actors (tenant_id, actor_id, display_name, kind, status, created_at_ms, "
                         "updated_at_ms) VALUES (%s, %s, %s, %s, 'active', %s, %s) "
                         "ON CONFLICT (tenant_id, actor_id) DO NOTHING",
                         (tenant_id, actor_id, actor_name, actor_kind, now_ms, now_ms))
            row = conn.execute("SELECT kind FROM ssot_actors WHERE tenant_id = %s AND actor_id = %s",
                               (tenant_id, actor_id)).fetchone()
            if row is not None and row[0] != actor_kind:
                raise ProvisionError(f"actor identity conflict: actor {actor_id} is a {row[0]}, not a {actor_kind}")
            conn.execute("INSERT INTO ssot_memberships (tenant_id, project_id, actor_id, role, status) "
                         "VALUES (%s, %s, %s, %s, 'active') ON CONFLICT (tenant_id, project_id, actor_id) DO NOTHING",
                         (tenant_id, project_id, actor_id, role))
            row = conn.execute("SELECT role FROM ssot_memberships WHERE tenant_id = %s AND project_id = %s "
                               "AND actor_id = %s", (tenant_id, project_id, actor_id)).fetchone()
            if row is not None and row[0] != role:
                raise ProvisionError(
                    f"membership conflict: actor {actor_id} is a {row[0]} of {project_id}, not a {role}")
            conn.execute("INSERT INTO ssot_token_bindings (token_sha256, tenant_id, actor_id, active, created_at_ms) "
                         "VALUES (%s, %s, %s, TRUE, %s) ON CONFLICT (token_sha256) DO NOTHING",
                         (token_digest, tenant_id, actor_id, now_ms))
            row = conn.execute("SELECT tenant_id, actor_id FROM ssot_token_bindings WHERE token_sha256 = %s",
                               (token_digest,)).fetchone()
            if row is not None and (row[0], row[1]) != (tenant_id, actor_id):
                raise ProvisionError("token binding conflicts: this token is already bound to another actor")
            return current

    # -- transactions -----------------------------------------------------------------------
    def writing(self, member: Membership) -> _Tx:
        return _Tx(self, member, write=True)

    def reading(self, member: Membership) -> _Tx:
        return _Tx(self, member, write=False)

    # -- reads ------------------------------------------------------------------------------
    def resource(self, member: Membership, kind: str, resource_id: str) -> Resource | None:
        with self._connection() as conn:
            row = conn.execute(_RESOURCE, (member.tenant_id, member.project_id, kind, resource_id)).fetchone()
        if row is None:
            return None
        return Resource(kind=kind, resource_id=resource_id, revision=int(str(row[0])), body=_text(row[1]))

    def snapshot(self, member: Membership, max_rows: int) -> Snapshot | None:
        with self.reading(member) as tx:
            rows = tx.conn.execute(
                "SELECT resource_kind, resource_id, revision, body_json FROM ssot_resources "
                "WHERE tenant_id = %s AND project_id = %s ORDER BY resource_kind COLLATE \"C\", resource_id COLLATE \"C\" "
                "LIMIT %s", (member.tenant_id, member.project_id, max_rows + 1)).fetchall()
            epoch, head = tx._epoch, tx._head
        if len(rows) > max_rows:
            return None
        return Snapshot(epoch=epoch, at_seq=head, resources=[
            Resource(kind=str(r[0]), resource_id=str(r[1]), revision=int(str(r[2])), body=_text(r[3]))
            for r in rows])

    def changes(self, member: Membership, after_seq: int, limit: int) -> FeedRead:
        with self.reading(member) as tx:
            epoch, head = tx._epoch, tx._head
            rows = tx.conn.execute(
                "SELECT c.seq, c.resource_kind, c.resource_id, c.revision, c.actor_id, c.committed_at_ms, c.body_json, "
                "r.revision, r.body_json FROM ssot_changes c LEFT JOIN ssot_resources r "
                "ON c.resource_kind IN ('handoff', 'handoff_context') AND r.tenant_id = c.tenant_id "
                "AND r.project_id = c.project_id AND r.resource_kind = c.resource_kind AND r.resource_id = c.resource_id "
                "WHERE c.tenant_id = %s AND c.project_id = %s AND c.seq > %s ORDER BY c.seq LIMIT %s",
                (member.tenant_id, member.project_id, min(after_seq, head), limit + 1)).fetchall()
        changes: list[Change] = []
        current: dict[tuple[str, str], Resource] = {}
        for seq, kind, rid, revision, actor, committed, body, now_revision, now_body in rows:
            kind, rid = str(kind), str(rid)
            changes.append(Change(seq=int(str(seq)), kind=kind, resource_id=rid, revision=int(str(revision)),
                                  actor_id=str(actor), committed_at_ms=int(str(committed)),
                                  body=_text(body)))
            if kind in PARTICIPANT_KINDS:
                current[(kind, rid)] = Resource(kind=kind, resource_id=rid,
                                                revision=int(str(now_revision)) if now_revision is not None else 0,
                                                body=_text(now_body))
        return FeedRead(epoch=epoch, head=head, changes=changes, current=current)

    def mailbox(self, member: Membership, query: MailboxQuery) -> list[MailboxRow]:
        column = "to_actor" if query.inbox else "from_actor"  # chosen from a closed set, never from input
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT h.updated_seq, r.revision, r.body_json FROM ssot_handoff_index h JOIN ssot_resources r "
                "ON r.tenant_id = h.tenant_id AND r.project_id = h.project_id AND r.resource_kind = 'handoff' "
                f"AND r.resource_id = h.handoff_id WHERE h.tenant_id = %s AND h.project_id = %s AND h.{column} = %s "
                "AND (%s::TEXT IS NULL OR h.source_id = %s) AND (%s OR h.status <> 'completed') "
                "AND (%s::BIGINT IS NULL OR h.updated_seq < %s) AND NOT r.deleted "
                "ORDER BY h.updated_seq DESC LIMIT %s",
                (member.tenant_id, member.project_id, query.actor_id, query.source_id, query.source_id,
                 query.include_completed, query.before_seq, query.before_seq, query.limit + 1)).fetchall()
        return [MailboxRow(project_seq=int(str(r[0])), revision=int(str(r[1])), body=_text(r[2]) or "")
                for r in rows]

    def search(self, member: Membership, terms: list[str]) -> SearchIndex:
        t, p = member.tenant_id, member.project_id
        with self.reading(member) as tx:
            conn = tx.conn
            epoch, head = tx._epoch, tx._head
            counted = conn.execute("SELECT count(*) FROM ssot_resources WHERE tenant_id = %s AND project_id = %s",
                                   (t, p)).fetchone()
            docs = conn.execute("SELECT count(*), coalesce(sum(length), 0) FROM aidememo_ref_search_docs "
                                "WHERE tenant_id = %s AND project_id = %s", (t, p)).fetchone()
            assert counted is not None and docs is not None
            df: dict[str, int] = {}
            postings: list[Posting] = []
            facts: dict[str, str] = {}
            for term in terms:
                rows = conn.execute(
                    "SELECT s.fact_id, s.tf, d.length, r.body_json FROM aidememo_ref_search_terms s "
                    "JOIN aidememo_ref_search_docs d ON d.tenant_id = s.tenant_id AND d.project_id = s.project_id "
                    "AND d.fact_id = s.fact_id JOIN ssot_resources r ON r.tenant_id = s.tenant_id "
                    "AND r.project_id = s.project_id AND r.resource_kind = 'fact' AND r.resource_id = s.fact_id "
                    "AND NOT r.deleted WHERE s.tenant_id = %s AND s.project_id = %s AND s.term = %s",
                    (t, p, term)).fetchall()
                df[term] = len(rows)
                postings.extend(Posting(term=term, fact_id=str(r[0]), tf=int(str(r[1])), doc_len=int(str(r[2])))
                                for r in rows)
                facts.update((str(r[0]), _text(r[3]) or "") for r in rows)
        n_docs, total = int(str(docs[0])), int(str(docs[1]))
        return SearchIndex(epoch=epoch, head=head, resources=int(str(counted[0])), n_docs=n_docs,
                           avg_len=total / n_docs if n_docs else 0.0, df=df, postings=postings, facts=facts)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
