"""Every write rule of the ledger, as one pure function: ``decide``.

``decide(command, actor_id, view, now_ms)`` reads what it needs through ``view`` (the store's
open write transaction) and returns the ``Write`` to apply, or raises ``LedgerError``. It never
touches storage or the clock itself, so the store can run it inside the same transaction that
checks the revision and writes: no writer can slip between the check and the write.
Check order follows upstream ``srv/product.rs`` (wire spec §1.9-1.17, errata 6).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final, NamedTuple, Protocol, TypeAlias, TypeVar

from refkit.records import distinct
from . import _state
from ._hot import build
from ._commands import (
    Command,
    FactCreatePayload,
    HandoffClaimPayload,
    HandoffContextCreatePayload,
    HandoffReturnPayload,
    HandoffSendPayload,
    Op,
    ResourcePayload,
    SessionCreatePayload,
)
from aidememo_wire.errors import LedgerError
from ._records import (
    CONTEXT,
    FACT,
    HANDOFF,
    SESSION,
    WRITABLE_ROLES,
    Handoff,
    HandoffContext,
    LedgerFact,
    Record,
    Resource,
    Role,
    Session,
)

__all__ = ["View", "Write", "Decide", "decide", "MAX_TOPIC_BYTES", "MAX_FACT_BYTES", "MAX_CONTEXT_BYTES",
           "MAX_HANDOFF_TEXT_BYTES"]

MAX_TOPIC_BYTES: Final = 512
MAX_FACT_BYTES: Final = 65_536
MAX_CONTEXT_BYTES: Final = 65_536
MAX_HANDOFF_TEXT_BYTES: Final = 4_096


class View(Protocol):
    """The rules' window on the project inside the command's transaction."""

    def resource(self, kind: str, resource_id: str) -> Resource | None:
        """The resource row (a tombstone has ``body`` None), or None if it never existed."""
        ...

    def member_role(self, actor_id: str) -> Role | None:
        """Role of an active member of the command's project, None if not one."""
        ...


@distinct
class Write(NamedTuple):
    """What to commit: the resource's next body (None deletes it) and, for product kinds, the
    typed record it encodes (the store's mailbox and search indexes read it). A NamedTuple like
    ``Command`` and ``Receipt``: every write builds one, cheaper than a frozen dataclass (``bench/records.py``)."""

    kind: str
    resource_id: str
    body: str | None
    record: Record | None = None

    @classmethod
    def of(cls, kind: str, resource_id: str, record: Record) -> Write:
        return cls(kind=kind, resource_id=resource_id, body=record.canonical(), record=record)


Decide: TypeAlias = Callable[[Command, str, View, int], Write]


def _text(value: str, max_bytes: int, label: str) -> None:
    problem = _state.text_problem(value, max_bytes)
    if problem == "size":
        raise LedgerError.invalid_command(f"{label} must contain 1 to {max_bytes} bytes")
    if problem == "control":
        raise LedgerError.invalid_command(f"{label} must not contain control characters")


_R = TypeVar("_R", Session, LedgerFact, HandoffContext, Handoff)


def _present(view: View, record_type: type[_R], kind: str, resource_id: str) -> _R:
    stored = view.resource(kind, resource_id)
    if stored is None or stored.body is None:
        raise LedgerError.not_found()
    return record_type.from_json(stored.body)


def _absent(view: View, kind: str, resource_id: str) -> None:
    if view.resource(kind, resource_id) is not None:
        raise LedgerError.already_exists()


def _receiver(view: View, to_actor: str) -> None:
    role = view.member_role(to_actor)
    if role is None:
        raise LedgerError.invalid_command("handoff receiver is not an active project member")
    if role not in WRITABLE_ROLES:
        raise LedgerError.invalid_command("handoff receiver must have a writable project membership")


def _check_revision(command: Command, current: Resource | None) -> None:
    """409 `stale_revision` when the resource is not at exactly `expected_revision` (404 when it does not exist)."""
    if current is None:
        raise LedgerError.not_found()
    assert command.expected_revision is not None
    if current.revision != command.expected_revision:
        raise LedgerError.stale_revision(command.expected_revision, current.revision)


def _raw(command: Command, p: ResourcePayload, view: View) -> Write:
    if command.expected_revision is not None:
        _check_revision(command, view.resource(command.kind, command.resource_id))
    # Built as ``_hot`` builds records: every raw command comes here.
    return build(Write, (command.kind, command.resource_id, None if command.op is _DELETE else p.canonical, None))


_DELETE: Final = Op.RESOURCE_DELETE  # a module constant: an enum member's lookup on its class costs more


def _create_session(p: SessionCreatePayload, actor_id: str, view: View) -> Session:
    _absent(view, SESSION, p.session_id)
    _text(p.topic, MAX_TOPIC_BYTES, "session topic")
    return Session(session_id=p.session_id, source_id=p.source_id, topic=p.topic, created_by=actor_id)


def _create_fact(p: FactCreatePayload, actor_id: str, view: View) -> LedgerFact:
    session = _present(view, Session, SESSION, p.session_id)
    _absent(view, FACT, p.fact_id)
    _text(p.content, MAX_FACT_BYTES, "fact content")
    return LedgerFact(fact_id=p.fact_id, session_id=p.session_id, source_id=session.source_id, actor_id=actor_id,
                      content=p.content)


