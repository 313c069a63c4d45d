"""Inbox and outbox: actor-relative, newest mutation first, paged by next_before_seq (wire §5.4).

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
from conformance.profiles.aidememo.expect import expect_error, expect_status


def _ids(page: dict[str, Any]) -> list[str]:
    return [entry["record"]["handoff_id"] for entry in page["assignments"]]


def _mailboxes(world: World) -> Project:
    """The sender and receiver a check judges (its own actors), and two bystanders, the process's
    shared actors, whose handoffs (``_bystander``) no mailbox of theirs may list: the check owns
    the others' handoffs its verdict depends on, so run alone it fails as it does beside other
    checks in a shared project."""
    return world.project(writers=("sender", "receiver", "third", "fourth"))


def _bystander(project: Project) -> str:
    """A handoff between the bystanders: in neither the sender's nor the receiver's mailboxes."""
    return project.third.setup_handoff(project.fourth).handoff_id


@isolation.actors("sender", "receiver")  # third, fourth: shared bystanders
@pytest.mark.fresh_project
@reads("AM-MBOX-1", "relative", "order")
def test_inbox_and_outbox_are_relative_to_the_token(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = _mailboxes(world)
    first = project.sender.setup_handoff(project.receiver)
    _bystander(project)
    second = project.sender.setup_handoff(project.receiver)
    _bystander(project)
    expected = [second.handoff_id, first.handoff_id]
    assert _ids(expect_status(project.receiver.mailbox("inbox"), 200)) == expected, "receiver inbox, newest first"
    assert _ids(expect_status(project.sender.mailbox("outbox"), 200)) == expected, "sender outbox, newest first"
    assert _ids(expect_status(project.sender.mailbox("inbox"), 200)) == [], "the sender's inbox must be empty"
    assert _ids(expect_status(project.receiver.mailbox("outbox"), 200)) == [], "the receiver's outbox must be empty"


@isolation.actors("sender", "receiver")  # third, fourth: shared bystanders
@pytest.mark.fresh_project
@reads("AM-MBOX-1", "paging")
def test_pages_follow_next_before_seq(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = _mailboxes(world)
    refs = []
    for _ in range(5):  # the bystanders' handoffs between the receiver's, where a leak would land on a page
        refs.append(project.sender.setup_handoff(project.receiver))
        _bystander(project)
    newest_first = [ref.handoff_id for ref in reversed(refs)]
    seen, before, pages = [], None, 0
    while True:
        params = {"limit": 2} if before is None else {"limit": 2, "before_seq": before}
        page = expect_status(project.receiver.mailbox("inbox", **params), 200)
        pages += 1
        assert len(page["assignments"]) <= 2, f"page exceeds limit 2: {len(page['assignments'])}"
        seen += _ids(page)
        before = page["next_before_seq"]
        if before is None:
            break
        assert before == page["assignments"][-1]["project_seq"], "next_before_seq is the last entry's project_seq"
        assert pages <= 5, "paging does not terminate"
    assert seen == newest_first, f"paging visited {seen}, expected {newest_first}"
    assert pages == 3, f"5 handoffs at limit 2 take 3 pages, took {pages}"


@isolation.actors("sender", "receiver")  # third, fourth: shared bystanders
@pytest.mark.fresh_project
@reads("AM-MBOX-1", "completed")
def test_completed_handoffs_hide_from_the_inbox_only(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = _mailboxes(world)
    receiver = project.receiver
    done = receiver.setup_accept(project.sender.setup_handoff(project.receiver))
    open_ref = project.sender.setup_handoff(project.receiver)
    _bystander(project)
    fact = receiver.setup_fact(done.session_id)
    setup_ok(receiver.return_result(done.handoff_id, done.revision, done.claim, fact), "complete")
    assert _ids(expect_status(receiver.mailbox("inbox"), 200)) == [open_ref.handoff_id], "inbox hides completed"
    both = _ids(expect_status(receiver.mailbox("inbox", include_completed=True), 200))
    assert sorted(both) == sorted([done.handoff_id, open_ref.handoff_id]), f"include_completed shows {both}"
    outbox = _ids(expect_status(project.sender.mailbox("outbox"), 200))
    assert done.handoff_id in outbox, "the outbox includes completed handoffs by default"


@isolation.READS
@reads("AM-MBOX-2", "range")
@pytest.mark.parametrize("limit", [0, 101])
@pytest.mark.parametrize("with_token", [
    pytest.param(True, id="token"), pytest.param(False, marks=reads("AM-MBOX-2", "unauthenticated"), id="no-token")])
def test_mailbox_limit_out_of_range_is_invalid(world: World, limit: int, with_token: bool) -> None:
    """Isolation: reads: only reads a mailbox, and writes nothing."""
    project = world.project()
    if with_token:
        exchange = project.writer.mailbox("inbox", limit=limit)
    else:
        exchange = world.wire.request(world.transcript, "GET", f"{project.writer.base}/handoffs",
                                              params={"box": "inbox", "limit": limit})
    expect_error(exchange, 400, "invalid_command")


@isolation.actors("sender", "receiver")  # third, fourth: shared bystanders
@pytest.mark.fresh_project
@reads("AM-MBOX-3", "entry", "top")
def test_a_transition_moves_the_handoff_to_the_top(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = _mailboxes(world)
    older = project.sender.setup_handoff(project.receiver)
    newer = project.sender.setup_handoff(project.receiver)
    accepted = project.receiver.setup_accept(older)
    _bystander(project)
    page = expect_status(project.receiver.mailbox("inbox"), 200)
    assert _ids(page) == [older.handoff_id, newer.handoff_id], f"accepted handoff must lead: {_ids(page)}"
    top = page["assignments"][0]
    assert top["revision"] == accepted.revision, f"entry revision {top['revision']} != {accepted.revision}"
    assert top["project_seq"] > page["assignments"][1]["project_seq"], "entries order by latest project_seq"
    assert top["record"]["status"] == "accepted", "entry carries the current record"


@isolation.actors("sender", "receiver")  # third, fourth: shared bystanders
@reads("AM-MBOX-3", "source")
def test_source_filter_is_exact(world: World) -> None:
    """Isolation: actors: its own actors' mailboxes."""
    project = _mailboxes(world)
    source = f"src:{world.new_id('alpha')}"  # this run's own: a kept database holds earlier runs' handoffs
    sourced = project.sender.setup_handoff(project.receiver, project.sender.setup_session(source))
    project.sender.setup_handoff(project.receiver, project.sender.setup_session(source + "bet"))  # a longer source
    project.third.setup_handoff(project.fourth, project.third.setup_session(source))
    ids = _ids(expect_status(project.receiver.mailbox("inbox", source_id=source), 200))
    assert ids == [sourced.handoff_id], f"source_id={source} lists {ids}, expected [{sourced.handoff_id}]"


@isolation.READS
@pytest.mark.requirement("AM-MBOX-4")
def test_huge_before_seq_is_refused(world: World) -> None:
    """Isolation: reads: only reads a mailbox, and writes nothing."""
    project = world.project()
    exchange = project.writer.mailbox("inbox", before_seq=2**63)
    if exchange.status == 500 and exchange.error_code() == "storage_failure":
        world.warn("before_seq 2^63 answered 500 storage_failure (upstream behaviour, ERRATA 4)")
        return
    expect_error(exchange, 400, "invalid_command")
