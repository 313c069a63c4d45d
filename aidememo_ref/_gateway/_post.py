"""One MCP request: envelope and header rules, bearer identity, then a tool call as a REST call.

The check order and every refusal are upstream's ``mcp_post`` (wire spec §1.18): path project →
JSON body (-32700) → JSON-RPC shape (-32600) → ``Mcp-Protocol-Version`` (-32022) → ``Mcp-Method``
and ``Mcp-Name`` (-32020) → ``params._meta`` version (-32022) → ``Authorization`` present (else the
REST 401 body) → identity through the REST route (its error passed through verbatim) → method.
A tool call always answers 200 once dispatched; the REST status only sets ``isError``. Every
answer is compact JSON with sorted keys, as upstream's ``json!`` values serialize.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from aidememo_wire.canonical import Json, canonical_json
from aidememo_ref._decode import type_name  # serde's wording of a value's type
from aidememo_wire.errors import ErrorCode, LedgerError
from aidememo_wire.ids import id_problem
from .._errors import AideMemoRefError

from ._bindings import Binding, Bindings
from ._tools import ParamsError, RestCall, ensure_only, rest_call, tool_list

__all__ = ["Gateway", "PROTOCOL_VERSION"]

PROTOCOL_VERSION: Final = "2026-07-28"
SERVER_NAME: Final = "aidememo-server"
TOOLS_TTL_MS: Final = 60_000
_JSON: Final = (("content-type", "application/json"),)
_NOT_FOUND: Final = {"error": {"code": "resource_not_found", "message": "resource not found"}}
# Tools whose arguments carry a source, and what a bound token's source confines in the others.
_SOURCE_ARGUMENT: Final = ("search", "session_create", "handoff_list")
_SESSION_WRITES: Final = ("fact_create", "handoff_context_create", "handoff_send")

class _Request(Protocol):
    """What the gateway reads of the service's request: its headers."""

    def header(self, name: bytes) -> bytes | None: ...


Handle = Callable[[str, str, list[tuple[bytes, bytes]], bytes], Any]
MakeResponse = Callable[[int, tuple[tuple[str, str], ...], bytes], Any]


class _Failure(AideMemoRefError):
    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


def _text(value: bytes | None) -> str | None:
    """``HeaderValue::to_str``: visible ASCII (and tab/space) only, else as if absent."""
    if value is None or any(b < 0x20 and b != 0x09 or b >= 0x7F for b in value):
        return None
    return value.decode("ascii")


def _envelope(raw: Json) -> tuple[Json, str, Json]:
    """``McpRequest``'s serde decoding: (id, method, params)."""
    if not isinstance(raw, dict):
        raise _Failure(400, -32600, f"invalid MCP request: invalid type: {type_name(raw)}, expected struct McpRequest")
    for field in ("jsonrpc", "id", "method"):
        if field not in raw:
            raise _Failure(400, -32600, f"invalid MCP request: missing field `{field}`")
    for field in ("jsonrpc", "method"):
        if not isinstance(raw[field], str):
            raise _Failure(400, -32600, f"invalid MCP request: invalid type: {type_name(raw[field])}, expected a string")
    method = raw["method"]
    if raw["jsonrpc"] != "2.0" or raw["id"] is None or not isinstance(method, str):
        raise _Failure(400, -32600, "MCP requests must use JSON-RPC 2.0 and include a non-null id")
    return raw["id"], method, raw.get("params")


