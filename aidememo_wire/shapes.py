"""The JSON shapes of the AideMemo wire protocol, as types (wire spec §1, ``openapi.json``).

These are descriptions for type checkers, not validators: ``AideMemoClient`` returns the
server's JSON as it arrived, annotated with the shape the protocol promises. The contract
tests validate the same shapes at run time against ``openapi.json``.
"""

from __future__ import annotations

from typing import Final, Literal, NotRequired, TypeAlias, TypedDict, cast

from .status import WRITABLE_ROLES as _WRITABLE
from .status import Role as _Role

__all__ = [
    "JSON",
    "JSONObject",
    "Scope",
    "ResourceRef",
    "Receipt",
    "ResourceState",
    "ResourceAnswer",
    "Cursor",
    "ChangeEntry",
    "ChangeBatch",
    "MaterializedEntry",
    "MaterializedChangeBatch",
    "Snapshot",
    "SearchHit",
    "SearchAnswer",
    "Identity",
    "HandoffRecord",
    "TypedHandoff",
    "MailboxEntry",
    "HandoffPage",
    "Health",
    "Role",
    "ROLES",
    "WRITER_ROLES",
    "HandoffStatus",
    "HandoffOutcome",
    "Mailbox",
    "SearchMode",
    "ErrorDetail",
    "error_detail",
]

JSON: TypeAlias = "dict[str, JSON] | list[JSON] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSON]"

Role = Literal["owner", "admin", "writer", "reader"]
# The Role enum of .status is the one list; a test keeps the Literal above equal to it.
ROLES: Final = cast(tuple[Role, ...], tuple(role.value for role in _Role))  # strongest first
WRITER_ROLES: Final = cast(frozenset[Role], frozenset(role.value for role in _WRITABLE))  # all but reader
HandoffStatus = Literal["pending", "accepted", "completed"]
HandoffOutcome = Literal["succeeded", "failed"]
Mailbox = Literal["inbox", "outbox"]
SearchMode = Literal["auto", "lexical", "semantic", "hybrid"]


class ErrorDetail(TypedDict):
    code: str  # snake_case wire code, e.g. stale_revision
    message: str


def error_detail(document: object) -> ErrorDetail | None:
    """The ``error`` of an AideMemo error body ``{"error":{"code","message"}}`` (wire §3.1).

    None unless ``document`` is an object whose ``error`` is an object with a string ``code``;
    a missing or non-string ``message`` reads as "". This is the one place the kit reads an
    error code out of a body, so every reader agrees on what counts as one.
    """
    error = document.get("error") if isinstance(document, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return None
    message = error.get("message")
    return {"code": error["code"], "message": message if isinstance(message, str) else ""}


class Scope(TypedDict):
    tenant_id: str
    project_id: str


class ResourceRef(TypedDict):
    kind: str
    id: str


class Receipt(TypedDict):
    """What every accepted command answers, and what a replay of it answers again (wire §2.5)."""

    command_id: str
    fingerprint: str
    tenant_id: str
    project_id: str
    actor_id: str
    project_seq: int
    resource: ResourceRef
    revision: int
    committed_at_ms: int


class ResourceState(TypedDict):
    state: Literal["present", "deleted"]
    body: NotRequired[JSON]  # only when present


class ResourceAnswer(TypedDict):
    scope: Scope
    resource: ResourceRef
    revision: int
    state: ResourceState


class Cursor(TypedDict):
    project_epoch: str
    after_seq: int


class ChangeEntry(TypedDict):
    tenant_id: str
    project_id: str
    project_epoch: str
    seq: int
    resource: ResourceRef
    operation: Literal["upsert", "delete"]
    revision: int
    actor_id: str
    committed_at_ms: int


class ChangeBatch(TypedDict):
    scope: Scope
    cursor: Cursor
    entries: list[ChangeEntry]
    next_cursor: Cursor
    has_more: bool


class MaterializedEntry(TypedDict):
    change: ChangeEntry
    resource: ResourceAnswer


class MaterializedChangeBatch(TypedDict):
    scope: Scope
    cursor: Cursor
    entries: list[MaterializedEntry]
    next_cursor: Cursor
    has_more: bool


class Snapshot(TypedDict):
    scope: Scope
    project_epoch: str
    at_seq: int
    resources: list[ResourceAnswer]


class SearchHit(TypedDict):
    fact_id: str
    session_id: str
    source_id: str | None
    actor_id: str
    content: str
    score: float
    lexical_score: NotRequired[float]  # omitted, not null, when absent
    semantic_score: NotRequired[float]


class SearchAnswer(TypedDict):
    project_epoch: str
    index_seq: int
    mode: Literal["lexical", "semantic", "hybrid"]
    semantic_model: str | None
    results: list[SearchHit]


class Identity(TypedDict):
    tenant_id: str
    project_id: str
    project_epoch: str
    actor_id: str
    role: Role


class HandoffRecord(TypedDict):
    """Every field is always present, nulls included, in this order (wire §1.12)."""

    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None
    status: HandoffStatus
    claim_id: str | None
    claim_heartbeat_at_ms: int | None
    claim_expires_at_ms: int | None
    attempt_count: int
    result_fact_id: str | None
    outcome: HandoffOutcome | None


class TypedHandoff(TypedDict):
    revision: int
    record: HandoffRecord


class MailboxEntry(TypedDict):
    project_seq: int
    revision: int
    record: HandoffRecord


class HandoffPage(TypedDict):
    assignments: list[MailboxEntry]
    next_before_seq: int | None


class Health(TypedDict):
    status: Literal["ok"]
    mode: Literal["single_node"]
    schema_version: int
