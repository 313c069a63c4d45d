"""Every write rule of the ledger, as one pure function: ``decide``.

``decide(command, actor_id, view, now_ms)`` reads what it needs through ``view`` (the store's
open write transaction) and returns the ``Write`` to apply, or raises ``LedgerError``. It never
touches storage or the clock itself, so the store can run it inside the same transaction that
checks the revision and writes: no writer can slip between the check and the write.
Check order follows upstream ``srv/product.rs`` (wire spec §1.9–1.17, errata 6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol

from . import _state
from ._commands import Command
from ._errors import ErrorCode, LedgerError
from .wire import WRITER_ROLES

__all__ = ["Stored", "View", "Write", "decide", "check_raw", "RAW_OPERATIONS"]

MAX_TOPIC_BYTES: Final = 512
MAX_FACT_BYTES: Final = 65_536
MAX_CONTEXT_BYTES: Final = 65_536
MAX_HANDOFF_TEXT_BYTES: Final = 4_096
RAW_OPERATIONS: Final = {("resource.put", "upsert"), ("resource.delete", "delete")}
WRITABLE_ROLES: Final[frozenset[str]] = WRITER_ROLES  # a module name of its own: the kit's mutants swap it


@dataclass(frozen=True, slots=True)
class Stored:
    """A resource as stored: its revision and body (None for a tombstone)."""

    revision: int
    deleted: bool
    body: Any


class View(Protocol):
    def get(self, kind: str, resource_id: str) -> Stored | None: ...

    def member_role(self, actor_id: str) -> str | None:
        """Role of an active member of the command's project, None if not one."""
        ...


@dataclass(frozen=True, slots=True)
class Write:
    """What to commit: the resource's next state (``body`` is ignored for a delete)."""

    kind: str
    resource_id: str
    deleted: bool
    body: Any


def check_raw(command: Command) -> None:
    """§2.2 raw-route rules; upstream runs them after membership and before the role check."""
    if not command.kind.startswith("custom."):
        raise LedgerError.invalid_command(
            "raw resource commands only accept custom.* extension kinds; product kinds require a typed API"
        )
    if (command.operation, command.change) not in RAW_OPERATIONS:
        raise LedgerError.invalid_command(
            "operation/change must be resource.put/upsert or resource.delete/delete"
        )
    if command.operation == "resource.delete" and command.payload is not None:
        raise LedgerError.invalid_command("resource.delete payload must be JSON null")


def _text(value: str, max_bytes: int, label: str) -> None:
    problem = _state.text_problem(value, max_bytes)
    if problem == "size":
        raise LedgerError.invalid_command(f"{label} must contain 1 to {max_bytes} bytes")
    if problem == "control":
        raise LedgerError.invalid_command(f"{label} must not contain control characters")


def _present(view: View, kind: str, resource_id: str) -> Any:
    stored = view.get(kind, resource_id)
    if stored is None or stored.deleted:
        raise LedgerError.not_found()
    return stored.body


def _absent(view: View, kind: str, resource_id: str) -> None:
    if view.get(kind, resource_id) is not None:
        raise LedgerError.already_exists()


def _receiver(view: View, to_actor: str) -> None:
    role = view.member_role(to_actor)
    if role is None:
        raise LedgerError.invalid_command("handoff receiver is not an active project member")
    if role not in WRITABLE_ROLES:
        raise LedgerError.invalid_command("handoff receiver must have a writable project membership")


def _decide_raw(command: Command, view: View) -> Write:
    if command.expected_revision is not None:
        current = view.get(command.kind, command.resource_id)
        if current is None:
            raise LedgerError.not_found()
        if current.revision != command.expected_revision:
            raise LedgerError.stale_revision(command.expected_revision, current.revision)
    deleted = command.operation == "resource.delete"
    return Write(command.kind, command.resource_id, deleted, None if deleted else command.payload)


def _create_session(p: dict[str, Any], actor_id: str, view: View) -> Any:
    _absent(view, "session", p["session_id"])
    _text(p["topic"], MAX_TOPIC_BYTES, "session topic")
    return {"session_id": p["session_id"], "source_id": p["source_id"], "topic": p["topic"], "created_by": actor_id}


