"""Broken XMemo references, one rule each: the conformance profile must kill every one.

Each entry is ``name: (factory, requirement ids it must fail)``; a factory takes the database
path, as ``--embedded-factory mutants:NAME`` calls it. Each breaks one rule through a public seam
(``Rules``, ``store_class``, ``new_id``), one small subclass, or one method whose answer is
changed (``_after``), and nothing else.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from xmemo_ref import Rules, XMemoReference
from xmemo_ref import _boundary, _recall, _writes
from xmemo_ref._errors import RequestError
from xmemo_ref._records import Boundary, Caller, Kind, Memory, MemoryType, Relation, Trust
from xmemo_ref._service import XMemoService
from xmemo_ref._sqlite import SQLiteXMemoStore
from xmemo_ref._store import ReadFilter


def _ref(database: str | Path, **kwargs: Any) -> XMemoReference:
    return XMemoReference(database, **kwargs)


def _served_by(database: str, service_class: type[XMemoService]) -> XMemoReference:
    """The reference answering through ``service_class`` (a subclass breaking one method)."""
    reference = _ref(database)
    reference.service = service_class(reference.store, reference.clock)
    return reference


def _after(database: str, where: Callable[[XMemoReference], object], name: str,
           change: Callable[..., Any]) -> XMemoReference:
    """The reference whose ``where(reference).<name>(*args)`` answers ``change(answer, *args)``."""
    reference = _ref(database)
    owner = where(reference)
    original = getattr(owner, name)
    setattr(owner, name, lambda *args, **kwargs: change(original(*args, **kwargs), *args))
    return reference


def _ops(reference: XMemoReference) -> object:
    return reference.service.ops


def _mcp(reference: XMemoReference) -> object:
    return reference.service.mcp


def _relabelled(edit: Callable[[Caller, Boundary], Boundary]) -> Rules:
    """Rules whose boundary object is the reference's, then ``edit``ed."""
    return Rules(boundary=lambda caller, memory: edit(caller, _boundary.boundary(caller, memory)))


def _as(bound: Boundary, relation: Relation) -> Boundary:
    return replace(bound, relation=relation, ownership=relation)


def _deciding(edit: Callable[[Any], Any]) -> Rules:
    """Rules that ``edit`` a write before the reference's decision table sees it."""
    return Rules(decide=lambda write, existing, caller, now_ms, new_id:
                 _writes.decide(edit(write), existing, caller, now_ms, new_id))


# -- the agent boundary -----------------------------------------------------------------------------

def relation_wrong(database: str) -> XMemoReference:
    """Calls the same agent on another installation ``self``."""
    return _ref(database, rules=_relabelled(
        lambda caller, b: _as(b, Relation.SELF) if b.relation is Relation.SAME_AGENT_OTHER_INSTANCE else b))


def trust_claimed(database: str) -> XMemoReference:
    """Claims token_bound for a header-asserted agent id."""
    return _ref(database, rules=_relabelled(lambda caller, b: replace(b, current_agent_trust=Trust.TOKEN_BOUND)))


def others_are_self(database: str) -> XMemoReference:
    """Labels another agent's memory ``self`` (the label then claims what the caller did not write)."""
    return _ref(database, rules=_relabelled(
        lambda caller, b: _as(b, Relation.SELF)
        if b.relation is Relation.OTHER_AGENT and caller.agent_id is not None else b))


def self_unrecognised(database: str) -> XMemoReference:
    """Never says ``self``: the caller's own memory from the same installation is another instance."""
    return _ref(database, rules=_relabelled(
        lambda caller, b: _as(b, Relation.SAME_AGENT_OTHER_INSTANCE) if b.relation is Relation.SELF else b))


def binding_unreported(database: str) -> XMemoReference:
    """Says ``client_asserted`` although the agent id comes from the credential."""
    return _ref(database, rules=_relabelled(lambda caller, b: replace(b, current_agent_trust=Trust.CLIENT_ASSERTED)))


