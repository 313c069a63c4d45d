"""The XMemo reference's HTTP surface as one function: routing, credentials, audit ids, errors.

``XMemoService.handle(method, target, headers, body)`` has the AideMemo service's shape, so the
same ASGI adapter and in-process httpx transport serve it. Check order per route: path, then
credential (401 only when none is sent, 403 for a bad one), then scope (403), then body (422),
then the rules. Every answer, errors and ``/health`` included, carries ``X-XMemo-Audit-ID``
(a fresh UUID). ``/api/v1/...`` is an alias of ``/v1/...`` (MAF writes there).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any, Final
from urllib.parse import parse_qsl

from refkit.response import MAX_BODY_BYTES, Response
from ._boundary import resolve_caller
from ._decode import (
    decode_event,
    decode_project_context,
    decode_recall,
    decode_remember,
    decode_search,
    decode_update_state,
    idempotency_key,
    parse_body,
)
from ._errors import KeyChanged, RequestError
from ._hot import Callers, cached_caller, plain_json, plain_remember
from ._http import (AGENT_HEADER, AUDIT_HEADER, INSTANCE_HEADER, HttpRequest, agent_header, credential,
                    error_response, json_response)
from ._keys import key_digest
from ._mcp import McpEndpoint
from ._operations import Operations, Rules
from ._records import READ_SCOPE, WRITE_SCOPE, Caller, Principal
from ._store import XMemoStore
from ._writes import Write

__all__ = ["XMemoService", "new_uuid", "HEALTH"]

_log = logging.getLogger("xmemo_ref")
HEALTH: Final = {"status": "ok", "service": "xmemo-reference"}
_PROJECT_ID: Final = re.compile(r"[A-Za-z0-9_-]{1,128}\Z")  # MAF's project reference grammar
_VARIANT: Final = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}  # RFC 4122's 10xx bits
_MEMORY_ID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\Z")
_DIGESTS: Final = 1_024  # keys that proved a principal, with their SHA-256 (never logged)


def new_uuid() -> str:
    """A random (version 4) UUID: ``str(uuid.uuid4())``'s form, without building the UUID object
    (every answer carries one, every capture makes another)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


Handler = Callable[..., Response]


