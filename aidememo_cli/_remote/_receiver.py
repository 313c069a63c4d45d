"""What accept and return do in the receiver's embedded store (``cmd/remote_handoff.rs``).

Accept materializes the canonical session and the bounded context packet as source-scoped
local context: the session entity (created, or checked against the canonical topic) and one
``note`` fact attached to it, written as the sender. The store merges identical content in one
source, so a rerun of the same accept finds the same fact id. Return checks, before anything is
uploaded, that the result fact is the receiver's own evidence: a local ULID, visible in the
handoff's source, attached to its session, written by the bearer's actor.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aidememo_cli._local._errors import LocalError, LocalErrorCode
from aidememo_cli._local._facttypes import FactType
from aidememo_cli._local._ids import is_ulid, new_ulid
from aidememo_cli._local._records import SESSION_TYPE, Entity
from aidememo_cli._local._store import LocalStore, NewFact

from ._errors import refusal
from aidememo_client.recovery import optional_str, required_str

__all__ = ["ResultEvidence", "materialize_context", "result_evidence"]

CONTEXT_TAG = "remote-handoff-context"


def _session_entity(store: LocalStore, session_id: str, topic: str, now_ms: int) -> Entity:
    entity = store.entity(session_id)
    if entity is None:
        entity = Entity(entity_id=new_ulid(now_ms), name=session_id, entity_type=SESSION_TYPE, source_page=topic,
                        created_at=now_ms)
        store.add_entity(entity)
        return entity
    if entity.entity_type != SESSION_TYPE:
        raise refusal(f"local entity {session_id} is not a session")
    if entity.source_page is not None and entity.source_page != topic:
        raise refusal(f"local session {session_id} has a different topic than canonical SSOT")
    return entity


def materialize_context(store: LocalStore, handoff: Mapping[str, Any], session: Mapping[str, Any],
                        context: Mapping[str, Any] | None, now_ms: int) -> str:
    """Write the remote session and its packet into ``store``; returns the context fact's id."""
    handoff_id = required_str(handoff, "handoff_id")
    session_id = required_str(session, "session_id")
    topic = required_str(session, "topic")
    source_id = optional_str(session, "source_id")
    from_actor = required_str(handoff, "from_actor")
    entity = _session_entity(store, session_id, topic, now_ms)
    if context is not None:
        content = required_str(context, "content")
    else:
        content = f"Remote handoff {handoff_id} from {from_actor}: {topic}"
        if (focus := optional_str(handoff, "focus")) is not None:
            content += f"\n\nFocus: {focus}"
        if (done_when := optional_str(handoff, "done_when")) is not None:
            content += f"\n\nDone when: {done_when}"
    fact_id, _ = store.add_fact(NewFact(
        fact_id=new_ulid(now_ms), content=content, fact_type=FactType.NOTE, entity_ids=(entity.entity_id,),
        tags=(CONTEXT_TAG, f"handoff:{handoff_id}"), source=f"remote-handoff:{handoff_id}", source_id=source_id,
        actor_id=from_actor, confidence=1.0,
    ), now_ms)
    return fact_id


@dataclass(frozen=True, slots=True)
class ResultEvidence:
    """The checked local fact a return uploads."""

    fact_id: str
    content: str


def result_evidence(store: LocalStore, result_fact_id: str, session_id: str, source_id: str | None,
                    actor_id: str) -> ResultEvidence:
    """Upstream's client-side pre-checks, in its order; each refusal leaves the server untouched."""
    wanted = result_fact_id.strip()
    if not is_ulid(wanted):
        raise refusal("result_fact_id must be a valid local fact ULID")
    fact_id = wanted.upper()
    fact = store.get_fact(fact_id)
    if fact is None or (source_id is not None and fact.source_id != source_id):
        raise LocalError(LocalErrorCode.FACT_NOT_FOUND, fact_id)
    session = store.entity(session_id)
    if session is None or not store.visible(session.entity_id, source_id):
        raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, session_id)
    if session.entity_id not in fact.entity_ids:
        raise refusal(f"result fact {fact_id} is not attached to remote handoff session {session_id}")
    if fact.actor_id != actor_id:
        raise refusal(f"result fact {fact_id} was not written by authenticated remote actor {actor_id}")
    return ResultEvidence(fact.id, fact.content)
