"""Requests in, responses out, with no socket: routing, decoding, check order, error mapping.

``Service.handle`` is the whole HTTP surface of the reference as a plain function, so the ASGI
adapter, the in-process httpx transport and the tests all exercise the same code. The order in
which each route checks path, body, token, membership and rules is upstream's (wire spec §1,
§2.6, errata 6 and 8), because conformance is judged on which error wins.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Final
from urllib.parse import unquote_to_bytes

from . import _ledger
from ._canonical import JsonError, format_float, parse_json
from ._clock import AdvancingClock, Clock
from ._commands import TRANSITIONS, TYPED_CREATES, Command, raw_command, typed_command
from ._decode import Field, decode_query
from ._errors import ErrorCode, LedgerError
from ._ids import bearer_digest, check_id, check_name
from ._search import bm25, tokenize
from ._sqlite import Membership, SQLiteStore
from ._state import HANDOFF_FIELDS
from ._text import ascii_lower, trim
from ._visibility import visible_to

__all__ = ["Response", "Service", "MAX_BODY_BYTES"]

MAX_BODY_BYTES: Final = 1_048_576  # srv/lib.rs MAX_COMMAND_BODY_BYTES
MAX_BEARER_BYTES: Final = 4_096
MAX_SNAPSHOT_RESOURCES: Final = 10_000
DEFAULT_CHANGE_LIMIT: Final = 100
MAX_CHANGE_LIMIT: Final = 10_000
DEFAULT_SEARCH_LIMIT: Final = 20
MAX_SEARCH_LIMIT: Final = 100
MAX_SEARCH_QUERY_BYTES: Final = 4_096
DEFAULT_MAILBOX_LIMIT: Final = 20
MAX_MAILBOX_LIMIT: Final = 100
_I64_MAX: Final = (1 << 63) - 1
MAX_CLOCK_MS: Final = 1 << 62  # leaves room for now + lease in an i64 column

CHANGE_QUERY: Final = (Field("project_epoch", "id"), Field("after_seq", "u64"), Field("limit", "u64", optional=True))
SEARCH_QUERY: Final = (
    Field("q", "string"),
    Field("source_id", "id", optional=True),
    Field("limit", "u64", optional=True),
    Field("at_least_seq", "u64", optional=True),
    Field("mode", "string", optional=True),
)
MAILBOX_QUERY: Final = (
    Field("box", "enum:inbox,outbox"),
    Field("source_id", "id", optional=True),
    Field("include_completed", "bool", optional=True),
    Field("before_seq", "u64", optional=True),
    Field("limit", "u64", optional=True),
)

_log = logging.getLogger("aidememo_ref")
_JSON_HEADERS: Final = (("content-type", "application/json"),)
# http's HeaderValue::to_str accepts visible ASCII, space and tab; the token has no whitespace.
_BAD_HEADER: Final = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f-\xff]")
_BAD_TOKEN: Final = re.compile(rb"[\x00-\x20\x7f-\xff]")


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    query: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None


def _ok(text: str | bytes) -> Response:
    return Response(200, _JSON_HEADERS, text.encode("utf-8") if isinstance(text, str) else text)


def _error_response(error: LedgerError) -> Response:
    body = _dumps({"error": {"code": error.code.value, "message": error.message}})
    return Response(error.status, _JSON_HEADERS, body.encode("utf-8"))


def _dumps(value: Any) -> str:
    """Compact JSON in insertion order with serde's float format (for response bodies)."""
    if isinstance(value, _Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_dumps(v) for v in value) + "]"
    if isinstance(value, float):
        return format_float(value)
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class _Raw:
    """Already-encoded JSON (stored canonical bodies are embedded without re-encoding)."""

    text: str


def _handoff_in_order(body_text: str) -> _Raw:
    record = json.loads(body_text)
    return _Raw(_dumps({name: record.get(name) for name in HANDOFF_FIELDS}))


