"""`session new|resume|handoff` and `fact add|get`."""

from __future__ import annotations

from pathlib import Path

from .conftest import SENDER, SOURCE, Cli


def test_session_new_prints_exports_and_json_shape(cli: Cli) -> None:
    text = cli.ok("session", "new", "--source-id", SOURCE, "Redis", "timeout").out
    lines = text.splitlines()
    assert lines[0] == "# aidememo session: Redis timeout"
    assert lines[1].startswith("# id: session-")
    session_id = lines[1].removeprefix("# id: ")
    assert lines[2:] == [f"export AIDEMEMO_SESSION_ID='{session_id}'", f"export AIDEMEMO_SOURCE_ID='{SOURCE}'"]
    data = cli.j("session", "new", "Plain")
    assert set(data) == {"session_id", "topic", "source_id", "export"}
    assert data["source_id"] is None and data["export"] == f"export AIDEMEMO_SESSION_ID='{data['session_id']}'"
    assert len(data["session_id"]) == len("session-") + 26


def test_session_new_refuses_a_blank_topic(cli: Cli) -> None:
    assert cli.refused("session", "new", "   ") == {"code": "invalid_input", "message": "invalid input: session topic must not be empty"}


def test_session_resume_restores_scope_and_refuses_unknown_or_foreign_sessions(cli: Cli) -> None:
    session_id = cli.j("session", "new", "--source-id", SOURCE, "T")["session_id"]
    data = cli.j("session", "resume", session_id)
    assert data["env"] == {"AIDEMEMO_SESSION_ID": session_id, "AIDEMEMO_SOURCE_ID": SOURCE}
    assert cli.ok("session", "resume", "--source-id", SOURCE, session_id).out.startswith("# aidememo resume: T\n")
    assert cli.refused("session", "resume", "session-nope") == {"code": "entity_not_found", "message": "entity not found: 'session-nope'"}
    assert cli.refused("session", "resume", "--source-id", "other", session_id)["code"] == "entity_not_found"
    unscoped = cli.j("session", "new", "U")["session_id"]
    assert cli.ok("session", "resume", unscoped).out.splitlines()[-1] == "unset AIDEMEMO_SOURCE_ID"


def _session_with_facts(cli: Cli) -> tuple[str, dict[str, str]]:
    session_id = cli.j("session", "new", "--source-id", SOURCE, "Review")["session_id"]
    env = {"AIDEMEMO_SESSION_ID": session_id, "AIDEMEMO_SOURCE_ID": SOURCE, "AIDEMEMO_ACTOR_ID": SENDER}
    return session_id, env


def test_fact_add_attaches_the_active_session_with_type_entities_source_and_author(cli: Cli) -> None:
    session_id, env = _session_with_facts(cli)
    data = cli.j("fact", "add", "Use backoff", "--type", "decision", "--entities", "Redis,Pool", "--entities", "Retry", env=env)
    assert data["type"] == "decision"
    assert data["entities"] == ["Redis", "Pool", "Retry", session_id]
    assert (data["source_id"], data["actor_id"], data["session_id"]) == (SOURCE, SENDER, session_id)
    assert len(data["fact_id"]) == 26
    assert cli.ok("fact", "add", "x", env=env).out.startswith("Added fact ")
    got = cli.j("fact", "get", data["fact_id"])
    assert got == {k: v for k, v in data.items() if k != "session_id"}
    text = cli.ok("fact", "get", data["fact_id"].lower()).out
    assert text.splitlines()[1] == "Use backoff"


def test_fact_add_attaches_only_where_the_session_is_visible(cli: Cli) -> None:
    session_id, env = _session_with_facts(cli)
    elsewhere = cli.j("fact", "add", "other scope", "--source-id", "other", env=env)
    assert elsewhere["session_id"] is None and session_id not in elsewhere["entities"]
    detached = cli.j("fact", "add", "no session", "--no-session", env=env)
    assert detached["session_id"] is None
    assert cli.refused("fact", "add", "x", "--source-id", "other", "--session-id", session_id)["message"] == (
        f"invalid input: session {session_id} is not visible in source other"
    )
    assert cli.refused("fact", "add", "x", "--session-id", "session-nope")["code"] == "entity_not_found"


def test_fact_refusals(cli: Cli) -> None:
    assert cli.refused("fact", "add", "  ")["message"] == "invalid input: fact content must not be empty"
    assert cli.refused("fact", "add", "x", "--actor-id", "a\tb")["message"] == (
        "invalid input: actor_id must not contain control characters"
    )
    assert cli.refused("fact", "get", "01HZZZZZZZZZZZZZZZZZZZZZZZ") == {
        "code": "fact_not_found",
        "message": "fact not found: '01HZZZZZZZZZZZZZZZZZZZZZZZ'",
    }
    usage = cli.run("fact", "add", "x", "--type", "rumour")
    assert usage.rc == 2 and usage.err.count("\n") == 1 and "invalid choice" in usage.err


