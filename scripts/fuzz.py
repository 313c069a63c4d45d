#!/usr/bin/env python3
"""Fuzz every route of the reference ledger with hostile requests drawn by Hypothesis.

Requests are generated from the OpenAPI document the reference ships (routes, parameters,
request schemas), then damaged: malformed JSON, wrong types, unknown and missing fields, the
serde array form, deep nesting, out-of-range numbers, oversized bodies and headers, bad ids,
bad cursors, bad tokens, wrong content types and methods. Each answer must be below 500, an
error body must have the wire shape ``{"error":{"code","message"}}`` with a known code and its
status, and the server must keep serving (``/health`` answers 200 at the end).

    python scripts/fuzz.py --requests 5000 --seed 7            # in-process, through ReferenceLedger.handle
    python scripts/fuzz.py --requests 2000 --seed 7 --http     # a real `aidememo-ref serve` on loopback
    python scripts/fuzz.py --requests 2000 --seed 7 --test-clock   # also the /__test__/clock extension

Prints requests tried, 5xx answers and crashes; exit 0 only when both are 0. Every run prints
its seed and the command that replays it.
"""

from __future__ import annotations

import argparse
import json
import random
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from aidememo_ref import ErrorCode, ManualClock, OffsetClock, ReferenceLedger
from refkit.process import ReferenceProcess, ServerStartError

TENANT: Final = "t-fuzz"
PROJECT: Final = "p-fuzz"
OTHER_PROJECT: Final = "p-other"
EPOCH: Final = "e-fuzz"
# actor -> (token, role, project)
ACTORS: Final = {
    "sender": ("fuzz-sender-token-0123456789", "writer", PROJECT),
    "receiver": ("fuzz-receiver-token-0123456789", "writer", PROJECT),
    "reader": ("fuzz-reader-token-0123456789", "reader", PROJECT),
    "outsider": ("fuzz-outsider-token-0123456789", "writer", OTHER_PROJECT),
}
# Ids that exist after `populate`, so a share of requests reaches the rules, not only the decoder.
IDS: Final = ["s-1", "h-1", "h-2", "h-done", "f-1", "f-2", "ctx-1", "c-1", "n-1", "fresh-1", "fresh-2", PROJECT,
              OTHER_PROJECT, EPOCH, "sender", "receiver", "reader"]
KINDS: Final = ["custom.note", "session", "fact", "handoff", "handoff_context", "custom.x"]
HOSTILE_IDS: Final = ["", "a" * 129, "%FF", "%00", "..", "%2F", "caf%C3%A9", "UPPER lower", "%20", "a%0Ab",
                      "%E2%80%AE", "a" * 4000, "%C0%AF", "-", "@:.", "%25", "?", "#x"]
DOCUMENT: Final = json.loads(files("aidememo_ref").joinpath("openapi.json").read_bytes())
ERROR_STATUS: Final = {code.value: code.status for code in ErrorCode}
MAX_BODY: Final = 1_048_576


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    def __repr__(self) -> str:
        body = self.body if len(self.body) <= 300 else self.body[:300] + b"...(%d bytes)" % len(self.body)
        return f"Request({self.method!r}, {self.target[:300]!r}, {self.headers!r}, {body!r})"


@dataclass(slots=True)
class Tally:
    tried: int = 0
    server_errors: int = 0
    crashes: int = 0
    by_status: dict[int, int] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if len(self.findings) < 20:
            self.findings.append(problem)


# -- the world every request lands in ---------------------------------------------------------

def populate(send: Callable[[Request], tuple[int, dict[str, str], bytes]]) -> None:
    """Create a session, facts, a context and handoffs in several states, over the wire."""

    def post(actor: str, path: str, body: dict[str, Any]) -> None:
        status, _, answer = send(Request("POST", f"/v1/projects/{PROJECT}{path}".encode(), (
            (b"authorization", f"Bearer {ACTORS[actor][0]}".encode()), (b"content-type", b"application/json")),
            json.dumps(body).encode()))
        if status != 200:
            raise SystemExit(f"error: could not populate the fuzz ledger: {path} answered {status} {answer[:200]!r}")

    post("sender", "/sessions", {"command_id": "c-s-1", "payload": {"session_id": "s-1", "source_id": "src", "topic": "t"}})
    post("sender", "/handoff-contexts", {"command_id": "c-ctx-1", "payload": {
        "context_id": "ctx-1", "handoff_id": "h-1", "session_id": "s-1", "to_actor": "receiver", "content": "c"}})
    for hid in ("h-1", "h-2", "h-done"):
        post("sender", "/handoffs", {"command_id": f"c-send-{hid}", "payload": {
            "handoff_id": hid, "session_id": "s-1", "to_actor": "receiver", "context_id": "ctx-1" if hid == "h-1" else None}})
    post("receiver", "/handoffs/h-2/accept", {"command_id": "c-acc-2", "expected_revision": 1, "payload": {"claim_id": "c-1"}})
    post("receiver", "/facts", {"command_id": "c-f-1", "payload": {"fact_id": "f-1", "session_id": "s-1", "content": "done"}})
    post("receiver", "/handoffs/h-done/accept", {"command_id": "c-acc-d", "expected_revision": 1, "payload": {"claim_id": "c-1"}})
    post("receiver", "/handoffs/h-done/return", {"command_id": "c-ret-d", "expected_revision": 2, "payload": {
        "claim_id": "c-1", "result_fact_id": "f-1", "outcome": "succeeded"}})


