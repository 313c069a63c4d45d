"""`handoff send|inbox|outbox|show|status|accept|heartbeat|return|complete|board` through the CLI."""

from __future__ import annotations

from pathlib import Path

from .conftest import RECEIVER, SENDER, SOURCE, Cli, Handoff, receiver_fact

# Scenario Q's list: an assignment is a pointer, never a payload queue.
FORBIDDEN_RECORD_KEYS = {"content", "payload", "topic", "offset", "consumer_group", "retry", "retry_count", "delivery_attempt"}
RECORD_KEYS = [
    "handoff_id", "session_id", "source_id", "from_actor", "to_actor", "from_agent", "from_profile", "to_agent",
    "to_profile", "focus", "done_when", "status", "revision", "claim_id", "attempt_count", "created_at",
    "accepted_at", "completed_at", "result_fact_id", "outcome", "returned_at", "last_heartbeat_at",
    "heartbeat_count", "upstream_system", "upstream_task_id", "upstream_board_id",
]
AS_RECEIVER = {"AIDEMEMO_ACTOR_ID": RECEIVER}


def _show(cli: Cli, handoff_id: str) -> dict[str, object]:
    record: dict[str, object] = cli.j("handoff", "show", handoff_id)
    return record


def test_send_stores_a_small_pointer_with_upstream_fields(cli: Cli, sent: Handoff) -> None:
    record = _show(cli, sent.handoff_id)
    assert list(record) == RECORD_KEYS and not FORBIDDEN_RECORD_KEYS & set(record)  # show keeps struct order
    assert str(record["handoff_id"]).startswith("handoff-") and len(str(record["handoff_id"])) == len("handoff-") + 26
    assert (record["from_actor"], record["to_actor"], record["to_agent"], record["source_id"]) == (SENDER, RECEIVER, "manual", SOURCE)
    assert (record["status"], record["revision"], record["attempt_count"], record["upstream_system"]) == ("pending", 0, 0, None)
    assert cli.j("session", "handoff", "--source-id", SOURCE, sent.session_id)["fact_count"] == 2  # nothing copied


def test_send_text_sender_and_source_fallbacks(cli: Cli, sent: Handoff) -> None:
    text = cli.ok("handoff", "send", RECEIVER, "--from", "claude-one", sent.session_id).out.splitlines()
    handoff_id = text[0].split()[2]
    assert text == [f"Sent handoff {handoff_id} to {RECEIVER} [pending]", f"Session: {sent.session_id}",
                    f"Run: aidememo handoff run {RECEIVER}", f"Show: aidememo handoff show {handoff_id}"]
    # No --source-id and no AIDEMEMO_SOURCE_ID: the profile's source (upstream's order).
    assert _show(cli, handoff_id)["source_id"] == SOURCE
    cli.ok("agent", "add", "unscoped", "--type", "manual")
    # No source anywhere: the assignment has none, as upstream's would.
    assert cli.j("handoff", "send", "unscoped", "--from", SENDER, sent.session_id)["source_id"] is None
    env_scoped = cli.j("handoff", "send", "unscoped", "--from", SENDER, sent.session_id, env={"AIDEMEMO_SOURCE_ID": SOURCE})
    assert env_scoped["source_id"] == SOURCE


def test_send_refusals(cli: Cli, sent: Handoff) -> None:
    env = {"AIDEMEMO_SESSION_ID": sent.session_id}
    assert cli.refused("handoff", "send", RECEIVER, env=env) == (
        "invalid input: set AIDEMEMO_ACTOR_ID or pass --from with the sending account alias")
    assert cli.refused("handoff", "send", "ghost", "--from", SENDER, env=env) == (
        'invalid input: agent "ghost" is not connected; add it with `aidememo agent add ghost --type codex`')
    assert cli.refused("handoff", "send", RECEIVER, "--from", SENDER) == (
        "invalid input: pass SESSION or set AIDEMEMO_SESSION_ID before `aidememo session canvas`")
    assert cli.refused("handoff", "send", RECEIVER, "--from", SENDER, "session-nope") == "entity not found: 'session-nope'"
    assert cli.refused("handoff", "send", RECEIVER, "--from", SENDER, "--source-id", "other", env=env) == (
        f"entity not found: '{sent.session_id}'")
    assert cli.refused("handoff", "send", RECEIVER, "--from", "a\tb", env=env) == (
        "invalid input: from_actor must not contain control characters")