def authority_claimed(database: str) -> XMemoReference:
    """Claims the label is enforced (``boundary_authority: enforced``) on the caller's own memories."""
    return _ref(database, rules=_relabelled(
        lambda caller, b: replace(b, boundary_authority="enforced") if b.relation is Relation.SELF else b))


def boundary_unexplained(database: str) -> XMemoReference:
    """Sends the boundary object without its ``explanation``."""
    def change(item: dict[str, Any], *_: Any) -> dict[str, Any]:
        item["agent_boundary"].pop("explanation")
        return item

    return _after(database, _ops, "_item", change)


class _RawInstance(XMemoService):
    @staticmethod
    def _attribute(principal: Any, request: Any, agent_id: str | None, instance_id: str | None) -> Caller:
        from xmemo_ref._http import INSTANCE_HEADER, agent_header

        caller = XMemoService._attribute(principal, request, agent_id, instance_id)
        return replace(caller, agent_instance_id_hash=instance_id or agent_header(request.headers, INSTANCE_HEADER))


def raw_instance_echoed(database: str) -> XMemoReference:
    """Stores (and so echoes) the raw installation id where its hash belongs."""
    return _served_by(database, _RawInstance)


class _HeaderWins(XMemoService):
    @staticmethod
    def _attribute(principal: Any, request: Any, agent_id: str | None, instance_id: str | None) -> Caller:
        from xmemo_ref._http import AGENT_HEADER, agent_header

        caller = XMemoService._attribute(principal, request, agent_id, instance_id)
        asserted = agent_id or agent_header(request.headers, AGENT_HEADER)
        return replace(caller, agent_id=asserted or caller.agent_id, ignored_agent_id=None) if asserted else caller


def header_overrides_binding(database: str) -> XMemoReference:
    """Lets an agent header replace the credential's bound agent (trust still says token_bound)."""
    return _served_by(database, _HeaderWins)


# -- isolation --------------------------------------------------------------------------------------

class _OwnerLeak(SQLiteXMemoStore):
    def visible(self, tenant: Any, filters: ReadFilter, now_ms: int) -> list[Memory]:
        self._reading()
        rows: list[Memory] = []
        for other in self._state.tenants():
            rows += super().visible(other.tenant, filters, now_ms)
        return rows

    def ranked(self, tenant: Any, filters: ReadFilter, now_ms: int, query: str, prefer_working: bool,
               consume: Any) -> Any:
        return consume(_recall.rank(self.visible(tenant, filters, now_ms), query, prefer_working))


def owner_leak(database: str) -> XMemoReference:
    """Recall and search read every owner's memories."""
    return _ref(database, store_class=_OwnerLeak)


class _ScopeLeak(SQLiteXMemoStore):
    def visible(self, tenant: Any, filters: ReadFilter, now_ms: int) -> list[Memory]:
        return super().visible(tenant, replace(filters, scope=None), now_ms)

    def ranked(self, tenant: Any, filters: ReadFilter, *args: Any) -> Any:
        return super().ranked(tenant, replace(filters, scope=None), *args)


def scope_leak(database: str) -> XMemoReference:
    """Ignores the requested scope."""
    return _ref(database, store_class=_ScopeLeak)


def header_filters(database: str) -> XMemoReference:
    """Shows a caller that asserts an agent id only that agent's memories (the header decides visibility)."""
    reference = _ref(database)
    ops = reference.service.ops
    ranked, visible = ops._ranked, ops._visible

    def own(caller: Caller, rows: Any) -> Any:
        return rows if caller.agent_id is None else [r for r in rows
                                                     if getattr(r, "memory", r).agent_id == caller.agent_id]

    ops._visible = lambda caller, filters: own(caller, visible(caller, filters))  # type: ignore[method-assign]
    ops._ranked = lambda caller, filters, query, prefer, consume: ranked(  # type: ignore[method-assign]
        caller, filters, query, prefer, lambda rows: consume(own(caller, rows)))
    return reference


# -- recall -----------------------------------------------------------------------------------------