def provision_all(ledger_or_path: ReferenceLedger | Path) -> None:
    from aidememo_ref import provision

    for actor, (token, role, project) in ACTORS.items():
        kwargs = dict(tenant_id=TENANT, project_id=project, actor_id=actor, token=token, role=role, project_epoch=EPOCH)
        if isinstance(ledger_or_path, ReferenceLedger):
            ledger_or_path.provision(**kwargs)
        else:
            provision(ledger_or_path, **kwargs)


def in_process_sender(ledger: ReferenceLedger) -> Callable[[Request], tuple[int, dict[str, str], bytes]]:
    def send(request: Request) -> tuple[int, dict[str, str], bytes]:
        response = ledger.handle(request.method, request.target, list(request.headers), request.body)
        return response.status, {k.lower(): v for k, v in response.headers}, response.body

    return send


class Crash(Exception):
    """The server did not answer: connection refused or reset, or no answer in time."""


def http_sender(host: str, port: int, timeout_s: float = 10.0) -> Callable[[Request], tuple[int, dict[str, str], bytes]]:
    """Raw HTTP/1.1 over a fresh loopback connection per request (no client-side header checks)."""

    def send(request: Request) -> tuple[int, dict[str, str], bytes]:
        head = [f"{request.method} ".encode() + request.target + b" HTTP/1.1", f"host: {host}:{port}".encode(),
                b"connection: close", b"content-length: %d" % len(request.body)]
        head += [k + b": " + v for k, v in request.headers]
        raw = b"\r\n".join(head) + b"\r\n\r\n" + request.body
        chunks: list[bytes] = []
        try:
            with socket.create_connection((host, port), timeout=timeout_s) as sock:
                try:
                    sock.sendall(raw)
                except (ConnectionResetError, BrokenPipeError):
                    pass  # the server may answer and close before reading a body it refuses
                while chunk := sock.recv(65536):
                    chunks.append(chunk)
        except ConnectionResetError:
            if not chunks:
                raise Crash("connection reset with no answer") from None
        except OSError as exc:
            raise Crash(f"{type(exc).__name__}: {exc}") from None
        return parse_response(b"".join(chunks))

    return send


def parse_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[1].isdigit():
        raise Crash(f"not an HTTP response: {raw[:100]!r}")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        headers[name.strip().lower().decode("latin-1")] = value.strip().decode("latin-1")
    return int(parts[1]), headers, body


# -- strategies --------------------------------------------------------------------------------

def _ref(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = DOCUMENT["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                      st.text(max_size=20))
any_json = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), inner, max_size=4)), max_leaves=12)


