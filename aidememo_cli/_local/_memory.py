"""Sessions, facts and the artifacts built from them: the operations behind both the CLI
verbs and the MCP tools (each adapter resolves flags, arguments and environment, then calls
one function here inside one store transaction).

Rules are upstream's (handoff spec §1.9, §9; ``docs/local.md`` lists the departures): a
session is an entity of type ``session`` whose ``source_page`` is its topic; ``session new
--source-id`` and ``workflow start`` attach a ``question`` fact so the session is visible in
that source; entity names are resolved without regard to case and unknown ones are created.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, NamedTuple

from refkit.records import distinct
from ._errors import LocalError, LocalErrorCode, invalid_input
from ._facttypes import FactType, WriteType, resolve_write_type
from ._ids import is_ulid, new_session_id, new_ulid
from ._packet import ProfileEntity, Route, bounded, render_canvas, render_packet, render_profile, resume_exports
from ._records import SESSION_TYPE, Entity, Fact
from ._store import LocalStore, NewFact

__all__ = [
    "NO_SESSION",
    "resolve_session",
    "session_new",
    "resolve_entities",
    "FactAdded",
    "add_fact",
    "fact_get",
    "Packet",
    "packet",
    "canvas",
    "workflow_start",
    "search",
    "profile_export",
]

NO_SESSION = "pass SESSION or set AIDEMEMO_SESSION_ID before `aidememo session canvas`"
_WORDS = re.compile(r"\w+")


def resolve_session(store: LocalStore, name: str | None, source_id: str | None) -> Entity:
    """The named session, visible in ``source_id``; ``None`` is upstream's "no session" refusal."""
    wanted = (name or "").strip()
    if not wanted:
        raise invalid_input(NO_SESSION)
    entity = store.entity(wanted)
    if entity is None or not store.visible(entity.entity_id, source_id):
        raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, wanted)
    if entity.entity_type != SESSION_TYPE:
        raise invalid_input(f"{entity.name} is a {entity.entity_type} entity, not a session")
    return entity


def _new_entity(store: LocalStore, name: str, entity_type: str, source_page: str | None, now_ms: int) -> Entity:
    entity = Entity(entity_id=new_ulid(now_ms), name=name, entity_type=entity_type, source_page=source_page,
                    created_at=now_ms)
    store.add_entity(entity)
    return entity


def session_new(store: LocalStore, topic: str, source_id: str | None, now_ms: int) -> Entity:
    session = _new_entity(store, new_session_id(now_ms), SESSION_TYPE, topic, now_ms)
    if source_id is not None:
        store.add_fact(NewFact(fact_id=new_ulid(now_ms), content=f"Session {session.name} started: {topic}",
                               fact_type=FactType.QUESTION, entity_ids=(session.entity_id,),
                               tags=("session-start",), source_id=source_id), now_ms)
    return session


def resolve_entities(store: LocalStore, names: Sequence[str], source_id: str | None,
                     now_ms: int) -> tuple[list[str], list[str]]:
    """Entity ids for ``names`` and the names that were new (or new to this source)."""
    ids: list[str] = []
    created: list[str] = []
    for name in names:
        entity = store.entity(name)
        if entity is None:
            entity = _new_entity(store, name, "unknown", None, now_ms)
            created.append(name)
        elif not store.visible(entity.entity_id, source_id):
            created.append(name)
        if entity.entity_id not in ids:
            ids.append(entity.entity_id)
    return ids, created


@distinct
class FactAdded(NamedTuple):
    fact: Fact
    write_type: WriteType
    auto_created: list[str]


def add_fact(
    store: LocalStore,
    *,
    content: str,
    fact_type: FactType | None,
    entities: Sequence[str],
    tags: Sequence[str],
    source_id: str | None,
    actor_id: str | None,
    now_ms: int,
    source: str | None = None,
    confidence: float | None = None,
    observed_at: int | None = None,
    session: Entity | None = None,
) -> FactAdded:
    """Store one fact (or merge into the identical one in the same source) and read it back."""
    if not content.strip():
        raise invalid_input("fact content must not be empty")
    ids, created = resolve_entities(store, entities, source_id, now_ms)
    if session is not None and session.entity_id not in ids:
        ids.append(session.entity_id)
    write_type = resolve_write_type(content, fact_type)
    fact_id, _ = store.add_fact(NewFact(
        fact_id=new_ulid(now_ms), content=content, fact_type=write_type.fact_type, entity_ids=ids, tags=tags,
        source=source, source_id=source_id, actor_id=actor_id, confidence=confidence, observed_at=observed_at,
    ), now_ms)
    stored = store.get_fact(fact_id)
    assert stored is not None  # written in this transaction
    return FactAdded(stored, write_type, created)


