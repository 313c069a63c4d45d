"""The handoff state machine: statuses, outcomes, leases and the three transitions.

Everything that changes a handoff record lives here, as pure functions from (record, request,
now_ms) to a new record or a ``LedgerError``. Guards run in upstream's order
(``dom/handoff.rs`` ``accept_with_lease``, ``heartbeat``, ``return_result_at``; errata 6),
because the order decides which error a caller sees when several rules are broken at once.

Records are plain dicts with every field of ``HANDOFF_FIELDS`` present (nulls included).
"""

from __future__ import annotations

import unicodedata
from enum import StrEnum
from typing import Any, Final

from ._errors import LedgerError
from ._text import trim

__all__ = [
    "Status",
    "Outcome",
    "LEASE_MS",
    "HANDOFF_FIELDS",
    "new_handoff",
    "claim_is_stale",
    "accept",
    "heartbeat",
    "return_result",
    "text_problem",
]

LEASE_MS: Final = 120_000  # srv/product.rs HANDOFF_LEASE_MS


class Status(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    COMPLETED = "completed"


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


# Declaration order of upstream's HandoffRecord: typed status and mailbox answers use it.
HANDOFF_FIELDS: Final = (
    "handoff_id",
    "session_id",
    "source_id",
    "from_actor",
    "to_actor",
    "focus",
    "done_when",
    "context_id",
    "status",
    "claim_id",
    "claim_heartbeat_at_ms",
    "claim_expires_at_ms",
    "attempt_count",
    "result_fact_id",
    "outcome",
)


def text_problem(value: str, max_bytes: int) -> str | None:
    """Why a topic/content/focus/done_when text is refused (``dom/handoff.rs validate_text``)."""
    if not trim(value) or len(value.encode("utf-8")) > max_bytes:
        return "size"
    if any(unicodedata.category(ch) == "Cc" and ch not in "\n\r\t" for ch in value):
        return "control"
    return None


def new_handoff(
    *,
    handoff_id: str,
    session_id: str,
    source_id: str | None,
    from_actor: str,
    to_actor: str,
    focus: str | None,
    done_when: str | None,
    context_id: str | None,
) -> dict[str, Any]:
    record = dict.fromkeys(HANDOFF_FIELDS)
    record.update(
        handoff_id=handoff_id,
        session_id=session_id,
        source_id=source_id,
        from_actor=from_actor,
        to_actor=to_actor,
        focus=focus,
        done_when=done_when,
        context_id=context_id,
        status=Status.PENDING.value,
        attempt_count=0,
    )
    return record


def claim_is_stale(record: dict[str, Any], now_ms: int) -> bool:
    """A live-looking claim whose lease has run out; a failed claim never goes stale."""
    expires = record["claim_expires_at_ms"]
    return (
        record["status"] == Status.ACCEPTED
        and record["outcome"] != Outcome.FAILED
        and expires is not None
        and now_ms >= expires
    )


def _require_receiver(record: dict[str, Any], actor_id: str) -> None:
    if actor_id != record["to_actor"]:
        raise LedgerError.actor_mismatch()


def _begin_claim(record: dict[str, Any], claim_id: str, now_ms: int) -> dict[str, Any]:
    attempt = record["attempt_count"] + 1
    if attempt > (1 << 64) - 1:
        raise LedgerError.handoff_conflict("handoff attempt counter overflow")
    return {
        **record,
        "status": Status.ACCEPTED.value,
        "claim_id": claim_id,
        "claim_heartbeat_at_ms": now_ms,
        "claim_expires_at_ms": now_ms + LEASE_MS,
        "attempt_count": attempt,
        "result_fact_id": None,
        "outcome": None,
    }


def accept(record: dict[str, Any], actor_id: str, claim_id: str, now_ms: int) -> dict[str, Any]:
    """Claim a handoff, or confirm the caller's live claim (record returned unchanged)."""
    _require_receiver(record, actor_id)
    status = record["status"]
    if status == Status.PENDING:
        return _begin_claim(record, claim_id, now_ms)
    if status == Status.ACCEPTED:
        stale = claim_is_stale(record, now_ms)
        if claim_id == record["claim_id"]:
            if stale:
                raise LedgerError.handoff_conflict("handoff claim lease expired; acquire a new claim")
            return record
        if record["outcome"] == Outcome.FAILED or stale:
            return _begin_claim(record, claim_id, now_ms)
        raise LedgerError.handoff_conflict("handoff is already claimed by another live worker")
    raise LedgerError.handoff_conflict("completed handoff cannot be accepted")


def heartbeat(record: dict[str, Any], actor_id: str, claim_id: str, now_ms: int) -> dict[str, Any]:
    """Renew the lease of the caller's active claim."""
    _require_receiver(record, actor_id)
    if record["status"] != Status.ACCEPTED:
        raise LedgerError.handoff_conflict("handoff must be accepted before heartbeat")
    if claim_id != record["claim_id"]:
        raise LedgerError.handoff_conflict("heartbeat claim does not match the active handoff claim")
    if record["outcome"] == Outcome.FAILED:
        raise LedgerError.handoff_conflict("failed handoff claim cannot be heartbeated")
    if claim_is_stale(record, now_ms):
        raise LedgerError.handoff_conflict("handoff claim lease expired")
    return {**record, "claim_heartbeat_at_ms": now_ms, "claim_expires_at_ms": now_ms + LEASE_MS}


def return_result(
    record: dict[str, Any],
    actor_id: str,
    claim_id: str,
    fact: dict[str, Any],
    outcome: str,
    now_ms: int,
) -> dict[str, Any]:
    """Attach result evidence; fail closed unless the fact is the receiver's, in the session."""
    _require_receiver(record, actor_id)
    status = record["status"]
    if status == Status.ACCEPTED and claim_id != record["claim_id"]:
        raise LedgerError.handoff_conflict("result claim does not match the active handoff claim")
    if claim_is_stale(record, now_ms):
        raise LedgerError.handoff_conflict("handoff claim lease expired before result return")
    if fact["session_id"] != record["session_id"]:
        raise LedgerError.handoff_conflict("result fact belongs to a different session")
    if fact["source_id"] != record["source_id"]:
        raise LedgerError.handoff_conflict("result fact belongs to a different source")
    if fact["actor_id"] != record["to_actor"]:
        raise LedgerError.handoff_conflict("result fact was not written by the receiving actor")
    if status == Status.COMPLETED:
        same = (
            claim_id == record["claim_id"]
            and fact["fact_id"] == record["result_fact_id"]
            and outcome == record["outcome"]
        )
        if same:
            return record
        raise LedgerError.handoff_conflict("handoff is already completed with different evidence")
    if status == Status.PENDING:
        raise LedgerError.handoff_conflict("handoff must be accepted before returning a result")
    if outcome == Outcome.SUCCEEDED:
        return {**record, "result_fact_id": fact["fact_id"], "outcome": outcome, "status": Status.COMPLETED.value}
    # A failed claim keeps its id but loses its lease, so it never goes stale and a new claim
    # may replace it (dom/handoff.rs return_result).
    return {
        **record,
        "result_fact_id": fact["fact_id"],
        "outcome": outcome,
        "claim_heartbeat_at_ms": None,
        "claim_expires_at_ms": None,
    }
