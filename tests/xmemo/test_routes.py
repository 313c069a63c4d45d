"""The REST surface through the in-process transport: routes, credentials, errors, capture, recall."""

from __future__ import annotations

import json
import uuid

import pytest

from .conftest import KEYS, World, key


def is_uuid(value: object) -> bool:
    try:
        return str(uuid.UUID(str(value))) == value
    except ValueError:
        return False


# -- plumbing ---------------------------------------------------------------------------------

def test_health_and_every_other_answer_carry_a_fresh_uuid_audit_id(world: World) -> None:
    answers = [world.call(None, "GET", "/health"), world.call(None, "GET", "/nope"),
               world.call(None, "POST", "/v1/remember", {}), world.call("shared", "GET", "/v1/remember"),
               world.call("shared", "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"})]
    assert [a.status_code for a in answers] == [200, 404, 401, 405, 200]
    ids = [a.headers["x-xmemo-audit-id"] for a in answers]
    assert all(is_uuid(i) for i in ids) and len(set(ids)) == len(ids)
    assert answers[0].json()["status"] == "ok"
    assert answers[3].headers["allow"] == "POST" and answers[3].json() == {"detail": "Method Not Allowed"}


def test_api_v1_is_an_alias_of_v1(world: World) -> None:
    body = {"content": "alias", "path": "p"}
    written = world.call("shared", "POST", "/api/v1/remember", body, agent="maf").json()
    assert world.call("shared", "GET", f"/v1/memories/{written['id']}").json()["content"] == "alias"
    assert world.call("shared", "GET", f"/api/v1/memories/{written['id']}").status_code == 200


# -- credentials and scopes -----------------------------------------------------------------------

def test_401_only_when_no_credential_is_sent(world: World) -> None:
    for headers in ({}, {"Authorization": "Basic dXNlcjpwYXNz"}, {"X-API-Key": ""}, {"Authorization": "Bearer "}):
        answer = world.call(None, "POST", "/v1/recall/context", {"query": "q"}, headers=headers)
        assert answer.status_code == 401, headers
        assert answer.json() == {"detail": "Not authenticated"}
        assert answer.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize("headers", [
    {"X-API-Key": "x" * 30},
    {"Authorization": "Bearer " + "x" * 30},
    {"X-API-Key": key("shared"), "Authorization": f"Bearer {key('claude')}"},  # two credentials that disagree
    {"X-API-Key": "bad key with spaces 0123456789"},
])
def test_403_for_a_credential_that_is_unknown_malformed_or_conflicting(world: World, headers: dict[str, str]) -> None:
    answer = world.call(None, "POST", "/v1/recall/context", {"query": "q"}, headers=headers)
    assert answer.status_code == 403 and answer.json() == {"detail": "Invalid or inactive API Key"}


def test_both_credential_forms_work_and_agree(world: World) -> None:
    assert world.call("shared", "GET", "/v1/auth/token/validate").status_code == 200
    assert world.call("shared", "GET", "/v1/auth/token/validate", bearer=True).status_code == 200
    same = {"X-API-Key": key("shared"), "Authorization": f"Bearer {key('shared')}"}
    assert world.call(None, "GET", "/v1/auth/token/validate", headers=same).json() == {
        "status": "valid", "scopes": ["memory:read", "memory:write"], "setup_state": "setup_completed"}


def test_an_inactive_key_is_403(world: World) -> None:
    from xmemo_ref._keys import key_digest

    world.ref.store.deactivate(key_digest(key("shared")))
    assert world.call("shared", "GET", "/v1/auth/token/validate").status_code == 403


def test_a_key_deactivated_after_its_digest_was_remembered_is_403(world: World) -> None:
    from xmemo_ref._keys import key_digest

    assert world.call("shared", "GET", "/v1/auth/token/validate").status_code == 200  # its digest is kept
    world.ref.store.deactivate(key_digest(key("shared")))
    assert world.call("shared", "GET", "/v1/auth/token/validate").status_code == 403


def test_only_keys_that_proved_a_principal_keep_their_digest(world: World) -> None:
    for n in range(3):
        answer = world.call(None, "GET", "/v1/auth/token/validate", headers={"X-API-Key": f"guess-{n:024d}"})
        assert answer.status_code == 403
    assert world.call("shared", "GET", "/v1/auth/token/validate").status_code == 200
    assert list(world.ref.service._digests) == [key("shared")]


