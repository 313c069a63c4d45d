"""The command envelope: what a write request means, independent of how it arrived.

Each route's body decodes into a ``Command``: the operation (``Op``), resource coordinate,
precondition, one typed payload per operation, and the fingerprint of the payload exactly as
upstream hashes it (§7.2: typed payloads with every declared field present). The payload types
are built from the decode tables below, field for field; the rules that decide a command live
in ``_ledger``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, NamedTuple, TypeAlias

from refkit.records import distinct
from aidememo_wire.canonical import Json, canonical_json, envelope_digest
from ._decode import Field, decode_struct
from ._hot import build, plain_raw
from aidememo_wire.errors import LedgerError
from ._records import CONTEXT, FACT, HANDOFF, SESSION, Outcome

__all__ = [
    "Op",
    "STRUCTS",
    "TYPED_CREATES",
    "TRANSITION_ROUTES",
    "RAW_OPERATIONS",
    "SessionCreatePayload",
    "FactCreatePayload",
    "HandoffContextCreatePayload",
    "HandoffSendPayload",
    "HandoffClaimPayload",
    "HandoffReturnPayload",
    "ResourcePayload",
    "Payload",
    "Command",
    "RawCommand",
    "raw_command",
    "typed_command",
    "check_raw",
]


class Op(StrEnum):
    """A write operation, spelled as on the wire (receipts and feeds name them so)."""

    RESOURCE_PUT = "resource.put"
    RESOURCE_DELETE = "resource.delete"
    SESSION_CREATE = "session.create"
    FACT_CREATE = "fact.create"
    CONTEXT_CREATE = "handoff_context.create"
    SEND = "handoff.send"
    ACCEPT = "handoff.accept"
    HEARTBEAT = "handoff.heartbeat"
    RETURN = "handoff.return"


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


# One class per payload struct above, same fields in the same order (a test pins it). Values
# arrive already checked by the decoder, so construction needs no second validation. Payloads
# and ``Command`` are NamedTuples, not frozen dataclasses like the stored records: one is built
# per request (``_hot`` says what that costs). They are as immutable; ``_replace`` is their
# ``dataclasses.replace``.
@distinct
class SessionCreatePayload(NamedTuple):
    session_id: str
    source_id: str | None
    topic: str


@distinct
class FactCreatePayload(NamedTuple):
    fact_id: str
    session_id: str
    content: str


@distinct
class HandoffContextCreatePayload(NamedTuple):
    context_id: str
    handoff_id: str
    session_id: str
    to_actor: str
    content: str


@distinct
class HandoffSendPayload(NamedTuple):
    handoff_id: str
    session_id: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None


@distinct
class HandoffClaimPayload(NamedTuple):
    """The payload of both ``handoff.accept`` and ``handoff.heartbeat`` (as upstream)."""

    claim_id: str


@distinct
class HandoffReturnPayload(NamedTuple):
    claim_id: str
    result_fact_id: str
    outcome: Outcome


@distinct
class ResourcePayload(NamedTuple):
    """A raw route's payload: any JSON for ``custom.*`` kinds (null for a delete)."""

    value: Json
    canonical: str  # value in canonical form: hashed into the fingerprint, stored as the body


Payload: TypeAlias = (
    SessionCreatePayload | FactCreatePayload | HandoffContextCreatePayload | HandoffSendPayload
    | HandoffClaimPayload | HandoffReturnPayload | ResourcePayload
)

_PAYLOAD_TYPES: Final[dict[str, type[Payload]]] = {
    cls.__name__: cls
    for cls in (SessionCreatePayload, FactCreatePayload, HandoffContextCreatePayload, HandoffSendPayload,
                HandoffClaimPayload, HandoffReturnPayload)
}

# route segment -> (operation, resource kind, payload struct, field naming the resource id)
TYPED_CREATES: Final = {
    "sessions": (Op.SESSION_CREATE, SESSION, "SessionCreatePayload", "session_id"),
    "facts": (Op.FACT_CREATE, FACT, "FactCreatePayload", "fact_id"),
    "handoff-contexts": (Op.CONTEXT_CREATE, CONTEXT, "HandoffContextCreatePayload", "context_id"),
    "handoffs": (Op.SEND, HANDOFF, "HandoffSendPayload", "handoff_id"),
}
# transition segment -> (operation, payload struct)
TRANSITION_ROUTES: Final = {
    "accept": (Op.ACCEPT, "HandoffClaimPayload"),
    "heartbeat": (Op.HEARTBEAT, "HandoffClaimPayload"),
    "return": (Op.RETURN, "HandoffReturnPayload"),
}
# The raw route's (operation, change) pairs (wire spec §2.2).
RAW_OPERATIONS: Final = {("resource.put", "upsert"): Op.RESOURCE_PUT, ("resource.delete", "delete"): Op.RESOURCE_DELETE}
_DELETE: Final = Op.RESOURCE_DELETE  # a module constant: an enum member's lookup on its class costs more