def test_kanban_card_makes_hermes_the_lifecycle_owner(cli: Cli, sent: Handoff) -> None:
    record = cli.j("handoff", "send", RECEIVER, "--from", SENDER, "--kanban-board", "ops", sent.session_id,
                   env={"HERMES_KANBAN_TASK": "card-9"})
    assert (record["upstream_system"], record["upstream_task_id"], record["upstream_board_id"]) == (
        "hermes_kanban", "card-9", "ops")
    owners = {i["assignment"]["handoff_id"]: i["lifecycle_owner"] for i in cli.j("handoff", "board")["assignments"]}
    assert owners == {record["handoff_id"]: "hermes_kanban", sent.handoff_id: "caller"}


def test_only_the_receiver_sees_the_assignment(cli: Cli, sent: Handoff) -> None:
    inbox = cli.j("handoff", "inbox", "--actor-id", RECEIVER)
    assert list(inbox) == ["actor_id", "assignments", "source_id"]
    assert list(inbox["assignments"][0]) == sorted(RECORD_KEYS)  # upstream's json!: records come out sorted
    assert [a["handoff_id"] for a in inbox["assignments"]] == [sent.handoff_id]
    assert cli.j("handoff", "inbox", "--actor-id", SENDER)["assignments"] == []
    assert [a["handoff_id"] for a in cli.j("handoff", "outbox", "--actor-id", SENDER)["assignments"]] == [sent.handoff_id]
    assert cli.ok("handoff", "inbox", "--actor-id", "nobody").out == "(no handoff assignments for nobody)\n"
    assert cli.ok("handoff", "outbox", "--actor-id", "nobody").out == "(no sent handoff assignments for nobody)\n"
    assert cli.ok("handoff", "inbox", "--actor-id", RECEIVER).out == (
        f"1 handoff assignment(s) for {RECEIVER}:\n  {sent.handoff_id} [pending] session={sent.session_id}"
        f" from={SENDER} focus=Review\n")
    assert cli.refused("handoff", "inbox") == "invalid input: pass --actor-id or set AIDEMEMO_ACTOR_ID before reading the inbox"
    assert cli.j("handoff", "inbox", "--actor-id", RECEIVER, "--source-id", "other")["assignments"] == []


def test_mailboxes_hide_or_keep_completed_as_upstream(cli: Cli, sent: Handoff) -> None:
    cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)
    cli.ok("handoff", "complete", sent.handoff_id, env=AS_RECEIVER)
    assert cli.j("handoff", "inbox", "--actor-id", RECEIVER)["assignments"] == []
    assert len(cli.j("handoff", "inbox", "--actor-id", RECEIVER, "--include-completed")["assignments"]) == 1
    assert len(cli.j("handoff", "outbox", "--actor-id", SENDER)["assignments"]) == 1  # outbox keeps results
    assert cli.j("handoff", "outbox", "--actor-id", SENDER, "--pending-only")["assignments"] == []
    # The deprecated flag wins over --pending-only (upstream: include_completed || !pending_only).
    assert len(cli.j("handoff", "outbox", "--actor-id", SENDER, "--pending-only", "--include-completed")["assignments"]) == 1


def test_show_and_status(cli: Cli, sent: Handoff) -> None:
    line = f"Handoff {sent.handoff_id} [pending] {SENDER} -> {RECEIVER} session={sent.session_id} outcome=- result=-\n"
    assert cli.ok("handoff", "show", sent.handoff_id).out == line
    assert cli.ok("handoff", "status", "--actor-id", SENDER, sent.handoff_id).out == line
    assert cli.refused("handoff", "status", "--actor-id", "stranger", sent.handoff_id) == (
        f"invalid input: handoff {sent.handoff_id} is not routed through actor stranger")
    assert cli.refused("handoff", "show", "handoff-nope") == "entity not found: 'handoff-nope'"
    assert cli.refused("handoff", "show", sent.session_id) == (
        f"invalid input: {sent.session_id} is a session entity, not a handoff")


