"""Transport: health, audit ids, the /api/v1 alias, error bodies (XM-HEALTH, XM-AUDIT, XM-ALIAS, XM-ERR)."""

from __future__ import annotations

import pytest

from conformance.expect import expect_status, shown
from conformance.marks import reads
from conformance.profiles.xmemo.world import XMemoWorld, is_uuid


@pytest.mark.requirement("XM-HEALTH-1")
def test_health_answers_json_without_credentials(world: XMemoWorld) -> None:
    body = expect_status(world.target.wire.request(world.transcript, "GET", "/health"), 200)
    assert isinstance(body, dict), f"/health answered {body!r}, not a JSON object"


@reads("XM-AUDIT-1", "answers", "health")
def test_every_answer_carries_a_uuid_audit_id(world: XMemoWorld) -> None:
    key = world.owner().key("writer")
    wire = world.target.wire
    answers = [
        wire.request(world.transcript, "GET", "/health"),
        wire.request(world.transcript, "POST", "/v1/recall/context", json_body={"query": "q"}),  # 401
        key.request("POST", "/v1/remember", json_body={"content": "audited", "path": "p", "scope": world.scope}),
        key.recall(),
        key.request("POST", "/v1/remember", json_body={"path": "no content"}),  # 422
    ]
    for exchange in answers:
        audit = exchange.header("X-XMemo-Audit-ID")
        assert audit is not None and is_uuid(audit), f"no UUID X-XMemo-Audit-ID: {shown(exchange)}"


@pytest.mark.capability("mcp")
@reads("XM-AUDIT-1", "mcp")
def test_every_mcp_answer_carries_a_uuid_audit_id(world: XMemoWorld) -> None:
    key = world.owner().key("agent")
    initialized, _ = key.mcp("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                            "clientInfo": {"name": "aidememo-conformance", "version": "0.1"}})
    listed, _ = key.mcp("tools/list", {}, session=initialized.header("mcp-session-id"))
    refused = world.target.wire.request(world.transcript, "POST", "/mcp", json_body={"jsonrpc": "2.0", "id": 1,
                                                                                     "method": "tools/list"})
    assert refused.status in (401, 403), f"an MCP request without a key was not refused: {shown(refused)}"
    for exchange in (initialized, listed, refused):
        audit = exchange.header("X-XMemo-Audit-ID")
        assert audit is not None and is_uuid(audit), f"an MCP answer has no UUID X-XMemo-Audit-ID: {shown(exchange)}"


@pytest.mark.requirement("XM-ALIAS-1")
@pytest.mark.parametrize(("route", "body"), [
    pytest.param("remember", {"content": "written under /api/v1", "path": "capture/alias"}, id="remember"),
    pytest.param("update_state", {"state_key": "alias_probe", "content": "state under /api/v1"}, id="update_state"),
    pytest.param("timeline/events", {"content": "event under /api/v1", "event_type": "milestone"}, id="event"),
])
def test_api_v1_writes_read_back_under_v1(world: XMemoWorld, route: str, body: dict[str, object]) -> None:
    key = world.owner().key("maf")
    answer = expect_status(key.request("POST", f"/api/v1/{route}", json_body={**body, "scope": world.scope}), 200)
    memory_id = answer.get("id") or answer.get("memory_id")
    assert is_uuid(memory_id), f"/api/v1/{route} answered no UUID id: {answer}"
    stored = expect_status(key.request("GET", f"/v1/memories/{memory_id}"), 200)
    assert str(body["content"]) in str(stored.get("content")), f"/v1/memories/{memory_id} reads {stored}"


@reads("XM-ERR-1", "detail", "invalid")
def test_refusals_have_fastapi_detail_bodies(world: XMemoWorld) -> None:
    key = world.owner().key("writer")
    unauthenticated = world.target.wire.request(world.transcript, "POST", "/v1/remember", json_body={"content": "c"})
    assert unauthenticated.status == 401
    assert isinstance(unauthenticated.json().get("detail"), str), shown(unauthenticated)
    invalid = key.request("POST", "/v1/remember", json_body={"path": "no content", "scope": world.scope})
    assert invalid.status == 422, shown(invalid)
    detail = invalid.json().get("detail")
    assert isinstance(detail, list) and detail, shown(invalid)
    assert all(isinstance(entry, dict) and {"loc", "msg", "type"} <= set(entry) for entry in detail), shown(invalid)
