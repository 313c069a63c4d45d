"""The assignment ledger's operations, shared by the ``handoff`` verbs and the MCP tools.

Each loads inside the caller's transaction, asks ``_rules`` for the next record and writes it
with CAS on ``updated_at``. An identical retry (same claim, same evidence, completing a
completed assignment) writes nothing. ``accept`` renders the packet before the transaction
commits, so an assignment whose session cannot be rendered stays untouched (upstream writes
first and fails afterwards; ``docs/local.md``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from refkit.records import distinct
from . import _rules as rules
from ._errors import LocalError, LocalErrorCode, invalid_input
from ._ids import new_handoff_id, new_ulid
from ._memory import Packet, packet
from ._packet import DEFAULT_PACKET_LIMIT, Route, resume_command
from ._records import HANDOFF_TYPE, SESSION_TYPE, AgentProfile, Assignment, Entity, Outcome
from ._store import LocalStore

__all__ = [
    "NewAssignment",
    "dispatch",
    "load",
    "mailbox",
    "status",
    "accept",
    "Accepted",
    "heartbeat",
    "complete",
    "return_result",
    "board",
    "route_of",
    "profile_or_refuse",
]


@distinct
class NewAssignment(NamedTuple):
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    from_agent: str | None = None
    from_profile: str | None = None
    to_agent: str | None = None
    to_profile: str | None = None
    focus: str | None = None
    done_when: str | None = None
    upstream_task_id: str | None = None
    upstream_board_id: str | None = None


def dispatch(store: LocalStore, new: NewAssignment, now_ms: int) -> Assignment:
    """Store a ``pending`` pointer to an existing session (upstream's ``dispatch``)."""
    from_actor = rules.check_actor("from_actor", new.from_actor)
    to_actor = rules.check_actor("to_actor", new.to_actor)
    session = store.entity(new.session_id.strip())
    if session is None:
        raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, new.session_id.strip())
    if session.entity_type != SESSION_TYPE:
        raise invalid_input(f"{session.name} is a {session.entity_type} entity, not a session")
    handoff_id = new_handoff_id(now_ms)
    record = rules.new_assignment(
        handoff_id=handoff_id, session_id=session.name, source_id=new.source_id, from_actor=from_actor,
        to_actor=to_actor, from_agent=new.from_agent, from_profile=new.from_profile, to_agent=new.to_agent,
        to_profile=new.to_profile, focus=new.focus, done_when=new.done_when,
        upstream_task_id=new.upstream_task_id, upstream_board_id=new.upstream_board_id, now_ms=now_ms,
    )
    # Upstream keeps assignments as entities of type "handoff"; the name is reserved the same way.
    store.add_entity(Entity(entity_id=new_ulid(now_ms), name=handoff_id, entity_type=HANDOFF_TYPE,
                            source_page=None, created_at=now_ms))
    store.insert_handoff(record)
    return record


def load(store: LocalStore, handoff_id: str) -> tuple[Assignment, int]:
    name = handoff_id.strip()
    found = store.load_handoff(name)
    if found is not None:
        return found
    entity = store.entity(name)
    if entity is not None and entity.entity_type != HANDOFF_TYPE:
        raise invalid_input(f"{entity.name} is a {entity.entity_type} entity, not a handoff")
    raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, name)


def mailbox(store: LocalStore, actor: str, source_id: str | None, include_completed: bool, limit: int,
            *, sent: bool) -> list[Assignment]:
    """Inbox (``sent=False``) or outbox, newest first."""
    actor = rules.check_actor("actor_id", actor)
    return store.mailbox(column="from_actor" if sent else "to_actor", actor=actor, source_id=source_id,
                         include_completed=include_completed, limit=limit)


def status(store: LocalStore, handoff_id: str, actor: str) -> Assignment:
    actor = rules.check_actor("actor_id", actor)
    record, _ = load(store, handoff_id)
    rules.check_status_reader(record, actor)
    return record


def route_of(record: Assignment) -> Route:
    return Route(
        from_actor=record.from_actor, from_agent=record.from_agent, from_profile=record.from_profile,
        to_actor=record.to_actor, to_agent=record.to_agent, to_profile=record.to_profile, focus=record.focus,
        done_when=record.done_when, source_id=record.source_id,
    )