def test_accept_prints_the_packet_and_resume_and_json_envelope(cli: Cli, sent: Handoff) -> None:
    out = cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER).out
    resume = f"eval \"$(aidememo session resume --source-id '{SOURCE}' '{sent.session_id}')\""
    assert out.startswith(f"# Accepted assignment `{sent.handoff_id}`\n\n# AideMemo Agent Handoff\n")
    assert out.endswith(f"\n\nResume: {resume}\n")
    assert "- from_actor: codex-one\n- to_actor: codex-two\n- to_agent: manual\n" in out
    again = cli.j("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)  # the same (absent) claim: unchanged
    assert list(again) == ["assignment", "content", "resume"]
    assert again["resume"] == {"command": resume, "env": {"AIDEMEMO_ACTOR_ID": RECEIVER,
                                                          "AIDEMEMO_SESSION_ID": sent.session_id,
                                                          "AIDEMEMO_SOURCE_ID": SOURCE}}
    assert (again["assignment"]["revision"], again["assignment"]["attempt_count"]) == (1, 1)
    assert again["content"] in out


def test_accept_refusals_and_claims(cli: Cli, sent: Handoff) -> None:
    assert cli.refused("handoff", "accept", "--actor-id", SENDER, sent.handoff_id) == (
        f"invalid input: handoff {sent.handoff_id} is assigned to {RECEIVER}, not {SENDER}")
    first = cli.j("handoff", "accept", "--claim-id", "worker-1", sent.handoff_id, env=AS_RECEIVER)["assignment"]
    assert (first["claim_id"], first["attempt_count"]) == ("worker-1", 1)
    assert cli.refused("handoff", "accept", sent.handoff_id, env=AS_RECEIVER) == (
        f"invalid input: handoff {sent.handoff_id} is already claimed by another worker")
    failed = receiver_fact(cli, sent, "attempt one failed")
    cli.ok("handoff", "return", "--outcome", "FAILED ", "--result-fact-id", failed, sent.handoff_id, env=AS_RECEIVER)
    retry = cli.j("handoff", "accept", "--claim-id", "worker-2", sent.handoff_id, env=AS_RECEIVER)["assignment"]
    assert (retry["claim_id"], retry["attempt_count"], retry["outcome"], retry["result_fact_id"]) == ("worker-2", 2, None, None)


def test_heartbeat_and_legacy_complete(cli: Cli, sent: Handoff) -> None:
    assert cli.refused("handoff", "heartbeat", sent.handoff_id, env=AS_RECEIVER) == (
        f"invalid input: handoff {sent.handoff_id} must be accepted before sending a heartbeat")
    assert cli.refused("handoff", "complete", sent.handoff_id, env=AS_RECEIVER) == (
        f"invalid input: accept handoff {sent.handoff_id} before completing it")
    cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)
    assert cli.ok("handoff", "heartbeat", sent.handoff_id, env=AS_RECEIVER | {"AIDEMEMO_NOW_MS": "5000"}).out == (
        f"Heartbeat {sent.handoff_id} count=1 at=5000\n")
    done = cli.ok("handoff", "complete", sent.handoff_id, env=AS_RECEIVER).out
    assert done == f"Completed handoff {sent.handoff_id} for session {sent.session_id} as {RECEIVER}\n"
    record = _show(cli, sent.handoff_id)
    assert (record["status"], record["result_fact_id"], record["revision"]) == ("completed", None, 3)  # no evidence
    assert cli.j("handoff", "complete", sent.handoff_id, env=AS_RECEIVER)["revision"] == 3  # idempotent


