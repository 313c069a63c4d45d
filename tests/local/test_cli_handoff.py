"""`handoff send|inbox|outbox|show|status|accept|heartbeat|return|board` through the CLI."""

from __future__ import annotations

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
    assert list(record) == RECORD_KEYS and not FORBIDDEN_RECORD_KEYS & set(record)
    assert record["handoff_id"].startswith("handoff-") and len(record["handoff_id"]) == len("handoff-") + 26  # type: ignore[union-attr]
    assert (record["from_actor"], record["to_actor"], record["to_agent"], record["source_id"]) == (SENDER, RECEIVER, "manual", SOURCE)
    assert (record["status"], record["revision"], record["attempt_count"], record["upstream_system"]) == ("pending", 0, 0, None)
    # The facts stay in the session: sending copied none.
    assert cli.j("session", "handoff", sent.session_id, env={"AIDEMEMO_SOURCE_ID": SOURCE})["fact_count"] == 1


def test_send_text_and_sender_sources(cli: Cli, sent: Handoff) -> None:
    text = cli.ok("handoff", "send", RECEIVER, "--from", "claude-one", sent.session_id).out.splitlines()
    assert text[0].startswith("Sent handoff handoff-") and text[0].endswith(f" to {RECEIVER} [pending]")
    assert text[1] == f"Session: {sent.session_id}"
    assert text[2].startswith("Run: aidememo-ref --store ") and text[2].endswith(f"handoff run {RECEIVER}")
    assert text[3].startswith("Show: aidememo-ref --store ")
    assert [r["from_actor"] for r in cli.j("handoff", "outbox", "--actor-id", "claude-one")["assignments"]] == ["claude-one"]


def test_send_refusals(cli: Cli, sent: Handoff) -> None:
    env = {"AIDEMEMO_SESSION_ID": sent.session_id}
    assert cli.refused("handoff", "send", RECEIVER, env=env)["message"] == (
        "invalid input: set AIDEMEMO_ACTOR_ID or pass --from with the sending account alias"
    )
    assert cli.refused("handoff", "send", "ghost", "--from", SENDER, env=env)["message"].startswith('invalid input: agent "ghost" is not connected')
    assert cli.refused("handoff", "send", RECEIVER, "--from", SENDER)["message"] == (
        "invalid input: no session: pass SESSION or set AIDEMEMO_SESSION_ID"
    )
    assert cli.refused("handoff", "send", RECEIVER, "--from", SENDER, "session-nope") == {
        "code": "entity_not_found", "message": "entity not found: 'session-nope'",
    }
    assert cli.refused("handoff", "send", RECEIVER, "--from", SENDER, "--source-id", "other", env=env)["code"] == "entity_not_found"
    assert cli.refused("handoff", "send", RECEIVER, "--from", " ", env=env)["code"] == "invalid_input"


def test_send_source_precedence_flag_env_profile_session(cli: Cli) -> None:
    session_id = cli.j("session", "new", "Unscoped")["session_id"]
    cli.ok("agent", "add", "scoped", "--type", "manual", "--source-id", "profile-src")
    cli.ok("agent", "add", "plain", "--type", "manual")
    base = ["--from", SENDER, session_id]
    assert cli.j("handoff", "send", "scoped", *base)["source_id"] == "profile-src"
    assert cli.j("handoff", "send", "scoped", *base, env={"AIDEMEMO_SOURCE_ID": "env-src"})["source_id"] == "env-src"
    assert cli.j("handoff", "send", "scoped", "--source-id", "flag-src", *base, env={"AIDEMEMO_SOURCE_ID": "env-src"})["source_id"] == "flag-src"
    assert cli.j("handoff", "send", "plain", *base)["source_id"] is None


def test_kanban_card_makes_hermes_the_lifecycle_owner(cli: Cli, sent: Handoff) -> None:
    env = {"AIDEMEMO_SESSION_ID": sent.session_id, "AIDEMEMO_ACTOR_ID": SENDER}
    flagged = cli.j("handoff", "send", RECEIVER, "--kanban-task", "t_1", "--kanban-board", "aidememo", env=env)
    assert (flagged["upstream_system"], flagged["upstream_task_id"], flagged["upstream_board_id"]) == ("hermes_kanban", "t_1", "aidememo")
    from_env = cli.j("handoff", "send", RECEIVER, env=env | {"HERMES_KANBAN_TASK": "t_2", "HERMES_KANBAN_BOARD": "b"})
    assert (from_env["upstream_system"], from_env["upstream_task_id"]) == ("hermes_kanban", "t_2")
    board = cli.j("handoff", "board")
    owners = {item["assignment"]["handoff_id"]: item["lifecycle_owner"] for item in board["assignments"]}
    assert owners == {flagged["handoff_id"]: "hermes_kanban", from_env["handoff_id"]: "hermes_kanban", sent.handoff_id: "caller"}
    assert board["lifecycle_owner"] == "upstream_orchestrator"
    assert f"{flagged['handoff_id']} [ready] {SENDER} -> {RECEIVER} next=accept_or_run owner=hermes_kanban" in cli.ok("handoff", "board").out


