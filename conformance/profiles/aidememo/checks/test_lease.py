"""Claim leases: length, renewal, expiry and fencing (handoff §2.2, §4.4, §7).

Expiry checks (``after_lease_expiry``) observe expiry on the ``test-clock`` extension or, with
``--real-time-leases``, by one real wait shared by all of them (see ``leases``); they read the
lease length from the server's answers. Without either they are not scored.

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
from conformance.profiles.aidememo.leases import Arranged, after_lease_expiry

LEASE_MS = 120_000


def _accepted(world: World) -> tuple[Project, HandoffRef]:
    project = world.project(writers=("sender", "receiver"))
    ref = project.sender.setup_handoff(project.receiver)
    return project, project.receiver.setup_accept(ref)


@isolation.SHARED
@pytest.mark.requirement("AM-HO-2")
def test_accept_grants_a_lease_of_120_seconds(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    _, record = record_of(project.receiver.status(ref.handoff_id))
    assert record["status"] == "accepted" and record["claim_id"] == ref.claim, record
    assert record["attempt_count"] == 1, f"first accept must make attempt_count 1, got {record['attempt_count']}"
    heartbeat, expires = record["claim_heartbeat_at_ms"], record["claim_expires_at_ms"]
    assert isinstance(heartbeat, int) and isinstance(expires, int), f"lease fields missing: {record!r}"
    assert expires - heartbeat == LEASE_MS, f"lease is {expires - heartbeat} ms, expected {LEASE_MS}"


@isolation.SHARED
@pytest.mark.requirement("AM-HL-HB-1")
def test_heartbeat_renews_the_lease_only(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    receiver = project.receiver
    _, before = record_of(receiver.status(ref.handoff_id))
    if world.clock_is_virtual:
        world.advance_clock(30_000)
    receipt = expect_receipt(receiver.heartbeat(ref.handoff_id, ref.revision, ref.claim))
    assert receipt["revision"] == ref.revision + 1, "a heartbeat commits a new revision"
    _, after = record_of(receiver.status(ref.handoff_id))
    assert after["claim_expires_at_ms"] - after["claim_heartbeat_at_ms"] == LEASE_MS, f"renewed lease {after!r}"
    assert after["claim_heartbeat_at_ms"] >= before["claim_heartbeat_at_ms"], "heartbeat moved the lease backwards"
    if world.clock_is_virtual:
        assert after["claim_expires_at_ms"] >= before["claim_expires_at_ms"] + 30_000, (
            f"after 30 s the heartbeat must push expiry from {before['claim_expires_at_ms']} by 30000, "
            f"got {after['claim_expires_at_ms']}")
    unchanged = {k: before[k] for k in before if k not in ("claim_heartbeat_at_ms", "claim_expires_at_ms")}
    assert {k: after[k] for k in unchanged} == unchanged, f"heartbeat changed more than the lease:\n{before}\n{after}"


@isolation.SHARED
@reads("AM-HL-HB-2", "pending")
def test_heartbeat_on_a_pending_handoff_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = project.sender.setup_handoff(project.receiver)
    expect_error(project.receiver.heartbeat(ref.handoff_id, ref.revision, world.new_id("claim")), 409,
                 "handoff_conflict")


@isolation.SHARED
@reads("AM-HL-HB-2", "failed")
def test_heartbeat_after_a_failed_return_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = _accepted(world)
    fact = project.receiver.setup_fact(ref.session_id)
    failed = setup_ok(project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact, "failed"),
                      "failed return")
    expect_error(project.receiver.heartbeat(ref.handoff_id, failed["revision"], ref.claim), 409,
                 "handoff_conflict")


def _leased(world: World) -> Arranged:
    project = world.project(writers=("sender", "receiver"))
    ref, lease = project.receiver.setup_lease(project.sender.setup_handoff(project.receiver))
    return Arranged(value=(project, ref), lease=lease)


def _leased_with_fact(world: World) -> Arranged:
    arranged = _leased(world)
    project, ref = arranged.value
    arranged.value = (project, ref, project.receiver.setup_fact(ref.session_id))
    return arranged


def _heartbeat_before_expiry(world: World) -> Arranged:
    arranged = _leased(world)
    project, ref = arranged.value
    arranged.before_expiry = lambda: project.receiver.heartbeat(ref.handoff_id, ref.revision, ref.claim)
    return arranged


@isolation.SHARED
@after_lease_expiry(_leased)
@pytest.mark.requirement("AM-HL-HB-3")
def test_expired_claim_cannot_heartbeat(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = world.after_lease_expiry().value
    expect_error(project.receiver.heartbeat(ref.handoff_id, ref.revision, ref.claim), 409, "handoff_conflict")


@isolation.SHARED
@after_lease_expiry(_heartbeat_before_expiry)
@pytest.mark.requirement("AM-HL-HB-3")
def test_lease_is_live_until_its_last_moments(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    # Taken 5 s before expiry (a quarter of a lease shorter than 20 s), as the lease is surely live.
    expect_receipt(world.after_lease_expiry().before_answer())


@isolation.SHARED
@after_lease_expiry(_leased)
@reads("AM-HL-ACC-3", "same-claim")
def test_expired_claim_cannot_be_revived_by_the_same_claim(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = world.after_lease_expiry().value
    expect_error(project.receiver.accept(ref.handoff_id, ref.revision, ref.claim), 409, "handoff_conflict")


@isolation.SHARED
@after_lease_expiry(_leased)
@reads("AM-HL-ACC-3", "takeover")
def test_a_new_claim_takes_over_an_expired_lease(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref = world.after_lease_expiry().value
    new_claim = world.new_id("claim")
    expect_receipt(project.receiver.accept(ref.handoff_id, ref.revision, new_claim))
    _, record = record_of(project.receiver.status(ref.handoff_id))
    assert record["claim_id"] == new_claim and record["attempt_count"] == 2, f"takeover left {record!r}"


@isolation.SHARED
@after_lease_expiry(_leased_with_fact)
@reads("AM-HL-RET-5", "expired")
def test_return_after_expiry_conflicts(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref, fact = world.after_lease_expiry().value
    expect_error(project.receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), 409,
                 "handoff_conflict")


@isolation.SHARED
@after_lease_expiry(_leased_with_fact)
@reads("AM-HL-RET-5", "fenced")
def test_old_claim_is_fenced_after_a_takeover(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project, ref, fact = world.after_lease_expiry().value
    receiver = project.receiver
    new_claim = world.new_id("claim")
    taken = setup_ok(receiver.accept(ref.handoff_id, ref.revision, new_claim), "take over the expired claim")
    expect_error(receiver.return_result(ref.handoff_id, taken["revision"], ref.claim, fact), 409,
                 "handoff_conflict")
    expect_receipt(receiver.return_result(ref.handoff_id, taken["revision"], new_claim, fact))
