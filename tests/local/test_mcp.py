"""`aidememo-ref mcp`: upstream's stdio JSON-RPC, driven the way upstream's SDK and worker lane drive it.

Each SDK call is a fresh process fed two lines, ``initialize`` (id 0) then one ``tools/call``
(id 1), with the client's default ``source_id`` and ``actor_id`` put into the arguments. The
sequence below is the worker lane's (``run_external_assignment``), message for message.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aidememo_cli._mcp._local import LocalTools
from aidememo_cli._mcp._protocol import classify_error, serve
from aidememo_cli._mcp._schemas import TOOLS, UPSTREAM_ONLY

from .conftest import REPO, RECEIVER, SENDER, SOURCE, _CLI_ENV, Cli, Handoff

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"clientInfo": {"name": "aidememo-agent-sdk", "version": "0.1.0"}}}


def rpc(store: Path, lines: list[object], env: dict[str, str] | None = None) -> list[str]:
    """Serve raw request lines in-process, as the stdio loop does; return the answer lines."""
    out: list[str] = []
    tools = LocalTools(str(store), env or {}, lambda: 1_767_225_600_000)
    try:
        serve([line if isinstance(line, str) else json.dumps(line) for line in lines], out.append, tools, "9.9.9")
    finally:
        tools.close()
    assert all(line.endswith("\n") and line.count("\n") == 1 for line in out)  # one response per line
    return [line.rstrip("\n") for line in out]


def sdk_call(store: Path, name: str, arguments: dict[str, Any], *, source_id: str | None = SOURCE,
             actor_id: str | None = RECEIVER) -> Any:
    """What ``AideMemoClient._mcp_tool`` sends and reads back."""
    arguments = dict(arguments)
    if source_id is not None:
        arguments.setdefault("source_id", source_id)
    if actor_id is not None:
        arguments.setdefault("actor_id", actor_id)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    responses = [json.loads(line) for line in rpc(store, [INIT, call])]
    assert [r["id"] for r in responses] == [0, 1]
    result = responses[1]["result"]
    if result.get("isError"):
        raise AssertionError(result["content"][0]["text"])
    return json.loads(result["content"][0]["text"])


def tool_error(store: Path, name: str, arguments: dict[str, Any]) -> dict[str, str]:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
    (line,) = rpc(store, [call])
    result = json.loads(line)["result"]
    assert result["isError"] is True and result["content"][0]["type"] == "text"
    error: dict[str, str] = json.loads(result["content"][0]["text"])
    assert list(error) == ["error_kind", "message", "tool"]
    return error


def test_initialize_ping_list_and_json_rpc_errors(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    lines = rpc(store, [INIT, {"jsonrpc": "2.0", "id": "p", "method": "ping"},
                        {"jsonrpc": "2.0", "method": "notifications/initialized"},
                        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "{not json", "",
                        {"jsonrpc": "2.0", "id": 3, "method": "resources/list"},
                        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"arguments": {}}},
                        {"id": 5, "method": "ping"}])
    assert lines[0] == ('{"jsonrpc":"2.0","id":0,"result":{"capabilities":{"tools":{"listChanged":false}},'
                        '"protocolVersion":"2025-06-18","serverInfo":{"name":"aidememo","version":"9.9.9"}}}')
    assert lines[1] == '{"jsonrpc":"2.0","id":"p","result":{}}'  # the notification got no answer
    tools = json.loads(lines[2])["result"]["tools"]
    names = [tool["name"] for tool in tools]
    assert {"aidememo_handoff_inbox", "aidememo_handoff", "aidememo_fact_add", "aidememo_fact_get",
            "aidememo_session_start", "aidememo_workflow_start", "aidememo_profile_export"} == set(names)
    inbox = tools[names.index("aidememo_handoff_inbox")]
    assert list(inbox) == ["description", "inputSchema", "name"]
    assert inbox["inputSchema"]["properties"]["action"]["enum"] == [
        "list", "outbox", "show", "heartbeat", "board", "status", "accept", "return", "complete"]
    assert tools[names.index("aidememo_fact_add")]["inputSchema"]["required"] == ["content"]
    parse, unknown, invalid, missing = (json.loads(line) for line in lines[3:])
    assert (parse["id"], parse["error"]["code"]) == (None, -32700) and parse["error"]["message"].startswith("Parse error: ")
    assert unknown["error"] == {"code": -32601, "message": "Method not found: resources/list"}
    assert invalid["error"]["code"] == -32602 and invalid["error"]["message"].startswith("Invalid params: ")
    assert missing["error"] == {"code": -32700, "message": "Parse error: missing field `jsonrpc`"}


def test_unknown_and_unserved_tools_answer_upstreams_unknown_tool_error(tmp_path: Path) -> None:
    served = {tool["name"] for tool in TOOLS}
    assert len(served | UPSTREAM_ONLY) == 29 and not served & UPSTREAM_ONLY  # upstream's 29 tools, split
    for name in (*sorted(UPSTREAM_ONLY), "nope"):
        assert tool_error(tmp_path / "s.sqlite", name, {}) == {
            "error_kind": "unknown_tool", "message": f"Unknown tool: {name}", "tool": name}


@pytest.mark.parametrize(("message", "kind"), [
    ("actor_id required (or set AIDEMEMO_ACTOR_ID)", "invalid_input"),
    ("invalid input: outcome must be succeeded or failed", "invalid_input"),
    ("entity not found: 'x'", "not_found"),
    ("transaction conflict (concurrent write): retry needed", "conflict"),
    ("dispatch requires to_actor", "internal"),
    ("Unknown tool: x", "unknown_tool"),
])
def test_error_kinds_are_classified_from_the_message_as_upstream(message: str, kind: str) -> None:
    assert classify_error(message) == kind


def test_the_worker_lane_sequence_succeeds_on_our_mcp(cli: Cli, sent: Handoff) -> None:
    store = cli.store
    # 1. --next: list pending with a large limit, pick the oldest by created_at.
    listed = sdk_call(store, "aidememo_handoff_inbox", {"action": "list", "include_completed": False, "limit": 10_000})
    assert list(listed) == ["actor_id", "assignments", "source_id"]
    pending = [r for r in listed["assignments"] if r["status"] == "pending"]
    handoff_id = min(pending, key=lambda r: int(r["created_at"]))["handoff_id"]
    assert handoff_id == sent.handoff_id
    # 2. accept with the lane's own claim.
    claim = "worker-0123456789abcdef0123456789abcdef"
    accepted = sdk_call(store, "aidememo_handoff_inbox", {"action": "accept", "handoff_id": handoff_id,
                                                          "actor_id": RECEIVER, "claim_id": claim})
    assignment = accepted["assignment"]
    assert (assignment["session_id"], assignment["source_id"], assignment["claim_id"]) == (sent.session_id, SOURCE, claim)
    assert (assignment["upstream_system"], assignment["focus"], assignment["done_when"]) == (None, "Review", "tests pass")
    assert accepted["resume"]["env"] == {"AIDEMEMO_ACTOR_ID": RECEIVER, "AIDEMEMO_SESSION_ID": sent.session_id,
                                         "AIDEMEMO_SOURCE_ID": SOURCE}
    assert accepted["content"].startswith("# AideMemo Agent Handoff")
    # 4. a heartbeat pulse.
    beat = sdk_call(store, "aidememo_handoff_inbox", {"action": "heartbeat", "handoff_id": handoff_id, "actor_id": RECEIVER})
    assert beat["assignment"]["heartbeat_count"] == 1
    # 5. the result fact, through aidememo_fact_add because a session_id is given.
    added = sdk_call(store, "aidememo_fact_add", {
        "content": f"External worker result (codex, handoff {handoff_id}):\nreviewed", "session_id": sent.session_id,
        "fact_type": "note", "entities": ["ExternalWorker", "ExternalWorker:codex"],
        "tags": ["worker-lane", "codex", handoff_id]})
    assert list(added) == sorted(added) and {"id", "shadow_corpus", "source_id"} <= set(added)
    assert added["entity_names"] == ["ExternalWorker", "ExternalWorker:codex", sent.session_id]
    assert (added["actor_id"], added["source_id"], added["fact_type_source"]) == (RECEIVER, SOURCE, "explicit")
    # 6. return, reading assignment.status.
    returned = sdk_call(store, "aidememo_handoff_inbox", {"action": "return", "handoff_id": handoff_id,
                                                          "result_fact_id": added["id"], "outcome": "succeeded",
                                                          "actor_id": RECEIVER})
    assert returned["assignment"]["status"] == "completed"
    # The sender's view through the CLI agrees: one store, one implementation.
    record = cli.j("handoff", "status", "--actor-id", SENDER, handoff_id)
    assert (record["result_fact_id"], record["outcome"], record["heartbeat_count"]) == (added["id"], "succeeded", 1)
    assert cli.j("fact", "get", added["id"])["tags"] == ["worker-lane", "codex", handoff_id]


def test_every_inbox_action_and_its_refusals(cli: Cli, sent: Handoff) -> None:
    store = cli.store
    shown = sdk_call(store, "aidememo_handoff_inbox", {"action": "show", "handoff_id": sent.handoff_id}, actor_id=None)
    assert list(shown) == ["assignment"] and shown["assignment"]["status"] == "pending"
    assert sdk_call(store, "aidememo_handoff_inbox", {"action": "status", "handoff_id": sent.handoff_id},
                    actor_id=SENDER)["assignment"]["handoff_id"] == sent.handoff_id
    outbox = sdk_call(store, "aidememo_handoff_inbox", {"action": "outbox"}, actor_id=SENDER)
    assert [a["handoff_id"] for a in outbox["assignments"]] == [sent.handoff_id]
    board = sdk_call(store, "aidememo_handoff_inbox", {"action": "board", "stale_after": "1h"}, actor_id=None)
    assert board["lanes"] == {"attention": 0, "in_progress": 0, "ready": 1, "returned": 0}
    sdk_call(store, "aidememo_handoff_inbox", {"action": "accept", "handoff_id": sent.handoff_id})
    done = sdk_call(store, "aidememo_handoff_inbox", {"action": "complete", "handoff_id": sent.handoff_id})
    assert done["assignment"]["status"] == "completed"
    assert tool_error(store, "aidememo_handoff_inbox", {"action": "list"}) == {
        "error_kind": "invalid_input", "message": "actor_id required (or set AIDEMEMO_ACTOR_ID)",
        "tool": "aidememo_handoff_inbox"}
    assert tool_error(store, "aidememo_handoff_inbox", {"action": "status", "actor_id": SENDER})["message"] == (
        "handoff_id required for action=status")
    assert tool_error(store, "aidememo_handoff_inbox", {"action": "reopen", "actor_id": SENDER})["message"] == (
        'unknown handoff inbox action "reopen"; expected list, outbox, show, heartbeat, board, status, accept,'
        " return, or complete")
    refused = tool_error(store, "aidememo_handoff_inbox", {"action": "accept", "handoff_id": sent.handoff_id,
                                                           "actor_id": RECEIVER})
    assert refused["message"] == f"invalid input: handoff {sent.handoff_id} is already completed"
    # The environment supplies the actor, as upstream's MCP defaults do.
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "aidememo_handoff_inbox", "arguments": {"action": "list", "include_completed": True}}}
    (line,) = rpc(store, [call], env={"AIDEMEMO_ACTOR_ID": RECEIVER})
    assert json.loads(json.loads(line)["result"]["content"][0]["text"])["actor_id"] == RECEIVER


def test_handoff_tool_dispatch_fact_get_session_start_workflow_and_profile(cli: Cli, sent: Handoff) -> None:
    store = cli.store
    packet = sdk_call(store, "aidememo_handoff", {"session": sent.session_id, "from": "codex/coding",
                                                  "to": "hermes/reviewer", "limit": 40, "include_superseded": False})
    assert (packet["artifact"], packet["dispatched"], packet["handoff_id"], packet["from_agent"]) == (
        "agent_handoff", False, None, "codex")
    assert packet["content"] == cli.j("session", "handoff", "--from", "codex/coding", "--to", "hermes/reviewer",
                                      "--source-id", SOURCE, sent.session_id)["content"]  # CLI = MCP packet
    dispatched = sdk_call(store, "aidememo_handoff", {"session": sent.session_id, "from_actor": SENDER,
                                                      "to_actor": "claude-one", "dispatch": True})
    assert dispatched["status"] == "pending" and dispatched["handoff_id"].startswith("handoff-")
    fact_id = cli.j("fact", "add", "Decision: keep it", "--source-id", SOURCE)["id"]
    got = sdk_call(store, "aidememo_fact_get", {"id": fact_id}, actor_id=None)
    assert got == {"content": "Decision: keep it", "entities": [], "id": fact_id, "source_id": SOURCE, "type": "decision"}
    assert tool_error(store, "aidememo_fact_get", {"id": fact_id, "source_id": "other"})["error_kind"] == "not_found"
    assert tool_error(store, "aidememo_fact_add", {"content": "x", "fact_type": "bogus"})["message"].startswith(
        'invalid fact_type "bogus"; accepted: decision, pattern,')
    assert tool_error(store, "aidememo_fact_add", {"content": "x", "session_id": "session-nope"})["message"] == (
        "session_id \"session-nope\" does not resolve to an entity: entity not found: 'session-nope'")
    start = sdk_call(store, "aidememo_session_start", {})
    assert set(start) == {"stats", "pinned", "personalisation", "recent", "top_entities", "open_issues"}
    workflow = sdk_call(store, "aidememo_workflow_start", {"title": "Harden preflight", "bm25_only": True})
    assert list(workflow)[:3] == ["session_id", "export", "title"]  # a struct upstream: declaration order
    assert workflow["source_id"] == SOURCE and workflow["ticket_fact_id"]
    profile = sdk_call(store, "aidememo_profile_export", {"limit": 80, "include_sessions": False})
    assert profile["artifact"] == "project_profile" and profile["content"].startswith("# AideMemo Project Profile")


def test_a_real_mcp_process_answers_the_sdks_two_lines(cli: Cli, sent: Handoff) -> None:
    env = {k: v for k, v in os.environ.items() if k not in _CLI_ENV}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "aidememo_handoff_inbox",
                       "arguments": {"action": "list", "actor_id": RECEIVER, "source_id": SOURCE}}}
    done = subprocess.run([sys.executable, "-m", "aidememo_ref", "--backend", "sqlite", "--store", str(cli.store), "mcp"],
                          input=f"{json.dumps(INIT)}\n{json.dumps(call)}\n", capture_output=True, text=True, env=env,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["result"]["serverInfo"]["name"] == "aidememo"
    assert json.loads(second["result"]["content"][0]["text"])["assignments"][0]["handoff_id"] == sent.handoff_id