def test_hermes_scope_mapping_applies_only_without_an_explicit_source(cli: Cli) -> None:
    cli.ok("config", "set", "source_from_hermes", "board_tenant")
    cli.ok("config", "set", "actor_from_hermes_profile", "true")
    hermes = {"HERMES_KANBAN_BOARD": "aidememo", "HERMES_TENANT": "acme corp", "HERMES_PROFILE": "reviewer"}
    session = cli.j("session", "new", "Card", env=hermes)
    assert session["source_id"] == "hermes:board:aidememo:tenant:acme%20corp"
    fact = cli.j("fact", "add", "x", env=hermes | {"AIDEMEMO_SESSION_ID": session["session_id"]})
    assert (fact["source_id"], fact["actor_id"], fact["session_id"]) == (session["source_id"], "hermes:reviewer", session["session_id"])
    explicit = cli.j("fact", "add", "y", "--source-id", "mine", "--actor-id", "me", env=hermes)
    assert (explicit["source_id"], explicit["actor_id"]) == ("mine", "me")
    assert cli.j("fact", "add", "z", env=hermes | {"AIDEMEMO_SOURCE_ID": "env"})["source_id"] == "env"


def test_only_the_receiver_sees_the_assignment(cli: Cli, sent: Handoff) -> None:
    inbox = cli.j("handoff", "inbox", "--actor-id", RECEIVER)
    assert inbox["actor_id"] == RECEIVER and [r["handoff_id"] for r in inbox["assignments"]] == [sent.handoff_id]
    assert cli.j("handoff", "inbox", env={"AIDEMEMO_ACTOR_ID": SENDER})["assignments"] == []
    assert cli.j("handoff", "inbox", "--actor-id", "stranger")["assignments"] == []
    assert cli.j("handoff", "inbox", "--actor-id", RECEIVER, "--source-id", "other")["assignments"] == []
    text = cli.ok("handoff", "inbox", env=AS_RECEIVER).out.splitlines()
    assert text == [f"1 handoff assignment(s) for {RECEIVER}:", f"  {sent.handoff_id} [pending] session={sent.session_id} from={SENDER} focus=Review"]
    assert cli.ok("handoff", "inbox", "--actor-id", "stranger").out.strip() == "(no handoff assignments for stranger)"
    assert cli.refused("handoff", "inbox")["message"] == "invalid input: actor_id required: pass --actor-id or set AIDEMEMO_ACTOR_ID"
    assert cli.refused("handoff", "inbox", "--actor-id", RECEIVER, "-l", "0")["message"] == "invalid input: limit must be at least 1"


def test_mailboxes_are_newest_first_limited_and_hide_completed_by_choice(cli: Cli, sent: Handoff) -> None:
    env = {"AIDEMEMO_SESSION_ID": sent.session_id, "AIDEMEMO_ACTOR_ID": SENDER}
    later = [cli.j("handoff", "send", RECEIVER, env=env | {"AIDEMEMO_NOW_MS": str(2_000_000_000_000 + i)})["handoff_id"] for i in range(2)]
    ids = [r["handoff_id"] for r in cli.j("handoff", "inbox", "--actor-id", RECEIVER)["assignments"]]
    assert ids == [later[1], later[0], sent.handoff_id]
    assert [r["handoff_id"] for r in cli.j("handoff", "inbox", "--actor-id", RECEIVER, "-l", "1")["assignments"]] == [later[1]]
    cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)
    cli.ok("handoff", "return", "--outcome", "succeeded", "--result-fact-id", receiver_fact(cli, sent), sent.handoff_id, env=AS_RECEIVER)
    assert sent.handoff_id not in [r["handoff_id"] for r in cli.j("handoff", "inbox", "--actor-id", RECEIVER)["assignments"]]
    assert len(cli.j("handoff", "inbox", "--actor-id", RECEIVER, "--include-completed")["assignments"]) == 3
    assert len(cli.j("handoff", "outbox", "--actor-id", SENDER)["assignments"]) == 3  # outbox keeps completed
    assert len(cli.j("handoff", "outbox", "--actor-id", SENDER, "--pending-only")["assignments"]) == 2
    assert len(cli.j("handoff", "outbox", "--actor-id", SENDER, "--pending-only", "--include-completed")["assignments"]) == 3
    assert cli.ok("handoff", "outbox", "--actor-id", "nobody").out.strip() == "(no sent handoff assignments for nobody)"


