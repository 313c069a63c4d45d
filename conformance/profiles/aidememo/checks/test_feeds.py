"""Change feeds, materialization, snapshots and cursor rules (wire §5.2, §5.3).

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo.actors import Project, setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, expect_status


def _notes(world: World, count: int = 3) -> tuple[Project, list[dict[str, Any]]]:
    project = world.project()  # its writer is all these checks use
    receipts = [setup_ok(project.writer.put(world.new_id("note"), {"n": i}), f"put note {i}") for i in range(count)]
    return project, receipts


@isolation.PROJECT
@reads("AM-FEED-1", "epoch")
def test_cursor_with_another_epoch_is_refused(world: World) -> None:
    """Isolation: project: the change feeds."""
    project, _ = _notes(world, 1)
    expect_error(project.writer.changes(world.new_id("epoch"), 0), 409, "cursor_epoch_mismatch")
    expect_error(project.writer.changes(world.new_id("epoch"), 0, materialized=True), 409, "cursor_epoch_mismatch")


@isolation.PROJECT
@reads("AM-FEED-1", "epoch")
def test_an_epoch_on_either_side_of_the_current_one_is_refused(world: World) -> None:
    """Isolation: project: the change feeds."""
    # Epochs are compared for equality: one that sorts before the current epoch (a prefix of it)
    # and one that sorts after it (the epoch extended) are both another epoch.
    project, _ = _notes(world, 1)
    epoch = project.writer.setup_epoch()
    for wrong in (epoch[:-1], epoch + "z"):
        for materialized in (False, True):
            expect_error(project.writer.changes(wrong, 0, materialized=materialized), 409, "cursor_epoch_mismatch")


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads or feed contents: a shared project would race
@reads("AM-FEED-1", "range")
def test_cursor_beyond_the_head_is_refused(world: World) -> None:
    """Isolation: project: the snapshot's head."""
    project, receipts = _notes(world, 2)
    epoch = project.writer.setup_epoch()
    head = expect_status(project.writer.snapshot(), 200)["at_seq"]
    for materialized in (False, True):
        expect_error(project.writer.changes(epoch, head + 1, materialized=materialized), 409, "cursor_out_of_range")


@isolation.PROJECT
@reads("AM-FEED-1", "limit")
@pytest.mark.parametrize("limit", [0, 10001])
def test_feed_limit_out_of_range_is_invalid(world: World, limit: int) -> None:
    """Isolation: project: the change feed."""
    project, _ = _notes(world, 1)
    epoch = project.writer.setup_epoch()
    expect_error(project.writer.changes(epoch, 0, limit), 400, "invalid_change_batch")


@isolation.PROJECT
@pytest.mark.requirement("AM-FEED-2")
def test_materialized_entries_carry_the_body_at_their_revision(world: World) -> None:
    """Isolation: project: the materialized feed."""
    project = world.project()
    writer, note = project.writer, world.new_id("note")
    first = setup_ok(writer.put(note, {"v": "one"}), "put v1")
    setup_ok(writer.put(note, {"v": "two"}, expected_revision=1), "put v2")
    setup_ok(writer.delete(note, expected_revision=2), "delete")
    setup_ok(writer.put(note, {"v": "four"}), "resurrect")
    feed = expect_status(writer.changes(writer.setup_epoch(), first["project_seq"] - 1, materialized=True), 200)
    states = [(e["change"]["revision"], e["change"]["operation"], e["resource"]["state"]) for e in feed["entries"]
              if e["change"]["resource"]["id"] == note]
    assert states == [(1, "upsert", {"state": "present", "body": {"v": "one"}}),
                      (2, "upsert", {"state": "present", "body": {"v": "two"}}),
                      (3, "delete", {"state": "deleted"}),
                      (4, "upsert", {"state": "present", "body": {"v": "four"}})], f"materialized {states!r}"
    for entry in feed["entries"]:
        assert entry["resource"]["revision"] == entry["change"]["revision"], "resource revision != change revision"


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads or feed contents: a shared project would race
@reads("AM-FEED-3", "increasing", "next-cursor", "once")
def test_paging_by_next_cursor_visits_every_entry_once(world: World) -> None:
    """Isolation: project: the exact feed."""
    project, receipts = _notes(world, 5)
    writer = project.writer
    epoch = writer.setup_epoch()
    start = receipts[0]["project_seq"] - 1
    after, seen, pages = start, [], 0
    while True:
        batch = expect_status(writer.changes(epoch, after, 2), 200)
        pages += 1
        seqs = [e["seq"] for e in batch["entries"]]
        assert all(s > after for s in seqs) and seqs == sorted(set(seqs)), f"seqs {seqs} after {after}"
        assert batch["cursor"] == {"project_epoch": epoch, "after_seq": after}, f"cursor echo {batch['cursor']!r}"
        assert batch["next_cursor"]["project_epoch"] == epoch, f"next_cursor {batch['next_cursor']!r}, epoch {epoch}"
        if seqs:
            assert batch["next_cursor"]["after_seq"] >= seqs[-1], "next_cursor behind the last entry"
        seen += seqs
        after = batch["next_cursor"]["after_seq"]
        if not batch["has_more"]:
            break
        assert pages <= 10, "feed paging does not terminate"
    assert seen == [r["project_seq"] for r in receipts], f"paging saw {seen}"