class Service:
    """The reference server's behaviour as a function of one request."""

    def __init__(
        self,
        store: SQLiteStore,
        clock: Clock,
        *,
        test_clock: bool = False,
        decide: Callable[[Command, str, Any, int], _ledger.Write] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.test_clock = test_clock
        self.decide = decide or _ledger.decide
        self._routes: dict[tuple[str, ...], dict[str, Callable[..., Response]]] = {
            ("health",): {"GET": self._health},
            ("openapi.json",): {"GET": self._openapi},
            ("v1", "commands"): {"POST": self._command},
            ("v1", "projects", "*", "changes"): {"GET": self._changes},
            ("v1", "projects", "*", "changes", "materialized"): {"GET": self._materialized},
            ("v1", "projects", "*", "snapshot"): {"GET": self._snapshot},
            ("v1", "projects", "*", "search"): {"GET": self._search},
            ("v1", "projects", "*", "resources", "*", "*"): {"GET": self._resource},
            ("v1", "projects", "*", "identity"): {"GET": self._identity},
            ("v1", "projects", "*", "handoffs"): {"GET": self._mailbox},
            ("v1", "projects", "*", "handoffs", "*"): {"GET": self._status},
        }
        for segment in TYPED_CREATES:
            self._routes.setdefault(("v1", "projects", "*", segment), {})["POST"] = partial(self._create, segment=segment)
        for segment in TRANSITIONS:
            self._routes[("v1", "projects", "*", "handoffs", "*", segment)] = {
                "POST": partial(self._transition, segment=segment)
            }
        if test_clock:
            self._routes[("__test__", "clock")] = {"GET": self._clock_get, "POST": self._clock_post}

    # -- dispatch ---------------------------------------------------------------------------
    def handle(
        self,
        method: str,
        target: str | bytes,
        headers: list[tuple[bytes, bytes]] | tuple[tuple[bytes, bytes], ...],
        body: bytes = b"",
    ) -> Response:
        """Answer one request. ``target`` is the raw path with its query string."""
        raw = target.encode("latin-1") if isinstance(target, str) else target
        path, _, query = raw.partition(b"?")
        pieces = path.split(b"/")
        if not path.startswith(b"/") or any(not p for p in pieces[1:]):
            return Response(404)  # axum: trailing slashes and empty segments are other paths
        methods, raw_params = self._match(tuple(p.decode("latin-1") for p in pieces[1:]))
        if methods is None:
            return Response(404)
        try:
            params = [unquote_to_bytes(p.encode("latin-1")).decode("utf-8") for p in raw_params]
        except UnicodeDecodeError:
            return Response(
                400,
                (("content-type", "text/plain; charset=utf-8"),),
                b"Invalid URL: Cannot parse a path segment as UTF-8",
            )
        head = method == "HEAD"
        handler = methods.get("GET" if head else method)
        if handler is None:
            allowed = sorted(methods) + (["HEAD"] if "GET" in methods else [])
            return Response(405, (("allow", ",".join(sorted(allowed))),))
        request = _Request(method, query, tuple(headers), body)
        try:
            response = handler(request, *params)
        except LedgerError as error:
            response = _error_response(error)
        except Exception:  # a bug, never client input: still the wire shape, details to the log
            _log.exception("unexpected failure answering %s %r", method, raw[:200])
            response = _error_response(LedgerError.storage_failure())
        if head:
            return Response(response.status, response.headers, b"")
        return response

    def _match(self, segments: tuple[str, ...]) -> tuple[dict[str, Callable[..., Response]] | None, list[str]]:
        for pattern, methods in self._routes.items():
            if len(pattern) != len(segments):
                continue
            params: list[str] = []
            for want, got in zip(pattern, segments):
                if want == "*":
                    params.append(got)
                elif want != got:
                    break
            else:
                return methods, params
        return None, []

    # -- request pieces, in the order routes use them --------------------------------------
    @staticmethod
    def _json_body(request: _Request) -> Any:
        content_type = (request.header(b"content-type") or b"").decode("latin-1").split(";")[0].strip().lower()
        main, _, sub = content_type.partition("/")
        if main != "application" or not (sub == "json" or sub.endswith("+json")):
            raise LedgerError.invalid_command("Expected request with `Content-Type: application/json`")
        if len(request.body) > MAX_BODY_BYTES:
            raise LedgerError.invalid_command("Failed to buffer the request body: length limit exceeded")
        try:
            return parse_json(request.body)
        except JsonError as exc:
            raise LedgerError.invalid_command(f"Failed to parse the request body as JSON: {exc}") from None

    def _member(self, request: _Request, project_id: str) -> Membership:
        """Bearer → (tenant, actor) → active membership: 401, then 403 (wire spec §4.1)."""
        value = request.header(b"authorization")
        if value is None or _BAD_HEADER.search(value) or not value.startswith(b"Bearer "):
            raise LedgerError.unauthenticated()
        token = value[7:]
        if not token or len(token) > MAX_BEARER_BYTES or _BAD_TOKEN.search(token):
            raise LedgerError.unauthenticated()
        member = self.store.member_by_token(bearer_digest(token.decode("ascii")), project_id)
        if member is False:
            raise LedgerError.unauthenticated()
        if member is None:
            raise LedgerError.unauthorized(project_id)
        assert isinstance(member, Membership)
        return member

    @staticmethod
    def _writable(member: Membership) -> None:
        if member.role not in _ledger.WRITABLE_ROLES:
            raise LedgerError.unauthorized(member.project_id)

    def _execute(self, member: Membership, command: Command) -> Response:
        return _ok(self.store.execute(member, command, self.clock.now_ms(), self.decide))

    # -- routes -----------------------------------------------------------------------------
    def _health(self, request: _Request) -> Response:
        return _ok(_dumps({"status": "ok", "mode": "single_node", "schema_version": self.store.schema_version()}))

    def _openapi(self, request: _Request) -> Response:
        # A reference-only route (the real server has none): the contract, for any language.
        from importlib.resources import files

        return _ok(files("aidememo_ref").joinpath("openapi.json").read_bytes())

    def _command(self, request: _Request) -> Response:
        command = raw_command(self._json_body(request))
        member = self._member(request, command.project_id)
        _ledger.check_raw(command)
        self._writable(member)
        return self._execute(member, command)

    def _create(self, request: _Request, project_id: str, *, segment: str) -> Response:
        check_id("project_id", project_id)
        body = self._json_body(request)
        command = typed_command(project_id, segment=segment, handoff_id=None, body=body)
        member = self._member(request, project_id)
        self._writable(member)
        return self._execute(member, command)

    def _transition(self, request: _Request, project_id: str, handoff_id: str, *, segment: str) -> Response:
        check_id("project_id", project_id)
        check_id("handoff_id", handoff_id)
        body = self._json_body(request)
        command = typed_command(project_id, segment=segment, handoff_id=handoff_id, body=body)
        member = self._member(request, project_id)
        self._writable(member)
        return self._execute(member, command)

    def _identity(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        m = self._member(request, project_id)
        return _ok(_dumps({
            "tenant_id": m.tenant_id, "project_id": m.project_id, "project_epoch": m.project_epoch,
            "actor_id": m.actor_id, "role": m.role,
        }))

    @staticmethod
    def _scope(m: Membership) -> _Raw:
        return _Raw(_dumps({"tenant_id": m.tenant_id, "project_id": m.project_id}))

    def _resource_json(self, m: Membership, kind: str, resource_id: str, revision: int, deleted: bool, body: str | None) -> str:
        state = '{"state":"deleted"}' if deleted else f'{{"state":"present","body":{body}}}'
        return _dumps({
            "scope": self._scope(m),
            "resource": {"kind": kind, "id": resource_id},
            "revision": revision,
            "state": _Raw(state),
        })

    def _resource(self, request: _Request, project_id: str, kind: str, resource_id: str) -> Response:
        check_id("project_id", project_id)
        check_name("resource kind", kind)
        check_id("resource_id", resource_id)
        m = self._member(request, project_id)
        row = self.store.resource(m.tenant_id, m.project_id, kind, resource_id)
        if row is None:
            raise LedgerError.not_found()
        revision, deleted, body = row
        if not visible_to(kind, None if body is None else json.loads(body), deleted, m.actor_id):
            raise LedgerError.not_found()
        return _ok(self._resource_json(m, kind, resource_id, revision, deleted, body))

    def _status(self, request: _Request, project_id: str, handoff_id: str) -> Response:
        check_id("project_id", project_id)
        check_id("handoff_id", handoff_id)
        m = self._member(request, project_id)
        row = self.store.resource(m.tenant_id, m.project_id, "handoff", handoff_id)
        if row is None or row[1]:
            raise LedgerError.not_found()
        revision, _, body = row
        assert body is not None
        if not visible_to("handoff", json.loads(body), False, m.actor_id):
            raise LedgerError.actor_mismatch()
        return _ok(_dumps({"revision": revision, "record": _handoff_in_order(body)}))

    def _snapshot(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        m = self._member(request, project_id)
        snap = self.store.snapshot(m.tenant_id, m.project_id, MAX_SNAPSHOT_RESOURCES)
        if snap is None:
            raise _too_large()
        epoch, at_seq, rows = snap
        resources = [
            _Raw(self._resource_json(m, kind, rid, rev, deleted, body))
            for kind, rid, rev, deleted, body in rows
            if visible_to(kind, None if body is None else json.loads(body), deleted, m.actor_id)
        ]
        return _ok(_dumps({"scope": self._scope(m), "project_epoch": epoch, "at_seq": at_seq, "resources": resources}))

    def _feed(self, request: _Request, project_id: str, *, materialized: bool) -> Response:
        check_id("project_id", project_id)
        query = decode_query(request.query, CHANGE_QUERY)
        m = self._member(request, project_id)
        limit = DEFAULT_CHANGE_LIMIT if query["limit"] is None else query["limit"]
        if not 1 <= limit <= MAX_CHANGE_LIMIT:
            raise LedgerError(ErrorCode.INVALID_CHANGE_BATCH, "invalid change batch: limit must be between 1 and 10000")
        epoch, head, rows, current = self.store.changes(m.tenant_id, m.project_id, query["after_seq"], limit)
        if query["project_epoch"] != epoch:
            raise LedgerError(
                ErrorCode.CURSOR_EPOCH_MISMATCH,
                f"cursor epoch {query['project_epoch']} does not match current project epoch {epoch}",
            )
        if query["after_seq"] > head:
            raise _out_of_range(query["after_seq"], head)
        has_more = len(rows) > limit
        scanned = rows[:limit]
        entries: list[Any] = []
        for seq, kind, rid, operation, revision, actor, committed, body in scanned:
            if materialized:
                visible = visible_to(kind, None if body is None else json.loads(body), body is None, m.actor_id)
            elif (kind, rid) in current:
                deleted, now_body = current[(kind, rid)]
                visible = visible_to(kind, None if now_body is None else json.loads(now_body), deleted, m.actor_id)
            else:
                visible = True
            if not visible:
                continue
            change = {
                "tenant_id": m.tenant_id, "project_id": m.project_id, "project_epoch": epoch, "seq": seq,
                "resource": {"kind": kind, "id": rid}, "operation": operation, "revision": revision,
                "actor_id": actor, "committed_at_ms": committed,
            }
            if materialized:
                entries.append({
                    "change": change,
                    "resource": _Raw(self._resource_json(m, kind, rid, revision, body is None, body)),
                })
            else:
                entries.append(change)
        next_seq = scanned[-1][0] if scanned else query["after_seq"]
        return _ok(_dumps({
            "scope": self._scope(m),
            "cursor": {"project_epoch": query["project_epoch"], "after_seq": query["after_seq"]},
            "entries": entries,
            "next_cursor": {"project_epoch": epoch, "after_seq": next_seq},
            "has_more": has_more,
        }))

    def _changes(self, request: _Request, project_id: str) -> Response:
        return self._feed(request, project_id, materialized=False)

    def _materialized(self, request: _Request, project_id: str) -> Response:
        return self._feed(request, project_id, materialized=True)

    def _mailbox(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        query = decode_query(request.query, MAILBOX_QUERY)
        limit = DEFAULT_MAILBOX_LIMIT if query["limit"] is None else query["limit"]
        if not 1 <= limit <= MAX_MAILBOX_LIMIT:
            raise LedgerError.invalid_command("handoff mailbox limit must be between 1 and 100")
        if query["before_seq"] is not None and query["before_seq"] > _I64_MAX:
            # Upstream answers 500 here (errata 4); client input never earns a 5xx from us.
            raise LedgerError.invalid_command("before_seq must be at most 9223372036854775807")
        m = self._member(request, project_id)
        include = query["include_completed"]
        if include is None:
            include = query["box"] == "outbox"
        rows = self.store.mailbox(
            m.tenant_id, m.project_id, actor=m.actor_id, box=query["box"], source_id=query["source_id"],
            include_completed=include, before_seq=query["before_seq"], limit=limit,
        )
        page = rows[:limit]
        assignments = [
            {"project_seq": seq, "revision": rev, "record": _handoff_in_order(body)} for seq, rev, body in page
        ]
        next_before = page[-1][0] if len(rows) > limit else None
        return _ok(_dumps({"assignments": assignments, "next_before_seq": next_before}))

    def _search(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        query = decode_query(request.query, SEARCH_QUERY)
        q = trim(query["q"])
        if not 1 <= len(q.encode("utf-8")) <= MAX_SEARCH_QUERY_BYTES:
            raise LedgerError.invalid_command("search query must contain 1..=4096 bytes")
        limit = DEFAULT_SEARCH_LIMIT if query["limit"] is None else query["limit"]
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise LedgerError.invalid_command("search limit must be between 1 and 100")
        m = self._member(request, project_id)
        index = self.store.search(m.tenant_id, m.project_id, list(dict.fromkeys(tokenize(q))))
        if index.resources > MAX_SNAPSHOT_RESOURCES:
            raise _too_large()
        if query["at_least_seq"] is not None and query["at_least_seq"] > index.head:
            raise _out_of_range(query["at_least_seq"], index.head)
        # A present but empty ``mode=`` is Some("") upstream: refused below, not the default.
        mode = "auto" if query["mode"] is None else ascii_lower(trim(query["mode"]))
        if mode in ("semantic", "hybrid"):
            raise LedgerError.invalid_command(
                "semantic retrieval requires an aidememo-server build with --features semantic"
            )
        if mode not in ("auto", "lexical"):
            raise LedgerError.invalid_command("search mode must be auto, lexical, semantic, or hybrid")
        scores: dict[str, float] = {}
        for term, fact_id, tf, length in index.postings:
            scores[fact_id] = scores.get(fact_id, 0.0) + bm25(
                tf=tf, df=index.df[term], n_docs=index.n_docs, doc_len=length, avg_len=index.avg_len
            )
        ranked = sorted((item for item in scores.items() if item[1] > 0), key=lambda kv: (-kv[1], kv[0]))
        results: list[Any] = []
        for fact_id, score in ranked:
            fact = json.loads(index.facts[fact_id])
            if query["source_id"] is not None and fact["source_id"] != query["source_id"]:
                continue
            results.append({
                "fact_id": fact_id, "session_id": fact["session_id"], "source_id": fact["source_id"],
                "actor_id": fact["actor_id"], "content": fact["content"], "score": score, "lexical_score": score,
            })
            if len(results) == limit:
                break
        return _ok(_dumps({
            "project_epoch": index.epoch, "index_seq": index.head, "mode": "lexical", "semantic_model": None,
            "results": results,
        }))

    # -- the virtual-clock extension (only with --test-clock) --------------------------------
    def _clock_get(self, request: _Request) -> Response:
        return _ok(_dumps({"now_ms": self.clock.now_ms()}))

    def _clock_post(self, request: _Request) -> Response:
        body = self._json_body(request)
        advance = body.get("advance_ms") if isinstance(body, dict) else None
        if isinstance(advance, bool) or not isinstance(advance, int) or advance < 0 or set(body) != {"advance_ms"}:
            raise LedgerError.invalid_command('test clock body must be {"advance_ms": <non-negative integer>}')
        if self.clock.now_ms() + advance > MAX_CLOCK_MS:
            raise LedgerError.invalid_command("test clock cannot move past 2^62 ms (timestamps are stored as i64)")
        assert isinstance(self.clock, AdvancingClock)  # ReferenceLedger refuses test_clock without one
        self.clock.advance(advance)
        return _ok(_dumps({"now_ms": self.clock.now_ms()}))


def _too_large() -> LedgerError:
    return LedgerError(
        ErrorCode.SNAPSHOT_TOO_LARGE, "project snapshot exceeds the current limit of 10000 resources"
    )


def _out_of_range(after_seq: int, head: int) -> LedgerError:
    return LedgerError(
        ErrorCode.CURSOR_OUT_OF_RANGE,
        f"cursor sequence {after_seq} is ahead of current project sequence {head}",
    )

