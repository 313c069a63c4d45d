"""Feed answers, written out field by field for speed, are byte for byte what the generic encoder
writes from the same fields in the same order; a participant-scoped body's visibility does
not depend on having been asked before."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from aidememo_ref import _render, _visibility
from aidememo_ref._reads import FeedEntry, FeedPage
from aidememo_ref._records import Change, Membership, Role

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
