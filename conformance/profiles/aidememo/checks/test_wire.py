"""Transport-level rules: health, error shape, framework answers, body decoding.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo.actors import setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_status, is_error_shape

# Over a socket even to the embedded reference: framework answers, bodies and headers are HTTP's bytes.
pytestmark = pytest.mark.real_http


@isolation.NONE
@pytest.mark.requirement("AM-HEALTH-1")
def test_health_answers_without_a_token(world: World) -> None:
    """Isolation: none: no identity."""
    exchange = world.wire.request(world.transcript, "GET", "/health")
    body = expect_status(exchange, 200)
    assert isinstance(body, dict), "health body must be a JSON object"
    assert body.get("status") == "ok" and body.get("mode") == "single_node", f"health body {body!r}"
    assert isinstance(body.get("schema_version"), int) and not isinstance(body["schema_version"], bool), (
        f"schema_version must be an integer, got {body.get('schema_version')!r}")


@isolation.SHARED
@pytest.mark.requirement("AM-ID-1")
def test_identity_reports_the_token_binding(world: World) -> None:
    """Isolation: shared: reads its actors' identities, compared with what they were provisioned as."""
    project = world.project(writers=("writer",), readers=("reader",))
    for actor in (project.writer, project.reader):
        body = expect_status(actor.identity(), 200)
        assert body.get("project_id") == project.project_id, f"identity project {body!r}"
        assert body.get("actor_id") == actor.actor_id, f"identity actor {body.get('actor_id')!r} is not {actor.actor_id}"
        assert body.get("role") == actor.role, f"identity role {body.get('role')!r} is not {actor.role}"
        assert isinstance(body.get("tenant_id"), str) and isinstance(body.get("project_epoch"), str), body
        if project.tenant_id != "(fixed)":
            assert body["tenant_id"] == project.tenant_id, f"identity tenant {body['tenant_id']!r}"


@isolation.SHARED
@pytest.mark.requirement("AM-ERR-1")
@pytest.mark.parametrize("case", ["stale_revision", "resource_not_found", "authentication_failed",
                                  "project_unauthorized", "invalid_command"])
def test_error_answers_have_the_wire_shape(world: World, case: str) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    writer = project.writer
    expected = {"stale_revision": 409, "resource_not_found": 404, "authentication_failed": 401,
                "project_unauthorized": 403, "invalid_command": 400}[case]
    if case == "stale_revision":
        note = world.new_id("note")
        setup_ok(writer.put(note, {"v": 1}), "put note")
        exchange = writer.put(note, {"v": 2}, expected_revision=7)
    elif case == "resource_not_found":
        exchange = writer.resource("custom.note", world.new_id("absent"))
    elif case == "authentication_failed":
        exchange = world.wire.request(world.transcript, "GET", f"{writer.base}/identity")
    elif case == "project_unauthorized":
        exchange = writer.request("GET", f"/v1/projects/{world.new_id('elsewhere')}/identity")
    else:
        exchange = writer.request("POST", f"{writer.base}/sessions", content=b"{not json",
                                  headers={"Content-Type": "application/json"})
    error = expect_error(exchange, expected, case)
    assert set(exchange.json()) == {"error"} and set(error) == {"code", "message"}, (
        f"error body must be exactly {{\"error\":{{code,message}}}}: {exchange.body[:200]!r}")


@isolation.SHARED
@reads("AM-WIRE-1", "unknown-path")
def test_unknown_path_answers_404(world: World) -> None:
    """Isolation: shared: framework answers; nothing of the project read."""
    project = world.project()
    for path in ("/v1/nowhere", f"{project.writer.base}/identity/", "/v1//commands"):
        exchange = project.writer.request("GET", path)
        assert exchange.status == 404, f"GET {path} answered {exchange.status}, expected 404"


@isolation.SHARED
@reads("AM-WIRE-1", "method")
def test_wrong_method_answers_405_with_allow(world: World) -> None:
    """Isolation: shared: framework answers; nothing of the project read."""
    project = world.project()
    exchange = project.writer.request("DELETE", f"{project.writer.base}/identity")
    assert exchange.status == 405, f"DELETE identity answered {exchange.status}, expected 405"
    allow = exchange.header("allow") or ""
    assert "GET" in allow.upper(), f"405 lacks an Allow header naming GET: {allow!r}"


@isolation.NONE
@reads("AM-WIRE-1", "head")
def test_head_is_served_on_get_routes(world: World) -> None:
    """Isolation: none: no identity."""
    wire, transcript = world.wire, world.transcript
    got = expect_status(wire.request(transcript, "GET", "/health"), 200)
    assert isinstance(got, dict) and got.get("status") == "ok", f"GET /health answered {got!r}"
    head = wire.request(transcript, "HEAD", "/health")
    assert head.status == 200 and head.body == b"", f"HEAD /health answered {head.status} {head.body[:80]!r}"


