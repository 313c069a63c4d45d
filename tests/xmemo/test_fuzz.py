"""Hostile input never gets a 5xx: random JSON bodies, headers and query strings at every XMemo route."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import World, key

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=12,
)
FIELDS = st.sampled_from(["content", "path", "bucket", "scope", "team_id", "memory_type", "status", "semantic_key",
                          "dedupe", "importance", "confidence", "expires_at", "idempotency_key", "state_key",
                          "ttl_seconds", "event_type", "occurred_at", "query", "max_items", "max_tokens",
                          "prefer_working", "since", "until", "durable_query", "metadata", "provenance"])
BODIES = JSON | st.dictionaries(FIELDS, JSON, max_size=8)
ROUTES = st.sampled_from(["/v1/remember", "/api/v1/update_state", "/v1/timeline/events", "/v1/recall/context",
                          "/v1/projects/acme/context", "/mcp"])
HEADER_TEXT = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=ROUTES, body=BODIES, agent=st.none() | HEADER_TEXT, idempotency=st.none() | HEADER_TEXT)
def test_no_body_gets_a_5xx(world: World, route: str, body: object, agent: str | None, idempotency: str | None) -> None:
    headers = {"X-API-Key": key("shared"), "content-type": "application/json"}
    if agent is not None:
        headers["X-Memory-OS-Agent-ID"] = agent
    if idempotency is not None:
        headers["Idempotency-Key"] = idempotency
    if route == "/mcp":
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "recall_context" if isinstance(body, dict) and "query" in body else "remember",
                           "arguments": body}}
    answer = world.http.post(route, content=json.dumps(body).encode(), headers=headers)
    assert answer.status_code < 500, (route, body, answer.text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=st.text(max_size=80), memory_id=st.text(max_size=40))
def test_no_query_string_or_path_gets_a_5xx(world: World, query: str, memory_id: str) -> None:
    headers = {"X-API-Key": key("shared")}
    from urllib.parse import quote

    for target in (f"/v1/memories/search?{quote(query, safe='=&%')}", f"/v1/memories/{quote(memory_id)}",
                   f"/v1/memories/{quote(memory_id)}/explain"):
        answer = world.http.get(target, headers=headers)
        assert answer.status_code < 500, (target, answer.text)
