"""Streamable-HTTP MCP at POST /mcp: framing, sessions, tools and their published argument names."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from .conftest import World

ACCEPT = {"accept": "application/json, text/event-stream"}


def rpc(world: World, who: str | None, method: str, params: dict[str, Any] | None = None, *, rpc_id: object = 1,
        headers: dict[str, str] | None = None, agent: str | None = None) -> httpx.Response:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rpc_id is not None:
        message["id"] = rpc_id
    if params is not None:
        message["params"] = params
    return world.call(who, "POST", "/mcp", message, headers=ACCEPT | (headers or {}), agent=agent)


def tool(world: World, who: str, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    answer = rpc(world, who, "tools/call", {"name": name, "arguments": arguments or {}}, **kw)
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]  # type: ignore[no-any-return]


def text_of(result: dict[str, Any]) -> str:
    return "\n".join(part["text"] for part in result["content"] if part["type"] == "text")


def test_initialize_issues_a_session_that_is_echoed_and_bound_to_the_key(world: World) -> None:
    started = rpc(world, "shared", "initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                                  "clientInfo": {"name": "t", "version": "1"}})
    assert started.status_code == 200
    result = started.json()["result"]
    assert result["protocolVersion"] == "2024-11-05" and "tools" in result["capabilities"]
    session = started.headers["mcp-session-id"]
    assert rpc(world, "shared", "notifications/initialized", rpc_id=None,
               headers={"mcp-session-id": session}).status_code == 202
    assert rpc(world, "shared", "ping", headers={"mcp-session-id": session}).json()["result"] == {}
    assert rpc(world, "claude", "ping", headers={"mcp-session-id": session}).status_code == 404  # another key
    assert rpc(world, "shared", "ping", headers={"mcp-session-id": "no-such-session"}).status_code == 404
    assert world.call("shared", "DELETE", "/mcp", headers={"mcp-session-id": session}).status_code == 204
    assert rpc(world, "shared", "ping", headers={"mcp-session-id": session}).status_code == 404
    newest = rpc(world, "shared", "initialize", {"protocolVersion": "1999-01-01"}).json()["result"]
    assert newest["protocolVersion"] == "2025-06-18"


def test_answers_are_json_or_sse_by_the_accept_order(world: World) -> None:
    plain = rpc(world, "shared", "ping", headers={"accept": "application/json, text/event-stream"})
    assert plain.headers["content-type"] == "application/json" and plain.json()["id"] == 1
    stream = rpc(world, "shared", "ping", rpc_id=7, headers={"accept": "text/event-stream, application/json"})
    assert stream.headers["content-type"] == "text/event-stream"
    (data,) = [line[6:] for line in stream.text.splitlines() if line.startswith("data: ")]
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_json_rpc_errors(world: World) -> None:
    broken = world.call("shared", "POST", "/mcp", content=b"{oops", headers=ACCEPT)
    assert broken.status_code == 400 and broken.json()["error"]["code"] == -32700
    assert world.call("shared", "POST", "/mcp", [1], headers=ACCEPT).json()["error"]["code"] == -32600
    assert rpc(world, "shared", "no/such").json()["error"]["code"] == -32601
    assert rpc(world, "shared", "tools/call", {"name": "nope"}).json()["error"]["code"] == -32602
    assert world.call(None, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 401
    assert world.call(None, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"},
                      headers={"Authorization": "Bearer " + "z" * 30}).status_code == 403
    assert world.call("shared", "GET", "/mcp").status_code == 405


def test_tools_list_publishes_the_argument_schemas(world: World) -> None:
    tools = {t["name"]: t for t in rpc(world, "shared", "tools/list").json()["result"]["tools"]}
    assert {"recall_context", "remember", "update_state", "record_event", "search_memory", "get_mcp_identity"} <= set(tools)
    recall = tools["recall_context"]["inputSchema"]
    assert recall["required"] == ["query"]
    assert {"query", "limit", "max_items", "max_tokens", "scope", "bucket", "team_id", "agent_id", "agent_instance_id",
            "memory_type", "path_filter", "prefer_working", "output_json"} == set(recall["properties"])
    assert recall["properties"]["bucket"]["default"] == "%" and recall["properties"]["memory_type"]["default"] == "auto"
    assert tools["recall_context"]["annotations"]["readOnlyHint"] is True
    assert tools["remember"]["inputSchema"]["required"] == ["content", "path"]
    assert tools["record_event"]["inputSchema"]["properties"]["event_type"]["default"] == "event"
    assert tools["update_state"]["inputSchema"]["properties"]["state_key"]["default"] == "active_task"


def test_get_mcp_identity_lines_prefer_the_bound_agent(world: World) -> None:
    bound = text_of(tool(world, "claude", "get_mcp_identity", agent="codex"))
    fields = dict(line.split(": ", 1) for line in bound.splitlines())
    assert fields["Owner ID"] == "acme" and fields["Agent ID"] == "claude" and fields["Agent Trust"] == "token_bound"
    assert json.loads(fields["Tenant"]) == {"organization_id": "org-acme", "workspace_id": "ws-acme", "project_id": "acme"}
    assert fields["Scopes"] == "memory:read, memory:write"
    asserted = dict(line.split(": ", 1) for line in text_of(tool(world, "shared", "get_mcp_identity", agent="codex")).splitlines())
    assert asserted["Agent ID"] == "codex" and asserted["Agent Trust"] == "client_asserted"
    nobody = dict(line.split(": ", 1) for line in text_of(tool(world, "reader", "get_mcp_identity")).splitlines())
    assert nobody["Agent ID"] == "none" and nobody["Scopes"] == "memory:read"


def test_recall_context_text_begins_with_the_heading_and_shows_each_boundary(world: World) -> None:
    world.remember("claude", "Use the hosted network MCP transport for remote agents.", scope="memory-os")
    result = tool(world, "shared", "recall_context", {"query": "deployment adapter decision and current bug",
                                                      "max_items": 6, "max_tokens": 1200}, agent="codex")
    text = text_of(result)
    assert result["isError"] is False and text.startswith("### XMemo Context")
    assert "Use the hosted network MCP transport" in text
    boundary_line = [line for line in text.splitlines() if line.startswith("[1] {")][0]
    assert json.loads(boundary_line[4:])["relation"] == "other_agent"
    as_json = json.loads(text_of(tool(world, "shared", "recall_context", {"query": "q", "output_json": True,
                                                                         "agent_id": "claude", "limit": 1})))
    assert len(as_json["items"]) == 1 and as_json["items"][0]["agent_boundary"]["relation"] == "self"
    assert as_json["budget"]["max_items"] == 1


def test_write_tools_share_the_rest_rules(world: World) -> None:
    stored = json.loads(text_of(tool(world, "shared", "remember", {
        "content": "via mcp", "path": "notes", "metadata_json": '{"k": 1}', "agent_id": "claude",
        "device_id": "laptop"})))
    assert stored["bucket"] == "public" and stored["agent_id"] == "claude" and stored["metadata"] == {"k": 1}
    updated = json.loads(text_of(tool(world, "shared", "remember", {"content": "via mcp, edited", "path": "notes",
                                                                    "memory_id": stored["id"]})))
    assert updated["id"] == stored["id"] and updated["version"] == 2
    state = json.loads(text_of(tool(world, "shared", "update_state", {"current_task": "t", "next_action": "n"})))
    assert state["state_key"] == "active_task" and state["bucket"] == "work" and state["memory_type"] == "working"
    event = json.loads(text_of(tool(world, "shared", "record_event", {"content": "milestone reached"})))
    assert event["event_type"] == "event" and event["bucket"] == "work"
    search = json.loads(text_of(tool(world, "shared", "search_memory", {"query": "mcp", "limit": 5,
                                                                        "path_filter": "notes"})))
    assert [r["id"] for r in search["results"]] == [stored["id"]]


@pytest.mark.parametrize(("who", "name", "arguments", "expected"), [
    ("reader", "remember", {"content": "c", "path": "p"}, "permission_denied: Missing required scope: memory:write"),
    ("writer", "recall_context", {"query": "q"}, "permission_denied: Missing required scope: memory:read"),
    ("shared", "remember", {"content": "c"}, "invalid_request:"),
    ("shared", "recall_context", {"query": "q", "max_items": 0}, "invalid_request: body.max_items"),
    ("shared", "remember", {"content": "c", "path": "p", "metadata_json": "[1]"}, "invalid_request: arguments.metadata_json"),
    ("shared", "recall_context", {"query": "q", "scope": "tenant:project:other"}, "permission_denied: Scope"),
])
def test_refusals_inside_a_tool_are_error_results(world: World, who: str, name: str, arguments: dict[str, Any],
                                                  expected: str) -> None:
    result = tool(world, who, name, arguments)
    assert result["isError"] is True and text_of(result).startswith(expected), text_of(result)