@distinct
class Command(NamedTuple):
    """One decoded write: enough to replay-check it, decide it and write its receipt (a
    NamedTuple like the payloads, see above)."""

    command_id: str
    project_id: str
    op: Op
    kind: str
    resource_id: str
    expected_revision: int | None
    payload: Payload
    fingerprint: str


@distinct
class RawCommand(NamedTuple):
    """A ``POST /v1/commands`` body before the §2.2 rules, which run only after authentication."""

    command_id: str
    project_id: str
    operation: str
    kind: str
    resource_id: str
    expected_revision: int | None
    payload: Json
    payload_json: str  # canonical form of payload
    change: str
    fingerprint: str


def _str(value: Json) -> str:
    assert isinstance(value, str)  # the decoder checked it
    return value


def _opt_int(value: Json) -> int | None:
    assert value is None or (isinstance(value, int) and not isinstance(value, bool))
    return value


_REQUEST_FIELDS: Final = frozenset(field.name for field in STRUCTS["CommandRequest"])


def raw_command(body: Json) -> RawCommand:
    """Decode a ``POST /v1/commands`` body (structure only; §2.2 rules run after auth)."""
    if type(body) is dict and _REQUEST_FIELDS.issuperset(body):
        fields = plain_raw(body)  # the common body's one-pass shortcut (``_hot``)
        if fields is not None:
            return build(RawCommand, fields)
    return _decoded_raw(body)


def _decoded_raw(body: Json) -> RawCommand:
    request = decode_struct("CommandRequest", body, STRUCTS)
    resource = request["resource"]
    assert isinstance(resource, dict)
    operation, kind, resource_id = _str(request["operation"]), _str(resource["kind"]), _str(resource["id"])
    project_id, change, expected = _str(request["project_id"]), _str(request["change"]), _opt_int(request["expected_revision"])
    payload = request["payload"]
    payload_json = canonical_json(payload)
    return RawCommand(
        command_id=_str(request["command_id"]), project_id=project_id, operation=operation, kind=kind,
        resource_id=resource_id, expected_revision=expected, payload=payload, payload_json=payload_json,
        change=change,
        fingerprint=envelope_digest(project_id, expected, operation, payload_json, kind, resource_id, change),
    )


def check_raw(raw: RawCommand) -> Command:
    """§2.2 raw-route rules; upstream runs them after membership and before the role check."""
    if not raw.kind.startswith("custom."):
        raise LedgerError.invalid_command(
            "raw resource commands only accept custom.* extension kinds; product kinds require a typed API"
        )
    op = RAW_OPERATIONS.get((raw.operation, raw.change))
    if op is None:
        raise LedgerError.invalid_command("operation/change must be resource.put/upsert or resource.delete/delete")
    if op is _DELETE and raw.payload is not None:
        raise LedgerError.invalid_command("resource.delete payload must be JSON null")
    return build(Command, (raw.command_id, raw.project_id, op, raw.kind, raw.resource_id, raw.expected_revision,
                           build(ResourcePayload, (raw.payload, raw.payload_json)), raw.fingerprint))


def _payload(struct: str, decoded: dict[str, Json]) -> Payload:
    if struct == "HandoffReturnPayload":
        return HandoffReturnPayload(claim_id=_str(decoded["claim_id"]), result_fact_id=_str(decoded["result_fact_id"]),
                                    outcome=Outcome(_str(decoded["outcome"])))
    return _PAYLOAD_TYPES[struct](**decoded)  # type: ignore[arg-type]  # fields and types match STRUCTS


def typed_command(project_id: str, *, segment: str, handoff_id: str | None, body: Json) -> Command:
    """Decode a typed create (``segment`` in TYPED_CREATES) or a transition of ``handoff_id``."""
    if handoff_id is None:
        op, kind, struct, id_field = TYPED_CREATES[segment]
        request = decode_struct("CreateRequest", body, STRUCTS)
        decoded = decode_struct(struct, request["payload"], STRUCTS)
        resource_id, expected = _str(decoded[id_field]), None
    else:
        op, struct = TRANSITION_ROUTES[segment]
        kind = HANDOFF
        request = decode_struct("TransitionRequest", body, STRUCTS)
        decoded = decode_struct(struct, request["payload"], STRUCTS)
        resource_id, expected = handoff_id, _opt_int(request["expected_revision"])
    return Command(
        command_id=_str(request["command_id"]), project_id=project_id, op=op, kind=kind, resource_id=resource_id,
        expected_revision=expected, payload=_payload(struct, decoded),
        fingerprint=envelope_digest(project_id, expected, op.value, canonical_json(decoded), kind, resource_id,
                                    "upsert"),
    )