def from_schema(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Mostly valid values for a schema of the document (ids come from the populated world)."""
    schema = _ref(schema)
    if "anyOf" in schema or "oneOf" in schema:
        return st.one_of([from_schema(s) for s in schema.get("anyOf", schema.get("oneOf"))])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind is None:
        return any_json
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        low, high = schema.get("minimum", 0), min(schema.get("maximum", 2**64 - 1), 2**64 - 1)
        # Mostly small (live revisions and cursors are small), sometimes the bounds or anything.
        return st.integers(0, 9).flatmap(lambda n: st.integers(low, min(high, low + 4)) if n < 7 else
                                         st.sampled_from([low, high]) if n < 9 else st.integers(low, high))
    if kind == "string":
        if schema.get("pattern", "").startswith("^[A-Za-z0-9"):
            return st.sampled_from(IDS)
        if schema.get("pattern", "").startswith("^[a-z0-9"):
            return st.sampled_from(KINDS)
        return st.text(min_size=1, max_size=30)
    if kind == "object":
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        optional = [name for name in props if name not in required]
        return st.fixed_dictionaries(
            {name: from_schema(props[name]) for name in props if name in required},
            optional={name: from_schema(props[name]) for name in optional},
        )
    if kind == "array":
        return st.lists(from_schema(schema.get("items", {})), max_size=3)
    return any_json


wrong_value = st.one_of(
    st.sampled_from([None, True, 0, -1, 2**64, 2**64 - 1, 2**63, -(2**63) - 1, 1.5, 1e300, "", "x" * 200, [], {}, [1, 2],
                     {"a": 1}, "\u0000", "\ud7ff", "a" * 129]),
    any_json,
)


@st.composite
def damaged_value(draw: st.DrawFn, value: Any) -> Any:
    """The value with one hostile change somewhere: a field dropped, added, retyped, or the serde array form."""
    if isinstance(value, dict) and value:
        key = draw(st.sampled_from(sorted(value)))
        move = draw(st.sampled_from(["drop", "add", "retype", "recurse", "array"]))
        out = dict(value)
        if move == "drop":
            del out[key]
        elif move == "add":
            out[draw(st.sampled_from(["tenant_id", "actor_id", "extra", key.upper(), "project_id", "expected_revision"]))] = draw(wrong_value)
        elif move == "retype":
            out[key] = draw(wrong_value)
        elif move == "recurse":
            out[key] = draw(damaged_value(out[key]))
        else:
            extra = draw(st.lists(wrong_value, max_size=1))
            return [*out.values(), *extra]
        return out
    return draw(wrong_value)


def _nested(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


raw_garbage = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"}", b"null", b"[]", b'"x"', b"NaN", b'{"a":NaN}', b'{"a":Infinity}', b"1e400",
                     b'{"command_id":1e400}', b"\xef\xbb\xbf{}", b'{"a":1}{"b":2}', b'{"a":1,"a":2}', b'{"\xff":1}',
                     b'"\\ud800"', b'{"a":"\\ud800"}', b"[" * 200 + b"]" * 200, _nested(129), _nested(3000),
                     b"[" * 100_000, b'{"a":' + b"9" * 5000 + b"}", b"\x00" * 64, b"-0", b"1" * 400]),
)


@st.composite
def bodies(draw: st.DrawFn, schema: dict[str, Any] | None) -> bytes:
    if schema is None or draw(st.integers(0, 9)) == 0:
        return draw(raw_garbage)
    value = draw(from_schema(schema))
    choice = draw(st.integers(0, 9))
    if choice < 4:
        value = draw(damaged_value(value))
    elif choice == 4:
        return json.dumps(value).encode()[: draw(st.integers(0, 40))]  # truncated
    elif choice == 5 and isinstance(value, dict):
        size = draw(st.sampled_from([70_000, MAX_BODY - 64, MAX_BODY + 1]))
        value = dict(value, payload={"pad": "x" * size})  # around and over the 1 MiB limit
    return json.dumps(value, ensure_ascii=draw(st.booleans())).encode()


@st.composite
def path_value(draw: st.DrawFn, name: str, schema: dict[str, Any]) -> str:
    if name == "project_id" and draw(st.integers(0, 3)):
        return PROJECT  # most requests must get past membership to reach the rules
    if draw(st.integers(0, 3)) == 0:
        return draw(st.one_of(st.sampled_from(HOSTILE_IDS), st.text(min_size=1, max_size=12).map(lambda s: quote(s, safe=""))))
    return str(draw(from_schema(schema)))


@st.composite
def query_string(draw: st.DrawFn, params: list[dict[str, Any]]) -> str:
    pairs = []
    for param in params:
        if param["in"] != "query":
            continue
        if param.get("required") or draw(st.booleans()):
            if draw(st.integers(0, 3)) == 0:
                text = draw(st.sampled_from(["", "-1", "+5", "1.0", "18446744073709551616", "99999999999999999999999",
                                             "9223372036854775808", "0", "true", "TRUE", "%FF", "%00", "a" * 5000, " ", "%20x%20",
                                             "semantic", "HYBRID", "inbox", "nope", EPOCH, "e-other", "10001", "101"]))
            else:
                value = draw(from_schema(param["schema"]))
                text = quote(json.dumps(value) if isinstance(value, bool) else str(value), safe="")
            pairs.append(f"{param['name']}={text}")
    extra = draw(st.sampled_from(["", "", "", "actor_id=x", "limit=1", "=", "&&", "%ZZ=1", "a", "%FF=%FF", "after_seq=0"]))
    if extra:
        pairs.insert(draw(st.integers(0, len(pairs))), extra)
    return "&".join(pairs)


writer_tokens = st.sampled_from([f"Bearer {ACTORS[actor][0]}".encode() for actor in ("sender", "receiver")])
other_tokens = st.sampled_from([
    *(f"Bearer {ACTORS[actor][0]}".encode() for actor in ("reader", "outsider")),
    b"Bearer", b"Bearer ", b"Bearer  " + ACTORS["sender"][0].encode(), b"bearer " + ACTORS["sender"][0].encode(),
    b"Basic dXNlcjpwYXNz", b"Bearer " + b"x" * 4097, b"Bearer " + b"x" * 4096, b"Bearer \xff\xfe",
    b"Bearer tok\ten", b"Bearer unknown-token", b"Bearer \x7f", b"\x00", b"Bearer " + ACTORS["sender"][0].encode() + b" ",
])
content_types = st.sampled_from([b"application/json", b"application/json; charset=utf-8", b"APPLICATION/JSON",
                                 b"application/problem+json", b"text/plain", b"application/jsonx", b"", b"application/",
                                 b"multipart/form-data; boundary=x", b"\xff"])


@st.composite
def requests(draw: st.DrawFn, extensions: bool = False) -> Request:
    """One hostile request against a documented route (sometimes with another method or path).

    ``extensions`` adds the routes marked ``x-aidememo-extension`` (the test clock), which a
    production-like server does not serve.
    """
    routes = sorted((t, i) for t, i in DOCUMENT["paths"].items() if extensions or "x-aidememo-extension" not in i)
    template, item = draw(st.sampled_from(routes))
    methods = [m for m in item if not m.startswith("x-")]
    method = draw(st.sampled_from(methods)).upper()
    if draw(st.integers(0, 19)) == 0:
        method = draw(st.sampled_from(["PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "GET", "POST"]))
    operation = item.get(method.lower(), item[methods[0]])
    params = operation.get("parameters", [])
    segments = []
    for segment in template.split("/")[1:]:
        if segment.startswith("{"):
            param = next(p for p in params if p["name"] == segment[1:-1])
            segments.append(draw(path_value(param["name"], param["schema"])))
        else:
            segments.append(segment)
    path = "/" + "/".join(segments)
    if draw(st.integers(0, 29)) == 0:
        path += draw(st.sampled_from(["/", "//", "/extra", "/%2e%2e"]))
    query = draw(query_string(params))
    target = (path + ("?" + query if query else "")).encode("utf-8")
    headers: list[tuple[bytes, bytes]] = []
    if draw(st.integers(0, 5)):
        headers.append((b"authorization", draw(writer_tokens if draw(st.integers(0, 9)) < 5 else other_tokens)))
    request_body = operation.get("requestBody")
    schema = request_body["content"]["application/json"]["schema"] if request_body else None
    body = draw(bodies(schema)) if method in ("POST", "PUT", "PATCH") or draw(st.integers(0, 9)) == 0 else b""
    if body or draw(st.booleans()):
        headers.append((b"content-type", draw(content_types) if draw(st.integers(0, 4)) == 0 else b"application/json"))
    if draw(st.integers(0, 19)) == 0:
        headers.append((b"x-padding", b"p" * draw(st.sampled_from([100, 8000, 60_000]))))
    if draw(st.integers(0, 29)) == 0:
        headers.append(headers[0] if headers else (b"authorization", b"Bearer x"))  # a repeated header
    return Request(method, target, tuple(headers), body)


# -- judging an answer ---------------------------------------------------------------------------

def problems(request: Request, status: int, headers: dict[str, str], body: bytes) -> list[str]:
    """What is wrong with one answer: a 5xx, or an error body without the wire shape."""
    found = []
    if status >= 500:
        found.append(f"{status} answer {body[:200]!r}")
    if status >= 400 and body and headers.get("content-type", "").startswith("application/json"):
        try:
            value = json.loads(body)
        except ValueError:
            return [*found, f"{status} with a JSON content type but no JSON body: {body[:200]!r}"]
        if request.target.split(b"?")[0].endswith(b"/mcp") and isinstance(value, dict) and "jsonrpc" in value:
            rpc = value.get("error")  # the MCP gateway refuses in JSON-RPC's shape
            if not (isinstance(rpc, dict) and isinstance(rpc.get("code"), int) and isinstance(rpc.get("message"), str)):
                found.append(f"{status} JSON-RPC error without an integer code and a message: {body[:200]!r}")
            return found
        error = value.get("error") if isinstance(value, dict) and set(value) == {"error"} else None
        if not (isinstance(error, dict) and set(error) == {"code", "message"} and isinstance(error["message"], str)):
            found.append(f"{status} error body without the wire shape: {body[:200]!r}")
        elif ERROR_STATUS.get(error["code"]) not in (status, 500 if status == 503 else None):
            found.append(f"{status} carries code {error['code']!r}, whose status is {ERROR_STATUS.get(error['code'])}")
    return found


Extra = Callable[[Request, int, dict[str, str], bytes], list[str]]


def judge(request: Request, send: Callable[[Request], tuple[int, dict[str, str], bytes]], tally: Tally,
          extra: Extra | None = None) -> None:
    """Send one request and record what is wrong with its answer (``extra`` adds checks)."""
    tally.tried += 1
    try:
        status, headers, body = send(request)
    except Crash as exc:
        tally.crashes += 1
        tally.note(f"crash ({exc}) on {request!r}")
        return
    except Exception as exc:  # in-process, a crash is any exception escaping handle()
        tally.crashes += 1
        tally.note(f"crash ({type(exc).__name__}: {exc}) on {request!r}")
        return
    tally.by_status[status] = tally.by_status.get(status, 0) + 1
    if status >= 500:
        tally.server_errors += 1
    found = problems(request, status, headers, body)
    if extra is not None:
        found += extra(request, status, headers, body)
    for problem in found:
        tally.note(f"{problem} on {request!r}")


def run_campaign(send: Callable[[Request], tuple[int, dict[str, str], bytes]], *, count: int, seed_value: int,
                 extra: Extra | None = None, extensions: bool = False) -> Tally:
    """Draw ``count`` requests from the seeded strategy and judge each answer. There is no
    shrinking: every problem is counted, and the seed replays the whole run."""
    tally = Tally()

    @seed(seed_value)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(requests(extensions))
    def one(request: Request) -> None:
        judge(request, send, tally, extra)

    one()
    return tally


# -- the command line ----------------------------------------------------------------------------

def health(send: Callable[[Request], tuple[int, dict[str, str], bytes]]) -> bool:
    try:
        return send(Request("GET", b"/health", (), b""))[0] == 200
    except Exception:
        return False


class OneLineParser(argparse.ArgumentParser):
    """Bad input is one line on stderr and exit 2, never a usage block or a traceback."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="hostile requests to send (default 2000)")
    parser.add_argument("--seed", type=int, default=None, help="seed of every random choice (default: random, printed)")
    parser.add_argument("--http", action="store_true", help="fuzz a real `aidememo-ref serve` on loopback instead of in-process")
    parser.add_argument("--test-clock", action="store_true",
                        help="serve and fuzz the /__test__/clock extension too (off in production)")
    args = parser.parse_args(argv)
    if args.requests < 1 or (args.seed is not None and args.seed < 0):
        print("error: --requests must be positive and --seed non-negative", file=sys.stderr)
        return 2
    seed_value = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    replay = (f"python scripts/fuzz.py --requests {args.requests} --seed {seed_value}" + (" --http" if args.http else "")
              + (" --test-clock" if args.test_clock else ""))
    print(f"seed={seed_value}  (replay: {replay})", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "fuzz.sqlite"
        server = None
        if args.http:
            provision_all(database)
            try:
                server = ReferenceProcess.start(database, test_clock=args.test_clock)
            except ServerStartError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            send = http_sender(server.host, server.port)
        else:
            ledger = ReferenceLedger(database, clock=OffsetClock() if args.test_clock else ManualClock(),
                                     test_clock=args.test_clock)
            provision_all(ledger)
            send = in_process_sender(ledger)
        try:
            populate(send)
            tally = run_campaign(send, count=args.requests, seed_value=seed_value, extensions=args.test_clock)
            alive = health(send) and (server is None or server.process.poll() is None)
        finally:
            if server is not None:
                server.stop()
    if not alive:
        tally.crashes += 1
        tally.note("the server stopped answering /health after the campaign")
    elapsed = time.monotonic() - started
    statuses = " ".join(f"{code}:{n}" for code, n in sorted(tally.by_status.items()))
    print(f"requests tried: {tally.tried}  5xx answers: {tally.server_errors}  crashes: {tally.crashes}  "
          f"({elapsed:.1f} s; statuses {statuses})")
    for finding in tally.findings:
        print(f"FINDING: {finding}")
    if tally.server_errors or tally.crashes or tally.findings:
        print(f"replay: {replay}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
