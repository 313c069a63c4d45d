"""The exact-read replica of ``crates/aidememo-client``: one SQLite file per project and actor.

Same schema (``user_version`` 2: ``replica_meta``, ``replica_resources``) and rules as upstream,
so either tool reads the other's file. An empty replica starts from one atomic snapshot; every
later pull applies revision-pinned change bodies, one transaction per batch, advancing the durable
cursor only with them, so the cache never shows a resource newer than its cursor and an invalid
or interrupted pull leaves the previous state readable. The file records tenant, project, epoch
and the actor whose visibility it holds: another actor, another project or a replaced history
(a new epoch) is refused until ``reset``. ``status`` and ``resource`` never touch the network.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._changes import Batch, ReplicaError, Resource, Scope, Snapshot, decode_batch, decode_snapshot, protocol
from ._errors import RemoteHTTPError, RemoteUnavailable
from ._http import Remote

__all__ = ["ReplicaError", "ReplicaStore", "Scope", "pull", "replica_path", "MAX_CHANGE_LIMIT"]

SCHEMA_VERSION = 2
MAX_CHANGE_LIMIT = 1_000
MAX_PULL_BATCHES = 10_000

_SCHEMA = """
CREATE TABLE replica_meta (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    tenant_id TEXT NOT NULL,
    project_id TEXT NOT NULL,
    project_epoch TEXT NOT NULL,
    actor_id TEXT,
    after_seq INTEGER NOT NULL CHECK (after_seq >= 0),
    updated_at_ms INTEGER NOT NULL
) STRICT;
CREATE TABLE replica_resources (
    resource_kind TEXT NOT NULL,
    resource_id TEXT NOT NULL,
    revision INTEGER NOT NULL CHECK (revision > 0),
    deleted INTEGER NOT NULL CHECK (deleted IN (0, 1)),
    body_json BLOB,
    observed_after_seq INTEGER NOT NULL CHECK (observed_after_seq >= 0),
    CHECK ((deleted = 0 AND body_json IS NOT NULL)
        OR (deleted = 1 AND body_json IS NULL)),
    PRIMARY KEY (resource_kind, resource_id)
) STRICT;
"""


def _scope_mismatch(cached: Scope, remote: Scope) -> ReplicaError:
    return ReplicaError.invalid(f"replica scope mismatch: cached {cached.debug()}, remote {remote.debug()};"
                                " reset explicitly before reusing this file")


def _epoch_mismatch(cached: object, remote: object) -> ReplicaError:
    return ReplicaError.invalid(f"replica epoch mismatch: cached {cached}, remote {remote}; reset explicitly before"
                                " pulling")


def _storage(operation: str, exc: Exception) -> ReplicaError:
    return ReplicaError.failure(f"replica storage operation '{operation}' failed: {exc}")


@dataclass(frozen=True, slots=True)
class _Meta:
    scope: Scope
    project_epoch: str
    actor_id: str | None
    after_seq: int
    updated_at_ms: int


def replica_path(store_path: str, explicit: str | None) -> str:
    """``--replica-path``, else ``<store>.replica.sqlite`` beside the embedded store."""
    if explicit is not None:
        return explicit
    return os.path.join(os.path.dirname(store_path), os.path.basename(store_path) + ".replica.sqlite")


# -- the file ---------------------------------------------------------------------------------------
class ReplicaStore:
    """One replica file; every change to it is one SQLite transaction."""

    def __init__(self, path: str, clock: Callable[[], int]) -> None:
        self.path = path
        self._clock = clock
        parent = os.path.dirname(path)
        if parent:
            try:
                os.makedirs(parent, exist_ok=True)
            except OSError as exc:
                raise ReplicaError.failure(f"replica filesystem operation 'create_replica_directory' failed for"
                                           f" {parent}: {exc.strerror}") from exc
        try:
            self._db = sqlite3.connect(path, isolation_level=None, timeout=5.0)
            self._db.execute("PRAGMA foreign_keys = ON")
            self._db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error as exc:
            raise _storage("open", exc) from exc
        self._migrate()

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> ReplicaStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                self._db.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            elif version == 1:
                self._db.executescript("BEGIN IMMEDIATE; ALTER TABLE replica_meta ADD COLUMN actor_id TEXT;"
                                       f" PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        except sqlite3.Error as exc:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise _storage("schema_create", exc) from exc
        if version not in (0, 1, SCHEMA_VERSION):
            raise ReplicaError.failure(f"replica storage operation 'schema_version' failed: replica schema {version}"
                                       f" is not supported by version {SCHEMA_VERSION}")

    def _meta(self) -> _Meta | None:
        try:
            row = self._db.execute("SELECT tenant_id, project_id, project_epoch, actor_id, after_seq, updated_at_ms"
                                   " FROM replica_meta WHERE singleton = 1").fetchone()
        except sqlite3.Error as exc:
            raise _storage("meta_read", exc) from exc
        return None if row is None else _Meta(Scope(row[0], row[1]), row[2], row[3], row[4], row[5])

    def verify(self, identity: Mapping[str, Any]) -> bool:
        """True when the file is empty; refuses another scope, epoch or actor."""
        meta = self._meta()
        if meta is None:
            return True
        remote = Scope(str(identity["tenant_id"]), str(identity["project_id"]))
        if meta.scope != remote:
            raise _scope_mismatch(meta.scope, remote)
        if meta.project_epoch != identity["project_epoch"]:
            raise _epoch_mismatch(meta.project_epoch, identity["project_epoch"])
        if meta.actor_id != identity["actor_id"]:
            cached = "None" if meta.actor_id is None else f'Some(ActorId("{meta.actor_id}"))'
            raise ReplicaError.invalid(f"replica actor mismatch: cached {cached}, remote {identity['actor_id']};"
                                       " reset explicitly before pulling with another actor")
        return False

    def _apply(self, resource: Resource, observed_after_seq: int) -> None:
        current = self._db.execute(
            "SELECT revision, deleted, body_json FROM replica_resources WHERE resource_kind = ? AND resource_id = ?",
            (resource.kind, resource.resource_id)).fetchone()
        body = None if resource.body is None else resource.body.encode("utf-8")
        if current is not None:
            if current[0] > resource.revision:
                return
            if current[0] == resource.revision:
                if current[1] != (body is None) or current[2] != body:
                    raise protocol(f"resource {resource.coordinate()} changed without a revision advance")
                return
        self._db.execute(
            "INSERT INTO replica_resources (resource_kind, resource_id, revision, deleted, body_json,"
            " observed_after_seq) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(resource_kind, resource_id) DO UPDATE SET"
            " revision = excluded.revision, deleted = excluded.deleted, body_json = excluded.body_json,"
            " observed_after_seq = excluded.observed_after_seq",
            (resource.kind, resource.resource_id, resource.revision, int(body is None), body, observed_after_seq))

    def _transaction(self, name: str, work: Callable[[], None]) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                work()
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise _storage(name, exc) from exc

    def apply_snapshot(self, snapshot: Snapshot, identity: Mapping[str, Any]) -> None:
        def work() -> None:
            if self._meta() is not None:
                raise protocol("replica is already initialized; reset explicitly before applying a snapshot")
            self._db.execute(
                "INSERT INTO replica_meta (singleton, tenant_id, project_id, project_epoch, actor_id, after_seq,"
                " updated_at_ms) VALUES (1, ?, ?, ?, ?, ?, ?)",
                (snapshot.scope.tenant_id, snapshot.scope.project_id, snapshot.project_epoch, identity["actor_id"],
                 snapshot.at_seq, self._clock()))
            for resource in snapshot.resources:
                self._apply(resource, snapshot.at_seq)

        self._transaction("snapshot_apply", work)

    def apply_batch(self, batch: Batch) -> None:
        def work() -> None:
            meta = self._meta()
            if meta is None:
                raise protocol("replica must be prepared before applying changes")
            if meta.scope != batch.scope:
                raise _scope_mismatch(meta.scope, batch.scope)
            if meta.project_epoch != batch.epoch:
                raise _epoch_mismatch(meta.project_epoch, batch.epoch)
            if meta.after_seq != batch.after_seq:
                raise ReplicaError.invalid(f"replica cursor mismatch: cached {meta.after_seq}, batch starts at"
                                           f" {batch.after_seq}")
            for seq, resource in batch.entries:
                self._apply(resource, seq)
            self._db.execute("UPDATE replica_meta SET after_seq = ?, updated_at_ms = ? WHERE singleton = 1",
                             (batch.next_after_seq, self._clock()))

        self._transaction("apply", work)

    def cursor(self) -> tuple[str, int] | None:
        meta = self._meta()
        return None if meta is None else (meta.project_epoch, meta.after_seq)

    def resource(self, kind: str, resource_id: str) -> dict[str, Any] | None:
        """The cached resource as upstream's ``replica get`` prints it, or None."""
        meta = self._meta()
        if meta is None:
            return None
        row = self._db.execute("SELECT revision, deleted, body_json FROM replica_resources"
                               " WHERE resource_kind = ? AND resource_id = ?", (kind, resource_id)).fetchone()
        if row is None:
            return None
        state: dict[str, Any] = ({"state": "deleted"} if row[1] else
                                 {"state": "present", "body": json.loads(bytes(row[2]).decode("utf-8"))})
        return {"scope": meta.scope.to_json(), "resource": {"kind": kind, "id": resource_id}, "revision": row[0],
                "state": state}

    def status(self) -> dict[str, Any]:
        meta = self._meta()
        present, deleted = self._db.execute(
            "SELECT COALESCE(SUM(CASE WHEN deleted = 0 THEN 1 ELSE 0 END), 0),"
            " COALESCE(SUM(CASE WHEN deleted = 1 THEN 1 ELSE 0 END), 0) FROM replica_resources").fetchone()
        return {
            "initialized": meta is not None, "scope": None if meta is None else meta.scope.to_json(),
            "project_epoch": None if meta is None else meta.project_epoch,
            "actor_id": None if meta is None else meta.actor_id, "after_seq": 0 if meta is None else meta.after_seq,
            "resource_count": present, "tombstone_count": deleted,
            "updated_at_ms": None if meta is None else meta.updated_at_ms,
        }

    def reset(self) -> None:
        def work() -> None:
            self._db.execute("DELETE FROM replica_resources")
            self._db.execute("DELETE FROM replica_meta")

        self._transaction("reset", work)