def _one_more(ranked: Any, *, max_items: int, max_tokens: int, boundary_of: Any) -> Any:
    return _recall.pack(ranked, max_items=max_items + 1, max_tokens=max_tokens, boundary_of=boundary_of)


def items_over(database: str) -> XMemoReference:
    """Packs one item more than max_items."""
    return _ref(database, rules=Rules(pack=_one_more))


def _thrice(ranked: Any, *, max_items: int, max_tokens: int, boundary_of: Any) -> Any:
    return _recall.pack(ranked, max_items=max_items, max_tokens=max_tokens * 3, boundary_of=boundary_of)


def tokens_over(database: str) -> XMemoReference:
    """Counts a token as twelve bytes (three times the documented estimate)."""
    return _ref(database, rules=Rules(pack=_thrice))


def _word_filter(memories: Any, query: str, prefer_working: bool) -> list[_recall.Ranked]:
    words = set(query.lower().replace(",", " ").split())
    kept = [m for m in memories if words & set(m.content.lower().rstrip(".").split())]
    return _recall.rank(kept, query, prefer_working)


def word_filter(database: str) -> XMemoReference:
    """Keeps only memories that share a word with the query."""
    return _ref(database, rules=Rules(rank=_word_filter))


def content_kept(database: str) -> XMemoReference:
    """Leaves each item's content in the recall packet."""
    reference = _ref(database)
    ops = reference.service.ops
    original = ops._packet_json
    ops._packet_json = lambda *args, **kwargs: original(*args, **{**kwargs, "content": True})  # type: ignore[method-assign]
    return reference


class _LiteralWildcards(XMemoService):
    def _recall(self, request: Any) -> Any:
        from xmemo_ref._decode import decode_recall, parse_body
        from xmemo_ref._http import json_response

        caller = self._caller(request)
        self.ops.require(caller, "memory:read")
        body = parse_body(request.body)
        decoded = decode_recall(body)
        if isinstance(body, dict) and body.get("bucket") == "%":
            decoded = replace(decoded, filters=replace(decoded.filters, bucket="%"))
        return json_response(self.ops.recall(caller, decoded))


def wildcards_literal(database: str) -> XMemoReference:
    """Reads ``bucket: "%"`` as a bucket named ``%`` instead of no filter."""
    return _served_by(database, _LiteralWildcards)


def recall_logged(database: str) -> XMemoReference:
    """Records every recall as a timeline event, so a repeated recall answers more than the first."""
    from xmemo_ref._decode import decode_event

    def change(answer: dict[str, Any], caller: Caller, request: Any) -> dict[str, Any]:
        event = decode_event({"content": f"recalled: {request.query}", "scope": request.filters.scope})
        reference.service.ops.write(caller, event, route="timeline_event")
        return answer

    reference = _after(database, _ops, "recall", change)
    return reference


def heading_missing(database: str) -> XMemoReference:
    """Answers the MCP recall_context text without its ``### XMemo Context`` heading."""
    from xmemo_ref._mcp import CONTEXT_HEADING

    return _after(database, _mcp, "_run", lambda text, name, *_: text.removeprefix(CONTEXT_HEADING + "\n")
                  if name == "recall_context" else text)


# -- capture ----------------------------------------------------------------------------------------

class _NoReplay(SQLiteXMemoStore):
    def _replay(self, memories: Any, claim: Any) -> str | None:
        return None


def replay_stored_twice(database: str) -> XMemoReference:
    """Executes an idempotent replay again instead of answering the stored answer."""
    return _ref(database, store_class=_NoReplay)


def semantic_duplicates(database: str) -> XMemoReference:
    """Writes a new memory for a repeated semantic_key with the same content."""
    return _ref(database, rules=_deciding(
        lambda w: w._replace(semantic_key=None, dedupe=False) if isinstance(w, _writes.Remember) else w))


