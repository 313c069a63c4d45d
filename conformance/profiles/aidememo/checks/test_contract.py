"""The 15 portable ledger contract checks upstream runs on its stores (handoff §11.1), over HTTP.

Each check replays the fixture sequence up to its own step on a fresh project, so every step
is its own verdict and the checks stay independent of order and xdist placement.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.http import Exchange
from conformance.profiles.aidememo.actors import Actor, Project, setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, expect_status

KIND = "custom.fixture"


@dataclass
class Fixture:
    world: World
    project: Project
    resource_id: str
    receipts: dict[str, dict[str, Any]] = field(default_factory=dict)
    command_ids: dict[str, str] = field(default_factory=dict)

    @property
    def writer(self) -> Actor:
        return self.project.writer

    def put(self, name: str, body: dict[str, Any], expected_revision: int | None = None) -> Exchange:
        command_id = self.command_ids.setdefault(name, self.world.new_id(name))
        return self.writer.put(self.resource_id, body, kind=KIND, command_id=command_id,
                               expected_revision=expected_revision)

    def step(self, name: str, exchange: Exchange) -> dict[str, Any]:
        self.receipts[name] = setup_ok(exchange, name)
        return self.receipts[name]


def _fixture(world: World, upto: str, project: Project | None = None) -> Fixture:
    """Run the upstream fixture sequence through step ``upto`` (exclusive of the step's own check),
    in ``project`` (default: a project with one writer, all but one check need)."""
    project = project or world.project()
    fixture = Fixture(world, project, world.new_id("fixture"))
    order = ["create", "update", "delete"]
    for name in order[: order.index(upto)] if upto in order else order:
        if name == "create":
            fixture.step("create", fixture.put("create", {"fixture": "a"}))
        elif name == "update":
            fixture.step("update", fixture.put("update", {"fixture": "d"}, expected_revision=1))
        else:
            command_id = fixture.command_ids.setdefault("delete", world.new_id("delete"))
            fixture.step("delete", fixture.writer.delete(fixture.resource_id, kind=KIND, command_id=command_id,
                                                         expected_revision=2))
    return fixture


@isolation.PROJECT
@pytest.mark.fresh_project
@pytest.mark.requirement("AM-CONF-01")
def test_initial_commit(world: World) -> None:
    """Isolation: project: first-commit numbering."""
    fixture = _fixture(world, "create")
    receipt = expect_receipt(fixture.put("create", {"fixture": "a"}))
    assert (receipt["project_seq"], receipt["revision"]) == (1, 1), (
        f"first commit must be project_seq 1 revision 1, got {receipt['project_seq']}/{receipt['revision']}")


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-02")
def test_canonical_resource_upsert(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    fixture = _fixture(world, "update")
    body = expect_status(fixture.writer.resource(KIND, fixture.resource_id), 200)
    assert body["state"] == {"state": "present", "body": {"fixture": "a"}} and body["revision"] == 1, body


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-03")
def test_idempotent_replay(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    fixture = _fixture(world, "update")
    replay = fixture.put("create", {"fixture": "a"})
    assert expect_receipt(replay) == fixture.receipts["create"], "replay receipt differs from the original"


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-04")
def test_receipt_lookup(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    fixture = _fixture(world, "all")
    replay = expect_receipt(fixture.put("create", {"fixture": "a"}))
    assert replay == fixture.receipts["create"], "after later commands the receipt of command_create changed"


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-05")
def test_command_actor_conflict(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=("writer", "other"))
    fixture = _fixture(world, "update", project)
    other = fixture.project.other.put(fixture.resource_id, {"fixture": "a"}, kind=KIND,
                                      command_id=fixture.command_ids["create"])
    expect_error(other, 409, "command_conflict")


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-06")
def test_command_id_conflict(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    fixture = _fixture(world, "update")
    expect_error(fixture.put("create", {"fixture": "b"}), 409, "command_conflict")


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-07")
def test_stale_revision(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    fixture = _fixture(world, "update")
    expect_error(fixture.put("stale", {"fixture": "c"}, expected_revision=2), 409, "stale_revision")


@isolation.PROJECT
@pytest.mark.requirement("AM-CONF-08")
def test_compare_and_swap(world: World) -> None:
    """Isolation: project: two of its commits must take consecutive project_seq."""
    fixture = _fixture(world, "update")
    receipt = expect_receipt(fixture.put("update", {"fixture": "d"}, expected_revision=1))
    assert receipt["revision"] == 2, f"CAS write must take revision 2, got {receipt['revision']}"
    assert receipt["project_seq"] == fixture.receipts["create"]["project_seq"] + 1, "CAS write must take the next seq"


@isolation.PROJECT
@pytest.mark.fresh_project
@pytest.mark.requirement("AM-CONF-09")
def test_single_mutation_per_command(world: World) -> None:
    """Isolation: project: the exact feed."""
    world.require("replica-feeds")
    fixture = _fixture(world, "update")
    fixture.put("create", {"fixture": "a"})                        # replay
    fixture.put("create", {"fixture": "b"})                        # conflict
    fixture.put("stale", {"fixture": "c"}, expected_revision=2)    # stale
    fixture.step("update", fixture.put("update", {"fixture": "d"}, expected_revision=1))
    fixture.step("delete", fixture.writer.delete(fixture.resource_id, kind=KIND, expected_revision=2))
    feed = expect_status(fixture.writer.changes(fixture.writer.setup_epoch(), 0), 200)
    seqs = [entry["seq"] for entry in feed["entries"]]
    assert seqs == [1, 2, 3], f"feed from seq 0 must hold exactly the 3 commits, got seqs {seqs}"


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads or feed contents: a shared project would race
@pytest.mark.requirement("AM-CONF-10")
def test_delete_tombstone(world: World) -> None:
    """Isolation: project: the change feed."""
    world.require("replica-feeds")
    fixture = _fixture(world, "all")
    delete = fixture.receipts["delete"]
    feed = expect_status(fixture.writer.changes(fixture.writer.setup_epoch(), delete["project_seq"] - 1), 200)
    assert feed["entries"], "the feed lost the delete"
    last = feed["entries"][-1]
    assert (last["operation"], last["seq"], last["revision"]) == ("delete", delete["project_seq"], delete["revision"]), (
        f"last change {last!r} does not match the delete receipt {delete!r}")


@isolation.SHARED
@pytest.mark.requirement("AM-CONF-11")
def test_canonical_resource_tombstone(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    fixture = _fixture(world, "all")
    body = expect_status(fixture.writer.resource(KIND, fixture.resource_id), 200)
    assert body["state"] == {"state": "deleted"} and body["revision"] == 3, f"tombstone reads as {body!r}"


@isolation.PROJECT
@pytest.mark.requirement("AM-CONF-12")
def test_revision_pinned_change_materialization(world: World) -> None:
    """Isolation: project: the materialized feed."""
    fixture = _fixture(world, "all")
    first = fixture.receipts["create"]["project_seq"]
    feed = expect_status(fixture.writer.changes(fixture.writer.setup_epoch(), first - 1, materialized=True), 200)
    states = [(e["change"]["revision"], e["resource"]["state"]) for e in feed["entries"]
              if e["change"]["resource"]["id"] == fixture.resource_id]
    assert states == [(1, {"state": "present", "body": {"fixture": "a"}}),
                      (2, {"state": "present", "body": {"fixture": "d"}}),
                      (3, {"state": "deleted"})], f"materialized states {states!r}"


@isolation.PROJECT
@pytest.mark.fresh_project
@pytest.mark.requirement("AM-CONF-13")
def test_atomic_project_snapshot(world: World) -> None:
    """Isolation: project: the snapshot."""
    fixture = _fixture(world, "all")
    epoch = fixture.writer.setup_epoch()
    snapshot = expect_status(fixture.writer.snapshot(), 200)
    assert snapshot["project_epoch"] == epoch, f"snapshot epoch {snapshot['project_epoch']!r} != {epoch!r}"
    assert snapshot["at_seq"] == fixture.receipts["delete"]["project_seq"], f"snapshot at_seq {snapshot['at_seq']}"
    resources = snapshot["resources"]
    assert len(resources) == 1 and resources[0]["state"] == {"state": "deleted"}, f"snapshot {resources!r}"


@isolation.PROJECT
@pytest.mark.requirement("AM-CONF-14")
def test_cursor_epoch_fail_closed(world: World) -> None:
    """Isolation: project: the change feed."""
    fixture = _fixture(world, "update")
    expect_error(fixture.writer.changes("epoch_replaced", 0), 409, "cursor_epoch_mismatch")


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads or feed contents: a shared project would race
@pytest.mark.requirement("AM-CONF-15")
def test_cursor_sequence_fail_closed(world: World) -> None:
    """Isolation: project: the snapshot's head."""
    fixture = _fixture(world, "update")
    head = expect_status(fixture.writer.snapshot(), 200)["at_seq"]
    expect_error(fixture.writer.changes(fixture.writer.setup_epoch(), head + 1), 409, "cursor_out_of_range")
