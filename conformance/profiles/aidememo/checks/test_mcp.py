"""The stateless MCP gateway's protocol-header rules (wire §1.18); scored only where claimed."""

from __future__ import annotations

import pytest

from conformance.expect import expect_error

VERSION = "2026-07-28"


def _post(actor, headers, method="tools/list"):
    body = {"jsonrpc": "2.0", "id": 1, "method": method,
            "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}}
    return actor.request("POST", f"{actor.base}/mcp", json_body=body, headers=headers)


def _rpc_code(exchange):
    data = exchange.json()
    return data.get("error", {}).get("code") if isinstance(data, dict) else None


@pytest.mark.requirement("AM-MCP-1")
def test_missing_protocol_version_is_refused(world):
    project = world.project()
    exchange = _post(project.writer, {"Mcp-Method": "tools/list"})
    assert exchange.status == 400 and _rpc_code(exchange) == -32022, (
        f"expected 400 with JSON-RPC -32022, got {exchange.status} {exchange.body[:200]!r}")


@pytest.mark.requirement("AM-MCP-1")
def test_missing_method_header_is_refused(world):
    project = world.project()
    exchange = _post(project.writer, {"Mcp-Protocol-Version": VERSION})
    assert exchange.status == 400 and _rpc_code(exchange) == -32020, (
        f"expected 400 with JSON-RPC -32020, got {exchange.status} {exchange.body[:200]!r}")


@pytest.mark.requirement("AM-MCP-1")
def test_missing_token_gets_the_rest_error(world):
    project = world.project()
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    exchange = world.runtime.wire.request(world.transcript, "POST", f"{project.writer.base}/mcp", json_body=body,
                                          headers={"Mcp-Protocol-Version": VERSION, "Mcp-Method": "tools/list"})
    expect_error(exchange, 401, "authentication_failed")
