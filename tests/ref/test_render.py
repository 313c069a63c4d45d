"""Feed, snapshot, mailbox and status answers, written out field by field for speed, are byte for
byte what the generic encoder writes from the same fields in the same order; the generic
encoder's shortcuts for plain values are the standard library's output; a participant-scoped
body's visibility, and a handoff body's rendering, do not depend on having been asked before."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from aidememo_ref import _render, _visibility
from aidememo_ref._reads import FeedEntry, FeedPage
from aidememo_ref._records import Change, Handoff, Membership, Outcome, Resource, Role, Status
from aidememo_ref._store import MailboxRow

TEXT = st.text(max_size=12)  # any code point: quotes, backslashes, controls, non-ASCII
INTS = st.integers(min_value=0, max_value=2**63 - 1)
BODIES = st.none() | st.dictionaries(TEXT, TEXT, max_size=3).map(lambda d: json.dumps(d, ensure_ascii=False))
CHANGES = st.builds(Change, seq=INTS, kind=TEXT, resource_id=TEXT, revision=INTS, actor_id=TEXT,
                    committed_at_ms=INTS, body=BODIES)


def _generic(m: Membership, cursor_epoch: str, after_seq: int, page: FeedPage) -> str:
    """The feed as the generic encoder writes it (what ``_render.feed`` did before)."""
    entries: list[_render.Body] = []
    for entry in page.entries:
        c = entry.change
        change: dict[str, _render.Body] = {
            "tenant_id": m.tenant_id, "project_id": m.project_id, "project_epoch": page.epoch, "seq": c.seq,
            "resource": {"kind": c.kind, "id": c.resource_id}, "operation": c.operation, "revision": c.revision,
            "actor_id": c.actor_id, "committed_at_ms": c.committed_at_ms,
        }
        state: _render.Body = ({"state": "deleted"} if c.body is None
                               else {"state": "present", "body": _render.Raw(c.body)})
        resource: dict[str, _render.Body] = {
            "scope": {"tenant_id": m.tenant_id, "project_id": m.project_id},
            "resource": {"kind": c.kind, "id": c.resource_id}, "revision": c.revision, "state": state}
        entries.append({"change": change, "resource": resource} if entry.materialized else change)
    return _render.dumps({
        "scope": {"tenant_id": m.tenant_id, "project_id": m.project_id},
        "cursor": {"project_epoch": cursor_epoch, "after_seq": after_seq},
        "entries": entries,
        "next_cursor": {"project_epoch": page.epoch, "after_seq": page.next_seq},
        "has_more": page.has_more,
    })


@given(tenant=TEXT, project=TEXT, actor=TEXT, epoch=TEXT, cursor_epoch=TEXT, after=INTS, next_seq=INTS,
       has_more=st.booleans(), entries=st.lists(st.tuples(CHANGES, st.booleans()), max_size=4))
def test_feeds_render_as_the_generic_encoder_does(tenant: str, project: str, actor: str, epoch: str,
                                                   cursor_epoch: str, after: int, next_seq: int, has_more: bool,
                                                   entries: list[tuple[Change, bool]]) -> None:
    m = Membership(tenant_id=tenant, project_id=project, actor_id=actor, role=Role.WRITER, project_epoch=epoch)
    page = FeedPage(epoch=epoch, entries=[FeedEntry(change=c, materialized=mat) for c, mat in entries],
                    next_seq=next_seq, has_more=has_more)
    rendered = _render.feed(m, cursor_epoch, after, page)
    assert rendered == _generic(m, cursor_epoch, after, page)
    json.loads(rendered)  # and it is JSON


@given(from_actor=TEXT, to_actor=TEXT, asker=TEXT)
def test_visibility_is_the_same_asked_once_or_again(from_actor: str, to_actor: str, asker: str) -> None:
    body = json.dumps({"from_actor": from_actor, "to_actor": to_actor})
    want = asker in (from_actor, to_actor)
    assert _visibility.visible_to("handoff", body, asker) is want
    assert _visibility.visible_to("handoff", body, asker) is want  # answered from the cache
    assert _visibility.visible_to("handoff", "[1]", asker) is False
    assert _visibility.visible_to("handoff", None, asker) is False


PLAIN = st.recursive(st.none() | st.booleans() | st.integers() | TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
                     max_leaves=12)


@given(PLAIN)
def test_plain_values_encode_as_the_standard_library_does(value: object) -> None:
    assert _render.dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # type: ignore[arg-type]


RESOURCES = st.builds(Resource, kind=TEXT, resource_id=TEXT, revision=INTS, body=BODIES)


@given(tenant=TEXT, project=TEXT, epoch=TEXT, at_seq=INTS, resources=st.lists(RESOURCES, max_size=4))
def test_snapshots_render_as_the_generic_encoder_does(tenant: str, project: str, epoch: str, at_seq: int,
                                                      resources: list[Resource]) -> None:
    m = Membership(tenant_id=tenant, project_id=project, actor_id="a", role=Role.WRITER, project_epoch=epoch)
    scope: _render.Body = {"tenant_id": tenant, "project_id": project}
    generic = _render.dumps({"scope": scope, "project_epoch": epoch, "at_seq": at_seq, "resources": [
        {"scope": scope, "resource": {"kind": r.kind, "id": r.resource_id}, "revision": r.revision,
         "state": {"state": "deleted"} if r.body is None else {"state": "present", "body": _render.Raw(r.body)}}
        for r in resources]})
    assert _render.snapshot(m, epoch, at_seq, resources) == generic


OPT = st.none() | TEXT
HANDOFFS = st.builds(Handoff, handoff_id=TEXT, session_id=TEXT, source_id=OPT, from_actor=TEXT, to_actor=TEXT,
                     focus=OPT, done_when=OPT, context_id=OPT, status=st.sampled_from(Status), claim_id=OPT,
                     claim_heartbeat_at_ms=st.none() | INTS, claim_expires_at_ms=st.none() | INTS,
                     attempt_count=INTS, result_fact_id=OPT, outcome=st.none() | st.sampled_from(Outcome))


@given(rows=st.lists(st.tuples(INTS, INTS, HANDOFFS), max_size=4), next_before=st.none() | INTS)
def test_mailboxes_and_statuses_render_as_the_generic_encoder_does(rows: list[tuple[int, int, Handoff]],
                                                                   next_before: int | None) -> None:
    page = [MailboxRow(project_seq=seq, revision=rev, body=h.canonical()) for seq, rev, h in rows]
    generic = _render.dumps({"assignments": [
        {"project_seq": seq, "revision": rev, "record": _render.Raw(h.in_order())} for seq, rev, h in rows],
        "next_before_seq": next_before})
    for _ in range(2):  # the second time from the cache of rendered bodies
        assert _render.mailbox(page, next_before) == generic
        for seq, rev, h in rows:
            assert _render.status(rev, h.canonical()) == _render.dumps({"revision": rev, "record": _render.Raw(h.in_order())})
