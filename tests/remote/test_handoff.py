"""The two-account remote flow through the CLI, over real HTTP (upstream's round-trip test, and more)."""

from __future__ import annotations

import subprocess

from aidememo_wire.ids import stable_claim_id, stable_operation_id
from tests.remote.conftest import PROJECT, SOURCE, World


def test_two_profiles_complete_a_remote_handoff_round_trip(world: World) -> None:
    session_id = world.session()
    sent = world.send(session_id)
    assert sent["actor_id"] == "codex-p1" and sent["dispatched"] is True and sent["recovered"] is False
    handoff_id = sent["handoff_id"]
    assert handoff_id.startswith("handoff_") and sent["context_id"].startswith("context_")

    inbox = world.remote("codex-p2", "inbox", "--source-id", SOURCE)
    assert [e["record"]["handoff_id"] for e in inbox["assignments"]] == [handoff_id]
    assert inbox["assignments"][0]["record"]["to_actor"] == "codex-p2"

    assert "cannot override" in world.refused("codex-p1", "handoff", "--remote-profile", "codex-p2", "inbox",
                                              "--actor-id", "codex-p1")
    assert "not addressed" in world.refused("codex-p1", "handoff", "--remote-profile", "codex-p1", "accept",
                                            handoff_id)

    accepted = world.remote("codex-p2", "accept", handoff_id)
    assert accepted["recovered"] is False and accepted["actor_id"] == "codex-p2"
    assert accepted["session_id"] == session_id and accepted["context_id"] == sent["context_id"]
    assert accepted["claim_id"] == stable_claim_id(PROJECT, "codex-p2", handoff_id, 1)
    assert accepted["command_id"] == stable_operation_id("command_accept",
                                                         [PROJECT, "codex-p2", handoff_id, accepted["claim_id"]])
    assert accepted["resume"]["env"] == {"AIDEMEMO_SESSION_ID": session_id, "AIDEMEMO_SOURCE_ID": SOURCE,
                                         "AIDEMEMO_ACTOR_ID": "codex-p2"}
    retry = world.remote("codex-p2", "accept", handoff_id)
    assert retry["recovered"] is True and retry["receipt"] is None
    assert (retry["claim_id"], retry["command_id"], retry["local_context_fact_id"]) == (
        accepted["claim_id"], accepted["command_id"], accepted["local_context_fact_id"])
    assert world.commits(handoff_id) == 2  # send, accept

    # The packet is local context in codex-p2's own store, in the handoff's source.
    context = world.j("codex-p2", "fact", "get", accepted["local_context_fact_id"], "--source-id", SOURCE)
    assert context["content"] == sent["content"] and context["actor_id"] == "codex-p1"
    assert world.j("codex-p2", "session", "resume", "--source-id", SOURCE, session_id)["session_id"] == session_id

    fact_id = world.result_fact(session_id)
    failed = world.remote("codex-p2", "return", "--outcome", "failed", "--result-fact-id", fact_id, handoff_id)
    assert failed["recovered"] is False and failed["outcome"] == "failed"
    failed_retry = world.remote("codex-p2", "return", "--outcome", "failed", "--result-fact-id", fact_id, handoff_id)
    assert failed_retry["recovered"] is True and failed_retry["command_id"] == failed["command_id"]

    # After a failed outcome the next accept advances to attempt 2 on purpose.
    second = world.remote("codex-p2", "accept", handoff_id)
    assert second["recovered"] is False
    assert second["claim_id"] == stable_claim_id(PROJECT, "codex-p2", handoff_id, 2) != accepted["claim_id"]
    assert second["command_id"] != accepted["command_id"]

    returned = world.remote("codex-p2", "return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    assert returned["recovered"] is False
    again = world.remote("codex-p2", "return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    assert again["recovered"] is True and again["command_id"] == returned["command_id"]
    # Completed: a later accept recovers attempt 2 instead of claiming again.
    assert world.remote("codex-p2", "accept", handoff_id)["recovered"] is True

    outbox = world.remote("codex-p1", "outbox")
    record = outbox["assignments"][0]["record"]
    assert (record["status"], record["result_fact_id"], record["attempt_count"]) == ("completed", fact_id, 2)
    assert world.commits(handoff_id) == 5  # send, accept, return failed, accept, return succeeded
    # The server holds the receiver's fact exactly as written locally.
    fact = world.get("codex-p1", f"/resources/fact/{fact_id}").json()["state"]["body"]
    assert (fact["actor_id"], fact["session_id"], fact["source_id"]) == ("codex-p2", session_id, SOURCE)


def test_text_output_matches_upstream_and_accept_evals_in_a_shell(world: World) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    inbox = world.ok("codex-p2", "handoff", "--remote-profile", "codex-p2", "inbox").out
    assert inbox == (f"1 remote handoff assignment(s):\n  {handoff_id} [pending] codex-p1 -> codex-p2"
                     f" session={session_id}\n")
    text = world.ok("codex-p2", "handoff", "--remote-profile", "codex-p2", "accept", handoff_id).out
    lines = text.splitlines()
    assert lines[0] == f"# aidememo remote handoff accepted: {handoff_id}" and lines[1].startswith("# local context fact: ")
    assert lines[2:] == [f"export AIDEMEMO_SESSION_ID='{session_id}'", f"export AIDEMEMO_SOURCE_ID='{SOURCE}'",
                         "export AIDEMEMO_ACTOR_ID=codex-p2"]
    shell = subprocess.run(["sh", "-c", f'eval "$1"; printf "%s|%s|%s" "$AIDEMEMO_SESSION_ID" "$AIDEMEMO_SOURCE_ID"'
                            f' "$AIDEMEMO_ACTOR_ID"', "sh", text], capture_output=True, text=True, check=True)
    assert shell.stdout == f"{session_id}|{SOURCE}|codex-p2"
    assert world.ok("codex-p1", "handoff", "--remote-profile", "codex-p1", "inbox").out == \
        "(no remote handoff assignments)\n"
    shown = world.j("codex-p1", "handoff", "--remote-profile", "codex-p1", "show", handoff_id)
    assert shown["revision"] == 2 and shown["record"]["status"] == "accepted"


def test_identity_comes_only_from_the_token(world: World) -> None:
    session_id = world.session()
    assert "cannot override" in world.refused("codex-p1", "handoff", "--remote-profile", "codex-p1", "send",
                                              "--from", "codex-p2", "codex-p2", session_id)
    handoff_id = world.send(session_id)["handoff_id"]
    for verb in ("status", "accept", "heartbeat"):
        assert "cannot override" in world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", verb,
                                                  "--actor-id", "codex-p2", handoff_id)
    assert "cannot override" in world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", "outbox",
                                              "--actor-id", "codex-p1")
    assert "generated claim" in world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", "accept",
                                              "--claim-id", "mine", handoff_id)
    for verb in ("board", "complete"):
        argv = [verb] if verb == "board" else [verb, handoff_id]
        assert "remote profiles currently support" in world.refused("codex-p2", "handoff", "--remote-profile",
                                                                    "codex-p2", *argv)
    # AIDEMEMO_REMOTE_PROFILE stands in for the flag.
    inbox = world.j("codex-p2", "handoff", "inbox", env={"AIDEMEMO_REMOTE_PROFILE": "codex-p2"})
    assert [e["record"]["handoff_id"] for e in inbox["assignments"]] == [handoff_id]
    # Hermes is no participant: the server refuses its status read.
    assert "HTTP 403" in world.refused("hermes", "handoff", "--remote-profile", "hermes", "status", handoff_id)
    assert world.commits(handoff_id) == 1


