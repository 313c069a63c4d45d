"""The handoff state machine: leases, guards, and the transitions as one table.

Theory of operation. A handoff is ``pending`` until its receiver accepts it with a claim id;
then it is ``accepted`` under a lease (``LEASE_MS`` unless the ledger was given another) that
heartbeats renew. Returning a
``succeeded`` result fact completes it (final); a ``failed`` one keeps it accepted with the
claim but without a lease, so the receiver may claim it again. A claim whose lease ran out is
stale: the same claim id can no longer act, a new claim may replace it.

Everything that changes a handoff record lives here. ``TRANSITIONS`` lists, per operation and
in upstream's order (``dom/handoff.rs`` ``accept_with_lease``, ``heartbeat``,
``return_result_at``; errata 6), rows of (from status, operation, guard) -> to status (with
the effect on the record) or a refusal. ``transition`` runs the first row whose status and
guard match, so the order decides which error a caller sees when several rules are broken at
once. The rules, ``tests/ref/test_state.py`` and the diagram in ``docs/ARCHITECTURE.md`` all
read this one table. Pure: time arrives as ``now_ms``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from ._commands import Op
from aidememo_wire.canonical import U64_MAX
from aidememo_wire.errors import ErrorCode, LedgerError
from ._records import Handoff, LedgerFact, Outcome, Status
from refkit.text import trim

__all__ = [
    "Status",
    "Outcome",
    "LEASE_MS",
    "Attempt",
    "Refusal",
    "Transition",
    "TRANSITIONS",
    "Guard",
    "Effect",
    "new_handoff",
    "claim_is_stale",
    "select",
    "transition",
    "text_problem",
]

LEASE_MS: Final = 120_000  # srv/product.rs HANDOFF_LEASE_MS

# Unicode's Cc (a closed set: C0, DEL, C1) without tab, line feed and carriage return.
_CONTROL: Final = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def text_problem(value: str, max_bytes: int) -> str | None:
    """Why a topic/content/focus/done_when text is refused (``dom/handoff.rs validate_text``)."""
    if not trim(value) or len(value.encode("utf-8")) > max_bytes:
        return "size"
    if _CONTROL.search(value):
        return "control"
    return None


def new_handoff(*, handoff_id: str, session_id: str, source_id: str | None, from_actor: str, to_actor: str,
                focus: str | None, done_when: str | None, context_id: str | None) -> Handoff:
    """A pending handoff with no claim (upstream ``HandoffRecord::new``)."""
    return Handoff(
        handoff_id=handoff_id, session_id=session_id, source_id=source_id, from_actor=from_actor,
        to_actor=to_actor, focus=focus, done_when=done_when, context_id=context_id, status=Status.PENDING,
        claim_id=None, claim_heartbeat_at_ms=None, claim_expires_at_ms=None, attempt_count=0,
        result_fact_id=None, outcome=None,
    )


def claim_is_stale(record: Handoff, now_ms: int) -> bool:
    """A live-looking claim whose lease has run out; a failed claim never goes stale."""
    expires = record.claim_expires_at_ms
    return (
        record.status is Status.ACCEPTED
        and record.outcome is not Outcome.FAILED
        and expires is not None
        and now_ms >= expires
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Attempt:
    """One transition request as the rules see it: who asks, with which claim, when, with what,
    and how long a lease the ledger grants."""

    op: Op
    actor_id: str
    claim_id: str
    now_ms: int
    lease_ms: int = LEASE_MS
    fact: LedgerFact | None = None  # handoff.return only: the result fact, loaded by the ledger
    outcome: Outcome | None = None  # handoff.return only


@dataclass(frozen=True, slots=True)
class Refusal:
    """A row's answer when the move is not allowed: the wire code and its detail."""

    code: ErrorCode
    detail: str

    def error(self) -> LedgerError:
        if self.code is ErrorCode.HANDOFF_ACTOR_MISMATCH:
            return LedgerError.actor_mismatch()
        return LedgerError.handoff_conflict(self.detail)


