"""The stateless MCP gateway's protocol-header rules (wire §1.18); scored only where claimed."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.http import Exchange
from conformance.profiles.aidememo.actors import Actor, World
from conformance.profiles.aidememo.expect import expect_error

VERSION = "2026-07-28"


def _post(actor: Actor, headers: dict[str, str], method: str = "tools/list") -> Exchange:
    body = {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}}
    return actor.request("POST", f"{actor.base}/mcp", json_body=body, headers=headers)


def _rpc_code(exchange: Exchange) -> object:
    data = exchange.json()
    return data.get("error", {}).get("code") if isinstance(data, dict) else None


@pytest.mark.requirement("AM-MCP-1")
def test_missing_protocol_version_is_refused(world: World) -> None:
    project = world.project()
    exchange = _post(project.writer, {"Mcp-Method": "tools/list"})
    assert exchange.status == 400 and _rpc_code(exchange) == -32022, (
        f"expected 400 with JSON-RPC -32022, got {exchange.status} {exchange.body[:200]!r}")


@pytest.mark.requirement("AM-MCP-1")
def test_missing_method_header_is_refused(world: World) -> None:
    project = world.project()
    exchange = _post(project.writer, {"Mcp-Protocol-Version": VERSION})
    assert exchange.status == 400 and _rpc_code(exchange) == -32020, (
        f"expected 400 with JSON-RPC -32020, got {exchange.status} {exchange.body[:200]!r}")


@pytest.mark.requirement("AM-MCP-1")
def test_missing_token_gets_the_rest_error(world: World) -> None:
    project = world.project()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    exchange = world.runtime.wire.request(world.transcript, "POST", f"{project.writer.base}/mcp", json_body=body,
                                          headers={"Mcp-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})
    expect_error(exchange, 401, "authentication_failed")


READ_TOOLS = {"search", "resource_get", "handoff_list", "handoff_status"}
WRITE_TOOLS = {"session_create", "fact_create", "handoff_context_create", "handoff_send", "handoff_accept",
               "handoff_return"}


def _call(actor: Actor, method: str, params: dict[str, Any]) -> Exchange:
    headers = {"Mcp-Protocol-Version": VERSION, "Mcp-Method": method}
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    body = {"jsonrpc": "2.0", "id": 7, "method": method,
            "params": {**params, "_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}}
    return actor.request("POST", f"{actor.base}/mcp", json_body=body, headers=headers)


@pytest.mark.requirement("AM-MCP-2")
def test_tools_list_depends_on_the_role(world: World) -> None:
    project = world.project(writers=("writer",), readers=("reader",))
    for actor, expected in ((project.reader, READ_TOOLS), (project.writer, READ_TOOLS | WRITE_TOOLS)):
        exchange = _call(actor, "tools/list", {})
        assert exchange.status == 200, f"tools/list answered {exchange.status} {exchange.body[:200]!r}"
        tools = exchange.json()["result"]["tools"]
        names = {tool["name"] for tool in tools}
        assert names == expected, f"{actor.role} sees tools {sorted(names)}, expected {sorted(expected)}"
        schemas = str([tool.get("inputSchema") for tool in tools])
        for identity in ("tenant_id", "project_id", "actor_id"):
            assert identity not in schemas, f"a tool schema accepts {identity}; identity comes from the token"


@pytest.mark.requirement("AM-MCP-2")
def test_tool_failure_is_a_200_with_is_error(world: World) -> None:
    project = world.project(writers=("writer",), readers=("reader",))
    arguments = {"operation_id": world.new_id("op"), "session_id": world.new_id("session"), "source_id": None,
                 "topic": "refused"}
    exchange = _call(project.reader, "tools/call", {"name": "session_create", "arguments": arguments})
    assert exchange.status == 200, f"a failed tool call must still answer 200, got {exchange.status}"
    result = exchange.json()["result"]
    assert result.get("isError") is True, f"isError must be true: {result!r}"
    assert result["structuredContent"]["error"]["code"] == "project_unauthorized", result["structuredContent"]
