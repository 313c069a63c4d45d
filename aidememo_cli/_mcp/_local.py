"""The local backend of ``aidememo-ref mcp``: upstream's tool arguments, defaults and answers,
run through the same operations as the CLI verbs (``aidememo_cli._local``).

Defaults are upstream's MCP ones: ``source_id`` falls back to ``AIDEMEMO_SOURCE_ID`` and
``actor_id`` to ``AIDEMEMO_ACTOR_ID`` for every tool. Each call is one store transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from aidememo_cli._local import _assignments as assignments
from aidememo_cli._local import _memory as memory
from aidememo_cli._local._errors import LocalError
from aidememo_cli._local._facttypes import FactType, parse_fact_type
from aidememo_cli._local._packet import Route, resolve_endpoint, resume_command
from aidememo_cli._local._records import Assignment
from aidememo_cli._local._rules import parse_duration_ms
from aidememo_cli._local._store import LocalStore

from . import _arguments as read
from ._inbox import action_of, unknown_action
from ._protocol import ToolError, ToolResult
from ._schemas import TOOLS

__all__ = ["LocalTools"]


def _sorted(value: object) -> ToolResult:
    return ToolResult(json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


class LocalTools:
    """Tools on one store file."""

    def __init__(self, store_path: str, env: Mapping[str, str], clock: Callable[[], int]) -> None:
        self._store_path = store_path
        self._environ = env
        self._clock = clock
        self._handlers: dict[str, Callable[[LocalStore, Mapping[str, Any], int], ToolResult]] = {
            "aidememo_session_start": self._session_start,
            "aidememo_fact_get": self._fact_get,
            "aidememo_fact_add": self._fact_add,
            "aidememo_workflow_start": self._workflow_start,
            "aidememo_handoff": self._handoff,
            "aidememo_handoff_inbox": self._inbox,
            "aidememo_profile_export": self._profile_export,
        }
        self._store: LocalStore | None = None

    def tools(self) -> list[dict[str, Any]]:
        return TOOLS

    def close(self) -> None:
        if self._store is not None:
            self._store.close()

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        handler = self._handlers.get(name)
        if handler is None:
            raise ToolError(f"Unknown tool: {name}")
        try:
            if self._store is None:
                self._store = LocalStore(self._store_path)
            with self._store.transaction(write=name not in ("aidememo_fact_get", "aidememo_session_start",
                                                            "aidememo_profile_export")) as store:
                return handler(store, arguments, self._clock())
        except LocalError as exc:
            raise ToolError(str(exc)) from exc

    # defaults

    def _source(self, args: Mapping[str, Any]) -> str | None:
        return read.text(args.get("source_id")) or read.text(self._environ.get("AIDEMEMO_SOURCE_ID"))

    def _actor(self, args: Mapping[str, Any]) -> str | None:
        return read.text(args.get("actor_id")) or read.text(self._environ.get("AIDEMEMO_ACTOR_ID"))

    # tools

    def _session_start(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        return _sorted(memory.session_start(store, self._source(args), read.uint(args.get("recent_limit"), 10),
                                            read.uint(args.get("recent_days"), 7),
                                            read.uint(args.get("top_entities_limit"), 10), now))

    def _fact_get(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        fact_id = read.raw(args.get("id"))
        if fact_id is None:
            raise ToolError("id required")
        fact = memory.fact_get(store, fact_id, self._source(args), bad_id="invalid fact ID")
        slim: dict[str, Any] = {"id": fact.id, "content": fact.content, "type": str(fact.fact_type),
                                "entities": list(fact.entity_names)}
        age_days = max(0, now - fact.created_at) // 86_400_000
        if age_days >= 1:
            slim["age_days"] = age_days
        durable = fact.fact_type in (FactType.DECISION, FactType.CONVENTION, FactType.PATTERN, FactType.PREFERENCE,
                                     FactType.LESSON, FactType.ERROR)
        if not durable and age_days >= 60:
            slim["freshness_warning"] = f"fact is {age_days} days old; consider re-verifying"
        for key in ("observed_at", "source", "source_id", "actor_id"):
            if getattr(fact, key) is not None:
                slim[key] = getattr(fact, key)
        if fact.tags:
            slim["tags"] = list(fact.tags)
        return _sorted(slim)

    def _fact_add(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        content = read.raw(args.get("content"))
        if content is None:
            raise ToolError("content required")
        source_id = self._source(args)
        kind = args.get("fact_type")
        fact_type: FactType | None = None
        if kind is not None:
            if not isinstance(kind, str):
                raise ToolError("fact_type must be a string")
            fact_type = parse_fact_type(kind)
            if fact_type is FactType.UNKNOWN and kind.lower() != "unknown":
                raise ToolError(f"invalid fact_type {json.dumps(kind)}; accepted: " + ", ".join(t for t in FactType))
        session = None
        if (session_id := read.text(args.get("session_id"))) is not None:
            try:
                session = memory.resolve_session(store, session_id, source_id)
            except LocalError as exc:
                raise ToolError(f"session_id {json.dumps(session_id)} does not resolve to an entity: {exc}") from exc
        added = memory.add_fact(store, content=content, fact_type=fact_type, entities=read.strings(args.get("entities")),
                                tags=read.strings(args.get("tags")), source_id=source_id, actor_id=self._actor(args),
                                now_ms=now, session=session)
        fact, write = added.fact, added.write_type
        hint = None if write.hint is None else {
            "suggested_fact_type": str(write.hint),
            "message": f'content has a strong {write.hint} cue; use fact_type="{write.hint}" to activate'
                       " type-aware ranking",
        }
        return _sorted({
            "id": fact.id, "content": fact.content, "fact_type": str(fact.fact_type), "fact_type_source": write.source,
            "fact_type_hint": hint, "entity_names": list(fact.entity_names), "created_at": fact.created_at,
            "source_id": fact.source_id, "actor_id": fact.actor_id, "auto_created_entities": added.auto_created,
            "entity_name_alternatives": None, "existing_similar": None, "shadow_corpus": None,
        })

    def _workflow_start(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        title = read.raw(args.get("title"))
        if title is None or not title.strip():
            raise ToolError("title required")
        pack = memory.workflow_start(
            store, title=title, body=read.raw(args.get("body")), source=read.raw(args.get("source")),
            source_id=self._source(args), actor_id=self._actor(args),
            parent_session_id=read.raw(args.get("parent_session_id")), limit=read.uint(args.get("limit"), 8),
            recent_limit=read.uint(args.get("recent_limit"), 5), now_ms=now,
        )
        # Upstream serialises this pack as a struct: declaration order, not sorted.
        return ToolResult(json.dumps(pack, ensure_ascii=False, separators=(",", ":")))

    def _handoff(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        session = read.text(args.get("session")) or read.text(args.get("session_id"))
        source_id = self._source(args)
        from_agent, from_profile = resolve_endpoint("from", read.text(args.get("from")) or read.text(args.get("from_route")),
                                                    read.text(args.get("from_agent")), read.text(args.get("from_profile")))
        to_agent, to_profile = resolve_endpoint("to", read.text(args.get("to")) or read.text(args.get("to_route")),
                                                read.text(args.get("to_agent")), read.text(args.get("to_profile")))
        from_actor = read.text(args.get("from_actor")) or read.text(self._environ.get("AIDEMEMO_ACTOR_ID"))
        to_actor = read.text(args.get("to_actor"))
        focus, done_when = read.text(args.get("focus")), read.text(args.get("done_when"))
        task = read.text(args.get("kanban_task")) or read.text(self._environ.get("HERMES_KANBAN_TASK"))
        board = read.text(args.get("kanban_board")) or read.text(self._environ.get("HERMES_KANBAN_BOARD"))
        route = Route(from_actor=from_actor, from_agent=from_agent, from_profile=from_profile, to_actor=to_actor,
                      to_agent=to_agent, to_profile=to_profile, focus=focus, done_when=done_when, source_id=source_id)
        built = memory.packet(store, session or self._environ.get("AIDEMEMO_SESSION_ID"), route,
                              read.uint(args.get("limit"), 40))
        record = None
        if read.flag(args.get("dispatch"), False):
            if from_actor is None:
                raise ToolError("dispatch requires from_actor or AIDEMEMO_ACTOR_ID")
            if to_actor is None:
                raise ToolError("dispatch requires to_actor")
            record = assignments.dispatch(store, assignments.NewAssignment(
                session_id=built.session.name, source_id=source_id, from_actor=from_actor, to_actor=to_actor,
                from_agent=from_agent, from_profile=from_profile, to_agent=to_agent, to_profile=to_profile,
                focus=focus, done_when=done_when, upstream_task_id=task, upstream_board_id=board), now)
        return _sorted({
            "artifact": "agent_handoff", "handoff_id": None if record is None else record.handoff_id,
            "status": None if record is None else str(record.status), "dispatched": record is not None,
            "session_id": built.session.name, "topic": built.session.source_page, "source_id": source_id,
            "from_actor": from_actor, "from_agent": from_agent, "from_profile": from_profile, "to_agent": to_agent,
            "to_profile": to_profile, "to_actor": to_actor, "focus": focus, "done_when": done_when,
            "fact_count": len(built.facts), "bytes": len(built.content.encode("utf-8")),
            "resume": {"command": resume_command(built.session.name, source_id),
                       "env": {"AIDEMEMO_SESSION_ID": built.session.name, "AIDEMEMO_SOURCE_ID": source_id}},
            "content": built.content,
        })

    def _inbox(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        action = action_of(args)
        handler = _INBOX.get(action)
        if handler is None:
            raise unknown_action(action, _INBOX)
        return handler(_InboxCall(store, args, action, self._actor(args), self._source(args), now))

    def _profile_export(self, store: LocalStore, args: Mapping[str, Any], now: int) -> ToolResult:
        source_id = self._source(args)
        content, facts, entities = memory.profile_export(store, source_id, read.uint(args.get("limit"), 80),
                                                         read.flag(args.get("include_sessions"), False))
        return _sorted({"artifact": "project_profile", "source_id": source_id, "fact_count": facts,
                        "entity_count": entities, "bytes": len(content.encode("utf-8")), "content": content})


# -- aidememo_handoff_inbox ------------------------------------------------------------------------
class _InboxCall:
    """One inbox call: its store transaction, arguments and the defaults already applied.

    A plain slotted class: ``dataclasses`` would cost the stdio server's start-up (``tests/local/test_startup.py``).
    """

    __slots__ = ("store", "args", "action", "actor", "source_id", "now")

    def __init__(self, store: LocalStore, args: Mapping[str, Any], action: str, actor: str | None,
                 source_id: str | None, now: int) -> None:
        self.store, self.args, self.action, self.actor, self.source_id, self.now = (store, args, action, actor,
                                                                                    source_id, now)

    def need_actor(self) -> str:
        if self.actor is None:
            raise ToolError("actor_id required (or set AIDEMEMO_ACTOR_ID)")
        return self.actor

    def need(self, field: str) -> str:
        value = read.raw(self.args.get(field))
        if value is None:
            raise ToolError(f"{field} required for action={self.action}")
        return value


def _assignment(record: Assignment) -> ToolResult:
    return _sorted({"assignment": record.to_json()})


def _mailbox(call: _InboxCall) -> ToolResult:
    sent = call.action == "outbox"
    who = call.need_actor()
    records = assignments.mailbox(call.store, who, call.source_id, read.flag(call.args.get("include_completed"), sent),
                                  read.uint(call.args.get("limit"), 20), sent=sent)
    return _sorted({"actor_id": who, "source_id": call.source_id, "assignments": [r.to_json() for r in records]})


def _show(call: _InboxCall) -> ToolResult:
    return _assignment(assignments.load(call.store, call.need("handoff_id"))[0])


def _heartbeat(call: _InboxCall) -> ToolResult:
    who = call.need_actor()
    return _assignment(assignments.heartbeat(call.store, call.need("handoff_id"), who, call.now))


def _board(call: _InboxCall) -> ToolResult:
    given = call.args.get("stale_after")
    stale = given if isinstance(given, str) else "1h"
    return _sorted(assignments.board(call.store, call.actor, call.source_id, parse_duration_ms(stale),
                                     read.flag(call.args.get("include_completed"), False),
                                     read.uint(call.args.get("limit"), 50), call.now))


def _status(call: _InboxCall) -> ToolResult:
    who = call.need_actor()
    return _assignment(assignments.status(call.store, call.need("handoff_id"), who))


def _accept(call: _InboxCall) -> ToolResult:
    who = call.need_actor()
    accepted = assignments.accept(call.store, call.need("handoff_id"), who, read.raw(call.args.get("claim_id")),
                                  call.now)
    return _sorted(accepted.to_json())


def _return(call: _InboxCall) -> ToolResult:
    who = call.need_actor()
    handoff_id, fact_id, outcome = call.need("handoff_id"), call.need("result_fact_id"), call.need("outcome")
    return _assignment(assignments.return_result(call.store, handoff_id, who, fact_id, outcome, call.now)[0])


def _complete(call: _InboxCall) -> ToolResult:
    who = call.need_actor()
    return _assignment(assignments.complete(call.store, call.need("handoff_id"), who, call.now))


# In upstream's order: its refusal of an unknown action lists them so.
_INBOX: dict[str, Callable[[_InboxCall], ToolResult]] = {
    "list": _mailbox, "outbox": _mailbox, "show": _show, "heartbeat": _heartbeat, "board": _board,
    "status": _status, "accept": _accept, "return": _return, "complete": _complete,
}
