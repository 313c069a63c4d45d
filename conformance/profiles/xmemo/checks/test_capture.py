"""Capture: write answers, semantic keys, state slots, appends, declined captures, idempotency (XM-CAP, XM-IDEM, XM-HELPER)."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.expect import expect_status, shown
from conformance.marks import reads
from conformance.profiles.xmemo.world import XMemoWorld, is_uuid, items_of


@reads("XM-CAP-1", "id", "read-back")
@pytest.mark.parametrize(("route", "body"), [
    pytest.param("/v1/remember", {"content": "a durable fact", "path": "notes/fact"}, id="remember"),
    pytest.param("/v1/update_state", {"state_key": "active_task", "current_task": "review", "next_action": "merge"},
                 id="update_state"),
    pytest.param("/v1/timeline/events", {"content": "a milestone", "event_type": "milestone"}, id="event"),
])
def test_a_write_answers_a_uuid_id_that_reads_back(world: XMemoWorld, route: str, body: dict[str, object]) -> None:
    key = world.owner().key("writer")
    answer = key.request("POST", route, json_body={**body, "scope": world.scope})
    assert 200 <= answer.status < 300, shown(answer)
    data = answer.json()
    memory_id = data.get("id") or data.get("memory_id")
    assert is_uuid(memory_id), f"{route} answered no UUID id or memory_id: {shown(answer)}"
    stored = expect_status(key.request("GET", f"/v1/memories/{memory_id}"), 200)
    assert stored.get("id", memory_id) == memory_id
    if "content" in body:
        assert stored.get("content") == body["content"], f"/v1/memories/{memory_id} reads {stored}"


@pytest.mark.requirement("XM-CAP-2")
def test_a_semantic_key_with_the_same_content_is_a_no_op(world: XMemoWorld) -> None:
    key = world.owner().key("maf")
    body = {"content": "captured once", "path": "capture/p", "bucket": "work", "scope": world.scope,
            "semantic_key": f"maf-capture:{world.new_id('sk')}", "dedupe": True}
    first = expect_status(key.request("POST", "/api/v1/remember", json_body=body), 200)
    again = expect_status(key.request("POST", "/api/v1/remember", json_body=body), 200)
    assert (again.get("id") or again.get("memory_id")) == (first.get("id") or first.get("memory_id")), \
        f"the same semantic_key and content answered another memory: {first} then {again}"
    assert len(items_of(key.recall())) == 1, "the repeated capture stored a second memory"


@reads("XM-CAP-3", "id", "version", "one")
def test_update_state_versions_one_slot(world: XMemoWorld) -> None:
    key = world.owner().key("hermes")
    body = {"state_key": "active_task", "bucket": "work", "scope": world.scope, "current_task": "review"}
    first = expect_status(key.request("POST", "/v1/update_state", json_body=body), 200)
    second = expect_status(key.request("POST", "/v1/update_state", json_body={**body, "next_action": "merge"}), 200)
    assert (first.get("id") or first.get("memory_id")) == (second.get("id") or second.get("memory_id")), \
        f"two updates of one slot answered two ids: {first} then {second}"
    versions = (first.get("version"), second.get("version"))
    assert all(isinstance(v, int) and not isinstance(v, bool) for v in versions) and versions[1] == versions[0] + 1, \
        f"the slot's second update must answer its version + 1: versions {versions}"
    assert len(items_of(key.recall())) == 1, "the slot's update stored a second memory"


@pytest.mark.requirement("XM-CAP-4")
def test_identical_events_are_appended_twice(world: XMemoWorld) -> None:
    key = world.owner().key("hermes")
    first = key.write("deployed", route="/v1/timeline/events", event_type="milestone")
    second = key.write("deployed", route="/v1/timeline/events", event_type="milestone")
    assert first["id"] != second["id"], "two appended events answered one memory id"
    assert len(items_of(key.recall())) == 2, "an appended event was deduplicated"


@pytest.mark.requirement("XM-CAP-5")
@pytest.mark.parametrize("content", ["", "   "])
def test_an_empty_capture_is_refused_and_stores_nothing(world: XMemoWorld, content: str) -> None:
    key = world.owner().key("writer")
    answer = key.request("POST", "/v1/remember", json_body={"content": content, "path": "p", "scope": world.scope})
    assert answer.status == 422, f"empty content must be refused with 422; {shown(answer)}"
    assert items_of(key.recall()) == [], "a refused capture was stored"


@pytest.mark.requirement("XM-IDEM-1")
@pytest.mark.parametrize("how", ["Idempotency-Key", "X-Idempotency-Key", "body"])
@pytest.mark.parametrize("route", [pytest.param("/v1/timeline/events", id="event"),
                                   pytest.param("/v1/remember", id="remember")])
def test_a_replay_with_the_same_idempotency_key_is_one_memory(world: XMemoWorld, how: str, route: str) -> None:
    key = world.owner().key("hermes")
    idempotency = world.new_id("idem")
    body: dict[str, object] = {"content": "sent twice by an outbox replay", "path": "notes/replay", "scope": world.scope}
    headers = {how: idempotency} if how != "body" else {}
    if how == "body":
        body["idempotency_key"] = idempotency
    first = key.request("POST", route, json_body=body, headers=headers)
    second = key.request("POST", route, json_body=body, headers=headers)
    assert 200 <= first.status < 300 and 200 <= second.status < 300, f"{shown(first)}; then {shown(second)}"
    ids = [a.json().get("id") or a.json().get("memory_id") for a in (first, second)]
    assert ids[0] == ids[1], f"the replay answered another memory: {ids}"
    assert len(items_of(key.recall())) == 1, "the replay stored a second memory"


@pytest.mark.requirement("XM-HELPER-1")
@pytest.mark.parametrize(("memory_type", "status"), [("working", "started"), ("working", "completed"),
                                                     ("semantic", None)])
def test_the_helpers_types_and_statuses_read_back(world: XMemoWorld, memory_type: str, status: str | None) -> None:
    key = world.owner().key("claude")
    fields: dict[str, Any] = {"memory_type": memory_type, "path": "workflow/handoff-1/task"}
    if status is not None:
        fields["status"] = status
    written = key.write("Review the deployment adapter", agent="claude", **fields)
    stored = expect_status(key.request("GET", f"/v1/memories/{written['id']}"), 200)
    assert stored.get("memory_type") == memory_type, f"memory_type reads back as {stored.get('memory_type')!r}"
    if status is not None:
        assert stored.get("status") == status, f"status reads back as {stored.get('status')!r}"
