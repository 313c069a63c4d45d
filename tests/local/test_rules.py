"""The pure rules, without a store: transitions, guards in order, board lanes, CAS token."""

from __future__ import annotations


import pytest

from aidememo_cli._local import _rules as rules
from aidememo_cli._local._errors import LocalError, LocalErrorCode
from aidememo_cli._local._records import Assignment, Fact, FactType, Outcome, Status

FACT_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"


def pending(**changes: object) -> Assignment:
    base = Assignment(
        handoff_id="handoff-1", session_id="session-1", source_id="team", from_actor="a", to_actor="b", created_at=100
    )
    return base._replace(**changes)  # type: ignore[arg-type]


def evidence(**changes: object) -> Fact:
    base = Fact(
        id=FACT_ID, content="done", fact_type=FactType.NOTE, entity_ids=("E1",), entity_names=("session-1",),
        tags=(), source=None, source_id="team", actor_id="b", source_confidence=0.5, relevance_score=0.5,
        created_at=1, updated_at=1, observed_at=None, superseded_at=None, superseded_by=None, access_count=0,
        last_accessed_at=1, pinned=False,
    )
    return base._replace(**changes)  # type: ignore[arg-type]


def refusal(call: object, *args: object) -> str:
    with pytest.raises(LocalError) as info:
        call(*args)  # type: ignore[operator]
    assert info.value.code is LocalErrorCode.INVALID_INPUT
    return info.value.detail


def test_updated_at_is_strictly_increasing_even_within_one_millisecond() -> None:
    assert rules.next_updated_at(None, 50) == 50
    assert rules.next_updated_at(50, 50) == 51
    assert rules.next_updated_at(50, 10) == 51
    assert rules.next_updated_at(50, 70) == 70


def test_accept_pending_starts_attempt_one_and_bumps_revision() -> None:
    record = rules.accept(pending(), "b", None, 200)
    assert record is not None
    assert (record.status, record.accepted_at, record.attempt_count, record.revision) == (Status.ACCEPTED, 200, 1, 1)


def test_accept_with_the_same_claim_changes_nothing() -> None:
    accepted = rules.accept(pending(), "b", "worker-1", 200)
    assert accepted is not None
    assert rules.accept(accepted, "b", "worker-1", 300) is None
    manual = rules.accept(pending(), "b", None, 200)
    assert manual is not None and rules.accept(manual, "b", "  ", 300) is None  # blank claim is no claim


def test_accept_refusals_name_the_state() -> None:
    assert refusal(rules.accept, pending(), "c", None, 1) == "handoff handoff-1 is assigned to b, not c"
    claimed = pending(status=Status.ACCEPTED, claim_id="worker-1")
    assert refusal(rules.accept, claimed, "b", "worker-2", 1) == "handoff handoff-1 is already claimed by another worker"
    assert refusal(rules.accept, claimed, "b", None, 1) == "handoff handoff-1 is already claimed by another worker"
    done = pending(status=Status.COMPLETED)
    assert refusal(rules.accept, done, "b", None, 1) == "handoff handoff-1 is already completed"


def test_failed_attempt_is_reclaimed_with_a_new_claim_only() -> None:
    failed = pending(
        status=Status.ACCEPTED, claim_id="worker-1", attempt_count=1, outcome=Outcome.FAILED,
        result_fact_id=FACT_ID, returned_at=5, revision=2,
    )
    again = rules.accept(failed, "b", "worker-2", 400)
    assert again is not None
    assert (again.claim_id, again.attempt_count, again.outcome, again.result_fact_id, again.returned_at) == (
        "worker-2", 2, None, None, None,
    )
    assert again.revision == 3
    # A manual (claim-less) accept never re-claims: same absent claim is no change, and a
    # worker's failed claim cannot be taken over without a new claim.
    assert rules.accept(failed._replace(claim_id=None), "b", None, 1) is None
    assert refusal(rules.accept, failed, "b", None, 1) == "handoff handoff-1 is already claimed by another worker"