def test_show_and_status(cli: Cli, sent: Handoff) -> None:
    line = f"Handoff {sent.handoff_id} [pending] {SENDER} -> {RECEIVER} session={sent.session_id} outcome=- result=-"
    assert cli.ok("handoff", "show", sent.handoff_id).out.strip() == line
    assert cli.ok("handoff", "status", "--actor-id", SENDER, sent.handoff_id).out.strip() == line
    assert cli.j("handoff", "status", sent.handoff_id, env=AS_RECEIVER)["handoff_id"] == sent.handoff_id
    assert cli.refused("handoff", "status", "--actor-id", "stranger", sent.handoff_id)["message"] == (
        f"invalid input: handoff {sent.handoff_id} is not routed through actor stranger"
    )
    assert cli.refused("handoff", "show", "handoff-nope") == {"code": "entity_not_found", "message": "entity not found: 'handoff-nope'"}


def test_accept_rebuilds_the_packet_and_prints_resume_exports(cli: Cli, sent: Handoff) -> None:
    # A fact written after send must appear: the packet is rebuilt, not stored.
    cli.ok("fact", "add", "Late lesson", "--type", "lesson", "--session-id", sent.session_id, "--source-id", SOURCE, "--actor-id", SENDER)
    data = cli.j("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)
    assert data["changed"] is True
    assignment = data["assignment"]
    assert (assignment["status"], assignment["attempt_count"], assignment["revision"], assignment["claim_id"]) == ("accepted", 1, 1, None)
    assert data["resume"]["env"] == {"AIDEMEMO_SESSION_ID": sent.session_id, "AIDEMEMO_SOURCE_ID": SOURCE, "AIDEMEMO_ACTOR_ID": RECEIVER}
    assert "- [lesson] Late lesson" in data["content"] and "Use exponential backoff" in data["content"]
    assert f"handoff return --outcome succeeded --result-fact-id <fact_id> {sent.handoff_id}" in data["content"]
    again = cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER).out.splitlines()
    assert again[0] == f"# Assignment `{sent.handoff_id}` was already accepted by {RECEIVER}; nothing changed"
    assert again[-3:] == [
        f"export AIDEMEMO_SESSION_ID='{sent.session_id}'",
        f"export AIDEMEMO_SOURCE_ID='{SOURCE}'",
        f"export AIDEMEMO_ACTOR_ID='{RECEIVER}'",
    ]
    assert all(line.startswith("#") for line in again[:-3])  # the packet is shell comments: eval-safe
    assert _show(cli, sent.handoff_id)["revision"] == 1


