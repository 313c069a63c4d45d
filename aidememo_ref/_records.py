"""The ledger's values: the records it stores, the rows it reads back, the receipts it answers.

Every value is a frozen, slotted, keyword-only dataclass, but the rows every read builds by the
dozen (``Resource``, ``Change``) and ``Receipt``: ``@distinct`` NamedTuples (``refkit.records``),
cheaper to build than a frozen dataclass (``python bench/records.py`` times both). Product
records (``Session``, ``LedgerFact``, ``HandoffContext``, ``Handoff``) carry upstream's field names and declaration order
(``dom/handoff.rs``); ``canonical()`` is the stored body (keys sorted, serde's bytes) and
``from_json`` reads one back. Rows (``Resource``,
``Change``, ``Membership``) are what a store hands to the rules; ``Receipt`` is the command
receipt of wire spec §1.2, which replays byte for byte because ``to_json`` is a pure function
of its fields.

Pure: no I/O, nothing but the standard library and ``_canonical``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final, NamedTuple, TypeAlias

from refkit.records import distinct
from aidememo_wire.canonical import Json, canonical_json
from aidememo_wire.status import WRITABLE_ROLES, Outcome, Role, Status
from ._errors import AideMemoRefError

__all__ = [
    "Status",
    "Outcome",
    "Role",
    "WRITABLE_ROLES",
    "SESSION",
    "FACT",
    "CONTEXT",
    "HANDOFF",
    "Session",
    "LedgerFact",
    "HandoffContext",
    "Handoff",
    "HANDOFF_FIELDS",
    "Record",
    "Resource",
    "Change",
    "Membership",
    "Receipt",
    "RecordError",
]

# Resource kinds of the typed routes (wire spec §1.9-1.17); raw routes only write custom.*.
SESSION: Final = "session"
FACT: Final = "fact"
CONTEXT: Final = "handoff_context"
HANDOFF: Final = "handoff"


class RecordError(AideMemoRefError, ValueError):
    """A stored body that is not the record its kind promises (a corrupt or foreign database)."""


def _fields(data: Json, kind: str, names: tuple[str, ...]) -> dict[str, Json]:
    if not isinstance(data, dict) or data.keys() != set(names):
        raise RecordError(f"stored {kind} body does not have the {kind} fields")
    return data


def _text(value: Json) -> str:
    if not isinstance(value, str):
        raise RecordError("stored text field is not a string")
    return value


def _opt_text(value: Json) -> str | None:
    return None if value is None else _text(value)


def _opt_int(value: Json) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError("stored integer field is not an integer")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Session:
    """Session continuity record (upstream ``SessionRecord``)."""

    session_id: str
    source_id: str | None
    topic: str
    created_by: str

    def canonical(self) -> str:
        return canonical_json({"session_id": self.session_id, "source_id": self.source_id, "topic": self.topic,
                               "created_by": self.created_by})

    @classmethod
    def from_json(cls, text: str) -> Session:
        d = _fields(json.loads(text), SESSION, ("session_id", "source_id", "topic", "created_by"))
        return cls(session_id=_text(d["session_id"]), source_id=_opt_text(d["source_id"]), topic=_text(d["topic"]),
                   created_by=_text(d["created_by"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerFact:
    """The ledger's fact: the result evidence a handoff return points at (of upstream's ``FactRecord``).

    Named for its layer: the command line's local store keeps upstream's whole ``FactRecord``
    as ``aidememo_cli._local._records.Fact``.
    """

    fact_id: str
    session_id: str
    source_id: str | None
    actor_id: str
    content: str

    def canonical(self) -> str:
        return canonical_json({"fact_id": self.fact_id, "session_id": self.session_id, "source_id": self.source_id,
                               "actor_id": self.actor_id, "content": self.content})

    @classmethod
    def from_json(cls, text: str) -> LedgerFact:
        d = _fields(json.loads(text), FACT, ("fact_id", "session_id", "source_id", "actor_id", "content"))
        return cls(fact_id=_text(d["fact_id"]), session_id=_text(d["session_id"]), source_id=_opt_text(d["source_id"]),
                   actor_id=_text(d["actor_id"]), content=_text(d["content"]))


@dataclass(frozen=True, slots=True, kw_only=True)
class HandoffContext:
    """Immutable context packet seen only by the handoff's two actors (``HandoffContextRecord``)."""

    context_id: str
    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    content: str

    def canonical(self) -> str:
        return canonical_json({"context_id": self.context_id, "handoff_id": self.handoff_id,
                               "session_id": self.session_id, "source_id": self.source_id,
                               "from_actor": self.from_actor, "to_actor": self.to_actor, "content": self.content})

    @classmethod
    def from_json(cls, text: str) -> HandoffContext:
        d = _fields(json.loads(text), CONTEXT,
                    ("context_id", "handoff_id", "session_id", "source_id", "from_actor", "to_actor", "content"))
        return cls(context_id=_text(d["context_id"]), handoff_id=_text(d["handoff_id"]),
                   session_id=_text(d["session_id"]), source_id=_opt_text(d["source_id"]),
                   from_actor=_text(d["from_actor"]), to_actor=_text(d["to_actor"]), content=_text(d["content"]))


