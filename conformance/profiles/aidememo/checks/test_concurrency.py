"""Races that one-request-at-a-time checks cannot see (capability ``concurrency``).

A commit allocates the next ``project_seq`` and writes its resource row, receipt and change-log
row atomically (W §2.3); from that follow three properties that only concurrent traffic can
break: a receipt names its own change-feed entry, one resource's revisions and ``project_seq``
rise together, and a read after a write's answer sees the write even while other writes are in
flight. Each check sends a few rounds of simultaneous commands (seconds, not minutes) and
states what it saw. The simulator (``aidememo-sim run``) explores the same races at length.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conformance.http import Exchange
from conformance.profiles.aidememo.actors import Actor, setup_ok
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.world import World
from conformance.profiles.aidememo.expect import expect_status
from conformance.race import race, race_lanes

ROUNDS = 6
# A stale read needs a write in flight at the very moment of the read: more tries than rounds.
READ_ROUNDS = 60
# Names other checks use too, so a shared world's writers serve these checks as well.
WRITERS = ("writer", "other", "sender", "receiver")


def _put(actor: Actor, note: str, payload: dict[str, Any]) -> Callable[[], Exchange]:
    return lambda: actor.put(note, payload)


def _feed_after(actor: Actor, epoch: str, after_seq: int) -> dict[int, dict[str, Any]]:
    entries: dict[int, dict[str, Any]] = {}
    while True:
        page = expect_status(actor.changes(epoch, after_seq, 10_000), 200)
        for entry in page["entries"]:
            entries[entry["seq"]] = entry
        if not page["has_more"]:
            return entries
        after_seq = page["next_cursor"]["after_seq"]


@isolation.PROJECT
@pytest.mark.capability("concurrency")
@pytest.mark.requirement("AM-RACE-1")
def test_each_concurrent_receipt_names_its_own_change_feed_entry(world: World) -> None:
    """Isolation: project: the change feed."""
    world.require("replica-feeds")
    project = world.project(writers=WRITERS)
    writers: list[Actor] = [getattr(project, name) for name in WRITERS]
    epoch = writers[0].setup_epoch()
    head = expect_status(writers[0].snapshot(), 200)["at_seq"]
    receipts = []
    for _ in range(ROUNDS):
        # One note per round, put by every writer at once: each receipt then names a revision as
        # well, so one that names another commit's entry shows in the receipts alone too (their
        # revisions and project_seq in two orders), which is what a reproduction can judge.
        note = world.new_id("note")
        answers = race([_put(w, note, {"by": w.name}) for w in writers])
        receipts += [(w, setup_ok(a, f"{w.name} put")) for w, a in zip(writers, answers)]
    feed = _feed_after(writers[0], epoch, head)
    for writer, receipt in receipts:
        entry = feed.get(receipt["project_seq"])
        assert entry is not None, f"no change-feed entry at the project_seq {receipt['project_seq']} of a receipt"
        said = (receipt["resource"], receipt["revision"], writer.actor_id, receipt["committed_at_ms"])
        shown = (entry["resource"], entry["revision"], entry["actor_id"], entry["committed_at_ms"])
        assert shown == said, (
            f"the receipt says project_seq {receipt['project_seq']} is {said}; the change feed's entry there is {shown}")


@isolation.SHARED
@pytest.mark.capability("concurrency")
@pytest.mark.requirement("AM-RACE-2")
def test_concurrent_commits_to_one_resource_take_revisions_in_project_seq_order(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=WRITERS)
    writers: list[Actor] = [getattr(project, name) for name in WRITERS]
    note = world.new_id("note")
    commits: list[tuple[int, int]] = []
    for round_ in range(ROUNDS):
        # No expected_revision: every put commits, each at the next revision of the one note.
        answers = race([_put(w, note, {"by": w.name, "round": round_}) for w in writers])
        commits += [(r["revision"], r["project_seq"]) for r in (setup_ok(a, "put") for a in answers)]
    commits.sort()
    revisions = [revision for revision, _ in commits]
    assert revisions == list(range(1, len(commits) + 1)), f"revisions of one resource: {revisions}"
    for (low_rev, low_seq), (high_rev, high_seq) in zip(commits, commits[1:]):
        assert low_seq < high_seq, (
            f"revision {high_rev} was committed at project_seq {high_seq}, before revision {low_rev} at {low_seq}")


@isolation.SHARED
@pytest.mark.capability("concurrency")
@pytest.mark.requirement("AM-RACE-3")
def test_a_read_after_a_write_sees_it_while_other_writes_are_in_flight(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project(writers=WRITERS)
    writer, other, *busy = [getattr(project, name) for name in WRITERS]
    note = world.new_id("note")
    prefixes = [world.new_id("busy") for _ in busy]
    for i in range(READ_ROUNDS):
        # Each round's write leaves with other writes, as on any busy server, and is read back by
        # the writer and another actor as soon as its answer came, while those may still be in
        # flight. One lane does the write and its reads in a row (a reproduction sends them so).
        def write_then_read(i: int = i) -> list[Exchange]:
            return [writer.put(note, {"i": i}), writer.resource("custom.note", note),
                    other.resource("custom.note", note)]

        def write_busy(actor: Actor, prefix: str, i: int = i) -> Callable[[], list[Exchange]]:
            return lambda: [actor.put(f"{prefix}-{i}", {"busy": True})]

        lanes = race_lanes([write_then_read, *(write_busy(a, p) for a, p in zip(busy, prefixes))])
        (put, *reads), *others = lanes
        for answers in others:
            setup_ok(answers[0], "a write in flight")
        revision = setup_ok(put, f"put {i}")["revision"]
        for reader, read in zip((writer, other), reads):  # the writer reading back, and another actor
            seen = expect_status(read, 200)["revision"]
            assert seen == revision, (
                f"{reader.name} read revision {seen} after the answer of the write of revision {revision} came")
