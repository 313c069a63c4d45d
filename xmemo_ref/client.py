"""An httpx client with the XMemo SDK's workflow names, for any XMemo server (not only ours).

It knows wire shapes, never the reference's rules. The helpers follow the seed (XMemo's
agent-to-agent guide): ``task_start`` and ``task_end`` write a ``working`` memory with status
``started`` / ``completed``; ``record_decision`` and ``record_bug_fix`` write ``semantic``
memories; ``recall_context`` reads the bounded packet of ``POST /v1/recall/context``.

Every capture helper returns a ``CaptureResult``; check ``should_capture`` before assuming a
memory was written. A capture is declined before anything is sent when its content is empty,
larger than ``max_content_bytes``, or carries something that looks like a secret (the client's
own key included), when the server-resolved identity lacks ``memory:write``, or when no agent
identity resolves (neither the credential nor ``agent_id`` names one). Identity is resolved
once per client through MCP ``get_mcp_identity``, as ``xmemo-agent-framework`` does.

Retries (spec §1, what the published clients do): only reads are retried, and
``POST /v1/recall/context`` counts as a read: three attempts, 0.5 s then 1 s apart, on a
transport error, 429 or 5xx. Writes are sent once; a write whose answer never came reports
``write_outcome_unknown`` and is not retried.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import httpx

from refkit.version import VERSION
from ._errors import XMemoClientError, XMemoHTTPError, XMemoTransportError

__all__ = [
    "XMemoClient",
    "CaptureResult",
    "Identity",
    "RecallContext",
    "XMemoProtocolError",
    "Reason",
    "READ_ATTEMPTS",
    "is_read",
]

READ_ATTEMPTS: Final = 3
FIRST_DELAY_S: Final = 0.5
BACKOFF: Final = 2.0
DEFAULT_MAX_CONTENT_BYTES: Final = 8_192  # MAF's default capture bound
RECALL_PATH: Final = "/v1/recall/context"
MCP_PROTOCOL_VERSION: Final = "2024-11-05"  # what the published MCP clients send

# Secret shapes a capture must never carry: the kit's own list, after the categories the
# published clients refuse (bearer values, key=value credentials, vendor token prefixes,
# private keys, JWTs, URLs with a password).
_SECRETS: Final = tuple(re.compile(p) for p in (
    r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{12,}",
    r"(?i)\b(?:api[_-]?key|password|passwd|secret|token)\s*[:=]\s*\S{6,}",
    r"\b(?:sk-(?:ant-)?|ghp_|gho_|github_pat_|xox[abp]-|xmemo_)[A-Za-z0-9_-]{12,}",
    r"\bAKIA[0-9A-Z]{16}\b",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
    r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"(?i)\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@",
))


class XMemoProtocolError(XMemoClientError):
    """The server answered 2xx with something the protocol forbids (e.g. more items than asked)."""


class Reason:
    """``CaptureResult.reason`` values."""

    CAPTURED: Final = "captured"
    ALREADY_CAPTURED: Final = "already_captured"  # same semantic key and content, or an idempotent replay
    EMPTY_CONTENT: Final = "empty_content"
    CONTENT_TOO_LARGE: Final = "content_too_large"
    SECRET_IN_CONTENT: Final = "secret_in_content"
    MISSING_WRITE_SCOPE: Final = "missing_scope:memory:write"
    IDENTITY_UNRESOLVED: Final = "identity_unresolved"
    WRITE_OUTCOME_UNKNOWN: Final = "write_outcome_unknown"

    @staticmethod
    def refused(status: int) -> str:
        return f"refused_by_server:{status}"


@dataclass(frozen=True, slots=True, kw_only=True)
class CaptureResult:
    """What a capture helper did. ``should_capture`` is true only when the memory is stored."""

    should_capture: bool
    reason: str
    memory_id: str | None = None
    memory_type: str | None = None
    status: str | None = None
    audit_id: str | None = None
    answer: dict[str, Any] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    """The server-resolved identity (``get_mcp_identity``)."""

    owner_id: str
    agent_id: str | None
    tenant: dict[str, str]
    scopes: tuple[str, ...]
    agent_trust: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallContext:
    """The bounded packet of ``recall_context``; ``raw`` is the whole JSON answer."""

    version: object
    items: tuple[dict[str, Any], ...]
    context_text: str
    budget: dict[str, Any]
    audit_id: str | None
    raw: dict[str, Any] = field(repr=False)


def is_read(method: str, path: str) -> bool:
    """The retry rule's notion of a read: any GET, and the recall packet's POST."""
    return method == "GET" or (method == "POST" and path == RECALL_PATH)


def secret_problem(content: str, own_key: str) -> bool:
    return own_key in content or any(pattern.search(content) for pattern in _SECRETS)


def _audit(response: httpx.Response) -> str | None:
    value = response.headers.get("x-xmemo-audit-id")
    return None if value is None else str(value)


def _uuid(value: object) -> str | None:
    try:
        return str(uuid.UUID(str(value))) if value else None
    except ValueError:
        return None


def _identity_from_text(text: str) -> Identity:
    fields = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    tenant = json.loads(fields["Tenant"])
    agent = fields.get("Agent ID", "").strip()
    if not isinstance(tenant, dict) or not fields.get("Owner ID"):
        raise ValueError("identity without owner or tenant")
    return Identity(owner_id=fields["Owner ID"], agent_id=None if agent in ("", "none") else agent,
                    tenant={str(k): str(v) for k, v in tenant.items()},
                    scopes=tuple(s for s in fields.get("Scopes", "").split(", ") if s),
                    agent_trust=fields.get("Agent Trust"))


def _rpc_payload(response: httpx.Response, rpc_id: int) -> dict[str, Any]:
    """A JSON-RPC answer from a JSON body or from the SSE event carrying ``rpc_id``."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        matches = [e for e in events if isinstance(e, dict) and e.get("id") == rpc_id]
        if len(matches) != 1:
            raise ValueError("no single SSE event answers the call")
        return matches[0]
    payload = response.json()
    if not isinstance(payload, dict):
        raise ValueError("JSON-RPC answer is not an object")
    return payload


