"""The handoff state machine over HTTP: send, accept, return, who may do what (handoff §2.2).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo.actors import HandoffRef, Project, setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, record_of

NULL_ON_SEND = ("claim_id", "claim_heartbeat_at_ms", "claim_expires_at_ms", "result_fact_id", "outcome")


def _accepted(world: World) -> tuple[Project, HandoffRef]:
    """A project with a handoff the receiver has accepted: (project, ref)."""
    project = world.project(writers=("sender", "receiver", "other"))
    ref = project.sender.setup_handoff(project.receiver)
    return project, project.receiver.setup_accept(ref)


@isolation.SHARED
@pytest.mark.requirement("AM-HL-SEND-1")
def test_send_creates_a_pending_handoff(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    session_id = project.sender.setup_session()
    handoff_id = world.new_id("handoff")
    receipt = expect_receipt(project.sender.send(session_id, project.receiver, handoff_id), kind="handoff",
                             resource_id=handoff_id)
    assert receipt["revision"] == 1, f"send must be revision 1, got {receipt['revision']}"
    revision, record = record_of(project.receiver.status(handoff_id))
    assert revision == 1 and record.get("status") == "pending" and record.get("attempt_count") == 0, record
    assert record.get("from_actor") == project.sender.actor_id and record.get("to_actor") == project.receiver.actor_id, (
        f"from_actor {record.get('from_actor')!r}, to_actor {record.get('to_actor')!r}")
    assert all(record.get(name, "absent") is None for name in NULL_ON_SEND), f"fields must be null on send: {record!r}"


@isolation.SHARED
@reads("AM-HL-SEND-2", "foreign", "missing")
def test_send_with_a_foreign_context_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    sender = project.sender
    session_id = sender.setup_session()
    context_id = world.new_id("context")
    setup_ok(sender.create_context(session_id, world.new_id("other-handoff"), project.receiver, context_id),
             "create context for another handoff")
    expect_error(sender.send(session_id, project.receiver, context_id=context_id), 409, "handoff_conflict")
    expect_error(sender.send(session_id, project.receiver, context_id=world.new_id("missing")), 404,
                 "resource_not_found")


@isolation.SHARED
@reads("AM-HO-1", "actor")
@pytest.mark.parametrize("who", ["sender", "other"])
def test_accept_by_a_non_receiver_is_refused(world: World, who: str) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver", "other"))
    ref = project.sender.setup_handoff(project.receiver)
    exchange = project.actors[who].accept(ref.handoff_id, ref.revision, world.new_id("claim"))
    expect_error(exchange, 403, "handoff_actor_mismatch")
    revision, record = record_of(project.receiver.status(ref.handoff_id))
    assert revision == 1 and record["status"] == "pending", f"refused accept changed the handoff: {record!r}"


@isolation.SHARED
@reads("AM-HO-1", "stale")
def test_accept_with_a_stale_revision_is_refused(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = project.sender.setup_handoff(project.receiver)
    expect_error(project.receiver.accept(ref.handoff_id, ref.revision + 1, world.new_id("claim")), 409,
                 "stale_revision")
    accepted = project.receiver.setup_accept(ref)
    expect_error(project.receiver.accept(ref.handoff_id, ref.revision, accepted.claim), 409, "stale_revision")


@isolation.SHARED
@reads("AM-HO-3", "competing")
def test_competing_claim_on_a_live_lease_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    # A new claim, and near misses of the live one sorting after and before it: a claim matches
    # whole (a server that ordered or prefix-matched claims confirmed one of them).
    for other in (world.new_id("claim"), ref.claim + "x", ref.claim[:-1]):
        expect_error(project.receiver.accept(ref.handoff_id, ref.revision, other), 409, "handoff_conflict")
        _, record = record_of(project.receiver.status(ref.handoff_id))
        assert record["claim_id"] == ref.claim_id, f"a refused claim replaced the live one: {record['claim_id']!r}"


@isolation.SHARED
@reads("AM-HO-3", "wrong-claim", "sender")
def test_heartbeat_with_the_wrong_claim_or_by_the_sender_is_refused(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    expect_error(project.receiver.heartbeat(ref.handoff_id, ref.revision, world.new_id("claim")), 409,
                 "handoff_conflict")
    expect_error(project.sender.heartbeat(ref.handoff_id, ref.revision, ref.claim), 403, "handoff_actor_mismatch")


@isolation.SHARED
@reads("AM-HO-4", "foreign-fact")
def test_return_with_another_actors_fact_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    foreign = project.other.setup_fact(ref.session_id)
    exchange = project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, foreign)
    expect_error(exchange, 409, "handoff_conflict")
    _, record = record_of(project.receiver.status(ref.handoff_id))
    assert record["status"] == "accepted" and record["result_fact_id"] is None, f"refused return left {record!r}"


@isolation.SHARED
@reads("AM-HO-4", "wrong-claim")
def test_return_with_the_wrong_claim_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    fact = project.receiver.setup_fact(ref.session_id)
    exchange = project.receiver.return_result(ref.handoff_id, ref.revision, world.new_id("claim"), fact)
    expect_error(exchange, 409, "handoff_conflict")


@isolation.SHARED
@reads("AM-HO-4", "completes")
def test_succeeded_return_completes(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    fact = project.receiver.setup_fact(ref.session_id)
    receipt = expect_receipt(project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact),
                             kind="handoff", resource_id=ref.handoff_id)
    assert receipt["revision"] == ref.revision + 1, f"return must take revision {ref.revision + 1}"
    revision, record = record_of(project.sender.status(ref.handoff_id))
    assert (record["status"], record["outcome"], record["result_fact_id"]) == ("completed", "succeeded", fact), record
    assert record["claim_id"] == ref.claim_id, "a succeeded return keeps the claim"


@isolation.SHARED
@reads("AM-HO-5", "keeps", "reclaim")
def test_failed_return_keeps_accepted_and_allows_a_new_claim(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    receiver = project.receiver
    fact = receiver.setup_fact(ref.session_id)
    receipt = expect_receipt(receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact, "failed"))
    revision, record = record_of(receiver.status(ref.handoff_id))
    assert record["status"] == "accepted" and record["outcome"] == "failed", f"failed return left {record!r}"
    assert record["claim_heartbeat_at_ms"] is None and record["claim_expires_at_ms"] is None, (
        f"failed return must clear the lease: {record!r}")
    new_claim = world.new_id("claim")
    receipt = expect_receipt(receiver.accept(ref.handoff_id, receipt["revision"], new_claim))
    _, record = record_of(receiver.status(ref.handoff_id))
    assert record["claim_id"] == new_claim and record["attempt_count"] == 2, f"re-claim left {record!r}"
    assert record["outcome"] is None and record["result_fact_id"] is None, "a re-claim clears the result"


@isolation.SHARED
@pytest.mark.requirement("AM-HO-6")
def test_replayed_accept_after_completion_returns_the_original_receipt(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = project.sender.setup_handoff(project.receiver)
    claim, command_id = world.new_id("claim"), world.new_id("accept")
    first = project.receiver.accept(ref.handoff_id, ref.revision, claim, command_id=command_id)
    accepted = expect_receipt(first)
    fact = project.receiver.setup_fact(ref.session_id)
    setup_ok(project.receiver.return_result(ref.handoff_id, accepted["revision"], claim, fact), "return")
    late = project.receiver.accept(ref.handoff_id, ref.revision, claim, command_id=command_id)
    expect_receipt(late)
    assert late.body == first.body, f"late replay differs:\n{first.body!r}\n{late.body!r}"


@isolation.SHARED
@pytest.mark.requirement("AM-HL-ACC-1")
def test_same_claim_accept_under_a_new_command_id_commits_unchanged(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    before_revision, before = record_of(project.receiver.status(ref.handoff_id))
    receipt = expect_receipt(project.receiver.accept(ref.handoff_id, ref.revision, ref.claim))
    assert receipt["revision"] == before_revision + 1, "a same-claim accept still commits a new revision (ERRATA 5)"
    revision, after = record_of(project.receiver.status(ref.handoff_id))
    assert after == before, f"same-claim accept changed the record:\n{before!r}\n{after!r}"


@isolation.SHARED
@pytest.mark.requirement("AM-HL-ACC-2")
def test_completed_handoff_cannot_be_accepted(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    fact = project.receiver.setup_fact(ref.session_id)
    done = setup_ok(project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), "return")
    for claim in (ref.claim, world.new_id("claim")):
        expect_error(project.receiver.accept(ref.handoff_id, done["revision"], claim), 409, "handoff_conflict")


@isolation.SHARED
@pytest.mark.requirement("AM-HL-RET-1")
def test_return_on_a_pending_handoff_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = project.sender.setup_handoff(project.receiver)
    fact = project.receiver.setup_fact(ref.session_id)
    exchange = project.receiver.return_result(ref.handoff_id, ref.revision, world.new_id("claim"), fact)
    expect_error(exchange, 409, "handoff_conflict")


@isolation.SHARED
@pytest.mark.requirement("AM-HL-RET-2")
def test_return_with_a_missing_fact_is_not_found(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    exchange = project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, world.new_id("no-fact"))
    expect_error(exchange, 404, "resource_not_found")


@isolation.SHARED
@pytest.mark.requirement("AM-HL-RET-3")
def test_return_with_a_fact_of_another_session_fails_closed(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    other_session = project.receiver.setup_session()
    fact = project.receiver.setup_fact(other_session)
    expect_error(project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), 409,
                 "handoff_conflict")
    revision, record = record_of(project.receiver.status(ref.handoff_id))
    assert revision == ref.revision and record["status"] == "accepted", f"refused return changed {record!r}"


@isolation.SHARED
@pytest.mark.requirement("AM-HL-RET-3")
def test_return_with_a_fact_of_another_source_fails_closed(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = project.receiver.setup_accept(project.sender.setup_handoff(project.receiver,
                                                                     project.sender.setup_session("src-a")))
    other = project.receiver.setup_session("src-b")
    fact = project.receiver.setup_fact(other)
    expect_error(project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), 409,
                 "handoff_conflict")


@isolation.SHARED
@reads("AM-HL-RET-4", "identical", "other-evidence")
def test_completed_handoff_accepts_only_identical_evidence(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    receiver = project.receiver
    fact = receiver.setup_fact(ref.session_id)
    done = setup_ok(receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), "return")
    revision, before = record_of(receiver.status(ref.handoff_id))
    again = expect_receipt(receiver.return_result(ref.handoff_id, done["revision"], ref.claim, fact))
    assert again["revision"] == done["revision"] + 1, "identical evidence under a new command id commits (ERRATA 5)"
    _, after = record_of(receiver.status(ref.handoff_id))
    assert after == before, "identical evidence changed the completed record"
    other_fact = receiver.setup_fact(ref.session_id)
    expect_error(receiver.return_result(ref.handoff_id, again["revision"], ref.claim, other_fact), 409,
                 "handoff_conflict")
    expect_error(receiver.return_result(ref.handoff_id, again["revision"], ref.claim, fact, "failed"), 409,
                 "handoff_conflict")


@isolation.SHARED
@pytest.mark.requirement("AM-HL-RET-6")
@pytest.mark.parametrize("outcome", ["done", "SUCCEEDED", ""])
def test_unknown_outcome_is_invalid(world: World, outcome: str) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    fact = project.receiver.setup_fact(ref.session_id)
    exchange = project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact, outcome)
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-HL-WHO-1", "heartbeat", "return")
@pytest.mark.parametrize("who", ["sender", "other"])
def test_heartbeat_and_return_by_a_non_receiver_are_refused(world: World, who: str) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    actor = project.actors[who]
    fact = actor.setup_fact(ref.session_id)
    expect_error(actor.heartbeat(ref.handoff_id, ref.revision, ref.claim), 403, "handoff_actor_mismatch")
    expect_error(actor.return_result(ref.handoff_id, ref.revision, ref.claim, fact), 403,
                 "handoff_actor_mismatch")


@isolation.SHARED
@reads("AM-HL-WHO-2", "participants", "others", "missing")
def test_status_is_served_to_participants_only(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver", "other"), readers=("reader",))
    ref = project.sender.setup_handoff(project.receiver)
    for who in ("sender", "receiver"):
        record_of(project.actors[who].status(ref.handoff_id))
    for who in ("other", "reader"):
        expect_error(project.actors[who].status(ref.handoff_id), 403, "handoff_actor_mismatch")
    expect_error(project.sender.status(world.new_id("missing")), 404, "resource_not_found")
