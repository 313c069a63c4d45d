"""Credentials and scopes (XM-AUTH)."""

from __future__ import annotations

import pytest

from conformance.expect import expect_status, shown
from conformance.marks import reads
from conformance.profiles.xmemo.world import XMemoWorld, items_of

ROUTES = (("POST", "/v1/recall/context", {"query": "q"}), ("POST", "/v1/remember", {"content": "c", "path": "p"}),
          ("GET", "/v1/memories/search?query=q", None))
ROUTE_IDS = ("recall", "remember", "search")


@pytest.mark.requirement("XM-AUTH-1")
@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=ROUTE_IDS)
def test_no_credential_is_401(world: XMemoWorld, method: str, path: str, body: object) -> None:
    answer = world.target.wire.request(world.transcript, method, path, json_body=body)
    assert answer.status == 401, f"no credential must answer 401; {shown(answer)}"


@pytest.mark.requirement("XM-AUTH-2")
@pytest.mark.parametrize("form", [pytest.param(form, marks=reads("XM-AUTH-2", clause), id=form) for form, clause in (
    ("X-API-Key", "unknown"), ("Bearer", "unknown"), ("malformed", "malformed"))])
def test_an_unknown_or_malformed_key_is_403_never_401(world: XMemoWorld, form: str) -> None:
    unknown = f"xmc-unknown-{world.rng.getrandbits(128):032x}"
    world.transcript.secret(unknown, "unknown")
    header = {"Authorization": f"Bearer {unknown}"} if form == "Bearer" else {"X-API-Key": unknown}
    if form == "malformed":
        header = {"X-API-Key": f"not a key {unknown}"}
    for method, path, body in ROUTES:
        answer = world.target.wire.request(world.transcript, method, path, json_body=body, headers=header)
        assert answer.status == 403, f"an unknown key must answer 403; {shown(answer)}"


@pytest.mark.requirement("XM-AUTH-3")
def test_x_api_key_and_bearer_are_the_same_credential(world: XMemoWorld) -> None:
    key = world.owner().key("writer")
    written = key.write("written with X-API-Key")
    items = items_of(key.request("POST", "/v1/recall/context", bearer=True,
                                 json_body={"query": "written", "scope": world.scope, "max_items": 20}))
    assert written["id"] in {item.get("id") for item in items}, "a Bearer recall does not see the X-API-Key write"
    again = expect_status(key.request("POST", "/v1/remember", bearer=True,
                                      json_body={"content": "written with Bearer", "path": "p", "scope": world.scope}), 200)
    assert again.get("id") or again.get("memory_id")


@reads("XM-AUTH-4", "no-write", "no-read")
def test_a_read_only_key_cannot_write_and_a_write_only_key_cannot_read(world: XMemoWorld) -> None:
    owner = world.owner()
    reader, writer, full = (owner.key("reader", scopes="memory:read"), owner.key("writer", scopes="memory:write"),
                            owner.key("full"))
    for path, body in (("/v1/remember", {"content": "forbidden", "path": "p"}),
                       ("/v1/update_state", {"content": "forbidden"}),
                       ("/v1/timeline/events", {"content": "forbidden"})):
        answer = reader.request("POST", path, json_body={**body, "scope": world.scope})
        assert answer.status == 403, f"a key without memory:write must get 403; {shown(answer)}"
    assert items_of(full.recall()) == [], "a refused write was stored"
    written = full.write("readable")
    reads: tuple[tuple[str, str, object], ...] = (("POST", "/v1/recall/context", {"query": "q", "scope": world.scope}),
                                                  ("GET", "/v1/memories/search?query=readable", None),
                                                  ("GET", f"/v1/memories/{written['id']}", None))
    for method, path, payload in reads:
        answer = writer.request(method, path, json_body=payload)
        assert answer.status == 403, f"a key without memory:read must get 403; {shown(answer)}"