def test_session_handoff_is_a_read_only_packet_with_every_section(cli: Cli, tmp_path: Path) -> None:
    session_id, env = _session_with_facts(cli)
    decision = cli.j("fact", "add", "Use exponential backoff", "--type", "decision", env=env)["fact_id"]
    cli.ok("fact", "add", "Timeouts hide pool exhaustion", "--type", "lesson", env=env)
    cli.ok("fact", "add", "ECONNRESET in test_redis", "--type", "error", env=env)
    cli.ok("fact", "add", "Is the pool size configurable?", "--type", "question", env=env)
    cli.ok("fact", "add", "Neighbour secret", "--source-id", "other-team", "--entities", session_id, env=env)
    data = cli.j(
        "session", "handoff", "--from", "codex/coding", "--to", "hermes/reviewer", "--focus", "Review the patch",
        "--done-when", "focused tests pass", env=env,
    )
    packet = data["content"]
    for needle in (
        "# AideMemo Agent Handoff",
        f"- session: `{session_id}`",
        "- from: codex-one (agent codex, profile coding)",
        "- to: - (agent hermes, profile reviewer)",
        "## Resume Contract",
        "## Requested Focus\nReview the patch",
        "## Definition of Done\nfocused tests pass",
        f"- [decision] Use exponential backoff (fact `{decision}`, by codex-one)",
        "## Open Questions\n- [question] Is the pool size configurable?",
        "## Lessons and Risks\n- [lesson] Timeouts hide pool exhaustion",
        "- [error] ECONNRESET in test_redis",
        f"session resume --source-id '{SOURCE}' '{session_id}'",
        "fact get <fact_id>",
    ):
        assert needle in packet, needle
    assert "Neighbour secret" not in packet  # no leakage from another source
    assert (data["dispatched"], data["handoff_id"], data["fact_count"], data["bytes"]) == (False, None, 4, len(packet.encode()))
    assert cli.j("handoff", "outbox", "--actor-id", SENDER)["assignments"] == []  # preview dispatches nothing
    out = tmp_path / "packet.md"
    text = cli.ok("session", "handoff", "--output", str(out), session_id, env={"AIDEMEMO_SOURCE_ID": SOURCE}).out
    assert text.startswith(f"Wrote handoff packet to {out}") and out.read_text() == packet.replace(
        "- from: codex-one (agent codex, profile coding)\n- to: - (agent hermes, profile reviewer)\n", ""
    ).replace("## Requested Focus\nReview the patch\n\n", "").replace("## Definition of Done\nfocused tests pass\n\n", "")


def test_session_handoff_keeps_the_latest_facts_and_refuses_without_a_session(cli: Cli) -> None:
    _, env = _session_with_facts(cli)
    for index in range(5):
        cli.ok("fact", "add", f"note {index}", env=env)
    packet = cli.j("session", "handoff", "--limit", "2", env=env)["content"]
    assert "note 3" in packet and "note 4" in packet and "note 2" not in packet
    assert packet.index("note 3") < packet.index("note 4")  # chronological
    assert "- included_facts: 2 of 5" in packet
    assert cli.refused("session", "handoff")["message"] == "invalid input: no session: pass SESSION or set AIDEMEMO_SESSION_ID"
    assert cli.refused("session", "handoff", "--limit", "0", env=env)["message"] == "invalid input: limit must be at least 1"


def test_session_handoff_dispatch_stores_the_route_and_stays_a_pointer(cli: Cli) -> None:
    session_id, env = _session_with_facts(cli)
    cli.ok("fact", "add", "Use backoff", "--type", "decision", env=env)
    data = cli.j("session", "handoff", "--dispatch", "--from", "codex/coding", "--to", "hermes/reviewer",
                 "--to-actor", "hermes-one", "--focus", "Review", env=env)
    assert data["dispatched"] is True and data["status"] == "pending"
    assert f"- handoff: `{data['handoff_id']}` [pending]" in data["content"]
    record = cli.j("handoff", "show", data["handoff_id"])
    assert (record["from_actor"], record["from_agent"], record["from_profile"], record["to_actor"], record["to_agent"],
            record["to_profile"], record["source_id"]) == (SENDER, "codex", "coding", "hermes-one", "hermes", "reviewer", SOURCE)
    text = cli.ok("session", "handoff", "--dispatch", "--to-actor", "hermes-one", env=env).out
    assert text.splitlines()[-1].startswith(f"Assignment: {SENDER} -> hermes-one [handoff-")
    assert len(cli.j("handoff", "inbox", "--actor-id", "hermes-one")["assignments"]) == 2
    assert cli.refused("session", "handoff", "--dispatch", env=env)["message"] == (
        "invalid input: --dispatch needs --to-actor with the receiving account alias"
    )
    no_sender = {k: v for k, v in env.items() if k != "AIDEMEMO_ACTOR_ID"}
    assert cli.refused("session", "handoff", "--dispatch", "--to-actor", "x", env=no_sender)["message"] == (
        "invalid input: set AIDEMEMO_ACTOR_ID or pass --from-actor with the sending account alias"
    )
    assert len(cli.j("handoff", "inbox", "--actor-id", "hermes-one")["assignments"]) == 2  # refusals stored nothing
