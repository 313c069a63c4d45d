"""The reference's MCP gateway: upstream's envelope refusals word for word, and the bindings file."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from aidememo_ref import ManualClock, ReferenceLedger
from aidememo_cli import main
from aidememo_ref._gateway import Bindings, BindingsError, load_bindings

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V}


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    ledger = ReferenceLedger(tmp_path / "l.sqlite", clock=ManualClock(), bindings=Bindings())
    ledger.provision(tenant_id="t", project_id="p", actor_id="w", token="wtok-0123456789")
    yield ledger
    ledger.close()


def _post(ledger: Any, body: object, *, raw: bytes | None = None, token: str | None = "wtok-0123456789",
          **headers: str) -> tuple[int, Any]:
    sent = {"content-type": "application/json", "mcp-protocol-version": V, "mcp-method": "tools/list"}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    if token:
        sent["authorization"] = f"Bearer {token}"
    answer = ledger.handle("POST", "/v1/projects/p/mcp", sent, raw if raw is not None else json.dumps(body).encode())
    return answer.status, json.loads(answer.body)


def _rpc(method: str = "tools/list", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": META}}


@pytest.mark.parametrize(("body", "raw", "headers", "status", "code", "message"), [
    (None, b"{", {}, 400, -32700, "Failed to parse the request body as JSON: "),
    ([1], None, {}, 400, -32600, "invalid MCP request: invalid type: a sequence, expected struct McpRequest"),
    ({"jsonrpc": "2.0", "method": "tools/list"}, None, {}, 400, -32600, "invalid MCP request: missing field `id`"),
    ({"jsonrpc": "1.0", "id": 1, "method": "tools/list"}, None, {}, 400, -32600,
     "MCP requests must use JSON-RPC 2.0 and include a non-null id"),
    (_rpc(), None, {"mcp_protocol_version": "2025-06-18"}, 400, -32022,
     "unsupported MCP protocol version 2025-06-18; supported=2026-07-28"),
    (_rpc(), None, {"mcp_method": "tools/call"}, 400, -32020,
     "Mcp-Method header tools/call does not match body method tools/list"),
    (_rpc("tools/call", name="search"), None, {"mcp_method": "tools/call"}, 400, -32020,
     "tools/call requires Mcp-Name"),
    ({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}, None, {}, 400, -32022,
     "MCP 2026-07-28 request params must include _meta"),
    (_rpc(cursor="x"), None, {}, 400, -32602,
     "AideMemo tools/list currently has one deterministic page; cursor must be omitted"),
    (_rpc("tools/call", name="nope"), None, {"mcp_method": "tools/call", "mcp_name": "nope"}, 404, -32601,
     "unknown tool nope"),
    (_rpc("tools/call", name="resource_get", arguments={"kind": "fact", "id": "bad id"}), None,
     {"mcp_method": "tools/call", "mcp_name": "resource_get"}, 400, -32602,
     "invalid id: invalid resource_id: must contain only ASCII letters, digits, '-', '_', '.', ':', or '@'"),
])
def test_envelope_refusals_are_upstreams(ledger: Any, body: Any, raw: bytes | None, headers: dict[str, str],
                                         status: int, code: int, message: str) -> None:
    got_status, data = _post(ledger, body, raw=raw, **headers)
    assert (got_status, data["error"]["code"]) == (status, code), data
    assert data["error"]["message"].startswith(message), data
    assert list(data) == ["error", "id", "jsonrpc"]  # sorted keys, as upstream's json! values serialize


def test_version_refusal_carries_supported_versions_and_the_request_id(ledger: Any) -> None:
    _, data = _post(ledger, _rpc(), mcp_protocol_version="1")
    assert data == {"error": {"code": -32022, "message": "unsupported MCP protocol version 1; supported=2026-07-28",
                              "data": {"supported": [V]}}, "id": 9, "jsonrpc": "2.0"}


def test_identity_failures_pass_through_in_the_rest_shape(ledger: Any) -> None:
    assert _post(ledger, _rpc(), token="unknown-token-0123") == (
        401, {"error": {"code": "authentication_failed", "message": "authentication failed"}})
    status, data = _post(ledger, _rpc(), token=None)
    assert status == 401 and data["error"]["code"] == "authentication_failed"


def test_a_bad_project_segment_is_a_params_error(ledger: Any) -> None:
    answer = ledger.handle("POST", "/v1/projects/bad%20id/mcp", {"content-type": "application/json"}, b"{}")
    assert answer.status == 400 and json.loads(answer.body)["error"]["code"] == -32602


def _bindings_file(tmp_path: Path, document: object, mode: int = 0o600) -> str:
    path = tmp_path / "bindings.json"
    path.write_text(json.dumps(document))
    os.chmod(path, mode)
    return str(path)


def test_bindings_file_formats_and_refusals(tmp_path: Path) -> None:
    entry = {"token": " alpha-token ", "source_id": " alpha ", "actor_id": "w"}
    assert len(load_bindings(_bindings_file(tmp_path, {"tokens": [entry]}))) == 1
    bound = load_bindings(_bindings_file(tmp_path, [entry]))
    assert bound.lookup(b"alpha-token") is not None and bound.lookup(b"other") is None
    assert bound.lookup(b"alpha-token").source_id == "alpha"  # type: ignore[union-attr]
    for document, message in (
        ({"tokens": []}, "contains no token bindings"),
        ([entry, entry], "contains a duplicate token at entry 1"),
        ([{**entry, "actor_id": "  "}], "entry 0 has an empty actor_id"),
        ([{**entry, "source_id": "has space"}], "entry 0 has an invalid source_id"),
        ({"nope": 1}, "failed to parse auth bindings file"),
    ):
        with pytest.raises(BindingsError, match=message):
            load_bindings(_bindings_file(tmp_path, document))
    with pytest.raises(BindingsError, match="must not be readable by group or others"):
        load_bindings(_bindings_file(tmp_path, [entry], 0o644))
    with pytest.raises(BindingsError) as caught:
        load_bindings(_bindings_file(tmp_path, [entry, entry]))
    assert "alpha-token" not in str(caught.value)


def test_serve_refuses_a_bad_bindings_file_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _bindings_file(tmp_path, [{"token": "t", "source_id": "s", "actor_id": "a"}], 0o644)
    with pytest.raises(SystemExit) as done:
        main(["serve", "--database", str(tmp_path / "d.sqlite"), "--bind", "127.0.0.1:0", "--auth-bindings-file", path])
    err = capsys.readouterr().err
    assert done.value.code == 1 and err.count("\n") == 1 and "chmod 600" in err
