"""Which error wins when a request is wrong in two ways at once: upstream's order, route by route.

Each row is one request that is bad twice (unparseable and unauthenticated, invalid and not a
member, a stale revision and the wrong actor, ...) and the answer upstream gives first, with the
upstream function that fixes the order (commit e2a15d4; ``lib.rs``, ``product.rs`` and ``mcp.rs``
are ``crates/aidememo-server/src/``, ``svc`` is ``crates/aidememo-service/src/lib.rs``, ``store``
is ``crates/aidememo-store-local/src/lib.rs``). Upstream's order per handler:

* reads (``lib.rs`` ``changes``, ``materialized_changes``, ``snapshot``, ``search``, ``resource``;
  ``product.rs`` ``get_identity``, ``list_handoffs``, ``get_handoff``): path ids, then the query's
  parse (and search's ``q`` and ``limit``, the mailbox's ``limit``), then the bearer (401), then the
  membership (403), then what the store checks (feed limit, epoch, range; snapshot size, search's
  ``at_least_seq`` then ``mode``; a mailbox ``before_seq`` past i64, errata 4; not found, visibility);
* ``lib.rs`` ``command``: body, 401, 403, the raw-route rules, then the writer role (``svc``
  ``execute_prepared``), then the receipt and the precondition;
* typed writes (``product.rs`` ``create_*``, ``send_handoff``, ``accept_handoff``, ...): path ids,
  body, 401, 403, the writer role and the receipt (``svc`` ``replay``), then the records each
  handler loads and the domain's own checks, in the handler's order (errata 6 for return);
* ``mcp.rs`` ``mcp_post``: path project, JSON, JSON-RPC shape, protocol header, method and name
  headers, ``_meta``, the token, identity through the REST route, then the method's parameters.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from .conftest import TOKENS, World

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V}
P = "/v1/projects/project_http"
ABOVE_I64 = str(1 << 63)  # a valid u64 that no i64 column holds


class Row(NamedTuple):
    """A request bad in two ways and the answer upstream gives first."""

    id: str
    actor: str | None  # a key of TOKENS, "unknown" (a token nobody holds), "outsider" or None (no token)
    method: str
    target: str
    body: Any  # JSON, raw bytes, or None
    expected: tuple[int, str | int]  # status and error code (a JSON-RPC code on the gateway's own refusals)
    upstream: str  # where upstream's order comes from
    headers: tuple[tuple[str, str], ...] = ()
    message: str = ""  # where both refusals share a status and code: a word only the first one's message has


def _create(cid: str, **payload: Any) -> dict[str, Any]:
    return {"command_id": cid, "payload": payload}


def _move(cid: str, rev: int, **payload: Any) -> dict[str, Any]:
    return {"command_id": cid, "expected_revision": rev, "payload": payload}


def _raw(cid: str, kind: str = "custom.note", project: str = "project_http") -> dict[str, Any]:
    return {"command_id": cid, "project_id": project, "expected_revision": None, "operation": "resource.put",
            "payload": {"v": 1}, "resource": {"kind": kind, "id": "n1"}, "change": "upsert"}


def _rpc(method: str = "tools/list", **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 9, "method": method, "params": {**params, "_meta": META}}


def _mcp_headers(method: str = "tools/list", name: str | None = None) -> tuple[tuple[str, str], ...]:
    headers = (("mcp-protocol-version", V), ("mcp-method", method))
    return headers + ((("mcp-name", name),) if name else ())


READS = [
    Row("identity: bad project id, no token", None, "GET", "/v1/projects/bad%20id/identity", None,
        (400, "invalid_identifier"), "product.rs get_identity: ProjectId before the bearer"),
    Row("identity: unknown token, foreign project", "unknown", "GET", "/v1/projects/project_other/identity", None,
        (401, "authentication_failed"), "product.rs request_context: token before membership"),
    Row("resource: bad kind, no token", None, "GET", f"{P}/resources/Note/n1", None,
        (400, "invalid_identifier"), "lib.rs resource: ResourceKind before the bearer"),
    Row("resource: not a member, missing resource", "outsider", "GET", f"{P}/resources/fact/nothing", None,
        (403, "project_unauthorized"), "lib.rs resource: membership before visible_resource"),
    Row("snapshot: bad project id, unknown token", "unknown", "GET", "/v1/projects/bad%2Fid/snapshot", None,
        (400, "invalid_identifier"), "lib.rs snapshot: ProjectId before the bearer"),
    Row("snapshot: unknown token, foreign project", "unknown", "GET", "/v1/projects/project_other/snapshot", None,
        (401, "authentication_failed"), "lib.rs snapshot: token before membership"),
    *[row for feed in ("changes", "changes/materialized") for row in (
        Row(f"{feed}: bad project id, unparseable query", None, "GET", f"/v1/projects/bad%20id/{feed}?after_seq=x", None,
            (400, "invalid_identifier"), f"lib.rs {feed}: ProjectId before Query"),
        Row(f"{feed}: unknown query field, no token", None, "GET",
            f"{P}/{feed}?project_epoch=epoch_http&after_seq=0&actor_id=x", None,
            (400, "invalid_command"), f"lib.rs {feed}: Query before the bearer"),
        Row(f"{feed}: limit 0, no token", None, "GET", f"{P}/{feed}?project_epoch=epoch_http&after_seq=0&limit=0",
            None, (401, "authentication_failed"), f"lib.rs {feed}: the limit is the store's, after the bearer"),
        Row(f"{feed}: limit 0, not a member", "outsider", "GET",
            f"{P}/{feed}?project_epoch=epoch_http&after_seq=0&limit=0", None,
            (403, "project_unauthorized"), f"lib.rs {feed}: membership before the store's limit"),
        Row(f"{feed}: limit 0, wrong epoch", "codex-p1", "GET", f"{P}/{feed}?project_epoch=other&after_seq=0&limit=0",
            None, (400, "invalid_change_batch"), "store changes / validate_change_cursor: limit before epoch"),
        Row(f"{feed}: wrong epoch, cursor ahead", "codex-p1", "GET", f"{P}/{feed}?project_epoch=other&after_seq=99",
            None, (409, "cursor_epoch_mismatch"), "store changes / validate_change_cursor: epoch before range"),
    )],
    Row("search: blank q, no token", None, "GET", f"{P}/search?q=%20", None,
        (400, "invalid_command"), "lib.rs search: q checked before the bearer"),
    Row("search: limit 101, unknown token", "unknown", "GET", f"{P}/search?q=x&limit=101", None,
        (400, "invalid_command"), "lib.rs search: limit checked before the bearer"),
    Row("search: bad mode, no token", None, "GET", f"{P}/search?q=x&mode=fuzzy", None,
        (401, "authentication_failed"), "lib.rs search: mode checked after the snapshot"),
    Row("search: at_least_seq ahead, not a member", "outsider", "GET", f"{P}/search?q=x&at_least_seq=99", None,
        (403, "project_unauthorized"), "lib.rs search: at_least_seq checked after the snapshot"),
    Row("search: at_least_seq ahead, bad mode", "codex-p1", "GET", f"{P}/search?q=x&at_least_seq=99&mode=fuzzy",
        None, (409, "cursor_out_of_range"), "lib.rs search: at_least_seq before mode"),
    Row("search: bad source_id, no token", None, "GET", f"{P}/search?q=x&source_id=a%20b", None,
        (400, "invalid_command"), "lib.rs search: SearchQuery's SourceId is parsed before the bearer"),
    Row("mailbox: bad source_id, unknown token", "unknown", "GET", f"{P}/handoffs?box=inbox&source_id=a%20b", None,
        (400, "invalid_command"), "product.rs list_handoffs: HandoffListQuery's SourceId before the bearer"),
    Row("mailbox: limit 0, no token", None, "GET", f"{P}/handoffs?box=inbox&limit=0", None,
        (400, "invalid_command"), "product.rs list_handoffs: HandoffQuery::new before the bearer"),
    Row("mailbox: identity in the query, no token", None, "GET", f"{P}/handoffs?box=inbox&actor_id=x", None,
        (400, "invalid_command"), "product.rs list_handoffs: Query before the bearer"),
    Row("mailbox: before_seq 2^63, no token", None, "GET",
        f"{P}/handoffs?box=inbox&include_completed=true&before_seq={ABOVE_I64}", None,
        (401, "authentication_failed"), "product.rs list_handoffs: 2^63 is a u64; the bearer first (errata 4)"),
    Row("mailbox: before_seq 2^63, unknown token", "unknown", "GET", f"{P}/handoffs?box=inbox&before_seq={ABOVE_I64}",
        None, (401, "authentication_failed"), "product.rs list_handoffs: the token before the store (errata 4)"),
    Row("mailbox: before_seq 2^63, not a member", "outsider", "GET",
        f"{P}/handoffs?box=outbox&before_seq={ABOVE_I64}", None,
        (403, "project_unauthorized"), "product.rs list_handoffs: membership before the store (errata 4)"),
    Row("mailbox: before_seq 2^63, limit 0", "codex-p1", "GET", f"{P}/handoffs?box=inbox&before_seq={ABOVE_I64}&limit=0",
        None, (400, "invalid_command"), "product.rs list_handoffs: HandoffQuery::new's limit first", message="limit"),
    # Upstream answers 500 storage_failure here (its store's i64 conversion); the reference 400 (errata 4).
    Row("mailbox: before_seq 2^63, member", "codex-p1", "GET", f"{P}/handoffs?box=inbox&before_seq={ABOVE_I64}", None,
        (400, "invalid_command"), "store handoffs: to_i64 fails only here (errata 4: the reference's 400)"),
    Row("status: bad handoff id, no token", None, "GET", f"{P}/handoffs/bad%20id", None,
        (400, "invalid_identifier"), "product.rs get_handoff: HandoffId before the bearer"),
    Row("status: not a member, missing handoff", "outsider", "GET", f"{P}/handoffs/nothing", None,
        (403, "project_unauthorized"), "product.rs get_handoff: membership before load_record"),
    Row("status: missing handoff, not a participant", "hermes", "GET", f"{P}/handoffs/nothing", None,
        (404, "resource_not_found"), "product.rs get_handoff: load_record before is_visible_to"),
]

RAW = [
    Row("command: malformed JSON, no token", None, "POST", "/v1/commands", b"{", (400, "invalid_command"),
        "lib.rs command: Json before the bearer"),
    Row("command: product kind, no token", None, "POST", "/v1/commands", _raw("c1", kind="session"),
        (401, "authentication_failed"), "lib.rs command: validate_resource_command after the bearer"),
    Row("command: product kind, not a member", "outsider", "POST", "/v1/commands", _raw("c2", kind="session"),
        (403, "project_unauthorized"), "lib.rs command: membership before validate_resource_command"),
    Row("command: product kind, reader", "reader_actor", "POST", "/v1/commands", _raw("c3", kind="session"),
        (400, "invalid_command"), "lib.rs command: validate_resource_command before svc execute_prepared's role"),
    Row("command: reader, reused command id", "reader_actor", "POST", "/v1/commands", _raw("used-raw"),
        (403, "project_unauthorized"), "svc execute_prepared: require_write before the receipt"),
]

_SESSION = {"session_id": "s2", "source_id": None, "topic": ""}  # an empty topic: SessionRecord::new refuses it
CREATES = [
    Row("session: bad project id, malformed body", None, "POST", "/v1/projects/bad%20id/sessions", b"{",
        (400, "invalid_identifier"), "product.rs create_session: ProjectId before decode_json"),
    Row("session: unknown field, no token", None, "POST", f"{P}/sessions",
        {**_create("s-a", **_SESSION), "actor_id": "x"}, (400, "invalid_command"),
        "product.rs create_session: decode_json before the bearer"),
    Row("session: empty topic, no token", None, "POST", f"{P}/sessions", _create("s-b", **_SESSION),
        (401, "authentication_failed"), "product.rs create_session: SessionRecord::new after the bearer"),
    Row("session: empty topic, reader", "reader_actor", "POST", f"{P}/sessions", _create("s-c", **_SESSION),
        (403, "project_unauthorized"), "svc replay: require_write before SessionRecord::new"),
    Row("session: reused command id, reader", "reader_actor", "POST", f"{P}/sessions",
        _create("used-session", **_SESSION), (403, "project_unauthorized"), "svc replay: require_write before the receipt"),
    Row("session: reused command id, empty topic", "codex-p1", "POST", f"{P}/sessions",
        _create("used-session", **_SESSION), (409, "command_conflict"),
        "product.rs create_session: replay before ensure_absent and SessionRecord::new"),
    Row("session: existing session, empty topic", "codex-p1", "POST", f"{P}/sessions",
        _create("s-d", session_id="session_remote", source_id=None, topic=""), (409, "resource_already_exists"),
        "product.rs create_session: ensure_absent before SessionRecord::new"),
    Row("fact: missing session, existing fact, empty content", "codex-p1", "POST", f"{P}/facts",
        _create("f-a", fact_id="fact_done", session_id="nothing", content=""), (404, "resource_not_found"),
        "product.rs create_fact: the session's load_record before ensure_absent and FactRecord::new"),
    Row("fact: existing fact, empty content", "codex-p1", "POST", f"{P}/facts",
        _create("f-b", fact_id="fact_done", session_id="session_remote", content=""), (409, "resource_already_exists"),
        "product.rs create_fact: ensure_absent before FactRecord::new"),
    Row("send: missing session, receiver not a member", "codex-p1", "POST", f"{P}/handoffs",
        _create("h-a", handoff_id="h9", session_id="nothing", to_actor="stranger"), (404, "resource_not_found"),
        "product.rs send_handoff: the session before require_writable_receiver"),
    Row("send: reader receiver, existing handoff", "codex-p1", "POST", f"{P}/handoffs",
        _create("h-b", handoff_id="h1", session_id="session_remote", to_actor="reader_actor"), (400, "invalid_command"),
        "product.rs send_handoff: require_writable_receiver before ensure_absent"),
    Row("send: existing handoff, to oneself", "codex-p1", "POST", f"{P}/handoffs",
        _create("h-c", handoff_id="h1", session_id="session_remote", to_actor="codex-p1"),
        (409, "resource_already_exists"), "product.rs send_handoff: ensure_absent before HandoffRecord::new"),
    Row("send: to oneself, missing context", "codex-p1", "POST", f"{P}/handoffs",
        _create("h-d", handoff_id="h8", session_id="session_remote", to_actor="codex-p1", context_id="nothing"),
        (400, "invalid_command"), "product.rs send_handoff: HandoffRecord::new before the context's load_record"),
    Row("send: empty focus, missing context", "codex-p1", "POST", f"{P}/handoffs",
        _create("h-e", handoff_id="h7", session_id="session_remote", to_actor="codex-p2", focus="",
                context_id="nothing"), (400, "invalid_command"),
        "product.rs send_handoff: HandoffRecord::new's texts before the context"),
    Row("context: missing session, receiver not a member", "codex-p1", "POST", f"{P}/handoff-contexts",
        _create("x-a", context_id="c9", handoff_id="h9", session_id="nothing", to_actor="stranger", content="x"),
        (404, "resource_not_found"), "product.rs create_handoff_context: the session before the receiver"),
    Row("context: reader receiver, to oneself", "codex-p1", "POST", f"{P}/handoff-contexts",
        _create("x-b", context_id="c9", handoff_id="h9", session_id="session_remote", to_actor="reader_actor",
                content=""), (400, "invalid_command"),
        "product.rs create_handoff_context: require_writable_receiver before HandoffContextRecord::new",
        message="writable"),
]

TRANSITIONS = [
    *[row for op in ("accept", "heartbeat") for row in (
        Row(f"{op}: bad handoff id, malformed body", None, "POST", f"{P}/handoffs/bad%20id/{op}", b"{",
            (400, "invalid_identifier"), f"product.rs {op}_handoff: HandoffId before decode_json"),
        Row(f"{op}: missing field, no token", None, "POST", f"{P}/handoffs/h1/{op}",
            {"command_id": f"{op}-a", "payload": {"claim_id": "k1"}}, (400, "invalid_command"),
            f"product.rs {op}_handoff: decode_json before the bearer"),
        Row(f"{op}: missing handoff, no token", None, "POST", f"{P}/handoffs/nothing/{op}",
            _move(f"{op}-b", 1, claim_id="k1"), (401, "authentication_failed"),
            f"product.rs {op}_handoff: load_record after the bearer"),
        Row(f"{op}: missing handoff, reader", "reader_actor", "POST", f"{P}/handoffs/nothing/{op}",
            _move(f"{op}-c", 1, claim_id="k1"), (403, "project_unauthorized"),
            "svc replay: require_write before load_record"),
        Row(f"{op}: missing handoff, stale revision", "codex-p2", "POST", f"{P}/handoffs/nothing/{op}",
            _move(f"{op}-d", 7, claim_id="k1"), (404, "resource_not_found"),
            f"product.rs {op}_handoff: load_record before require_revision"),
        Row(f"{op}: stale revision, not the receiver", "hermes", "POST", f"{P}/handoffs/h1/{op}",
            _move(f"{op}-e", 7, claim_id="k1"), (409, "stale_revision"),
            f"product.rs {op}_handoff: require_revision before the record's actor check"),
    )],
    Row("return: stale revision, missing fact", "hermes", "POST", f"{P}/handoffs/h1/return",
        _move("r-a", 7, claim_id="k1", result_fact_id="nothing", outcome="succeeded"), (409, "stale_revision"),
        "product.rs return_handoff: require_revision before the fact's load_record (errata 6)"),
    Row("return: missing fact, not the receiver", "hermes", "POST", f"{P}/handoffs/h1/return",
        _move("r-b", 1, claim_id="k1", result_fact_id="nothing", outcome="succeeded"), (404, "resource_not_found"),
        "product.rs return_handoff: the fact's load_record before return_result_at (errata 6)"),
    Row("return: not the receiver, not accepted", "hermes", "POST", f"{P}/handoffs/h1/return",
        _move("r-c", 1, claim_id="k1", result_fact_id="fact_done", outcome="succeeded"),
        (403, "handoff_actor_mismatch"), "dom handoff.rs return_result_at: the receiver before the status (errata 6)"),
    Row("return: bad outcome, no token", None, "POST", f"{P}/handoffs/h1/return",
        _move("r-d", 1, claim_id="k1", result_fact_id="fact_done", outcome="done"), (400, "invalid_command"),
        "product.rs return_handoff: decode_json (HandoffOutcome) before the bearer"),
]

_LIST = _mcp_headers()
MCP = [
    Row("mcp: bad project id, malformed JSON", None, "POST", "/v1/projects/bad%20id/mcp", b"{", (400, -32602),
        "mcp.rs mcp_post: ProjectId before the body"),
    Row("mcp: malformed JSON, no protocol header", None, "POST", f"{P}/mcp", b"{", (400, -32700),
        "mcp.rs mcp_post: the body before the protocol header"),
    Row("mcp: not JSON-RPC 2.0, no protocol header", None, "POST", f"{P}/mcp", {**_rpc(), "jsonrpc": "1.0"},
        (400, -32600), "mcp.rs mcp_post: McpRequest before the protocol header"),
    Row("mcp: protocol header missing, method header missing", None, "POST", f"{P}/mcp", _rpc(), (400, -32022),
        "mcp.rs mcp_post: the protocol header before validate_protocol_headers"),
    Row("mcp: method header differs, _meta missing", None, "POST", f"{P}/mcp",
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}, (400, -32020),
        "mcp.rs mcp_post: validate_protocol_headers before validate_meta_protocol",
        (("mcp-protocol-version", V), ("mcp-method", "server/discover"))),
    Row("mcp: _meta missing, no token", None, "POST", f"{P}/mcp",
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}}, (400, -32022),
        "mcp.rs mcp_post: validate_meta_protocol before the Authorization header", _LIST),
    Row("mcp: no token, unknown method", None, "POST", f"{P}/mcp", _rpc("nope/nope"),
        (401, "authentication_failed"), "mcp.rs mcp_post: the token before the method", _mcp_headers("nope/nope")),
    Row("mcp: unknown token, unknown method", "unknown", "POST", f"{P}/mcp", _rpc("nope/nope"),
        (401, "authentication_failed"), "mcp.rs authenticated_identity: identity before the method",
        _mcp_headers("nope/nope")),
    Row("mcp: not a member, unknown method", "outsider", "POST", f"{P}/mcp", _rpc("nope/nope"),
        (403, "project_unauthorized"), "mcp.rs authenticated_identity: identity before the method",
        _mcp_headers("nope/nope")),
    Row("mcp: unknown tool, arguments not an object", "codex-p1", "POST", f"{P}/mcp",
        _rpc("tools/call", name="nope", arguments=[]), (400, -32602),
        "mcp.rs call_tool: the arguments' type before the tool's name", _mcp_headers("tools/call", "nope")),
    Row("mcp: reader's write tool, bad argument", "reader_actor", "POST", f"{P}/mcp",
        _rpc("tools/call", name="session_create", arguments={"operation_id": "op 1", "session_id": "s", "topic": "t"}),
        (400, -32602), "mcp.rs dispatch_session_create: arguments before the REST route's role check",
        _mcp_headers("tools/call", "session_create")),
]

ROWS = READS + RAW + CREATES + TRANSITIONS + MCP


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """One world per backend for every row: each row's request is refused, so none changes what another
    sees. Both stores, because each checks a remembered membership in its own place (ARCHITECTURE,
    "The store protocol") and which error wins must not depend on it."""
    if request.param == "postgres":
        server = request.getfixturevalue("postgres_server")
        name = f"order_{uuid.uuid4().hex[:12]}"
        import psycopg

        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # type: ignore[call-overload]
        w = World(None, f"{server.rsplit('/', 1)[0]}/{name}")
    else:
        w = World(Path(tmp_path_factory.mktemp("order")) / "ledger.sqlite")
    w.ledger.provision(tenant_id="tenant_http", project_id="project_other", actor_id="outsider",
                       token="outsider-token-0123456")
    w.session()
    w.send("h1")
    w.fact("fact_done")
    used = _create("used-session", session_id="s-used", source_id=None, topic="T")
    assert w.call("codex-p1", "POST", w.p("/sessions"), used).status_code == 200
    assert w.call("codex-p1", "POST", "/v1/commands", _raw("used-raw")).status_code == 200
    yield w
    w.http.close()
    w.ledger.close()


def _send(world: World, row: Row) -> tuple[int, Any]:
    headers = [(name.encode(), value.encode()) for name, value in row.headers]
    token = {"unknown": "nobody-holds-this-token", "outsider": "outsider-token-0123456"}.get(row.actor or "")
    if row.actor in TOKENS:
        token = TOKENS[row.actor][0]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    body = b""
    if row.body is not None:
        body = row.body if isinstance(row.body, bytes) else json.dumps(row.body).encode()
        headers.append((b"content-type", b"application/json"))
    answer = world.ledger.handle(row.method, row.target, headers, body)
    return answer.status, json.loads(answer.body)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_the_error_upstream_checks_first_wins(world: World, row: Row) -> None:
    status, body = _send(world, row)
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    assert (status, code) == row.expected, f"{row.id}: answered {status} {body!r}; upstream: {row.upstream}"
    assert row.message in str(error.get("message") if isinstance(error, dict) else ""), (
        f"{row.id}: answered {body!r}, not the refusal upstream checks first ({row.upstream})")


def test_every_route_has_rows(world: World) -> None:
    """Each route the reference serves under /v1 meets at least two of these requests."""
    reached: dict[tuple[str, tuple[str, ...]], int] = {}
    for row in ROWS:
        key = (row.method, _pattern(row.target))
        reached[key] = reached.get(key, 0) + 1
    served = {route for route in world.ledger.service.route_table() if route[1][0] == "v1"}
    thin = sorted(f"{method} /{'/'.join(pattern)}" for method, pattern in served if reached.get((method, pattern), 0) < 2)
    assert not thin, f"routes with fewer than two check-order rows: {thin}"


def _pattern(target: str) -> tuple[str, ...]:
    """The route table's pattern of a request target (``*`` for each parameter)."""
    segments = target.split("?")[0].strip("/").split("/")
    if segments[:2] == ["v1", "projects"]:
        segments[2] = "*"
        if segments[3] == "resources":
            segments[4:6] = ["*", "*"]
        elif segments[3] == "handoffs" and len(segments) > 4:
            segments[4] = "*"
    return tuple(segments)