class XMemoClient:
    """A client for one XMemo API key and one agent identity.

    Args:
        base_url: the service origin (``https://xmemo.dev``, or a reference's loopback URL).
        api_key: sent as ``X-API-Key`` (``auth="api-key"``, the default) or ``Authorization:
            Bearer`` (``auth="bearer"``); never logged, printed or put in a body.
        agent_id, agent_instance_id: attribution headers ``X-Memory-OS-Agent-ID`` /
            ``X-Memory-OS-Agent-Instance-ID``. A credential bound to an agent keeps its own.
        transport: an httpx transport (tests pass the reference's in-process one).
        sleep: what waits between read retries (tests pass a recorder instead of sleeping).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        agent_id: str | None = None,
        agent_instance_id: str | None = None,
        auth: str = "api-key",
        transport: httpx.BaseTransport | None = None,
        timeout_s: float = 10.0,
        max_content_bytes: int = DEFAULT_MAX_CONTENT_BYTES,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if auth not in ("api-key", "bearer"):
            raise ValueError("auth must be 'api-key' or 'bearer'")
        if not api_key or any(ch in api_key for ch in "\r\n"):
            raise ValueError("api_key must be one non-empty line")
        headers = {"X-API-Key": api_key} if auth == "api-key" else {"Authorization": f"Bearer {api_key}"}
        if agent_id:
            headers["X-Memory-OS-Agent-ID"] = agent_id
        if agent_instance_id:
            headers["X-Memory-OS-Agent-Instance-ID"] = agent_instance_id
        self.base_url = base_url.rstrip("/")
        self.agent_id = agent_id
        self._key = api_key
        self._max_content_bytes = max_content_bytes
        self._sleep = sleep
        self._identity: Identity | None = None
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport,
                                  follow_redirects=False)

    def __repr__(self) -> str:
        return f"XMemoClient({self.base_url!r}, agent_id={self.agent_id!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> XMemoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transport --------------------------------------------------------------------------
    def request(self, method: str, path: str, *, json_body: object = None, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None) -> httpx.Response:
        """Send one request, retrying it only when it is a read (see the module docstring).

        Raises ``XMemoTransportError`` when no answer came, ``XMemoHTTPError`` for a non-2xx one.
        """
        attempts = READ_ATTEMPTS if is_read(method, path) else 1
        delay = FIRST_DELAY_S
        for attempt in range(1, attempts + 1):
            try:
                response = self._http.request(method, path, json=json_body, params=params, headers=headers)
            except httpx.HTTPError as exc:
                if attempt == attempts:
                    raise XMemoTransportError(f"{method} {path}: {type(exc).__name__}") from exc
            else:
                retryable = response.status_code == 429 or response.status_code >= 500
                if response.is_success or not retryable or attempt == attempts:
                    if not response.is_success:
                        raise XMemoHTTPError(response.status_code, self._detail(response), _audit(response))
                    return response
            self._sleep(delay)
            delay *= BACKOFF
        raise AssertionError("unreachable: the last attempt returns or raises")

    @staticmethod
    def _detail(response: httpx.Response) -> object:
        try:
            body = response.json()
        except ValueError:
            return response.text[:200]
        return body.get("detail", body) if isinstance(body, dict) else body

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError as exc:
            raise XMemoTransportError("the answer is not JSON") from exc
        if not isinstance(body, dict):
            raise XMemoTransportError("the answer is not a JSON object")
        return body

    # -- identity ---------------------------------------------------------------------------
    def identity(self) -> Identity:
        """The server-resolved owner, agent, tenant and scopes (MCP ``get_mcp_identity``), cached."""
        if self._identity is not None:
            return self._identity
        accept = {"accept": "application/json, text/event-stream"}
        start = self.request("POST", "/mcp", headers=accept, json_body={
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": MCP_PROTOCOL_VERSION, "capabilities": {},
                       "clientInfo": {"name": "aidememo-ref-xmemo-client", "version": VERSION}}})
        session = start.headers.get("mcp-session-id")
        headers = accept | ({"mcp-session-id": session} if session else {})
        self.request("POST", "/mcp", headers=headers,
                     json_body={"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = self.request("POST", "/mcp", headers=headers, json_body={
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "get_mcp_identity", "arguments": {}}})
        try:
            payload = _rpc_payload(answer, 2)
            result = payload["result"]
            if result.get("isError"):
                raise ValueError("get_mcp_identity failed")
            text = "\n".join(part["text"] for part in result["content"] if part.get("type") == "text")
            identity = _identity_from_text(text)
        except (KeyError, TypeError, ValueError) as exc:
            raise XMemoProtocolError(f"get_mcp_identity answer is unreadable: {exc}") from None
        self._identity = identity
        return identity

    # -- captures ---------------------------------------------------------------------------
    def task_start(self, content: str, **options: Any) -> CaptureResult:
        """Record that a task started: a ``working`` memory with status ``started``."""
        return self._capture("task_start", content, memory_type="working", status="started", **options)

    def record_decision(self, content: str, **options: Any) -> CaptureResult:
        """Record a decision: a ``semantic`` memory."""
        return self._capture("decision", content, memory_type="semantic", status=None, **options)

    def record_bug_fix(self, content: str, **options: Any) -> CaptureResult:
        """Record a bug fix: a ``semantic`` memory."""
        return self._capture("bug_fix", content, memory_type="semantic", status=None, **options)

    def task_end(self, content: str, **options: Any) -> CaptureResult:
        """Record that a task ended: a ``working`` memory with status ``completed``."""
        return self._capture("task_end", content, memory_type="working", status="completed", **options)

    def _declined(self, content: str) -> str | None:
        if not isinstance(content, str) or not content.strip():
            return Reason.EMPTY_CONTENT
        if len(content.encode("utf-8")) > self._max_content_bytes:
            return Reason.CONTENT_TOO_LARGE
        if secret_problem(content, self._key):
            return Reason.SECRET_IN_CONTENT
        try:
            identity = self.identity()
        except XMemoClientError:
            return Reason.IDENTITY_UNRESOLVED
        if identity.agent_id is None:
            return Reason.IDENTITY_UNRESOLVED
        if "memory:write" not in identity.scopes:
            return Reason.MISSING_WRITE_SCOPE
        return None

    def _capture(self, workflow: str, content: str, *, memory_type: str, status: str | None,
                 source: str | None = None, session_id: str | None = None, task_id: str | None = None,
                 scope: str | None = None, metadata: dict[str, Any] | None = None,
                 idempotency_key: str | None = None) -> CaptureResult:
        declined = self._declined(content)
        if declined is not None:
            return CaptureResult(should_capture=False, reason=declined)
        identity = self._identity
        assert identity is not None
        body: dict[str, Any] = {
            "content": content,
            "path": f"workflow/{task_id or 'untracked'}/{workflow}",
            "bucket": "work",
            "memory_type": memory_type,
            "source": source or identity.agent_id,
            "metadata": {**(metadata or {}), "workflow": workflow,
                         **({"session_id": session_id} if session_id else {}),
                         **({"task_id": task_id} if task_id else {})},
        }
        if scope is not None:
            body["scope"] = scope
        if status is not None:
            body["status"] = status
        headers = None
        if idempotency_key is not None:  # the three ways the published clients send it
            body["idempotency_key"] = idempotency_key
            headers = {"Idempotency-Key": idempotency_key, "X-Idempotency-Key": idempotency_key}
        try:
            response = self.request("POST", "/v1/remember", json_body=body, headers=headers)
        except XMemoTransportError:
            return CaptureResult(should_capture=False, reason=Reason.WRITE_OUTCOME_UNKNOWN)
        except XMemoHTTPError as exc:
            return CaptureResult(should_capture=False, reason=Reason.refused(exc.status), audit_id=exc.audit_id)
        try:
            answer = self._json(response)
        except XMemoTransportError:
            answer = {}
        memory_id = _uuid(answer.get("id") or answer.get("memory_id"))
        if memory_id is None:  # a 2xx without an id proves nothing was stored (MAF's rule too)
            return CaptureResult(should_capture=False, reason=Reason.WRITE_OUTCOME_UNKNOWN, audit_id=_audit(response))
        repeated = answer.get("write") == "unchanged" or response.headers.get("idempotent-replayed") == "true"
        return CaptureResult(
            should_capture=True, reason=Reason.ALREADY_CAPTURED if repeated else Reason.CAPTURED,
            memory_id=memory_id, memory_type=answer.get("memory_type"), status=answer.get("status"),
            audit_id=_audit(response), answer=answer,
        )

    # -- reads ------------------------------------------------------------------------------
    def recall_context(self, query: str, *, scope: str | None = None, max_items: int = 8, max_tokens: int = 1200,
                       prefer_working: bool = True, bucket: str = "%", memory_type: str = "auto",
                       team_id: str | None = None) -> RecallContext:
        """``POST /v1/recall/context`` (retried as a read). Fails closed on a packet over ``max_items``."""
        body: dict[str, Any] = {"query": query, "max_items": max_items, "max_tokens": max_tokens,
                                "prefer_working": prefer_working, "bucket": bucket, "memory_type": memory_type}
        if scope is not None:
            body["scope"] = scope
        if team_id is not None:
            body["team_id"] = team_id
        response = self.request("POST", RECALL_PATH, json_body=body)
        data = self._json(response)
        items = data.get("items")
        if not isinstance(items, list) or len(items) > max_items:
            raise XMemoProtocolError(f"recall answered {len(items) if isinstance(items, list) else 'no'} items "
                                     f"for max_items {max_items}")
        return RecallContext(version=data.get("version"), items=tuple(items),
                             context_text=str(data.get("context_text") or ""),
                             budget=dict(data.get("budget") or {}), audit_id=_audit(response), raw=data)

    def get_memory(self, memory_id: str) -> dict[str, Any]:
        """``GET /v1/memories/{id}`` (retried as a read)."""
        return self._json(self.request("GET", f"/v1/memories/{memory_id}"))