Guard: TypeAlias = Callable[[Handoff, Attempt], bool]
Effect: TypeAlias = Callable[[Handoff, Attempt], Handoff]


# -- guards: small named predicates; the table refers to them by name -------------------------
def always(record: Handoff, attempt: Attempt) -> bool:
    return True


def not_receiver(record: Handoff, attempt: Attempt) -> bool:
    return attempt.actor_id != record.to_actor


def lease_expired(record: Handoff, attempt: Attempt) -> bool:
    return claim_is_stale(record, attempt.now_ms)


def same_claim(record: Handoff, attempt: Attempt) -> bool:
    return attempt.claim_id == record.claim_id


def other_claim(record: Handoff, attempt: Attempt) -> bool:
    return attempt.claim_id != record.claim_id


def same_claim_live(record: Handoff, attempt: Attempt) -> bool:
    return same_claim(record, attempt) and not lease_expired(record, attempt)


def claim_failed(record: Handoff, attempt: Attempt) -> bool:
    return record.outcome is Outcome.FAILED


def failed_or_expired(record: Handoff, attempt: Attempt) -> bool:
    return claim_failed(record, attempt) or lease_expired(record, attempt)


def _fact(attempt: Attempt) -> LedgerFact:
    assert attempt.fact is not None, "handoff.return without its result fact"
    return attempt.fact


def fact_from_other_session(record: Handoff, attempt: Attempt) -> bool:
    return _fact(attempt).session_id != record.session_id


def fact_from_other_source(record: Handoff, attempt: Attempt) -> bool:
    return _fact(attempt).source_id != record.source_id


def fact_not_by_receiver(record: Handoff, attempt: Attempt) -> bool:
    return _fact(attempt).actor_id != record.to_actor


def same_evidence(record: Handoff, attempt: Attempt) -> bool:
    return (same_claim(record, attempt) and _fact(attempt).fact_id == record.result_fact_id
            and attempt.outcome is record.outcome)


def succeeded(record: Handoff, attempt: Attempt) -> bool:
    return attempt.outcome is Outcome.SUCCEEDED


def failed(record: Handoff, attempt: Attempt) -> bool:
    return attempt.outcome is Outcome.FAILED


# -- effects: what a move does to the record besides setting the target status ----------------
def unchanged(record: Handoff, attempt: Attempt) -> Handoff:
    return record


def begin_claim(record: Handoff, attempt: Attempt) -> Handoff:
    """A new claim with a fresh lease; the attempt counter counts it (dom ``begin_claim``)."""
    if record.attempt_count >= U64_MAX:
        raise LedgerError.handoff_conflict("handoff attempt counter overflow")
    return replace(record, claim_id=attempt.claim_id, claim_heartbeat_at_ms=attempt.now_ms,
                   claim_expires_at_ms=attempt.now_ms + attempt.lease_ms, attempt_count=record.attempt_count + 1,
                   result_fact_id=None, outcome=None)


def renew_lease(record: Handoff, attempt: Attempt) -> Handoff:
    return replace(record, claim_heartbeat_at_ms=attempt.now_ms, claim_expires_at_ms=attempt.now_ms + attempt.lease_ms)


def record_success(record: Handoff, attempt: Attempt) -> Handoff:
    """Success keeps the claim fields as they were (upstream does not clear them)."""
    return replace(record, result_fact_id=_fact(attempt).fact_id, outcome=Outcome.SUCCEEDED)


def record_failure(record: Handoff, attempt: Attempt) -> Handoff:
    """A failed claim keeps its id but loses its lease: it never goes stale, a new claim may
    replace it (``dom/handoff.rs return_result``)."""
    return replace(record, result_fact_id=_fact(attempt).fact_id, outcome=Outcome.FAILED,
                   claim_heartbeat_at_ms=None, claim_expires_at_ms=None)


@dataclass(frozen=True, slots=True)
class Transition:
    """One row: from ``source`` (None: any status), ``op`` under ``guard`` -> ``target``."""

    source: Status | None
    op: Op
    guard: Guard
    target: Status | Refusal
    effect: Effect = unchanged


