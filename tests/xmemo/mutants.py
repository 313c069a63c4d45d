"""Broken XMemo references, one requirement family each: the conformance profile must kill every one.

Each entry is ``name: (factory, requirement ids it must fail)``; a factory takes the database
path, as ``--embedded-factory mutants:NAME`` calls it. Each breaks one rule through a public seam
(``Rules``, ``store_class``) or one small subclass, and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from aidememo_ref.xmemo import Rules, XMemoReference
from aidememo_ref.xmemo import _boundary, _recall, _writes
from aidememo_ref.xmemo._errors import RequestError
from aidememo_ref.xmemo._records import Caller, Kind, Memory, Relation, Trust
from aidememo_ref.xmemo._service import XMemoService
from aidememo_ref.xmemo._sqlite import SQLiteXMemoStore
from aidememo_ref.xmemo._store import ReadFilter


def _ref(database: str | Path, **kwargs: Any) -> XMemoReference:
    return XMemoReference(database, **kwargs)


# -- the agent boundary -----------------------------------------------------------------------------

def _ignores_installation(caller: Caller, memory: Memory) -> Any:
    bound = _boundary.boundary(caller, memory)
    if bound.relation is Relation.SAME_AGENT_OTHER_INSTANCE:
        return replace(bound, relation=Relation.SELF, ownership=Relation.SELF)
    return bound


def relation_wrong(database: str) -> XMemoReference:
    """Calls the same agent on another installation ``self``."""
    return _ref(database, rules=Rules(boundary=_ignores_installation))


def _claims_binding(caller: Caller, memory: Memory) -> Any:
    return replace(_boundary.boundary(caller, memory), current_agent_trust=Trust.TOKEN_BOUND)


def trust_claimed(database: str) -> XMemoReference:
    """Claims token_bound for a header-asserted agent id."""
    return _ref(database, rules=Rules(boundary=_claims_binding))


class _HeaderWins(XMemoService):
    @staticmethod
    def _attribute(principal: Any, request: Any, agent_id: str | None, instance_id: str | None) -> Caller:
        from aidememo_ref.xmemo._http import AGENT_HEADER, agent_header

        caller = XMemoService._attribute(principal, request, agent_id, instance_id)
        asserted = agent_id or agent_header(request.headers, AGENT_HEADER)
        return replace(caller, agent_id=asserted or caller.agent_id, ignored_agent_id=None) if asserted else caller


def header_overrides_binding(database: str) -> XMemoReference:
    """Lets an agent header replace the credential's bound agent (trust still says token_bound)."""
    reference = _ref(database)
    reference.service = _HeaderWins(reference.store, reference.clock)
    return reference


# -- isolation --------------------------------------------------------------------------------------

class _OwnerLeak(SQLiteXMemoStore):
    def visible(self, tenant: Any, filters: ReadFilter, now_ms: int) -> list[Memory]:
        with self._guard():
            owners = self._conn().execute(
                "SELECT DISTINCT owner_id, organization_id, workspace_id, project_id FROM memories").fetchall()
        from aidememo_ref.xmemo._records import Tenant

        rows: list[Memory] = []
        for row in owners:
            rows += super().visible(Tenant(owner_id=row[0], organization_id=row[1], workspace_id=row[2],
                                           project_id=row[3]), filters, now_ms)
        return rows


def owner_leak(database: str) -> XMemoReference:
    """Recall and search read every owner's memories."""
    return _ref(database, store_class=_OwnerLeak)


class _ScopeLeak(SQLiteXMemoStore):
    def visible(self, tenant: Any, filters: ReadFilter, now_ms: int) -> list[Memory]:
        return super().visible(tenant, replace(filters, scope=None), now_ms)


def scope_leak(database: str) -> XMemoReference:
    """Ignores the requested scope."""
    return _ref(database, store_class=_ScopeLeak)


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

    def with_content(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **{**kwargs, "content": True})

    ops._packet_json = with_content  # type: ignore[method-assign]
    return reference


# -- capture ----------------------------------------------------------------------------------------

