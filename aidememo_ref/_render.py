"""Answer bodies, byte for byte as upstream's serde structs serialize them.

Field order is each struct's declaration order (wire spec §1); stored canonical bodies are
embedded as they are, never parsed and re-encoded; floats use serde's format. Pure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from json.encoder import encode_basestring as _quote  # json.dumps(str, ensure_ascii=False)
from typing import TypeAlias, cast

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
    # The exact types first: answers are mostly small dicts of str and int.
    kind = type(value)
    if kind is str:
        return _quote(cast(str, value))
    if kind is int:
        return int.__repr__(cast(int, value))
    if kind is dict:
        return "{" + ",".join([f"{_quote(k)}:{dumps(v)}" for k, v in cast(dict[str, Body], value).items()]) + "}"
    if kind is Raw:
        return cast(Raw, value).text
    if value is None:
        return "null"
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join([f"{_quote(k)}:{dumps(v)}" for k, v in value.items()]) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join([dumps(v) for v in value]) + "]"
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


def _resource(m: Membership, kind: str, resource_id: str, revision: int, body: str | None,
              scope: str | None = None) -> str:
    """A ``CanonicalResource``; ``scope``: the member's scope already rendered (a listing
    renders it once for all its resources)."""
    state = '{"state":"deleted"}' if body is None else f'{{"state":"present","body":{body}}}'
    return (f'{{"scope":{_scope(m) if scope is None else scope},"resource":{{"kind":{_quote(kind)},'
            f'"id":{_quote(resource_id)}}},"revision":{revision},"state":{state}}}')


def resource(m: Membership, r: Resource) -> str:
    """A ``CanonicalResource`` (resource route, snapshots)."""
    return _resource(m, r.kind, r.resource_id, r.revision, r.body)


def snapshot(m: Membership, epoch: str, at_seq: int, resources: list[Resource]) -> str:
    scope = _scope(m)
    listed = ",".join([_resource(m, r.kind, r.resource_id, r.revision, r.body, scope) for r in resources])
    return f'{{"scope":{scope},"project_epoch":{_quote(epoch)},"at_seq":{int(at_seq)},"resources":[{listed}]}}'


@lru_cache(maxsize=4096)
def _in_order(body: str) -> str:
    """A stored handoff body as status and mailbox answers show it (declaration order). Bodies
    are immutable strings and the same few are asked for again and again; a damaged body raises
    every time (errors are not cached)."""
    return Handoff.from_json(body).in_order()


def status(revision: int, body: str) -> str:
    """The typed status answer of a handoff whose stored canonical body is ``body``."""
    return f'{{"revision":{revision},"record":{_in_order(body)}}}'


_DELETE, _UPSERT = _quote("delete"), _quote("upsert")  # a change's operation, as ``Change.operation`` names it


def _change(head: str, c: Change) -> str:
    # Written out rather than through ``dumps``: feeds are the longest answers the reference
    # renders, and every field here is a str or an int. ``head``: the fields every entry of a
    # feed shares, rendered once.
    return (f'{head}{int(c.seq)},"resource":{{"kind":{_quote(c.kind)},"id":{_quote(c.resource_id)}}},'
            f'"operation":{_DELETE if c.body is None else _UPSERT},"revision":{int(c.revision)},'
            f'"actor_id":{_quote(c.actor_id)},"committed_at_ms":{int(c.committed_at_ms)}}}')


def feed(m: Membership, cursor_epoch: str, after_seq: int, page: FeedPage) -> str:
    head = (f'{{"tenant_id":{_quote(m.tenant_id)},"project_id":{_quote(m.project_id)},'
            f'"project_epoch":{_quote(page.epoch)},"seq":')
    scope = _scope(m)
    entries: list[str] = []
    for entry in page.entries:
        c = entry.change
        if entry.materialized:
            entries.append(f'{{"change":{_change(head, c)},'
                           f'"resource":{_resource(m, c.kind, c.resource_id, c.revision, c.body, scope)}}}')
        else:
            entries.append(_change(head, c))
    return (f'{{"scope":{scope},"cursor":{{"project_epoch":{_quote(cursor_epoch)},"after_seq":{int(after_seq)}}},'
            f'"entries":[{",".join(entries)}],'
            f'"next_cursor":{{"project_epoch":{_quote(page.epoch)},"after_seq":{int(page.next_seq)}}},'
            f'"has_more":{"true" if page.has_more else "false"}}}')


def mailbox(page: list[MailboxRow], next_before_seq: int | None) -> str:
    assignments = ",".join([f'{{"project_seq":{int(row.project_seq)},"revision":{int(row.revision)},'
                            f'"record":{_in_order(row.body)}}}' for row in page])
    after = "null" if next_before_seq is None else int(next_before_seq)
    return f'{{"assignments":[{assignments}],"next_before_seq":{after}}}'


def search(epoch: str, index_seq: int, hits: list[SearchHit]) -> str:
    results: list[Body] = [
        {"fact_id": h.fact.fact_id, "session_id": h.fact.session_id, "source_id": h.fact.source_id,
         "actor_id": h.fact.actor_id, "content": h.fact.content, "score": h.score, "lexical_score": h.score}
        for h in hits
    ]
    return dumps({"project_epoch": epoch, "index_seq": index_seq, "mode": "lexical", "semantic_model": None,
                  "results": results})