def test_missing_scope_is_403_before_the_body_is_read(world: World) -> None:
    answer = world.call("reader", "POST", "/v1/remember", {"no": "content"})
    assert answer.status_code == 403 and answer.json() == {"detail": "Missing required scope: memory:write"}
    for method, path, body in (("POST", "/v1/recall/context", {"query": "q"}), ("GET", "/v1/memories/search?query=q", None),
                               ("POST", "/v1/projects/acme/context", {})):
        answer = world.call("writer", method, path, body)
        assert answer.status_code == 403 and answer.json() == {"detail": "Missing required scope: memory:read"}
    assert world.call("reader", "POST", "/v1/recall/context", {"query": "q"}).status_code == 200


# -- validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "loc"), [
    ({"path": "p"}, ["body", "content"]),
    ({"content": "   ", "path": "p"}, ["body", "content"]),
    ({"content": "c", "path": "p", "bucket": "%"}, ["body", "bucket"]),
    ({"content": "c", "path": "p", "memory_type": "dream"}, ["body", "memory_type"]),
    ({"content": "c", "path": "p", "importance": 2}, ["body", "importance"]),
    ({"content": "c", "path": "p", "expires_at": "2026-01-01T00:00:00"}, ["body", "expires_at"]),
    ({"content": "x" * 65_537, "path": "p"}, ["body", "content"]),
    ([1, 2], ["body"]),
])
def test_invalid_remember_bodies_are_422_with_fastapi_detail(world: World, body: object, loc: list[str]) -> None:
    answer = world.call("shared", "POST", "/v1/remember", body)
    assert answer.status_code == 422, answer.text
    detail = answer.json()["detail"]
    assert isinstance(detail, list) and detail[0]["loc"] == loc and detail[0]["msg"] and detail[0]["type"]


def test_unparseable_json_and_oversized_bodies(world: World) -> None:
    answer = world.call("shared", "POST", "/v1/remember", content=b"{not json", headers={"content-type": "application/json"})
    assert answer.status_code == 422 and answer.json()["detail"][0]["type"] == "json_invalid"
    answer = world.call("shared", "POST", "/v1/remember", content=b"x" * (1_048_577))
    assert answer.status_code == 413


# -- capture ------------------------------------------------------------------------------------

def test_remember_answers_a_uuid_id_and_reads_back(world: World) -> None:
    written = world.remember("shared", "Use the hosted network MCP transport.", agent="claude", scope="memory-os",
                             memory_type="semantic", source="claude")
    assert is_uuid(written["id"]) and written["memory_id"] == written["id"] and written["write"] == "created"
    stored = world.call("shared", "GET", f"/v1/memories/{written['id']}").json()
    for field in ("content", "path", "bucket", "scope", "memory_type", "status", "importance", "confidence",
                  "created_at", "updated_at"):
        assert field in stored
    assert (stored["memory_type"], stored["status"], stored["agent_id"], stored["bucket"]) == \
        ("semantic", "active", "claude", "work")
    explained = world.call("shared", "GET", f"/v1/memories/{written['id']}/explain").json()
    assert explained["content"] == stored["content"] and explained["explanation"]["boundary_authority"] == "attribution_only"


def test_auto_is_stored_as_semantic_and_status_reads_back(world: World) -> None:
    written = world.remember("shared", "task begins", agent="claude", memory_type="working", status="started")
    assert (written["memory_type"], written["status"]) == ("working", "started")
    assert world.remember("shared", "no type", agent="claude")["memory_type"] == "semantic"


@pytest.mark.parametrize("how", ["Idempotency-Key", "X-Idempotency-Key", "body", "all three"])
def test_an_idempotency_key_is_honoured_whichever_way_it_is_sent(world: World, how: str) -> None:
    body: dict[str, object] = {"content": "retry me", "path": "p"}
    headers: dict[str, str] = {}
    if how in ("Idempotency-Key", "X-Idempotency-Key"):
        headers[how] = "key-1"
    else:
        body["idempotency_key"] = "key-1"
        if how == "all three":
            headers = {"Idempotency-Key": "key-1", "X-Idempotency-Key": "key-1"}
    first = world.call("shared", "POST", "/v1/timeline/events", body, agent="hermes", headers=headers)
    world.clock.advance(5_000)
    second = world.call("shared", "POST", "/v1/timeline/events", body, agent="hermes", headers=headers)
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and second.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert len(world.recall("shared")["items"]) == 1


