"""XMemo's use cases, shared by the REST routes and the MCP tools: one caller, one typed request.

Every read asks the store for the caller's tenant only, then applies the request's filters;
the agent boundary is computed afterwards, for what was already visible, so it can never widen
what a caller sees. The rule functions come in a ``Rules`` bundle so that the kit's broken
variants can replace one rule and nothing else.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, TypeVar

from . import _boundary, _recall, _writes
from ._codec import iso, memory_json
from ._decode import ProjectContextRequest, RecallRequest, SearchRequest
from ._errors import RequestError
from ._hot import answer_text
from ._records import BOUNDARY_AUTHORITY, Boundary, Caller, Memory, MemoryType, Relation
from ._store import IdempotencyClaim, ReadFilter, XMemoStore
from ._writes import Existing, Write, WriteDecision

__all__ = ["Rules", "Operations", "PACKET_VERSION", "PROJECT_SCOPE_PREFIX"]

PACKET_VERSION: Final = 1  # the seed prints context.version; the reference's packet format is version 1
PROJECT_SCOPE_PREFIX: Final = "tenant:project:"
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True, kw_only=True)
class Rules:
    """The rule functions the operations call; a broken variant swaps exactly one."""

    decide: Callable[[Write, Existing, Caller, int, str], WriteDecision] = _writes.decide
    boundary: Callable[[Caller, Memory], Boundary] = _boundary.boundary
    rank: Callable[[Iterable[Memory], str, bool], list[_recall.Ranked]] = _recall.rank
    pack: Callable[..., _recall.Packet] = _recall.pack


class Operations:
    """The reference's behaviour for an authenticated caller, independent of REST or MCP."""

    def __init__(self, store: XMemoStore, clock: Any, *, rules: Rules, new_id: Callable[[], str]) -> None:
        self.store = store
        self.clock = clock
        self.rules = rules
        self.new_id = new_id

    # -- shared pieces ----------------------------------------------------------------------
    @staticmethod
    def require(caller: Caller, scope: str) -> None:
        if not caller.principal.allows(scope):
            raise RequestError.missing_scope(scope)

    @staticmethod
    def authorize_scope(caller: Caller, scope: str | None) -> None:
        """A ``tenant:project:<id>`` scope must name the credential's own project (read or write)."""
        if scope is not None and scope.startswith(PROJECT_SCOPE_PREFIX) and scope != caller.tenant.scope_key:
            raise RequestError.forbidden(f"Scope {scope} is outside this credential's project")

    def _item(self, caller: Caller, memory: Memory, *, score: float, rank: int, truncated: bool = False,
              content: bool = False, bound: Boundary | None = None) -> dict[str, Any]:
        bound = bound or self.rules.boundary(caller, memory)
        item: dict[str, Any] = {
            "id": memory.id, "memory_id": memory.id, "kind": memory.kind.value, "path": memory.path,
            "bucket": memory.bucket, "scope": memory.scope, "team_id": memory.team_id,
            "memory_type": memory.memory_type.value, "status": memory.status, "score": score, "rank": rank,
            "created_at": iso(memory.created_at_ms), "updated_at": iso(memory.updated_at_ms),
            "agent_id": memory.agent_id, "agent_boundary": bound.as_json(), "ownership": bound.ownership.value,
        }
        if content:
            item["content"] = memory.content
        if truncated:
            item["truncated"] = True
        return item

    def _summary(self, caller: Caller, boundaries: Iterable[Boundary]) -> dict[str, Any]:
        counts = {relation.value: 0 for relation in Relation}
        for bound in boundaries:
            counts[bound.relation.value] += 1
        return {"current_agent_id": caller.agent_id, "current_agent_trust": caller.trust.value,
                "boundary_authority": BOUNDARY_AUTHORITY, "relations": counts}

    def _rank(self, memories: Iterable[Memory], query: str, prefer_working: bool) -> list[_recall.Ranked]:
        return self.rules.rank(memories, query, prefer_working)

    # -- writes -----------------------------------------------------------------------------
    def write(self, caller: Caller, write: Write, *, route: str, body: object = None,
              idempotency_key: str | None = None) -> tuple[str, bool]:
        """Apply one capture; returns the answer text and whether it replays an earlier one."""
        self.require(caller, "memory:write")
        self.authorize_scope(caller, write.scope)
        claim = None
        if idempotency_key is not None:
            stripped = {k: v for k, v in body.items() if k != "idempotency_key"} if isinstance(body, dict) else body
            digest = hashlib.sha256(f"{route}\n{json.dumps(stripped, sort_keys=True)}".encode()).hexdigest()
            claim = IdempotencyClaim(key=idempotency_key, fingerprint=digest)
        now_ms = self.clock.now_ms()
        new_id = self.new_id()

        def plan(existing: Existing) -> tuple[WriteDecision, str]:
            decision = self.rules.decide(write, existing, caller, now_ms, new_id)
            return decision, answer_text(decision.memory, decision.outcome, idempotency_key)  # a StrEnum is its value

        return self.store.write(caller.tenant, idempotency=claim, plan=plan)

    # -- reads ------------------------------------------------------------------------------
    def _visible(self, caller: Caller, filters: ReadFilter) -> list[Memory]:
        self.require(caller, "memory:read")
        self.authorize_scope(caller, filters.scope)
        return self.store.visible(caller.tenant, filters, self.clock.now_ms())

    def _ranked(self, caller: Caller, filters: ReadFilter, query: str, prefer_working: bool,
                consume: Callable[[_recall.Candidates], _T]) -> _T:
        """``consume`` what the rank rule makes of everything visible."""
        self.require(caller, "memory:read")
        self.authorize_scope(caller, filters.scope)
        now_ms = self.clock.now_ms()
        if self.rules.rank is _recall.rank:  # the store's index yields exactly rank's order (``_ranking``)
            return self.store.ranked(caller.tenant, filters, now_ms, query, prefer_working, consume)
        return consume(self.rules.rank(self.store.visible(caller.tenant, filters, now_ms), query, prefer_working))

    def recall(self, caller: Caller, request: RecallRequest) -> dict[str, Any]:
        """``POST /v1/recall/context``: rank everything visible, pack within both bounds."""
        def packed(ranked: _recall.Candidates) -> _recall.Packet:
            return self.rules.pack(ranked, max_items=request.max_items, max_tokens=request.max_tokens,
                                   boundary_of=lambda memory: self.rules.boundary(caller, memory))

        packet = self._ranked(caller, request.filters, request.query, request.prefer_working, packed)
        return self._packet_json(caller, packet, query=request.query, scope=request.filters.scope,
                                 max_items=request.max_items, max_tokens=request.max_tokens)

    def _packet_json(self, caller: Caller, packet: _recall.Packet, *, query: str, scope: str | None,
                     max_items: int, max_tokens: int, content: bool = False) -> dict[str, Any]:
        items = [self._item(caller, p.memory, score=p.score, rank=p.rank, truncated=p.truncated, content=content,
                            bound=p.boundary) for p in packet.items]
        return {
            "version": PACKET_VERSION,
            "query": query,
            "scope": scope,
            "items": items,
            "context_text": packet.context_text,
            "budget": {"max_items": max_items, "max_tokens": max_tokens, "used_items": len(items),
                       "used_tokens": packet.used_tokens, "token_estimate": _recall.TOKEN_ESTIMATE},
            "coverage": {"candidates": packet.candidates, "returned": len(items),
                         "omitted_by_max_items": packet.omitted_by_items,
                         "omitted_by_max_tokens": packet.omitted_by_tokens},
            "agent_boundary": self._summary(caller, (p.boundary for p in packet.items)),
        }

    def project_context(self, caller: Caller, project_id: str, request: ProjectContextRequest) -> dict[str, Any]:
        """``POST /v1/projects/{id}/context``: recent working state first, then ranked durable memories."""
        if project_id != caller.tenant.project_id:
            raise RequestError.forbidden(f"Project {project_id} is outside this credential's tenant")
        visible = self._visible(caller, ReadFilter(team_id=request.team_id))
        recent = sorted((m for m in visible if m.memory_type is MemoryType.WORKING),
                        key=lambda m: (-m.updated_at_ms, m.id))
        durable = self._rank([m for m in visible if m.memory_type is not MemoryType.WORKING],
                             request.durable_query, False)
        ordered = [_recall.Ranked(memory=m, score=1.0) for m in recent] + durable
        packet = self.rules.pack(ordered, max_items=request.max_items, max_tokens=request.max_tokens,
                                 boundary_of=lambda memory: self.rules.boundary(caller, memory))
        body = self._packet_json(caller, packet, query=request.durable_query, scope=caller.tenant.scope_key,
                                 max_items=request.max_items, max_tokens=request.max_tokens, content=True)
        items = body.pop("items")
        tenant = caller.tenant
        return {
            "project_scope": {"project_id": tenant.project_id, "owner_id": tenant.owner_id,
                              "organization_id": tenant.organization_id, "workspace_id": tenant.workspace_id,
                              "team_id": request.team_id, "scope_key": tenant.scope_key},
            "recent_memories": [i for i in items if i["memory_type"] == MemoryType.WORKING.value],
            "durable_context": {"query": request.durable_query,
                                "items": [i for i in items if i["memory_type"] != MemoryType.WORKING.value]},
            **body,
        }

    def search(self, caller: Caller, request: SearchRequest) -> dict[str, Any]:
        """``GET /v1/memories/search``: the same ranking, ``limit`` results, content included."""
        query = "" if request.query.strip() == "*" else request.query
        threshold = request.threshold

        def listed(ranked: _recall.Candidates) -> tuple[int, list[_recall.Ranked]]:
            if threshold is not None:
                ranked = [r for r in ranked if r.score >= threshold]
            return len(ranked), list(islice(ranked, request.limit))

        candidates, first = self._ranked(caller, request.filters, query, request.prefer_working, listed)
        results = []
        bounds = []
        for position, candidate in enumerate(first, 1):
            bound = self.rules.boundary(caller, candidate.memory)
            bounds.append(bound)
            item = self._item(caller, candidate.memory, score=candidate.score, rank=position, content=True,
                              bound=bound)
            item["similarity"] = candidate.score
            results.append(item)
        return {"results": results,
                "coverage": {"candidates": candidates, "returned": len(results)},
                "agent_boundary": self._summary(caller, bounds)}

    def memory(self, caller: Caller, memory_id: str, *, explain: bool) -> dict[str, Any]:
        """``GET /v1/memories/{id}`` (and ``/explain``): 404 for anything outside the tenant."""
        self.require(caller, "memory:read")
        found = self.store.get(caller.tenant, memory_id, self.clock.now_ms())
        if found is None:
            raise RequestError.not_found("Memory not found")
        bound = self.rules.boundary(caller, found)
        answer = memory_json(found) | {"agent_boundary": bound.as_json(), "ownership": bound.ownership.value}
        if explain:
            answer["explanation"] = {
                "visibility": "visible because it belongs to this credential's owner and tenant",
                "agent_boundary": bound.explanation,
                "boundary_authority": BOUNDARY_AUTHORITY,
            }
        return answer

    # -- identity ---------------------------------------------------------------------------
    @staticmethod
    def validate(caller: Caller) -> dict[str, Any]:
        return {"status": "valid", "scopes": list(caller.principal.scopes), "setup_state": "setup_completed"}

    @staticmethod
    def identity_text(caller: Caller) -> str:
        """``get_mcp_identity``'s text: the ``Key: value`` lines MAF parses (spec §7)."""
        tenant = caller.tenant
        return "\n".join([
            f"Owner ID: {tenant.owner_id}",
            f"Agent ID: {caller.agent_id or 'none'}",
            f"Agent Trust: {caller.trust.value}",
            f"Tenant: {json.dumps(tenant.as_json())}",
            f"Scopes: {', '.join(caller.principal.scopes)}",
        ])