@isolation.SHARED
@pytest.mark.requirement("AM-WIRE-2")
def test_deeply_nested_json_is_a_client_error(world: World) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    depth = 200
    payload = "[" * depth + "]" * depth
    body = ('{"command_id":"%s","project_id":"%s","expected_revision":null,"operation":"resource.put",'
            '"payload":%s,"resource":{"kind":"custom.note","id":"deep"},"change":"upsert"}'
            % (world.new_id("cmd"), project.project_id, payload))
    exchange = project.writer.request("POST", "/v1/commands", content=body.encode(),
                                      headers={"Content-Type": "application/json"})
    assert exchange.status < 500, f"nesting depth {depth} produced a server error {exchange.status}"
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-1", "content-type")
@pytest.mark.parametrize("with_token", [
    pytest.param(True, id="token"), pytest.param(False, marks=reads("AM-JSON-1", "unauthenticated"), id="no-token")])
def test_missing_content_type_is_invalid_command(world: World, with_token: bool) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    session = {"command_id": world.new_id("cmd"),
               "payload": {"session_id": world.new_id("s"), "source_id": None, "topic": "t"}}
    import json

    content, headers = json.dumps(session).encode(), {"Content-Type": "text/plain"}
    path = f"{project.writer.base}/sessions"
    if with_token:
        exchange = project.writer.request("POST", path, content=content, headers=headers)
    else:
        exchange = world.wire.request(world.transcript, "POST", path, content=content, headers=headers)
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-1", "malformed", "unauthenticated")
@pytest.mark.parametrize("route", ["commands", "sessions", "accept"])
def test_malformed_json_is_invalid_command_before_authentication(world: World, route: str) -> None:
    """Isolation: shared: sends no token."""
    project = world.project()
    path = {"commands": "/v1/commands", "sessions": f"{project.writer.base}/sessions",
            "accept": f"{project.writer.base}/handoffs/{world.new_id('h')}/accept"}[route]
    exchange = world.wire.request(world.transcript, "POST", path, content=b'{"command_id": ',
                                          headers={"Content-Type": "application/json"})
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@pytest.mark.requirement("AM-JSON-2")
def test_body_over_one_mebibyte_is_invalid_command(world: World) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    filler = "x" * (1024 * 1024 + 16)
    exchange = project.writer.put(world.new_id("big"), {"filler": filler})
    assert exchange.status != 413, "an oversized body must be 400 invalid_command, not 413"
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-3", "unknown-field")
def test_unknown_body_field_is_invalid_command(world: World) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    exchange = project.writer.create("sessions", {"session_id": world.new_id("s"), "source_id": None, "topic": "t",
                                                  "colour": "red"})
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-3", "body-id")
@pytest.mark.parametrize("bad_id", ["", "has space", "x" * 129, "slash/inside", "ümlaut"],
                         ids=["empty", "space", "too-long", "slash", "non-ascii"])
def test_bad_identifier_in_body_is_invalid_command(world: World, bad_id: str) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    exchange = project.writer.create_session(bad_id)
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-3", "path-id")
def test_bad_identifier_in_path_is_invalid_identifier(world: World) -> None:
    """Isolation: shared: its reads are refused."""
    project = world.project()
    exchange = project.writer.request("GET", f"/v1/projects/{'p' * 129}/identity")
    expect_error(exchange, 400, "invalid_identifier")
    exchange = project.writer.request("GET", f"{project.writer.base}/handoffs/bad%20id")
    expect_error(exchange, 400, "invalid_identifier")
    assert is_error_shape(exchange), f"not the error shape: {exchange.body[:200]!r}"


_FEEDS = pytest.mark.capability("replica-feeds")
_SEARCH = pytest.mark.capability("search")


