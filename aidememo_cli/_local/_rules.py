"""Every rule of the local handoff flow, as pure functions (no I/O, no clock, no randomness).

Theory of operation: a command loads an ``Assignment`` and the row's ``updated_at``, asks a
function here for the next record, and the store writes it only if ``updated_at`` is still the
one it loaded (CAS). A function returns ``None`` when the command is an identical retry that
must change nothing (same claim on accept, same evidence on return): no write, no revision.
Guards run in upstream's order (handoff spec §2.3, §6.3) and raise ``invalid_input`` with
upstream's sentences; they differ from the remote rules on purpose (no leases, optional claim,
self-handoff allowed), so nothing here is shared with the server's state machine.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from refkit.records import distinct
from ._errors import LocalError, LocalErrorCode, invalid_input
from ._ids import is_ulid
from ._records import Assignment, Fact, Outcome, Status

__all__ = [
    "Lane",
    "NextAction",
    "BoardItem",
    "next_updated_at",
    "check_actor",
    "new_assignment",
    "accept",
    "heartbeat",
    "complete",
    "return_result",
    "check_status_reader",
    "parse_outcome",
    "board_item",
    "check_stale_after",
    "parse_duration_ms",
    "check_result_fact_id",
    "is_result_fact_id",
    "DEFAULT_STALE_AFTER_MS",
    "DEFAULT_RUN_TIMEOUT_S",
    "DEFAULT_HEARTBEAT_INTERVAL_S",
]

# Upstream's board default (`--stale-after 1h`).
DEFAULT_STALE_AFTER_MS = 3_600_000
# Upstream's worker-lane defaults for `handoff run`: 30 minutes per run, a heartbeat per hour.
DEFAULT_RUN_TIMEOUT_S = 1800.0
DEFAULT_HEARTBEAT_INTERVAL_S = 3600.0


def next_updated_at(previous: int | None, now_ms: int) -> int:
    """The CAS token of a write: strictly increasing even within one millisecond."""
    return now_ms if previous is None else max(now_ms, previous + 1)


def check_actor(label: str, value: str | None) -> str:
    """An actor alias: any non-blank text without control characters (it is not authentication)."""
    alias = (value or "").strip()
    if not alias:
        raise invalid_input(f"{label} must not be empty")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in alias):
        raise invalid_input(f"{label} must not contain control characters")
    return alias


def new_assignment(
    *,
    handoff_id: str,
    session_id: str,
    source_id: str | None,
    from_actor: str,
    to_actor: str,
    to_agent: str | None,
    focus: str | None,
    done_when: str | None,
    upstream_task_id: str | None,
    upstream_board_id: str | None,
    now_ms: int,
    from_agent: str | None = None,
    from_profile: str | None = None,
    to_profile: str | None = None,
) -> Assignment:
    """A fresh ``pending`` pointer. Sender and receiver may be equal locally (spec §12 item 10)."""
    return Assignment(
        handoff_id=handoff_id,
        session_id=session_id,
        source_id=source_id,
        from_actor=check_actor("from_actor", from_actor),
        to_actor=check_actor("to_actor", to_actor),
        from_agent=from_agent,
        from_profile=from_profile,
        to_agent=to_agent,
        to_profile=to_profile,
        focus=focus,
        done_when=done_when,
        created_at=now_ms,
        # Hermes owns the card's lifecycle only when a card is named.
        upstream_system="hermes_kanban" if upstream_task_id else None,
        upstream_task_id=upstream_task_id,
        upstream_board_id=upstream_board_id,
    )


def _ensure_receiver(record: Assignment, actor: str) -> None:
    if actor != record.to_actor:
        raise invalid_input(
            f"handoff {record.handoff_id} is assigned to {record.to_actor}, not {actor}"
        )


def accept(record: Assignment, actor: str, claim_id: str | None, now_ms: int) -> Assignment | None:
    """Accept (optionally with a claim); ``None`` means an identical retry that changes nothing."""
    claim = (claim_id or "").strip() or None
    if claim is not None:
        check_actor("claim_id", claim)
    _ensure_receiver(record, actor)
    match record.status:
        case Status.PENDING:
            return record._replace(
                status=Status.ACCEPTED,
                accepted_at=now_ms,
                claim_id=claim,
                attempt_count=record.attempt_count + 1,
                revision=record.revision + 1,
            )
        case Status.ACCEPTED:
            if record.claim_id == claim:  # both absent counts as the same claim
                return None
            if record.outcome is Outcome.FAILED and claim is not None:
                # A failed attempt may be re-claimed by a new worker token.
                return record._replace(
                    claim_id=claim,
                    attempt_count=record.attempt_count + 1,
                    accepted_at=now_ms,
                    result_fact_id=None,
                    outcome=None,
                    returned_at=None,
                    revision=record.revision + 1,
                )
            raise invalid_input(f"handoff {record.handoff_id} is already claimed by another worker")
        case Status.COMPLETED:
            raise invalid_input(f"handoff {record.handoff_id} is already completed")
    raise AssertionError(record.status)


def heartbeat(record: Assignment, actor: str, now_ms: int) -> Assignment:
    """Liveness bookkeeping only: no claim check and no lease."""
    _ensure_receiver(record, actor)
    if record.status is not Status.ACCEPTED:
        raise invalid_input(
            f"handoff {record.handoff_id} must be accepted before sending a heartbeat"
        )
    return record._replace(
        last_heartbeat_at=now_ms,
        heartbeat_count=record.heartbeat_count + 1,
        revision=record.revision + 1,
    )


def complete(record: Assignment, actor: str, now_ms: int) -> Assignment | None:
    """Upstream's legacy completion: no evidence, no claim or outcome check (``None``: already
    completed, nothing changes). ``return`` is the fail-closed way to finish an assignment."""
    _ensure_receiver(record, actor)
    match record.status:
        case Status.ACCEPTED:
            return record._replace(status=Status.COMPLETED, completed_at=now_ms, revision=record.revision + 1)
        case Status.COMPLETED:
            return None
        case Status.PENDING:
            raise invalid_input(f"accept handoff {record.handoff_id} before completing it")
    raise AssertionError(record.status)


def parse_outcome(text: str) -> Outcome:
    """Outcomes are trimmed and lower-cased before the check, as upstream does."""
    try:
        return Outcome(text.strip().lower())
    except ValueError:
        raise invalid_input("outcome must be succeeded or failed") from None


def is_result_fact_id(text: str) -> bool:
    return is_ulid(text.strip())


def check_result_fact_id(result_fact_id: str) -> str:
    fact_id = result_fact_id.strip()
    if not is_ulid(fact_id):
        raise invalid_input("result_fact_id must be a valid ULID")
    return fact_id


def return_result(
    record: Assignment,
    actor: str,
    outcome: Outcome,
    result_fact_id: str,
    fact: Fact | None,
    now_ms: int,
) -> Assignment | None:
    """Return evidence, fail-closed; ``None`` means the identical return was already recorded.

    ``fact`` is the stored fact with ``result_fact_id`` (``None`` when absent). A refused return
    leaves the record as it was.
    """
    _ensure_receiver(record, actor)
    given = result_fact_id.strip()
    if record.status is Status.PENDING:
        raise invalid_input(f"accept handoff {record.handoff_id} before returning a result")
    if record.status is Status.COMPLETED:
        # Checked before the evidence, as upstream does: a completed handoff only ever
        # answers "same evidence, nothing to do" or a refusal.
        if record.result_fact_id == given and record.outcome is outcome:
            return None
        raise invalid_input(
            f"handoff {record.handoff_id} is already completed with a different result"
        )
    fact_id = check_result_fact_id(given).upper()  # upstream prints the parsed ULID
    if fact is None:
        raise LocalError(LocalErrorCode.FACT_NOT_FOUND, fact_id)
    if record.session_id.lower() not in {name.lower() for name in fact.entity_names}:
        raise invalid_input(
            f"result fact {fact_id} must be attached to handoff session {record.session_id}"
        )
    if fact.source_id != record.source_id:
        raise invalid_input(f"result fact {fact_id} must use the handoff source_id")
    if fact.actor_id != actor:
        raise invalid_input(f"result fact {fact_id} must be written by receiving actor {actor}")
    succeeded = outcome is Outcome.SUCCEEDED
    return record._replace(
        result_fact_id=given,
        outcome=outcome,
        returned_at=now_ms,
        status=Status.COMPLETED if succeeded else record.status,
        completed_at=now_ms if succeeded else record.completed_at,
        revision=record.revision + 1,
    )


def check_status_reader(record: Assignment, actor: str) -> None:
    """``status`` is for the two participants; ``show`` needs no alias."""
    if actor not in (record.from_actor, record.to_actor):
        raise invalid_input(f"handoff {record.handoff_id} is not routed through actor {actor}")


class Lane(StrEnum):
    READY = "ready"
    IN_PROGRESS = "in_progress"
    ATTENTION = "attention"
    RETURNED = "returned"


class NextAction(StrEnum):
    INSPECT_OR_RUN = "inspect_or_run"
    ACCEPT_OR_RUN = "accept_or_run"
    ORCHESTRATOR_RETRY_OR_CLOSE = "orchestrator_retry_or_close"
    CHECK_WORKER_LIVENESS = "check_worker_liveness"
    WAIT_FOR_RESULT = "wait_for_result"
    VALIDATE_RESULT = "validate_result"


@distinct
class BoardItem(NamedTuple):
    """One derived board row; the board is a view, not a second lifecycle."""

    assignment: Assignment
    lane: Lane
    stale: bool
    age_ms: int
    last_activity_at: int
    next_action: NextAction
    lifecycle_owner: str

    def to_json(self) -> dict[str, object]:
        return {
            "assignment": self.assignment.to_json(),
            "lane": str(self.lane),
            "stale": self.stale,
            "age_ms": self.age_ms,
            "last_activity_at": self.last_activity_at,
            "next_action": str(self.next_action),
            "lifecycle_owner": self.lifecycle_owner,
        }


_DURATION_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000,
                   "y": 31_536_000_000}


def parse_duration_ms(text: str) -> int:
    """Upstream's ``parse_duration_to_ms``: digits then one unit of s/m/h/d/w/y (required)."""
    value = text.strip()
    if not value:
        raise invalid_input("empty duration")
    if not value[-1].isascii() or not value[-1].isalpha():
        raise invalid_input(f"duration needs a unit suffix (s/m/h/d/w/y), got: {value}")
    number, unit = value[:-1], value[-1].lower()
    if not (number.isascii() and number.isdigit()):
        raise invalid_input(f"invalid number in duration: {value}")
    if unit not in _DURATION_UNITS:
        raise invalid_input(f"unknown duration unit '{unit}' in: {value}")
    return int(number) * _DURATION_UNITS[unit]