class XMemoService:
    """The XMemo reference's behaviour as a function of one request."""

    def __init__(self, store: XMemoStore, clock: Any, *, rules: Rules | None = None,
                 new_id: Callable[[], str] = new_uuid) -> None:
        self.store = store
        self.ops = Operations(store, clock, rules=rules or Rules(), new_id=new_id)
        self.mcp = McpEndpoint(self.ops, new_id)
        self._digests: dict[str, bytes] = {}
        self._callers: Callers = {}
        self._routes: dict[tuple[str, ...], dict[str, Handler]] = {
            ("health",): {"GET": self._health},
            ("v1", "auth", "token", "validate"): {"GET": self._validate},
            ("v1", "remember"): {"POST": self._remember},
            ("v1", "update_state"): {"POST": self._update_state},
            ("v1", "timeline", "events"): {"POST": self._event},
            ("v1", "memories", "search"): {"GET": self._search},
            ("v1", "memories", "*"): {"GET": self._memory},
            ("v1", "memories", "*", "explain"): {"GET": self._explain},
            ("v1", "recall", "context"): {"POST": self._recall},
            ("v1", "projects", "*", "context"): {"POST": self._project},
            ("mcp",): {"POST": self._mcp_post, "DELETE": self._mcp_delete},
        }
        # The routes without a path parameter, looked up whole (the same method tables).
        self._exact = {pattern: methods for pattern, methods in self._routes.items() if "*" not in pattern}
        # ... and by their path as clients write it, before it is split (``_match``'s answer for it).
        self._paths = {f"{prefix}/{'/'.join(pattern)}": methods for pattern, methods in self._exact.items()
                       for prefix in ("", "/api") if not prefix or pattern[0] == "v1"}

    # -- dispatch ---------------------------------------------------------------------------
    def handle(self, method: str, target: str | bytes, headers: Any, body: bytes = b"") -> Response:
        """Answer one request; ``target`` is the raw path with its query string."""
        raw = target.decode("latin-1") if isinstance(target, bytes) else target
        path, _, query = raw.partition("?")
        audit = ((AUDIT_HEADER, new_uuid()),)
        response = self._dispatch(method, path, query, headers, body)
        return Response(response.status, response.headers + audit, b"" if method == "HEAD" else response.body)

    def _dispatch(self, method: str, path: str, query: str, headers: Any, body: bytes,
                  deferred: bool = True) -> Response:
        methods = self._paths.get(path)
        params: list[str] = []  # not ``list[str]()``: calling a generic alias costs 2,600 instructions
        if methods is None:
            segments = tuple(path.strip("/").split("/")) if path.strip("/") else ()
            if segments[:2] == ("api", "v1"):
                segments = segments[1:]
            methods, params = self._match(segments)
        if methods is None:
            return json_response({"detail": "Not Found"}, 404)
        handler = methods.get("GET" if method == "HEAD" else method)
        if handler is None:
            allowed = ", ".join(sorted(methods))
            return json_response({"detail": "Method Not Allowed"}, 405, (("allow", allowed),))
        request = HttpRequest.build(method, query, headers, body, deferred)
        try:
            try:
                if len(body) > MAX_BODY_BYTES:
                    raise RequestError.too_large()
                answer = handler(request, *params)
            except RequestError as error:
                answer = error_response(error)
            # The key was checked against what this thread last read: an answer leaves only once
            # a statement has confirmed it, and is made again from the start if it changed.
            self.store.confirm()
            return answer
        except KeyChanged:  # raised only for a deferred check: the second pass reads the key first
            return self._dispatch(method, path, query, headers, body, deferred=False)
        except RequestError as error:  # a storage fault while confirming
            return error_response(error)
        except Exception:  # a bug, never client input: the fixed 500, details only in the log
            _log.exception("unexpected failure answering %s %s", method, path[:200])
            return error_response(RequestError.internal())

    def _match(self, segments: tuple[str, ...]) -> tuple[dict[str, Handler] | None, list[str]]:
        exact = self._exact.get(segments)
        if exact is not None:
            return exact, []
        for pattern, methods in self._routes.items():
            if len(pattern) == len(segments) and all(p in ("*", s) for p, s in zip(pattern, segments)):
                if all(s for s in segments):
                    return methods, [s for p, s in zip(pattern, segments) if p == "*"]
        return None, []

    # -- identity -----------------------------------------------------------------------------
    def _principal(self, request: HttpRequest) -> tuple[Principal, bytes]:
        headers = request.headers
        sent = headers.get("x-api-key")
        if sent is not None and "authorization" not in headers and sent in self._digests:
            key = sent  # ``credential``'s answer for a key it already passed (``_hot``: known keys)
        else:
            key = credential(headers)
        # A client sends the same key on every request: its SHA-256 is kept once the key proved a
        # principal (as the AideMemo reference keeps a bearer's), so no stranger's guess is kept.
        digest = known = self._digests.get(key)
        if digest is None:
            digest = key_digest(key)
        principal = self.store.principal(digest, deferred=request.deferred)
        if principal is None:
            raise RequestError.invalid_key()
        if known is None:
            if len(self._digests) >= _DIGESTS:
                self._digests.clear()
            self._digests[key] = digest
        return principal, digest

    def _caller(self, request: HttpRequest, agent_id: str | None = None, instance_id: str | None = None) -> Caller:
        principal, _ = self._principal(request)
        if agent_id is None and instance_id is None:
            return cached_caller(self._callers, principal, request, self._attribute)  # ``_hot``
        return self._attribute(principal, request, agent_id, instance_id)

    @staticmethod
    def _attribute(principal: Principal, request: HttpRequest, agent_id: str | None, instance_id: str | None) -> Caller:
        return resolve_caller(
            principal,
            asserted_agent_id=agent_id or agent_header(request.headers, AGENT_HEADER),
            asserted_instance_id=instance_id or agent_header(request.headers, INSTANCE_HEADER),
        )

    # -- routes -----------------------------------------------------------------------------
    def _health(self, request: HttpRequest) -> Response:
        return json_response(HEALTH)

    def _validate(self, request: HttpRequest) -> Response:
        return json_response(self.ops.validate(self._caller(request)))

    def _write(self, request: HttpRequest, route: str, decode: Callable[[object], Write],
               plain: Callable[[object], Write | None] | None = None) -> Response:
        caller = self._caller(request)
        self.ops.require(caller, WRITE_SCOPE)
        body = plain_json(request.body)  # parse_body's answer (``_hot``)
        headers = request.headers
        write = None
        if plain is not None and "idempotency-key" not in headers and "x-idempotency-key" not in headers:
            write = plain(body)  # the common body in one pass (``_hot``); None for any other
        if write is None:
            key = idempotency_key(headers, body)
            write = decode(body)
        else:
            key = None  # ``plain`` takes no body with an idempotency key
        answer, replayed = self.ops.write(caller, write, route=route, body=body, idempotency_key=key)
        return json_response(answer, headers=(("idempotent-replayed", "true"),) if replayed else ())

    def _remember(self, request: HttpRequest) -> Response:
        return self._write(request, "remember", decode_remember, plain_remember)

    def _update_state(self, request: HttpRequest) -> Response:
        return self._write(request, "update_state", decode_update_state)

    def _event(self, request: HttpRequest) -> Response:
        return self._write(request, "timeline_event", decode_event)

    def _recall(self, request: HttpRequest) -> Response:
        caller = self._caller(request)
        self.ops.require(caller, READ_SCOPE)
        return json_response(self.ops.recall(caller, decode_recall(parse_body(request.body))))

    def _project(self, request: HttpRequest, project_id: str) -> Response:
        caller = self._caller(request)
        self.ops.require(caller, READ_SCOPE)
        if not _PROJECT_ID.match(project_id):
            raise RequestError.invalid_field(("path", "project_id"), "must match [A-Za-z0-9_-]{1,128}")
        body = parse_body(request.body) if request.body.strip() else {}
        return json_response(self.ops.project_context(caller, project_id, decode_project_context(body)))

    def _search(self, request: HttpRequest) -> Response:
        caller = self._caller(request)
        self.ops.require(caller, READ_SCOPE)
        params = dict(reversed(parse_qsl(request.query, keep_blank_values=True)))  # the first value wins
        return json_response(self.ops.search(caller, decode_search(params)))

    def _memory(self, request: HttpRequest, memory_id: str, *, explain: bool = False) -> Response:
        caller = self._caller(request)
        self.ops.require(caller, READ_SCOPE)
        if not _MEMORY_ID.match(memory_id.lower()):
            raise RequestError.not_found("Memory not found")
        return json_response(self.ops.memory(caller, memory_id.lower(), explain=explain))

    def _explain(self, request: HttpRequest, memory_id: str) -> Response:
        return self._memory(request, memory_id, explain=True)

    def _mcp_post(self, request: HttpRequest) -> Response:
        principal, digest = self._principal(request)

        def caller_for(agent_id: str | None, instance_id: str | None) -> Caller:
            return self._attribute(principal, request, agent_id, instance_id)

        return self.mcp.post(request, digest, caller_for)

    def _mcp_delete(self, request: HttpRequest) -> Response:
        _, digest = self._principal(request)
        return self.mcp.delete(request, digest)