class Gateway:
    """The MCP route of one service.

    Args:
        handle: the service's request function for the REST calls made on the caller's behalf
            (the service lets a bound token make those, and only those).
        make_response: builds the service's response type.
        bindings: bearer tokens confined to one source and actor (``--auth-bindings-file``).
        version: reported in ``io.modelcontextprotocol/serverInfo`` (default: the kit's).
    """

    def __init__(self, handle: Handle, make_response: MakeResponse, bindings: Bindings | None,
                 version: str | None = None) -> None:
        self._handle = handle
        self._make = make_response
        self.bindings = bindings
        self._version = version or _package_version()

    # -- answers -------------------------------------------------------------------------------
    def _answer(self, status: int, value: object) -> Any:
        return self._make(status, _JSON, canonical_json(value).encode("utf-8"))

    def _error(self, status: int, request_id: object, code: int, message: str, data: object = None) -> Any:
        error: dict[str, object] = {"code": code, "message": message}
        if data is not None:
            error["data"] = data
        return self._answer(status, {"jsonrpc": "2.0", "id": request_id, "error": error})

    def _rest(self, method: str, project_id: str, path: str, authorization: bytes,
              body: dict[str, Any] | None = None) -> tuple[int, bytes, Any]:
        """One REST request on the caller's behalf: (status, raw body, its JSON or None)."""
        headers = [(b"authorization", authorization)]
        raw = b""
        if body is not None:
            headers.append((b"content-type", b"application/json"))
            raw = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        response = self._handle(method, f"/v1/projects/{project_id}{path}", headers, raw)
        try:
            parsed = json.loads(response.body) if response.body else None
        except ValueError:
            parsed = None
        return response.status, response.body, parsed

    # -- the route ------------------------------------------------------------------------------
    def post(self, project_id: str, request: _Request, read_json: Callable[[Any], Json]) -> Any:
        if (problem := id_problem(project_id)) is not None:
            return self._error(400, None, -32602, f"invalid project_id: {problem}")
        try:
            raw = read_json(request)
        except LedgerError as exc:
            return self._error(400, None, -32700, exc.message.removeprefix("invalid command: "))
        try:
            request_id, method, params = _envelope(raw)
        except _Failure as failure:
            return self._error(failure.status, None, failure.code, failure.message)
        version = _text(request.header(b"mcp-protocol-version"))
        if version != PROTOCOL_VERSION:
            return self._error(400, request_id, -32022, f"unsupported MCP protocol version {version or 'missing'};"
                               f" supported={PROTOCOL_VERSION}", {"supported": [PROTOCOL_VERSION]})
        try:
            self._check_headers(request, method, params)
        except _Failure as failure:
            return self._error(failure.status, request_id, failure.code, failure.message)
        if (problem := self._meta_problem(params)) is not None:
            return self._error(400, request_id, -32022, problem)
        authorization = request.header(b"authorization")
        if authorization is None:
            return self._make(401, _JSON, b'{"error":{"code":"authentication_failed","message":"authentication failed"}}')
        status, body, identity = self._rest("GET", project_id, "/identity", authorization)
        if not 200 <= status < 300:
            return self._make(status, _JSON, body)
        binding = self._binding(authorization)
        if binding is not None and binding.actor_id != identity.get("actor_id"):
            error = LedgerError(ErrorCode.IDENTITY_MISMATCH, "authenticated identity does not match project membership")
            return self._make(error.status, _JSON, json.dumps(
                {"error": {"code": error.code.value, "message": error.message}}, separators=(",", ":")).encode())
        try:
            if method == "server/discover":
                result: dict[str, Any] = self._discover()
            elif method == "tools/list":
                result = self._list(params, identity.get("role"))
            elif method == "tools/call":
                result = self._call(project_id, authorization, params, binding)
            else:
                raise _Failure(404, -32601, f"unsupported MCP method {method}")
        except _Failure as failure:
            return self._error(failure.status, request_id, failure.code, failure.message)
        except ParamsError as exc:
            return self._error(400, request_id, -32602, str(exc))
        result["_meta"] = {**(result.get("_meta") or {}),
                           "io.modelcontextprotocol/serverInfo": {"name": SERVER_NAME, "version": self._version}}
        return self._answer(200, {"jsonrpc": "2.0", "id": request_id, "result": result})

    def _binding(self, authorization: bytes) -> Binding | None:
        if self.bindings is None or not authorization.startswith(b"Bearer "):
            return None
        return self.bindings.lookup(authorization[7:])

    @staticmethod
    def _check_headers(request: _Request, method: str, params: object) -> None:
        header_method = _text(request.header(b"mcp-method"))
        if header_method is None:
            raise _Failure(400, -32020, "missing Mcp-Method header")
        if header_method != method:
            raise _Failure(400, -32020, f"Mcp-Method header {header_method} does not match body method {method}")
        if method == "tools/call":
            name = params.get("name") if isinstance(params, dict) else None
            if not isinstance(name, str):
                raise _Failure(400, -32020, "tools/call params.name must be a string")
            header_name = _text(request.header(b"mcp-name"))
            if header_name is None:
                raise _Failure(400, -32020, "tools/call requires Mcp-Name")
            if header_name != name:
                raise _Failure(400, -32020, f"Mcp-Name header {header_name} does not match body tool name {name}")

    @staticmethod
    def _meta_problem(params: object) -> str | None:
        meta = params.get("_meta") if isinstance(params, dict) else None
        if meta is None:
            return f"MCP {PROTOCOL_VERSION} request params must include _meta"
        version = meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
        if not isinstance(version, str):
            return "request _meta must include io.modelcontextprotocol/protocolVersion"
        if version != PROTOCOL_VERSION:
            return f"request metadata protocol version {version} is unsupported; supported={PROTOCOL_VERSION}"
        return None

    # -- methods --------------------------------------------------------------------------------
    @staticmethod
    def _discover() -> dict[str, Any]:
        return {"resultType": "complete", "supportedVersions": [PROTOCOL_VERSION], "capabilities": {"tools": {}},
                "instructions": "Read with search and resource_get; write with the typed session, fact and handoff"
                                " tools. Tenant, project and actor come from this endpoint's bearer token and cannot"
                                " be overridden.",
                "ttlMs": TOOLS_TTL_MS, "cacheScope": "private"}

    @staticmethod
    def _list(params: object, role: object) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise ParamsError("tools/list params must be an object")
        ensure_only(params, ("cursor", "_meta"))
        if params.get("cursor") is not None:
            raise ParamsError("AideMemo tools/list currently has one deterministic page; cursor must be omitted")
        return {"resultType": "complete", "tools": tool_list(role == "reader"), "ttlMs": TOOLS_TTL_MS,
                "cacheScope": "private"}

    def _call(self, project_id: str, authorization: bytes, params: object, binding: Binding | None) -> dict[str, Any]:
        if not isinstance(params, dict):
            raise ParamsError("tools/call params must be an object")
        ensure_only(params, ("name", "arguments", "_meta", "inputResponses", "requestState"))
        name = params.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ParamsError("name must be a non-empty string")
        arguments = params.get("arguments", {})
        if not isinstance(arguments, dict):
            raise ParamsError("tools/call arguments must be an object")
        if binding is not None:
            arguments = _bound_arguments(name, arguments, binding)
        call = rest_call(name, arguments)
        if call is None:
            raise _Failure(404, -32601, f"unknown tool {name}")
        if binding is not None and (refused := self._outside_source(project_id, authorization, name, call,
                                                                   arguments, binding)) is not None:
            return _tool_result(*refused)
        status, body, parsed = self._rest(call.method, project_id, call.path, authorization, call.body)
        if binding is not None and 200 <= status < 300 and name in ("resource_get", "handoff_status"):
            record = (parsed.get("state") or {}).get("body") if name == "resource_get" else parsed.get("record")
            if not _in_source(record, binding):
                return _tool_result(404, _NOT_FOUND)
        return _tool_result(status, parsed if parsed is not None else
                            {"http_status": status, "body": body.decode("utf-8", "replace")})

    def _outside_source(self, project_id: str, authorization: bytes, name: str, call: RestCall,
                        arguments: Mapping[str, Any], binding: Binding) -> tuple[int, Any] | None:
        """Before a bound token's write: the session or handoff must lie in the bound source."""
        if name in _SESSION_WRITES:
            path = f"/resources/session/{arguments['session_id']}"
            status, _, parsed = self._rest("GET", project_id, path, authorization)
            body = (parsed.get("state") or {}).get("body") if status == 200 and isinstance(parsed, dict) else None
            return None if _in_source(body, binding) else (404, _NOT_FOUND)
        if name in ("handoff_accept", "handoff_return"):
            status, raw, parsed = self._rest("GET", project_id, f"/handoffs/{arguments['handoff_id']}", authorization)
            if status != 200 or not isinstance(parsed, dict):
                return status, parsed if parsed is not None else {"http_status": status, "body": raw.decode()}
            return None if _in_source(parsed.get("record"), binding) else (404, _NOT_FOUND)
        return None


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aidememo-conformance")
    except PackageNotFoundError:
        return "0.0.0"


def _in_source(record: object, binding: Binding) -> bool:
    return isinstance(record, dict) and record.get("source_id") == binding.source_id


def _bound_arguments(name: str, arguments: Mapping[str, Any], binding: Binding) -> dict[str, Any]:
    """Appendix B's rule on the gateway's tools: a bound token's source and actor are fixed; another
    non-null value is refused; the fixed source is filled in where a tool takes one."""
    fixed = dict(arguments)
    for field, expected in (("source_id", binding.source_id), ("actor_id", binding.actor_id)):
        value = fixed.pop(field, None)
        if value is not None:
            if not isinstance(value, str):
                raise ParamsError(f"{field} must be a string or null")
            if value.strip() != expected:
                raise ParamsError(f'authenticated token fixes {field}={json.dumps(expected)}; caller override denied')
    if name in _SOURCE_ARGUMENT:
        fixed["source_id"] = binding.source_id
    return fixed


def _tool_result(status: int, structured: Any) -> dict[str, Any]:
    failed = not 200 <= status < 300
    text = canonical_json(structured)
    return {"resultType": "complete", "content": [{"type": "text", "text": (
        f"AideMemo tool request failed with HTTP {status}: {text}" if failed else text)}],
        "structuredContent": structured, "isError": failed}