def test_heartbeat_needs_the_receiver_and_an_accepted_assignment() -> None:
    assert refusal(rules.heartbeat, pending(), "b", 1) == "handoff handoff-1 must be accepted before sending a heartbeat"
    accepted = pending(status=Status.ACCEPTED)
    assert refusal(rules.heartbeat, accepted, "a", 1) == "handoff handoff-1 is assigned to b, not a"
    beat = rules.heartbeat(accepted, "b", 900)
    assert (beat.heartbeat_count, beat.last_heartbeat_at, beat.revision) == (1, 900, 1)


@pytest.mark.parametrize("text", ["succeeded", " SUCCEEDED ", "Failed"])
def test_outcome_is_trimmed_and_lowercased(text: str) -> None:
    assert rules.parse_outcome(text) in (Outcome.SUCCEEDED, Outcome.FAILED)


def test_unknown_outcome_is_refused() -> None:
    assert refusal(rules.parse_outcome, "done") == "outcome must be succeeded or failed"


def test_return_rules_run_in_upstream_order() -> None:
    accepted = pending(status=Status.ACCEPTED, accepted_at=150)
    ok = Outcome.SUCCEEDED
    cases = [
        (pending(), "c", FACT_ID, evidence(), "handoff handoff-1 is assigned to b, not c"),
        (pending(), "b", FACT_ID, evidence(), "accept handoff handoff-1 before returning a result"),
        (accepted, "b", "not-a-ulid", evidence(), "result_fact_id must be a valid ULID"),
        (accepted, "b", FACT_ID, evidence(entity_names=()), f"result fact {FACT_ID} must be attached to handoff session session-1"),
        (accepted, "b", FACT_ID, evidence(source_id="other"), f"result fact {FACT_ID} must use the handoff source_id"),
        (accepted, "b", FACT_ID, evidence(source_id=None), f"result fact {FACT_ID} must use the handoff source_id"),
        (accepted, "b", FACT_ID, evidence(actor_id="a"), f"result fact {FACT_ID} must be written by receiving actor b"),
        (accepted, "b", FACT_ID, evidence(actor_id=None), f"result fact {FACT_ID} must be written by receiving actor b"),
    ]
    for record, actor, fact_id, fact, message in cases:
        assert refusal(rules.return_result, record, actor, ok, fact_id, fact, 1) == message


def test_return_of_a_missing_fact_is_fact_not_found() -> None:
    with pytest.raises(LocalError) as info:
        rules.return_result(pending(status=Status.ACCEPTED), "b", Outcome.SUCCEEDED, FACT_ID, None, 1)
    assert info.value.code is LocalErrorCode.FACT_NOT_FOUND
    assert str(info.value) == f"fact not found: '{FACT_ID}'"


def test_successful_return_completes_and_identical_repeat_changes_nothing() -> None:
    done = rules.return_result(pending(status=Status.ACCEPTED), "b", Outcome.SUCCEEDED, FACT_ID, evidence(), 700)
    assert done is not None
    assert (done.status, done.outcome, done.result_fact_id, done.completed_at, done.returned_at) == (
        Status.COMPLETED, Outcome.SUCCEEDED, FACT_ID, 700, 700,
    )
    # The completed check runs before the evidence checks: even a vanished fact is "no change".
    assert rules.return_result(done, "b", Outcome.SUCCEEDED, f" {FACT_ID} ", None, 800) is None
    other = "01HYYYYYYYYYYYYYYYYYYYYYYY"
    assert refusal(rules.return_result, done, "b", Outcome.SUCCEEDED, other, evidence(id=other), 1) == (
        "handoff handoff-1 is already completed with a different result"
    )
    assert refusal(rules.return_result, done, "b", Outcome.FAILED, FACT_ID, evidence(), 1).endswith("different result")


def test_failed_return_stays_accepted_and_may_be_overwritten() -> None:
    failed = rules.return_result(pending(status=Status.ACCEPTED), "b", Outcome.FAILED, FACT_ID, evidence(), 700)
    assert failed is not None and failed.status is Status.ACCEPTED and failed.completed_at is None
    fixed = rules.return_result(failed, "b", Outcome.SUCCEEDED, FACT_ID, evidence(), 800)
    assert fixed is not None and fixed.status is Status.COMPLETED