@isolation.READS
@pytest.mark.requirement("AM-WIRE-3")
@pytest.mark.parametrize(("route", "query", "empty"), [
    pytest.param("search", "q=probe", "mode=", marks=_SEARCH, id="search-mode"),
    pytest.param("search", "q=probe", "mode", marks=_SEARCH, id="search-mode-without-equals"),
    pytest.param("search", "q=probe", "limit=", marks=_SEARCH, id="search-limit"),
    pytest.param("search", "q=probe", "at_least_seq=", marks=_SEARCH, id="search-at_least_seq"),
    pytest.param("search", "q=probe", "source_id=", marks=_SEARCH, id="search-source_id"),
    pytest.param("handoffs", "box=inbox", "limit=", id="mailbox-limit"),
    pytest.param("handoffs", "box=inbox", "before_seq=", id="mailbox-before_seq"),
    pytest.param("handoffs", "box=inbox", "include_completed=", id="mailbox-include_completed"),
    pytest.param("handoffs", "box=inbox", "source_id=", id="mailbox-source_id"),
    pytest.param("changes", "after_seq=0", "limit=", marks=_FEEDS, id="changes-limit"),
    pytest.param("changes/materialized", "after_seq=0", "limit=", marks=_FEEDS, id="materialized-limit"),
])
def test_a_present_empty_query_value_is_not_an_absence(world: World, route: str, query: str, empty: str) -> None:
    """Isolation: reads: reads listings and writes nothing."""
    # Upstream's query structs hold Option<T>: `key=` is Some(""), which T refuses (wire §0.4).
    project = world.project()
    writer = project.writer
    if route.startswith("changes"):
        query = f"project_epoch={writer.setup_epoch()}&{query}"
    path = f"{writer.base}/{route}"
    setup_ok(writer.request("GET", path, raw_query=query), f"GET {route} without {empty.rstrip('=')}")
    exchange = writer.request("GET", path, raw_query=f"{query}&{empty}")
    assert exchange.status != 200, f"GET {route}?{query}&{empty} answered 200: an empty value was taken as absent"
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-4", "array")
def test_a_struct_sent_as_an_array_of_its_fields_is_decoded_as_the_object(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    # serde's derived structs also take a sequence of exactly their fields, in declaration order.
    project = world.project()
    writer = project.writer
    whole, parts, session_id, command_id = (world.new_id("note"), world.new_id("note"), world.new_id("s"),
                                            world.new_id("cmd"))
    # The command in CommandRequest's field order, its resource as [kind, id] too.
    array = [command_id, project.project_id, None, "resource.put", {"v": 1}, ["custom.note", whole], "upsert"]
    sent = writer.request("POST", "/v1/commands", json_body=array)
    assert sent.status == 200, f"a command as an array of its fields answered {sent.status}: {sent.body[:200]!r}"
    # An object whose resource is an array and whose optional expected_revision is left out.
    partly = {"command_id": world.new_id("cmd"), "project_id": project.project_id, "operation": "resource.put",
              "payload": {"v": 2}, "resource": ["custom.note", parts], "change": "upsert"}
    exchange = writer.request("POST", "/v1/commands", json_body=partly)
    assert exchange.status == 200, (f"a command whose resource is [kind, id] answered {exchange.status}: "
                                    f"{exchange.body[:200]!r}")
    for note, value in ((whole, 1), (parts, 2)):
        body = expect_status(writer.resource("custom.note", note), 200)
        assert body.get("state") == {"state": "present", "body": {"v": value}}, f"{note} reads back as {body!r}"
    # Both forms decode to one command: the object form under the same command id replays the receipt.
    again = writer.put(whole, {"v": 1}, command_id=command_id)
    assert again.status == 200 and again.body == sent.body, (
        f"the same command as an object answered {again.status} {again.body[:200]!r}, not the array's receipt "
        f"{sent.body[:200]!r}")
    # A typed route's payload struct as an array.
    created = writer.request("POST", f"{writer.base}/sessions",
                             json_body={"command_id": world.new_id("cmd"), "payload": [session_id, "src", "array topic"]})
    assert created.status == 200, f"a session payload as an array answered {created.status}: {created.body[:200]!r}"
    stored = expect_status(writer.resource("session", session_id), 200).get("state", {}).get("body")
    assert stored == {"session_id": session_id, "source_id": "src", "topic": "array topic",
                      "created_by": writer.actor_id}, f"the session created from an array reads back as {stored!r}"


@isolation.SHARED
@reads("AM-JSON-4", "not-a-struct")
@pytest.mark.parametrize("route", ["commands", "sessions"])
def test_a_body_that_is_no_struct_is_invalid_command_before_authentication(world: World, route: str) -> None:
    """Isolation: shared: sends no token."""
    project = world.project()
    path = {"commands": "/v1/commands", "sessions": f"{project.writer.base}/sessions"}[route]
    for body in ("null", "5", "true", '"command_id"', "[]", '["command_id"]'):
        exchange = world.wire.request(world.transcript, "POST", path, content=body.encode(),
                                      headers={"Content-Type": "application/json"})
        assert exchange.status == 400, f"POST {route} with the body {body} answered {exchange.status}, expected 400"
        expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-JSON-3", "body-id")
@pytest.mark.parametrize("field", ["command_id", "project_id", "resource-id"])
def test_bad_identifier_in_a_raw_command_is_invalid_command(world: World, field: str) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    note, bad = world.new_id("note"), "has space"
    if field == "command_id":
        exchange = project.writer.put(note, {"v": 1}, command_id=bad)
    elif field == "project_id":
        exchange = project.writer.put(note, {"v": 1}, extra={"project_id": bad})
    else:
        exchange = project.writer.put(bad, {"v": 1})
    expect_error(exchange, 400, "invalid_command")