def test_a_reused_key_with_another_body_is_409_and_disagreeing_keys_are_422(world: World) -> None:
    world.call("shared", "POST", "/v1/remember", {"content": "a", "path": "p"}, headers={"Idempotency-Key": "k"})
    answer = world.call("shared", "POST", "/v1/remember", {"content": "b", "path": "p"}, headers={"Idempotency-Key": "k"})
    assert answer.status_code == 409
    answer = world.call("shared", "POST", "/v1/remember", {"content": "b", "path": "p", "idempotency_key": "k2"},
                        headers={"Idempotency-Key": "k3"})
    assert answer.status_code == 422
    assert len(world.recall("shared")["items"]) == 1


def test_idempotency_keys_are_per_tenant(world: World) -> None:
    body = {"content": "same key, other owner", "path": "p"}
    a = world.call("shared", "POST", "/v1/remember", body, headers={"Idempotency-Key": "k"}).json()
    b = world.call("globex", "POST", "/v1/remember", body, headers={"Idempotency-Key": "k"}).json()
    assert a["id"] != b["id"]


def test_semantic_key_with_the_same_content_is_a_no_op(world: World) -> None:
    body = {"content": "captured once", "path": "capture/acme", "bucket": "work", "scope": "tenant:project:acme",
            "semantic_key": "maf-capture:abc", "dedupe": True}
    first = world.call("claude", "POST", "/api/v1/remember", body).json()
    again = world.call("claude", "POST", "/api/v1/remember", body).json()
    assert again["id"] == first["id"] and again["write"] == "unchanged" and again["version"] == 1
    changed = world.call("claude", "POST", "/api/v1/remember", body | {"content": "captured twice"}).json()
    assert changed["id"] == first["id"] and changed["write"] == "updated" and changed["version"] == 2
    assert len(world.recall("claude")["items"]) == 1


def test_dedupe_returns_an_identical_memory(world: World) -> None:
    body = {"content": "same", "path": "p", "dedupe": True}
    assert world.call("shared", "POST", "/v1/remember", body).json()["id"] == \
        world.call("shared", "POST", "/v1/remember", body).json()["id"]
    plain = {"content": "same", "path": "p"}
    assert world.call("shared", "POST", "/v1/remember", plain).json()["id"] != \
        world.call("shared", "POST", "/v1/remember", plain).json()["id"]


def test_update_state_versions_one_slot_and_folds_fields_into_metadata(world: World) -> None:
    body = {"state_key": "active_task", "current_task": "review", "next_action": "merge", "bucket": "work",
            "scope": "hermes/default", "ttl_seconds": 60}
    first = world.call("shared", "POST", "/v1/update_state", body, agent="hermes").json()
    second = world.call("shared", "POST", "/v1/update_state", body | {"next_action": "ship"}, agent="hermes").json()
    assert is_uuid(first["id"]) and second["id"] == first["id"]
    assert (first["version"], second["version"], second["state_key"], second["memory_type"]) == (1, 2, "active_task", "working")
    assert second["content"] == "current_task: review\nnext_action: ship"
    assert second["metadata"] == {"current_task": "review", "next_action": "ship"}
    assert second["expires_at"] is not None
    assert world.call("shared", "POST", "/v1/update_state", {"state_key": "x"}).status_code == 422
    world.clock.advance(61_000)
    assert world.recall("shared")["items"] == []
    assert world.call("shared", "GET", f"/v1/memories/{first['id']}").status_code == 404


def test_timeline_events_append_without_dedupe(world: World) -> None:
    body = {"content": "handoff", "event_type": "handoff", "session_id": "s1"}
    ids = {world.call("shared", "POST", "/v1/timeline/events", body).json()["id"] for _ in range(3)}
    assert len(ids) == 3
    assert world.call("shared", "POST", "/v1/timeline/events", body | {"event_type": "Bad Type"}).status_code == 422


