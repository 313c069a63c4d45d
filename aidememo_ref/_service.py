"""Requests in, responses out, with no socket: routing, decoding, check order, error mapping.

``Service.handle`` is the whole HTTP surface of the reference as a plain function, so the ASGI
adapter, the in-process httpx transport and the tests all exercise the same code. The order in
which each route checks path, body, token, membership and rules is upstream's (wire spec §1,
§2.6, errata 6 and 8), because conformance is judged on which error wins. The service talks to
storage only through the ``Store`` protocol; write rules live in ``_ledger``, read rules in
``_reads``, answer bodies in ``_render``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import partial
from typing import Final, NamedTuple
from urllib.parse import unquote_to_bytes

from . import _ledger, _reads, _render, _store
from aidememo_wire.canonical import Json, JsonError, parse_json
from refkit.clock import AdvancingClock, Clock
from refkit.records import distinct
from refkit.response import MAX_BODY_BYTES, Response
from ._hot import build, plain_raw
from ._commands import (_REQUEST_FIELDS, TRANSITION_ROUTES, TYPED_CREATES, Command, RawCommand, check_raw, raw_command,
                        typed_command)
from ._decode import Field, decode_query
from aidememo_wire.errors import LedgerError
from ._gateway import Bindings, Gateway
from aidememo_wire.ids import BAD_TOKEN_BYTE, MAX_BEARER_BYTES, bearer_digest, check_id, check_name
from ._records import HANDOFF, WRITABLE_ROLES, Membership
from ._store import NO_SCHEDULER, Denied, Execute, Scheduler, Store

__all__ = ["Response", "Service", "Clock", "MAX_BODY_BYTES"]

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
_ROUTED: Final = 4096  # routed paths remembered with their route and decoded parameters
_ROUTED_BYTES: Final = 512  # the longest path remembered (ids are at most 128 bytes)
_DIGESTS: Final = 1024  # Authorization values that proved a membership, with their SHA-256 (never logged)


@distinct
class _Request(NamedTuple):
    """One request's parts (a NamedTuple: built once per request, see ``_hot``)."""

    method: str
    query: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    on_behalf: bool  # the MCP gateway's own REST call for its caller (a bound token may make it)

    def header(self, name: bytes) -> bytes | None:
        for key, value in self.headers:
            if key == name or key.lower() == name:  # ``name`` is lower case
                return value
        return None


Handler = Callable[..., Response]


def _ok(text: str | bytes) -> Response:
    return Response(200, _JSON_HEADERS, text.encode("utf-8") if isinstance(text, str) else text)


def _error_response(error: LedgerError) -> Response:
    return Response(error.status, _JSON_HEADERS, _render.error_body(error.code.value, error.message).encode("utf-8"))


def _str(query: dict[str, Json], name: str) -> str:
    value = query[name]
    assert isinstance(value, str)  # the decoder checked it
    return value


def _opt_str(query: dict[str, Json], name: str) -> str | None:
    value = query[name]
    assert value is None or isinstance(value, str)
    return value


def _opt_int(query: dict[str, Json], name: str) -> int | None:
    value = query[name]
    assert value is None or (isinstance(value, int) and not isinstance(value, bool))
    return value


def _opt_bool(query: dict[str, Json], name: str) -> bool | None:
    value = query[name]
    assert value is None or isinstance(value, bool)
    return value