def fact_get(store: LocalStore, fact_id: str, source_id: str | None, *, bad_id: str) -> Fact:
    """One fact, only from ``source_id`` when given; ``bad_id`` words the refusal of a non-ULID."""
    if not is_ulid(fact_id.strip()):
        raise invalid_input(f"{bad_id}: {fact_id}")
    fact = store.get_fact(fact_id.strip())
    if fact is None or (source_id is not None and fact.source_id != source_id):
        raise LocalError(LocalErrorCode.FACT_NOT_FOUND, fact_id.strip().upper())
    return fact


@distinct
class Packet(NamedTuple):
    session: Entity
    facts: list[Fact]
    content: str


def packet(store: LocalStore, session_name: str | None, route: Route, limit: int) -> Packet:
    """The handoff packet for a session, from its current facts in ``route.source_id``."""
    session = resolve_session(store, session_name, route.source_id)
    facts = bounded(store.entity_facts(session.entity_id, route.source_id), limit)
    return Packet(session, facts, render_packet(session, facts, route))


def canvas(store: LocalStore, session_name: str | None, source_id: str | None, limit: int) -> Packet:
    """The session canvas, from the session's current facts in ``source_id``."""
    session = resolve_session(store, session_name, source_id)
    facts = bounded(store.entity_facts(session.entity_id, source_id), limit)
    return Packet(session, facts, render_canvas(session, facts))


def search(store: LocalStore, query: str, source_id: str | None, limit: int) -> list[tuple[Fact, float]]:
    """Facts sharing words with ``query``, best first: a plain term-overlap score (this kit has
    no BM25 or vector index, so scores and ties differ from upstream's)."""
    terms = {word.lower() for word in _WORDS.findall(query)}
    if not terms or limit <= 0:
        return []
    scored: list[tuple[Fact, float]] = []
    for fact in store.facts(source_id):
        words = [word.lower() for word in _WORDS.findall(fact.content)]
        hits = sum(1 for word in words if word in terms)
        if hits:
            scored.append((fact, round(hits / (1 + len(words)) * len(terms), 4)))
    scored.sort(key=lambda item: (-item[1], -item[0].created_at, item[0].id))
    return scored[:limit]


def search_hit(fact: Fact, score: float, rank: int) -> dict[str, object]:
    """Upstream's ``SearchResult`` shape."""
    return {
        "fact_id": fact.id, "content": fact.content, "fact_type": str(fact.fact_type),
        "entity_names": list(fact.entity_names), "source": fact.source, "source_id": fact.source_id,
        "actor_id": fact.actor_id, "score": score, "rank": rank, "created_at": fact.created_at,
        "observed_at": fact.observed_at,
    }


def workflow_start(
    store: LocalStore,
    *,
    title: str,
    body: str | None,
    source: str | None,
    source_id: str | None,
    actor_id: str | None,
    parent_session_id: str | None,
    limit: int,
    recent_limit: int,
    now_ms: int,
) -> dict[str, object]:
    """A session for a workflow ticket, its ticket fact and a small context pack (upstream's
    ``WorkflowStartPack``; the context comes from ``search``)."""
    title = title.strip()
    if not title:
        raise invalid_input("workflow title required")
    body = (body or "").strip() or None
    source = (source or "").strip() or None
    parent = (parent_session_id or "").strip() or None
    if parent is not None:
        entity = store.entity(parent)
        if entity is None or not store.visible(entity.entity_id, source_id):
            raise invalid_input(f"parent session `{parent}` does not exist")
    session = _new_entity(store, new_session_id(now_ms), SESSION_TYPE, source or title, now_ms)
    ticket = f"Workflow ticket: {title}" + (f"\n\n{body}" if body else "")
    ticket_id, _ = store.add_fact(NewFact(
        fact_id=new_ulid(now_ms), content=ticket, fact_type=FactType.QUESTION, entity_ids=(session.entity_id,),
        tags=("workflow-start", "ticket"), source=source, source_id=source_id, actor_id=actor_id, confidence=1.0,
    ), now_ms)
    query = f"{title}\n\n{body}" if body else title
    hits = [(f, s) for f, s in search(store, query, source_id, 30) if f.id != ticket_id]
    typed = [search_hit(f, s, rank) for rank, (f, s) in enumerate(hits, start=1)]

    def kind(name: str) -> list[dict[str, object]]:
        return [hit for hit in typed if hit["fact_type"] == name][:5]

    return {
        "session_id": session.name,
        "export": resume_exports(session.name, source_id),
        "title": title,
        "source": source,
        "source_id": source_id,
        "actor_id": actor_id,
        "parent_session_id": parent,
        "ticket_fact_id": ticket_id,
        "context": {"topic": query, "entity": None, "search": typed[:limit], "related": [], "recent_facts": []},
        "prior_lessons": kind("lesson"),
        "prior_errors": kind("error"),
        "relevant_decisions": kind("decision"),
    }