@distinct
class Accepted(NamedTuple):
    assignment: Assignment
    changed: bool
    packet: Packet

    def to_json(self) -> dict[str, Any]:
        """Upstream's accept envelope (CLI ``--json`` and the MCP ``accept`` action)."""
        record = self.assignment
        return {
            "assignment": record.to_json(),
            "resume": {
                "command": resume_command(record.session_id, record.source_id),
                "env": {
                    "AIDEMEMO_SESSION_ID": record.session_id,
                    "AIDEMEMO_SOURCE_ID": record.source_id,
                    "AIDEMEMO_ACTOR_ID": record.to_actor,
                },
            },
            "content": self.packet.content,
        }


def accept(store: LocalStore, handoff_id: str, actor: str, claim_id: str | None, now_ms: int) -> Accepted:
    actor = rules.check_actor("actor_id", actor)
    record, updated_at = load(store, handoff_id)
    accepted = rules.accept(record, actor, claim_id, now_ms)
    current = record if accepted is None else accepted
    rendered = packet(store, current.session_id, route_of(current), DEFAULT_PACKET_LIMIT)
    if accepted is not None:
        store.write_handoff(accepted, updated_at, now_ms)
    return Accepted(current, accepted is not None, rendered)


def heartbeat(store: LocalStore, handoff_id: str, actor: str, now_ms: int) -> Assignment:
    actor = rules.check_actor("actor_id", actor)
    record, updated_at = load(store, handoff_id)
    beat = rules.heartbeat(record, actor, now_ms)
    store.write_handoff(beat, updated_at, now_ms)
    return beat


def complete(store: LocalStore, handoff_id: str, actor: str, now_ms: int) -> Assignment:
    actor = rules.check_actor("actor_id", actor)
    record, updated_at = load(store, handoff_id)
    done = rules.complete(record, actor, now_ms)
    if done is None:
        return record
    store.write_handoff(done, updated_at, now_ms)
    return done


def return_result(store: LocalStore, handoff_id: str, actor: str, result_fact_id: str, outcome_text: str,
                  now_ms: int) -> tuple[Assignment, bool]:
    """Fail-closed return; the flag says whether anything was written."""
    actor = rules.check_actor("actor_id", actor)
    outcome: Outcome = rules.parse_outcome(outcome_text)  # checked before anything is loaded
    record, updated_at = load(store, handoff_id)
    given = result_fact_id.strip()
    fact = store.get_fact(given) if rules.is_result_fact_id(given) else None
    returned = rules.return_result(record, actor, outcome, result_fact_id, fact, now_ms)
    if returned is None:
        return record, False
    store.write_handoff(returned, updated_at, now_ms)
    return returned, True


def board(store: LocalStore, actor: str | None, source_id: str | None, stale_after_ms: int,
          include_completed: bool, limit: int, now_ms: int) -> dict[str, Any]:
    """Upstream's derived board: lanes, next actions, newest activity first."""
    rules.check_stale_after(stale_after_ms)
    if actor is not None:
        actor = rules.check_actor("actor_id", actor)
    records = store.mailbox(column="to_actor", actor=None, source_id=source_id,
                            include_completed=include_completed, limit=None)
    chosen = [r for r in records if actor is None or actor in (r.from_actor, r.to_actor)]
    items = [rules.board_item(r, now_ms, stale_after_ms) for r in chosen]
    items.sort(key=lambda item: item.last_activity_at, reverse=True)
    items = items[:limit]
    return {
        "generated_at": now_ms,
        "stale_after_ms": stale_after_ms,
        "lifecycle_owner": "upstream_orchestrator",
        "lanes": {str(lane): sum(item.lane is lane for item in items) for lane in rules.Lane},
        "assignments": [item.to_json() for item in items],
    }


def profile_or_refuse(store: LocalStore, alias: str) -> AgentProfile:
    profile = store.get_agent(alias)
    if profile is None:
        raise invalid_input(f'agent "{alias}" is not connected; add it with `aidememo agent add {alias} --type codex`')
    return profile