def _state_appends(write: Any, existing: Any, caller: Caller, now_ms: int, new_id: str) -> Any:
    decision = _writes.decide(write, existing, caller, now_ms, new_id)
    if isinstance(write, _writes.UpdateState) and decision.outcome is _writes.Outcome.UPDATED:
        fresh = decision.memory._replace(id=new_id, kind=Kind.EVENT, state_key=None)
        return _writes.WriteDecision(outcome=_writes.Outcome.CREATED, memory=fresh)
    return decision


def _state_unversioned(write: Any, existing: Any, caller: Caller, now_ms: int, new_id: str) -> Any:
    decision = _writes.decide(write, existing, caller, now_ms, new_id)
    if isinstance(write, _writes.UpdateState) and decision.outcome is _writes.Outcome.UPDATED:
        return decision._replace(memory=decision.memory._replace(version=decision.memory.version - 1))
    return decision


def state_version_stuck(database: str) -> XMemoReference:
    """Updates the state slot in place (same id, one memory) but never advances its version."""
    return _ref(database, rules=Rules(decide=_state_unversioned))


def state_appends(database: str) -> XMemoReference:
    """Appends a new memory for every update_state instead of versioning the slot."""
    return _ref(database, rules=Rules(decide=_state_appends))


def _dedupe_events(write: Any, existing: Any, caller: Caller, now_ms: int, new_id: str) -> Any:
    if isinstance(write, _writes.RecordEvent):
        twin = next((m for m in existing._tenant.memories.values()
                     if m.kind is Kind.EVENT and m.content == write.content), None)
        if twin is not None:
            return _writes.WriteDecision(outcome=_writes.Outcome.UNCHANGED, memory=twin)
    return _writes.decide(write, existing, caller, now_ms, new_id)


def events_deduped(database: str) -> XMemoReference:
    """Folds an identical timeline event into the first one."""
    return _ref(database, rules=Rules(decide=_dedupe_events))


def empty_accepted(database: str) -> XMemoReference:
    """Stores a remember whose content is blank."""
    from xmemo_ref import _decode

    reference = _ref(database)
    original = _decode.decode_remember

    def lenient(body: object) -> Any:
        if isinstance(body, dict) and isinstance(body.get("content"), str) and not body["content"].strip():
            return original({**body, "content": "placeholder"})._replace(content=body["content"])
        return original(body)

    service = reference.service
    service._remember = lambda request: service._write(request, "remember", lenient)  # type: ignore[method-assign]
    service._routes[("v1", "remember")]["POST"] = service._remember
    return reference


def short_ids(database: str) -> XMemoReference:
    """Numbers memories (``memory-1``, ...) instead of giving them UUIDs."""
    numbers = itertools.count(1)
    return _ref(database, new_id=lambda: f"memory-{next(numbers)}")


def status_dropped(database: str) -> XMemoReference:
    """Ignores ``status`` on remember (a task's started/completed reads back as active)."""
    return _ref(database, rules=_deciding(
        lambda w: w._replace(status=_writes.DEFAULT_STATUS) if isinstance(w, _writes.Remember) else w))


def semantic_as_episodic(database: str) -> XMemoReference:
    """Stores decisions and bug fixes (semantic) as episodic memories."""
    return _ref(database, rules=_deciding(
        lambda w: w._replace(memory_type=MemoryType.EPISODIC)
        if isinstance(w, _writes.Remember) and w.memory_type is MemoryType.SEMANTIC else w))


# -- credentials and transport ---------------------------------------------------------------------

def _refusal_swapped(database: str, status: int, instead: Callable[[], RequestError]) -> XMemoReference:
    """The reference answering ``instead()`` where it refuses a credential with ``status``."""
    reference = _ref(database)
    service = reference.service
    original = service._principal

    def principal(request: Any) -> Any:
        try:
            return original(request)
        except RequestError as error:
            if error.status == status:
                raise instead() from None
            raise

    service._principal = principal  # type: ignore[method-assign]
    return reference


def unknown_key_401(database: str) -> XMemoReference:
    """Answers 401 (not 403) to a key it does not know."""
    return _refusal_swapped(database, 403, RequestError.unauthenticated)