def test_accept_refusals_and_claims(cli: Cli, sent: Handoff) -> None:
    assert cli.refused("handoff", "accept", sent.handoff_id, env={"AIDEMEMO_ACTOR_ID": SENDER})["message"] == (
        f"invalid input: handoff {sent.handoff_id} is assigned to {RECEIVER}, not {SENDER}"
    )
    assert _show(cli, sent.handoff_id)["status"] == "pending"
    cli.ok("handoff", "accept", "--claim-id", "worker-a", sent.handoff_id, env=AS_RECEIVER)
    assert cli.j("handoff", "accept", "--claim-id", "worker-a", sent.handoff_id, env=AS_RECEIVER)["changed"] is False
    claimed = f"invalid input: handoff {sent.handoff_id} is already claimed by another worker"
    assert cli.refused("handoff", "accept", "--claim-id", "worker-b", sent.handoff_id, env=AS_RECEIVER)["message"] == claimed
    assert cli.refused("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)["message"] == claimed
    failed_fact = receiver_fact(cli, sent, "attempt 1 failed")
    cli.ok("handoff", "return", "--outcome", "failed", "--result-fact-id", failed_fact, sent.handoff_id, env=AS_RECEIVER)
    retried = cli.j("handoff", "accept", "--claim-id", "worker-b", sent.handoff_id, env=AS_RECEIVER)["assignment"]
    assert (retried["attempt_count"], retried["claim_id"], retried["outcome"], retried["result_fact_id"]) == (2, "worker-b", None, None)
    cli.ok("handoff", "return", "--outcome", "succeeded", "--result-fact-id", receiver_fact(cli, sent), sent.handoff_id, env=AS_RECEIVER)
    assert cli.refused("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)["message"] == (
        f"invalid input: handoff {sent.handoff_id} is already completed"
    )
    assert cli.refused("handoff", "accept", "handoff-nope", env=AS_RECEIVER)["code"] == "entity_not_found"


def test_heartbeat(cli: Cli, sent: Handoff) -> None:
    assert cli.refused("handoff", "heartbeat", sent.handoff_id, env=AS_RECEIVER)["message"] == (
        f"invalid input: handoff {sent.handoff_id} must be accepted before sending a heartbeat"
    )
    cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER)
    assert cli.refused("handoff", "heartbeat", "--actor-id", SENDER, sent.handoff_id)["code"] == "invalid_input"
    first = cli.ok("handoff", "heartbeat", sent.handoff_id, env=AS_RECEIVER | {"AIDEMEMO_NOW_MS": "5000000000000"}).out.strip()
    assert first == f"Heartbeat {sent.handoff_id} count=1 at=5000000000000"
    record = cli.j("handoff", "heartbeat", sent.handoff_id, env=AS_RECEIVER)
    assert (record["heartbeat_count"], record["revision"]) == (2, 3)


def test_return_is_fail_closed_then_succeeds_once(cli: Cli, sent: Handoff) -> None:
    env = AS_RECEIVER
    good = receiver_fact(cli, sent)
    pending_refusal = cli.refused("handoff", "return", "--outcome", "succeeded", "--result-fact-id", good, sent.handoff_id, env=env)
    assert pending_refusal["message"] == f"invalid input: accept handoff {sent.handoff_id} before returning a result"
    cli.ok("handoff", "accept", sent.handoff_id, env=env)
    unattached = receiver_fact(cli, sent, "detached", **{"--session-id": ""})
    foreign = receiver_fact(cli, sent, "foreign", **{"--session-id": "", "--source-id": "other", "--entities": sent.session_id})
    by_sender = receiver_fact(cli, sent, "sender wrote it", **{"--actor-id": SENDER})
    expected = {
        unattached: f"result fact {unattached} must be attached to handoff session {sent.session_id}",
        foreign: f"result fact {foreign} must use the handoff source_id",
        by_sender: f"result fact {by_sender} must be written by receiving actor {RECEIVER}",
        "not-a-ulid": "result_fact_id must be a valid ULID",
    }
    for fact_id, message in expected.items():
        error = cli.refused("handoff", "return", "--outcome", "succeeded", "--result-fact-id", fact_id, sent.handoff_id, env=env)
        assert error == {"code": "invalid_input", "message": f"invalid input: {message}"}
    missing = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
    assert cli.refused("handoff", "return", "--outcome", "succeeded", "--result-fact-id", missing, sent.handoff_id, env=env)["code"] == "fact_not_found"
    assert cli.refused("handoff", "return", "--outcome", "done", "--result-fact-id", good, sent.handoff_id, env=env)["message"] == (
        "invalid input: outcome must be succeeded or failed"
    )
    assert cli.refused("handoff", "return", "--outcome", "succeeded", "--result-fact-id", good, "--actor-id", SENDER, sent.handoff_id)["code"] == "invalid_input"
    assert _show(cli, sent.handoff_id)["status"] == "accepted"  # every refusal left it untouched
    text = cli.ok("handoff", "return", "--outcome", " Succeeded ", "--result-fact-id", good, sent.handoff_id, env=env).out.strip()
    assert text == f"Returned handoff {sent.handoff_id} outcome=succeeded status=completed result={good}"
    before = _show(cli, sent.handoff_id)
    repeat = cli.ok("handoff", "return", "--outcome", "succeeded", "--result-fact-id", good, sent.handoff_id, env=env)
    assert "nothing changed" in repeat.out
    repeat_json = cli.ok("--json", "handoff", "return", "--outcome", "succeeded", "--result-fact-id", good, sent.handoff_id, env=env)
    assert repeat_json.json() == before and "nothing changed" in repeat_json.err
    assert _show(cli, sent.handoff_id) == before
    other = receiver_fact(cli, sent, "second opinion")
    assert cli.refused("handoff", "return", "--outcome", "succeeded", "--result-fact-id", other, sent.handoff_id, env=env)["message"] == (
        f"invalid input: handoff {sent.handoff_id} is already completed with a different result"
    )
    outbox = cli.j("handoff", "outbox", "--actor-id", SENDER)["assignments"][0]
    assert (outbox["status"], outbox["outcome"], outbox["result_fact_id"]) == ("completed", "succeeded", good)
    assert cli.j("fact", "get", good)["actor_id"] == RECEIVER


