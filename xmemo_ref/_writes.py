"""Capture rules: what each write route does with what is already stored. Pure.

Theory of operation. A write arrives as one of three typed requests, and ``decide`` turns it,
plus what the store found for it inside the open write transaction, into one ``WriteDecision``:

===================  =========================================  ==============================
request              already stored                              decision
===================  =========================================  ==============================
``Remember``         same ``semantic_key``, same content         unchanged (MAF's no-op)
``Remember``         same ``semantic_key``, other content        updated: content, version + 1
``Remember``         ``dedupe`` and an identical live memory     unchanged
``Remember``         ``memory_id`` of a memory of this tenant    updated (MCP ``remember``)
``Remember``         nothing                                     created
``UpdateState``      the slot (bucket, scope, ``state_key``)     updated: version + 1
``UpdateState``      nothing                                     created, version 1
``RecordEvent``      anything                                    created (appended, no dedupe)
===================  =========================================  ==============================

Idempotency keys are not decided here: the store answers a replay from its stored answer
before ``decide`` runs, in the same transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, NamedTuple, Protocol

from refkit.records import distinct

from ._errors import RequestError
from ._records import Caller, Kind, Memory, MemoryType

__all__ = [
    "Remember",
    "UpdateState",
    "RecordEvent",
    "Write",
    "Outcome",
    "WriteDecision",
    "Existing",
    "decide",
    "compose_state",
    "DEFAULT_STATUS",
]

DEFAULT_STATUS: Final = "active"
_tuple_new: Final = tuple.__new__  # see _new and xmemo_ref/_hot.py


@distinct
class Remember(NamedTuple):
    """``POST /v1/remember`` (and MCP ``remember``), decoded: a tuple record, one per capture."""

    content: str
    path: str
    bucket: str
    scope: str | None
    team_id: str | None
    memory_type: MemoryType
    status: str
    importance: float | None
    confidence: float | None
    semantic_key: str | None
    dedupe: bool
    source: str | None
    metadata_json: str
    expires_at_ms: int | None
    memory_id: str | None = None  # MCP remember: update this memory instead of writing a new one


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateState:
    state_key: str
    content: str  # already composed (see ``compose_state``)
    bucket: str
    scope: str | None
    team_id: str | None
    ttl_seconds: int  # 0: no expiry
    source: str | None
    metadata_json: str


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordEvent:
    content: str
    event_type: str
    occurred_at_ms: int | None
    session_id: str | None
    path: str
    bucket: str
    scope: str | None
    team_id: str | None
    importance: float | None
    confidence: float | None
    source: str | None
    metadata_json: str


Write = Remember | UpdateState | RecordEvent


class Outcome(StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@distinct
class WriteDecision(NamedTuple):
    outcome: Outcome
    memory: Memory  # the row as it is after the write


class Existing(Protocol):
    """What the store can look up inside the write transaction, all within the caller's tenant."""

    def by_semantic_key(self, scope: str | None, semantic_key: str) -> Memory | None: ...

    def duplicate(self, write: Remember) -> Memory | None: ...

    def slot(self, bucket: str, scope: str | None, state_key: str) -> Memory | None: ...

    def by_id(self, memory_id: str) -> Memory | None: ...


def compose_state(content: str, current_task: str, next_action: str, blocked_reason: str) -> str:
    """The server-formatted text of a state slot: the content, then one line per set field."""
    lines = [content] if content else []
    lines += [f"{name}: {value}" for name, value in
              (("current_task", current_task), ("next_action", next_action), ("blocked_reason", blocked_reason))
              if value]
    return "\n".join(lines)