def anonymous_403(database: str) -> XMemoReference:
    """Answers 403 (not 401) to a request that sends no credential."""
    return _refusal_swapped(database, 401, RequestError.invalid_key)


def reader_writes(database: str) -> XMemoReference:
    """Lets a key without memory:write write."""
    reference = _ref(database)
    ops = reference.service.ops
    original = ops.require

    def require(caller: Caller, scope: str) -> None:
        if scope != "memory:write":
            original(caller, scope)

    ops.require = require  # type: ignore[method-assign]
    return reference


class _NoAudit(XMemoService):
    def handle(self, method: str, target: Any, headers: Any, body: bytes = b"") -> Any:
        from aidememo_ref._service import Response

        answer = super().handle(method, target, headers, body)
        return Response(answer.status, tuple(h for h in answer.headers if h[0] != "X-XMemo-Audit-ID"), answer.body)


def no_audit_id(database: str) -> XMemoReference:
    """Sends no X-XMemo-Audit-ID."""
    return _served_by(database, _NoAudit)


class _NoMcpAudit(XMemoService):
    def handle(self, method: str, target: Any, headers: Any, body: bytes = b"") -> Any:
        from aidememo_ref._service import Response

        answer = super().handle(method, target, headers, body)
        path = (target.decode("latin-1") if isinstance(target, bytes) else target).split("?")[0]
        if path.rstrip("/").endswith("/mcp"):
            return Response(answer.status, tuple(h for h in answer.headers if h[0] != "X-XMemo-Audit-ID"), answer.body)
        return answer


def no_mcp_audit_id(database: str) -> XMemoReference:
    """Sends X-XMemo-Audit-ID on every REST answer but none on the MCP endpoint's."""
    return _served_by(database, _NoMcpAudit)


class _NoBearer(XMemoService):
    def handle(self, method: str, target: Any, headers: Any, body: bytes = b"") -> Any:
        kept = [(k, v) for k, v in headers if k.lower() not in (b"authorization", "authorization")]
        return super().handle(method, target, kept, body)


def bearer_ignored(database: str) -> XMemoReference:
    """Accepts only X-API-Key: an Authorization: Bearer key counts as no credential."""
    return _served_by(database, _NoBearer)


def health_needs_key(database: str) -> XMemoReference:
    """Refuses /health without a credential."""
    reference = _ref(database)
    service = reference.service

    def health(request: Any) -> Any:
        service._caller(request)
        return service._health(request)

    service._routes[("health",)]["GET"] = health
    return reference


class _NoAlias(XMemoService):
    def _dispatch(self, method: str, path: str, query: str, headers: Any, body: bytes, deferred: bool = True) -> Any:
        from xmemo_ref._http import json_response

        if path.startswith("/api/"):
            return json_response({"detail": "Not Found"}, 404)
        return super()._dispatch(method, path, query, headers, body, deferred)


def no_api_alias(database: str) -> XMemoReference:
    """Serves /v1/ only: MAF's writes under /api/v1/ answer 404."""
    return _served_by(database, _NoAlias)


class _PlainInvalid(XMemoService):
    def _dispatch(self, method: str, path: str, query: str, headers: Any, body: bytes, deferred: bool = True) -> Any:
        from xmemo_ref._http import json_response

        answer = super()._dispatch(method, path, query, headers, body, deferred)
        return json_response({"detail": "Invalid request"}, 422) if answer.status == 422 else answer


def plain_422(database: str) -> XMemoReference:
    """Answers invalid input with a string detail instead of FastAPI's list of {loc, msg, type}."""
    return _served_by(database, _PlainInvalid)


def tool_renamed(database: str) -> XMemoReference:
    """Lists search_memory under another name (``search``) in tools/list."""
    return _after(database, _mcp, "_tool_entry",
                  lambda entry, name: {**entry, "name": "search"} if name == "search_memory" else entry)


def identity_scopes_joined(database: str) -> XMemoReference:
    """Writes get_mcp_identity's Scopes line as ``memory:read,memory:write`` (MAF splits on ", ")."""
    return _after(database, _ops, "identity_text", lambda text, caller: text.replace(", ", ","))