def test_heartbeat_renews_the_lease_and_a_stale_one_is_refused(world: World) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    assert "must be accepted" in world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", "heartbeat",
                                               handoff_id)
    accepted = world.remote("codex-p2", "accept", handoff_id)
    world.clock.advance(100_000)
    beat = world.remote("codex-p2", "heartbeat", handoff_id)
    assert beat["claim_id"] == accepted["claim_id"] and beat["expected_revision"] == 2
    assert beat["command_id"] == stable_operation_id(
        "command_heartbeat", [PROJECT, "codex-p2", handoff_id, accepted["claim_id"], "2"])
    record = world.status(handoff_id)["record"]
    assert record["claim_expires_at_ms"] == world.clock.now_ms() + 120_000
    # Past the renewed lease the claim is dead: the server refuses the stale heartbeat.
    world.clock.advance(120_000)
    message = world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", "heartbeat", handoff_id)
    assert message == "invalid input: remote server returned HTTP 409: handoff conflict: handoff claim lease expired"
    assert world.commits(handoff_id) == 3  # send, accept, heartbeat
    # ...and the expired claim cannot return either (the guide's gap: the CLI recovers a dead claim).
    fact_id = world.result_fact(session_id)
    assert "lease expired before result return" in world.refused(
        "codex-p2", "handoff", "--remote-profile", "codex-p2", "return", "--outcome", "succeeded",
        "--result-fact-id", fact_id, handoff_id)


def test_heartbeat_refuses_a_returned_failure(world: World) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    world.remote("codex-p2", "accept", handoff_id)
    fact_id = world.result_fact(session_id)
    world.remote("codex-p2", "return", "--outcome", "failed", "--result-fact-id", fact_id, handoff_id)
    assert "result evidence cannot be heartbeated" in world.refused(
        "codex-p2", "handoff", "--remote-profile", "codex-p2", "heartbeat", handoff_id)
