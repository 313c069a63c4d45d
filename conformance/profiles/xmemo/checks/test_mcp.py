"""Streamable-HTTP MCP: the session, the tools' published arguments, get_mcp_identity, the recall text (XM-MCP, XM-RECALL-6)."""

from __future__ import annotations

import pytest

from conformance.answers import parse
from conformance.marks import reads
from conformance.profiles.xmemo.world import XMemoWorld, identity_fields

pytestmark = pytest.mark.capability("mcp")

TOOLS = {
    "recall_context": {"query", "max_items", "max_tokens", "scope", "bucket", "memory_type", "prefer_working",
                       "output_json", "agent_id", "agent_instance_id"},
    "remember": {"content", "path", "scope", "bucket", "semantic_key", "memory_type"},
    "update_state": {"state_key", "content", "current_task", "next_action", "scope", "bucket"},
    "record_event": {"content", "event_type", "session_id", "scope", "bucket"},
    "search_memory": {"query", "limit", "memory_type", "scope"},
    "get_mcp_identity": set(),
}


@reads("XM-MCP-1", "initialize", "tools")
def test_initialize_opens_a_session_and_tools_list_has_the_published_tools(world: XMemoWorld) -> None:
    key = world.owner().key("agent")
    exchange, answer = key.mcp("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                              "clientInfo": {"name": "aidememo-conformance", "version": "0.1"}})
    assert isinstance(answer.get("result"), dict) and answer["result"].get("protocolVersion"), answer
    session = exchange.header("mcp-session-id")
    assert session, "initialize answered no mcp-session-id header"
    _, listed = key.mcp("tools/list", {}, session=session)
    tools = {tool.get("name"): tool for tool in listed.get("result", {}).get("tools", [])}
    for name, arguments in TOOLS.items():
        assert name in tools, f"tools/list lacks {name}: {sorted(tools)}"
        properties = set(tools[name].get("inputSchema", {}).get("properties", {}))
        assert arguments <= properties, f"{name} lacks the published arguments {sorted(arguments - properties)}"
    assert "query" in tools["recall_context"]["inputSchema"].get("required", [])
    assert {"content", "path"} <= set(tools["remember"]["inputSchema"].get("required", []))


@pytest.mark.requirement("XM-MCP-2")
def test_get_mcp_identity_has_the_lines_maf_parses(world: XMemoWorld) -> None:
    owner = world.owner()
    for scopes in ("memory:read,memory:write", "memory:read"):
        key = owner.key(f"agent-{scopes}", scopes=scopes)
        text = key.tool_text("get_mcp_identity", agent="claude")
        fields = identity_fields(text)
        for name in ("Owner ID", "Agent ID", "Tenant", "Scopes"):
            assert fields.get(name, "").strip() not in ("", "none") or name == "Agent ID", f"{name} missing: {text!r}"
        tenant = parse(fields["Tenant"], "get_mcp_identity's Tenant line")
        assert {"organization_id", "workspace_id", "project_id"} <= set(tenant), f"Tenant is {tenant}"
        assert fields["Agent ID"] == "claude", f"Agent ID is {fields['Agent ID']!r} for header claude"
        assert set(fields["Scopes"].split(", ")) == set(scopes.split(",")), f"Scopes is {fields['Scopes']!r}"


@reads("XM-RECALL-6", "heading", "content")
def test_recall_context_text_begins_with_the_heading(world: XMemoWorld) -> None:
    key = world.owner().key("agent")
    content = "Use the hosted network MCP transport for remote agents."
    key.write(content, agent="claude")
    text = key.tool_text("recall_context", {"query": "deployment adapter decision and current bug", "max_items": 6,
                                             "max_tokens": 1200, "scope": world.scope}, agent="codex")
    assert text.startswith("### XMemo Context"), f"the recall_context text begins {text[:60]!r}"
    assert content in text, "the recall_context text does not carry the recalled content"