def _create_fact(p: dict[str, Any], actor_id: str, view: View) -> Any:
    session = _present(view, "session", p["session_id"])
    _absent(view, "fact", p["fact_id"])
    _text(p["content"], MAX_FACT_BYTES, "fact content")
    return {
        "fact_id": p["fact_id"],
        "session_id": p["session_id"],
        "source_id": session["source_id"],
        "actor_id": actor_id,
        "content": p["content"],
    }


def _create_context(p: dict[str, Any], actor_id: str, view: View) -> Any:
    session = _present(view, "session", p["session_id"])
    _receiver(view, p["to_actor"])
    _absent(view, "handoff_context", p["context_id"])
    if p["to_actor"] == actor_id:
        raise LedgerError.invalid_command("handoff context sender and receiver must differ")
    _text(p["content"], MAX_CONTEXT_BYTES, "handoff context")
    return {
        "context_id": p["context_id"],
        "handoff_id": p["handoff_id"],
        "session_id": p["session_id"],
        "source_id": session["source_id"],
        "from_actor": actor_id,
        "to_actor": p["to_actor"],
        "content": p["content"],
    }


def _send(p: dict[str, Any], actor_id: str, view: View) -> Any:
    session = _present(view, "session", p["session_id"])
    _receiver(view, p["to_actor"])
    _absent(view, "handoff", p["handoff_id"])
    if p["to_actor"] == actor_id:
        raise LedgerError.invalid_command("handoff sender and receiver must differ")
    for field in ("focus", "done_when"):
        if p[field] is not None:
            _text(p[field], MAX_HANDOFF_TEXT_BYTES, f"handoff {field}")
    record = _state.new_handoff(
        handoff_id=p["handoff_id"],
        session_id=p["session_id"],
        source_id=session["source_id"],
        from_actor=actor_id,
        to_actor=p["to_actor"],
        focus=p["focus"],
        done_when=p["done_when"],
        context_id=None,
    )
    if p["context_id"] is not None:
        # Write paths load the context without visibility filtering (wire spec §5.1).
        context = _present(view, "handoff_context", p["context_id"])
        if context["handoff_id"] != record["handoff_id"]:
            raise LedgerError.handoff_conflict("context belongs to a different handoff")
        if context["session_id"] != record["session_id"]:
            raise LedgerError.handoff_conflict("context belongs to a different session")
        if context["source_id"] != record["source_id"]:
            raise LedgerError.handoff_conflict("context belongs to a different source")
        if (context["from_actor"], context["to_actor"]) != (record["from_actor"], record["to_actor"]):
            raise LedgerError.handoff_conflict("context actor route does not match the handoff")
        record["context_id"] = p["context_id"]
    return record


_CREATES: Final = {
    "session.create": _create_session,
    "fact.create": _create_fact,
    "handoff_context.create": _create_context,
    "handoff.send": _send,
}


def _transition(command: Command, actor_id: str, view: View, now_ms: int) -> Any:
    current = view.get("handoff", command.resource_id)
    if current is None or current.deleted:
        raise LedgerError.not_found()
    assert command.expected_revision is not None
    if current.revision != command.expected_revision:
        raise LedgerError.stale_revision(command.expected_revision, current.revision)
    record = current.body
    p = command.payload
    if command.operation == "handoff.accept":
        return _state.accept(record, actor_id, p["claim_id"], now_ms)
    if command.operation == "handoff.heartbeat":
        return _state.heartbeat(record, actor_id, p["claim_id"], now_ms)
    fact = _present(view, "fact", p["result_fact_id"])
    return _state.return_result(record, actor_id, p["claim_id"], fact, p["outcome"], now_ms)


def decide(command: Command, actor_id: str, view: View, now_ms: int) -> Write:
    """Decide one command that is not a replay; raises ``LedgerError`` to refuse it."""
    if command.operation in ("resource.put", "resource.delete"):
        return _decide_raw(command, view)
    create = _CREATES.get(command.operation)
    if create is not None:
        body = create(command.payload, actor_id, view)
    elif command.operation.startswith("handoff."):
        body = _transition(command, actor_id, view, now_ms)
    else:
        raise LedgerError(ErrorCode.INVALID_COMMAND, f"invalid command: unknown operation {command.operation}")
    return Write(command.kind, command.resource_id, False, body)
