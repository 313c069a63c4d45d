"""`aidememo-ref serve --auth-bindings-file`: a bound token over real HTTP, from the command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from aidememo_cli import main

V = "2026-07-28"
TOKENS = {"gate": "gate-token-0123456789", "owner": "owner-token-0123456789"}


def _tool(http: httpx.Client, token: str, name: str, **arguments: Any) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": {"io.modelcontextprotocol/protocolVersion": V}}}
    return http.post("/v1/projects/p/mcp", json=body, headers={
        "Authorization": f"Bearer {token}", "Mcp-Protocol-Version": V, "Mcp-Method": "tools/call", "Mcp-Name": name})


@pytest.fixture
def served(tmp_path: Path) -> Any:
    database = tmp_path / "ssot.sqlite"
    for actor, token in TOKENS.items():
        token_file = tmp_path / f"{actor}.token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        assert main(["bootstrap", "--database", str(database), "--tenant-id", "t", "--project-id", "p",
                     "--actor-id", actor, "--token-file", str(token_file)]) == 0
    bindings = tmp_path / "bindings.json"
    bindings.write_text(json.dumps({"tokens": [{"token": TOKENS["gate"], "source_id": "alpha", "actor_id": "gate"}]}))
    bindings.chmod(0o600)
    server = subprocess.Popen([sys.executable, "-m", "aidememo_ref", "serve", "--database", str(database), "--bind",
                               "127.0.0.1:0", "--auth-bindings-file", str(bindings)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ})
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("aidememo-ref serving http://"), line + (server.stderr.read() if server.stderr else "")
        with httpx.Client(base_url=line.split()[2], timeout=30) as http:
            yield http
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_bound_token_is_confined_over_real_http(served: httpx.Client) -> None:
    owner = {"Authorization": f"Bearer {TOKENS['owner']}"}
    for sid, source in (("s-alpha", "alpha"), ("s-beta", "beta")):
        served.post("/v1/projects/p/sessions", headers=owner, json={
            "command_id": f"c-{sid}", "payload": {"session_id": sid, "source_id": source, "topic": "t"}}).raise_for_status()
    other = _tool(served, TOKENS["gate"], "handoff_list", box="inbox", actor_id="owner")
    assert other.status_code == 400 and other.json()["error"]["message"] == (
        'authenticated token fixes actor_id="gate"; caller override denied')
    away = _tool(served, TOKENS["gate"], "search", q="t", source_id="beta")
    assert away.status_code == 400 and "fixes source_id=\"alpha\"" in away.json()["error"]["message"]
    hidden = _tool(served, TOKENS["gate"], "resource_get", kind="session", id="s-beta").json()["result"]
    assert hidden["isError"] and hidden["structuredContent"]["error"]["code"] == "resource_not_found"
    seen = _tool(served, TOKENS["gate"], "resource_get", kind="session", id="s-alpha").json()["result"]
    assert not seen["isError"] and seen["structuredContent"]["state"]["body"]["source_id"] == "alpha"
    rest = served.get("/v1/projects/p/identity", headers={"Authorization": f"Bearer {TOKENS['gate']}"})
    assert rest.status_code == 403 and rest.json()["error"]["code"] == "project_unauthorized"
    # The unbound owner keeps REST and an unconfined gateway.
    assert served.get("/v1/projects/p/identity", headers=owner).status_code == 200
    assert not _tool(served, TOKENS["owner"], "resource_get", kind="session", id="s-beta").json()["result"]["isError"]
