"""Raw commands, receipts, idempotency and typed creates (wire §1.2, §1.9-1.12, §2).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from conformance.http import Exchange
from conformance.marks import reads
from conformance.profiles.aidememo.actors import setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.derive import command_fingerprint
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, expect_status
from conformance.race import race


@isolation.SHARED
@pytest.mark.requirement("AM-CMD-1")
def test_raw_put_returns_a_full_receipt(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    note, command_id = world.new_id("note"), world.new_id("cmd")
    receipt = expect_receipt(project.writer.put(note, {"z": 2, "a": {"d": 4, "b": 3}}, command_id=command_id),
                             kind="custom.note", resource_id=note)
    assert receipt["command_id"] == command_id, f"receipt command_id {receipt['command_id']!r}"
    assert receipt["project_id"] == project.project_id and receipt["actor_id"] == project.writer.actor_id, receipt
    assert receipt["revision"] == 1, f"first put must be revision 1, got {receipt['revision']}"


@isolation.SHARED
@pytest.mark.requirement("AM-CMD-3")
@pytest.mark.parametrize("change", [
    pytest.param(change, marks=reads("AM-CMD-3", clause), id=change) for change, clause in (
        ("payload", "payload"), ("resource", "resource"), ("precondition", "precondition"), ("actor", "actor"),
        ("operation", "resource"))])
def test_reused_command_id_with_a_different_request_conflicts(world: World, change: str) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("writer", "other"))
    writer = project.writer
    note, command_id = world.new_id("note"), world.new_id("cmd")
    setup_ok(writer.put(note, {"v": 1}, command_id=command_id), "first put")
    if change == "payload":
        exchange = writer.put(note, {"v": 2}, command_id=command_id)
    elif change == "resource":
        exchange = writer.put(world.new_id("note"), {"v": 1}, command_id=command_id)
    elif change == "precondition":
        exchange = writer.put(note, {"v": 1}, command_id=command_id, expected_revision=1)
    elif change == "actor":
        exchange = project.other.put(note, {"v": 1}, command_id=command_id)
    else:
        exchange = writer.create_session(world.new_id("session"), command_id=command_id)
    expect_error(exchange, 409, "command_conflict")


@isolation.SHARED
@pytest.mark.requirement("AM-CMD-4")
@pytest.mark.parametrize("case", [pytest.param(case, marks=reads("AM-CMD-4", clause), id=case) for case, clause in (
    ("typed-kind", "kind"), ("unknown-operation", "pair"), ("mismatched-change", "pair"),
    ("delete-with-payload", "delete-payload"))])
def test_malformed_raw_command_is_invalid(world: World, case: str) -> None:
    """Isolation: shared: its writes are refused; nothing read back."""
    project = world.project()
    writer, note = project.writer, world.new_id("note")
    if case == "typed-kind":
        exchange = writer.command(kind="fact", resource_id=note, payload={"v": 1})
    elif case == "unknown-operation":
        exchange = writer.command(kind="custom.note", resource_id=note, payload={}, operation="fact.add")
    elif case == "mismatched-change":
        exchange = writer.command(kind="custom.note", resource_id=note, payload={}, change="delete")
    else:
        exchange = writer.delete(note, payload={"v": 1})
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-CMD-5", "stale")
def test_stale_expected_revision_is_refused(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    note = world.new_id("note")
    setup_ok(project.writer.put(note, {"v": 1}), "put revision 1")
    setup_ok(project.writer.put(note, {"v": 2}, expected_revision=1), "put revision 2")
    expect_error(project.writer.put(note, {"v": 3}, expected_revision=1), 409, "stale_revision")
    body = expect_status(project.writer.resource("custom.note", note), 200)
    assert body["revision"] == 2 and body["state"].get("body") == {"v": 2}, f"stale write changed state: {body!r}"


@isolation.SHARED
@reads("AM-CMD-5", "absent")
def test_expected_revision_on_an_absent_resource_is_not_found(world: World) -> None:
    """Isolation: shared: its write is refused; nothing read back."""
    project = world.project()
    expect_error(project.writer.put(world.new_id("absent"), {"v": 1}, expected_revision=1), 404, "resource_not_found")


@isolation.SHARED
@reads("AM-CMD-5", "absent")
@pytest.mark.parametrize("verb", ["accept", "heartbeat", "return"])
def test_a_transition_of_a_handoff_never_sent_is_not_found(world: World, verb: str) -> None:
    """Isolation: shared: its write is refused; nothing read back. A transition carries an
    expected_revision, so a handoff never sent is the absent resource of the clause (mutation
    testing of _ledger._stored_handoff: no check sent one)."""
    project = world.project(writers=("sender", "receiver"))
    actor, handoff, claim = project.receiver, world.new_id("never-sent"), world.new_id("claim")
    exchange = {"accept": lambda: actor.accept(handoff, 1, claim),
                "heartbeat": lambda: actor.heartbeat(handoff, 1, claim),
                "return": lambda: actor.return_result(handoff, 1, claim, world.new_id("fact"))}[verb]()
    expect_error(exchange, 404, "resource_not_found")


@isolation.SHARED
@reads("AM-CMD-6", "tombstone")
def test_delete_leaves_a_readable_tombstone(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    writer, note = project.writer, world.new_id("note")
    setup_ok(writer.put(note, {"v": 1}), "put")
    receipt = expect_receipt(writer.delete(note, expected_revision=1), kind="custom.note", resource_id=note)
    assert receipt["revision"] == 2, f"delete must take revision 2, got {receipt['revision']}"
    body = expect_status(writer.resource("custom.note", note), 200)
    assert body["revision"] == 2 and body["state"] == {"state": "deleted"}, f"tombstone reads as {body!r}"


@isolation.PROJECT
@pytest.mark.capability("replica-feeds")
@reads("AM-CMD-6", "feed")
def test_delete_appears_in_the_feed(world: World) -> None:
    """Isolation: project: the change feed."""
    project = world.project()
    writer, note = project.writer, world.new_id("note")
    setup_ok(writer.put(note, {"v": 1}), "put")
    receipt = setup_ok(writer.delete(note, expected_revision=1), "delete")
    feed = expect_status(writer.changes(writer.setup_epoch(), receipt["project_seq"] - 1), 200)
    entries = [e for e in feed["entries"] if e["resource"] == {"kind": "custom.note", "id": note}]
    assert entries and entries[0]["operation"] == "delete" and entries[0]["seq"] == receipt["project_seq"], (
        f"feed lacks the delete at seq {receipt['project_seq']}: {feed['entries']!r}")


@isolation.SHARED
@reads("AM-CMD-7", "raw")
@pytest.mark.parametrize("payload", [{"z": 2, "a": {"d": 4, "b": 3}}, {"content": "레디스 장애\n복구", "list": [3, 1],
                                     "n": 1.5, "nested": {"a": None, "b": True}}, None, []],
                         ids=["nested", "unicode", "null", "empty-list"])
def test_raw_fingerprint_matches_the_canonical_envelope(world: World, payload: dict[str, object]) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    note = world.new_id("note")
    receipt = expect_receipt(project.writer.put(note, payload))
    expected = command_fingerprint(project_id=project.project_id, expected_revision=None, operation="resource.put",
                                   payload=payload, resource_kind="custom.note", resource_id=note)
    assert receipt["fingerprint"] == expected, f"fingerprint {receipt['fingerprint']} != §7.2 value {expected}"


@isolation.SHARED
@reads("AM-CMD-7", "typed")
def test_typed_fingerprints_fill_absent_optionals_with_null(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("sender", "receiver"))
    sender = project.sender
    session_id = world.new_id("session")
    receipt = expect_receipt(sender.create_session(session_id, source_id="src", topic="topic"))
    expected = command_fingerprint(project_id=project.project_id, expected_revision=None, operation="session.create",
                                   payload={"session_id": session_id, "source_id": "src", "topic": "topic"},
                                   resource_kind="session", resource_id=session_id)
    assert receipt["fingerprint"] == expected, "session.create fingerprint departs from §7.2"
    handoff_id = world.new_id("handoff")
    body = {"command_id": world.new_id("cmd"),
            "payload": {"handoff_id": handoff_id, "session_id": session_id, "to_actor": project.receiver.actor_id}}
    receipt = expect_receipt(sender.request("POST", f"{sender.base}/handoffs", json_body=body))
    expected = command_fingerprint(
        project_id=project.project_id, expected_revision=None, operation="handoff.send",
        payload={"handoff_id": handoff_id, "session_id": session_id, "to_actor": project.receiver.actor_id,
                 "focus": None, "done_when": None, "context_id": None},
        resource_kind="handoff", resource_id=handoff_id)
    assert receipt["fingerprint"] == expected, "handoff.send fingerprint must cover omitted optionals as null"
    claim = world.new_id("claim")
    receipt = expect_receipt(project.receiver.accept(handoff_id, 1, claim))
    expected = command_fingerprint(project_id=project.project_id, expected_revision=1, operation="handoff.accept",
                                   payload={"claim_id": claim}, resource_kind="handoff", resource_id=handoff_id)
    assert receipt["fingerprint"] == expected, "handoff.accept fingerprint departs from §7.2"


@isolation.SHARED
@reads("AM-TYPED-1", "receipt", "duplicate")
@pytest.mark.parametrize("kind", ["session", "fact", "handoff_context", "handoff"])
def test_typed_create_returns_revision_one_and_refuses_duplicates(world: World, kind: str) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("sender", "receiver"))
    sender, receiver = project.sender, project.receiver
    session_id = sender.setup_session() if kind != "session" else world.new_id("session")
    new_id = world.new_id(kind.replace("_", "-"))
    create: Callable[[], Exchange] = {
        "session": lambda: sender.create_session(new_id),
        "fact": lambda: sender.create_fact(session_id, new_id),
        "handoff_context": lambda: sender.create_context(session_id, world.new_id("h"), receiver, new_id),
        "handoff": lambda: sender.send(session_id, receiver, new_id),
    }[kind]
    receipt = expect_receipt(create(), kind=kind, resource_id=new_id)
    assert receipt["revision"] == 1, f"{kind} create must be revision 1, got {receipt['revision']}"
    expect_error(create(), 409, "resource_already_exists")


@isolation.SHARED
@reads("AM-TYPED-2", "missing-session")
@pytest.mark.parametrize("kind", ["fact", "handoff_context", "handoff"])
def test_creates_on_a_missing_session_are_not_found(world: World, kind: str) -> None:
    """Isolation: shared: its writes are refused; nothing read back."""
    project = world.project(writers=("sender", "receiver"))
    sender, missing = project.sender, world.new_id("no-session")
    exchange = {"fact": lambda: sender.create_fact(missing),
                "handoff_context": lambda: sender.create_context(missing, world.new_id("h"), project.receiver),
                "handoff": lambda: sender.send(missing, project.receiver)}[kind]()
    expect_error(exchange, 404, "resource_not_found")


@isolation.SHARED
@reads("AM-TYPED-2", "receiver")
@pytest.mark.parametrize("receiver", ["non-member", "reader", "self"])
@pytest.mark.parametrize("route", ["handoff", "handoff_context"])
def test_routing_to_an_ineligible_receiver_is_invalid(world: World, receiver: str, route: str) -> None:
    """Isolation: shared: its writes are refused; nothing read back."""
    project = world.project(writers=("sender",), readers=("reader",))
    sender = project.sender
    session_id = sender.setup_session()
    to = {"non-member": world.new_id("stranger"), "reader": project.reader.actor_id, "self": sender.actor_id}[receiver]
    if route == "handoff":
        exchange = sender.send(session_id, to)
    else:
        payload = {"context_id": world.new_id("context"), "handoff_id": world.new_id("h"), "session_id": session_id,
                   "to_actor": to, "content": "context"}
        exchange = sender.create("handoff-contexts", payload)
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-TYPED-3", "session", "fact", "context", "handoff")
def test_server_stamps_actor_and_inherits_source(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("sender", "receiver"))
    sender = project.sender
    session_id = sender.setup_session(source_id="project:stamp")
    session = expect_status(sender.resource("session", session_id), 200)["state"]["body"]
    assert session.get("created_by") == sender.actor_id, f"session created_by {session.get('created_by')!r}"
    fact_id = sender.setup_fact(session_id)
    fact = expect_status(sender.resource("fact", fact_id), 200)["state"]["body"]
    assert fact.get("actor_id") == sender.actor_id and fact.get("source_id") == "project:stamp", f"fact {fact!r}"
    context_id = world.new_id("context")
    setup_ok(sender.create_context(session_id, world.new_id("handoff"), project.receiver, context_id), "create context")
    context = expect_status(sender.resource("handoff_context", context_id), 200)["state"]["body"]
    assert context.get("from_actor") == sender.actor_id and context.get("source_id") == "project:stamp", context
    ref = sender.setup_handoff(project.receiver, session_id)
    handoff = expect_status(sender.status(ref.handoff_id), 200)["record"]
    assert handoff.get("from_actor") == sender.actor_id and handoff.get("source_id") == "project:stamp", handoff


@isolation.SHARED
@reads("AM-CMD-8", "identical")
def test_concurrent_identical_commands_commit_once(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    note, command_id = world.new_id("note"), world.new_id("cmd")
    answers = race([lambda: project.writer.put(note, {"v": 1}, command_id=command_id)] * 4)
    receipts = [expect_receipt(answer) for answer in answers]
    assert len({answer.body for answer in answers}) == 1, "concurrent identical commands got different receipts"
    body = expect_status(project.writer.resource("custom.note", note), 200)
    assert body["revision"] == 1 == receipts[0]["revision"], f"identical commands committed more than once: {body!r}"


@isolation.SHARED
@reads("AM-CMD-8", "different")
def test_concurrent_different_bodies_under_one_command_id_commit_once(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    note, command_id = world.new_id("note"), world.new_id("cmd")
    answers = race([partial(project.writer.put, note, {"v": v}, command_id=command_id) for v in range(4)])
    winners = [a for a in answers if a.status == 200]
    assert len(winners) == 1, f"{len(winners)} of 4 bodies under one command id committed"
    for loser in answers:
        if loser is not winners[0]:
            expect_error(loser, 409, "command_conflict")
    body = expect_status(project.writer.resource("custom.note", note), 200)
    assert body["revision"] == 1, f"resource at revision {body['revision']} after one commit"


@isolation.SHARED
@pytest.mark.requirement("AM-TYPED-4")
@pytest.mark.parametrize("case", [pytest.param(case, marks=reads("AM-TYPED-4", clause), id=case) for case, clause in (
    ("topic-too-long", "topic"), ("blank-topic", "blank"), ("control-char", "control"), ("fact-too-long", "fact"),
    ("context-too-long", "context"), ("focus-too-long", "focus"))])
def test_invalid_text_fields_are_refused(world: World, case: str) -> None:
    """Isolation: shared: its writes are refused; nothing read back."""
    project = world.project(writers=("sender", "receiver"))
    sender = project.sender
    if case == "topic-too-long":
        exchange = sender.create_session(topic="t" * 513)
    elif case == "blank-topic":
        exchange = sender.create_session(topic="  \n\t ")
    elif case == "control-char":
        exchange = sender.create_session(topic="bell \x07 here")
    elif case == "fact-too-long":
        exchange = sender.create_fact(sender.setup_session(), content="f" * 65537)
    elif case == "context-too-long":
        payload = {"context_id": world.new_id("context"), "handoff_id": world.new_id("h"),
                   "session_id": sender.setup_session(), "to_actor": project.receiver.actor_id, "content": "c" * 65537}
        exchange = sender.create("handoff-contexts", payload)
    else:
        exchange = sender.send(sender.setup_session(), project.receiver, focus="x" * 4097)
    expect_error(exchange, 400, "invalid_command")


@isolation.SHARED
@reads("AM-TYPED-4", "whitespace")
def test_text_at_its_limits_is_accepted(world: World) -> None:
    """Isolation: shared: its own receipts."""
    project = world.project(writers=("sender", "receiver"))
    sender = project.sender
    expect_receipt(sender.create_session(topic="한" * 170 + "ab"))   # 512 bytes of UTF-8
    session_id = sender.setup_session()
    expect_receipt(sender.create_fact(session_id, content="line one\nline two\ttabbed\r\n"))
    expect_receipt(sender.send(session_id, project.receiver, focus="x" * 4096))
    expect_receipt(sender.create_fact(session_id, content="f" * 65536))
    payload = {"context_id": world.new_id("context"), "handoff_id": world.new_id("h"), "session_id": session_id,
               "to_actor": project.receiver.actor_id, "content": "c" * 65536}
    expect_receipt(sender.create("handoff-contexts", payload))
