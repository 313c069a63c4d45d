"""Command ids on every write route: the same body replays its receipt, another body conflicts (wire §2.4).

Upstream looks the command id up before any state check, on the raw route and on every typed
route (``svc/lib.rs`` ``replay``): the same actor, fingerprint and resource answer the stored
receipt byte for byte and commit nothing; anything else is 409 ``command_conflict``, whatever the
resource's state has become since. Each check drives one route of ``routes.TYPED_WRITES`` (or the
raw route) on a resource set up so that its first request commits.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from conformance.http import Exchange
from conformance.profiles.aidememo.actors import Actor, setup_ok, setup_revision
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, expect_status
from conformance.profiles.aidememo.routes import RAW, TYPED_WRITES, WriteRoute

ROUTES = [route.name for route in TYPED_WRITES]


@dataclass(slots=True)
class Scene:
    """One route's request for one resource, ready to send under any command id."""

    send: Callable[[str, bool], Exchange]  # (command_id, another body?) -> the answer
    read: Callable[[], Exchange]  # the resource as its writer reads it (``revision`` at the top)
    writer: Actor  # a writer of the same project

    def revision(self, step: str) -> int:
        return setup_revision(self.read(), step)


def _typed(world: World, route: WriteRoute) -> Scene:
    """The route's first request commits: its prerequisites (a session, a handoff, a claim) are set up."""
    project = world.project(writers=("sender", "receiver"))
    sender, receiver = project.sender, project.receiver
    values: dict[str, Any] = {"source_id": "src", "to_actor": receiver.actor_id, "done_when": None, "context_id": None,
                              "topic": world.text("topic"), "content": world.text("content"),
                              "focus": world.text("focus"), "outcome": "failed"}
    revision: int | None = None
    actor: Actor = sender
    if route.name != "sessions":
        values["session_id"] = sender.setup_session()
    if route.resource_field is not None:
        values[route.resource_field] = world.new_id(route.kind.replace("_", "-"))
    values.setdefault("handoff_id", world.new_id("handoff"))  # a context names the handoff it is for
    if route.transition:
        ref = sender.setup_handoff(receiver, values["session_id"])
        if route.name != "accept":
            ref = receiver.setup_accept(ref)
        actor, revision = receiver, ref.revision
        values.update(handoff_id=ref.handoff_id, claim_id=ref.claim_id or world.new_id("claim"))
        if route.name == "return":
            values["result_fact_id"] = receiver.setup_fact(ref.session_id)
    another = {"claim_id": world.new_id("claim"), "outcome": "succeeded", "topic": world.text("another topic"),
               "content": world.text("another content"), "focus": world.text("another focus")}
    path = f"{actor.base}/{route.path.format(handoff_id=values['handoff_id'])}"

    def send(command_id: str, other: bool) -> Exchange:
        payload = {name: values[name] for name in route.fields}
        expected = revision
        if other and route.varied == "expected_revision":
            expected = None if revision is None else revision + 1  # the handoff's revision after the first
        elif other:
            payload[route.varied] = another[route.varied]
        body: dict[str, Any] = {"command_id": command_id, "payload": payload}
        if route.transition:
            body["expected_revision"] = expected
        return actor.request("POST", path, json_body=body)

    if route.transition:
        return Scene(send, lambda: actor.status(values["handoff_id"]), sender)
    return Scene(send, lambda: sender.resource(route.kind, values[route.resource_field or ""]), sender)


def _raw(world: World) -> Scene:
    writer = world.project().writer
    note = world.new_id("note")
    return Scene(lambda command_id, other: writer.put(note, {"v": 2 if other else 1}, command_id=command_id),
                 lambda: writer.resource("custom.note", note), writer)


def _scene(world: World, name: str) -> Scene:
    return _raw(world) if name == RAW.name else _typed(world, next(r for r in TYPED_WRITES if r.name == name))


@isolation.SHARED
@pytest.mark.requirement("AM-CMD-2", clauses=("identical", "nothing"))
@pytest.mark.parametrize("route", [RAW.name, *ROUTES])
def test_identical_resubmission_returns_the_identical_receipt(world: World, route: str) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    scene = _scene(world, route)
    command_id = world.new_id("cmd")
    first = scene.send(command_id, False)
    expect_receipt(first)
    setup_ok(scene.writer.put(world.new_id("other"), {"v": 2}), "an unrelated later command")
    before = scene.revision("read the resource before the replay")
    second = scene.send(command_id, False)
    expect_receipt(second)
    assert second.body == first.body, f"{route}: the replay differs:\nfirst  {first.body!r}\nsecond {second.body!r}"
    after = expect_status(scene.read(), 200)["revision"]
    assert after == before, f"{route}: the replay committed again (revision {before} -> {after})"


@isolation.SHARED
@pytest.mark.requirement("AM-CMD-3", clauses=("typed",))
@pytest.mark.parametrize("route", ROUTES)
def test_reused_command_id_on_a_typed_route_with_another_body_conflicts(world: World, route: str) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    # The same route, the same resource, the same actor: only the body differs (routes.WriteRoute.varied).
    scene = _scene(world, route)
    command_id = world.new_id("cmd")
    setup_ok(scene.send(command_id, False), f"first {route} request")
    before = scene.revision("read the resource after the first request")
    expect_error(scene.send(command_id, True), 409, "command_conflict")
    after = expect_status(scene.read(), 200)["revision"]
    assert after == before, f"{route}: the conflicting request changed the resource (revision {before} -> {after})"
