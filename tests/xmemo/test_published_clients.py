"""The published XMemo clients, unchanged, against the reference served over real HTTP.

``xmemo-agent-framework`` 0.2.0 (MAF): its recall, project and search read paths, and its
capture path (identity from ``get_mcp_identity`` and the project context, then a write to
``/api/v1/...`` counted only with a UUID id). ``hermes-xmemo`` 1.2.1: its REST client module,
imported without the Hermes host, and its provider's tool handlers (which need the host's
modules: the test supplies a minimal stand-in for those three modules, never for XMemo).
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import types
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from aidememo_ref import serve_in_thread
from xmemo_ref import XMemoReference

from .conftest import KEYS, key

MAF_KEY = "xm-maf-agent-key-0123456789abcdef"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[XMemoReference, str]]:
    ref = XMemoReference(tmp_path_factory.mktemp("published") / "xmemo.sqlite")
    for k, options in KEYS.values():
        ref.provision(key=k, **options)
    ref.provision(key=MAF_KEY, owner_id="acme", agent_id="maf-agent")
    with serve_in_thread(ref) as url:
        yield ref, url
    ref.close()


# -- xmemo-agent-framework -----------------------------------------------------------------------

async def _resolve_identity(connection: Any, *, sse: bool) -> Any:
    """What a MAF host does before capture: ask get_mcp_identity, then the project context."""
    from xmemo_agent_framework.capture import ResolvedIdentity

    accept = "text/event-stream, application/json" if sse else "application/json, text/event-stream"
    identity_response = await connection._client.post("/mcp", headers={"accept": accept}, json={
        "jsonrpc": "2.0", "id": 41, "method": "tools/call", "params": {"name": "get_mcp_identity", "arguments": {}}})
    text = (json.loads(next(line[6:] for line in identity_response.text.splitlines() if line.startswith("data: ")))
            if sse else identity_response.json())["result"]["content"][0]["text"]
    project = json.loads(dict(line.split(": ", 1) for line in text.splitlines())["Tenant"])["project_id"]
    project_response = await connection._client.post(f"/v1/projects/{project}/context", json={})
    return ResolvedIdentity.from_server_responses(connection, identity_response, project_response)


def _provenance() -> Any:
    from xmemo_agent_framework.capture import RunProvenance

    return RunProvenance("run-1", "session-1", (str(uuid.uuid4()),), datetime.now(timezone.utc).isoformat())


@pytest.mark.parametrize("sse", [False, True])
def test_maf_capture_resolves_identity_and_counts_each_write(served: tuple[XMemoReference, str], sse: bool) -> None:
    from xmemo_agent_framework import Connection
    from xmemo_agent_framework.capture import Behavior, CapturePolicy, CaptureProvider, Target

    _, url = served

    async def run() -> list[Any]:
        connection = Connection(url, MAF_KEY, allow_local_http=True)
        try:
            identity = await _resolve_identity(connection, sse=sse)
            assert (identity.owner, identity.agent, identity.project) == ("acme", "maf-agent", "acme")
            assert identity.scope == "tenant:project:acme" and "memory:write" in identity.scopes
            receipts = []
            for target, behavior, extra in (
                (Target.REMEMBER, Behavior.SEMANTIC_KEY_SAME_CONTENT_NOOP, {}),
                (Target.REMEMBER, Behavior.SEMANTIC_KEY_SAME_CONTENT_NOOP, {}),  # same content: a no-op
                (Target.STATE, Behavior.STATE_VERSIONED_UPSERT, {"state_key": "active_task"}),
                (Target.EVENT, Behavior.EVENT_APPEND_NO_DEDUPE, {"event_type": "milestone"}),
            ):
                capture = CaptureProvider(connection, CapturePolicy(enabled=True, target=target, behavior=behavior,
                                                                    **extra), identity=identity)
                candidate = await capture.after_run(f"MAF captured a {target.value} ({sse=})", provenance=_provenance())
                receipts.append(await capture.dispatch(candidate))
            return receipts
        finally:
            await connection.aclose()

    remember, again, state, event = asyncio.run(run())
    for receipt in (remember, again, state, event):
        assert receipt.outcome == "server_acknowledged" and receipt.status == 200
        assert str(uuid.UUID(receipt.memory_id)) == receipt.memory_id
        assert receipt.audit_request_id is not None
    assert again.memory_id == remember.memory_id  # semantic_key same content: one memory
    assert len({remember.memory_id, state.memory_id, event.memory_id}) == 3


def test_maf_capture_is_refused_at_gate_2_without_the_write_scope(served: tuple[XMemoReference, str]) -> None:
    from xmemo_agent_framework import Connection
    from xmemo_agent_framework.capture import Behavior, CapturePolicy, CaptureProvider, CaptureRejected, Target

    ref, url = served
    ref.provision(key="xm-maf-reader-0123456789abcdef", owner_id="acme", agent_id="maf-reader",
                  scopes=["memory:read"])

    async def run() -> int:
        connection = Connection(url, "xm-maf-reader-0123456789abcdef", allow_local_http=True)
        try:
            identity = await _resolve_identity(connection, sse=False)
            capture = CaptureProvider(connection, CapturePolicy(
                enabled=True, target=Target.REMEMBER, behavior=Behavior.SEMANTIC_KEY_SAME_CONTENT_NOOP), identity=identity)
            try:
                await capture.after_run("not allowed", provenance=_provenance())
            except CaptureRejected as exc:
                return int(exc.gate)
            return 0
        finally:
            await connection.aclose()

    assert asyncio.run(run()) == 2


@pytest.mark.parametrize("route", ["recall", "project", "search"])
def test_maf_read_routes_inject_bounded_context_with_provenance(served: tuple[XMemoReference, str], route: str) -> None:
    from xmemo_agent_framework import Connection, Policy, Provider, ReadRoute

    ref, url = served
    with ref.transport() as transport:  # write through the reference itself, then read with MAF over HTTP
        import httpx

        with httpx.Client(transport=transport, base_url="http://ref") as http:
            written = http.post("/api/v1/remember", headers={"Authorization": f"Bearer {MAF_KEY}"}, json={
                "content": f"MAF read route {route}: use the hosted MCP transport.", "path": "capture/acme",
                "bucket": "work", "scope": "tenant:project:acme"}).json()

    policy = Policy(recall_enabled=True, route=ReadRoute(route), scope="tenant:project:acme",
                    project_id="acme" if route == "project" else None, max_items=8, max_tokens=4000)

    async def run() -> Any:
        connection = Connection(url, MAF_KEY, allow_local_http=True)
        try:
            return await Provider(connection, policy).before_run(f"MAF read route {route}", session_id="s")
        finally:
            await connection.aclose()

    result = asyncio.run(run())
    assert result.audit.outcome == "injected", result.audit
    assert any(written["id"] in item.provenance.memory_ids for item in result.items)
    assert str(uuid.UUID(result.audit.request_id)) == result.audit.request_id  # the X-XMemo-Audit-ID came back
    if route != "search":
        assert result.audit.effective_scope == "tenant:project:acme"
        assert result.dropped_items == 0


# -- hermes-xmemo --------------------------------------------------------------------------------

def _load_hermes_client() -> types.ModuleType:
    """``hermes_xmemo.xmemo.client`` without running the plugin package's host imports.

    The package ``__init__`` imports the Hermes host; the client module itself needs only
    ``.temporal``. A bare package object with the real directory as its path lets the two
    modules load from the installed files.
    """
    spec = importlib.util.find_spec("hermes_xmemo")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations))) / "xmemo"
    if "hermes_xmemo.xmemo" not in sys.modules:
        package = types.ModuleType("hermes_xmemo.xmemo")
        package.__path__ = [str(folder)]
        sys.modules["hermes_xmemo.xmemo"] = package
    return importlib.import_module("hermes_xmemo.xmemo.client")


@pytest.fixture
def hermes_host(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> types.ModuleType:
    """The Hermes plugin with a stand-in for the three host modules it imports (never for XMemo)."""
    agent, provider = types.ModuleType("agent"), types.ModuleType("agent.memory_provider")
    provider.MemoryProvider = type("MemoryProvider", (), {})  # type: ignore[attr-defined]
    tools, registry = types.ModuleType("tools"), types.ModuleType("tools.registry")
    registry.tool_error = lambda message: json.dumps({"error": message})  # type: ignore[attr-defined]
    constants = types.ModuleType("hermes_constants")
    constants.get_hermes_home = lambda: str(tmp_path)  # type: ignore[attr-defined]
    for name, module in (("agent", agent), ("agent.memory_provider", provider), ("tools", tools),
                         ("tools.registry", registry), ("hermes_constants", constants)):
        monkeypatch.setitem(sys.modules, name, module)
    for name in [n for n in sys.modules if n.startswith("hermes_xmemo.xmemo")]:
        monkeypatch.delitem(sys.modules, name)
    return importlib.import_module("hermes_xmemo.xmemo")


def test_hermes_client_module_imports_without_the_host() -> None:
    for name in ("agent", "tools", "hermes_constants"):
        assert name not in sys.modules
    client = _load_hermes_client()
    assert hasattr(client, "XMemoClient")


def test_hermes_client_captures_recalls_and_replays_idempotently(served: tuple[XMemoReference, str]) -> None:
    client_module = _load_hermes_client()
    ref, url = served
    hermes = client_module.XMemoClient(url, key("globex"), agent_id="hermes", agent_instance_id="hermes-install-1")
    codex = client_module.XMemoClient(url, key("globex"), agent_id="codex", agent_instance_id="codex-install-1")
    try:
        written = hermes.remember("Hermes: the Redis timeout hid pool exhaustion.", "notes/redis",
                                  idempotency_key="hermes-op-1")
        replayed = hermes.remember("Hermes: the Redis timeout hid pool exhaustion.", "notes/redis",
                                   idempotency_key="hermes-op-1")
        assert written["id"] == replayed["id"]
        state = hermes.update_state(current_task="redis review", next_action="merge the fix")
        event = hermes.record_event("handoff to codex", event_type="handoff", session_id="s-1")
        assert all(str(uuid.UUID(a["id"])) == a["id"] for a in (written, state, event))
        packet = codex.recall_context("Redis pool")
        assert packet["context_text"] and len(packet["items"]) <= 5
        assert {i["agent_boundary"]["relation"] for i in packet["items"]} == {"other_agent"}
        assert "hermes-install-1" not in json.dumps(packet)
        results = codex.search("Redis timeout")
        assert results[0]["content"].startswith("Hermes: the Redis") and 0 <= results[0]["similarity"] <= 1
        explained = codex.get_memory(written["id"])
        assert explained["content"] == written["content"] and explained["agent_id"] == "hermes"
        assert client_module.XMemoClient(url, key("globex")).health()["status"] == "ok"
    finally:
        hermes.close()
        codex.close()


def test_hermes_provider_reads_our_context_and_boundary_labels(served: tuple[XMemoReference, str],
                                                               hermes_host: types.ModuleType) -> None:
    ref, url = served
    from hermes_xmemo.xmemo.client import XMemoClient

    claude = XMemoClient(url, key("acme-other-project"), agent_id="claude", agent_instance_id="c-1")
    hermes = XMemoClient(url, key("acme-other-project"), agent_id="hermes", agent_instance_id="h-1")
    try:
        provider = hermes_host.XMemoMemoryProvider()
        saved = json.loads(provider._handle_remember(claude, {"content": "Claude decided: hosted MCP transport.",
                                                              "path": "decisions/transport"}))
        assert str(uuid.UUID(saved["id"])) == saved["id"]
        answer = json.loads(provider._handle_recall_context(hermes, {"query": "transport decision"}))
        assert "Claude decided: hosted MCP transport." in answer["context"]
        labels = [hermes_host._agent_boundary_label(item) for item in answer["items"]]
        assert labels == ["other_agent"]
        # search answers carry content; Hermes labels each result with the boundary's ownership
        found = json.loads(provider._handle_search(hermes, {"query": "hosted MCP"}))
        assert "[other_agent]" in found["formatted"]
        # the provider's other capture tools go through its outbox with an idempotency key each
        state = json.loads(provider._handle_update_state(hermes, {"current_task": "review", "next_action": "merge"}))
        event = json.loads(provider._handle_record_event(hermes, {"content": "handoff to claude", "event_type": "handoff"}))
        for written in (state, event):
            assert "error" not in written and str(uuid.UUID(written["id"])) == written["id"], written
        assert {i["memory_type"] for i in json.loads(provider._handle_recall_context(
            claude, {"query": "handoff review", "max_items": 10}))["items"]} >= {"working", "episodic"}
    finally:
        claude.close()
        hermes.close()