def test_status_is_for_participants_only() -> None:
    rules.check_status_reader(pending(), "a")
    rules.check_status_reader(pending(), "b")
    assert refusal(rules.check_status_reader, pending(), "c") == "handoff handoff-1 is not routed through actor c"


def test_self_handoff_is_allowed_locally_but_blank_or_control_actors_are_not() -> None:
    kwargs = dict(
        handoff_id="h", session_id="s", source_id=None, to_agent=None, focus=None, done_when=None,
        upstream_task_id=None, upstream_board_id=None, now_ms=1,
    )
    assert rules.new_assignment(from_actor="a", to_actor="a", **kwargs).to_actor == "a"  # type: ignore[arg-type]
    assert refusal(lambda: rules.new_assignment(from_actor=" ", to_actor="a", **kwargs)) == "from_actor must not be empty"  # type: ignore[arg-type]
    assert refusal(lambda: rules.new_assignment(from_actor="a", to_actor="b\x07", **kwargs)) == (  # type: ignore[arg-type]
        "to_actor must not contain control characters"
    )


def test_upstream_system_is_hermes_only_when_a_card_is_named() -> None:
    kwargs = dict(
        handoff_id="h", session_id="s", source_id=None, from_actor="a", to_actor="b", to_agent=None, focus=None,
        done_when=None, now_ms=1,
    )
    assert rules.new_assignment(upstream_task_id="t1", upstream_board_id="B", **kwargs).upstream_system == "hermes_kanban"  # type: ignore[arg-type]
    assert rules.new_assignment(upstream_task_id=None, upstream_board_id="B", **kwargs).upstream_system is None  # type: ignore[arg-type]


HOUR = rules.DEFAULT_STALE_AFTER_MS


@pytest.mark.parametrize(
    ("record", "now", "lane", "action", "stale"),
    [
        (pending(), 100 + HOUR - 1, rules.Lane.READY, rules.NextAction.ACCEPT_OR_RUN, False),
        (pending(), 100 + HOUR, rules.Lane.ATTENTION, rules.NextAction.INSPECT_OR_RUN, True),
        (pending(status=Status.ACCEPTED, accepted_at=200), 300, rules.Lane.IN_PROGRESS, rules.NextAction.WAIT_FOR_RESULT, False),
        (pending(status=Status.ACCEPTED, accepted_at=200), 200 + HOUR, rules.Lane.ATTENTION, rules.NextAction.CHECK_WORKER_LIVENESS, True),
        (pending(status=Status.ACCEPTED, accepted_at=200, last_heartbeat_at=200 + HOUR), 200 + HOUR + 5, rules.Lane.IN_PROGRESS, rules.NextAction.WAIT_FOR_RESULT, False),
        (pending(status=Status.ACCEPTED, accepted_at=200, outcome=Outcome.FAILED, returned_at=250), 300, rules.Lane.ATTENTION, rules.NextAction.ORCHESTRATOR_RETRY_OR_CLOSE, False),
        (pending(status=Status.COMPLETED, accepted_at=200, returned_at=250), 250 + 10 * HOUR, rules.Lane.RETURNED, rules.NextAction.VALIDATE_RESULT, False),
    ],
)
def test_board_lanes_follow_the_first_matching_row(
    record: Assignment, now: int, lane: rules.Lane, action: rules.NextAction, stale: bool
) -> None:
    item = rules.board_item(record, now, HOUR)
    assert (item.lane, item.next_action, item.stale) == (lane, action, stale)
    assert item.lifecycle_owner == "caller"


def test_board_age_saturates_and_names_hermes_as_owner() -> None:
    item = rules.board_item(pending(upstream_system="hermes_kanban"), 50, HOUR)
    assert (item.age_ms, item.last_activity_at, item.lifecycle_owner) == (0, 100, "hermes_kanban")
    assert refusal(rules.board_item, pending(), 1, 0) == "stale_after must be greater than zero"
