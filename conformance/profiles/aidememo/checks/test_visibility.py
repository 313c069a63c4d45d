"""Participant-scoped visibility in every read path (wire §5.1, handoff §8.1).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo.actors import Project, setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_status

HIDDEN_KINDS = ("handoff", "handoff_context")


def _routed(world: World) -> tuple[Project, str, str]:
    """A handoff with a context from sender to receiver; ``other`` (writer) and ``reader`` see neither."""
    project = world.project(writers=("sender", "receiver", "other"), readers=("reader",))
    sender = project.sender
    session_id = sender.setup_session()
    handoff_id, context_id = world.new_id("handoff"), world.new_id("context")
    setup_ok(sender.create_context(session_id, handoff_id, project.receiver, context_id), "create context")
    setup_ok(sender.send(session_id, project.receiver, handoff_id, context_id=context_id), "send")
    return project, handoff_id, context_id


@isolation.SHARED
@reads("AM-VIS-1", "status", "resource")
@pytest.mark.parametrize("who", ["other", "reader"])
def test_non_participant_cannot_read_the_handoff_or_context(world: World, who: str) -> None:
    """Isolation: shared: its own handoff, read back by its id."""
    project, handoff_id, context_id = _routed(world)
    actor = project.actors[who]
    expect_error(actor.status(handoff_id), 403, "handoff_actor_mismatch")
    expect_error(actor.resource("handoff", handoff_id), 404, "resource_not_found")
    expect_error(actor.resource("handoff_context", context_id), 404, "resource_not_found")


@isolation.SHARED
@reads("AM-VIS-1", "resource")
def test_participants_can_read_the_handoff_and_context(world: World) -> None:
    """Isolation: shared: its own handoff, read back by its id."""
    project, handoff_id, context_id = _routed(world)
    for who in ("sender", "receiver"):
        actor = project.actors[who]
        expect_status(actor.resource("handoff", handoff_id), 200)
        expect_status(actor.resource("handoff_context", context_id), 200)


@isolation.PROJECT
@reads("AM-VIS-1", "snapshot", "feeds")
@pytest.mark.parametrize("who", ["other", "reader"])
def test_non_participant_snapshot_and_feeds_omit_the_handoff(world: World, who: str) -> None:
    """Isolation: project: snapshots and feeds."""
    world.require("replica-feeds")
    project, handoff_id, context_id = _routed(world)
    actor = project.actors[who]
    hidden = {("handoff", handoff_id), ("handoff_context", context_id)}
    snapshot = expect_status(actor.snapshot(), 200)
    seen = {(r["resource"]["kind"], r["resource"]["id"]) for r in snapshot["resources"]}
    assert not seen & hidden, f"snapshot leaks {sorted(seen & hidden)} to {who}"
    epoch = actor.setup_epoch()
    for materialized in (False, True):
        feed = expect_status(actor.changes(epoch, 0, materialized=materialized), 200)
        entries = [e["change"] if materialized else e for e in feed["entries"]]
        leaked = {(e["resource"]["kind"], e["resource"]["id"]) for e in entries} & hidden
        assert not leaked, f"{'materialized ' if materialized else ''}feed leaks {sorted(leaked)} to {who}"
    # The participant's snapshot must hold both, or the check above proves nothing.
    mine = {(r["resource"]["kind"], r["resource"]["id"]) for r in expect_status(project.receiver.snapshot(), 200)["resources"]}
    assert hidden <= mine, f"the receiver's snapshot lacks {sorted(hidden - mine)}"


@isolation.actors("other")  # the parties of the handoff: shared
@reads("AM-VIS-1", "mailbox")
def test_non_participant_mailboxes_omit_the_handoff(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project, handoff_id, _ = _routed(world)
    for box in ("inbox", "outbox"):
        page = expect_status(project.other.mailbox(box, include_completed=True), 200)
        ids = [entry["record"]["handoff_id"] for entry in page["assignments"]]
        assert handoff_id not in ids, f"{box} of a non-participant lists {handoff_id}"


@isolation.SHARED
@pytest.mark.requirement("AM-VIS-3")
def test_shared_kinds_are_visible_to_every_member(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("writer", "other"), readers=("reader",))
    session_id = project.writer.setup_session()
    fact_id = project.writer.setup_fact(session_id)
    note = world.new_id("note")
    setup_ok(project.writer.put(note, {"v": 1}), "put note")
    for who in ("other", "reader"):
        actor = project.actors[who]
        for kind, resource_id in (("session", session_id), ("fact", fact_id), ("custom.note", note)):
            expect_status(actor.resource(kind, resource_id), 200)