def _routed(view: View, actor_id: str, session_id: str, to_actor: str, kind: str, resource_id: str,
            what: str) -> Session:
    """The checks a context and a handoff share, in upstream's order; returns their session."""
    session = _present(view, Session, SESSION, session_id)
    _receiver(view, to_actor)
    _absent(view, kind, resource_id)
    if to_actor == actor_id:
        raise LedgerError.invalid_command(f"{what} sender and receiver must differ")
    return session


def _create_context(p: HandoffContextCreatePayload, actor_id: str, view: View) -> HandoffContext:
    session = _routed(view, actor_id, p.session_id, p.to_actor, CONTEXT, p.context_id, "handoff context")
    _text(p.content, MAX_CONTEXT_BYTES, "handoff context")
    return HandoffContext(context_id=p.context_id, handoff_id=p.handoff_id, session_id=p.session_id,
                          source_id=session.source_id, from_actor=actor_id, to_actor=p.to_actor, content=p.content)


def _send(p: HandoffSendPayload, actor_id: str, view: View) -> Handoff:
    session = _routed(view, actor_id, p.session_id, p.to_actor, HANDOFF, p.handoff_id, "handoff")
    if p.focus is not None:
        _text(p.focus, MAX_HANDOFF_TEXT_BYTES, "handoff focus")
    if p.done_when is not None:
        _text(p.done_when, MAX_HANDOFF_TEXT_BYTES, "handoff done_when")
    record = _state.new_handoff(handoff_id=p.handoff_id, session_id=p.session_id, source_id=session.source_id,
                                from_actor=actor_id, to_actor=p.to_actor, focus=p.focus, done_when=p.done_when,
                                context_id=None)
    if p.context_id is None:
        return record
    # Write paths load the context without visibility filtering (wire spec §5.1).
    context = _present(view, HandoffContext, CONTEXT, p.context_id)
    if context.handoff_id != record.handoff_id:
        raise LedgerError.handoff_conflict("context belongs to a different handoff")
    if context.session_id != record.session_id:
        raise LedgerError.handoff_conflict("context belongs to a different session")
    if context.source_id != record.source_id:
        raise LedgerError.handoff_conflict("context belongs to a different source")
    if (context.from_actor, context.to_actor) != (record.from_actor, record.to_actor):
        raise LedgerError.handoff_conflict("context actor route does not match the handoff")
    return replace(record, context_id=p.context_id)


def _stored_handoff(command: Command, view: View) -> Resource:
    """404 `not_found` when the handoff is missing or deleted (a tombstone is not found before any revision check)."""
    current = view.resource(HANDOFF, command.resource_id)
    if current is None or current.body is None:
        raise LedgerError.not_found()
    return current


def _result_fact(command: Command, view: View) -> LedgerFact | None:
    """404 `not_found` when a `handoff.return` names a result fact that is missing or deleted."""
    p = command.payload
    return _present(view, LedgerFact, FACT, p.result_fact_id) if isinstance(p, HandoffReturnPayload) else None


# What a transition checks before `_state.TRANSITIONS`, in this order (upstream's server does the
# same: load, revision, result fact, then the domain rules); docs/ARCHITECTURE.md lists them from
# here (scripts/state_diagram.py) and tests/ref/test_state.py reads `_transition` against it.
BEFORE_TABLE: Final = (_stored_handoff, _check_revision, _result_fact)


def _transition(command: Command, actor_id: str, view: View, now_ms: int, lease_ms: int) -> Handoff:
    current = _stored_handoff(command, view)
    _check_revision(command, current)
    fact = _result_fact(command, view)
    assert current.body is not None  # _stored_handoff refuses a tombstone
    record = Handoff.from_json(current.body)
    p = command.payload
    if isinstance(p, HandoffReturnPayload):
        attempt = _state.Attempt(op=command.op, actor_id=actor_id, claim_id=p.claim_id, now_ms=now_ms, fact=fact,
                                 outcome=p.outcome, lease_ms=lease_ms)
    else:
        assert isinstance(p, HandoffClaimPayload)
        attempt = _state.Attempt(op=command.op, actor_id=actor_id, claim_id=p.claim_id, now_ms=now_ms,
                                 lease_ms=lease_ms)
    return _state.transition(record, attempt)


def decide(command: Command, actor_id: str, view: View, now_ms: int, lease_ms: int = _state.LEASE_MS) -> Write:
    """Decide one command that is not a replay; raises ``LedgerError`` to refuse it. A claim
    begun or renewed lasts ``lease_ms`` (the ledger's setting; upstream's by default)."""
    p = command.payload
    record: Record
    if isinstance(p, ResourcePayload):
        return _raw(command, p, view)
    if isinstance(p, SessionCreatePayload):
        record = _create_session(p, actor_id, view)
    elif isinstance(p, FactCreatePayload):
        record = _create_fact(p, actor_id, view)
    elif isinstance(p, HandoffContextCreatePayload):
        record = _create_context(p, actor_id, view)
    elif isinstance(p, HandoffSendPayload):
        record = _send(p, actor_id, view)
    else:
        record = _transition(command, actor_id, view, now_ms, lease_ms)
    return Write.of(command.kind, command.resource_id, record)
