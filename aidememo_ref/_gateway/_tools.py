"""The gateway's ten tools: their schemas, and each call's arguments as one REST request. Pure.

Names, argument names, types, bounds, required lists, annotations and every argument refusal are
upstream's (``mcp.rs``); titles and descriptions are the kit's words. No schema names a tenant,
project or actor: identity is the bearer's. ``operation_id`` becomes the REST ``command_id``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from aidememo_wire.ids import id_problem
from .._errors import AideMemoRefError

__all__ = ["READ_TOOLS", "WRITE_TOOLS", "ParamsError", "RestCall", "ensure_only", "rest_call", "tool_list"]

READ_TOOLS: Final = ("search", "resource_get", "handoff_list", "handoff_status")
WRITE_TOOLS: Final = ("session_create", "fact_create", "handoff_context_create", "handoff_send", "handoff_accept",
                      "handoff_return")
_READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
_WRITES = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}


class ParamsError(AideMemoRefError):
    """JSON-RPC ``-32602``: the message is upstream's."""


@dataclass(frozen=True, slots=True)
class RestCall:
    """The REST request a tool call becomes (path relative to ``/v1/projects/{p}``)."""

    method: str
    path: str
    body: dict[str, Any] | None = None


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object", "properties": properties,
            "required": required, "additionalProperties": False}


def _tool(name: str, title: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"name": name, "title": title, "description": description, "inputSchema": _schema(properties, required),
            "annotations": _WRITES if name in WRITE_TOOLS else _READ_ONLY}


_S: Final = {"type": "string"}
_NULLABLE: Final = {"type": ["string", "null"]}
_TOOLS: Final = {
    "search": _tool("search", "Search facts", "Lexical search over the project's facts, optionally in one source and"
                    " no older than a sequence.", {
                        "q": {"type": "string", "minLength": 1}, "source_id": _S,
                        "limit": {"type": "integer", "minimum": 1, "maximum": 100},
                        "at_least_seq": {"type": "integer", "minimum": 0}}, ["q"]),
    "resource_get": _tool("resource_get", "Read one resource", "One canonical resource, as the bearer may see it.",
                          {"kind": _S, "id": _S}, ["kind", "id"]),
    "handoff_list": _tool("handoff_list", "Handoff mailbox", "The bearer's inbox or outbox, newest transition first.", {
        "box": {"type": "string", "enum": ["inbox", "outbox"]}, "source_id": _S, "include_completed": {"type": "boolean"},
        "before_seq": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 1, "maximum": 100},
    }, ["box"]),
    "handoff_status": _tool("handoff_status", "Handoff status", "One handoff the bearer sent or received.",
                            {"handoff_id": _S}, ["handoff_id"]),
    "session_create": _tool("session_create", "Create a session", "A canonical tracked session; retrying with the same"
                            " operation_id is safe.", {
                                "operation_id": _S, "session_id": _S, "source_id": _NULLABLE,
                                "topic": {"type": "string", "minLength": 1}}, ["operation_id", "session_id", "topic"]),
    "fact_create": _tool("fact_create", "Create a fact", "Evidence attached to an existing canonical session.", {
        "operation_id": _S, "fact_id": _S, "session_id": _S, "content": {"type": "string", "minLength": 1},
    }, ["operation_id", "fact_id", "session_id", "content"]),
    "handoff_context_create": _tool("handoff_context_create", "Create a handoff context", "The immutable context packet"
                                    " a handoff points to.", {
                                        "operation_id": _S, "context_id": _S, "handoff_id": _S, "session_id": _S,
                                        "to_actor": _S, "content": {"type": "string", "minLength": 1}},
                                    ["operation_id", "context_id", "handoff_id", "session_id", "to_actor", "content"]),
    "handoff_send": _tool("handoff_send", "Send a handoff", "Route a session to another member; the sender is the"
                          " bearer.", {
                              "operation_id": _S, "handoff_id": _S, "session_id": _S, "to_actor": _S,
                              "focus": _NULLABLE, "done_when": _NULLABLE, "context_id": _NULLABLE},
                          ["operation_id", "handoff_id", "session_id", "to_actor"]),
    "handoff_accept": _tool("handoff_accept", "Accept a handoff", "Claim a handoff at the revision you read, with a"
                            " claim id you keep for its retries.", {
                                "operation_id": _S, "handoff_id": _S,
                                "expected_revision": {"type": "integer", "minimum": 1}, "claim_id": _S},
                            ["operation_id", "handoff_id", "expected_revision", "claim_id"]),
    "handoff_return": _tool("handoff_return", "Return a result", "Return result evidence under the active claim.", {
        "operation_id": _S, "handoff_id": _S, "expected_revision": {"type": "integer", "minimum": 1}, "claim_id": _S,
        "result_fact_id": _S, "outcome": {"type": "string", "enum": ["succeeded", "failed"]},
    }, ["operation_id", "handoff_id", "expected_revision", "claim_id", "result_fact_id", "outcome"]),
}