def profile_export(store: LocalStore, source_id: str | None, limit: int, include_sessions: bool) -> tuple[str, int, int]:
    """(project profile text, facts shown, entities shown), upstream's selection."""
    facts = [f for f in store.facts(source_id, limit=limit)
             if include_sessions or f.fact_type is not FactType.QUESTION]
    if not include_sessions:
        facts = [f for f in facts if any(not name.startswith("session-") for name in f.entity_names)]
    counts: dict[str, tuple[str, str, int]] = {}
    for fact in store.facts(source_id):
        for entity_id, name in zip(fact.entity_ids, fact.entity_names):
            entity = store.entity(name)
            kind = entity.entity_type if entity is not None else "unknown"
            _, _, count = counts.get(entity_id, (name, kind, 0))
            counts[entity_id] = (name, kind, count + 1)
    ranked = sorted(counts.values(), key=lambda item: (-item[2], item[0]))[:24]
    if not include_sessions:
        ranked = [r for r in ranked if r[1] != SESSION_TYPE and not r[0].startswith("session-")]
    top = [ProfileEntity(name=n, entity_type=k, fact_count=c) for n, k, c in ranked[:12]]
    return render_profile(facts, top), len(facts), len(top)


def session_list(store: LocalStore, source_id: str | None, limit: int) -> list[dict[str, object]]:
    """Upstream's ``EntitySummary`` of the newest sessions visible in ``source_id``."""
    out: list[dict[str, object]] = []
    for entity in store.entities_of_type(SESSION_TYPE):
        if len(out) >= limit:
            break
        if store.visible(entity.entity_id, source_id):
            out.append({"id": entity.entity_id, "name": entity.name, "entity_type": entity.entity_type,
                        "fact_count": store.entity_fact_count(entity.entity_id, source_id), "tags": []})
    return out


def session_start(store: LocalStore, source_id: str | None, recent_limit: int, recent_days: int,
                  top_entities_limit: int, now_ms: int) -> dict[str, Any]:
    """The warm-up envelope (upstream's ``session start`` / ``aidememo_session_start``). This kit
    has no pinning, relations or lint, so ``pinned`` is empty and ``open_issues`` counts none."""
    facts = store.facts(source_id)
    since = now_ms - recent_days * 86_400_000
    recent = [f for f in facts if f.created_at >= since][:recent_limit]
    counts: dict[str, list[object]] = {}
    for fact in facts:
        for name in fact.entity_names:
            entity = store.entity(name)
            row = counts.setdefault(name, [name, entity.entity_type if entity else "unknown", 0])
            row[2] = int(str(row[2])) + 1
    top = sorted(counts.values(), key=lambda r: (-int(str(r[2])), str(r[0])))[:top_entities_limit]
    personal = [f for f in facts if f.fact_type in (FactType.PREFERENCE, FactType.LESSON, FactType.ERROR)][:50]
    return {
        "stats": {"entity_count": len(counts), "fact_count": len(facts), "relation_count": None,
                  "source_id": source_id} if source_id is not None else
                 {"entity_count": len(counts), "fact_count": len(facts), "relation_count": 0},
        "pinned": [],
        "personalisation": [{"id": f.id, "content": f.content, "fact_type": str(f.fact_type)} for f in personal],
        "recent": [{"id": f.id, "content": f.content, "fact_type": str(f.fact_type), "created_at": f.created_at}
                   for f in recent],
        "top_entities": [{"name": r[0], "type": r[1], "fact_count": r[2]} for r in top],
        "open_issues": {"total": None, "by_code": [], "unavailable": "lint is global and is not exposed to a"
                        " source-scoped identity"} if source_id is not None else {"total": 0, "by_code": []},
    }
