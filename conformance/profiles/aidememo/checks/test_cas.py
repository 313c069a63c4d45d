"""Compare-and-swap on handoff transitions and the revision/sequence discipline (handoff §3).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from conformance.http import Exchange
from conformance.marks import reads
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, record_of
from conformance.race import race


@isolation.SHARED
@pytest.mark.requirement("AM-HL-CAS-1")
@pytest.mark.parametrize("verb", [pytest.param(v, marks=reads("AM-HL-CAS-1", v), id=v) for v in ("accept", "heartbeat",
                                                                                                 "return")])
def test_transition_without_expected_revision_is_invalid(world: World, verb: str) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    ref = project.receiver.setup_accept(project.sender.setup_handoff(project.receiver))
    fact = project.receiver.setup_fact(ref.session_id)
    payload = {"accept": {"claim_id": ref.claim_id}, "heartbeat": {"claim_id": ref.claim_id},
               "return": {"claim_id": ref.claim_id, "result_fact_id": fact, "outcome": "succeeded"}}[verb]
    expect_error(project.receiver.transition(ref.handoff_id, verb, None, payload), 400, "invalid_command")


@isolation.SHARED
@pytest.mark.requirement("AM-HL-CAS-2")
@pytest.mark.parametrize("verb", [pytest.param(v, marks=reads("AM-HL-CAS-2", v), id=v)
                                  for v in ("heartbeat", "return")])
def test_stale_transition_is_refused_and_changes_nothing(world: World, verb: str) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    receiver = project.receiver
    ref = receiver.setup_accept(project.sender.setup_handoff(project.receiver))
    fact = receiver.setup_fact(ref.session_id)
    before = record_of(receiver.status(ref.handoff_id))
    if verb == "heartbeat":
        exchange = receiver.heartbeat(ref.handoff_id, ref.revision - 1, ref.claim)
    else:
        exchange = receiver.return_result(ref.handoff_id, ref.revision - 1, ref.claim, fact)
    expect_error(exchange, 409, "stale_revision")
    assert record_of(receiver.status(ref.handoff_id)) == before, "a stale transition changed the handoff"


@isolation.SHARED
@pytest.mark.requirement("AM-HL-CAS-3")
def test_concurrent_accepts_from_one_revision_commit_once(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    receiver = project.receiver
    ref = project.sender.setup_handoff(project.receiver)
    contenders = 4
    claims = [world.new_id("claim") for _ in range(contenders)]
    answers = race([partial(receiver.accept, ref.handoff_id, ref.revision, claim) for claim in claims])
    winners = [i for i, a in enumerate(answers) if a.status == 200]
    assert len(winners) == 1, f"{len(winners)} of {contenders} concurrent accepts committed: " + ", ".join(
        str(a.status) for a in answers)
    for index, answer in enumerate(answers):
        if index not in winners:
            assert answer.error_code() in ("stale_revision", "handoff_conflict"), (
                f"a losing accept answered {answer.status} {answer.body[:120]!r}")
    revision, record = record_of(receiver.status(ref.handoff_id))
    assert revision == ref.revision + 1 and record["claim_id"] == claims[winners[0]], (
        f"the stored claim {record['claim_id']!r} is not the winner's")
    assert record["attempt_count"] == 1, f"attempt_count {record['attempt_count']} after one winning accept"


@isolation.SHARED
@pytest.mark.requirement("AM-HL-CAS-4")
def test_revision_check_precedes_the_actor_check(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver", "other"))
    ref = project.sender.setup_handoff(project.receiver)
    exchange = project.other.accept(ref.handoff_id, ref.revision + 5, world.new_id("claim"))
    expect_error(exchange, 409, "stale_revision")


@isolation.SHARED
@pytest.mark.requirement("AM-HL-REV-1")
def test_each_transition_raises_the_revision_by_one(world: World) -> None:
    """Isolation: shared: its own handoffs, read back by their ids."""
    project = world.project(writers=("sender", "receiver"))
    receiver = project.receiver
    ref = project.sender.setup_handoff(project.receiver)
    claim = world.new_id("claim")
    fact = receiver.setup_fact(ref.session_id)
    revision, seqs = ref.revision, []
    steps: list[Callable[[int], Exchange]] = [lambda r: receiver.accept(ref.handoff_id, r, claim),
             lambda r: receiver.heartbeat(ref.handoff_id, r, claim),
             lambda r: receiver.accept(ref.handoff_id, r, world.new_id("claim")),   # refused
             lambda r: receiver.return_result(ref.handoff_id, r, claim, fact, "failed"),
             lambda r: receiver.heartbeat(ref.handoff_id, r, claim)]               # refused
    for index, step in enumerate(steps):
        exchange = step(revision)
        if index in (2, 4):
            assert exchange.status == 409, f"step {index} should be refused, answered {exchange.status}"
            current, _ = record_of(receiver.status(ref.handoff_id))
            assert current == revision, f"a refused transition moved the revision {revision} -> {current}"
            continue
        receipt = expect_receipt(exchange)
        assert receipt["revision"] == revision + 1, f"step {index}: revision {receipt['revision']} != {revision + 1}"
        revision = receipt["revision"]
        seqs.append(receipt["project_seq"])
    assert seqs == sorted(set(seqs)), f"project_seq must strictly increase: {seqs}"
    current, _ = record_of(receiver.status(ref.handoff_id))
    assert current == revision, f"status revision {current} != last receipt revision {revision}"