def test_a_project_scope_must_name_the_credentials_project(world: World) -> None:
    ok = world.call("shared", "POST", "/v1/remember", {"content": "c", "path": "p", "scope": "tenant:project:acme"})
    assert ok.status_code == 200
    for method, path, body in (("POST", "/v1/remember", {"content": "c", "path": "p", "scope": "tenant:project:x"}),
                               ("POST", "/v1/recall/context", {"query": "q", "scope": "tenant:project:x"})):
        answer = world.call("shared", method, path, body)
        assert answer.status_code == 403, answer.text


# -- recall -------------------------------------------------------------------------------------

def seed_memories(world: World) -> dict[str, str]:
    return {
        "decision": world.remember("claude", "Use the hosted network MCP transport for remote agents.",
                                   scope="memory-os", path="workflow/handoff-1/decision")["id"],
        "fix": world.remember("codex", "Fixed streamable-http token identity fallback.", scope="memory-os",
                              path="workflow/handoff-1/bug_fix")["id"],
        "hermes": world.remember("shared", "Hermes note in another scope.", agent="hermes", scope="hermes/default")["id"],
        "globex": world.remember("globex", "Globex secret plan.", agent="claude", scope="memory-os")["id"],
        "side": world.remember("acme-other-project", "Side project note.", agent="claude", scope="memory-os")["id"],
    }


def test_recall_ranks_every_visible_memory_and_strips_item_content(world: World) -> None:
    ids = seed_memories(world)
    packet = world.recall("claude", "deployment adapter decision, Codex fix, and handoff status", scope="memory-os",
                          max_items=6, max_tokens=1200)
    assert {i["id"] for i in packet["items"]} == {ids["decision"], ids["fix"]}
    assert all("content" not in item for item in packet["items"])
    assert "Use the hosted network MCP transport" in packet["context_text"]
    assert packet["context_text"].count("[") >= 2 and packet["version"] == 1
    everything = world.recall("claude", max_items=20)
    assert {i["id"] for i in everything["items"]} == {ids["decision"], ids["fix"], ids["hermes"]}


def test_recall_never_crosses_owner_or_project_whatever_the_agent_header_says(world: World) -> None:
    ids = seed_memories(world)
    for who, agent in (("shared", "claude"), ("codex", "claude"), ("reader", None)):
        seen = {i["id"] for i in world.recall(who, agent=agent, max_items=50)["items"]}
        assert ids["globex"] not in seen and ids["side"] not in seen
    assert {i["id"] for i in world.recall("globex", max_items=50)["items"]} == {ids["globex"]}
    assert {i["id"] for i in world.recall("acme-other-project", max_items=50)["items"]} == {ids["side"]}
    assert world.call("globex", "GET", f"/v1/memories/{ids['decision']}").status_code == 404


def test_recall_filters_wildcards_mean_no_filter(world: World) -> None:
    ids = seed_memories(world)
    wild = world.recall("shared", bucket="%", memory_type="auto", max_items=20)
    assert len(wild["items"]) == 3
    assert world.recall("shared", memory_type="%", max_items=20)["items"] == wild["items"]
    assert {i["id"] for i in world.recall("shared", scope="hermes/default")["items"]} == {ids["hermes"]}
    assert world.recall("shared", memory_type="working")["items"] == []
    assert world.recall("shared", bucket="private")["items"] == []