def project_scope_key_wrong(database: str) -> XMemoReference:
    """Names the project's scope ``project:<id>`` instead of ``tenant:project:<id>``."""
    def change(answer: dict[str, Any], caller: Caller, project_id: str, request: Any) -> dict[str, Any]:
        answer["project_scope"]["scope_key"] = f"project:{project_id}"
        return answer

    return _after(database, _ops, "project_context", change)


# name -> (factory, the requirement ids whose checks must fail; "ID:clause": a check reading that clause)
MUTANTS: dict[str, tuple[Callable[[str], XMemoReference], tuple[str, ...]]] = {
    "relation_wrong": (relation_wrong, ("XM-BND-3",)),
    "trust_claimed": (trust_claimed, ("XM-BND-5",)),
    "header_overrides_binding": (header_overrides_binding, ("XM-BND-8",)),
    "owner_leak": (owner_leak, ("XM-ISO-1",)),
    "scope_leak": (scope_leak, ("XM-ISO-2",)),
    "items_over": (items_over, ("XM-RECALL-1",)),
    "tokens_over": (tokens_over, ("XM-RECALL-2",)),
    "word_filter": (word_filter, ("XM-RECALL-4", "XM-FLOW-6")),
    "content_kept": (content_kept, ("XM-RECALL-3",)),
    "replay_stored_twice": (replay_stored_twice, ("XM-IDEM-1",)),
    "semantic_duplicates": (semantic_duplicates, ("XM-CAP-2",)),
    "state_appends": (state_appends, ("XM-CAP-3",)),
    "state_version_stuck": (state_version_stuck, ("XM-CAP-3:version",)),
    "events_deduped": (events_deduped, ("XM-CAP-4",)),
    "empty_accepted": (empty_accepted, ("XM-CAP-5",)),
    "unknown_key_401": (unknown_key_401, ("XM-AUTH-2",)),
    "reader_writes": (reader_writes, ("XM-AUTH-4",)),
    "no_audit_id": (no_audit_id, ("XM-AUDIT-1",)),
    "no_mcp_audit_id": (no_mcp_audit_id, ("XM-AUDIT-1:mcp",)),
    "others_are_self": (others_are_self, ("XM-BND-2", "XM-FLOW-2")),
    "self_unrecognised": (self_unrecognised, ("XM-BND-4",)),
    "binding_unreported": (binding_unreported, ("XM-BND-6",)),
    "authority_claimed": (authority_claimed, ("XM-BND-7",)),
    "boundary_unexplained": (boundary_unexplained, ("XM-BND-1",)),
    "raw_instance_echoed": (raw_instance_echoed, ("XM-INST-1",)),
    "header_filters": (header_filters, ("XM-ISO-3",)),
    "wildcards_literal": (wildcards_literal, ("XM-RECALL-5",)),
    "recall_logged": (recall_logged, ("XM-RETRY-1",)),
    "heading_missing": (heading_missing, ("XM-RECALL-6",)),
    "short_ids": (short_ids, ("XM-CAP-1", "XM-FLOW-1:uuid")),
    "status_dropped": (status_dropped, ("XM-HELPER-1", "XM-FLOW-1", "XM-FLOW-5")),
    "semantic_as_episodic": (semantic_as_episodic, ("XM-FLOW-3", "XM-FLOW-4")),
    "anonymous_403": (anonymous_403, ("XM-AUTH-1",)),
    "bearer_ignored": (bearer_ignored, ("XM-AUTH-3",)),
    "health_needs_key": (health_needs_key, ("XM-HEALTH-1",)),
    "no_api_alias": (no_api_alias, ("XM-ALIAS-1",)),
    "plain_422": (plain_422, ("XM-ERR-1",)),
    "tool_renamed": (tool_renamed, ("XM-MCP-1",)),
    "identity_scopes_joined": (identity_scopes_joined, ("XM-MCP-2",)),
    "project_scope_key_wrong": (project_scope_key_wrong, ("XM-PROJECT-1",)),
}