@isolation.PROJECT
@pytest.mark.fresh_project  # exact heads or feed contents: a shared project would race
@reads("AM-FEED-3", "head")
def test_cursor_at_the_head_returns_an_empty_batch(world: World) -> None:
    """Isolation: project: the feed's head."""
    project, receipts = _notes(world, 2)
    epoch = project.writer.setup_epoch()
    head = receipts[-1]["project_seq"]
    batch = expect_status(project.writer.changes(epoch, head), 200)
    assert batch["entries"] == [] and batch["has_more"] is False, f"batch at head {batch!r}"
    assert batch["next_cursor"] == {"project_epoch": epoch, "after_seq": head}, f"next_cursor {batch['next_cursor']!r}"


@isolation.PROJECT
@pytest.mark.requirement("AM-VIS-2")
def test_feeds_advance_across_hidden_entries(world: World) -> None:
    """Isolation: project: the feeds and the outbox."""
    project = world.project(writers=("sender", "receiver"), readers=("reader",))
    session = project.sender.setup_session()
    ref = project.sender.setup_handoff(project.receiver, session)
    sent = expect_status(project.sender.status(ref.handoff_id), 200)
    setup_ok(project.sender.put(world.new_id("note"), {"after": True}), "a visible change after the handoff")
    epoch = project.reader.setup_epoch()
    mailbox = expect_status(project.sender.mailbox("outbox"), 200)["assignments"]
    handoff_seq = next(e["project_seq"] for e in mailbox if e["record"]["handoff_id"] == ref.handoff_id)
    assert sent["revision"] == 1, f"send receipt revision {sent['revision']!r}"
    for materialized in (False, True):
        batch = expect_status(project.reader.changes(epoch, handoff_seq - 1, 1, materialized=materialized), 200)
        assert batch["entries"] == [], f"the reader sees the hidden handoff change: {batch['entries']!r}"
        assert batch["next_cursor"]["after_seq"] == handoff_seq, (
            f"next_cursor must advance past the hidden seq {handoff_seq}: {batch['next_cursor']!r}")
        assert batch["has_more"] is True, "a visible change follows, so has_more must be true"


@isolation.PROJECT
@pytest.mark.fresh_project
@pytest.mark.requirement("AM-SNAP-1")
def test_snapshot_head_matches_a_full_feed_pull(world: World) -> None:
    """Isolation: project: the snapshot and the whole feed."""
    project = world.project()
    writer = project.writer
    kept, gone = world.new_id("kept"), world.new_id("gone")
    setup_ok(writer.put(kept, {"k": 1}), "put kept")
    setup_ok(writer.put(gone, {"g": 1}), "put gone")
    last = expect_receipt(writer.delete(gone, expected_revision=1))
    snapshot = expect_status(writer.snapshot(), 200)
    assert snapshot["at_seq"] == last["project_seq"], f"snapshot at_seq {snapshot['at_seq']} != head {last['project_seq']}"
    states = {r["resource"]["id"]: r["state"] for r in snapshot["resources"]}
    assert states.get(gone) == {"state": "deleted"}, "the snapshot must include the tombstone"
    assert states.get(kept) == {"state": "present", "body": {"k": 1}}, f"snapshot state of {kept}: {states.get(kept)!r}"
    after = 0
    epoch = snapshot["project_epoch"]
    for _ in range(100):
        batch = expect_status(writer.changes(epoch, after, 1000), 200)
        after = batch["next_cursor"]["after_seq"]
        if not batch["has_more"]:
            break
    assert after == snapshot["at_seq"], f"a full pull ends at {after}, the snapshot head is {snapshot['at_seq']}"