class Service:
    """The reference server's behaviour as a function of one request.

    Args:
        store: the ledger database.
        clock: where ``now_ms`` comes from (the ``--test-clock`` extension needs ``advance``).
        test_clock: serve ``/__test__/clock``.
        decide: the write rules (``_ledger.decide``; the kit's rule mutants replace it).
        execute: how a command meets the store (``_store.execute``; planted races replace it).
        scheduler: told about each write's boundaries, so a simulation can interleave them.
        bindings: bearer tokens confined by ``--auth-bindings-file`` to the MCP gateway, one
            source and one actor (``_gateway``).
    """

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        test_clock: bool = False,
        decide: _ledger.Decide | None = None,
        execute: Execute | None = None,
        scheduler: Scheduler | None = None,
        bindings: Bindings | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.test_clock = test_clock
        self.decide = decide or _ledger.decide
        self.execute = execute or _store.execute
        self.scheduler = scheduler or NO_SCHEDULER
        self.bindings = bindings
        self._gateway: Gateway | None = None
        self._digests: dict[bytes, bytes] = {}
        # The raw route's shortcut (``_hot``): only for the store given here (a wrapper set in its
        # place later turns it off), with nothing of the recipe replaced.
        self._plain: _store.PlainStore | None = (
            store if (isinstance(store, _store.PlainStore) and execute in (None, _store.execute)
                      and decide in (None, _ledger.decide) and scheduler in (None, NO_SCHEDULER)) else None)
        self._health = (
            f'{{"status":"ok","mode":"single_node","schema_version":{store.schema_version()}}}'.encode()
        )
        self._routes: dict[tuple[str, ...], dict[str, Handler]] = {
            ("health",): {"GET": self._get_health},
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
            ("v1", "projects", "*", "mcp"): {"POST": self._mcp},
        }
        for segment in TYPED_CREATES:
            self._routes.setdefault(("v1", "projects", "*", segment), {})["POST"] = partial(self._create, segment=segment)
        for segment in TRANSITION_ROUTES:
            self._routes[("v1", "projects", "*", "handoffs", "*", segment)] = {
                "POST": partial(self._transition, segment=segment)
            }
        if test_clock:
            self._routes[("__test__", "clock")] = {"GET": self._clock_get, "POST": self._clock_post}
        # Lookup tables for _match: exact paths first, then patterns by length (order kept).
        self._exact = {p: m for p, m in self._routes.items() if "*" not in p}
        self._patterns: dict[int, list[tuple[tuple[str, ...], dict[str, Handler]]]] = {}
        for pattern, methods in self._routes.items():
            if "*" in pattern:
                self._patterns.setdefault(len(pattern), []).append((pattern, methods))
        # The exact paths as whole targets, str and bytes: the commonest requests skip parsing.
        self._targets: dict[str | bytes, dict[str, Handler]] = {}
        self._routed: dict[bytes, tuple[dict[str, Handler], tuple[str, ...]]] = {}
        for segments, methods in self._exact.items():
            path = "/" + "/".join(segments)
            self._targets[path] = self._targets[path.encode()] = methods

    # -- dispatch ---------------------------------------------------------------------------
    def handle(
        self,
        method: str,
        target: str | bytes,
        headers: list[tuple[bytes, bytes]] | tuple[tuple[bytes, bytes], ...],
        body: bytes = b"",
        *,
        on_behalf: bool = False,
    ) -> Response:
        """Answer one request. ``target`` is the raw path with its query string; ``on_behalf``
        only for the MCP gateway's REST calls (``_mcp`` hands the gateway that handle)."""
        methods = self._targets.get(target)
        params: tuple[str, ...] = ()
        query = b""
        if methods is None:
            routed = self._route(target)
            if isinstance(routed, Response):
                return routed
            methods, params, query = routed
        head = method == "HEAD"
        handler = methods.get("GET" if head else method)
        if handler is None:
            allowed = sorted(methods) + (["HEAD"] if "GET" in methods else [])
            return Response(405, (("allow", ",".join(sorted(allowed))),))
        request = build(_Request, (method, query, tuple(headers), body, on_behalf))  # ``_hot``: one per request
        try:
            response = handler(request, *params)
        except LedgerError as error:
            response = _error_response(error)
        except Exception:  # a bug, never client input: still the wire shape, details to the log
            shown = target.encode("latin-1") if isinstance(target, str) else target
            _log.exception("unexpected failure answering %s %r", method, shown[:200])
            response = _error_response(LedgerError.storage_failure())
        if head:
            return Response(response.status, response.headers, b"")
        return response

    def _route(self, target: str | bytes) -> tuple[dict[str, Handler], tuple[str, ...], bytes] | Response:
        """A target that is not an exact path: its route's methods, decoded parameters and query,
        or the answer when there is none (404, or axum's 400 for a non-UTF-8 segment)."""
        raw = target.encode("latin-1") if isinstance(target, str) else target
        path, _, query = raw.partition(b"?")
        routed = self._routed.get(path)
        if routed is None:
            found = self._route_path(path)
            if isinstance(found, Response):
                return found
            # A path's route is a function of the path alone, and clients ask for the same few
            # paths again and again; only routed paths of a plausible length are kept, and only
            # so many, so no client can make this memory large.
            if len(path) > _ROUTED_BYTES:
                return found[0], found[1], query
            if len(self._routed) >= _ROUTED:
                self._routed.clear()
            routed = self._routed[path] = found
        return routed[0], routed[1], query

    def _route_path(self, path: bytes) -> tuple[dict[str, Handler], tuple[str, ...]] | Response:
        if not path.startswith(b"/") or path.endswith(b"/") or b"//" in path:
            return Response(404)  # axum: trailing slashes and empty segments are other paths
        methods, raw_params = self._match(tuple(path[1:].decode("latin-1").split("/")))
        if methods is None:
            return Response(404)
        try:
            return methods, tuple(_unquote(p) for p in raw_params)
        except UnicodeDecodeError:
            return Response(
                400,
                (("content-type", "text/plain; charset=utf-8"),),
                b"Invalid URL: Cannot parse a path segment as UTF-8",
            )

    def _match(self, segments: tuple[str, ...]) -> tuple[dict[str, Handler] | None, list[str]]:
        exact = self._exact.get(segments)
        if exact is not None:
            return exact, []
        for pattern, methods in self._patterns.get(len(segments), ()):
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
    def _json_body(request: _Request) -> Json:
        content_type = request.header(b"content-type") or b""
        if content_type != b"application/json":
            main, _, sub = content_type.decode("latin-1").split(";")[0].strip().lower().partition("/")
            if main != "application" or not (sub == "json" or sub.endswith("+json")):
                raise LedgerError.invalid_command("Expected request with `Content-Type: application/json`")
        if len(request.body) > MAX_BODY_BYTES:
            raise LedgerError.invalid_command("Failed to buffer the request body: length limit exceeded")
        try:
            return parse_json(request.body)
        except JsonError as exc:
            raise LedgerError.invalid_command(f"Failed to parse the request body as JSON: {exc}") from None

    def _member(self, request: _Request, project_id: str, *, deferred: bool = False) -> Membership:
        """Bearer → (tenant, actor) → active membership: 401, then 403 (wire spec §4.1).

        ``deferred``: the store may answer from memory and check it later (see ``_write``)."""
        value = request.header(b"authorization")
        if value is None:
            raise LedgerError.unauthenticated()
        digest = known = self._digests.get(value)
        if digest is None:
            if _BAD_HEADER.search(value) or not value.startswith(b"Bearer "):
                raise LedgerError.unauthenticated()
            token = value[7:]
            if not token or len(token) > MAX_BEARER_BYTES or BAD_TOKEN_BYTE.search(token):
                raise LedgerError.unauthenticated()
            digest = bearer_digest(token.decode("ascii"))
        if self.bindings is not None and not request.on_behalf and self.bindings.lookup(value[7:]) is not None:
            raise LedgerError.unauthorized(project_id)  # a bound token speaks only through the MCP gateway
        member = self.store.authenticate(digest, project_id, deferred=deferred)
        if not isinstance(member, Membership):
            raise LedgerError.unauthenticated() if member is Denied.BAD_TOKEN else LedgerError.unauthorized(project_id)
        if known is None:  # only headers that proved a membership: no stranger's guess is kept
            if len(self._digests) >= _DIGESTS:
                self._digests.clear()
            self._digests[value] = digest
        return member

    @staticmethod
    def _writable(member: Membership) -> None:
        if member.role not in WRITABLE_ROLES:
            raise LedgerError.unauthorized(member.project_id)

    def _execute(self, member: Membership, command: Command) -> Response:
        receipt = self.execute(self.store, member, command, self.clock.now_ms(), self.decide, self.scheduler)
        return Response(200, _JSON_HEADERS, receipt.to_json().encode())

    # -- routes -----------------------------------------------------------------------------
    def _get_health(self, request: _Request) -> Response:
        return Response(200, _JSON_HEADERS, self._health)

    def _openapi(self, request: _Request) -> Response:
        # A reference-only route (the real server has none): the contract, for any language.
        from importlib.resources import files

        return _ok(files("aidememo_ref").joinpath("openapi.json").read_bytes())

    def _deferred(self, attempt: Callable[[bool], Response]) -> Response:
        """Answer a route, first with a deferred membership check.

        The store checks a remembered membership in the route's own transaction or read (the
        statement that catches its memory up with the file) instead of in a read of its own; an
        error found before that is answered only after ``confirm``. Either check may find the
        membership changed (``MembershipChanged``, with nothing written): the request is then
        answered again from the start with a full check, so every answer, and which error wins,
        is what the full check gives.
        """
        try:
            try:
                response = attempt(True)
            except LedgerError:
                self.store.confirm()
                raise
            self.store.confirm()  # a no-op once the transaction or the read checked it
            return response
        except _store.MembershipChanged:
            return attempt(False)

    def _command(self, request: _Request) -> Response:
        plain = self._plain
        if plain is not None and plain is self.store and self.bindings is None:
            response = self._plain_command(plain, request)
            if response is not None:
                return response
        raw = raw_command(self._json_body(request))

        def attempt(deferred: bool) -> Response:
            member = self._member(request, raw.project_id, deferred=deferred)
            command = check_raw(raw)
            self._writable(member)
            return self._execute(member, command)

        return self._deferred(attempt)

    def _plain_command(self, store: _store.PlainStore, request: _Request) -> Response | None:
        """``_command``'s answer in fewer steps (``_hot``) when every check before the store's
        passes: the JSON body, an Authorization value that proved a membership before, the raw
        rules; then ``put_plain`` runs the recipe for the member it remembers, and a refusal or a
        fault there raises as in ``_execute``. None, with nothing written, for anything else,
        which ``_command`` answers from the start."""
        content_type = authorization = None
        for key, value in request.headers:  # ``_Request.header``'s first match of each name, in one pass
            if key != b"content-type" and key != b"authorization":
                key = key.lower()
            if key == b"content-type":
                if content_type is None:
                    content_type = value
            elif key == b"authorization" and authorization is None:
                authorization = value
        body = request.body
        digest = self._digests.get(authorization) if authorization is not None else None
        if digest is None or content_type != b"application/json" or len(body) > MAX_BODY_BYTES:
            return None
        try:
            parsed = parse_json(body)
            fields = plain_raw(parsed) if type(parsed) is dict and _REQUEST_FIELDS.issuperset(parsed) else None
            if fields is None:
                return None  # ``raw_command``'s other bodies: the struct decoder's, in ``_command``
            command = check_raw(build(RawCommand, fields))
        except (JsonError, LedgerError):
            return None  # worded by ``_command``, after the membership check where upstream makes it
        receipt = store.put_plain(digest, command, self.clock.now_ms())
        return None if receipt is None else Response(200, _JSON_HEADERS, receipt.to_json().encode())

    def _create(self, request: _Request, project_id: str, *, segment: str) -> Response:
        check_id("project_id", project_id)
        body = self._json_body(request)
        command = typed_command(project_id, segment=segment, handoff_id=None, body=body)
        return self._deferred(partial(self._typed, request, command))

    def _transition(self, request: _Request, project_id: str, handoff_id: str, *, segment: str) -> Response:
        check_id("project_id", project_id)
        check_id("handoff_id", handoff_id)
        body = self._json_body(request)
        command = typed_command(project_id, segment=segment, handoff_id=handoff_id, body=body)
        return self._deferred(partial(self._typed, request, command))

    def _typed(self, request: _Request, command: Command, deferred: bool) -> Response:
        member = self._member(request, command.project_id, deferred=deferred)
        self._writable(member)
        return self._execute(member, command)

    def _identity(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        return _ok(_render.identity(self._member(request, project_id)))

    def _resource(self, request: _Request, project_id: str, kind: str, resource_id: str) -> Response:
        check_id("project_id", project_id)
        check_name("resource kind", kind)
        check_id("resource_id", resource_id)

        def attempt(deferred: bool) -> Response:
            m = self._member(request, project_id, deferred=deferred)
            row = self.store.resource(m, kind, resource_id)
            if row is None or not _reads.visible_resources([row], m.actor_id):
                raise LedgerError.not_found()
            return _ok(_render.resource(m, row))

        return self._deferred(attempt)

    def _status(self, request: _Request, project_id: str, handoff_id: str) -> Response:
        check_id("project_id", project_id)
        check_id("handoff_id", handoff_id)

        def attempt(deferred: bool) -> Response:
            m = self._member(request, project_id, deferred=deferred)
            row = self.store.resource(m, HANDOFF, handoff_id)
            if row is None or row.body is None:
                raise LedgerError.not_found()
            if not _reads.visible_resources([row], m.actor_id):
                raise LedgerError.actor_mismatch()
            return _ok(_render.status(row.revision, row.body))

        return self._deferred(attempt)

    def _snapshot(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)

        def attempt(deferred: bool) -> Response:
            m = self._member(request, project_id, deferred=deferred)
            snap = self.store.snapshot(m, _reads.MAX_SNAPSHOT_RESOURCES)
            if snap is None:
                raise _reads.too_large()
            visible = _reads.visible_resources(snap.resources, m.actor_id)
            return _ok(_render.snapshot(m, snap.epoch, snap.at_seq, visible))

        return self._deferred(attempt)

    def _feed(self, request: _Request, project_id: str, *, materialized: bool) -> Response:
        check_id("project_id", project_id)
        query = decode_query(request.query, CHANGE_QUERY)

        def attempt(deferred: bool) -> Response:
            m = self._member(request, project_id, deferred=deferred)
            limit = _reads.change_limit(_opt_int(query, "limit"))
            epoch, after_seq = _str(query, "project_epoch"), _opt_int(query, "after_seq")
            assert after_seq is not None
            read = self.store.changes(m, after_seq, limit)
            page = _reads.feed_page(m, epoch, after_seq, limit, read, materialized=materialized)
            return _ok(_render.feed(m, epoch, after_seq, page))

        return self._deferred(attempt)

    def _changes(self, request: _Request, project_id: str) -> Response:
        return self._feed(request, project_id, materialized=False)

    def _materialized(self, request: _Request, project_id: str) -> Response:
        return self._feed(request, project_id, materialized=True)

    def _mailbox(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        query = decode_query(request.query, MAILBOX_QUERY)
        checked = _reads.mailbox_request(
            box=_str(query, "box"), source_id=_opt_str(query, "source_id"),
            include_completed=_opt_bool(query, "include_completed"), before_seq=_opt_int(query, "before_seq"),
            limit=_opt_int(query, "limit"))

        def attempt(deferred: bool) -> Response:
            m = self._member(request, project_id, deferred=deferred)
            rows = self.store.mailbox(m, _reads.mailbox_for(m, checked))
            page, next_before = _reads.mailbox_page(rows, checked.limit)
            return _ok(_render.mailbox(page, next_before))

        return self._deferred(attempt)

    def route_table(self) -> frozenset[tuple[str, tuple[str, ...]]]:
        """Every served (method, path pattern); ``*`` stands for one path segment."""
        return frozenset((method, pattern) for pattern, methods in self._routes.items() for method in methods)

    def bind_token(self, token: str, source_id: str, actor_id: str) -> None:
        """Confine ``token`` to the MCP gateway, speaking for one source and actor, as an
        ``--auth-bindings-file`` entry does; a service started without bindings gains them."""
        if self.bindings is None:
            self.bindings = Bindings()
            if self._gateway is not None:
                self._gateway.bindings = self.bindings
        self.bindings.bind(token, source_id, actor_id)

    def _mcp(self, request: _Request, project_id: str) -> Response:
        if self._gateway is None:
            self._gateway = Gateway(partial(self.handle, on_behalf=True), Response, self.bindings)
        response: Response = self._gateway.post(project_id, request, self._json_body)
        return response

    def _search(self, request: _Request, project_id: str) -> Response:
        check_id("project_id", project_id)
        query = decode_query(request.query, SEARCH_QUERY)
        terms, limit = _reads.search_request(_str(query, "q"), _opt_int(query, "limit"))

        def attempt(deferred: bool) -> Response:
            m = self._member(request, project_id, deferred=deferred)
            index = self.store.search(m, terms)
            hits = _reads.rank(index, at_least_seq=_opt_int(query, "at_least_seq"), mode=_opt_str(query, "mode"),
                               source_id=_opt_str(query, "source_id"), limit=limit)
            return _ok(_render.search(index.epoch, index.head, hits))

        return self._deferred(attempt)

    # -- the virtual-clock extension (only with --test-clock) --------------------------------
    def _clock_get(self, request: _Request) -> Response:
        return _ok(_render.dumps({"now_ms": self.clock.now_ms()}))

    def _clock_post(self, request: _Request) -> Response:
        body = self._json_body(request)
        advance = body.get("advance_ms") if isinstance(body, dict) else None
        held = body.get("hold", False) if isinstance(body, dict) else None
        if (not isinstance(body, dict) or isinstance(advance, bool) or not isinstance(advance, int) or advance < 0
                or not isinstance(held, bool) or not set(body) <= {"advance_ms", "hold"} or "advance_ms" not in body):
            raise LedgerError.invalid_command('test clock body must be {"advance_ms": <non-negative integer>} '
                                              'with an optional "hold": <boolean>')
        if self.clock.now_ms() + advance > MAX_CLOCK_MS:
            raise LedgerError.invalid_command("test clock cannot move past 2^62 ms (timestamps are stored as i64)")
        assert isinstance(self.clock, AdvancingClock), "--test-clock needs a clock that can advance"
        self.clock.advance(advance)
        self.clock.hold(held)  # each move states the hold: a move without one lets the clock run on
        return _ok(_render.dumps({"now_ms": self.clock.now_ms()}))


def _unquote(segment: str) -> str:
    """A path segment (latin-1 text of its raw bytes) percent-decoded as UTF-8; raises
    UnicodeDecodeError where axum refuses the path."""
    if segment.isascii() and "%" not in segment:
        return segment
    return unquote_to_bytes(segment.encode("latin-1")).decode("utf-8")
