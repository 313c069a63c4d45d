"""The embedded SQLite store of the local flow: thin, one transaction per command.

It owns the schema, the CAS write and the mapping of SQLite failures (every ``sqlite3.Error``
becomes one ``storage_failure`` here, nowhere else); it decides nothing (``_rules`` does). A
command opens one transaction (``BEGIN IMMEDIATE`` when it writes), loads, asks the rules,
writes and commits, so no other writer slips between its read and its write.
``write_handoff`` still checks the loaded ``updated_at`` in its ``WHERE`` clause, so a writer
that loaded in an earlier transaction (a runner, another process) gets
``transaction_conflict`` instead of a lost update.

Visibility is upstream's: an entity (a session, say) is visible in source ``S`` when at least
one fact of ``S`` is attached to it; without a source everything is visible. Facts are
deduplicated as upstream's are: the same content in the same source is the same fact (a
repeated add returns the first id and merges the entities).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ._errors import LocalError, LocalErrorCode
from ._records import AgentProfile, Assignment, Entity, Fact, FactType, Status
from ._rules import next_updated_at

__all__ = ["LocalStore", "NewFact"]

_SCHEMA_VERSION = 2
_SCHEMA = """
CREATE TABLE entities (
    entity_id TEXT PRIMARY KEY, name TEXT NOT NULL, name_lower TEXT NOT NULL UNIQUE,
    entity_type TEXT NOT NULL, source_page TEXT, created_at INTEGER NOT NULL);
CREATE TABLE facts (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, fact_id TEXT NOT NULL UNIQUE, fact_type TEXT NOT NULL,
    content TEXT NOT NULL, content_hash TEXT NOT NULL, tags TEXT NOT NULL, source TEXT,
    source_id TEXT, actor_id TEXT, source_confidence REAL NOT NULL, relevance_score REAL NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, observed_at INTEGER);
CREATE INDEX facts_dedup ON facts (content_hash, source_id);
CREATE INDEX facts_source ON facts (source_id, seq);
CREATE TABLE fact_entities (
    seq INTEGER NOT NULL, position INTEGER NOT NULL, entity_id TEXT NOT NULL,
    PRIMARY KEY (seq, position)) WITHOUT ROWID;
CREATE INDEX fact_entities_by_entity ON fact_entities (entity_id, seq);
CREATE TABLE handoffs (
    handoff_id TEXT PRIMARY KEY, from_actor TEXT NOT NULL, to_actor TEXT NOT NULL,
    source_id TEXT, status TEXT NOT NULL, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, record TEXT NOT NULL);
CREATE INDEX handoffs_inbox ON handoffs (to_actor, created_at);
CREATE INDEX handoffs_outbox ON handoffs (from_actor, created_at);
CREATE TABLE agents (alias TEXT PRIMARY KEY, profile TEXT NOT NULL);
CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_FACT_COLUMNS = (
    "f.seq, f.fact_id, f.fact_type, f.content, f.tags, f.source, f.source_id, f.actor_id,"
    " f.source_confidence, f.relevance_score, f.created_at, f.updated_at, f.observed_at"
)


class NewFact:
    """What a write supplies; the store fills in the record's bookkeeping fields."""

    __slots__ = ("fact_id", "content", "fact_type", "entity_ids", "tags", "source", "source_id",
                 "actor_id", "confidence", "observed_at")

    def __init__(self, *, fact_id: str, content: str, fact_type: FactType, entity_ids: Sequence[str] = (),
                 tags: Sequence[str] = (), source: str | None = None, source_id: str | None = None,
                 actor_id: str | None = None, confidence: float | None = None,
                 observed_at: int | None = None) -> None:
        self.fact_id = fact_id
        self.content = content
        self.fact_type = fact_type
        self.entity_ids = tuple(entity_ids)
        self.tags = tuple(tags)
        self.source = source
        self.source_id = source_id
        self.actor_id = actor_id
        self.confidence = confidence
        self.observed_at = observed_at


