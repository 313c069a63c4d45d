"""Answer bodies, byte for byte as upstream's serde structs serialize them.

Field order is each struct's declaration order (wire spec §1); stored canonical bodies are
embedded as they are, never parsed and re-encoded; floats use serde's format. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.encoder import encode_basestring as _quote  # json.dumps(str, ensure_ascii=False)
from typing import TypeAlias

from aidememo_wire.canonical import format_float
from ._reads import FeedPage, SearchHit
from ._records import Change, Handoff, Membership, Resource
from ._store import MailboxRow

__all__ = ["Raw", "Body", "dumps", "error_body", "identity", "resource", "snapshot", "status", "feed", "mailbox",
           "search"]


@dataclass(frozen=True, slots=True)
class Raw:
    """Already-encoded JSON, embedded without re-encoding."""

    text: str


Body: TypeAlias = None | bool | int | float | str | Raw | list["Body"] | tuple["Body", ...] | dict[str, "Body"]


def dumps(value: Body) -> str:
    """Compact JSON in insertion order with serde's float format."""
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{_quote(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, float):
        return format_float(value)
    return json.dumps(value, ensure_ascii=False)


def error_body(code: str, message: str) -> str:
    return f'{{"error":{{"code":{_quote(code)},"message":{_quote(message)}}}}}'


def _scope(m: Membership) -> str:
    return f'{{"tenant_id":{_quote(m.tenant_id)},"project_id":{_quote(m.project_id)}}}'


def identity(m: Membership) -> str:
    return dumps({"tenant_id": m.tenant_id, "project_id": m.project_id, "project_epoch": m.project_epoch,
                  "actor_id": m.actor_id, "role": m.role.value})


def _resource(m: Membership, kind: str, resource_id: str, revision: int, body: str | None) -> str:
    state = '{"state":"deleted"}' if body is None else f'{{"state":"present","body":{body}}}'
    return (f'{{"scope":{_scope(m)},"resource":{{"kind":{_quote(kind)},"id":{_quote(resource_id)}}},'
            f'"revision":{revision},"state":{state}}}')


def resource(m: Membership, r: Resource) -> str:
    """A ``CanonicalResource`` (resource route, snapshots)."""
    return _resource(m, r.kind, r.resource_id, r.revision, r.body)


def snapshot(m: Membership, epoch: str, at_seq: int, resources: list[Resource]) -> str:
    return dumps({"scope": Raw(_scope(m)), "project_epoch": epoch, "at_seq": at_seq,
                  "resources": [Raw(resource(m, r)) for r in resources]})


def status(revision: int, record: Handoff) -> str:
    return f'{{"revision":{revision},"record":{record.in_order()}}}'


def _change(m: Membership, epoch: str, c: Change) -> str:
    # Written out rather than through ``dumps``: feeds are the longest answers the reference
    # renders, and every field here is a str or an int.
    return (f'{{"tenant_id":{_quote(m.tenant_id)},"project_id":{_quote(m.project_id)},'
            f'"project_epoch":{_quote(epoch)},"seq":{int(c.seq)},'
            f'"resource":{{"kind":{_quote(c.kind)},"id":{_quote(c.resource_id)}}},'
            f'"operation":{_quote(c.operation)},"revision":{int(c.revision)},"actor_id":{_quote(c.actor_id)},'
            f'"committed_at_ms":{int(c.committed_at_ms)}}}')


def feed(m: Membership, cursor_epoch: str, after_seq: int, page: FeedPage) -> str:
    entries: list[Body] = []
    for entry in page.entries:
        c = entry.change
        change = _change(m, page.epoch, c)
        if entry.materialized:
            entries.append(Raw(f'{{"change":{change},'
                               f'"resource":{_resource(m, c.kind, c.resource_id, c.revision, c.body)}}}'))
        else:
            entries.append(Raw(change))
    return dumps({
        "scope": Raw(_scope(m)),
        "cursor": {"project_epoch": cursor_epoch, "after_seq": after_seq},
        "entries": entries,
        "next_cursor": {"project_epoch": page.epoch, "after_seq": page.next_seq},
        "has_more": page.has_more,
    })


def mailbox(page: list[MailboxRow], next_before_seq: int | None) -> str:
    assignments: list[Body] = [
        {"project_seq": row.project_seq, "revision": row.revision, "record": Raw(Handoff.from_json(row.body).in_order())}
        for row in page
    ]
    return dumps({"assignments": assignments, "next_before_seq": next_before_seq})


def search(epoch: str, index_seq: int, hits: list[SearchHit]) -> str:
    results: list[Body] = [
        {"fact_id": h.fact.fact_id, "session_id": h.fact.session_id, "source_id": h.fact.source_id,
         "actor_id": h.fact.actor_id, "content": h.fact.content, "score": h.score, "lexical_score": h.score}
        for h in hits
    ]
    return dumps({"project_epoch": epoch, "index_seq": index_seq, "mode": "lexical", "semantic_model": None,
                  "results": results})
