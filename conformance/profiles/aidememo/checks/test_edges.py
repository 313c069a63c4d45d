"""Defaults and maximums at their edges (issue 35): page sizes, limits and the query's byte limit
at, below and above each edge, and a last page that hands out no next cursor.

The refusals above a maximum are AM-MBOX-2, AM-FEED-1 and AM-SEARCH-2; here the edge itself is
accepted, a missing limit takes the documented default, and a page that ends exactly at the last
entry says so.

PYTEST_DONT_REWRITE: every assertion states its own evidence, so pytest's rewriting (redone on every
run without cached bytecode) would add nothing to a verdict.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo import isolation
from conformance.profiles.aidememo.actors import Actor, Project, setup_ok
from conformance.profiles.aidememo.expect import expect_error, expect_receipt, expect_status
from conformance.profiles.aidememo.world import World

MAILBOX_DEFAULT, MAILBOX_MAX = 20, 100
FEED_DEFAULT, FEED_MAX = 100, 10_000
SEARCH_DEFAULT, SEARCH_MAX, QUERY_BYTES = 20, 100, 4096
I64_MAX = (1 << 63) - 1


def _handoffs(project: Project, count: int) -> list[str]:
    """``count`` handoffs from the sender to the receiver, oldest first."""
    session_id = project.sender.setup_session()
    return [project.sender.setup_handoff(project.receiver, session_id).handoff_id for _ in range(count)]


def _inbox(receiver: Actor, **params: Any) -> dict[str, Any]:
    page = expect_status(receiver.mailbox("inbox", **params), 200)
    assert isinstance(page, dict) and isinstance(page.get("assignments"), list), f"inbox answered {page!r}"
    return page


# -- mailboxes ----------------------------------------------------------------------------------
@isolation.ACTORS
@pytest.mark.fresh_project  # exact mailbox contents: fixed identities keep earlier runs' handoffs
@reads("AM-EDGE-1", "limits")
def test_mailbox_limits_of_one_and_of_the_maximum_are_accepted(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = world.project(writers=("sender", "receiver"))
    sent = _handoffs(project, 2)
    one = _inbox(project.receiver, limit=1)
    assert [e["record"]["handoff_id"] for e in one["assignments"]] == [sent[-1]], f"limit 1 answered {one!r}"
    assert one["next_before_seq"] == one["assignments"][0]["project_seq"], "limit 1 of 2 must offer the next page"
    most = _inbox(project.receiver, limit=MAILBOX_MAX)
    assert len(most["assignments"]) == 2 and most["next_before_seq"] is None, f"limit {MAILBOX_MAX} answered {most!r}"


@isolation.ACTORS
@pytest.mark.fresh_project  # exact mailbox contents: fixed identities keep earlier runs' handoffs
@reads("AM-EDGE-1", "default")
def test_a_mailbox_page_holds_twenty_entries_by_default(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = world.project(writers=("sender", "receiver"))
    sent = _handoffs(project, MAILBOX_DEFAULT + 1)
    page = _inbox(project.receiver)
    ids = [e["record"]["handoff_id"] for e in page["assignments"]]
    assert ids == sent[:0:-1], f"without a limit the inbox of {len(sent)} listed {len(ids)}: {ids}"
    assert page["next_before_seq"] == page["assignments"][-1]["project_seq"], "the 21st handoff needs a next page"


@isolation.ACTORS
@pytest.mark.fresh_project  # exact mailbox contents: fixed identities keep earlier runs' handoffs
@reads("AM-EDGE-1", "last-page")
def test_a_mailbox_page_ending_at_the_last_entry_has_no_next_page(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = world.project(writers=("sender", "receiver"))
    _handoffs(project, 3)
    exact = _inbox(project.receiver, limit=3)
    assert len(exact["assignments"]) == 3 and exact["next_before_seq"] is None, (
        f"a page of exactly the 3 entries must end paging: next_before_seq {exact['next_before_seq']!r}")
    short = _inbox(project.receiver, limit=2)
    assert short["next_before_seq"] is not None, "a page of 2 of 3 entries must offer the next page"


@isolation.ACTORS
@pytest.mark.fresh_project  # exact mailbox contents: fixed identities keep earlier runs' handoffs
@reads("AM-EDGE-1", "before-seq")
def test_a_mailbox_before_seq_of_the_largest_i64_is_accepted(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    # Upstream's store converts before_seq to i64 (ERRATA 4): 2^63-1 is the largest cursor it takes.
    project = world.project(writers=("sender", "receiver"))
    sent = _handoffs(project, 2)
    page = _inbox(project.receiver, before_seq=I64_MAX)
    ids = [e["record"]["handoff_id"] for e in page["assignments"]]
    assert ids == sent[::-1] and page["next_before_seq"] is None, (
        f"before_seq {I64_MAX} listed {ids} (next {page['next_before_seq']!r}), expected {sent[::-1]}")


# -- change feeds ---------------------------------------------------------------------------------
def _notes(project: Project, count: int) -> list[int]:
    """The project_seq of ``count`` new notes, in order."""
    writer = project.writer
    return [setup_ok(writer.put(writer.new_id("note"), {"n": n}), f"put note {n}")["project_seq"] for n in range(count)]


@isolation.PROJECT
@pytest.mark.fresh_project  # exact feed contents: a shared project would race
@reads("AM-EDGE-2", "limit", "default")
def test_feed_pages_default_to_one_hundred_and_take_the_maximum(world: World) -> None:
    """Isolation: project: the change feed."""
    world.require("replica-feeds")
    project = world.project()
    seqs = _notes(project, FEED_DEFAULT + 1)
    writer, after = project.writer, seqs[0] - 1
    epoch = writer.setup_epoch()
    page = expect_status(writer.changes(epoch, after), 200)
    got = [e["seq"] for e in page["entries"]]
    assert got == seqs[:FEED_DEFAULT] and page["has_more"] is True, (
        f"without a limit a feed page of {len(seqs)} entries held {len(got)}, has_more {page['has_more']!r}")
    most = expect_status(writer.changes(epoch, after, FEED_MAX), 200)
    assert [e["seq"] for e in most["entries"]] == seqs and most["has_more"] is False, (
        f"limit {FEED_MAX} answered {len(most['entries'])} entries, has_more {most['has_more']!r}")
    one = expect_status(writer.changes(epoch, after, 1), 200)
    assert [e["seq"] for e in one["entries"]] == seqs[:1] and one["has_more"] is True, f"limit 1 answered {one!r}"


@isolation.PROJECT
@pytest.mark.fresh_project  # exact feed contents: a shared project would race
@reads("AM-EDGE-2", "last-page")
def test_a_feed_page_ending_at_the_head_has_no_more(world: World) -> None:
    """Isolation: project: the change feed."""
    world.require("replica-feeds")
    project = world.project()
    seqs = _notes(project, 3)
    writer = project.writer
    epoch = writer.setup_epoch()
    exact = expect_status(writer.changes(epoch, seqs[0] - 1, 3), 200)
    assert [e["seq"] for e in exact["entries"]] == seqs and exact["has_more"] is False, (
        f"a page of exactly the last 3 entries must end paging: has_more {exact['has_more']!r}")
    short = expect_status(writer.changes(epoch, seqs[0] - 1, 2), 200)
    assert short["has_more"] is True, "a page of 2 of 3 entries must say there is more"


# -- search ---------------------------------------------------------------------------------------
def _word(world: World) -> str:
    return "edge" + re.sub(r"[^a-z0-9]", "", world.new_id("w").lower())


@isolation.PROJECT
@reads("AM-EDGE-3", "limit", "default")
def test_search_answers_twenty_by_default_and_takes_the_maximum(world: World) -> None:
    """Isolation: project: search."""
    world.require("search")
    project = world.project()
    writer, word = project.writer, _word(world)
    session_id = writer.setup_session()
    for n in range(SEARCH_DEFAULT + 1):
        setup_ok(writer.create_fact(session_id, content=f"{word} fact number {n}"), f"create fact {n}")
    default = expect_status(writer.search(word, mode="lexical"), 200)
    assert len(default["results"]) == SEARCH_DEFAULT, (
        f"without a limit a search matching {SEARCH_DEFAULT + 1} facts answered {len(default['results'])} hits")
    most = expect_status(writer.search(word, mode="lexical", limit=SEARCH_MAX), 200)
    assert len(most["results"]) == SEARCH_DEFAULT + 1, f"limit {SEARCH_MAX} answered {len(most['results'])} hits"
    one = expect_status(writer.search(word, mode="lexical", limit=1), 200)
    assert len(one["results"]) == 1, f"limit 1 answered {len(one['results'])} hits"


@isolation.READS
@reads("AM-EDGE-3", "query-bytes")
@pytest.mark.parametrize(("q", "accepted"), [
    (" " + "q" * QUERY_BYTES + " ", True),
    ("é" * (QUERY_BYTES // 2), True),
    ("q" * (QUERY_BYTES + 1), False),
    ("é" * (QUERY_BYTES // 2) + "q", False),
], ids=["4096-ascii-padded", "4096-two-byte", "4097-ascii", "4097-two-byte"])
def test_the_query_byte_limit_is_exact(world: World, q: str, accepted: bool) -> None:
    """Isolation: reads: only searches, and writes nothing."""
    world.require("search")
    project = world.project()
    exchange = project.writer.search(q, mode="lexical")
    if accepted:
        body = expect_status(exchange, 200)
        assert isinstance(body, dict) and body.get("results") == [], f"a {len(q.strip().encode())}-byte query: {body!r}"
    else:
        expect_error(exchange, 400, "invalid_command")


@isolation.PROJECT
@reads("AM-EDGE-3", "query-one-byte")
def test_a_one_byte_query_is_accepted(world: World) -> None:
    """Isolation: project: search."""
    # Upstream: 1..=4096 bytes after trimming (wire §1.6); blank is refused (AM-SEARCH-2).
    world.require("search")
    project = world.project()
    writer = project.writer
    session_id = writer.setup_session()
    fact_id = setup_ok(writer.create_fact(session_id, content=f"{_word(world)} x marks the spot"), "create fact")
    for q in ("x", " x "):
        body = expect_status(writer.search(q, mode="lexical"), 200)
        found = [hit.get("fact_id") for hit in body.get("results", [])]
        assert found == [fact_id["resource"]["id"]], f"the one-byte query {q!r} found {found}"


# -- the project's size ----------------------------------------------------------------------------
SNAPSHOT_MAX = 10_000  # W §1.4: more resource rows than this, counted before visibility, answer 413


@isolation.PROJECT
@pytest.mark.fresh_project  # an exact count of the project's resources: nothing else may write there
@reads("AM-EDGE-5", "snapshot", "search")
def test_snapshots_and_searches_answer_up_to_ten_thousand_resources(world: World) -> None:
    """Isolation: project: the project's resource count. Claimed only (``large-projects``): 10,001
    writes, sent as one unrecorded set-up (``Transcript.unrecorded``) so the report holds them as one
    entry."""
    world.require("large-projects")
    world.require("replica-feeds")
    world.require("search")
    project = world.project()
    writer, prefix = project.writer, world.new_id("fill")
    with world.transcript.unrecorded(f"{SNAPSHOT_MAX} raw puts of custom.note {prefix}-0 .. {prefix}-{SNAPSHOT_MAX - 1}"):
        for n in range(SNAPSHOT_MAX):
            setup_ok(writer.put(f"{prefix}-{n}", {"n": n}), f"put note {n}")
    full = expect_status(writer.snapshot(), 200)
    assert len(full["resources"]) == SNAPSHOT_MAX, (
        f"a snapshot of {SNAPSHOT_MAX} resources listed {len(full['resources'])}")
    expect_status(writer.search("fill", mode="lexical"), 200)
    setup_ok(writer.put(f"{prefix}-{SNAPSHOT_MAX}", {"n": SNAPSHOT_MAX}), "put note 10001")
    expect_error(writer.snapshot(), 413, "snapshot_too_large")
    expect_error(writer.search("fill", mode="lexical"), 413, "snapshot_too_large")


# -- revisions ------------------------------------------------------------------------------------
LARGE_REVISION = 300  # past 256: CPython shares the objects of small ints, so an identity test passes below it


@isolation.SHARED
@pytest.mark.requirement("AM-EDGE-4")
def test_a_precondition_compares_large_revisions_by_value(world: World) -> None:
    """Isolation: shared: reads back only what it created under ids it minted."""
    project = world.project()
    writer, note = project.writer, world.new_id("note")
    setup_ok(writer.put(note, {"v": 1}), "put revision 1")
    for revision in range(1, LARGE_REVISION):  # every write names the current revision: each must commit
        expect_receipt(writer.put(note, {"v": revision + 1}, expected_revision=revision))
    for wrong in (LARGE_REVISION - 1, LARGE_REVISION + 1):
        expect_error(writer.put(note, {"v": 0}, expected_revision=wrong), 409, "stale_revision")
    receipt = expect_receipt(writer.put(note, {"v": "last"}, expected_revision=LARGE_REVISION))
    assert receipt["revision"] == LARGE_REVISION + 1, f"the write at revision {LARGE_REVISION} answered {receipt!r}"
