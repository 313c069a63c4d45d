"""Upstream's handoff guards at their edges (issue 35): a send's context checked at both ends of
its actor route, every id guard an equality, and a lease stale from its very expiry millisecond.

Each guard here is listed, with its upstream file and function, in ``guards.toml``; an equality
guard is probed with a wrong value on each side of the right one in byte order, so a server
comparing with ``<`` or ``>`` instead fails one of the two.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import pytest

from conformance.errors import NotScored, Untestable
from conformance.marks import reads
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.actors import Actor, HandoffRef, Project, setup_ok
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, record_of
from conformance.profiles.aidememo.world import World

BOUNDARY_ROUNDS = 16  # heartbeats aimed at the expiry millisecond; each lands on it about every other time


def _around(right: str) -> tuple[str, str]:
    """Two ids that differ from ``right``, one sorting before it and one after (byte order)."""
    return right[:-1] + "-x", right + "x"


# -- a send's context ---------------------------------------------------------------------------
@isolation.SHARED
@pytest.mark.parametrize("mismatch", [pytest.param("session", marks=reads("AM-HL-SEND-3", "session")),
                                      pytest.param("sender", marks=reads("AM-HL-SEND-3", "sender")),
                                      pytest.param("receiver", marks=reads("AM-HL-SEND-3", "receiver"))])
def test_a_context_for_this_handoff_must_match_its_session_and_both_route_ends(world: World, mismatch: str) -> None:
    """Isolation: shared: its own handoffs and contexts, read back by their ids."""
    project = world.project(writers=("sender", "receiver", "third"))
    sender, receiver, third = project.sender, project.receiver, project.third
    session_id = sender.setup_session()
    handoff_id, context_id = world.new_id("handoff"), world.new_id("context")
    # The context names the very handoff about to be sent, so only the mismatch under test differs.
    author, context_session, to = {
        "session": (sender, sender.setup_session(), receiver),
        "sender": (third, session_id, receiver),
        "receiver": (sender, session_id, third),
    }[mismatch]
    setup_ok(author.create_context(context_session, handoff_id, to, context_id), f"create the {mismatch} context")
    expect_error(sender.send(session_id, receiver, handoff_id, context_id=context_id), 409, "handoff_conflict")
    expect_error(sender.status(handoff_id), 404, "resource_not_found")
    # The control: the sender's own context for this handoff and receiver is attached.
    own = world.new_id("context")
    setup_ok(sender.create_context(session_id, handoff_id, receiver, own), "create the matching context")
    expect_receipt(sender.send(session_id, receiver, handoff_id, context_id=own), kind="handoff",
                   resource_id=handoff_id)
    _, record = record_of(receiver.status(handoff_id))
    assert record.get("context_id") == own, f"the matching context was not attached: {record!r}"


# -- every id guard is an equality ------------------------------------------------------------------
def _accepted(project: Project) -> HandoffRef:
    return project.receiver.setup_accept(project.sender.setup_handoff(project.receiver))


@isolation.SHARED
@reads("AM-HL-EXACT-1", "claim")
def test_a_claim_on_either_side_of_the_live_one_is_refused(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = _accepted(project)
    receiver = project.receiver
    fact = receiver.setup_fact(ref.session_id)
    for claim in _around(ref.claim):
        expect_error(receiver.heartbeat(ref.handoff_id, ref.revision, claim), 409, "handoff_conflict")
        expect_error(receiver.return_result(ref.handoff_id, ref.revision, claim, fact), 409, "handoff_conflict")
    revision, record = record_of(receiver.status(ref.handoff_id))
    assert (revision, record["status"], record["claim_id"]) == (ref.revision, "accepted", ref.claim), (
        f"refused claims changed the handoff: revision {revision}, {record!r}")


@isolation.SHARED
@reads("AM-HL-EXACT-1", "actor")
def test_members_on_either_side_of_the_receiver_cannot_accept_or_write_its_result(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver", "anna", "zora"))
    receiver = project.receiver
    below, above = project.anna, project.zora
    if not below.actor_id < receiver.actor_id < above.actor_id:
        raise Untestable(f"actor ids {below.actor_id!r}, {receiver.actor_id!r}, {above.actor_id!r} do not sort "
                         "around the receiver (fixed identities)")
    ref = project.sender.setup_handoff(receiver)
    for actor in (below, above):
        expect_error(actor.accept(ref.handoff_id, ref.revision, world.new_id("claim")), 403,
                     "handoff_actor_mismatch")
    revision, record = record_of(receiver.status(ref.handoff_id))
    assert (revision, record["status"]) == (ref.revision, "pending"), f"a refused accept changed {record!r}"
    # The result fact's writer is the receiver too: facts of the same session by either neighbour are refused.
    accepted = receiver.setup_accept(ref)
    for actor in (below, above):
        fact = actor.setup_fact(ref.session_id)
        expect_error(receiver.return_result(ref.handoff_id, accepted.revision, accepted.claim, fact), 409,
                     "handoff_conflict")


def _fact_in(actor: Actor, session_id: str, fact_id: str) -> str:
    setup_ok(actor.create_fact(session_id, fact_id), f"create fact {fact_id}")
    return fact_id


@isolation.SHARED
@reads("AM-HL-EXACT-1", "fact")
def test_result_facts_on_either_side_of_the_recorded_one_are_other_evidence(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = _accepted(project)
    receiver = project.receiver
    fact = receiver.setup_fact(ref.session_id)
    others = [_fact_in(receiver, ref.session_id, other) for other in _around(fact)]
    done = setup_ok(receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), "return")
    for other in others:
        expect_error(receiver.return_result(ref.handoff_id, done["revision"], ref.claim, other), 409,
                     "handoff_conflict")
    _, record = record_of(receiver.status(ref.handoff_id))
    assert record["result_fact_id"] == fact, f"other evidence replaced the result: {record!r}"


@isolation.SHARED
@reads("AM-HL-EXACT-1", "session")
def test_result_facts_of_sessions_on_either_side_of_the_handoffs_are_refused(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = _accepted(project)
    receiver = project.receiver
    for session_id in _around(ref.session_id):
        setup_ok(receiver.create_session(session_id), f"create session {session_id}")  # the same source: "src"
        fact = receiver.setup_fact(session_id)
        expect_error(receiver.return_result(ref.handoff_id, ref.revision, ref.claim, fact), 409, "handoff_conflict")
    revision, record = record_of(receiver.status(ref.handoff_id))
    assert (revision, record["status"]) == (ref.revision, "accepted"), f"a refused return changed {record!r}"


# -- a lease at exactly its expiry --------------------------------------------------------------
def _landing(world: World, expires: int, lead: int) -> tuple[int, int]:
    """Move the test clock so the next request is decided about ``lead`` ms after it, at ``expires``:
    (the clock after the move, how long a clock request took to be applied)."""
    now = world.advance_clock(0)
    near = world.advance_clock(max(0, expires - now - 100))  # coarse: about 100 ms before expiry
    step = max(0, expires - near - 2 * lead)  # the next move is applied about ``lead`` after ``near``
    landed = world.advance_clock(step)
    return landed, max(0, landed - near - step)


@isolation.SHARED
@pytest.mark.requirement("AM-HL-HB-4")
def test_a_lease_is_stale_at_exactly_its_expiry(world: World) -> None:
    """Isolation: shared: its own handoff, read back by its id."""
    if not world.clock_is_virtual:
        raise NotScored("hitting the expiry millisecond needs the test-clock extension in virtual lease mode")
    project = world.project(writers=("sender", "receiver"))
    receiver = project.receiver
    ref = _accepted(project)
    claim, (revision, record) = ref.claim, receiver.setup_record(ref.handoff_id)
    lead, landings = 1, []
    for _ in range(BOUNDARY_ROUNDS):
        expires = record["claim_expires_at_ms"]
        landed, lead = _landing(world, expires, lead)
        answer = receiver.heartbeat(ref.handoff_id, revision, claim)
        if answer.status == 200:
            revision, record = receiver.setup_record(ref.handoff_id)
            decided = record["claim_heartbeat_at_ms"]
            landings.append(decided - expires)
            assert decided < expires, (f"a heartbeat decided at {decided} ms renewed a lease that expired at "
                                       f"{expires} ms (claim_expires_at_ms): a lease is stale from that millisecond")
            lead = max(0, decided - landed)
        else:
            expect_error(answer, 409, "handoff_conflict")
            landings.append(None)
            claim = world.new_id("claim")  # the lease is stale: a new claim takes over and starts a new one
            setup_ok(receiver.accept(ref.handoff_id, revision, claim), "take over the expired claim")
            revision, record = receiver.setup_record(ref.handoff_id)
    world.transcript.notes.append(
        "heartbeats aimed at the expiry millisecond, decided at (ms from expiry; - refused): "
        + ", ".join("-" if at is None else str(at) for at in landings))
