"""Request schemas as data: the REST bodies the reference accepts and the MCP tools' input schemas.

REST bodies list the fields the published clients send (spec §3, §4.1, §12) with the bounds the
reference enforces; unknown fields are ignored, as a FastAPI model ignores them. MCP input
schemas carry the argument names and defaults published for the hosted tools (spec §8.1); the
tools map their arguments onto the REST bodies, so one set of bounds applies to both surfaces.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["MEMORY_TYPES", "REST", "TOOLS", "TOOL_DESCRIPTIONS", "READ_ONLY_TOOLS"]

MEMORY_TYPES: Final = ("auto", "semantic", "episodic", "procedural", "working", "identity")
_SLUG: Final = "^[a-z0-9][a-z0-9_.:-]{0,127}$"  # MAF's state_key / event_type grammar


def _text(limit: int, *, nullable: bool = False, wildcard_free: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": ["string", "null"] if nullable else "string", "minLength": 1, "maxLength": limit}
    if wildcard_free:
        schema["pattern"] = "^[^%*]+$"  # % and * are read wildcards, never a stored value
    return schema


_UNIT: Final = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
_OBJECT: Final = {"type": ["object", "null"]}
_STAMP: Final = {"type": ["string", "null"], "minLength": 1, "maxLength": 64}
_IDEMPOTENCY: Final = {"type": "string", "minLength": 1, "maxLength": 255}
_CONTENT: Final = {"type": "string", "minLength": 1, "maxLength": 65_536}
_COMMON_WRITE: Final = {
    "bucket": _text(128, wildcard_free=True),
    "scope": _text(256, nullable=True, wildcard_free=True),
    "team_id": _text(128, nullable=True),
    "source": _text(128, nullable=True),
    "metadata": _OBJECT,
    "idempotency_key": _IDEMPOTENCY,
}
_READ_FILTERS: Final = {
    "scope": _text(256, nullable=True),
    "bucket": _text(128, nullable=True),
    "team_id": _text(128, nullable=True),
    "path": _text(512, nullable=True),
    "memory_type": {"enum": [*MEMORY_TYPES, "%", None]},
    "since": _STAMP,
    "until": _STAMP,
}

REST: Final[dict[str, dict[str, Any]]] = {
    "remember": {
        "type": "object",
        "required": ["content", "path"],
        "properties": {
            "content": _CONTENT,
            "path": _text(512),
            "memory_type": {"enum": list(MEMORY_TYPES)},
            "status": {"type": "string", "pattern": "^[a-z][a-z_]{0,31}$"},
            "importance": _UNIT,
            "confidence": _UNIT,
            "semantic_key": _text(512, nullable=True),
            "dedupe": {"type": ["boolean", "null"]},
            "expires_at": _STAMP,
            "provenance": _OBJECT,
            **_COMMON_WRITE,
        },
    },
    "update_state": {
        "type": "object",
        "properties": {
            "state_key": {"type": "string", "pattern": _SLUG},
            "content": {"type": ["string", "null"], "maxLength": 65_536},
            "current_task": {"type": ["string", "null"], "maxLength": 8_192},
            "next_action": {"type": ["string", "null"], "maxLength": 8_192},
            "blocked_reason": {"type": ["string", "null"], "maxLength": 8_192},
            "ttl_seconds": {"type": ["integer", "null"], "minimum": 0, "maximum": 2_592_000},
            **_COMMON_WRITE,
        },
    },
    "timeline_event": {
        "type": "object",
        "required": ["content"],
        "properties": {
            "content": _CONTENT,
            "event_type": {"type": "string", "pattern": _SLUG},
            "occurred_at": _STAMP,
            "session_id": _text(128, nullable=True),
            "path": _text(512, nullable=True),
            "importance": _UNIT,
            "confidence": _UNIT,
            **_COMMON_WRITE,
        },
    },
    "recall_context": {
        "type": "object",
        "required": ["query"],
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 4_000},
            "max_items": {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000},
            "max_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": 50_000},
            "prefer_working": {"type": ["boolean", "null"]},
            **_READ_FILTERS,
        },
    },
    "project_context": {
        "type": "object",
        "properties": {
            "team_id": _text(128, nullable=True),
            "max_items": {"type": ["integer", "null"], "minimum": 1, "maximum": 1_000},
            "max_tokens": {"type": ["integer", "null"], "minimum": 1, "maximum": 50_000},
            "durable_query": {"type": ["string", "null"], "maxLength": 4_000},
        },
    },
}

_S: Final = {"type": "string"}
_I: Final = {"type": "integer"}
_B: Final = {"type": "boolean"}
_AGENT_ARGS: Final = {"agent_id": _S, "agent_instance_id": _S}


def _tool(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(required)}


TOOLS: Final[dict[str, dict[str, Any]]] = {
    "recall_context": _tool({
        "query": _S, "limit": _I, "max_items": _I, "max_tokens": _I, "scope": _S,
        "bucket": {"type": "string", "default": "%"}, "team_id": _S, **_AGENT_ARGS,
        "memory_type": {"type": "string", "default": "auto"}, "path_filter": {"type": "string", "default": "%"},
        "prefer_working": _B, "output_json": _B,
    }, ("query",)),
    "search_memory": _tool({
        "query": _S, "limit": _I, "explain": _B, **_AGENT_ARGS,
        "memory_type": {"type": "string", "default": "%"}, "path_filter": {"type": "string", "default": "%"},
        "prefer_working": _B, "scope": _S, "team_id": _S,
    }, ("query",)),
    "remember": _tool({
        "content": _S, "path": _S, "scope": _S, "bucket": {"type": "string", "default": "public"}, "dedupe": _B,
        "team_id": _S, "agent_id": _S, "device_id": _S, "device_label": _S, "memory_id": _S,
        "confidence": {"type": "number"}, "importance": {"type": "number"}, "expires_at": _S,
        "memory_type": {"type": "string", "default": "auto"}, "semantic_key": _S,
        "metadata_json": {"type": "string", "default": "{}"}, "embedding_json": _S,
    }, ("content", "path")),
    "update_state": _tool({
        "scope": _S, "bucket": {"type": "string", "default": "work"}, "content": _S,
        "state_key": {"type": "string", "default": "active_task"}, "next_action": _S, "ttl_seconds": _I,
        "current_task": _S, "metadata_json": _S, "blocked_reason": _S,
    }),
    "record_event": _tool({
        "content": _S, "scope": _S, "bucket": {"type": "string", "default": "work"},
        "event_type": {"type": "string", "default": "event"}, "session_id": _S, "metadata_json": _S,
    }, ("content",)),
    "get_mcp_identity": _tool({}),
}

READ_ONLY_TOOLS: Final = frozenset({"recall_context", "search_memory", "get_mcp_identity"})

TOOL_DESCRIPTIONS: Final = {
    "recall_context": "Bounded context pack over every memory this credential may see; needs memory:read.",
    "search_memory": "Ranked search over this credential's memories; needs memory:read.",
    "remember": "Store a durable memory (semantic_key with the same content is a no-op); needs memory:write.",
    "update_state": "Upsert the versioned working-state slot bucket/scope/state_key; needs memory:write.",
    "record_event": "Append a timeline event (never deduplicated); needs memory:write.",
    "get_mcp_identity": "The owner, agent, tenant and scopes this connection resolves to.",
}
