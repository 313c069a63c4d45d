"""Tokens bound to one source and one actor on the MCP gateway (the kit's --auth-bindings-file rules).

A bound token (wire Appendix B's binding, carried onto the typed server's gateway) acts only as
its bound actor and sees and writes only its bound source, whatever the tool arguments say, and
is refused on the REST routes, where nothing would confine it.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo.actors import Actor, Project
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, rpc_error, tool_error, tool_ok, tool_result

HOME, ELSEWHERE = "src-bound", "src-other"


def _scene(world: World) -> tuple[Project, Actor, dict[str, str], dict[str, str]]:
    """A project with a session and fact in each of two sources, and a gateway token bound to HOME."""
    project = world.project(writers=("owner", "peer"))
    owner = project.owner
    home = owner.setup_session(source_id=HOME)
    away = owner.setup_session(source_id=ELSEWHERE)
    facts = {HOME: owner.setup_fact(home), ELSEWHERE: owner.setup_fact(away)}
    gate = world.bound(project, "gate", HOME)
    return project, gate, {HOME: home, ELSEWHERE: away}, facts


@isolation.PROJECT
@reads("AM-BIND-1", "actor-argument")
def test_a_bound_token_cannot_name_another_actor(world: World) -> None:
    """Isolation: project: tokens bound to a source of its own project."""
    project, gate, _, _ = _scene(world)
    rpc_error(gate.tool("handoff_list", box="inbox", actor_id=project.peer.actor_id), 400, -32602)
    # The refusal's message is the server's own (W §8 item 1). What shows the refusal is the binding's, not
    # one of actor_id as an undeclared argument, is that the bound actor's own id passes: Appendix B
    # refuses only a different value.
    tool_ok(gate.tool("handoff_list", box="inbox", actor_id=gate.actor_id))


@isolation.PROJECT
@reads("AM-BIND-1", "mismatch")
def test_a_token_bound_to_another_actor_is_refused(world: World) -> None:
    """Isolation: project: tokens bound to a source of its own project."""
    project = world.project(writers=("owner", "peer"))
    imposter = world.bound(project, "imposter", HOME, as_actor=project.peer)
    expect_error(imposter.mcp("tools/list"), 403, "identity_mismatch")


@isolation.PROJECT
@reads("AM-BIND-2", "reads")
def test_a_bound_token_reads_only_its_source(world: World) -> None:
    """Isolation: project: tokens bound to a source of its own project."""
    project, gate, sessions, facts = _scene(world)
    rpc_error(gate.tool("handoff_list", box="inbox", source_id=ELSEWHERE), 400, -32602)  # its message is the server's
    tool_ok(gate.tool("handoff_list", box="inbox", source_id=HOME))  # only a different value is refused
    tool_ok(gate.tool("resource_get", kind="fact", id=facts[HOME]))
    tool_error(gate.tool("resource_get", kind="fact", id=facts[ELSEWHERE]), "resource_not_found")
    tool_error(gate.tool("resource_get", kind="session", id=sessions[ELSEWHERE]), "resource_not_found")
    owner = project.owner
    here = owner.setup_handoff(gate, sessions[HOME])
    there = owner.setup_handoff(gate, sessions[ELSEWHERE])
    inbox = tool_ok(gate.tool("handoff_list", box="inbox"))
    assert [e["record"]["handoff_id"] for e in inbox["assignments"]] == [here.handoff_id], (
        f"the bound inbox shows another source's handoff: {inbox!r}")
    tool_error(gate.tool("handoff_status", handoff_id=there.handoff_id), "resource_not_found")
    if world.runtime.claimed("search"):
        word = owner.resource("fact", facts[ELSEWHERE]).json()["state"]["body"]["content"].split()[-1].strip(".")
        found = tool_ok(gate.tool("search", q=word))
        assert all(hit["source_id"] == HOME for hit in found["results"]), f"search left the bound source: {found!r}"


@isolation.PROJECT
@reads("AM-BIND-2", "writes")
def test_a_bound_token_writes_only_its_source(world: World) -> None:
    """Isolation: project: tokens bound to a source of its own project."""
    project, gate, sessions, _ = _scene(world)
    fact_id = world.new_id("fact")
    tool_error(gate.tool("fact_create", operation_id=world.new_id("op"), fact_id=fact_id,
                         session_id=sessions[ELSEWHERE], content="planted"), "resource_not_found")
    assert project.owner.resource("fact", fact_id).status == 404, "the refused fact was written anyway"
    session_id = world.new_id("session")
    tool_ok(gate.tool("session_create", operation_id=world.new_id("op"), session_id=session_id, topic="bound"))
    body = project.owner.resource("session", session_id).json()["state"]["body"]
    assert body["source_id"] == HOME, f"a bound session must land in the bound source: {body!r}"
    there = project.owner.setup_handoff(gate, sessions[ELSEWHERE])
    tool_error(gate.tool("handoff_accept", operation_id=world.new_id("op"), handoff_id=there.handoff_id,
                         expected_revision=there.revision, claim_id=world.new_id("claim")), "resource_not_found")
    revision, record = project.owner.setup_record(there.handoff_id)
    assert (revision, record["status"]) == (there.revision, "pending"), "the refused accept changed the handoff"


@isolation.PROJECT
@pytest.mark.requirement("AM-BIND-3")
def test_a_bound_token_is_refused_on_rest(world: World) -> None:
    """Isolation: project: tokens bound to a source of its own project."""
    project, gate, sessions, _ = _scene(world)
    expect_error(gate.identity(), 403, "project_unauthorized")
    expect_error(gate.create_session(source_id=ELSEWHERE), 403, "project_unauthorized")
    assert tool_result(gate.mcp("tools/list"))["tools"], "the same token still works through the gateway"