def tool_list(reader: bool) -> list[dict[str, Any]]:
    """A reader sees the four read tools; every other role all ten."""
    return [_TOOLS[name] for name in (READ_TOOLS if reader else READ_TOOLS + WRITE_TOOLS)]


# -- argument rules (mcp.rs's helpers) -----------------------------------------------------------
def ensure_only(args: Mapping[str, Any], allowed: tuple[str, ...]) -> None:
    # serde_json's map is sorted, so "the first unexpected argument" is the first in key order.
    for key in sorted(args):
        if key not in allowed:
            raise ParamsError(f"unexpected argument {key}")


def _required_string(args: Mapping[str, Any], key: str) -> str:
    value = args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ParamsError(f"{key} must be a non-empty string")
    return value


def _optional_string(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ParamsError(f"{key} must be a string or null")
    return value


def _u64(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 64


def _required_u64(args: Mapping[str, Any], key: str) -> int:
    value = args.get(key)
    if not _u64(value):
        raise ParamsError(f"{key} must be an unsigned integer")
    assert isinstance(value, int)
    return value


def _identifier(args: Mapping[str, Any], key: str) -> str:
    value = _required_string(args, key)
    if (problem := id_problem(value)) is not None:
        raise ParamsError(f"invalid {key}: invalid resource_id: {problem}")
    return value


def encode_query(value: str) -> str:
    """Every byte but RFC 3986's unreserved characters as ``%XX`` (upper case)."""
    return "".join(chr(b) if chr(b).isascii() and (chr(b).isalnum() or chr(b) in "-_.~") else f"%{b:02X}"
                   for b in value.encode("utf-8"))


def _query(args: Mapping[str, Any], pieces: list[str], key: str, kind: str) -> None:
    if key not in args:
        return
    value = args[key]
    if kind == "string":
        text = _optional_string(args, key)
        if text is not None:
            pieces.append(f"{key}={encode_query(text)}")
    elif kind == "u64":
        if not _u64(value):
            raise ParamsError(f"{key} must be an unsigned integer")
        pieces.append(f"{key}={value}")
    elif not isinstance(value, bool):
        raise ParamsError(f"{key} must be boolean")
    else:
        pieces.append(f"{key}={'true' if value else 'false'}")


def _create(args: Mapping[str, Any], route: str, ids: tuple[str, ...], texts: tuple[str, ...] = (),
            optional: tuple[str, ...] = ()) -> RestCall:
    command_id = _identifier(args, "operation_id")  # upstream's json! evaluates it first
    payload: dict[str, Any] = {}
    for key in ids:
        payload[key] = _identifier(args, key)
    for key in texts:
        payload[key] = _required_string(args, key)
    for key in optional:
        payload[key] = _optional_string(args, key)
    return RestCall("POST", route, {"command_id": command_id, "payload": payload})


def rest_call(name: str, args: Mapping[str, Any]) -> RestCall | None:
    """The REST request for tool ``name``; None for an unknown tool. Raises ``ParamsError``."""
    if name == "search":
        ensure_only(args, ("q", "source_id", "limit", "at_least_seq"))
        pieces = [f"q={encode_query(_required_string(args, 'q'))}"]
        _query(args, pieces, "source_id", "string")
        _query(args, pieces, "limit", "u64")
        _query(args, pieces, "at_least_seq", "u64")
        return RestCall("GET", "/search?" + "&".join(pieces))
    if name == "resource_get":
        ensure_only(args, ("kind", "id"))
        return RestCall("GET", f"/resources/{_identifier(args, 'kind')}/{_identifier(args, 'id')}")
    if name == "session_create":
        ensure_only(args, ("operation_id", "session_id", "source_id", "topic"))
        _identifier(args, "operation_id")
        session_id, topic = _identifier(args, "session_id"), _required_string(args, "topic")
        return RestCall("POST", "/sessions", {"command_id": args["operation_id"], "payload": {
            "session_id": session_id, "source_id": _optional_string(args, "source_id"), "topic": topic}})
    if name == "fact_create":
        ensure_only(args, ("operation_id", "fact_id", "session_id", "content"))
        return _create(args, "/facts", ("fact_id", "session_id"), ("content",))
    if name == "handoff_context_create":
        ensure_only(args, ("operation_id", "context_id", "handoff_id", "session_id", "to_actor", "content"))
        return _create(args, "/handoff-contexts", ("context_id", "handoff_id", "session_id", "to_actor"), ("content",))
    if name == "handoff_send":
        ensure_only(args, ("operation_id", "handoff_id", "session_id", "to_actor", "focus", "done_when", "context_id"))
        return _create(args, "/handoffs", ("handoff_id", "session_id", "to_actor"), (),
                       ("focus", "done_when", "context_id"))
    if name == "handoff_list":
        ensure_only(args, ("box", "source_id", "include_completed", "before_seq", "limit"))
        box = _required_string(args, "box")
        if box not in ("inbox", "outbox"):
            raise ParamsError("box must be inbox or outbox")
        pieces = [f"box={box}"]
        _query(args, pieces, "source_id", "string")
        _query(args, pieces, "include_completed", "bool")
        _query(args, pieces, "before_seq", "u64")
        _query(args, pieces, "limit", "u64")
        return RestCall("GET", "/handoffs?" + "&".join(pieces))
    if name == "handoff_status":
        ensure_only(args, ("handoff_id",))
        return RestCall("GET", f"/handoffs/{_identifier(args, 'handoff_id')}")
    if name == "handoff_accept":
        ensure_only(args, ("operation_id", "handoff_id", "expected_revision", "claim_id"))
        handoff_id = _identifier(args, "handoff_id")
        return RestCall("POST", f"/handoffs/{handoff_id}/accept", {
            "command_id": _identifier(args, "operation_id"), "expected_revision": _required_u64(args, "expected_revision"),
            "payload": {"claim_id": _identifier(args, "claim_id")}})
    if name == "handoff_return":
        ensure_only(args, ("operation_id", "handoff_id", "expected_revision", "claim_id", "result_fact_id", "outcome"))
        handoff_id = _identifier(args, "handoff_id")
        outcome = _required_string(args, "outcome")
        if outcome not in ("succeeded", "failed"):
            raise ParamsError("outcome must be succeeded or failed")
        return RestCall("POST", f"/handoffs/{handoff_id}/return", {
            "command_id": _identifier(args, "operation_id"), "expected_revision": _required_u64(args, "expected_revision"),
            "payload": {"claim_id": _identifier(args, "claim_id"), "result_fact_id": _identifier(args, "result_fact_id"),
                        "outcome": outcome}})
    return None
