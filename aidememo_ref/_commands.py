"""The command envelope: what a write request means, independent of how it arrived.

Each route's body decodes into a ``Command``: operation, resource coordinate, precondition,
the payload exactly as fingerprinted (§7.2: typed payloads with every declared field present),
and the fingerprint itself. The rules that decide a command live in ``_ledger``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from ._canonical import fingerprint
from ._decode import Field, decode_struct

__all__ = ["Command", "STRUCTS", "TYPED_CREATES", "TRANSITIONS", "raw_command", "typed_command"]

STRUCTS: Final[dict[str, tuple[Field, ...]]] = {
    "CommandRequest": (
        Field("command_id", "id"),
        Field("project_id", "id"),
        Field("expected_revision", "revision", optional=True),
        Field("operation", "name"),
        Field("payload", "any"),
        Field("resource", "struct:resource"),
        Field("change", "enum:upsert,delete"),
    ),
    "resource": (Field("kind", "name"), Field("id", "id")),
    "CreateRequest": (Field("command_id", "id"), Field("payload", "any")),
    "TransitionRequest": (
        Field("command_id", "id"),
        Field("expected_revision", "revision"),
        Field("payload", "any"),
    ),
    "SessionCreatePayload": (
        Field("session_id", "id"),
        Field("source_id", "id", optional=True),
        Field("topic", "string"),
    ),
    "FactCreatePayload": (Field("fact_id", "id"), Field("session_id", "id"), Field("content", "string")),
    "HandoffContextCreatePayload": (
        Field("context_id", "id"),
        Field("handoff_id", "id"),
        Field("session_id", "id"),
        Field("to_actor", "id"),
        Field("content", "string"),
    ),
    "HandoffSendPayload": (
        Field("handoff_id", "id"),
        Field("session_id", "id"),
        Field("to_actor", "id"),
        Field("focus", "string", optional=True),
        Field("done_when", "string", optional=True),
        Field("context_id", "id", optional=True),
    ),
    "HandoffClaimPayload": (Field("claim_id", "id"),),
    "HandoffReturnPayload": (
        Field("claim_id", "id"),
        Field("result_fact_id", "id"),
        Field("outcome", "enum:succeeded,failed"),
    ),
}

# route segment -> (operation, resource kind, payload struct, field naming the resource id)
TYPED_CREATES: Final = {
    "sessions": ("session.create", "session", "SessionCreatePayload", "session_id"),
    "facts": ("fact.create", "fact", "FactCreatePayload", "fact_id"),
    "handoff-contexts": ("handoff_context.create", "handoff_context", "HandoffContextCreatePayload", "context_id"),
    "handoffs": ("handoff.send", "handoff", "HandoffSendPayload", "handoff_id"),
}
# transition segment -> (operation, payload struct)
TRANSITIONS: Final = {
    "accept": ("handoff.accept", "HandoffClaimPayload"),
    "heartbeat": ("handoff.heartbeat", "HandoffClaimPayload"),
    "return": ("handoff.return", "HandoffReturnPayload"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One decoded write: enough to replay-check it, decide it and write its receipt."""

    command_id: str
    project_id: str
    operation: str
    kind: str
    resource_id: str
    expected_revision: int | None
    payload: Any
    change: str
    fingerprint: str


def _build(
    *, command_id: str, project_id: str, operation: str, kind: str, resource_id: str,
    expected_revision: int | None, payload: Any, change: str,
) -> Command:
    return Command(
        command_id=command_id,
        project_id=project_id,
        operation=operation,
        kind=kind,
        resource_id=resource_id,
        expected_revision=expected_revision,
        payload=payload,
        change=change,
        fingerprint=fingerprint(
            project_id=project_id,
            expected_revision=expected_revision,
            operation=operation,
            payload=payload,
            resource_kind=kind,
            resource_id=resource_id,
            change=change,
        ),
    )


def raw_command(body: Any) -> Command:
    """Decode a ``POST /v1/commands`` body (structure only; §2.2 rules run after auth)."""
    request = decode_struct("CommandRequest", body, STRUCTS)
    return _build(
        command_id=request["command_id"],
        project_id=request["project_id"],
        operation=request["operation"],
        kind=request["resource"]["kind"],
        resource_id=request["resource"]["id"],
        expected_revision=request["expected_revision"],
        payload=request["payload"],
        change=request["change"],
    )


def typed_command(
    project_id: str, *, segment: str, handoff_id: str | None, body: Any
) -> Command:
    """Decode a typed create (``segment`` in TYPED_CREATES) or a transition of ``handoff_id``."""
    if handoff_id is None:
        operation, kind, struct, id_field = TYPED_CREATES[segment]
        request = decode_struct("CreateRequest", body, STRUCTS)
        payload = decode_struct(struct, request["payload"], STRUCTS)
        return _build(
            command_id=request["command_id"], project_id=project_id, operation=operation, kind=kind,
            resource_id=payload[id_field], expected_revision=None, payload=payload, change="upsert",
        )
    operation, struct = TRANSITIONS[segment]
    request = decode_struct("TransitionRequest", body, STRUCTS)
    payload = decode_struct(struct, request["payload"], STRUCTS)
    return _build(
        command_id=request["command_id"], project_id=project_id, operation=operation, kind="handoff",
        resource_id=handoff_id, expected_revision=request["expected_revision"], payload=payload,
        change="upsert",
    )
