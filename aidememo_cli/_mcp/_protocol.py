"""Newline-delimited JSON-RPC 2.0 as upstream's ``aidememo mcp`` speaks it.

One request per line in, one response per line out (compact JSON, sorted keys as upstream's
serde_json writes them). Notifications get no answer; a line that is not a request gets
``-32700``; an unknown method ``-32601``; ``tools/call`` params that are not ``{name,
arguments?}`` get ``-32602``. A tool's own failure is a result with ``isError: true`` and the
text ``{"error_kind","message","tool"}``, its kind classified from the message as upstream does.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from aidememo_cli._local._errors import AideMemoCliError

__all__ = ["PROTOCOL_VERSION", "SERVER_NAME", "ToolBackend", "ToolError", "ToolResult", "dispatch", "serve",
           "classify_error", "encode"]

PROTOCOL_VERSION = "2025-06-18"
SERVER_NAME = "aidememo"


class ToolError(AideMemoCliError):
    """A tool refused or failed; ``str()`` is the message the client sees."""


class ToolResult:
    """A tool's answer: JSON text for one text block."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


class ToolBackend(Protocol):
    """Where tools run: the local store, or (later) a remote profile."""

    def tools(self) -> list[dict[str, Any]]: ...

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult: ...


def classify_error(message: str) -> str:
    """Upstream's ``classify_error``: the error kind from the message's words."""
    lower = message.lower()
    if lower.startswith(("unknown tool:", "unknown mode:")):
        return "unknown_tool"
    if any(word in lower for word in (" required", "missing field", "invalid params", "must be ")) or lower.startswith(
        "invalid "
    ):
        return "invalid_input"
    if any(word in lower for word in ("not found", "does not exist", "no such")):
        return "not_found"
    if any(word in lower for word in ("already exists", "conflict", "superseded", "duplicate")):
        return "conflict"
    return "internal"


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def encode(response: Mapping[str, Any]) -> str:
    """The response as upstream writes it: its own fields in declaration order (``jsonrpc``,
    ``id``, ``result``/``error``), everything inside ``result`` with sorted keys."""
    parts = [f'"jsonrpc":"2.0"', f'"id":{_compact(response.get("id"))}']
    if "result" in response:
        parts.append(f'"result":{_compact(response["result"])}')
    else:
        error = response["error"]
        parts.append('"error":{"code":%d,"message":%s}' % (error["code"], json.dumps(error["message"], ensure_ascii=False)))
    return "{" + ",".join(parts) + "}"


def _error(request_id: object, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _parse(line: str) -> dict[str, Any] | str:
    """The request, or the parse error's text."""
    try:
        value = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"{exc}"
    if not isinstance(value, dict):
        return "invalid type: expected a JSON-RPC request object"
    for field in ("jsonrpc", "method"):
        if field not in value:
            return f"missing field `{field}`"
        if not isinstance(value[field], str):
            return f"invalid type: `{field}` must be a string"
    return value


def dispatch(request: dict[str, Any], backend: ToolBackend, version: str) -> dict[str, Any] | None:
    request_id = request.get("id")
    method: str = request["method"]
    if request_id is None and method.startswith("notifications/"):
        return None
    if method == "initialize":
        result: Any = {"protocolVersion": PROTOCOL_VERSION, "capabilities": {"tools": {"listChanged": False}},
                       "serverInfo": {"name": SERVER_NAME, "version": version}}
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": backend.tools()}
    elif method == "tools/call":
        params = request.get("params")
        if not isinstance(params, dict) or not isinstance(params.get("name"), str):
            return _error(request_id, -32602, "Invalid params: expected {name: string, arguments?: object}")
        name = params["name"]
        arguments = params.get("arguments")
        try:
            answer = backend.call(name, arguments if isinstance(arguments, dict) else {})
            result = {"content": [{"type": "text", "text": answer.text}]}
        except ToolError as exc:
            text = _compact({"error_kind": classify_error(str(exc)), "tool": name, "message": str(exc)})
            result = {"content": [{"type": "text", "text": text}], "isError": True}
    else:
        return _error(request_id, -32601, f"Method not found: {method}")
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def serve(lines: Iterable[str], write: Callable[[str], None], backend: ToolBackend, version: str) -> None:
    """Answer every request line until the input ends."""
    for raw in lines:
        line = raw.strip()
        if not line:
            continue
        parsed = _parse(line)
        response = _error(None, -32700, f"Parse error: {parsed}") if isinstance(parsed, str) else dispatch(
            parsed, backend, version)
        if response is not None:
            write(encode(response) + "\n")
