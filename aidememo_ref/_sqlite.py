"""SQLite storage: the ``Store`` of a single database file (table layout 5).

**What a command writes.** One row appended to one rowid table, ``log``: the change (project
sequence, kind, id, revision, actor, time, body), its receipt (command id, fingerprint) and, for
handoff records, the four fields the mailbox filters on. One ``INSERT`` inside ``BEGIN
IMMEDIATE`` ... ``COMMIT``, no secondary index, no trigger, no subquery: the b-tree the raw
one-row transaction touches, and nothing else. The identity tables (tenants, projects, actors,
memberships, token bindings) are ordinary tables, one row per entity.

**What it reads.** Everything a rule or a read looks a command up by (receipt by command id, a
resource's current revision and body, the next sequence, the feed, snapshot, mailbox and search
index) comes from the ledger's state in memory (``_logstate``), one per ``SQLiteStore``, shared by
its threads under a lock. It is built from the log when the store opens (O(log length): the bench
times a 100,000-command file) and brought up to date at the start of every transaction, and of
every read, by reading only the rows past the last one applied; ``PRAGMA data_version`` (the
transaction's first statement) skips even that when no other connection committed since this
connection last caught up. A write's row enters memory only after ``COMMIT`` returned.

**Why two writers still cannot both win.** Under ``BEGIN IMMEDIATE`` the write lock is held
before the catch-up, so the state the rules decide on is exactly the committed one, in threads
and in other processes alike. The new row's rowid is the one after the last applied, so a
memory that were ever behind the file could not commit: the insert would fail on the rowid (that
request answers 500, nothing is written, and the next transaction reads the tail again). An
exception between ``COMMIT`` and memory makes the connection read the tail at its next statement
(its own commit does not move its ``data_version``); a log row that cannot be applied is a 500
with memory left as it was.
WAL with ``synchronous=NORMAL`` survives ``kill -9`` of the process (the answer is sent only
after COMMIT returns); surviving power loss would need ``synchronous=FULL``.

**What it costs.** Memory holds the ledger's current state and its whole feed (every change
body, as the file does). Layouts 3 and 2 (a change table keyed by (tenant, project, sequence), a
command-id index, the resource rows, the mailbox and search tables) are upgraded in place in one
transaction: their changes are copied into the log in (tenant, project, sequence) order and the
old tables dropped. ``docs/hardening.md`` measures all of this against raw one-row transactions.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from sys import intern
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Final, TypeAlias

from ._commands import Command, ResourcePayload
from ._hot import AppendStatements, build
from aidememo_wire.errors import LedgerError
from . import _ledger
from ._ledger import Write
from ._logstate import LogState, Project, Row
from ._provision import LAYOUT_VERSION, Checked, insert_identity
from ._records import (FACT, HANDOFF, WRITABLE_ROLES, Handoff, LedgerFact, Membership, Receipt, RecordError, Resource,
                       Role)
from refkit.sqlitefile import BUSY_TIMEOUT_MS, Connections, is_busy, transaction
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

__all__ = ["SQLiteStore", "ProvisionError", "SCHEMA_VERSION", "LAYOUT_VERSION", "BUSY_TIMEOUT_MS", "append_statement"]

SCHEMA_VERSION: Final = 4  # what upstream's SQLite store reports in /health
_UPGRADED_LAYOUTS: Final = (2, 3)  # the change-table layouts (3 = 2 plus two triggers): upgraded on open

_IDENTITY = """
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
"""
# ``n`` is the rowid: commit order across the file's projects, the order memory applies rows in.
_LOG = """
CREATE TABLE IF NOT EXISTS log(
  n INTEGER PRIMARY KEY, tenant_id TEXT NOT NULL, project_id TEXT NOT NULL, seq INTEGER NOT NULL,
  kind TEXT NOT NULL, id TEXT NOT NULL, revision INTEGER NOT NULL, actor_id TEXT NOT NULL,
  committed_at_ms INTEGER NOT NULL, body TEXT, command_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
  from_actor TEXT, to_actor TEXT, source_id TEXT, status TEXT)