def _new(write: Write, caller: Caller, now_ms: int, new_id: str) -> Memory:
    if isinstance(write, Remember):
        # Every capture's record, built positionally in Memory's field order: the one speed trick
        # the layers keep out of _hot (this module is below it; see xmemo_ref/_hot.py). bench/records.py
        # times tuple.__new__ against the keyword call; tests/xmemo/test_rules.py holds it to the latter.
        # Its fields unpacked at once: read by name, each is a generic attribute lookup on Python 3.11.
        (content, path, bucket, scope, team_id, memory_type, status, importance, confidence, semantic_key, _,
         source, metadata_json, expires_at_ms, _) = write
        return _tuple_new(Memory, (
            new_id, caller.principal.tenant, _MEMORY, content, path, bucket, scope, team_id, memory_type, status,
            importance, confidence, semantic_key, None, None, None, source, caller.agent_id,
            caller.agent_instance_id_hash, caller.trust, metadata_json, 1, now_ms, now_ms, expires_at_ms))
    if isinstance(write, UpdateState):
        kind, path, memory_type, status = Kind.STATE, f"state/{write.state_key}", MemoryType.WORKING, DEFAULT_STATUS
        importance, confidence = None, None
        expires_at_ms = now_ms + write.ttl_seconds * 1000 if write.ttl_seconds else None
        semantic_key, state_key, event_type, session_id, created = None, write.state_key, None, None, now_ms
    else:
        kind, path, memory_type, status = Kind.EVENT, write.path, MemoryType.EPISODIC, DEFAULT_STATUS
        importance, confidence, expires_at_ms = write.importance, write.confidence, None
        semantic_key, state_key, event_type, session_id = None, None, write.event_type, write.session_id
        created = write.occurred_at_ms if write.occurred_at_ms is not None else now_ms
    return Memory(
        id=new_id, tenant=caller.tenant, kind=kind, content=write.content, path=path, bucket=write.bucket,
        scope=write.scope, team_id=write.team_id, memory_type=memory_type, status=status, importance=importance,
        confidence=confidence, semantic_key=semantic_key, state_key=state_key, event_type=event_type,
        session_id=session_id, source=write.source, agent_id=caller.agent_id,
        agent_instance_id_hash=caller.agent_instance_id_hash, agent_trust=caller.trust,
        metadata_json=write.metadata_json, version=1, created_at_ms=created, updated_at_ms=now_ms,
        expires_at_ms=expires_at_ms,
    )


def _revise(old: Memory, new: Memory, now_ms: int) -> Memory:
    """``old``'s identity (id, creation time) with ``new``'s content and writer, one version on."""
    return new._replace(id=old.id, version=old.version + 1, created_at_ms=old.created_at_ms, updated_at_ms=now_ms)


def decide(write: Write, existing: Existing, caller: Caller, now_ms: int, new_id: str) -> WriteDecision:
    """The one place capture rules run (see the table in the module docstring)."""
    fresh = _new(write, caller, now_ms, new_id)
    if isinstance(write, RecordEvent):
        return WriteDecision(outcome=Outcome.CREATED, memory=fresh)
    if isinstance(write, UpdateState):
        slot = existing.slot(write.bucket, write.scope, write.state_key)
        if slot is None:
            return WriteDecision(outcome=Outcome.CREATED, memory=fresh)
        return WriteDecision(outcome=Outcome.UPDATED, memory=_revise(slot, fresh, now_ms))
    if write.memory_id is not None:
        target = existing.by_id(write.memory_id)
        if target is None or target.kind is not Kind.MEMORY:
            raise RequestError.not_found("Memory not found")
        if target.content == write.content:
            return WriteDecision(outcome=Outcome.UNCHANGED, memory=target)
        return WriteDecision(outcome=Outcome.UPDATED, memory=_revise(target, fresh, now_ms))
    if write.semantic_key is not None:
        keyed = existing.by_semantic_key(write.scope, write.semantic_key)
        if keyed is not None:
            if keyed.content == write.content:
                return WriteDecision(outcome=Outcome.UNCHANGED, memory=keyed)
            return WriteDecision(outcome=Outcome.UPDATED, memory=_revise(keyed, fresh, now_ms))
    if write.dedupe:
        same = existing.duplicate(write)
        if same is not None:
            return WriteDecision(outcome=Outcome.UNCHANGED, memory=same)
    return _tuple_new(WriteDecision, (_CREATED, fresh))  # the common answer, positionally (see ``_new``)


# Enum members the capture path names, looked up once: on Python 3.11 every attribute of an enum
# class goes through the hook EnumType.__getattr__ installs (about 1,000 instructions each).
_MEMORY: Final = Kind.MEMORY
_CREATED: Final = Outcome.CREATED