def check_stale_after(stale_after_ms: int) -> int:
    if stale_after_ms <= 0:
        raise invalid_input("stale_after must be greater than zero")
    return stale_after_ms


def board_item(record: Assignment, generated_at: int, stale_after_ms: int) -> BoardItem:
    """Derive lane and next action; the first matching row of upstream's table wins."""
    check_stale_after(stale_after_ms)
    last = (
        record.returned_at
        if record.returned_at is not None
        else record.last_heartbeat_at
        if record.last_heartbeat_at is not None
        else record.accepted_at
        if record.accepted_at is not None
        else record.created_at
    )
    age = max(0, generated_at - last)
    stale = record.status is not Status.COMPLETED and age >= stale_after_ms
    if record.status is Status.PENDING:
        lane, action = (
            (Lane.ATTENTION, NextAction.INSPECT_OR_RUN)
            if stale
            else (Lane.READY, NextAction.ACCEPT_OR_RUN)
        )
    elif record.status is Status.ACCEPTED:
        if record.outcome is Outcome.FAILED:
            lane, action = Lane.ATTENTION, NextAction.ORCHESTRATOR_RETRY_OR_CLOSE
        elif stale:
            lane, action = Lane.ATTENTION, NextAction.CHECK_WORKER_LIVENESS
        else:
            lane, action = Lane.IN_PROGRESS, NextAction.WAIT_FOR_RESULT
    else:
        lane, action = Lane.RETURNED, NextAction.VALIDATE_RESULT
    owner = "hermes_kanban" if record.upstream_system == "hermes_kanban" else "caller"
    return BoardItem(
        assignment=record,
        lane=lane,
        stale=stale,
        age_ms=age,
        last_activity_at=last,
        next_action=action,
        lifecycle_owner=owner,
    )