def test_board_lanes_with_a_pinned_clock(cli: Cli, sent: Handoff) -> None:
    t0 = _show(cli, sent.handoff_id)["created_at"]
    hour = 3_600_000

    def lane(now: int, *extra: str) -> tuple[str, str, bool]:
        board = cli.j("handoff", "board", "--include-completed", *extra, env={"AIDEMEMO_NOW_MS": str(now)})
        item = next(i for i in board["assignments"] if i["assignment"]["handoff_id"] == sent.handoff_id)
        return item["lane"], item["next_action"], item["stale"]

    assert lane(t0 + 1) == ("ready", "accept_or_run", False)  # type: ignore[operator]
    assert lane(t0 + hour) == ("attention", "inspect_or_run", True)  # type: ignore[operator]
    assert lane(t0 + 10, "--stale-after", "5ms") == ("attention", "inspect_or_run", True)  # type: ignore[operator]
    t1 = t0 + 100  # type: ignore[operator]
    cli.ok("handoff", "accept", sent.handoff_id, env=AS_RECEIVER | {"AIDEMEMO_NOW_MS": str(t1)})
    assert lane(t1 + 1) == ("in_progress", "wait_for_result", False)
    assert lane(t1 + 2 * hour) == ("attention", "check_worker_liveness", True)
    cli.ok("handoff", "heartbeat", sent.handoff_id, env=AS_RECEIVER | {"AIDEMEMO_NOW_MS": str(t1 + 2 * hour)})
    assert lane(t1 + 2 * hour + 1) == ("in_progress", "wait_for_result", False)
    failed = receiver_fact(cli, sent, "broke")
    cli.ok("handoff", "return", "--outcome", "failed", "--result-fact-id", failed, sent.handoff_id, env=AS_RECEIVER)
    assert lane(t1 + 3 * hour)[:2] == ("attention", "orchestrator_retry_or_close")
    cli.ok("handoff", "return", "--outcome", "succeeded", "--result-fact-id", failed, sent.handoff_id, env=AS_RECEIVER)
    assert lane(t1 + 30 * hour) == ("returned", "validate_result", False)
    assert cli.j("handoff", "board")["assignments"] == []  # completed hidden by default
    assert cli.ok("handoff", "board").out.strip() == "Handoff board: ready=0 in_progress=0 attention=0 returned=0\n(no handoff assignments)"
    assert cli.j("handoff", "board", "--include-completed", "--actor-id", "stranger")["assignments"] == []
    assert len(cli.j("handoff", "board", "--include-completed", "--actor-id", SENDER)["assignments"]) == 1
    assert cli.refused("handoff", "board", "--stale-after", "0s")["message"] == "invalid input: stale_after must be greater than zero"
    assert "invalid duration" in cli.refused("handoff", "board", "--stale-after", "soon")["message"]


def test_board_counts_and_json_shape(cli: Cli, sent: Handoff) -> None:
    env = {"AIDEMEMO_SESSION_ID": sent.session_id, "AIDEMEMO_ACTOR_ID": SENDER}
    second = cli.j("handoff", "send", RECEIVER, env=env)["handoff_id"]
    cli.ok("handoff", "accept", second, env=AS_RECEIVER)
    board = cli.j("handoff", "board")
    assert set(board) == {"generated_at", "stale_after_ms", "lifecycle_owner", "lanes", "assignments"}
    assert board["lanes"] == {"ready": 1, "in_progress": 1, "attention": 0, "returned": 0}
    assert board["stale_after_ms"] == 3_600_000
    assert set(board["assignments"][0]) == {"assignment", "lane", "stale", "age_ms", "last_activity_at", "next_action", "lifecycle_owner"}
    assert cli.ok("handoff", "board").out.splitlines()[0] == "Handoff board: ready=1 in_progress=1 attention=0 returned=0"
