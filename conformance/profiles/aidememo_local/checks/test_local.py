"""The local handoff rules, judged on what the CLI (and its ``mcp``) print and exit with."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo_local.world import RECEIVER, SENDER, SOURCE, LocalWorld, tool_answer

CONFLICT = "transaction conflict (concurrent write): retry needed"


def _error_line(done: Any) -> str:
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    assert done.exit_code != 0, f"exit {done.exit_code}: the command was accepted"
    assert len(lines) == 1 and lines[0].startswith("Error: "), f"not upstream's one error line: {lines!r}"
    return str(lines[0])


def _accept(world: LocalWorld, handoff_id: str, claim: str) -> tuple[Any, bool]:
    return world.mcp("aidememo_handoff_inbox", {"action": "accept", "handoff_id": handoff_id, "actor_id": RECEIVER,
                                                "claim_id": claim}, actor=RECEIVER)


@pytest.mark.requirement("AML-CAS-1")
def test_concurrent_accepts_have_one_winner(world: LocalWorld) -> None:
    handoff = world.assignment()

    def call(claim: str) -> bytes:
        message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "aidememo_handoff_inbox",
            "arguments": {"action": "accept", "handoff_id": handoff.handoff_id, "actor_id": RECEIVER, "claim_id": claim}}}
        return f'{{"jsonrpc":"2.0","id":0,"method":"initialize"}}\n{json.dumps(message)}\n'.encode()

    answers = world.concurrently([["mcp"]] * 4, stdins=[call(f"worker-{index}") for index in range(4)], actor=RECEIVER)
    results = [tool_answer(a, "aidememo_handoff_inbox") for a in answers]
    winners = [answer for answer, failed in results if not failed]
    assert len(winners) == 1, f"{len(winners)} of 4 concurrent accepts won: {results!r}"
    for answer, _ in (r for r in results if r[1]):
        message = answer["message"]
        assert "already claimed by another worker" in message or message == CONFLICT, message
    record = world.show(handoff)
    winner_claim = winners[0]["assignment"]["claim_id"]
    assert (record["claim_id"], record["attempt_count"], record["revision"]) == (winner_claim, 1, 1), record


@pytest.mark.requirement("AML-CAS-2")
def test_concurrent_heartbeats_lose_no_update(world: LocalWorld) -> None:
    handoff = world.assignment()
    world.json("handoff", "accept", "--actor-id", RECEIVER, handoff.handoff_id)
    done = world.concurrently([["--json", "handoff", "heartbeat", "--actor-id", RECEIVER, handoff.handoff_id]] * 6)
    succeeded = [d for d in done if d.exit_code == 0]
    for refused in (d for d in done if d.exit_code != 0):
        assert _error_line(refused) == f"Error: {CONFLICT}", refused.stderr
    record = world.show(handoff)
    assert record["heartbeat_count"] == len(succeeded), (
        f"{len(succeeded)} heartbeats succeeded but heartbeat_count is {record['heartbeat_count']}: an update was lost")


@reads("AML-CLAIM-1", "accept", "same-claim")
def test_accept_starts_attempt_one_and_the_same_claim_changes_nothing(world: LocalWorld) -> None:
    handoff = world.assignment()
    first, error = _accept(world, handoff.handoff_id, "worker-a")
    assert not error, first
    record = first["assignment"]
    assert (record["status"], record["attempt_count"], record["claim_id"]) == ("accepted", 1, "worker-a"), record
    again, error = _accept(world, handoff.handoff_id, "worker-a")
    assert not error, again
    assert again["assignment"]["revision"] == record["revision"], "a same-claim retry wrote a new revision"


@pytest.mark.requirement("AML-CLAIM-2")
def test_a_competing_claim_is_refused(world: LocalWorld) -> None:
    handoff = world.assignment()
    _accept(world, handoff.handoff_id, "worker-a")
    answer, error = _accept(world, handoff.handoff_id, "worker-b")
    assert error and "already claimed by another worker" in answer.get("message", ""), answer
    assert world.show(handoff)["claim_id"] == "worker-a"


@pytest.mark.requirement("AML-CLAIM-3")
def test_a_failed_attempt_is_reclaimed_with_a_new_attempt(world: LocalWorld) -> None:
    handoff = world.assignment()
    _accept(world, handoff.handoff_id, "worker-a")
    fact_id = world.receiver_fact(handoff)
    world.json("handoff", "return", "--actor-id", RECEIVER, "--outcome", "failed", "--result-fact-id", fact_id,
               handoff.handoff_id)
    answer, error = _accept(world, handoff.handoff_id, "worker-b")
    assert not error, answer
    record = answer["assignment"]
    assert (record["claim_id"], record["attempt_count"], record["outcome"], record["result_fact_id"]) == (
        "worker-b", 2, None, None), record


def _refused_return(world: LocalWorld, **fact: Any) -> tuple[str, str]:
    handoff = world.assignment()
    world.json("handoff", "accept", "--actor-id", RECEIVER, handoff.handoff_id)
    fact_id = world.receiver_fact(handoff, **fact)
    done = world.run("handoff", "return", "--actor-id", RECEIVER, "--outcome", "succeeded", "--result-fact-id", fact_id,
                     handoff.handoff_id)
    line = _error_line(done)
    assert world.show(handoff)["status"] == "accepted", "a refused return changed the assignment"
    return line, fact_id


@pytest.mark.requirement("AML-RET-1")
def test_return_refuses_a_fact_outside_the_session(world: LocalWorld) -> None:
    line, fact_id = _refused_return(world, attached=False)
    assert f"result fact {fact_id} must be attached to handoff session" in line, line


@pytest.mark.requirement("AML-RET-2")
def test_return_refuses_a_fact_of_another_source(world: LocalWorld) -> None:
    line, fact_id = _refused_return(world, source="another-team")
    assert f"result fact {fact_id} must use the handoff source_id" in line, line


@pytest.mark.requirement("AML-RET-3")
def test_return_refuses_a_fact_by_someone_else(world: LocalWorld) -> None:
    line, fact_id = _refused_return(world, actor=SENDER)
    assert f"result fact {fact_id} must be written by receiving actor {RECEIVER}" in line, line


@reads("AML-RET-4", "completes", "identical")
def test_a_valid_return_completes_once(world: LocalWorld) -> None:
    handoff = world.assignment()
    world.json("handoff", "accept", "--actor-id", RECEIVER, handoff.handoff_id)
    fact_id = world.receiver_fact(handoff)
    returned = world.json("handoff", "return", "--actor-id", RECEIVER, "--outcome", "succeeded", "--result-fact-id",
                          fact_id, handoff.handoff_id)
    assert (returned["status"], returned["outcome"], returned["result_fact_id"]) == ("completed", "succeeded", fact_id)
    again = world.json("handoff", "return", "--actor-id", RECEIVER, "--outcome", "succeeded", "--result-fact-id",
                       fact_id, handoff.handoff_id)
    assert again == returned, "the identical return changed the record"


@pytest.mark.requirement("AML-RUN-1")
def test_run_refuses_a_manual_profile(world: LocalWorld) -> None:
    handoff = world.assignment("manual")
    line = _error_line(world.run("handoff", "run", RECEIVER))
    assert "uses the manual adapter" in line, line
    assert world.show(handoff)["status"] == "pending"


@reads("AML-VIS-1", "inbox", "outbox")
def test_mailboxes_show_an_assignment_to_its_participants_only(world: LocalWorld) -> None:
    handoff = world.assignment()

    def ids(box: str, actor: str) -> list[str]:
        return [a["handoff_id"] for a in world.json("handoff", box, "--actor-id", actor)["assignments"]]

    assert ids("inbox", RECEIVER) == [handoff.handoff_id]
    assert ids("inbox", SENDER) == [] and ids("inbox", "stranger") == [], "someone else's inbox shows it"
    assert ids("outbox", SENDER) == [handoff.handoff_id]
    assert ids("outbox", RECEIVER) == [] and ids("outbox", "stranger") == [], "someone else's outbox shows it"


@reads("AML-VIS-2", "status", "show")
def test_status_is_for_the_participants_and_show_for_anyone(world: LocalWorld) -> None:
    handoff = world.assignment()
    for actor in (SENDER, RECEIVER):
        assert world.json("handoff", "status", "--actor-id", actor, handoff.handoff_id)["handoff_id"] == handoff.handoff_id
    line = _error_line(world.run("handoff", "status", "--actor-id", "stranger", handoff.handoff_id))
    assert "is not routed through actor stranger" in line, line
    assert world.show(handoff)["handoff_id"] == handoff.handoff_id


@pytest.mark.requirement("AML-MCP-1")
def test_the_worker_lane_sequence_completes_through_mcp(world: LocalWorld) -> None:
    handoff = world.assignment()
    scope = {"source_id": SOURCE, "actor_id": RECEIVER}
    listed, error = world.mcp("aidememo_handoff_inbox", {"action": "list", "include_completed": False, "limit": 10000,
                                                        **scope})
    assert not error and [a["handoff_id"] for a in listed["assignments"] if a["status"] == "pending"] == [
        handoff.handoff_id], listed
    accepted, error = _accept(world, handoff.handoff_id, "worker-0123456789abcdef0123456789abcdef")
    assert not error and accepted["assignment"]["session_id"] == handoff.session_id, accepted
    assert accepted["resume"]["env"]["AIDEMEMO_ACTOR_ID"] == RECEIVER, accepted["resume"]
    beat, error = world.mcp("aidememo_handoff_inbox", {"action": "heartbeat", "handoff_id": handoff.handoff_id, **scope})
    assert not error and beat["assignment"]["heartbeat_count"] == 1, beat
    fact, error = world.mcp("aidememo_fact_add", {
        "content": world.text("External worker result"), "session_id": handoff.session_id, "fact_type": "note",
        "entities": ["ExternalWorker", "ExternalWorker:codex"], "tags": ["worker-lane", "codex", handoff.handoff_id],
        **scope})
    assert not error and isinstance(fact.get("id"), str), fact
    returned, error = world.mcp("aidememo_handoff_inbox", {"action": "return", "handoff_id": handoff.handoff_id,
                                                          "result_fact_id": fact["id"], "outcome": "succeeded", **scope})
    assert not error and returned["assignment"]["status"] == "completed", returned
    assert world.show(handoff)["result_fact_id"] == fact["id"]