def test_recall_holds_both_bounds_and_says_how_it_counted(world: World) -> None:
    for i in range(12):
        world.remember("shared", f"memory number {i} " + "detail " * 30, agent="codex")
    packet = world.recall("shared", max_items=5, max_tokens=10_000)
    assert len(packet["items"]) == 5 and packet["coverage"]["omitted_by_max_items"] == 7
    packet = world.recall("shared", max_items=12, max_tokens=120)
    assert 0 < len(packet["items"]) < 12
    assert -(-len(packet["context_text"].encode()) // 4) == packet["budget"]["used_tokens"] <= 120
    assert packet["budget"]["token_estimate"] == "ceil(utf8_bytes(context_text) / 4)"
    for bad in ({"max_items": 0}, {"max_tokens": 0}, {"max_items": 1001}, {"query": " "}, {"max_items": "5"}):
        assert world.call("shared", "POST", "/v1/recall/context", {"query": "q"} | bad).status_code == 422


def test_items_carry_the_boundary_object_and_never_the_raw_instance_id(world: World) -> None:
    world.remember("shared", "from the laptop", agent="claude", instance="claude-laptop-7")
    packet = world.recall("shared", agent="claude", instance="claude-desktop-2")
    (item,) = packet["items"]
    assert item["agent_boundary"]["relation"] == "same_agent_other_instance" == item["ownership"]
    assert "claude-laptop-7" not in json.dumps(packet) and "claude-desktop-2" not in json.dumps(packet)
    stored = world.call("shared", "GET", f"/v1/memories/{item['id']}", agent="claude", instance="claude-laptop-7").json()
    assert stored["agent_boundary"]["relation"] == "self"
    assert "claude-laptop-7" not in json.dumps(stored) and len(stored["agent_instance_id_hash"]) == 64
    assert packet["agent_boundary"]["relations"] == {"self": 0, "same_agent_other_instance": 1, "other_agent": 0}


def test_a_bound_key_keeps_its_identity_against_a_different_agent_header(world: World) -> None:
    written = world.remember("claude", "bound write", agent="codex")
    assert (written["agent_id"], written["agent_trust"]) == ("claude", "token_bound")
    (item,) = world.recall("claude", agent="codex")["items"]
    boundary = item["agent_boundary"]
    assert (boundary["current_agent_id"], boundary["current_agent_trust"], boundary["relation"]) == \
        ("claude", "token_bound", "self")
    assert "asserted agent_id codex was ignored" in boundary["explanation"]
    (item,) = world.recall("shared", agent="claude")["items"]
    assert item["agent_boundary"]["current_agent_trust"] == "client_asserted"


def test_search_returns_content_scores_and_boundaries(world: World) -> None:
    ids = seed_memories(world)
    answer = world.call("shared", "GET", "/v1/memories/search",
                        params={"query": "MCP transport", "bucket": "%", "memory_type": "%", "limit": "2",
                                "explain": "false", "prefer_working": "false"}, agent="codex")
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert len(results) == 2 and results[0]["id"] == ids["decision"]
    assert results[0]["content"].startswith("Use the hosted") and results[0]["similarity"] == results[0]["score"]
    assert results[0]["agent_boundary"]["relation"] == "other_agent"
    listed = world.call("shared", "GET", "/v1/memories/search", params={"query": "*", "path": "workflow/%"}).json()
    assert {r["id"] for r in listed["results"]} == {ids["decision"], ids["fix"]}
    assert world.call("shared", "GET", "/v1/memories/search", params={"query": "q", "limit": "x"}).status_code == 422


def test_project_context_echoes_the_project_scope_and_holds_the_bounds(world: World) -> None:
    seed_memories(world)
    world.call("claude", "POST", "/v1/update_state", {"content": "reviewing", "scope": "memory-os"})
    answer = world.call("claude", "POST", "/v1/projects/acme/context", {"max_items": 2, "max_tokens": 2000,
                                                                         "durable_query": "MCP"})
    assert answer.status_code == 200, answer.text
    data = answer.json()
    assert data["project_scope"] == {"project_id": "acme", "owner_id": "acme", "organization_id": "org-acme",
                                     "workspace_id": "ws-acme", "team_id": None, "scope_key": "tenant:project:acme"}
    assert data["budget"]["used_items"] == 2 == len(data["recent_memories"]) + len(data["durable_context"]["items"])
    assert data["recent_memories"][0]["content"] == "reviewing"
    assert world.call("claude", "POST", "/v1/projects/side-project/context", {}).status_code == 403
    assert world.call("claude", "POST", "/v1/projects/bad.id/context", {}).status_code == 422


def test_no_answer_ever_contains_a_key(world: World) -> None:
    seed_memories(world)
    answers = [world.call("shared", "POST", "/v1/recall/context", {"query": "q"}),
               world.call("shared", "GET", "/v1/auth/token/validate"),
               world.call("shared", "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                                    "params": {"name": "get_mcp_identity"}})]
    # Only answers that did the work show a key could not leak: a refusal says nothing either way.
    assert [answer.status_code for answer in answers] == [200, 200, 200], [answer.text for answer in answers]
    assert "error" not in answers[2].json(), answers[2].text
    for answer in answers:
        assert not any(k in answer.text for k, _ in KEYS.values())