def _conflict(detail: str) -> Refusal:
    return Refusal(ErrorCode.HANDOFF_CONFLICT, detail)


_NOT_RECEIVER: Final = Refusal(ErrorCode.HANDOFF_ACTOR_MISMATCH, "only the receiving actor may do this")
ANY: Final = None
P, A, C = Status.PENDING, Status.ACCEPTED, Status.COMPLETED

TRANSITIONS: Final[tuple[Transition, ...]] = (
    # handoff.accept (accept_with_lease)
    Transition(ANY, Op.ACCEPT, not_receiver, _NOT_RECEIVER),
    Transition(P, Op.ACCEPT, always, A, begin_claim),
    Transition(A, Op.ACCEPT, same_claim_live, A),  # the caller's live claim: confirmed, no change
    Transition(A, Op.ACCEPT, same_claim, _conflict("handoff claim lease expired; acquire a new claim")),
    Transition(A, Op.ACCEPT, failed_or_expired, A, begin_claim),  # a re-claim
    Transition(A, Op.ACCEPT, always, _conflict("handoff is already claimed by another live worker")),
    Transition(C, Op.ACCEPT, always, _conflict("completed handoff cannot be accepted")),
    # handoff.heartbeat (heartbeat)
    Transition(ANY, Op.HEARTBEAT, not_receiver, _NOT_RECEIVER),
    Transition(P, Op.HEARTBEAT, always, _conflict("handoff must be accepted before heartbeat")),
    Transition(C, Op.HEARTBEAT, always, _conflict("handoff must be accepted before heartbeat")),
    Transition(A, Op.HEARTBEAT, other_claim, _conflict("heartbeat claim does not match the active handoff claim")),
    Transition(A, Op.HEARTBEAT, claim_failed, _conflict("failed handoff claim cannot be heartbeated")),
    Transition(A, Op.HEARTBEAT, lease_expired, _conflict("handoff claim lease expired")),
    Transition(A, Op.HEARTBEAT, always, A, renew_lease),
    # handoff.return (return_result_at, then return_result)
    Transition(ANY, Op.RETURN, not_receiver, _NOT_RECEIVER),
    Transition(A, Op.RETURN, other_claim, _conflict("result claim does not match the active handoff claim")),
    Transition(ANY, Op.RETURN, lease_expired, _conflict("handoff claim lease expired before result return")),
    Transition(ANY, Op.RETURN, fact_from_other_session, _conflict("result fact belongs to a different session")),
    Transition(ANY, Op.RETURN, fact_from_other_source, _conflict("result fact belongs to a different source")),
    Transition(ANY, Op.RETURN, fact_not_by_receiver,
               _conflict("result fact was not written by the receiving actor")),
    Transition(C, Op.RETURN, same_evidence, C),  # the same evidence again: confirmed, no change
    Transition(C, Op.RETURN, always, _conflict("handoff is already completed with different evidence")),
    Transition(P, Op.RETURN, always, _conflict("handoff must be accepted before returning a result")),
    Transition(A, Op.RETURN, succeeded, C, record_success),
    Transition(A, Op.RETURN, failed, A, record_failure),
)


def select(record: Handoff, attempt: Attempt, table: tuple[Transition, ...] | None = None) -> Transition | None:
    """The first row of ``table`` (default ``TRANSITIONS``) whose status and guard match."""
    for row in TRANSITIONS if table is None else table:
        if row.op is attempt.op and (row.source is None or row.source is record.status) and row.guard(record, attempt):
            return row
    return None


def transition(record: Handoff, attempt: Attempt, table: tuple[Transition, ...] | None = None) -> Handoff:
    """Apply the matching row: the moved record, or the row's refusal raised as ``LedgerError``.

    A row that confirms without a change returns ``record`` itself.
    """
    row = select(record, attempt, table)
    if row is None:
        raise LedgerError.handoff_conflict(f"no transition for {attempt.op.value} from {record.status.value}")
    if isinstance(row.target, Refusal):
        raise row.target.error()
    moved = row.effect(record, attempt)
    return moved if moved.status is row.target else replace(moved, status=row.target)
