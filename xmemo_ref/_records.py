"""XMemo's values: wire enums and frozen records. No I/O, no rules (those live in their modules).

Wire strings are ``StrEnum`` members spelled as on the wire. Evidence for each spelling is in
``docs/xmemo.md``: memory types and scopes from the published clients, the boundary vocabulary
from the seed (XMemo's agent-to-agent guide).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, NamedTuple

from refkit.records import distinct

__all__ = [
    "MemoryType",
    "Kind",
    "Relation",
    "Trust",
    "READ_SCOPE",
    "WRITE_SCOPE",
    "KNOWN_SCOPES",
    "BOUNDARY_AUTHORITY",
    "Tenant",
    "Principal",
    "Caller",
    "Memory",
    "Boundary",
]

class MemoryType(StrEnum):
    """A stored memory's type (GL ``remember``; ``auto`` is a write request, never stored)."""

    SEMANTIC = "semantic"
    EPISODIC = "episodic"
    PROCEDURAL = "procedural"
    WORKING = "working"
    IDENTITY = "identity"


class Kind(StrEnum):
    """Which write route made a memory: they differ in how replays and repeats are folded."""

    MEMORY = "memory"  # POST /v1/remember: semantic_key same-content no-op
    STATE = "state"  # POST /v1/update_state: one versioned slot per bucket/scope/state_key
    EVENT = "event"  # POST /v1/timeline/events: appended, never deduplicated


class Relation(StrEnum):
    """Who wrote a recalled memory, relative to the caller (seed: the agent boundary object)."""

    SELF = "self"
    SAME_AGENT_OTHER_INSTANCE = "same_agent_other_instance"
    OTHER_AGENT = "other_agent"


class Trust(StrEnum):
    """Where the caller's agent id came from (seed: ``current_agent_trust``)."""

    TOKEN_BOUND = "token_bound"  # bound to the credential at bootstrap
    CLIENT_ASSERTED = "client_asserted"  # a header or tool argument, or nothing at all


READ_SCOPE: Final = "memory:read"
WRITE_SCOPE: Final = "memory:write"
KNOWN_SCOPES: Final = (READ_SCOPE, WRITE_SCOPE)
BOUNDARY_AUTHORITY: Final = "attribution_only"  # the boundary label never authorises anything


@dataclass(frozen=True, slots=True, kw_only=True)
class Tenant:
    """The owner and tenant a credential is bound to: the visibility boundary of every read."""

    owner_id: str
    organization_id: str
    workspace_id: str
    project_id: str

    @property
    def scope_key(self) -> str:
        """The project scope key ``tenant:project:<id>`` (MAF ``project_scope.scope_key``)."""
        return f"tenant:project:{self.project_id}"

    def as_json(self) -> dict[str, str]:
        return {"organization_id": self.organization_id, "workspace_id": self.workspace_id,
                "project_id": self.project_id}


@dataclass(frozen=True, slots=True, kw_only=True)
class Principal:
    """What a valid API key resolves to: tenant, scopes and, when bootstrapped, an agent id."""

    tenant: Tenant
    scopes: tuple[str, ...]
    bound_agent_id: str | None = None

    def allows(self, scope: str) -> bool:
        return scope in self.scopes


@dataclass(frozen=True, slots=True, kw_only=True)
class Caller:
    """One request's principal plus the agent identity it is attributed to.

    ``ignored_agent_id`` is a header- or argument-asserted agent id that lost to the
    credential's bound identity; the boundary explanation names it.
    """

    principal: Principal
    agent_id: str | None
    agent_instance_id_hash: str | None
    trust: Trust
    ignored_agent_id: str | None = None

    @property
    def tenant(self) -> Tenant:
        return self.principal.tenant


@distinct
class Memory(NamedTuple):
    """One stored memory, as every read path sees it (a tuple record: a capture builds one, and
    a tuple is cheaper to build than a frozen dataclass: ``python bench/records.py``)."""

    id: str
    tenant: Tenant
    kind: Kind
    content: str
    path: str
    bucket: str
    scope: str | None
    team_id: str | None
    memory_type: MemoryType
    status: str
    importance: float | None
    confidence: float | None
    semantic_key: str | None
    state_key: str | None
    event_type: str | None
    session_id: str | None
    source: str | None
    agent_id: str | None
    agent_instance_id_hash: str | None
    agent_trust: Trust
    metadata_json: str  # canonical JSON object text
    version: int
    created_at_ms: int
    updated_at_ms: int
    expires_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Boundary:
    """The agent boundary object on a recalled item, with exactly the seed's seven fields."""

    relation: Relation
    ownership: Relation
    current_agent_id: str | None
    current_agent_trust: Trust
    boundary_authority: str
    memory_agent_id: str | None
    explanation: str

    def as_json(self) -> dict[str, str | None]:
        # Key order as the seed prints the object.
        return {
            "relation": self.relation.value,
            "ownership": self.ownership.value,
            "current_agent_id": self.current_agent_id,
            "current_agent_trust": self.current_agent_trust.value,
            "boundary_authority": self.boundary_authority,
            "memory_agent_id": self.memory_agent_id,
            "explanation": self.explanation,
        }