def _remote_call(call: Callable[[], Any]) -> Any:
    """Upstream's replica client words its transport failures its own way."""
    try:
        return call()
    except RemoteUnavailable as exc:
        raise ReplicaError.failure(f"remote transport failed: {exc.detail.removeprefix('remote server request failed: ')}"
                                   ) from None
    except RemoteHTTPError:
        raise


def pull(remote: Remote, store: ReplicaStore, limit: int) -> dict[str, Any]:
    """Bootstrap (snapshot) or catch up (materialized changes) to the current head; the report."""
    if not 1 <= limit <= MAX_CHANGE_LIMIT:
        raise protocol(f"change limit must be between 1 and {MAX_CHANGE_LIMIT}")
    identity = _remote_call(remote.identity)
    scope = Scope(str(identity.get("tenant_id")), str(identity.get("project_id")))
    bootstrapped = store.verify(identity)
    if bootstrapped:
        snapshot = decode_snapshot(_remote_call(lambda: remote.get("/snapshot")))
        if snapshot.scope != scope:
            raise _scope_mismatch(scope, snapshot.scope)
        if snapshot.project_epoch != identity["project_epoch"]:
            raise _epoch_mismatch(identity["project_epoch"], snapshot.project_epoch)
        store.apply_snapshot(snapshot, identity)
    batches = changes = 0
    while True:
        if batches >= MAX_PULL_BATCHES:
            raise protocol(f"pull exceeded {MAX_PULL_BATCHES} batches without reaching the current head")
        cursor = store.cursor()
        if cursor is None:
            raise protocol("prepared replica omitted its cursor")
        epoch, after_seq = cursor
        batch = decode_batch(_remote_call(lambda: remote.get(
            "/changes/materialized", {"project_epoch": epoch, "after_seq": after_seq, "limit": limit})))
        if batch.scope != scope:
            raise _scope_mismatch(scope, batch.scope)
        store.apply_batch(batch)
        batches += 1
        changes += len(batch.entries)
        if not batch.has_more:
            break
    status = store.status()
    return {"bootstrapped": bootstrapped, "batches": batches, "changes": changes, "after_seq": status["after_seq"],
            "identity": identity, "resource_count": status["resource_count"],
            "tombstone_count": status["tombstone_count"]}