def _content_hash(content: str) -> str:
    import hashlib  # only writes need it; reads start faster without

    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class LocalStore:
    """One connection to one store file."""

    def __init__(self, path: str, *, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc
        version = self._one("PRAGMA user_version")[0]
        if version != _SCHEMA_VERSION:
            self._create(version)

    def _create(self, version: int) -> None:
        tables = self._one("SELECT count(*) FROM sqlite_master WHERE type = 'table'")[0]
        if version != 0 or tables:
            # Someone else's file (upstream's wiki.sqlite, an older kit store): never write into it.
            raise LocalError(
                LocalErrorCode.INVALID_INPUT,
                f"{self.path} is not an aidememo-ref local store (schema {version}, {tables} tables); "
                "pass --store with a new file",
            )
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version={_SCHEMA_VERSION}; COMMIT;")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            # Two first commands racing to create the schema: the loser sees the winner's.
            if self._one("PRAGMA user_version")[0] != _SCHEMA_VERSION:
                raise self._failure(exc) from exc

    def _failure(self, exc: sqlite3.Error) -> LocalError:
        return LocalError(LocalErrorCode.STORAGE_FAILURE, f"{self.path}: {exc}")

    def _run(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        try:
            return self._db.execute(sql, params)
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc

    def _one(self, sql: str, params: Sequence[object] = ()) -> Any:
        try:
            return self._db.execute(sql, params).fetchone()
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc

    def _all(self, sql: str, params: Sequence[object] = ()) -> list[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise self._failure(exc) from exc

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self, *, write: bool) -> Iterator[LocalStore]:
        """One transaction; ``write`` takes the write lock up front so reads stay consistent."""
        self._run("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield self
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._run("COMMIT")

    # entities

    def entity(self, name: str) -> Entity | None:
        row = self._one(
            "SELECT entity_id, name, entity_type, source_page, created_at FROM entities WHERE name_lower = ?",
            (name.lower(),),
        )
        return None if row is None else Entity(
            entity_id=row[0], name=row[1], entity_type=row[2], source_page=row[3], created_at=row[4]
        )

    def add_entity(self, entity: Entity) -> None:
        self._run(
            "INSERT INTO entities VALUES (?, ?, ?, ?, ?, ?)",
            (entity.entity_id, entity.name, entity.name.lower(), entity.entity_type, entity.source_page,
             entity.created_at),
        )

    def visible(self, entity_id: str, source_id: str | None) -> bool:
        """Upstream's rule: visible in a source when a fact of that source is attached to it."""
        if source_id is None:
            return True
        row = self._one(
            "SELECT 1 FROM fact_entities e JOIN facts f ON f.seq = e.seq"
            " WHERE e.entity_id = ? AND f.source_id = ? LIMIT 1",
            (entity_id, source_id),
        )
        return row is not None

    def entities_of_type(self, entity_type: str) -> list[Entity]:
        rows = self._all(
            "SELECT entity_id, name, entity_type, source_page, created_at FROM entities"
            " WHERE entity_type = ? ORDER BY created_at DESC, entity_id DESC",
            (entity_type,),
        )
        return [Entity(entity_id=r[0], name=r[1], entity_type=r[2], source_page=r[3], created_at=r[4]) for r in rows]

    def entity_fact_count(self, entity_id: str, source_id: str | None) -> int:
        scope, params = ("", (entity_id,)) if source_id is None else (" AND f.source_id = ?", (entity_id, source_id))
        row = self._one(
            f"SELECT count(*) FROM fact_entities e JOIN facts f ON f.seq = e.seq WHERE e.entity_id = ?{scope}",
            params,
        )
        return int(row[0])

    # facts

    def add_fact(self, fact: NewFact, now_ms: int) -> tuple[str, bool]:
        """Insert, or merge into the fact with the same content in the same source.

        Returns (the fact id, whether a new fact was stored).
        """
        digest = _content_hash(fact.content)
        row = self._one(
            "SELECT seq, fact_id FROM facts WHERE content_hash = ? AND source_id IS ? ORDER BY seq LIMIT 1",
            (digest, fact.source_id),
        )
        if row is not None:
            self._attach(row[0], fact.entity_ids)
            return row[1], False
        cursor = self._run(
            "INSERT INTO facts (fact_id, fact_type, content, content_hash, tags, source, source_id, actor_id,"
            " source_confidence, relevance_score, created_at, updated_at, observed_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0.5, ?, ?, ?)",
            (fact.fact_id, str(fact.fact_type), fact.content, digest, json.dumps(list(fact.tags)), fact.source,
             fact.source_id, fact.actor_id, 0.5 if fact.confidence is None else fact.confidence, now_ms, now_ms,
             fact.observed_at),
        )
        self._attach(int(cursor.lastrowid or 0), fact.entity_ids)
        return fact.fact_id, True

    def _attach(self, seq: int, entity_ids: Iterable[str]) -> None:
        present = [row[0] for row in self._all(
            "SELECT entity_id FROM fact_entities WHERE seq = ? ORDER BY position", (seq,)
        )]
        for entity_id in entity_ids:
            if entity_id not in present:
                self._run("INSERT INTO fact_entities VALUES (?, ?, ?)", (seq, len(present), entity_id))
                present.append(entity_id)

    def _facts(self, where: str, params: Sequence[object], tail: str = "") -> list[Fact]:
        rows = self._all(f"SELECT {_FACT_COLUMNS} FROM facts f {where} {tail}", params)
        if not rows:
            return []
        seqs = [row[0] for row in rows]
        links: dict[int, list[tuple[str, str]]] = {seq: [] for seq in seqs}
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for seq, entity_id, name in self._all(
                "SELECT l.seq, l.entity_id, n.name FROM fact_entities l JOIN entities n ON n.entity_id = l.entity_id"
                f" WHERE l.seq IN ({marks}) ORDER BY l.seq, l.position",
                chunk,
            ):
                links[seq].append((entity_id, name))
        return [
            Fact(
                id=r[1], fact_type=FactType(r[2]), content=r[3], tags=tuple(json.loads(r[4])), source=r[5],
                source_id=r[6], actor_id=r[7], source_confidence=r[8], relevance_score=r[9], created_at=r[10],
                updated_at=r[11], observed_at=r[12], superseded_at=None, superseded_by=None, access_count=0,
                last_accessed_at=r[10], pinned=False,
                entity_ids=tuple(e for e, _ in links[r[0]]), entity_names=tuple(n for _, n in links[r[0]]),
            )
            for r in rows
        ]

    def get_fact(self, fact_id: str) -> Fact | None:
        found = self._facts("WHERE f.fact_id = ?", (fact_id.upper(),))
        return found[0] if found else None

    def entity_facts(self, entity_id: str, source_id: str | None) -> list[Fact]:
        """Facts attached to an entity (in one source, when given), oldest first."""
        scope, params = ("", (entity_id,)) if source_id is None else (" AND f.source_id = ?", (entity_id, source_id))
        return self._facts(
            f"WHERE f.seq IN (SELECT seq FROM fact_entities WHERE entity_id = ?){scope}", params, "ORDER BY f.seq"
        )

    def facts(self, source_id: str | None, *, limit: int | None = None, newest_first: bool = False) -> list[Fact]:
        where, params = ("", ()) if source_id is None else ("WHERE f.source_id = ?", (source_id,))
        order = "DESC" if newest_first else "ASC"
        tail = f"ORDER BY f.seq {order}" + ("" if limit is None else f" LIMIT {int(limit)}")
        return self._facts(where, params, tail)

    # handoffs

    def insert_handoff(self, record: Assignment) -> None:
        self._run(
            "INSERT INTO handoffs VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (record.handoff_id, record.from_actor, record.to_actor, record.source_id, str(record.status),
             record.created_at, record.created_at, json.dumps(record.to_json())),
        )

    def load_handoff(self, handoff_id: str) -> tuple[Assignment, int] | None:
        """The record and its CAS token (the row's ``updated_at``), or ``None``."""
        row = self._one("SELECT record, updated_at FROM handoffs WHERE handoff_id = ?", (handoff_id,))
        return None if row is None else (Assignment.from_json(json.loads(row[0])), row[1])

    def write_handoff(self, record: Assignment, expected_updated_at: int, now_ms: int) -> int:
        """Persist a transition only if nobody wrote since ``expected_updated_at``."""
        updated_at = next_updated_at(expected_updated_at, now_ms)
        cursor = self._run(
            "UPDATE handoffs SET status = ?, updated_at = ?, record = ? WHERE handoff_id = ? AND updated_at = ?",
            (str(record.status), updated_at, json.dumps(record.to_json()), record.handoff_id, expected_updated_at),
        )
        if cursor.rowcount != 1:
            raise LocalError(LocalErrorCode.TRANSACTION_CONFLICT)
        return updated_at

    def mailbox(self, *, column: str, actor: str | None, source_id: str | None, include_completed: bool,
                limit: int | None) -> list[Assignment]:
        """Assignments by ``to_actor`` or ``from_actor`` (``column``), newest first."""
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
        sql = "SELECT record FROM handoffs"
        sql += f" WHERE {' AND '.join(where)}" if where else ""
        sql += " ORDER BY created_at DESC, handoff_id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [Assignment.from_json(json.loads(row[0])) for row in self._all(sql, params)]

    # agent profiles

    def put_agent(self, profile: AgentProfile) -> bool:
        """Insert or replace; returns whether a profile was replaced."""
        replaced = self.get_agent(profile.alias) is not None
        self._run("INSERT OR REPLACE INTO agents VALUES (?, ?)", (profile.alias, json.dumps(profile.to_json())))
        return replaced

    def get_agent(self, alias: str) -> AgentProfile | None:
        row = self._one("SELECT profile FROM agents WHERE alias = ?", (alias,))
        return None if row is None else AgentProfile.from_json(alias, json.loads(row[0]))

    def list_agents(self) -> list[AgentProfile]:
        rows = self._all("SELECT alias, profile FROM agents ORDER BY alias")
        return [AgentProfile.from_json(alias, json.loads(profile)) for alias, profile in rows]

    def remove_agent(self, alias: str) -> bool:
        return self._run("DELETE FROM agents WHERE alias = ?", (alias,)).rowcount == 1

    # settings

    def settings(self) -> dict[str, str]:
        return dict(self._all("SELECT key, value FROM settings"))

    def set_setting(self, key: str, value: str | None) -> None:
        if value is None:
            self._run("DELETE FROM settings WHERE key = ?", (key,))
        else:
            self._run("INSERT OR REPLACE INTO settings VALUES (?, ?)", (key, value))