def test_return_is_fail_closed_in_upstreams_order_then_succeeds_once(cli: Cli, sent: Handoff) -> None:
    ret = ("handoff", "return", "--outcome", "succeeded", "--result-fact-id")
    assert cli.refused("handoff", "return", "--outcome", "done", "--result-fact-id", "x", "handoff-nope", env=AS_RECEIVER) == (
        "invalid input: outcome must be succeeded or failed")  # checked before loading
    good = receiver_fact(cli, sent)
    assert cli.refused(*ret, good, sent.handoff_id, env=AS_RECEIVER) == (
        f"invalid input: accept handoff {sent.handoff_id} before returning a result")
    cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)
    assert cli.refused(*ret, good, sent.handoff_id, env={"AIDEMEMO_ACTOR_ID": SENDER}) == (
        f"invalid input: handoff {sent.handoff_id} is assigned to {RECEIVER}, not {SENDER}")
    assert cli.refused(*ret, "not-a-ulid", sent.handoff_id, env=AS_RECEIVER) == "invalid input: result_fact_id must be a valid ULID"
    assert cli.refused(*ret, "01HZZZZZZZZZZZZZZZZZZZZZZZ", sent.handoff_id, env=AS_RECEIVER) == (
        "fact not found: '01HZZZZZZZZZZZZZZZZZZZZZZZ'")
    detached = cli.j("fact", "add", "outside", "--actor-id", RECEIVER, "--source-id", SOURCE)["id"]
    foreign = receiver_fact(cli, sent, "foreign", **{"--source-id": "other", "--session-id": "",
                                                     "--entities": sent.session_id})
    by_sender = receiver_fact(cli, sent, "sender's", **{"--actor-id": SENDER})
    for fact_id, message in ((detached, f"must be attached to handoff session {sent.session_id}"),
                             (foreign, "must use the handoff source_id"),
                             (by_sender, f"must be written by receiving actor {RECEIVER}")):
        assert cli.refused(*ret, fact_id, sent.handoff_id, env=AS_RECEIVER) == f"invalid input: result fact {fact_id} {message}"
        assert _show(cli, sent.handoff_id)["status"] == "accepted"  # a refused return changed nothing
    out = cli.ok(*ret, good, sent.handoff_id, env=AS_RECEIVER).out
    assert out == f"Returned handoff {sent.handoff_id} outcome=succeeded status=completed result={good}\n"
    record = _show(cli, sent.handoff_id)
    assert cli.j(*ret, good, sent.handoff_id, env=AS_RECEIVER) == record  # identical repeat: unchanged
    assert cli.refused(*ret, by_sender, sent.handoff_id, env=AS_RECEIVER) == (
        f"invalid input: handoff {sent.handoff_id} is already completed with a different result")


def test_board_lanes_and_text_with_a_pinned_clock(cli: Cli, sent: Handoff) -> None:
    created = int(str(_show(cli, sent.handoff_id)["created_at"]))
    at = {"AIDEMEMO_NOW_MS": str(created + 10_000)}
    board = cli.j("handoff", "board", env=at)
    assert list(board) == ["generated_at", "stale_after_ms", "lifecycle_owner", "lanes", "assignments"]
    assert board["lanes"] == {"ready": 1, "in_progress": 0, "attention": 0, "returned": 0}
    assert list(board["assignments"][0]) == ["assignment", "lane", "stale", "age_ms", "last_activity_at", "next_action",
                                             "lifecycle_owner"]
    late = cli.j("handoff", "board", "--stale-after", "5s", env=at)["assignments"][0]
    assert (late["lane"], late["next_action"], late["stale"], late["age_ms"]) == ("attention", "inspect_or_run", True, 10_000)
    assert cli.ok("handoff", "board", env=at).out == (
        f"Handoff board: ready=1 in_progress=0 attention=0 returned=0\n"
        f"  {sent.handoff_id} [ready] {SENDER} -> {RECEIVER} next=accept_or_run owner=caller\n")
    assert cli.ok("handoff", "board", "--actor-id", "stranger").out == "(no handoff assignments)\n"
    assert cli.refused("handoff", "board", "--stale-after", "90") == (
        "invalid input: duration needs a unit suffix (s/m/h/d/w/y), got: 90")
    assert cli.refused("handoff", "board", "--stale-after", "0s") == "invalid input: stale_after must be greater than zero"
    assert cli.j("handoff", "board", "--stale-after", "2w")["stale_after_ms"] == 14 * 86_400_000


def test_a_remote_profile_routes_the_verb_to_a_server(cli: Cli, sent: Handoff, tmp_path: Path) -> None:
    # The route is taken for the flag or the variable (tests/remote runs it against a server).
    missing, home = "invalid input: remote profile `p1` was not found", {"HOME": str(tmp_path)}
    assert cli.refused("handoff", "--remote-profile", "p1", "inbox", env=home).startswith(missing)
    assert cli.refused("handoff", "inbox", env={"AIDEMEMO_REMOTE_PROFILE": "p1", **home}).startswith(missing)
