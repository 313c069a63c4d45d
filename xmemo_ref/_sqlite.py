"""SQLite storage for the XMemo reference (table layout 2): keys, MCP sessions, and one log.

**What a capture writes.** One row appended to one rowid table, ``log``: the tenant, the
capture's answer (which shows the memory as the capture left it) and, when it came with one,
its idempotency key and request fingerprint. One ``INSERT`` inside ``BEGIN IMMEDIATE`` ...
``COMMIT``, no secondary index: the b-tree a raw one-row transaction touches, and nothing else.
A capture that changes nothing and carries no key writes no row.

**What it reads.** The rules' lookups (semantic key, ``dedupe``'s twin, the state slot, a
memory by id), the replays and every read come from the store's memory (``_state``), one per
``SQLiteXMemoStore``, shared by its threads under a lock. It is built from the log when the store
opens and brought up to date at the start of every transaction and read, by folding only the
rows past the last one applied; ``PRAGMA data_version`` skips even that when no other connection
committed since this connection last looked. A write's row enters memory after ``COMMIT``.

**Why two writers still cannot both win.** Under ``BEGIN IMMEDIATE`` the write lock is held
before the catch-up, so the idempotency lookup and the rules see exactly the committed state, in
threads and processes alike: two replays of one key racing yield one memory. The new row's
rowid is the one after the last applied, so a memory that were ever behind the file could not
commit (the insert fails, the request answers 500, nothing is written). An exception between
``COMMIT`` and memory makes the connection read the tail at its next statement (its own commit
does not move its ``data_version``). The file is opened as the AideMemo ledger's
(``refkit.sqlitefile``): an answer leaves only after COMMIT, so it survives ``kill -9``.

API keys are checked against a per-connection cache of the ``api_keys`` answers, valid while
``data_version`` (and this store's own key changes) say nothing changed; a request's answer from
the cache is confirmed by its next statement's ``data_version`` (or ``confirm``), and if the key
changed meanwhile the store raises ``KeyChanged`` and the service answers again from the start. Raw keys are never
stored, only SHA-256. Layout 1 files (a ``memories`` row updated in place per memory, and an
``idempotency`` table) are upgraded in place on open (``_layout1``).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

from refkit.sqlitefile import BUSY_TIMEOUT_MS, Connections, is_busy, transaction
from . import _layout1
from ._log import APPEND, APPEND_KEYED, LAYOUT_VERSION, LOG, TAIL, fold
from ._codec import real
from ._errors import KeyChanged, ProvisionError, RequestError, StoreError
from ._index import RecallIndex
from ._recall import Candidates, rank
from ._ranking import Ranking, View
from ._records import Memory, Principal, Tenant
from ._state import Replay, StoreState, TenantMemories
from ._store import IdempotencyClaim, Plan, ReadFilter
from ._writes import Outcome

if TYPE_CHECKING:
    from refkit.scheduler import Scheduler

__all__ = ["SQLiteXMemoStore", "LAYOUT_VERSION"]

_T = TypeVar("_T")

_KEYS = """
CREATE TABLE IF NOT EXISTS api_keys(
  key_sha256 BLOB PRIMARY KEY CHECK(length(key_sha256) = 32),
  owner_id TEXT NOT NULL, organization_id TEXT NOT NULL, workspace_id TEXT NOT NULL, project_id TEXT NOT NULL,
  scopes TEXT NOT NULL, agent_id TEXT, active INTEGER NOT NULL DEFAULT 1, created_at_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS mcp_sessions(
  session_id TEXT PRIMARY KEY, key_sha256 BLOB NOT NULL, protocol_version TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL) WITHOUT ROWID;
"""
_PRINCIPAL: Final = ("SELECT owner_id, organization_id, workspace_id, project_id, scopes, agent_id FROM api_keys "
                     "WHERE key_sha256=? AND active=1")
_LIVE_ONLY: Final = ReadFilter()
# Looked up once: an enum class's attributes go through EnumType.__getattr__'s hook (``_writes``).
_UNCHANGED: Final = Outcome.UNCHANGED
_CREATED: Final = Outcome.CREATED


class _Seen:
    """What one thread's connection remembers: how far it has seen the file, and the keys' answers."""

    __slots__ = ("seen", "principals", "pending", "cursor")

    def __init__(self) -> None:
        self.seen: tuple[int, int] | None = None  # (PRAGMA data_version, store generation) at the last catch-up
        self.principals: dict[bytes, Principal | None] = {}
        self.pending: tuple[bytes, Principal | None] | None = None  # a deferred answer no statement has confirmed
        # The write transaction's cursor; its last statement is always COMMIT or ROLLBACK, so it
        # never holds a read open between requests.
        self.cursor: sqlite3.Cursor | None = None


class _Thread(threading.local):
    """Each thread's ``_Seen``, one object: every attribute read of a ``threading.local`` looks up
    the thread's own dictionary first (about 500 instructions), and a capture reads nine."""

    def __init__(self) -> None:
        self.mine = _Seen()


class SQLiteXMemoStore:
    """The XMemo reference's SQLite file. Safe to share between threads and processes."""

    _PRINCIPALS_PER_THREAD: Final = 256

    def __init__(
        self, path: str | Path, *, scheduler: Scheduler | None = None, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        self.path = str(path)
        self.scheduler = scheduler
        self._connections = Connections(path, busy_timeout_ms=busy_timeout_ms)
        self._local = _Thread()
        self._generation = 0  # moved by this store's own key changes, which do not move its data_version
        self._state = StoreState()
        self._open()

    # -- plumbing ---------------------------------------------------------------------------
    def _conn(self) -> sqlite3.Connection:
        return self._connections.get()

    def _open(self) -> None:
        try:
            with transaction(self._conn()) as conn:
                layout = int(conn.execute("PRAGMA user_version").fetchone()[0])
                tables = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
                if layout == 0 and "memories" in tables:
                    _layout1.upgrade(conn, self.path, tables)
                elif layout == 0:
                    for statement in (_KEYS + LOG).split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={LAYOUT_VERSION}")
                elif layout != LAYOUT_VERSION:
                    raise StoreError(f"{self.path} has table layout {layout}, not the XMemo reference's "
                                     f"{LAYOUT_VERSION}; start from a new database file")
            self._fresh(self._conn())  # builds the memory from the whole log
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path} cannot be opened: {exc}") from exc
        except ValueError as exc:
            raise StoreError(f"{self.path} has a damaged log: {exc}") from exc

    def _fault(self, exc: sqlite3.DatabaseError | ValueError) -> RequestError:
        """Storage faults leave as 503 (lock wait ran out: retryable) or 500, details never on the wire;
        a ValueError is a log row memory cannot fold (memory kept the rows before it)."""
        if isinstance(exc, sqlite3.DatabaseError):
            self._local.mine.seen = None  # unsure what the file holds now: read its tail at the next statement
            return RequestError.unavailable() if is_busy(exc) else RequestError.internal()
        return RequestError.internal()

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except (sqlite3.DatabaseError, ValueError) as exc:
            raise self._fault(exc) from exc

    @contextmanager
    def _transaction(self, mode: str) -> Iterator[sqlite3.Connection]:
        with self._guard(), transaction(self._conn(), mode) as conn:
            yield conn

    def _fresh(self, conn: sqlite3.Connection | sqlite3.Cursor) -> None:
        """Fold the rows other connections committed since this one last looked, and confirm a
        deferred key answer (``KeyChanged`` when it no longer holds); sqlite3 errors pass."""
        local = self._local.mine
        seen = (conn.execute("PRAGMA data_version").fetchone()[0], self._generation)  # an int already
        if seen != local.seen:
            local.principals.clear()
            state = self._state
            with state.lock:
                for row in conn.execute(TAIL, (state.applied,)):
                    fold(state, row)
            local.seen = seen
        pending, local.pending = local.pending, None
        if pending is not None and pending[0] not in local.principals and self._look_up(
                conn, pending[0]) != pending[1]:
            raise KeyChanged()

    def _point(self, name: str) -> None:
        if self.scheduler is not None:
            self.scheduler.point(name)

    def close(self) -> None:
        self._connections.close()
        self._local = _Thread()

    # -- keys -------------------------------------------------------------------------------
    def principal(self, key_digest: bytes, *, deferred: bool = False) -> Principal | None:
        local = self._local.mine
        if deferred and local.seen is not None and key_digest in local.principals:
            # Confirmed by the next statement's PRAGMA data_version (``_fresh``), which saves this
            # request a statement of its own.
            found = local.principals[key_digest]
            local.pending = (key_digest, found)
            return found
        local.pending = None
        with self._guard():
            conn = self._conn()
            self._fresh(conn)
            if key_digest in local.principals:
                return local.principals[key_digest]
            return self._look_up(conn, key_digest)

    def _look_up(self, conn: sqlite3.Connection | sqlite3.Cursor, key_digest: bytes) -> Principal | None:
        row = conn.execute(_PRINCIPAL, (key_digest,)).fetchone()
        found = None
        if row is not None:
            tenant = self._state.known(row[0], row[1], row[2], row[3])
            found = Principal(tenant=tenant, scopes=tuple(row[4].split(",")), bound_agent_id=row[5])
        local = self._local.mine
        if len(local.principals) < self._PRINCIPALS_PER_THREAD:
            local.principals[key_digest] = found
        return found

    def confirm(self) -> None:
        if self._local.mine.pending is not None:
            self._reading()

    def provision(self, *, key_digest: bytes, principal: Principal, now_ms: int) -> bool:
        t = principal.tenant
        wanted = (t.owner_id, t.organization_id, t.workspace_id, t.project_id, ",".join(principal.scopes),
                  principal.bound_agent_id)
        try:
            with self._transaction("IMMEDIATE") as conn:
                row = conn.execute(
                    "SELECT owner_id, organization_id, workspace_id, project_id, scopes, agent_id FROM api_keys "
                    "WHERE key_sha256=?", (key_digest,),
                ).fetchone()
                if row is None:
                    conn.execute(
                        "INSERT INTO api_keys(key_sha256, owner_id, organization_id, workspace_id, project_id, "
                        "scopes, agent_id, created_at_ms) VALUES (?,?,?,?,?,?,?,?)", (key_digest, *wanted, now_ms),
                    )
                    return True
        finally:
            self._generation += 1
        if tuple(row) != wanted:
            raise ProvisionError(
                "key binding conflict: this key is already bound to another owner, tenant, scope set or agent"
            )
        return False

    def deactivate(self, key_digest: bytes) -> None:
        """Revoke a key (no HTTP route does this; tests use it for the inactive-key case)."""
        try:
            with self._transaction("IMMEDIATE") as conn:
                conn.execute("UPDATE api_keys SET active=0 WHERE key_sha256=?", (key_digest,))
        finally:
            self._generation += 1

    # -- writes -----------------------------------------------------------------------------
    def write(self, tenant: Tenant, *, idempotency: IdempotencyClaim | None, plan: Plan) -> tuple[str, bool]:
        # Written out rather than with the context managers the other transactions use: this is
        # every capture's path (``python bench/records.py`` times three generator-based managers,
        # ``bench/xmemo.py`` a capture).
        local = self._local.mine
        conn = local.cursor
        if conn is None:  # one per thread, so that a capture's four statements make no cursor each
            conn = local.cursor = self._conn().cursor()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                answer, row, memory, replayed = self._decide(conn, tenant, idempotency, plan)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except (sqlite3.DatabaseError, ValueError) as exc:
            raise self._fault(exc) from exc
        if row is not None:
            self._applied(tenant, row, memory, idempotency)
        return answer, replayed

    def _decide(self, conn: sqlite3.Connection | sqlite3.Cursor, tenant: Tenant, idempotency: IdempotencyClaim | None,
                plan: Plan) -> tuple[str, tuple[Any, ...] | None, Memory | None, bool]:
        """Inside the write transaction: the answer, the row appended (or None), the memory it
        leaves (None: unchanged), and whether the answer is a replay.

        Scheduler points as the AideMemo store names them: "begin" once the write lock is held."""
        self._fresh(conn)
        scheduler = self.scheduler
        if scheduler is not None:
            scheduler.point("begin")
        state = self._state
        with state.lock:
            memories = state.tenant(tenant)
            if idempotency is not None:
                replay = self._replay(memories, idempotency)
                if replay is not None:
                    return replay, None, None, True
            decision, answer = plan(memories.lookups)
            row = self._row(tenant, decision.outcome, decision.memory, answer, idempotency)
        if scheduler is not None:
            scheduler.point("decided")
        if row is not None:
            conn.execute(APPEND if idempotency is None else APPEND_KEYED, row)
        if scheduler is not None:
            scheduler.point("commit")
        return answer, row, None if decision.outcome is _UNCHANGED else decision.memory, False

    def _row(self, tenant: Tenant, outcome: Outcome, memory: Memory, answer: str,
             claim: IdempotencyClaim | None) -> tuple[Any, ...] | None:
        """The log row for a decision (None: nothing to write), under the state lock."""
        if outcome is _UNCHANGED and claim is None:
            return None
        if outcome is _CREATED and self._state.taken(memory.id):
            raise RequestError.internal()  # layout 1's unique id index, kept: one memory per id
        head = (self._state.applied + 1, tenant.owner_id, tenant.organization_id, tenant.workspace_id,
                tenant.project_id, answer)
        return head if claim is None else (*head, claim.key, claim.fingerprint)

    def _applied(self, tenant: Tenant, row: tuple[Any, ...], memory: Memory | None,
                 claim: IdempotencyClaim | None) -> None:
        """Fold a committed row of this connection's (``tenant``'s) into memory."""
        numbers: tuple[object, object] = (None, None) if memory is None else memory[10:12]  # importance, confidence
        if memory is not None and (type(numbers[0]) is int or type(numbers[1]) is int):  # the decoders refuse bools
            # The answer showed the number as sent (``1``); memory holds what layout 1's REAL column gave back.
            memory = memory._replace(importance=real(memory.importance), confidence=real(memory.confidence))
        state = self._state
        try:
            with state.lock:
                state.apply(row[0], tenant, memory,
                            None if claim is None else (claim.key, Replay(claim.fingerprint, row[5])))
        except BaseException:
            # Committed but not in memory: this connection's own commit never moves its
            # data_version, so make its next statement read the tail again.
            self._local.mine.seen = None
            raise

    def _replay(self, memories: TenantMemories, claim: IdempotencyClaim) -> str | None:
        found = memories.replays.get(claim.key)
        if found is None:
            return None
        if found.fingerprint != claim.fingerprint:
            raise RequestError.conflict("Idempotency key was already used with a different request")
        return found.answer

    # -- reads ------------------------------------------------------------------------------
    def _reading(self) -> None:
        with self._guard():
            self._fresh(self._conn())

    def visible(self, tenant: Tenant, filters: ReadFilter, now_ms: int) -> list[Memory]:
        self._reading()
        with self._state.lock:
            return [m for m in self._state.tenant(tenant).memories.values() if filters.admits(m, now_ms)]

    def ranked(self, tenant: Tenant, filters: ReadFilter, now_ms: int, query: str, prefer_working: bool,
               consume: Callable[[Candidates], _T]) -> _T:
        """``consume(rank(visible(...), query, prefer_working))``, from the recall index when only
        the scope is filtered on; ``consume`` runs under the memory's lock."""
        self._reading()
        state = self._state
        with state.lock:
            memories = state.tenant(tenant)
            if replace(filters, scope=None) != _LIVE_ONLY:
                exact = filters.path is not None and not filters.path.endswith(("%", "*"))
                pool = memories.at_path(str(filters.path)) if exact else memories.memories.values()
                return consume(rank([m for m in pool if filters.admits(m, now_ms)], query, prefer_working))
            if memories.recall is None:
                memories.recall = RecallIndex()
            partition = memories.recall.partition(memories.memories, filters.scope)
            return consume(Ranking(View(partition, now_ms), query, prefer_working))

    def get(self, tenant: Tenant, memory_id: str, now_ms: int) -> Memory | None:
        self._reading()
        with self._state.lock:
            found = self._state.tenant(tenant).memories.get(memory_id)
        return found if found is not None and _LIVE_ONLY.admits(found, now_ms) else None

    def count(self, tenant: Tenant) -> int:
        """How many memories the tenant has, expired included (tests and the simulator's checks)."""
        self._reading()
        with self._state.lock:
            return len(self._state.tenant(tenant).memories)

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
