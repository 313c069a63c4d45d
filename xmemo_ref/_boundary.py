"""The agent boundary: who wrote a memory relative to the caller. Attribution only.

Theory of operation (seed, "Leia os campos de limite"): a recalled item is ``self`` when the
caller's agent id and installation hash both match the writer's, ``same_agent_other_instance``
when only the agent id matches, ``other_agent`` otherwise. ``current_agent_trust`` says whether
the caller's agent id came from its credential. Nothing here decides visibility: reads are
filtered by owner, tenant, scope and filters before a boundary is computed, and the label is
computed for what was already visible. This module must never be asked "may the caller see it".
"""

from __future__ import annotations

import hashlib
from typing import Final

from ._records import BOUNDARY_AUTHORITY, Boundary, Caller, Memory, Principal, Relation, Tenant, Trust

__all__ = ["boundary", "instance_hash", "resolve_caller", "EXPLANATIONS"]

# (reason) -> (relation, one-line explanation). The seed fixes the other_agent sentence.
EXPLANATIONS: Final[dict[str, tuple[Relation, str]]] = {
    "match": (Relation.SELF, "memory agent_id and agent_instance_id_hash match this caller"),
    "other_instance": (
        Relation.SAME_AGENT_OTHER_INSTANCE,
        "memory agent_id matches this caller but its agent_instance_id_hash differs",
    ),
    "other_agent": (Relation.OTHER_AGENT, "memory agent_id differs from this caller"),
    "caller_unknown": (Relation.OTHER_AGENT, "this caller has no agent_id, so no memory is attributed to it"),
    "writer_unknown": (Relation.OTHER_AGENT, "memory has no agent_id"),
}


def instance_hash(tenant: Tenant, raw_instance_id: str) -> str:
    """SHA-256 of the raw installation id, salted with the owner: the raw id is never stored."""
    material = f"xmemo-agent-instance\x00{tenant.owner_id}\x00{raw_instance_id}"
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def resolve_caller(
    principal: Principal, *, asserted_agent_id: str | None, asserted_instance_id: str | None
) -> Caller:
    """The caller's agent identity: the credential's bound id wins over anything asserted.

    The asserted installation id is kept only as its hash; the agent headers (or tool
    arguments) are attribution, so a bound credential keeps its agent id whatever is sent.
    """
    digest = None if asserted_instance_id is None else instance_hash(principal.tenant, asserted_instance_id)
    bound = principal.bound_agent_id
    if bound is not None:
        ignored = asserted_agent_id if asserted_agent_id not in (None, bound) else None
        return Caller(principal=principal, agent_id=bound, agent_instance_id_hash=digest,
                      trust=Trust.TOKEN_BOUND, ignored_agent_id=ignored)
    return Caller(principal=principal, agent_id=asserted_agent_id, agent_instance_id_hash=digest,
                  trust=_ASSERTED)


_ASSERTED: Final = Trust.CLIENT_ASSERTED  # looked up once: enum class attributes go through a hook (``_writes``)


def _reason(caller: Caller, memory: Memory) -> str:
    if caller.agent_id is None:
        return "caller_unknown"
    if memory.agent_id is None:
        return "writer_unknown"
    if memory.agent_id != caller.agent_id:
        return "other_agent"
    return "match" if memory.agent_instance_id_hash == caller.agent_instance_id_hash else "other_instance"


def boundary(caller: Caller, memory: Memory) -> Boundary:
    """The boundary object of ``memory`` as ``caller`` recalls it."""
    relation, explanation = EXPLANATIONS[_reason(caller, memory)]
    if caller.ignored_agent_id is not None:
        explanation += (
            f"; the credential binds agent_id {caller.agent_id}, "
            f"so the asserted agent_id {caller.ignored_agent_id} was ignored"
        )
    return Boundary(
        relation=relation,
        ownership=relation,
        current_agent_id=caller.agent_id,
        current_agent_trust=caller.trust,
        boundary_authority=BOUNDARY_AUTHORITY,
        memory_agent_id=memory.agent_id,
        explanation=explanation,
    )
