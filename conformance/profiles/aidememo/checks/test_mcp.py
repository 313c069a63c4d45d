"""The stateless MCP gateway (wire §1.18): protocol headers, role-scoped tools, tools as REST calls.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.http import Exchange
from conformance.marks import reads
from conformance.profiles.aidememo.actors import MCP_VERSION as VERSION
from conformance.profiles.aidememo.actors import Actor
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.implementation_defined import SCORE, comparable
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, rpc_error, tool_error, tool_ok, tool_result

READ_TOOLS = {"search", "resource_get", "handoff_list", "handoff_status"}
WRITE_TOOLS = {"session_create", "fact_create", "handoff_context_create", "handoff_send", "handoff_accept",
               "handoff_return"}


def _post(actor: Actor, headers: dict[str, str], method: str = "tools/list") -> Exchange:
    body = {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}}
    return actor.request("POST", f"{actor.base}/mcp", json_body=body, headers=headers)


@isolation.SHARED
@reads("AM-MCP-1", "missing-version")
def test_missing_protocol_version_is_refused(world: World) -> None:
    """Isolation: shared: refused before any tool runs."""
    project = world.project()
    exchange = _post(project.writer, {"Mcp-Method": "tools/list"})
    rpc_error(exchange, 400, -32022)


@isolation.SHARED
@reads("AM-MCP-1", "wrong-version")
@pytest.mark.parametrize("version", ["2025-06-18", "2026-07-29"])
def test_another_protocol_version_is_refused(world: World, version: str) -> None:
    """Isolation: shared: refused before any tool runs."""
    project = world.project()
    rpc_error(_post(project.writer, {"Mcp-Protocol-Version": version, "Mcp-Method": "tools/list"}), 400, -32022)


@isolation.SHARED
@reads("AM-MCP-1", "method")
def test_missing_method_header_is_refused(world: World) -> None:
    """Isolation: shared: refused before any tool runs."""
    project = world.project()
    rpc_error(_post(project.writer, {"Mcp-Protocol-Version": VERSION}), 400, -32020)


@isolation.SHARED
@reads("AM-MCP-1", "token")
def test_missing_token_gets_the_rest_error(world: World) -> None:
    """Isolation: shared: sends no token."""
    project = world.project()
    # With _meta: upstream checks the envelope, headers and _meta before it looks for a token.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list",
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}}
    exchange = world.wire.request(world.transcript, "POST", f"{project.writer.base}/mcp", json_body=body,
                                          headers={"Mcp-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})
    expect_error(exchange, 401, "authentication_failed")


@isolation.SHARED
@reads("AM-MCP-2", "roles")
def test_tools_list_depends_on_the_role(world: World) -> None:
    """Isolation: shared: lists tools, not data."""
    project = world.project(writers=("writer",), readers=("reader",))
    for actor, expected in ((project.reader, READ_TOOLS), (project.writer, READ_TOOLS | WRITE_TOOLS)):
        tools = tool_result(actor.mcp("tools/list"))["tools"]
        names = {tool["name"] for tool in tools}
        assert names == expected, f"{actor.role} sees tools {sorted(names)}, expected {sorted(expected)}"
        schemas = str([tool.get("inputSchema") for tool in tools])
        for identity in ("tenant_id", "project_id", "actor_id"):
            assert identity not in schemas, f"a tool schema accepts {identity}; identity comes from the token"


@isolation.SHARED
@reads("AM-MCP-2", "is-error")
def test_tool_failure_is_a_200_with_is_error(world: World) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project(writers=("writer",), readers=("reader",))
    exchange = project.reader.tool("session_create", operation_id=world.new_id("op"),
                                   session_id=world.new_id("session"), source_id=None, topic="refused")
    tool_error(exchange, "project_unauthorized")


def _same(mcp: Exchange, rest: Exchange, what: str) -> None:
    assert rest.status == 200, f"REST {what} answered {rest.status}"
    # Two reads of one server: only a search's scores may differ between them (SCORE, wire §8 item 8;
    # a server summing in a hash map's order can change a score's last digit from one search to the next).
    mcp_answer, rest_answer = tool_ok(mcp), rest.json()
    assert comparable(mcp_answer, SCORE) == comparable(rest_answer, SCORE), (
        f"MCP {what} differs from REST {what}:\nMCP  {mcp_answer!r}\nREST {rest_answer!r}")


@isolation.PROJECT
@reads("AM-MCP-3", "reads")
def test_read_tools_answer_what_the_rest_routes_answer(world: World) -> None:
    """Isolation: project: the mailboxes and search."""
    project = world.project(writers=("sender", "receiver"))
    sender, receiver = project.sender, project.receiver
    ref = sender.setup_handoff(receiver)
    fact_id = sender.setup_fact(ref.session_id)
    _same(receiver.tool("handoff_status", handoff_id=ref.handoff_id), receiver.status(ref.handoff_id), "status")
    _same(receiver.tool("handoff_list", box="inbox", limit=5), receiver.mailbox("inbox", limit=5), "inbox")
    _same(sender.tool("handoff_list", box="outbox", source_id="src"), sender.mailbox("outbox", source_id="src"),
          "outbox")
    _same(receiver.tool("resource_get", kind="fact", id=fact_id), receiver.resource("fact", fact_id), "resource")
    if world.runtime.claimed("search"):
        fact = receiver.resource("fact", fact_id).json()["state"]["body"]
        word = max(fact["content"].split(), key=len).strip(".,:;")
        _same(receiver.tool("search", q=word, source_id="src"), receiver.search(word, source_id="src"), "search")


@isolation.SHARED
@reads("AM-MCP-3", "writes")
def test_write_tools_commit_what_rest_commits_and_replay(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    writer = project.writer
    session_id, operation = world.new_id("session"), world.new_id("op")
    arguments = {"operation_id": operation, "session_id": session_id, "source_id": "src", "topic": "via MCP"}
    receipt = tool_ok(writer.tool("session_create", **arguments))
    assert receipt.get("command_id") == operation and receipt.get("resource") == {"kind": "session", "id": session_id}, (
        f"operation_id must become the receipt's command_id: {receipt!r}")
    stored = writer.resource("session", session_id).json()["state"]["body"]
    assert stored == {"session_id": session_id, "source_id": "src", "topic": "via MCP",
                      "created_by": writer.actor_id}, f"the session the gateway created: {stored!r}"
    assert tool_ok(writer.tool("session_create", **arguments)) == receipt, "a replayed operation_id must replay"


@isolation.actors("writer")  # other: a shared actor, named only
@reads("AM-MCP-4", "arguments")
def test_undeclared_arguments_cannot_widen_identity(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = world.project(writers=("writer", "other"))
    # The refusal's message is the server's own (W §8 item 1): its code is what is promised.
    rpc_error(project.writer.tool("handoff_list", box="inbox", actor_id=project.other.actor_id), 400, -32602)
    rpc_error(project.writer.tool("session_create", operation_id=world.new_id("op"), session_id=world.new_id("s"),
                                   topic="t", tenant_id="another"), 400, -32602)
    rpc_error(project.writer.tool("handoff_list", box="sideways"), 400, -32602)


@isolation.READS
@reads("AM-MCP-4", "name", "unknown")
def test_header_and_name_mismatches_and_unknown_tools_are_refused(world: World) -> None:
    """Isolation: reads: its calls are refused, and it writes nothing."""
    project = world.project()
    writer = project.writer
    rpc_error(writer.mcp("tools/call", {"name": "search", "arguments": {"q": "x"}}, Mcp_Name="resource_get"),
               400, -32020)
    rpc_error(writer.tool("handoff_heartbeat", handoff_id="h"), 404, -32601)
    rpc_error(writer.mcp("resources/list"), 404, -32601)


@isolation.SHARED
@pytest.mark.requirement("AM-MCP-5")
def test_a_handoff_round_trip_keeps_cas_and_participant_rules(world: World) -> None:
    """Isolation: shared: its own handoff, read back by its id."""
    project = world.project(writers=("sender", "receiver", "other"))  # other: a bystander
    sender, receiver = project.sender, project.receiver
    session_id, handoff_id = world.new_id("session"), world.new_id("handoff")
    tool_ok(sender.tool("session_create", operation_id=world.new_id("op"), session_id=session_id, source_id="src",
                        topic="gateway round trip"))
    tool_ok(sender.tool("handoff_send", operation_id=world.new_id("op"), handoff_id=handoff_id, session_id=session_id,
                        to_actor=receiver.actor_id, focus="review", done_when=None))
    tool_error(project.other.tool("handoff_status", handoff_id=handoff_id), "handoff_actor_mismatch")
    claim = world.new_id("claim")
    accepted = tool_ok(receiver.tool("handoff_accept", operation_id=world.new_id("op"), handoff_id=handoff_id,
                                     expected_revision=1, claim_id=claim))
    assert accepted.get("revision") == 2, f"accept must commit revision 2: {accepted!r}"
    tool_error(receiver.tool("handoff_accept", operation_id=world.new_id("op"), handoff_id=handoff_id,
                             expected_revision=1, claim_id=world.new_id("claim")), "stale_revision")
    fact_id = world.new_id("fact")
    tool_ok(receiver.tool("fact_create", operation_id=world.new_id("op"), fact_id=fact_id, session_id=session_id,
                          content="reviewed through MCP"))
    tool_ok(receiver.tool("handoff_return", operation_id=world.new_id("op"), handoff_id=handoff_id,
                          expected_revision=2, claim_id=claim, result_fact_id=fact_id, outcome="succeeded"))
    revision, record = sender.setup_record(handoff_id)
    assert (revision, record["status"], record["result_fact_id"]) == (3, "completed", fact_id), (
        f"after the MCP round trip the handoff reads {record!r} at revision {revision}")


@isolation.SHARED
@reads("AM-MCP-6", "discover", "server-info", "list-cache")
def test_discover_and_server_info(world: World) -> None:
    """Isolation: shared: server information, not data."""
    project = world.project()
    discover = tool_result(project.writer.mcp("server/discover"))
    assert discover.get("resultType") == "complete" and discover.get("supportedVersions") == [VERSION], discover
    assert isinstance(discover.get("capabilities", {}).get("tools"), dict), discover
    listed = tool_result(project.writer.mcp("tools/list"))
    for result in (discover, listed):
        info = (result.get("_meta") or {}).get("io.modelcontextprotocol/serverInfo")
        assert isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str), (
            f"every result carries _meta serverInfo: {result.get('_meta')!r}")
    assert (listed.get("ttlMs"), listed.get("cacheScope")) == (60000, "private"), listed
