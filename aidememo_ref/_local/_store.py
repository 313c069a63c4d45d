"""The embedded SQLite store of the local flow: thin, one transaction per command.

It owns the schema and the CAS write; it decides nothing (``_rules`` does). A command opens one
transaction (``BEGIN IMMEDIATE`` when it writes), loads, asks the rules, writes and commits, so
no other writer slips between its read and its write. ``write_handoff`` still checks the loaded
``updated_at`` in its ``WHERE`` clause, so a writer that loaded in an earlier transaction (a
runner, another process) gets ``transaction_conflict`` instead of a lost update.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from ._errors import LocalError, LocalErrorCode
from ._records import AgentProfile, Assignment, Fact, FactType, Session, Status
from ._rules import next_updated_at

__all__ = ["LocalStore"]

_SCHEMA_VERSION = 1
_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, topic TEXT NOT NULL, source_id TEXT,
    created_by TEXT, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS facts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, fact_id TEXT NOT NULL UNIQUE,
    fact_type TEXT NOT NULL, content TEXT NOT NULL, entities TEXT NOT NULL,
    source_id TEXT, actor_id TEXT, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS fact_entities (
    entity TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY (entity, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS handoffs (
    handoff_id TEXT PRIMARY KEY, from_actor TEXT NOT NULL, to_actor TEXT NOT NULL,
    source_id TEXT, status TEXT NOT NULL, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS handoffs_inbox ON handoffs (to_actor, created_at);
CREATE INDEX IF NOT EXISTS handoffs_outbox ON handoffs (from_actor, created_at);
CREATE TABLE IF NOT EXISTS agents (alias TEXT PRIMARY KEY, profile TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


def _fact(row: tuple[str, str, str, str, str | None, str | None, int]) -> Fact:
    fact_id, fact_type, content, entities, source_id, actor_id, created_at = row
    return Fact(
        fact_id=fact_id,
        fact_type=FactType(fact_type),
        content=content,
        entities=tuple(json.loads(entities)),
        source_id=source_id,
        actor_id=actor_id,
        created_at=created_at,
    )


_FACT_COLUMNS = "fact_id, fact_type, content, entities, source_id, actor_id, created_at"


class LocalStore:
    """One connection to one store file."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000) -> None:
        try:
            self._db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
            if self._db.execute("PRAGMA user_version").fetchone()[0] != _SCHEMA_VERSION:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.executescript(_SCHEMA)
                self._db.execute(f"PRAGMA user_version={_SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            raise LocalError(LocalErrorCode.STORAGE_FAILURE, f"{path}: {exc}") from exc
        self.path = path

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[LocalStore]:
        """One transaction; ``write`` takes the write lock up front so reads stay consistent."""
        try:
            self._db.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        except sqlite3.Error as exc:
            raise LocalError(LocalErrorCode.STORAGE_FAILURE, f"{self.path}: {exc}") from exc
        try:
            yield self
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        try:
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise LocalError(LocalErrorCode.STORAGE_FAILURE, f"{self.path}: {exc}") from exc

    # sessions

    def insert_session(self, session: Session) -> None:
        self._db.execute(
            "INSERT INTO sessions VALUES (?, ?, ?, ?, ?)",
            (session.session_id, session.topic, session.source_id, session.created_by, session.created_at),
        )

    def get_session(self, session_id: str) -> Session | None:
        row = self._db.execute(
            "SELECT session_id, topic, source_id, created_by, created_at FROM sessions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            return None
        return Session(session_id=row[0], topic=row[1], source_id=row[2], created_by=row[3], created_at=row[4])

    # facts

    def insert_fact(self, fact: Fact) -> None:
        cursor = self._db.execute(
            f"INSERT INTO facts ({_FACT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                fact.fact_id,
                str(fact.fact_type),
                fact.content,
                json.dumps(list(fact.entities)),
                fact.source_id,
                fact.actor_id,
                fact.created_at,
            ),
        )
        self._db.executemany(
            "INSERT OR IGNORE INTO fact_entities VALUES (?, ?)",
            [(entity, cursor.lastrowid) for entity in fact.entities],
        )

    def get_fact(self, fact_id: str) -> Fact | None:
        row = self._db.execute(
            f"SELECT {_FACT_COLUMNS} FROM facts WHERE fact_id = ?", (fact_id.upper(),)
        ).fetchone()
        return None if row is None else _fact(row)

    def session_facts(
        self, session_id: str, source_id: str | None, limit: int
    ) -> tuple[list[Fact], int]:
        """The latest ``limit`` facts attached to the session (oldest first) and their total.

        With a source, only that source's facts count: a packet never leaks a neighbour scope.
        """
        scope = "" if source_id is None else " AND f.source_id = ?"
        params: tuple[object, ...] = (session_id,) if source_id is None else (session_id, source_id)
        base = f"FROM fact_entities e JOIN facts f ON f.seq = e.seq WHERE e.entity = ?{scope}"
        total = self._db.execute(f"SELECT count(*) {base}", params).fetchone()[0]
        rows = self._db.execute(
            f"SELECT f.{_FACT_COLUMNS.replace(', ', ', f.')} {base} ORDER BY f.seq DESC LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_fact(row) for row in reversed(rows)], total

    # handoffs

    def insert_handoff(self, record: Assignment) -> None:
        self._db.execute(
            "INSERT INTO handoffs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.handoff_id,
                record.from_actor,
                record.to_actor,
                record.source_id,
                str(record.status),
                record.created_at,
                record.created_at,
                json.dumps(record.to_json()),
            ),
        )

    def load_handoff(self, handoff_id: str) -> tuple[Assignment, int]:
        """The record and its CAS token (the row's ``updated_at``)."""
        row = self._db.execute(
            "SELECT record, updated_at FROM handoffs WHERE handoff_id = ?", (handoff_id,)
        ).fetchone()
        if row is None:
            raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, handoff_id)
        return Assignment.from_json(json.loads(row[0])), row[1]

    def write_handoff(self, record: Assignment, expected_updated_at: int, now_ms: int) -> int:
        """Persist a transition only if nobody wrote since ``expected_updated_at``."""
        updated_at = next_updated_at(expected_updated_at, now_ms)
        cursor = self._db.execute(
            "UPDATE handoffs SET status = ?, updated_at = ?, record = ?"
            " WHERE handoff_id = ? AND updated_at = ?",
            (str(record.status), updated_at, json.dumps(record.to_json()), record.handoff_id, expected_updated_at),
        )
        if cursor.rowcount != 1:
            raise LocalError(LocalErrorCode.TRANSACTION_CONFLICT)
        return updated_at

    def mailbox(
        self,
        *,
        column: str,
        actor: str | None,
        source_id: str | None,
        include_completed: bool,
        limit: int | None,
        oldest_first: bool = False,
    ) -> list[Assignment]:
        """Assignments by ``to_actor`` or ``from_actor`` (``column``), newest first by default."""
        if column not in ("to_actor", "from_actor"):
            raise ValueError(column)
        where: list[str] = []
        params: list[object] = []
        if actor is not None:
            where.append(f"{column} = ?")
            params.append(actor)
        if source_id is not None:
            where.append("source_id = ?")
            params.append(source_id)
        if not include_completed:
            where.append("status != ?")
            params.append(str(Status.COMPLETED))
        order = "ASC" if oldest_first else "DESC"
        sql = "SELECT record FROM handoffs"
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        sql += f" ORDER BY created_at {order}, handoff_id {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [Assignment.from_json(json.loads(row[0])) for row in self._db.execute(sql, params)]

    def all_handoffs(self, *, include_completed: bool) -> list[Assignment]:
        sql = "SELECT record FROM handoffs" + ("" if include_completed else " WHERE status != 'completed'")
        return [Assignment.from_json(json.loads(row[0])) for row in self._db.execute(sql)]

    # agent profiles

    def put_agent(self, profile: AgentProfile) -> bool:
        """Insert or replace; returns whether a profile was replaced."""
        replaced = self.get_agent(profile.alias) is not None
        self._db.execute(
            "INSERT OR REPLACE INTO agents VALUES (?, ?)",
            (profile.alias, json.dumps(profile.to_json())),
        )
        return replaced

    def get_agent(self, alias: str) -> AgentProfile | None:
        row = self._db.execute("SELECT profile FROM agents WHERE alias = ?", (alias,)).fetchone()
        return None if row is None else AgentProfile.from_json(json.loads(row[0]))

    def list_agents(self) -> list[AgentProfile]:
        rows = self._db.execute("SELECT profile FROM agents ORDER BY alias").fetchall()
        return [AgentProfile.from_json(json.loads(row[0])) for row in rows]

    def remove_agent(self, alias: str) -> bool:
        return self._db.execute("DELETE FROM agents WHERE alias = ?", (alias,)).rowcount == 1

    # settings

    def settings(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM settings").fetchall())

    def set_setting(self, key: str, value: str | None) -> None:
        if value is None:
            self._db.execute("DELETE FROM settings WHERE key = ?", (key,))
        else:
            self._db.execute("INSERT OR REPLACE INTO settings VALUES (?, ?)", (key, value))
