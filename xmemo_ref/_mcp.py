"""Streamable-HTTP MCP at ``POST /mcp``: JSON-RPC 2.0, answered as JSON or as one SSE event.

What the clients do (spec §8): they POST one JSON-RPC message with ``accept: application/json,
text/event-stream``, ``initialize`` with protocol version ``2024-11-05``, then
``notifications/initialized``, then ``tools/call``; the server's ``mcp-session-id`` header is
echoed back. The answer format follows the first of the two media types in the client's
``Accept`` (JSON when both are listed in that order, SSE when ``text/event-stream`` comes
first or alone). A session id the server does not know, or one opened with another credential,
answers 404 so the client starts over, as the MCP transport specifies. Sessions live in the
database, so several server processes on one file serve one session.

Tools call the same ``Operations`` as the REST routes, after mapping their published argument
names onto the REST bodies, so both surfaces enforce one set of bounds. Credential failures are
HTTP 401/403 before any JSON-RPC; a refusal inside a tool (missing scope, bad argument) is a tool
result with ``isError: true`` naming the reason.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from typing import Any, Final

from refkit.response import Response
from refkit.version import VERSION
from ._decode import decode_event, decode_recall, decode_remember, decode_search, decode_update_state
from ._errors import RequestError, XMemoError
from ._http import HttpRequest, json_response
from ._operations import Operations
from ._records import READ_SCOPE, Caller
from ._recall import TOKEN_ESTIMATE
from ._schemas import READ_ONLY_TOOLS, TOOL_DESCRIPTIONS, TOOLS

__all__ = ["McpEndpoint", "PROTOCOL_VERSIONS", "SESSION_HEADER", "render_context"]

PROTOCOL_VERSIONS: Final = ("2024-11-05", "2025-03-26", "2025-06-18")
SESSION_HEADER: Final = "mcp-session-id"
SERVER_INFO: Final = {"name": "aidememo-ref-xmemo", "version": VERSION}
CONTEXT_HEADING: Final = "### XMemo Context"

# A tool call's caller depends on its agent arguments (tool arguments override the headers).
CallerFactory = Callable[[str | None, str | None], Caller]


class _RpcError(XMemoError):
    def __init__(self, code: int, message: str, http_status: int = 200) -> None:
        super().__init__(message)
        self.code, self.message, self.http_status = code, message, http_status


@cache
def _tool_validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(TOOLS[name])


def _wants_sse(accept: str) -> bool:
    """True when ``text/event-stream`` is listed before ``application/json`` (or alone)."""
    kinds = [part.split(";")[0].strip().lower() for part in accept.split(",")]
    sse = kinds.index("text/event-stream") if "text/event-stream" in kinds else None
    plain = next((i for i, kind in enumerate(kinds) if kind in ("application/json", "application/*", "*/*")), None)
    return sse is not None and (plain is None or sse < plain)


def render_context(packet: dict[str, Any]) -> str:
    """The human-readable answer of ``recall_context``: a heading, the bounds, the packet, the boundaries."""
    budget, coverage, summary = packet["budget"], packet["coverage"], packet["agent_boundary"]
    lines = [
        CONTEXT_HEADING,
        f"query: {packet['query']}",
        f"items: {budget['used_items']} of {coverage['candidates']} visible (max_items {budget['max_items']}); "
        f"tokens: {budget['used_tokens']} of max_tokens {budget['max_tokens']} ({TOKEN_ESTIMATE})",
        f"caller: agent_id={summary['current_agent_id'] or 'none'} trust={summary['current_agent_trust']} "
        f"boundary_authority={summary['boundary_authority']}",
        "",
        packet["context_text"] or "No visible memory.",
    ]
    if packet["items"]:
        lines += ["", "#### Agent boundary"]
        lines += [f"[{item['rank']}] {json.dumps(item['agent_boundary'], ensure_ascii=False)}" for item in packet["items"]]
    return "\n".join(lines)


def _metadata(args: dict[str, Any]) -> dict[str, Any] | None:
    text = args.get("metadata_json")
    if text in (None, ""):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise RequestError.invalid_field(("arguments", "metadata_json"), "must be a JSON object")
    return value


def _drop_none(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


class McpEndpoint:
    """JSON-RPC over ``POST /mcp`` for an authenticated credential."""

    def __init__(self, ops: Operations, new_id: Callable[[], str]) -> None:
        self.ops = ops
        self.new_id = new_id

    def delete(self, request: HttpRequest, key_digest: bytes) -> Response:
        session = request.headers.get(SESSION_HEADER)
        if session is None or self.ops.store.session_owner(session) != key_digest:
            return json_response({"detail": "Unknown MCP session"}, 404)
        self.ops.store.end_session(session)
        return Response(204)

    def post(self, request: HttpRequest, key_digest: bytes, caller_for: CallerFactory) -> Response:
        sse = _wants_sse(request.headers.get("accept", "application/json"))
        session = request.headers.get(SESSION_HEADER)
        if session is not None and self.ops.store.session_owner(session) != key_digest:
            return json_response({"detail": "Unknown MCP session"}, 404)
        try:
            message = json.loads(request.body)
        except (ValueError, UnicodeDecodeError):
            return self._answer(None, error=_RpcError(-32700, "Parse error", 400), sse=sse)
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return self._answer(None, error=_RpcError(-32600, "Invalid Request: one JSON-RPC 2.0 object", 400),
                                sse=sse)
        if "method" not in message or "id" not in message:
            return Response(202)  # a notification, or a response to us: nothing to answer
        rpc_id = message["id"]
        headers: tuple[tuple[str, str], ...] = ()
        try:
            method, params = message["method"], message.get("params") or {}
            if not isinstance(params, dict):
                raise _RpcError(-32602, "params must be an object")
            if method == "initialize":
                result, session_id = self._initialize(params, key_digest)
                headers = ((SESSION_HEADER, session_id),)
            elif method == "ping":
                result = {}
            elif method == "tools/list":
                result = {"tools": [self._tool_entry(name) for name in TOOLS]}
            elif method == "tools/call":
                result = self._call(params, caller_for)
            else:
                raise _RpcError(-32601, f"Method not found: {method}")
        except _RpcError as error:
            return self._answer(rpc_id, error=error, sse=sse)
        return self._answer(rpc_id, result=result, sse=sse, headers=headers)

    # -- JSON-RPC framing ---------------------------------------------------------------------
    @staticmethod
    def _answer(rpc_id: object, *, result: object = None, error: _RpcError | None = None, sse: bool,
                headers: tuple[tuple[str, str], ...] = ()) -> Response:
        payload: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id}
        if error is None:
            payload["result"] = result
        else:
            payload["error"] = {"code": error.code, "message": error.message}
        text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
        status = 200 if error is None else error.http_status
        if sse:
            body = f"event: message\ndata: {text}\n\n".encode("utf-8")
            return Response(status, (("content-type", "text/event-stream"), ("cache-control", "no-cache")) + headers,
                            body)
        return json_response(text, status, headers)

    def _initialize(self, params: dict[str, Any], key_digest: bytes) -> tuple[dict[str, Any], str]:
        asked = params.get("protocolVersion")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[-1]
        session_id = self.new_id()
        self.ops.store.open_session(session_id, key_digest, version, self.ops.clock.now_ms())
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": SERVER_INFO,
            "instructions": "XMemo reference: recall_context returns a bounded packet; agent boundaries are "
                            "attribution only.",
        }, session_id

    @staticmethod
    def _tool_entry(name: str) -> dict[str, Any]:
        read_only = name in READ_ONLY_TOOLS
        return {"name": name, "description": TOOL_DESCRIPTIONS[name], "inputSchema": TOOLS[name],
                "annotations": {"readOnlyHint": read_only, "idempotentHint": read_only}}

    # -- tools ------------------------------------------------------------------------------
    def _call(self, params: dict[str, Any], caller_for: CallerFactory) -> dict[str, Any]:
        name, args = params.get("name"), params.get("arguments") or {}
        if name not in TOOLS:
            raise _RpcError(-32602, f"Unknown tool: {name}")
        if not isinstance(args, dict):
            raise _RpcError(-32602, "arguments must be an object")
        problems = sorted(_tool_validator(name).iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
        if problems:
            return self._tool_error("invalid_request", problems[0].message)
        try:
            text = self._run(name, args, caller_for)
        except RequestError as error:
            kind = {401: "authentication_required", 403: "permission_denied", 404: "not_found",
                    409: "conflict", 422: "invalid_request"}.get(error.status, "unavailable")
            detail = error.detail if isinstance(error.detail, str) else "; ".join(
                f"{'.'.join(map(str, item['loc']))}: {item['msg']}" for item in error.detail)
            return self._tool_error(kind, detail)
        return {"content": [{"type": "text", "text": text}], "isError": False}

    @staticmethod
    def _tool_error(kind: str, detail: str) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": f"{kind}: {detail}"}], "isError": True}

    def _run(self, name: str, args: dict[str, Any], caller_for: CallerFactory) -> str:
        ops = self.ops
        if name == "get_mcp_identity":
            return ops.identity_text(caller_for(None, None))
        if name == "recall_context":
            caller = caller_for(args.get("agent_id"), args.get("agent_instance_id"))
            ops.require(caller, READ_SCOPE)
            request = decode_recall(_drop_none({
                "query": args["query"], "max_items": args.get("max_items", args.get("limit")),
                "max_tokens": args.get("max_tokens"), "scope": args.get("scope"), "bucket": args.get("bucket"),
                "team_id": args.get("team_id"), "memory_type": args.get("memory_type"),
                "path": args.get("path_filter"), "prefer_working": args.get("prefer_working"),
            }))
            packet = ops.recall(caller, request)
            return json.dumps(packet, ensure_ascii=False) if args.get("output_json") else render_context(packet)
        if name == "search_memory":
            caller = caller_for(args.get("agent_id"), args.get("agent_instance_id"))
            ops.require(caller, READ_SCOPE)
            params = {key: str(value).lower() if isinstance(value, bool) else str(value)
                      for key, value in args.items() if key not in ("agent_id", "agent_instance_id")}
            if "path_filter" in params:
                params["path"] = params.pop("path_filter")
            return json.dumps(ops.search(caller, decode_search(params)), ensure_ascii=False)
        if name == "remember":
            caller = caller_for(args.get("agent_id"), args.get("device_id"))
            ops.require(caller, "memory:write")
            body = _drop_none({key: args.get(key) for key in (
                "content", "path", "scope", "dedupe", "team_id", "confidence", "importance", "expires_at",
                "memory_type", "semantic_key")})
            body["bucket"] = args.get("bucket", "public")  # the hosted tool's default bucket
            if (metadata := _metadata(args)) is not None:
                body["metadata"] = metadata
            write = decode_remember(body)._replace(memory_id=args.get("memory_id"))
            return ops.write(caller, write, route="remember")[0]
        if name == "update_state":
            caller = caller_for(None, None)
            ops.require(caller, "memory:write")
            body = _drop_none({key: args.get(key) for key in (
                "scope", "bucket", "content", "state_key", "next_action", "ttl_seconds", "current_task",
                "blocked_reason")})
            if (metadata := _metadata(args)) is not None:
                body["metadata"] = metadata
            return ops.write(caller, decode_update_state(body), route="update_state")[0]
        assert name == "record_event"
        caller = caller_for(None, None)
        ops.require(caller, "memory:write")
        body = _drop_none({key: args.get(key) for key in ("content", "scope", "bucket", "event_type", "session_id")})
        if (metadata := _metadata(args)) is not None:
            body["metadata"] = metadata
        return ops.write(caller, decode_event(body), route="timeline_event")[0]