"""
_COLUMNS: Final = ("n, tenant_id, project_id, seq, kind, id, revision, actor_id, committed_at_ms, body, command_id, "
                   "fingerprint, from_actor, to_actor, source_id, status")
_APPENDS: Final = AppendStatements("log", _COLUMNS.split(", "))  # None fields left to the column default (``_hot``)
_APPEND: Final = _APPENDS.statement(())  # all 16 columns
_TAIL: Final = f"SELECT {_COLUMNS} FROM log WHERE n>? ORDER BY n"
_TABLES: Final = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _IDENTITY + _LOG))
_OLD_TABLES: Final = ("resources", "changes", "handoff_index", "search_docs", "search_terms")  # layouts 2 and 3
_OLD_CHANGES: Final = ("SELECT tenant_id, project_id, seq, kind, id, revision, actor_id, committed_at_ms, body, "
                       "command_id, fingerprint FROM changes ORDER BY tenant_id, project_id, seq")

_AUTHENTICATE = (
    "SELECT b.tenant_id, b.actor_id, m.role, p.project_epoch FROM token_bindings b "
    "JOIN tenants t ON t.tenant_id=b.tenant_id AND t.status='active' "
    "JOIN actors a ON a.tenant_id=b.tenant_id AND a.actor_id=b.actor_id AND a.status='active' "
    "LEFT JOIN memberships m ON m.tenant_id=b.tenant_id AND m.project_id=? AND m.actor_id=b.actor_id "
    "AND m.status='active' "
    "LEFT JOIN projects p ON p.tenant_id=m.tenant_id AND p.project_id=m.project_id AND p.status='active' "
    "WHERE b.token_sha256=? AND b.active=1"
)
_MEMBER_ROLE = (
    "SELECT m.role FROM memberships m JOIN actors a ON a.tenant_id=m.tenant_id AND a.actor_id=m.actor_id "
    "WHERE m.tenant_id=? AND m.project_id=? AND m.actor_id=? AND m.status='active' AND a.status='active'"
)
_Db: TypeAlias = sqlite3.Connection | sqlite3.Cursor  # what runs a statement
_NOT_INDEXED: Final[tuple[str | None, str | None, str | None, str | None]] = (None, None, None, None)


def _map(exc: BaseException) -> LedgerError:
    """Storage faults on the wire: lock timeouts are 503 (retryable), the rest 500."""
    return LedgerError.storage_failure(unavailable=is_busy(exc))


def _upgrade(conn: sqlite3.Connection, path: str, layout: int) -> None:
    """Layout 2 or 3 to 5 inside the opening transaction: the log gets every change, in each
    project's sequence order, with the mailbox fields read back from the handoff bodies."""
    tables = {str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not {*_OLD_TABLES, *(_TABLES - {"log"})} <= tables:
        raise StoreError(f"{path} is not a reference ledger file (user_version {layout} without the "
                         "ledger's tables); start from a new database file")
    conn.execute(_LOG)
    rows = []
    for n, (t, p, seq, kind, rid, revision, actor, at, body, command_id, fingerprint) in enumerate(
            conn.execute(_OLD_CHANGES).fetchall(), 1):
        try:
            index = _mailbox_fields(Handoff.from_json(body) if kind == HANDOFF and body is not None else None)
        except RecordError as exc:  # the transaction rolls back: the file stays as it was
            raise StoreError(f"{path} cannot be upgraded from table layout {layout}: change {seq} of project "
                             f"{p}: {exc}") from exc
        rows.append((n, t, p, seq, kind, rid, revision, actor, at, body, command_id, fingerprint, *index))
    try:
        # Folded once before anything is dropped, so a log the store would refuse to open (a
        # sequence gap, a fact body that is not a fact) leaves the old file as it was.
        probe = LogState()
        for values in rows:
            probe.apply(Row._make(values))
    except ValueError as exc:
        raise StoreError(f"{path} cannot be upgraded from table layout {layout}: {exc}") from exc
    conn.executemany(_APPEND, rows)
    for table in _OLD_TABLES:
        conn.execute(f"DROP TABLE {table}")  # their indexes and triggers go with them
    conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")


def _mailbox_fields(record: object) -> tuple[str | None, str | None, str | None, str | None]:
    """The log row's four mailbox columns: set for a handoff record, empty for anything else."""
    if isinstance(record, Handoff):
        return record.from_actor, record.to_actor, record.source_id, record.status.value
    return _NOT_INDEXED


_CHANGE_ONLY: Final = _APPENDS.statement(tuple(range(12, 16)))  # a row without the handoff fields


def append_statement(*, handoff_fields: bool) -> str:
    """The statement the store appends a log row with: all 16 columns in order, or the first 12
    for a row without the handoff-index fields (the common write; ``bench/ledger.py``'s floors)."""
    return _APPEND if handoff_fields else _CHANGE_ONLY


def _abandon(store: SQLiteStore, conn: _Db, *, unsure: bool) -> None:
    """Roll back whatever is open; the connection must be reusable after any failure. After
    a database fault (``unsure``) its next transaction reads the log's tail again, whatever
    ``PRAGMA data_version`` says; a refusal by the rules wrote nothing and leaves no doubt."""
    if unsure:
        store._local.log_seen = None
    connection = conn if isinstance(conn, sqlite3.Connection) else conn.connection
    if connection.in_transaction:
        try:
            connection.execute("ROLLBACK")
        except sqlite3.DatabaseError:
            pass  # the original failure is the one worth reporting


class _Tx:
    """A transaction bound to one member's project: the rules' view, replay and apply.

    Reads come from the store's memory, caught up with the file when the transaction began;
    rows appended here reach memory when ``COMMIT`` has returned."""

    __slots__ = ("_store", "_conn", "_cur", "_member", "_mode", "_project", "_rows")

    def __init__(self, store: SQLiteStore, conn: sqlite3.Connection, member: Membership, mode: str) -> None:
        self._store, self._conn, self._member, self._mode = store, conn, member, mode
        # One cursor per thread for its transactions' statements (conn.execute makes one per call,
        # and a cursor per transaction cost a command 1,300 instructions): each statement is read
        # to its end before the next runs, so transactions never share one mid-read.
        local = store._local
        cursor = local.cursor
        if cursor is None or cursor.connection is not conn:
            cursor = local.cursor = conn.cursor()
        self._cur = cursor
        self._rows: list[tuple[Row, str | None]] = []

    def __enter__(self) -> _Tx:
        try:
            self._cur.execute(self._mode)
            self._project = self._store._synced(self._cur, self._member)
        except sqlite3.DatabaseError as exc:
            self._abandon()
            raise _map(exc) from exc
        except BaseException:
            self._abandon()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if exc is None:
            try:
                self._cur.execute("COMMIT")
            except sqlite3.DatabaseError as fault:
                self._abandon(unsure=True)
                raise _map(fault) from fault
            if self._rows:
                state = self._store._state
                try:
                    with state.lock:
                        for row, content in self._rows:
                            state.apply(row, content)
                except BaseException:
                    # Committed but not (all) in memory: this connection's own commit never
                    # moves its data_version, so make its next statement read the tail again.
                    self._store._local.log_seen = None
                    raise
            return
        self._abandon(unsure=isinstance(exc, sqlite3.DatabaseError))
        if isinstance(exc, sqlite3.DatabaseError):
            raise _map(exc) from exc

    def _abandon(self, *, unsure: bool = True) -> None:
        _abandon(self._store, self._conn, unsure=unsure)

    # -- View --------------------------------------------------------------------------------
    def resource(self, kind: str, resource_id: str) -> Resource | None:
        row = self._latest(kind, resource_id)
        return None if row is None else row.resource()

    def _latest(self, kind: str, resource_id: str) -> Row | None:
        for row, _ in reversed(self._rows):  # this transaction's own writes first
            if row.kind == kind and row.resource_id == resource_id:
                return row
        return self._project.resources.get((kind, resource_id))

    def member_role(self, actor_id: str) -> Role | None:
        member = self._member
        row = self._cur.execute(_MEMBER_ROLE, (member.tenant_id, member.project_id, actor_id)).fetchone()
        return None if row is None else Role(row[0])

    # -- primitives ------------------------------------------------------------------------------
    def replay(self, command: Command) -> Receipt | None:
        member = self._member
        row = self._project.receipts.get(command.command_id)
        if row is None:
            if not self._rows:  # the common case: a new command, nothing written yet
                return None
            row = next((row for row, _ in self._rows if row.command_id == command.command_id), None)
            if row is None:
                return None
        if (row.actor_id, row.fingerprint, row.kind, row.resource_id) != (
                member.actor_id, command.fingerprint, command.kind, command.resource_id):
            raise LedgerError.command_conflict()
        return Receipt(command_id=command.command_id, fingerprint=row.fingerprint, tenant_id=member.tenant_id,
                       project_id=member.project_id, actor_id=row.actor_id, project_seq=row.seq, kind=row.kind,
                       resource_id=row.resource_id, revision=row.revision, committed_at_ms=row.committed_at_ms)

    def apply(self, command: Command, write: Write, now_ms: int) -> Receipt:
        member, project, rows, kind, rid, command_id = (self._member, self._project, self._rows, write.kind,
                                                         write.resource_id, command.command_id)
        if command_id in project.receipts or (rows and any(row.command_id == command_id for row, _ in rows)):
            # One change per command id, which the log has no unique index to enforce.
            raise LedgerError.storage_failure(unavailable=False)
        current = self._latest(kind, rid) if rows else project.resources.get((kind, rid))
        revision = 1 if current is None else current.revision + 1
        seq = len(project.rows) + len(rows) + 1  # ``project.head``, without the property's call
        record = write.record
        index = _NOT_INDEXED if record is None else _mailbox_fields(record)  # None: every raw command
        content = record.content if isinstance(record, LedgerFact) else None
        row: Row = build(Row, (
            self._store._state.applied + len(rows) + 1, member.tenant_id, member.project_id, seq, intern(kind), rid,
            revision, member.actor_id, now_ms, write.body, command_id, command.fingerprint, *index))
        if index is _NOT_INDEXED and write.body is not None:
            self._cur.execute(_CHANGE_ONLY, row[:12])  # the common shape, without ``of``'s pass over the row
        else:
            self._cur.execute(*_APPENDS.of(row))
        rows.append((row, content))
        return build(Receipt, (command_id, command.fingerprint, member.tenant_id, member.project_id,  # ``_hot``
                               member.actor_id, seq, kind, rid, revision, now_ms))


class _PlainView:
    """The rules' view for ``put_plain``, as ``_Tx`` gives it with nothing written yet: the
    project's memory (a raw command reads the one resource it writes) and its member table."""

    __slots__ = ("_project", "_cur", "_member")

    def __init__(self, project: Project, cur: sqlite3.Cursor, member: Membership) -> None:
        self._project, self._cur, self._member = project, cur, member

    def resource(self, kind: str, resource_id: str) -> Resource | None:
        row = self._project.resources.get((kind, resource_id))
        return None if row is None else row.resource()

    def member_role(self, actor_id: str) -> Role | None:
        member = self._member
        row = self._cur.execute(_MEMBER_ROLE, (member.tenant_id, member.project_id, actor_id)).fetchone()
        return None if row is None else Role(row[0])


class _Thread(threading.local):
    """What one thread's connection remembers: the identity tables' answers, and how far it has
    seen the log."""

    members: dict[tuple[bytes, str], Membership]
    seen: tuple[int, int] = (-1, -1)  # (PRAGMA data_version, store generation) the members are valid for
    log_seen: int | None = None  # PRAGMA data_version when this connection last caught the memory up
    pending: tuple[bytes, str, Membership] | None = None  # a deferred answer no transaction has checked yet
    cursor: sqlite3.Cursor | None = None  # for this thread's transactions (``_Tx``)

    def __init__(self) -> None:
        self.members = {}


class SQLiteStore:
    """The ledger's SQLite file. Safe to share between threads and processes.

    Authentication results are remembered per connection while ``PRAGMA data_version`` says no
    other connection committed and this store changed no identity (``_generation``): the join
    over tokens, tenants, actors, memberships and projects then runs once per caller, not once
    per request, and any suspension or revocation, from any process, still applies to the next
    request. The same statement tells whether the log has rows memory has not applied.
    """

    _MEMBERS_PER_THREAD: Final = 256

    def __init__(self, path: str | Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._connections = Connections(path, busy_timeout_ms=busy_timeout_ms)
        self._conn: Callable[[], sqlite3.Connection] = self._connections.get  # this thread's
        self._local = _Thread()
        self._generation = 0
        self._state = LogState()
        with self._exclusive() as conn:
            layout = conn.execute("PRAGMA user_version").fetchone()[0]
            if layout not in (0, *_UPGRADED_LAYOUTS, LAYOUT_VERSION):
                raise StoreError(f"{self.path} has table layout {layout}, not this reference's "
                                 f"{LAYOUT_VERSION}; start from a new database file")
            if layout in _UPGRADED_LAYOUTS:
                _upgrade(conn, self.path, layout)
            elif layout == 0:
                for statement in (_IDENTITY + _LOG).split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
        try:
            self._fresh(self._local, self._conn())  # builds the memory from the whole log
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc
        except LedgerError as exc:  # rows out of order or a stored fact that is not one
            raise StoreError(f"{self.path} has a damaged change log: {exc.__cause__}") from exc

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

    def _fresh(self, local: _Thread, conn: _Db) -> None:
        """After another connection committed (``PRAGMA data_version`` moved): forget the
        remembered members and apply the log rows memory lacks. sqlite3 errors pass."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        seen = (version, self._generation)
        if seen != local.seen:
            local.members.clear()
            local.seen = seen
        if version != local.log_seen:
            state = self._state
            try:
                with state.lock:
                    for n, t, p, seq, kind, rid, revision, actor, *rest in conn.execute(_TAIL, (state.applied,)):
                        # One copy of each repeated name in memory, not one per row.
                        state.apply(build(Row, (n, intern(t), intern(p), seq, intern(kind), rid, revision,
                                                intern(actor), *rest)))
            except ValueError as exc:  # a damaged row: memory keeps the prefix before it
                raise LedgerError.storage_failure(unavailable=False) from exc
            local.log_seen = version

    def _synced(self, conn: _Db, member: Membership) -> Project:
        """The member's project, caught up with the file, after any deferred membership check."""
        local = self._local
        self._fresh(local, conn)
        if local.pending is not None:
            self._check_pending(local, conn)
        state = self._state
        with state.lock:
            return state.project(member.tenant_id, member.project_id)

    def _read(self, member: Membership) -> Project:
        """``_synced`` outside a transaction (each statement its own), faults mapped."""
        try:
            return self._synced(self._conn(), member)
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc

    def connection(self) -> sqlite3.Connection:
        """This thread's connection to the file, opened as the store opens it (pragmas, busy
        timeout): what a measurement of the store's own statements writes through."""
        return self._conn()

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
            self._fresh(local, conn)
            return self._membership(local, conn, digest, project_id)
        except sqlite3.DatabaseError as exc:
            raise _map(exc) from exc

    def confirm(self) -> None:
        local = self._local
        if local.pending is not None:
            try:
                conn = self._conn()
                self._fresh(local, conn)
                self._check_pending(local, conn)
            except sqlite3.DatabaseError as exc:
                raise _map(exc) from exc

    def _membership(self, local: _Thread, conn: _Db, digest: bytes,
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

    def _check_pending(self, local: _Thread, conn: _Db) -> None:
        """Check a deferred answer against the file as ``conn`` saw it in ``_fresh``; sqlite3
        errors pass."""
        pending, local.pending = local.pending, None
        if pending is None:
            return
        digest, project_id, member = pending
        if local.members.get((digest, project_id)) is member:  # still remembered: the common case
            return
        found = self._membership(local, conn, digest, project_id)
        if found is not member and found != member:  # the remembered object itself, usually
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
                return insert_identity(conn, Checked(tenant_id, project_id, actor_id, token_digest, role, actor_kind,
                                                     project_epoch, new_epoch, tenant_name, project_name, actor_name,
                                                     now_ms))
        finally:
            self._generation += 1  # after the commit: this connection's own commits do not move data_version

    # -- transactions -----------------------------------------------------------------------
    def writing(self, member: Membership) -> _Tx:
        return _Tx(self, self._conn(), member, "BEGIN IMMEDIATE")

    def put_plain(self, digest: bytes, command: Command, now_ms: int) -> Receipt | None:
        """``_store.execute`` with ``_ledger.decide`` through a ``_Tx``, for a new raw command of a
        caller this thread remembers as a writable member, in one function (``_hot``): the
        deferred membership check, the rules (``_ledger.decide``), ``_Tx.apply``'s row and the
        commit. A refusal or a fault raises as there; None, with nothing written, for anything
        else (a replay, a caller not remembered or whose membership changed): the service then
        answers from the start."""
        local, payload = self._local, command.payload
        member = local.members.get((digest, command.project_id))
        cur, seen = local.cursor, local.seen
        if (member is None or member.role not in WRITABLE_ROLES or seen[1] != self._generation or cur is None
                or not isinstance(payload, ResourcePayload)):
            return None
        pending = (digest, command.project_id, member)  # what a deferred ``authenticate`` leaves
        try:
            cur.execute("BEGIN IMMEDIATE")  # ``_Tx.__enter__``
            version = cur.execute("PRAGMA data_version").fetchone()[0]
            project = self._state.projects.get((member.tenant_id, member.project_id))
            if project is None or version != local.log_seen or seen[0] != version:  # (``seen[1]``: above)
                local.pending = pending
                project = self._synced(cur, member)  # ``_fresh``'s own statement again: something moved
        except BaseException as exc:
            if not isinstance(exc, MembershipChanged):
                local.pending = pending  # for the ``confirm`` below, as ``_deferred`` makes it
            self._plain_fault(cur, exc)  # raises, unless the membership changed
            return None
        command_id, kind, rid = command.command_id, command.kind, command.resource_id
        current = project.resources.get((kind, rid))
        if command_id in project.receipts:
            _abandon(self, cur, unsure=False)  # a replay: ``_store.execute`` answers it
            return None
        try:  # the rules themselves, so that a planted or mutated rule runs on this path too
            write = _ledger.decide(command, member.actor_id, _PlainView(project, cur, member), now_ms)
        except LedgerError:
            _abandon(self, cur, unsure=False)  # as ``_Tx.__exit__`` after a refusal
            raise
        state = self._state
        row: Row = build(Row, (
            state.applied + 1, member.tenant_id, member.project_id, len(project.rows) + 1, intern(kind), rid,
            1 if current is None else current.revision + 1, member.actor_id, now_ms,
            write.body, command_id, command.fingerprint, None, None, None, None))
        try:
            if row.body is None:
                cur.execute(*_APPENDS.of(row))
            else:
                cur.execute(_CHANGE_ONLY, row[:12])
            cur.execute("COMMIT")
        except sqlite3.DatabaseError as fault:  # ``_Tx.__exit__``
            _abandon(self, cur, unsure=True)
            raise _map(fault) from fault
        except BaseException:
            _abandon(self, cur, unsure=True)
            raise
        try:
            with state.lock:
                state.apply(row)
        except BaseException:
            local.log_seen = None  # as ``_Tx.__exit__``: committed, not in memory
            raise
        return build(Receipt, (command_id, command.fingerprint, member.tenant_id, member.project_id, member.actor_id,
                               row.seq, kind, rid, row.revision, now_ms))

    def _plain_fault(self, cur: sqlite3.Cursor, exc: BaseException) -> None:
        """``put_plain``'s answer to a failure as its transaction began, as ``_Tx.__enter__`` and the
        service's ``_deferred`` answer it: the fault, once the membership is confirmed; nothing
        (answer from the start) when the membership changed."""
        _abandon(self, cur, unsure=True)
        if isinstance(exc, MembershipChanged):
            return
        if not isinstance(exc, (sqlite3.DatabaseError, LedgerError)):
            raise exc  # not an answer: ``_deferred`` confirms nothing for it either
        try:
            self.confirm()
        except MembershipChanged:
            return
        if isinstance(exc, sqlite3.DatabaseError):
            raise _map(exc) from exc
        raise exc

    def reading(self, member: Membership) -> _Tx:
        # Its view reads memory, which other threads may move on meanwhile: each lookup sees
        # the latest committed state (the reads below take one consistent look at memory each).
        return _Tx(self, self._conn(), member, "BEGIN DEFERRED")

    # -- reads: one look at memory each, under its lock ----------------------------------------
    def resource(self, member: Membership, kind: str, resource_id: str) -> Resource | None:
        project = self._read(member)
        with self._state.lock:
            return project.resource(kind, resource_id)

    def snapshot(self, member: Membership, max_rows: int) -> Snapshot | None:
        project = self._read(member)
        with self._state.lock:
            keys = project.ordered()
            if len(keys) > max_rows:
                return None
            rows = [project.resources[key] for key in keys]
            head = project.head
        return Snapshot(epoch=member.project_epoch, at_seq=head, resources=[
            row.resource() for row in rows])

    def changes(self, member: Membership, after_seq: int, limit: int) -> FeedRead:
        project = self._read(member)
        with self._state.lock:
            head = project.head
            changes = project.feed(after_seq, limit + 1)  # a cursor beyond the head is answered 409 by the read rules
            rows = {(c.kind, c.resource_id): project.resources[(c.kind, c.resource_id)]
                    for c in changes if c.kind in PARTICIPANT_KINDS}
        current = {key: row.resource() for key, row in rows.items()}
        return FeedRead(epoch=member.project_epoch, head=head, changes=changes, current=current)

    def mailbox(self, member: Membership, query: MailboxQuery) -> list[MailboxRow]:
        project = self._read(member)
        rows: list[MailboxRow] = []
        with self._state.lock:
            for handoff_id in (project.inbox if query.inbox else project.outbox).get(query.actor_id, ()):
                entry = project.handoffs[handoff_id]
                if ((query.source_id is not None and entry.source_id != query.source_id)
                        or (not query.include_completed and entry.status == "completed")
                        or (query.before_seq is not None and entry.updated_seq >= query.before_seq)):
                    continue
                current = project.resources[(HANDOFF, handoff_id)]
                if current.body is not None:
                    rows.append(MailboxRow(project_seq=entry.updated_seq, revision=current.revision,
                                           body=current.body))
        rows.sort(key=lambda row: row.project_seq, reverse=True)
        return rows[:query.limit + 1]

    def search(self, member: Membership, terms: list[str]) -> SearchIndex:
        project = self._read(member)
        df: dict[str, int] = {}
        postings: list[Posting] = []
        facts: dict[str, str] = {}
        with self._state.lock:
            n_docs, total, resources = len(project.docs), project.doc_total, len(project.resources)
            for term in terms:
                found = 0
                for fact_id, tf in sorted(project.terms.get(term, {}).items()):
                    fact = project.resources.get((FACT, fact_id))
                    if fact is None or fact.body is None:
                        continue
                    found += 1
                    postings.append(Posting(term=term, fact_id=fact_id, tf=tf, doc_len=project.docs[fact_id]))
                    facts[fact_id] = fact.body
                df[term] = found
            head = project.head
        return SearchIndex(epoch=member.project_epoch, head=head, resources=resources, n_docs=n_docs,
                           avg_len=total / n_docs if n_docs else 0.0, df=df, postings=postings, facts=facts)
