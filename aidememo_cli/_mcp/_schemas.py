"""``tools/list`` entries for the tools this kit serves: upstream's names, argument names,
types, enums, defaults and required lists (descriptions are this kit's own words)."""

from __future__ import annotations

from typing import Any

__all__ = ["TOOLS", "UPSTREAM_ONLY"]


def _s(description: str = "", **extra: Any) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {}), **extra}


def _n(default: int, description: str = "") -> dict[str, Any]:
    return {"type": "number", "default": default, **({"description": description} if description else {})}


def _b(default: bool, description: str = "") -> dict[str, Any]:
    return {"type": "boolean", "default": default, **({"description": description} if description else {})}


_SOURCE = "Source namespace; defaults to AIDEMEMO_SOURCE_ID."
_ACTOR = "Writer or account alias; defaults to AIDEMEMO_ACTOR_ID."
_FACT_TYPES = ["decision", "pattern", "convention", "claim", "note", "question", "preference", "lesson", "error",
               "unknown"]


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"name": name, "description": description, "inputSchema": schema}


TOOLS: list[dict[str, Any]] = [
    _tool("aidememo_session_start", "Warm-up envelope: store counts, recent facts, top entities.", {
        "pinned_limit": _n(20), "recent_limit": _n(10), "recent_days": _n(7, "Days the recent section covers."),
        "top_entities_limit": _n(10), "source_id": _s(_SOURCE),
    }),
    _tool("aidememo_fact_get", "One fact by id.", {
        "id": _s("Fact ULID"), "source_id": _s("Only return the fact from this source. " + _SOURCE),
    }, ["id"]),
    _tool("aidememo_fact_add", "Record a fact; unknown entity names are created.", {
        "content": {"type": "string"},
        "entities": {"type": "array", "items": {"type": "string"}, "description": "Entity names."},
        "tags": {"type": "array", "items": {"type": "string"}},
        "source_id": _s(_SOURCE), "actor_id": _s(_ACTOR),
        "session_id": _s("Attach the fact to this tracked session (visible in the source)."),
        "fact_type": _s("Omit to infer from strong cues.", enum=_FACT_TYPES),
        "dedup_check": _b(True, "Look for a similar fact first (this kit reports none)."),
    }, ["content"]),
    _tool("aidememo_workflow_start", "Start a tracked session from a ticket and return a context pack.", {
        "title": _s("Ticket title or trigger text."), "body": _s("Ticket body."),
        "source": _s("Upstream reference, e.g. github:org/repo#123."), "source_id": _s(_SOURCE),
        "actor_id": _s(_ACTOR), "parent_session_id": _s("A prior session this one continues."),
        "limit": _n(8, "Context hits."), "depth": _n(2, "Graph depth (no graph here)."),
        "recent_limit": _n(5, "Recent facts."), "bm25_only": _b(False, "Lexical retrieval only (always, here)."),
    }, ["title"]),
    _tool("aidememo_handoff", "The handoff packet of a session; dispatch=true also stores an assignment.", {
        "session": _s("Session id; defaults to AIDEMEMO_SESSION_ID."), "session_id": _s("Alias for session."),
        "from_actor": _s("Sending alias; defaults to AIDEMEMO_ACTOR_ID."),
        "from": _s("AGENT[/PROFILE] of the sender."), "to": _s("AGENT[/PROFILE] of the receiver."),
        "from_agent": _s(), "from_profile": _s(), "to_agent": _s(), "to_profile": _s(),
        "to_actor": _s("Receiving alias; needed with dispatch."), "focus": _s(), "done_when": _s(),
        "kanban_task": _s("Defaults to HERMES_KANBAN_TASK."), "kanban_board": _s("Defaults to HERMES_KANBAN_BOARD."),
        "dispatch": _b(False, "Store a pending assignment for to_actor."), "source_id": _s(_SOURCE),
        "limit": _n(40, "Session facts in the packet."), "include_superseded": _b(False),
    }),
    _tool("aidememo_handoff_inbox", "Assignment ledger: list, outbox, show, heartbeat, board, status, accept,"
          " return, complete.", {
        "action": _s(enum=["list", "outbox", "show", "heartbeat", "board", "status", "accept", "return", "complete"],
                     default="list"),
        "actor_id": _s("Account alias; defaults to AIDEMEMO_ACTOR_ID."),
        "handoff_id": _s("For show, heartbeat, status, accept, return, complete."),
        "claim_id": _s("Optional worker claim for accept."),
        "result_fact_id": _s("For return: a receiver-written fact in the handoff's session and source."),
        "outcome": _s("For return.", enum=["succeeded", "failed"]),
        "source_id": _s(_SOURCE), "stale_after": _s("For board.", default="1h"),
        "include_completed": {"type": "boolean", "description": "Default true for outbox, false for list."},
        "limit": {"type": "integer", "default": 20},
    }),
    _tool("aidememo_profile_export", "A read-only project profile from current typed facts.", {
        "limit": _n(80, "Facts considered."), "source_id": _s(_SOURCE), "include_sessions": _b(False),
    }),
]

# Upstream tools this kit does not serve: calling one answers upstream's unknown-tool error.
UPSTREAM_ONLY = frozenset({
    "aidememo_search", "aidememo_feedback", "aidememo_fact_pin", "aidememo_extract", "aidememo_path",
    "aidememo_entity_get", "aidememo_traverse", "aidememo_aggregate", "aidememo_query", "aidememo_entity_describe",
    "aidememo_fact_add_many", "aidememo_fact_supersede", "aidememo_fact_archive", "aidememo_fact_edit",
    "aidememo_pinned_context", "aidememo_fact_list", "aidememo_entity_list", "aidememo_doctor", "aidememo_overview",
    "aidememo_recent", "aidememo_context", "aidememo_session_canvas",
})
