"""Bearer authentication, project membership and roles (wire §4).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from conformance.errors import NotScored
from conformance.http import Exchange
from conformance.marks import reads
from conformance.profiles.aidememo.actors import Actor, setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_status
from conformance.profiles.aidememo.routes import TYPED_WRITES, typed

# Over a socket even to the embedded reference: credentials and queries as the server's HTTP layer parses them.
pytestmark = pytest.mark.real_http


def _write_routes(actor: Actor, world: World, session_id: str) -> dict[str, Callable[[], Exchange]]:
    """One request per write route, each well-formed, built for ``actor``."""
    handoff = world.new_id("handoff")
    return {
        "commands": lambda: actor.put(world.new_id("note"), {"v": 1}),
        "sessions": lambda: actor.create_session(),
        "facts": lambda: actor.create_fact(session_id),
        "handoff-contexts": lambda: actor.create_context(session_id, handoff, actor),
        "handoffs": lambda: actor.send(session_id, "someone-else", handoff),
        "accept": lambda: actor.accept(handoff, 1, world.new_id("claim")),
        "heartbeat": lambda: actor.heartbeat(handoff, 1, world.new_id("claim")),
        "return": lambda: actor.return_result(handoff, 1, world.new_id("claim"), world.new_id("fact")),
    }


_FEEDS, _SEARCH = pytest.mark.capability("replica-feeds"), pytest.mark.capability("search")
_READS = {"identity": "identity", "snapshot": "snapshot", "resource": "resources/custom.note/n1",
          "mailbox": "handoffs?box=inbox", "status": "handoffs/h1", "search": "search?q=probe",
          # A u64 past i64 is well-formed: upstream asks for the token before its store fails (ERRATA 4).
          "mailbox-past-i64": f"handoffs?box=inbox&before_seq={1 << 63}",
          "changes": "changes?project_epoch=e1&after_seq=0",
          "materialized": "changes/materialized?project_epoch=e1&after_seq=0"}


def _anonymous_write(world: World, project_id: str, route: str) -> tuple[str, dict[str, object]]:
    """A well-formed body for each write route (raw and every typed one), sent without a token."""
    command_id = world.new_id("cmd")
    if route == "commands":
        return "/v1/commands", {"command_id": command_id, "project_id": project_id, "expected_revision": None,
                                "operation": "resource.put", "payload": {}, "resource": {"kind": "custom.note",
                                                                                         "id": "n1"},
                                "change": "upsert"}
    payloads: dict[str, dict[str, object]] = {
        "sessions": {"session_id": "s1", "source_id": None, "topic": "t"},
        "facts": {"fact_id": "f1", "session_id": "s1", "content": "c"},
        "handoff-contexts": {"context_id": "c1", "handoff_id": "h1", "session_id": "s1", "to_actor": "a1",
                             "content": "c"},
        "handoffs": {"handoff_id": "h1", "session_id": "s1", "to_actor": "a1", "focus": None, "done_when": None,
                     "context_id": None},
        "accept": {"claim_id": "c1"}, "heartbeat": {"claim_id": "c1"},
        "return": {"claim_id": "c1", "result_fact_id": "f1", "outcome": "succeeded"}}
    route_of = typed(route)
    body: dict[str, object] = {"command_id": command_id, "payload": payloads[route]}
    if route_of.transition:
        body["expected_revision"] = 1
    return f"/v1/projects/{project_id}/{route_of.path.format(handoff_id='h1')}", body


@isolation.SHARED
@pytest.mark.requirement("AM-AUTH-1")
@pytest.mark.parametrize("route", [
    *(pytest.param(name, marks=_FEEDS if name in ("snapshot", "changes", "materialized") else
                   _SEARCH if name == "search" else (), id=name) for name in _READS),
    "commands", *(route.name for route in TYPED_WRITES)])
def test_missing_authorization_is_refused(world: World, route: str) -> None:
    """Isolation: shared: sends no token: a conforming server answers 401 whatever the project holds."""
    project = world.project()
    wire, transcript = world.wire, world.transcript
    if route in _READS:
        path, _, query = f"{project.writer.base}/{_READS[route]}".partition("?")
        exchange = wire.request(transcript, "GET", path, raw_query=query or None)
    else:
        path, body = _anonymous_write(world, project.project_id, route)
        exchange = wire.request(transcript, "POST", path, json_body=body)
    error = expect_error(exchange, 401, "authentication_failed")
    # Messages are the server's words (implementation_defined.MESSAGE), but not a 401's: W §4.1 fixes its body.
    assert error["message"] == "authentication failed", f"401 message {error['message']!r}"


@isolation.SHARED
@pytest.mark.requirement("AM-AUTH-2")
@pytest.mark.parametrize("form", [
    pytest.param("unknown-token", marks=reads("AM-AUTH-2", "unknown"), id="unknown-token"),
    *(pytest.param(form, marks=reads("AM-AUTH-2", "scheme"), id=form)
      for form in ("lowercase-scheme", "scheme-only", "basic-scheme")),
    pytest.param("double-space", marks=reads("AM-AUTH-2", "spacing"), id="double-space"),
    pytest.param("oversized-token", marks=reads("AM-AUTH-2", "oversized"), id="oversized-token")])
def test_malformed_or_unknown_bearer_is_refused(world: World, form: str) -> None:
    """Isolation: shared: reads only its identity, with a token it bent."""
    project = world.project()
    token = project.writer.token
    header = {"unknown-token": f"Bearer {world.new_id('nobody')}", "lowercase-scheme": f"bearer {token}",
              "double-space": f"Bearer  {token}", "oversized-token": "Bearer " + "a" * 4097,
              "scheme-only": "Bearer", "basic-scheme": f"Basic {token}"}[form]
    exchange = world.wire.request(world.transcript, "GET", f"{project.writer.base}/identity",
                                          headers={"Authorization": header})
    expect_error(exchange, 401, "authentication_failed")


@isolation.PROJECT
@pytest.mark.requirement("AM-AUTH-3")
@pytest.mark.parametrize("where", [
    pytest.param("other-project", marks=reads("AM-AUTH-3", "member"), id="other-project"),
    pytest.param("missing-project", marks=reads("AM-AUTH-3", "missing"), id="missing-project")])
def test_token_outside_its_projects_is_forbidden_not_missing(world: World, where: str) -> None:
    """Isolation: project: a second project of its own."""
    mine = world.project()
    other = world.project() if where == "other-project" else None
    if other is not None and other.project_id == mine.project_id:
        raise NotScored("the fixed token list offers no second project")
    project_id = other.project_id if other else world.new_id("never-created")
    for path in (f"/v1/projects/{project_id}/identity", f"/v1/projects/{project_id}/snapshot",
                 f"/v1/projects/{project_id}/handoffs/{world.new_id('h')}"):
        exchange = mine.writer.request("GET", path)
        expect_error(exchange, 403, "project_unauthorized")
    # Membership before the store, which alone fails on a before_seq past i64 (ERRATA 4).
    huge = mine.writer.request("GET", f"/v1/projects/{project_id}/handoffs", raw_query=f"box=inbox&before_seq={1 << 63}")
    expect_error(huge, 403, "project_unauthorized")
    exchange = mine.writer.command(kind="custom.note", resource_id="n1", payload={},
                                   extra={"project_id": project_id})
    expect_error(exchange, 403, "project_unauthorized")


@isolation.SHARED
@pytest.mark.requirement("AM-AUTH-4", clauses=("writes",))
@pytest.mark.parametrize("route", ["commands", *(route.name for route in TYPED_WRITES)])
def test_reader_cannot_write(world: World, route: str) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("writer",), readers=("reader",))
    session_id = project.writer.setup_session()
    exchange = _write_routes(project.reader, world, session_id)[route]()
    expect_error(exchange, 403, "project_unauthorized")


@isolation.PROJECT
@pytest.mark.requirement("AM-AUTH-4", clauses=("reads",))
def test_reader_reads_succeed(world: World) -> None:
    """Isolation: project: reads the mailbox and the snapshot."""
    project = world.project(writers=("writer",), readers=("reader",))
    note = world.new_id("note")
    setup_ok(project.writer.put(note, {"v": 1}), "put note")
    reader = project.reader
    expect_status(reader.identity(), 200)
    expect_status(reader.resource("custom.note", note), 200)
    expect_status(reader.mailbox("inbox"), 200)
    if world.runtime.claimed("replica-feeds"):
        expect_status(reader.snapshot(), 200)


@isolation.SHARED
@pytest.mark.requirement("AM-AUTH-4", clauses=("writes",))
def test_reader_cannot_replay_a_writers_command(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("writer",), readers=("reader",))
    command_id = world.new_id("cmd")
    note = world.new_id("note")
    setup_ok(project.writer.put(note, {"v": 1}, command_id=command_id), "put note")
    exchange = project.reader.put(note, {"v": 1}, command_id=command_id)
    expect_error(exchange, 403, "project_unauthorized")


@isolation.SHARED
@pytest.mark.requirement("AM-AUTH-5", clauses=("body",))
@pytest.mark.parametrize("field", ["tenant_id", "actor_id", "created_by"])
def test_identity_fields_in_a_body_are_refused(world: World, field: str) -> None:
    """Isolation: shared: its writes are refused; nothing read back."""
    project = world.project()
    payload = {"session_id": world.new_id("s"), "source_id": None, "topic": "t", field: "intruder"}
    expect_error(project.writer.create("sessions", payload), 400, "invalid_command")
    exchange = project.writer.put(world.new_id("note"), {"v": 1}, extra={field: "intruder"})
    expect_error(exchange, 400, "invalid_command")


@isolation.READS
@pytest.mark.requirement("AM-AUTH-5", clauses=("query",))
def test_actor_id_in_the_mailbox_query_is_refused(world: World) -> None:
    """Isolation: reads: only reads a mailbox, and writes nothing."""
    project = world.project(writers=("writer", "other"))
    exchange = project.writer.mailbox("inbox", actor_id=project.other.actor_id)
    expect_error(exchange, 400, "invalid_command")