class _NoReplay(SQLiteXMemoStore):
    @staticmethod
    def _replay(conn: Any, tenant: Any, claim: Any) -> str | None:
        return None

    @staticmethod
    def _remember_answer(conn: Any, tenant: Any, claim: Any, answer: str) -> None:
        conn.execute("INSERT OR REPLACE INTO idempotency(owner_id, organization_id, workspace_id, project_id, "
                     "idempotency_key, fingerprint, answer) VALUES (?,?,?,?,?,?,?)",
                     (tenant.owner_id, tenant.organization_id, tenant.workspace_id, tenant.project_id, claim.key,
                      claim.fingerprint, answer))


def replay_stored_twice(database: str) -> XMemoReference:
    """Executes an idempotent replay again instead of answering the stored answer."""
    return _ref(database, store_class=_NoReplay)


def _semantic_ignored(write: Any, existing: Any, caller: Caller, now_ms: int, new_id: str) -> Any:
    if isinstance(write, _writes.Remember):
        write = replace(write, semantic_key=None, dedupe=False)
    return _writes.decide(write, existing, caller, now_ms, new_id)


def semantic_duplicates(database: str) -> XMemoReference:
    """Writes a new memory for a repeated semantic_key with the same content."""
    return _ref(database, rules=Rules(decide=_semantic_ignored))


def _state_appends(write: Any, existing: Any, caller: Caller, now_ms: int, new_id: str) -> Any:
    decision = _writes.decide(write, existing, caller, now_ms, new_id)
    if isinstance(write, _writes.UpdateState) and decision.outcome is _writes.Outcome.UPDATED:
        fresh = replace(decision.memory, id=new_id, kind=Kind.EVENT, state_key=None)
        return _writes.WriteDecision(outcome=_writes.Outcome.CREATED, memory=fresh)
    return decision


def state_appends(database: str) -> XMemoReference:
    """Appends a new memory for every update_state instead of versioning the slot."""
    return _ref(database, rules=Rules(decide=_state_appends))


def _dedupe_events(write: Any, existing: Any, caller: Caller, now_ms: int, new_id: str) -> Any:
    if isinstance(write, _writes.RecordEvent):
        twin = existing._one("kind='event' AND content=?", (write.content,))
        if twin is not None:
            return _writes.WriteDecision(outcome=_writes.Outcome.UNCHANGED, memory=twin)
    return _writes.decide(write, existing, caller, now_ms, new_id)


def events_deduped(database: str) -> XMemoReference:
    """Folds an identical timeline event into the first one."""
    return _ref(database, rules=Rules(decide=_dedupe_events))


def empty_accepted(database: str) -> XMemoReference:
    """Stores a remember whose content is blank."""
    from aidememo_ref.xmemo import _decode

    reference = _ref(database)
    original = _decode.decode_remember

    def lenient(body: object) -> Any:
        if isinstance(body, dict) and isinstance(body.get("content"), str) and not body["content"].strip():
            return replace(original({**body, "content": "placeholder"}), content=body["content"])
        return original(body)

    service = reference.service
    service._remember = lambda request: service._write(request, "remember", lenient)  # type: ignore[method-assign]
    service._routes[("v1", "remember")]["POST"] = service._remember
    return reference


# -- credentials and transport ---------------------------------------------------------------------

def unknown_key_401(database: str) -> XMemoReference:
    """Answers 401 (not 403) to a key it does not know."""
    reference = _ref(database)
    service = reference.service
    original = service._principal

    def principal(request: Any) -> Any:
        try:
            return original(request)
        except RequestError as error:
            if error.status == 403:
                raise RequestError.unauthenticated() from None
            raise

    service._principal = principal  # type: ignore[method-assign]
    return reference


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
    reference = _ref(database)
    reference.service = _NoAudit(reference.store, reference.clock)
    return reference


# name -> (factory, the requirement ids whose checks must fail)
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
    "events_deduped": (events_deduped, ("XM-CAP-4",)),
    "empty_accepted": (empty_accepted, ("XM-CAP-5",)),
    "unknown_key_401": (unknown_key_401, ("XM-AUTH-2",)),
    "reader_writes": (reader_writes, ("XM-AUTH-4",)),
    "no_audit_id": (no_audit_id, ("XM-AUDIT-1",)),
}
