"""What a replica is fed, decoded and checked: snapshots and revision-pinned change batches.

The checks are ``crates/aidememo-domain``'s (``ProjectSnapshot::new``,
``MaterializedChangeBatch::projected``), with their messages: one project scope, no duplicate
coordinate, strictly increasing sequences after the cursor, a body exactly at each change's
revision and matching its operation, a next cursor in the same epoch that never falls behind
what it returned. Bodies are kept as canonical JSON, as upstream stores them. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidememo_wire.canonical import canonical_json
from aidememo_wire.ids import id_problem, name_problem
from aidememo_cli._local._errors import LocalErrorCode

from ._errors import RemoteError

__all__ = ["Batch", "ReplicaError", "Resource", "Scope", "Snapshot", "decode_batch", "decode_snapshot", "protocol"]


class ReplicaError(RemoteError):
    """A replica refusal, in ``crates/aidememo-client``'s words (``ClientError`` Display)."""

    @classmethod
    def invalid(cls, detail: str) -> ReplicaError:
        return cls(LocalErrorCode.INVALID_INPUT, detail)

    @classmethod
    def failure(cls, detail: str) -> ReplicaError:
        return cls(LocalErrorCode.INTERNAL, detail)


def protocol(detail: str) -> ReplicaError:
    return ReplicaError.invalid(f"invalid replica protocol response: {detail}")


def _batch(detail: str) -> ReplicaError:
    return ReplicaError.invalid(f"invalid change batch: {detail}")


@dataclass(frozen=True, slots=True)
class Scope:
    tenant_id: str
    project_id: str

    def debug(self) -> str:  # Rust's Debug of ProjectScope, as upstream's messages print it
        return f'ProjectScope {{ tenant_id: TenantId("{self.tenant_id}"), project_id: ProjectId("{self.project_id}") }}'

    def to_json(self) -> dict[str, str]:
        return {"tenant_id": self.tenant_id, "project_id": self.project_id}


@dataclass(frozen=True, slots=True)
class Resource:
    kind: str
    resource_id: str
    revision: int
    body: str | None  # canonical JSON; None for a tombstone

    def coordinate(self) -> str:
        return f'ResourceRef {{ kind: ResourceKind("{self.kind}"), id: ResourceId("{self.resource_id}") }}'


def _obj(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise protocol(f"{what} is not an object")
    return value


def _str(value: Mapping[str, Any], key: str, what: str) -> str:
    found = value.get(key)
    if not isinstance(found, str) or id_problem(found) is not None:
        raise protocol(f"{what}.{key} is not a valid identifier")
    return found


def _uint(value: Mapping[str, Any], key: str, what: str, *, positive: bool = False) -> int:
    found = value.get(key)
    if not isinstance(found, int) or isinstance(found, bool) or found < (1 if positive else 0):
        raise protocol(f"{what}.{key} is not a{' positive' if positive else 'n unsigned'} integer")
    return found


def _scope(value: object, what: str) -> Scope:
    data = _obj(value, what)
    return Scope(_str(data, "tenant_id", what), _str(data, "project_id", what))


def _resource(value: object) -> tuple[Scope, Resource]:
    data = _obj(value, "resource")
    coordinate = _obj(data.get("resource"), "resource.resource")
    kind = coordinate.get("kind")
    if not isinstance(kind, str) or name_problem("resource kind", kind) is not None:
        raise protocol("resource.kind is not a valid resource kind")
    state = _obj(data.get("state"), "resource.state")
    if state.get("state") == "present" and "body" in state:
        body: str | None = canonical_json(state["body"])
    elif state.get("state") == "deleted":
        body = None
    else:
        raise protocol("resource.state must be present with a body, or deleted")
    return _scope(data.get("scope"), "resource.scope"), Resource(
        kind, _str(coordinate, "id", "resource.resource"), _uint(data, "revision", "resource", positive=True), body)


@dataclass(frozen=True, slots=True)
class Snapshot:
    scope: Scope
    project_epoch: str
    at_seq: int
    resources: list[Resource]


def decode_snapshot(value: object) -> Snapshot:
    data = _obj(value, "snapshot")
    scope = _scope(data.get("scope"), "snapshot.scope")
    resources: list[Resource] = []
    seen: set[tuple[str, str]] = set()
    raw = data.get("resources")
    if not isinstance(raw, list):
        raise protocol("snapshot.resources is not a list")
    for item in raw:
        resource_scope, resource = _resource(item)
        if resource_scope != scope:
            raise _batch("snapshot resource has the wrong project scope")
        if (resource.kind, resource.resource_id) in seen:
            raise _batch("snapshot contains a duplicate resource coordinate")
        seen.add((resource.kind, resource.resource_id))
        resources.append(resource)
    return Snapshot(scope, _str(data, "project_epoch", "snapshot"), _uint(data, "at_seq", "snapshot"), resources)


@dataclass(frozen=True, slots=True)
class Batch:
    scope: Scope
    epoch: str
    after_seq: int
    entries: list[tuple[int, Resource]]  # (change seq, the resource at that revision)
    next_after_seq: int
    has_more: bool


def decode_batch(value: object) -> Batch:
    """A materialized change batch, checked as ``MaterializedChangeBatch::projected`` checks it."""
    data = _obj(value, "batch")
    scope = _scope(data.get("scope"), "batch.scope")
    cursor, following = _obj(data.get("cursor"), "batch.cursor"), _obj(data.get("next_cursor"), "batch.next_cursor")
    epoch, after_seq = _str(cursor, "project_epoch", "cursor"), _uint(cursor, "after_seq", "cursor")
    next_epoch, next_seq = _str(following, "project_epoch", "next_cursor"), _uint(following, "after_seq", "next_cursor")
    has_more = data.get("has_more")
    if not isinstance(has_more, bool):
        raise protocol("batch.has_more is not a boolean")
    raw = data.get("entries")
    if not isinstance(raw, list):
        raise protocol("batch.entries is not a list")
    entries: list[tuple[int, Resource]] = []
    previous = after_seq
    for item in raw:
        entry = _obj(item, "entry")
        change = _obj(entry.get("change"), "entry.change")
        resource_scope, resource = _resource(entry.get("resource"))
        seq = _uint(change, "seq", "change")
        if seq == 0:
            raise _batch("change entry sequence must be greater than zero")
        if resource_scope != scope or Scope(_str(change, "tenant_id", "change"), _str(change, "project_id", "change")) != scope:
            raise _batch("materialized change has the wrong project scope")
        coordinate = _obj(change.get("resource"), "change.resource")
        if (coordinate.get("kind"), coordinate.get("id")) != (resource.kind, resource.resource_id):
            raise _batch("materialized resource coordinate does not match the change")
        if _uint(change, "revision", "change", positive=True) != resource.revision:
            raise _batch("materialized resource revision does not match the change")
        if (change.get("operation"), resource.body is None) not in (("upsert", False), ("delete", True)):
            raise _batch("materialized resource state does not match the change operation")
        if _str(change, "project_epoch", "change") != epoch:
            raise _batch("entry epoch does not match cursor epoch")
        if seq <= previous:
            raise _batch("entry sequences must be strictly increasing after the cursor")
        previous = seq
        entries.append((seq, resource))
    if next_epoch != epoch:
        raise _batch("projected change cursor changed history epoch")
    if next_seq < previous:
        raise _batch("projected change cursor precedes a returned entry")
    if has_more and next_seq <= after_seq:
        raise _batch("a projected batch with more entries must advance its cursor")
    return Batch(scope, epoch, after_seq, entries, next_seq, has_more)