# Declaration order of upstream's HandoffRecord: typed status and mailbox answers use it.
HANDOFF_FIELDS: Final = (
    "handoff_id", "session_id", "source_id", "from_actor", "to_actor", "focus", "done_when", "context_id",
    "status", "claim_id", "claim_heartbeat_at_ms", "claim_expires_at_ms", "attempt_count", "result_fact_id",
    "outcome",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Handoff:
    """The handoff pointer and its lease state (upstream ``HandoffRecord``)."""

    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None
    status: Status
    claim_id: str | None
    claim_heartbeat_at_ms: int | None
    claim_expires_at_ms: int | None
    attempt_count: int
    result_fact_id: str | None
    outcome: Outcome | None

    def _wire(self) -> dict[str, Json]:
        return {
            "handoff_id": self.handoff_id, "session_id": self.session_id, "source_id": self.source_id,
            "from_actor": self.from_actor, "to_actor": self.to_actor, "focus": self.focus,
            "done_when": self.done_when, "context_id": self.context_id, "status": self.status.value,
            "claim_id": self.claim_id, "claim_heartbeat_at_ms": self.claim_heartbeat_at_ms,
            "claim_expires_at_ms": self.claim_expires_at_ms, "attempt_count": self.attempt_count,
            "result_fact_id": self.result_fact_id, "outcome": None if self.outcome is None else self.outcome.value,
        }

    def canonical(self) -> str:
        return canonical_json(self._wire())

    def in_order(self) -> str:
        """The record as upstream serializes it in status and mailbox answers (declaration order)."""
        return json.dumps(self._wire(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Handoff:
        d = _fields(json.loads(text), HANDOFF, HANDOFF_FIELDS)
        attempts = _opt_int(d["attempt_count"])
        status, outcome = d["status"], d["outcome"]
        if attempts is None or status not in _STATUSES or (outcome is not None and outcome not in _OUTCOMES):
            raise RecordError("stored handoff has an invalid status, outcome or attempt count")
        return cls(
            handoff_id=_text(d["handoff_id"]), session_id=_text(d["session_id"]), source_id=_opt_text(d["source_id"]),
            from_actor=_text(d["from_actor"]), to_actor=_text(d["to_actor"]), focus=_opt_text(d["focus"]),
            done_when=_opt_text(d["done_when"]), context_id=_opt_text(d["context_id"]), status=Status(status),
            claim_id=_opt_text(d["claim_id"]), claim_heartbeat_at_ms=_opt_int(d["claim_heartbeat_at_ms"]),
            claim_expires_at_ms=_opt_int(d["claim_expires_at_ms"]), attempt_count=attempts,
            result_fact_id=_opt_text(d["result_fact_id"]), outcome=None if outcome is None else Outcome(outcome),
        )


_STATUSES: Final = frozenset(s.value for s in Status)
_OUTCOMES: Final = frozenset(o.value for o in Outcome)

Record: TypeAlias = Session | LedgerFact | HandoffContext | Handoff


@distinct
class Resource(NamedTuple):
    """A resource row: its revision and canonical body (``None`` for a tombstone)."""

    kind: str
    resource_id: str
    revision: int
    body: str | None

    @property
    def deleted(self) -> bool:
        return self.body is None


@distinct
class Change(NamedTuple):
    """One change-feed entry as stored: the resource's state right after ``seq``."""

    seq: int
    kind: str
    resource_id: str
    revision: int
    actor_id: str
    committed_at_ms: int
    body: str | None  # None: the change is a delete

    @property
    def operation(self) -> str:
        return "delete" if self.body is None else "upsert"


@dataclass(frozen=True, slots=True, kw_only=True)
class Membership:
    """Who a bearer token is in one project: the authenticated caller of every route."""

    tenant_id: str
    project_id: str
    actor_id: str
    role: Role
    project_epoch: str


@distinct
class Receipt(NamedTuple):
    """The command receipt (wire spec §1.2); a replay answers the same bytes.

    A NamedTuple, not a frozen dataclass like the other values: every write builds one, and a
    frozen dataclass's ``__init__`` costs five times a tuple's. As immutable; ``_replace`` is
    its ``dataclasses.replace``."""

    command_id: str
    fingerprint: str
    tenant_id: str
    project_id: str
    actor_id: str
    project_seq: int
    kind: str
    resource_id: str
    revision: int
    committed_at_ms: int

    def to_json(self) -> str:
        # Upstream's CommandReceipt in its field order, which is also Receipt's. Every string here
        # is an id, a kind or a hex digest, whose grammars (wire spec §0.5) need no JSON escaping.
        # One f-string: cheaper than %-formatting the tuple (a receipt per command).
        command_id, fingerprint, tenant_id, project_id, actor_id, seq, kind, resource_id, revision, at_ms = self
        return (f'{{"command_id":"{command_id}","fingerprint":"{fingerprint}","tenant_id":"{tenant_id}",'
                f'"project_id":"{project_id}","actor_id":"{actor_id}","project_seq":{seq},'
                f'"resource":{{"kind":"{kind}","id":"{resource_id}"}},"revision":{revision},'
                f'"committed_at_ms":{at_ms}}}')
