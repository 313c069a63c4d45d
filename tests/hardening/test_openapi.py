"""The shipped OpenAPI document against the reference that serves it.

The route set must equal the service's route table, request schemas must mirror the decoder's
structs, error enums must name real codes with their real status, and real answers (a scripted
tour of every route plus a fuzz pass) must validate against the document, covering every
documented status except the few that need storage faults or 10,000 resources.
"""

from __future__ import annotations

import json
import sqlite3
from importlib.resources import files
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from aidememo_ref import ErrorCode, ManualClock, ReferenceLedger
from aidememo_ref._commands import STRUCTS, TRANSITION_ROUTES, TYPED_CREATES
from aidememo_ref._service import Service

from .contract import DOCUMENT, check_document, contract_problems, match, operations, validate



def _unprovoked(method: str, status: int) -> bool:
    """Documented answers the coverage check does not provoke: 413 snapshot_too_large needs
    10,000 resources, and read routes take no write lock, so only a broken disk gives them 5xx."""
    return status == 413 or (method == "GET" and status in (500, 503))


def _route_keys(service: Service) -> set[tuple[str, tuple[str, ...]]]:
    return set(service.route_table())


@pytest.mark.parametrize("test_clock", [False, True])
def test_documented_routes_are_exactly_the_served_routes(tmp_path: Path, test_clock: bool) -> None:
    ledger = ReferenceLedger(tmp_path / "r.sqlite", clock=ManualClock(), test_clock=test_clock)
    documented = {(op.method, op.segments) for op in operations() if test_clock or op.extension is None}
    assert documented == _route_keys(ledger.service)


def test_the_served_document_is_the_shipped_file(tmp_path: Path) -> None:
    ledger = ReferenceLedger(tmp_path / "r.sqlite")
    response = ledger.handle("GET", "/openapi.json")
    assert response.status == 200
    assert response.body == files("aidememo_ref").joinpath("openapi.json").read_bytes()
    assert json.loads(response.body)["openapi"] == "3.1.0"


def test_path_parameters_are_declared_in_template_order() -> None:
    for op in operations():
        in_template = [s[1:-1] for s in op.template.split("/") if s.startswith("{")]
        declared = [p["name"] for p in op.spec.get("parameters", []) if p["in"] == "path"]
        assert declared == in_template, op.template


def _schema(ref: dict[str, Any]) -> dict[str, Any]:
    return DOCUMENT["components"]["schemas"][ref["$ref"].rsplit("/", 1)[1]]


def _assert_mirrors(schema: dict[str, Any], struct: str, *, strict: bool = True) -> None:
    fields = STRUCTS[struct]
    assert list(schema["properties"]) == [f.name for f in fields], struct
    assert schema["required"] == [f.name for f in fields if not f.optional], struct
    assert schema["additionalProperties"] is (not strict), struct


def test_request_schemas_mirror_the_decoder_structs() -> None:
    bodies = {op.template.rsplit("/", 1)[1]: _schema(op.spec["requestBody"]["content"]["application/json"]["schema"])
              for op in operations() if "requestBody" in op.spec and op.template.startswith("/v1")}
    command = bodies.pop("commands")
    bodies.pop("mcp")  # a JSON-RPC envelope, not a decoder struct
    _assert_mirrors(command, "CommandRequest")
    _assert_mirrors(_schema(command["properties"]["resource"]), "resource", strict=False)
    for segment, (_, _, payload, _) in TYPED_CREATES.items():
        _assert_mirrors(bodies[segment], "CreateRequest")
        _assert_mirrors(_schema(bodies[segment]["properties"]["payload"]), payload)
    for segment, (_, payload) in TRANSITION_ROUTES.items():
        _assert_mirrors(bodies[segment], "TransitionRequest")
        _assert_mirrors(_schema(bodies[segment]["properties"]["payload"]), payload)
    assert set(bodies) == set(TYPED_CREATES) | set(TRANSITION_ROUTES)


def test_error_enums_name_real_codes_with_their_status() -> None:
    seen = set()
    for op in operations():
        for status, response in op.spec["responses"].items():
            if int(status) < 400:
                continue
            schema = response["content"]["application/json"]["schema"]
            if "allOf" not in schema:
                continue  # the MCP route's JSON-RPC errors carry integer codes
            codes = schema["allOf"][1]["properties"]["error"]["properties"]["code"]["enum"]
            for code in codes:
                wire = ErrorCode(code)
                assert wire.status == int(status) or (code == "storage_failure" and status == "503"), (op.template, code)
                seen.add(wire)
    # Codes the reference never raises (nothing outside _errors.py names them); the wire spec
    # keeps them for replication and client-side identity checks. (identity_mismatch is raised:
    # by the MCP gateway, for a token bound to another actor.)
    never = {ErrorCode.CONFORMANCE_VIOLATION, ErrorCode.PROJECT_SCOPE_MISMATCH}
    assert set(ErrorCode) - seen == never


def test_every_bearer_route_declares_the_security_scheme() -> None:
    for op in operations():
        public = op.template in ("/health", "/openapi.json") or op.extension == "test-clock"
        assert op.spec["security"] == ([] if public else [{"bearer": []}]), op.template
        if not public:
            assert "401" in op.spec["responses"], op.template


def test_every_component_is_a_valid_2020_12_schema() -> None:
    check_document()


def test_the_validator_rejects_what_it_should() -> None:
    receipt = {"$ref": "#/components/schemas/Receipt"}
    good = {"command_id": "c", "fingerprint": "0" * 64, "tenant_id": "t", "project_id": "p", "actor_id": "a",
            "project_seq": 1, "resource": {"kind": "session", "id": "s"}, "revision": 1, "committed_at_ms": 5}
    assert validate(good, receipt) == []
    assert validate({**good, "extra": 1}, receipt)
    assert validate({**good, "revision": 0}, receipt)
    assert validate({**good, "resource": {"kind": "Session", "id": "s"}}, receipt)
    assert validate({k: v for k, v in good.items() if k != "fingerprint"}, receipt)
    assert validate({**good, "revision": 1.0}, receipt) and validate({**good, "revision": True}, receipt)
    hit = {"$ref": "#/components/schemas/SearchHit"}  # anyOf with a $ref inside, and a nullable id
    found = {"fact_id": "f", "session_id": "s", "source_id": None, "actor_id": "a", "content": "x", "score": 0.5}
    assert validate(found, hit) == [] and validate({**found, "source_id": "bad id"}, hit)
    assert contract_problems("GET", "/v1/projects/p/identity", 418, {}, b"")
    assert contract_problems("GET", "/nowhere", 200, {}, b"{}")


# -- real answers against the document ----------------------------------------------------------

def _tour(fuzz: ModuleType) -> list[tuple[str, str, str | None, Any, bytes | None]]:
    """(method, path, actor, json body, raw body) chosen to provoke each documented status."""
    p = f"/v1/projects/{fuzz.PROJECT}"
    e = fuzz.EPOCH
    raw = {"command_id": "tour-put", "project_id": fuzz.PROJECT, "expected_revision": None, "operation": "resource.put",
           "payload": {"a": 1}, "resource": {"kind": "custom.note", "id": "n-tour"}, "change": "upsert"}
    accept = {"command_id": "tour-acc", "expected_revision": 1, "payload": {"claim_id": "c-tour"}}
    return [
        ("GET", "/health", None, None, None), ("HEAD", "/health", None, None, None),
        ("GET", "/openapi.json", None, None, None),
        ("POST", "/v1/commands", "sender", raw, None),
        ("POST", "/v1/commands", "sender", raw, None),  # identical replay
        ("POST", "/v1/commands", "receiver", raw, None),  # command_conflict
        ("POST", "/v1/commands", "sender", {**raw, "command_id": "tour-stale", "expected_revision": 9}, None),
        ("POST", "/v1/commands", "sender", {**raw, "command_id": "tour-404", "expected_revision": 1,
                                            "resource": {"kind": "custom.note", "id": "absent"}}, None),
        ("POST", "/v1/commands", "reader", {**raw, "command_id": "tour-reader"}, None),
        ("POST", "/v1/commands", None, raw, None),
        ("POST", "/v1/commands", "sender", None, b"{"),
        ("GET", f"{p}/changes?project_epoch={e}&after_seq=0", "sender", None, None),
        ("GET", f"{p}/changes?project_epoch={e}&after_seq=0&limit=0", "sender", None, None),
        ("GET", f"{p}/changes?project_epoch=other&after_seq=0", "sender", None, None),
        ("GET", f"{p}/changes?project_epoch={e}&after_seq=99999", "sender", None, None),
        ("GET", f"{p}/changes?project_epoch={e}&after_seq=x", "sender", None, None),
        ("GET", f"{p}/changes?project_epoch={e}&after_seq=0", "outsider", None, None),
        ("GET", f"{p}/changes?project_epoch={e}&after_seq=0", None, None, None),
        ("GET", "/v1/projects/bad%20id/changes?project_epoch=e&after_seq=0", "sender", None, None),
        ("GET", f"{p}/changes/materialized?project_epoch={e}&after_seq=0", "sender", None, None),
        ("GET", f"{p}/changes/materialized?project_epoch={e}&after_seq=0&limit=10001", "sender", None, None),
        ("GET", f"{p}/changes/materialized?project_epoch=other&after_seq=0", "sender", None, None),
        ("GET", f"{p}/changes/materialized?project_epoch={e}", "sender", None, None),
        ("GET", f"{p}/changes/materialized?project_epoch={e}&after_seq=0", "outsider", None, None),
        ("GET", f"{p}/changes/materialized?project_epoch={e}&after_seq=0", None, None, None),
        ("GET", f"{p}/snapshot", "sender", None, None), ("GET", f"{p}/snapshot", "outsider", None, None),
        ("GET", f"{p}/snapshot", None, None, None), ("GET", "/v1/projects/%FF/snapshot", "sender", None, None),
        ("GET", "/v1/projects/a%20b/snapshot", "sender", None, None),
        ("GET", f"{p}/search?q=done", "sender", None, None), ("GET", f"{p}/search?q=done&mode=semantic", "sender", None, None),
        ("GET", f"{p}/search?q=done&at_least_seq=99999", "sender", None, None),
        ("GET", f"{p}/search?q=done", "outsider", None, None), ("GET", f"{p}/search?q=done", None, None, None),
        ("GET", f"{p}/resources/custom.note/n-tour", "sender", None, None),
        ("GET", f"{p}/resources/custom.note/absent", "sender", None, None),
        ("GET", f"{p}/resources/Custom/x", "sender", None, None),
        ("GET", f"{p}/resources/custom.note/n-tour", "outsider", None, None),
        ("GET", f"{p}/resources/custom.note/n-tour", None, None, None),
        ("GET", f"{p}/identity", "sender", None, None), ("GET", f"{p}/identity", "outsider", None, None),
        ("GET", f"{p}/identity", None, None, None), ("GET", "/v1/projects/a%20b/identity", "sender", None, None),
        ("POST", f"{p}/sessions", "sender", {"command_id": "tour-s", "payload": {"session_id": "s-tour", "topic": "t"}}, None),
        ("POST", f"{p}/sessions", "sender", {"command_id": "tour-s2", "payload": {"session_id": "s-tour", "topic": "t"}}, None),
        ("POST", f"{p}/sessions", "receiver", {"command_id": "tour-s", "payload": {"session_id": "s-tour", "topic": "t"}}, None),
        ("POST", f"{p}/sessions", "reader", {"command_id": "tour-s3", "payload": {"session_id": "s-x", "topic": "t"}}, None),
        ("POST", f"{p}/sessions", None, {"command_id": "tour-s3", "payload": {"session_id": "s-x", "topic": "t"}}, None),
        ("POST", "/v1/projects/a%20b/sessions", "sender", {}, None),
        ("POST", f"{p}/sessions", "sender", {"command_id": "tour-s4", "payload": {"session_id": "s-y"}}, None),
        ("POST", f"{p}/facts", "sender", {"command_id": "tour-f", "payload": {"fact_id": "f-t", "session_id": "nope", "content": "c"}}, None),
        ("POST", f"{p}/facts", "sender", {"command_id": "tour-f2", "payload": {"fact_id": "f-t", "session_id": "s-1", "content": "c"}}, None),
        ("POST", f"{p}/facts", "sender", {"command_id": "tour-f3", "payload": {"fact_id": "f-t", "session_id": "s-1", "content": "c"}}, None),
        ("POST", f"{p}/facts", "receiver", {"command_id": "tour-f2", "payload": {"fact_id": "f-t", "session_id": "s-1", "content": "c"}}, None),
        ("POST", f"{p}/facts", "outsider", {"command_id": "tour-f9", "payload": {"fact_id": "f-9", "session_id": "s-1", "content": "c"}}, None),
        ("POST", f"{p}/facts", None, {"command_id": "a", "payload": {"fact_id": "f", "session_id": "s-1", "content": "c"}}, None), ("POST", "/v1/projects/a%20b/facts", "sender", {}, None),
        ("POST", f"{p}/facts", "sender", {"command_id": "tour-f4"}, None),
        ("POST", f"{p}/handoff-contexts", "sender", {"command_id": "tour-c", "payload": {
            "context_id": "ctx-t", "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver", "content": "c"}}, None),
        ("POST", f"{p}/handoff-contexts", "sender", {"command_id": "tour-c2", "payload": {
            "context_id": "ctx-t", "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver", "content": "c"}}, None),
        ("POST", f"{p}/handoff-contexts", "receiver", {"command_id": "tour-c", "payload": {
            "context_id": "ctx-t", "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver", "content": "c"}}, None),
        ("POST", f"{p}/handoff-contexts", "sender", {"command_id": "tour-c3", "payload": {
            "context_id": "ctx-u", "handoff_id": "h-t", "session_id": "nope", "to_actor": "receiver", "content": "c"}}, None),
        ("POST", f"{p}/handoff-contexts", "reader", {"command_id": "tour-c4", "payload": {
            "context_id": "ctx-u", "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver", "content": "c"}}, None),
        ("POST", f"{p}/handoff-contexts", None, {"command_id": "a", "payload": {
            "context_id": "x", "handoff_id": "h", "session_id": "s-1", "to_actor": "receiver", "content": "c"}}, None), ("POST", "/v1/projects/a%20b/handoff-contexts", "sender", {}, None),
        ("POST", f"{p}/handoff-contexts", "sender", [], None),
        ("POST", f"{p}/handoffs", "sender", {"command_id": "tour-h", "payload": {
            "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver", "context_id": "ctx-t"}}, None),
        ("POST", f"{p}/handoffs", "sender", {"command_id": "tour-h2", "payload": {
            "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver"}}, None),
        ("POST", f"{p}/handoffs", "sender", {"command_id": "tour-h3", "payload": {
            "handoff_id": "h-u", "session_id": "s-1", "to_actor": "receiver", "context_id": "ctx-1"}}, None),
        ("POST", f"{p}/handoffs", "receiver", {"command_id": "tour-h", "payload": {
            "handoff_id": "h-t", "session_id": "s-1", "to_actor": "receiver", "context_id": "ctx-t"}}, None),
        ("POST", f"{p}/handoffs", "sender", {"command_id": "tour-h4", "payload": {
            "handoff_id": "h-v", "session_id": "nope", "to_actor": "receiver"}}, None),
        ("POST", f"{p}/handoffs", "reader", {"command_id": "tour-h5", "payload": {
            "handoff_id": "h-v", "session_id": "s-1", "to_actor": "receiver"}}, None),
        ("POST", f"{p}/handoffs", None, {"command_id": "a", "payload": {
            "handoff_id": "h", "session_id": "s-1", "to_actor": "receiver"}}, None), ("POST", "/v1/projects/a%20b/handoffs", "sender", {}, None),
        ("POST", f"{p}/handoffs", "sender", {"command_id": "tour-h6", "payload": {"handoff_id": "h-w"}}, None),
        ("GET", f"{p}/handoffs?box=inbox", "receiver", None, None), ("GET", f"{p}/handoffs?box=outbox&limit=1", "sender", None, None),
        ("GET", f"{p}/handoffs?box=sideways", "receiver", None, None), ("GET", f"{p}/handoffs?box=inbox", "outsider", None, None),
        ("GET", f"{p}/handoffs?box=inbox", None, None, None), ("GET", "/v1/projects/a%20b/handoffs?box=inbox", "sender", None, None),
        ("GET", f"{p}/handoffs/h-1", "receiver", None, None), ("GET", f"{p}/handoffs/h-1", "reader", None, None),
        ("GET", f"{p}/handoffs/absent", "receiver", None, None), ("GET", f"{p}/handoffs/h-1", "outsider", None, None),
        ("GET", f"{p}/handoffs/h-1", None, None, None), ("GET", f"{p}/handoffs/a%20b", "receiver", None, None),
        ("POST", f"{p}/handoffs/h-t/accept", "receiver", accept, None),
        ("POST", f"{p}/handoffs/h-t/accept", "sender", accept, None),  # same command id, another actor
        ("POST", f"{p}/handoffs/h-t/accept", "receiver", {**accept, "command_id": "tour-acc2"}, None),  # stale
        ("POST", f"{p}/handoffs/h-t/accept", "sender", {**accept, "command_id": "tour-acc3", "expected_revision": 2}, None),
        ("POST", f"{p}/handoffs/absent/accept", "receiver", {**accept, "command_id": "tour-acc4"}, None),
        ("POST", f"{p}/handoffs/h-2/accept", "receiver", {**accept, "command_id": "tour-acc5", "expected_revision": 2}, None),
        ("POST", f"{p}/handoffs/h-t/accept", "reader", {**accept, "command_id": "tour-acc6"}, None),
        ("POST", f"{p}/handoffs/h-t/accept", None, accept, None),
        ("POST", f"{p}/handoffs/a%20b/accept", "receiver", accept, None),
        ("POST", f"{p}/handoffs/h-t/accept", "receiver", {**accept, "expected_revision": 0}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "receiver", {"command_id": "tour-hb", "expected_revision": 2,
                                                              "payload": {"claim_id": "c-tour"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "receiver", {"command_id": "tour-hb2", "expected_revision": 3,
                                                              "payload": {"claim_id": "other"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "sender", {"command_id": "tour-hb3", "expected_revision": 3,
                                                            "payload": {"claim_id": "c-tour"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "receiver", {"command_id": "tour-hb", "expected_revision": 2,
                                                              "payload": {"claim_id": "c-tour"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "sender", {"command_id": "tour-hb", "expected_revision": 2,
                                                            "payload": {"claim_id": "c-tour"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "receiver", {"command_id": "tour-hb4", "expected_revision": 1,
                                                              "payload": {"claim_id": "c-tour"}}, None),
        ("POST", f"{p}/handoffs/absent/heartbeat", "receiver", {"command_id": "tour-hb5", "expected_revision": 1,
                                                                 "payload": {"claim_id": "c-tour"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "reader", {"command_id": "tour-hb6", "expected_revision": 1,
                                                            "payload": {"claim_id": "c"}}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", None, accept, None), ("POST", f"{p}/handoffs/a%20b/heartbeat", "receiver", {}, None),
        ("POST", f"{p}/handoffs/h-t/heartbeat", "receiver", {"command_id": "x"}, None),
        ("POST", f"{p}/facts", "receiver", {"command_id": "tour-rf", "payload": {"fact_id": "f-tour", "session_id": "s-1",
                                                                                  "content": "c"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "receiver", {"command_id": "tour-ret0", "expected_revision": 3, "payload": {
            "claim_id": "c-tour", "result_fact_id": "absent", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "sender", {"command_id": "tour-ret1", "expected_revision": 3, "payload": {
            "claim_id": "c-tour", "result_fact_id": "f-tour", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "receiver", {"command_id": "tour-ret2", "expected_revision": 3, "payload": {
            "claim_id": "other", "result_fact_id": "f-tour", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "receiver", {"command_id": "tour-ret", "expected_revision": 3, "payload": {
            "claim_id": "c-tour", "result_fact_id": "f-tour", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "sender", {"command_id": "tour-ret", "expected_revision": 3, "payload": {
            "claim_id": "c-tour", "result_fact_id": "f-tour", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "receiver", {"command_id": "tour-ret3", "expected_revision": 1, "payload": {
            "claim_id": "c-tour", "result_fact_id": "f-tour", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/absent/return", "receiver", {"command_id": "tour-ret4", "expected_revision": 1, "payload": {
            "claim_id": "c-tour", "result_fact_id": "f-tour", "outcome": "succeeded"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", "reader", {"command_id": "tour-ret5", "expected_revision": 1, "payload": {
            "claim_id": "c", "result_fact_id": "f", "outcome": "failed"}}, None),
        ("POST", f"{p}/handoffs/h-t/return", None, {"command_id": "a", "expected_revision": 1, "payload": {
            "claim_id": "c", "result_fact_id": "f", "outcome": "failed"}}, None), ("POST", f"{p}/handoffs/a%20b/return", "receiver", {}, None),
        ("POST", f"{p}/handoffs/h-t/return", "receiver", {"command_id": "x", "expected_revision": 1, "payload": {
            "claim_id": "c", "result_fact_id": "f", "outcome": "maybe"}}, None),
        ("GET", "/__test__/clock", None, None, None), ("POST", "/__test__/clock", None, {"advance_ms": 5}, None),
        ("POST", "/__test__/clock", None, {"advance_ms": -5}, None),
        ("DELETE", f"{p}/handoffs", "sender", None, None), ("GET", f"{p}/identity/", "sender", None, None),
        ("GET", "/v1/projects//identity", "sender", None, None), ("GET", "/v2", None, None, None),
    ]


def test_real_answers_validate_and_cover_the_documented_statuses(tmp_path: Path, fuzz: ModuleType) -> None:
    ledger = ReferenceLedger(tmp_path / "tour.sqlite", clock=ManualClock(), test_clock=True)
    fuzz.provision_all(ledger)
    send = fuzz.in_process_sender(ledger)
    fuzz.populate(send)
    observed: set[tuple[str, str, int]] = set()
    failures = []
    for method, path, actor, value, raw in _tour(fuzz):
        headers = []
        if actor is not None:
            headers.append((b"authorization", f"Bearer {fuzz.ACTORS[actor][0]}".encode()))
        body = raw if raw is not None else (b"" if value is None else json.dumps(value).encode())
        if body:
            headers.append((b"content-type", b"application/json"))
        status, answer_headers, answer = send(fuzz.Request(method, path.encode(), tuple(headers), body))
        failures += contract_problems(method, path, status, answer_headers, answer)
        if status >= 500:
            failures.append(f"{method} {path}: client input earned {status}")
        op, _ = match(method, path)
        if op is not None:
            observed.add((op.method, op.template, status))
    observed |= _mcp_tour(ledger, fuzz, send, failures)
    # A fuzz pass on the same ledger adds answers nobody scripted; they must be documented too.
    tally = fuzz.run_campaign(send, count=300, seed_value=20261130,
                              extra=lambda r, s, h, b: contract_problems(r.method, r.target.decode("latin-1"), s, h, b))
    assert failures == [] and tally.findings == [], "\n".join(failures + tally.findings)
    observed |= _storage_faults(tmp_path, fuzz, failures)
    assert failures == [], "\n".join(failures)
    missing = [(op.method, op.template, status) for op in operations() for status in op.statuses()
               if not _unprovoked(op.method, status) and (op.method, op.template, status) not in observed]
    assert missing == [], missing


def _mcp_tour(ledger: ReferenceLedger, fuzz: ModuleType, send: Any, failures: list[str]) -> set[tuple[str, str, int]]:
    """The MCP route's answers (it needs its protocol headers): each documented status once."""
    ledger.provision(tenant_id=fuzz.TENANT, project_id=fuzz.PROJECT, actor_id="bound", token="bound-token-0123456789")
    ledger.bind_token("bound-token-0123456789", "src", "someone-else")  # another actor's: the 403 identity_mismatch
    path = f"/v1/projects/{fuzz.PROJECT}/mcp"
    meta = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    tours = [
        ("sender", "tools/list", None, {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": meta}),
        ("reader", "tools/call", "session_create", {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "session_create", "arguments": {"operation_id": "o", "session_id": "s", "topic": "t"}, **meta}}),
        ("sender", "tools/list", None, {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}}),
        ("sender", "tools/call", "nope", {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                          "params": {"name": "nope", **meta}}),
        (None, "tools/list", None, {"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": meta}),
        ("outsider", "tools/list", None, {"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": meta}),
        ("bound", "tools/list", None, {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": meta}),
    ]
    observed = set()
    for actor, method, name, body in tours:
        token = "bound-token-0123456789" if actor == "bound" else fuzz.ACTORS[actor][0] if actor else None
        headers = [(b"content-type", b"application/json"), (b"mcp-protocol-version", b"2026-07-28"),
                   (b"mcp-method", method.encode())]
        if name:
            headers.append((b"mcp-name", name.encode()))
        if token:
            headers.append((b"authorization", f"Bearer {token}".encode()))
        status, answer_headers, answer = send(fuzz.Request("POST", path.encode(), tuple(headers), json.dumps(body).encode()))
        failures += contract_problems("POST", path, status, answer_headers, answer)
        observed.add(("POST", "/v1/projects/{project_id}/mcp", status))
    return observed


def _storage_faults(tmp_path: Path, fuzz: ModuleType, failures: list[str]) -> set[tuple[str, str, int]]:
    """Every write route answering 503 (a writer holds the lock) and 500 (the disk fails)."""

    def broken_disk(*args: object) -> Any:
        raise sqlite3.DatabaseError("disk I/O error")

    writes = [(op.method, op.template) for op in operations()
              if op.method == "POST" and op.template.startswith("/v1") and not op.template.endswith("/mcp")]
    observed = set()
    for name, kwargs in (("busy", {"busy_timeout_ms": 50}), ("broken", {"decide": broken_disk})):
        ledger = ReferenceLedger(tmp_path / f"{name}.sqlite", clock=ManualClock(), **kwargs)
        fuzz.provision_all(ledger)
        send = fuzz.in_process_sender(ledger)
        if name == "busy":
            fuzz.populate(send)
            blocker = sqlite3.connect(tmp_path / f"{name}.sqlite", isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")
        for method, template in writes:
            path = template.replace("{project_id}", fuzz.PROJECT).replace("{handoff_id}", "h-2")
            body = {"command_id": f"fault-{name}-{len(observed)}", "expected_revision": 2, "payload": {"claim_id": "c-1"}}
            if template == "/v1/commands":
                body = {"command_id": f"fault-{name}", "project_id": fuzz.PROJECT, "operation": "resource.put",
                        "payload": {}, "resource": {"kind": "custom.x", "id": "x"}, "change": "upsert"}
            elif not template.endswith(("accept", "heartbeat", "return")):
                payloads = {"sessions": {"session_id": "s-9", "topic": "t"},
                            "facts": {"fact_id": "f-9", "session_id": "s-1", "content": "c"},
                            "handoff-contexts": {"context_id": "x-9", "handoff_id": "h-9", "session_id": "s-1",
                                                 "to_actor": "receiver", "content": "c"},
                            "handoffs": {"handoff_id": "h-9", "session_id": "s-1", "to_actor": "receiver"}}
                body = {"command_id": f"fault-{name}-{len(observed)}", "payload": payloads[template.rsplit("/", 1)[1]]}
            elif template.endswith("return"):
                body["payload"] = {"claim_id": "c-1", "result_fact_id": "f-1", "outcome": "failed"}
            headers = ((b"authorization", f"Bearer {fuzz.ACTORS['receiver'][0]}".encode()),
                       (b"content-type", b"application/json"))
            status, answer_headers, answer = send(fuzz.Request(method, path.encode(), headers, json.dumps(body).encode()))
            failures += contract_problems(method, path, status, answer_headers, answer)
            observed.add((method, template, status))
        if name == "busy":
            blocker.execute("ROLLBACK")
            blocker.close()
    wanted = {(m, t, s) for m, t in writes for s in (500, 503)}
    assert wanted <= observed, sorted(wanted - observed)
    return observed


@pytest.mark.slow
def test_snapshot_and_search_past_ten_thousand_resources_are_documented_413s(tmp_path: Path, fuzz: ModuleType) -> None:
    ledger = ReferenceLedger(tmp_path / "big.sqlite", clock=ManualClock())
    fuzz.provision_all(ledger)
    send = fuzz.in_process_sender(ledger)
    headers = ((b"authorization", f"Bearer {fuzz.ACTORS['sender'][0]}".encode()), (b"content-type", b"application/json"))
    for i in range(10_001):
        body = {"command_id": f"put-{i}", "project_id": fuzz.PROJECT, "operation": "resource.put", "payload": {"i": i},
                "resource": {"kind": "custom.bulk", "id": f"r-{i}"}, "change": "upsert"}
        assert send(fuzz.Request("POST", b"/v1/commands", headers, json.dumps(body).encode()))[0] == 200
    for path in (f"/v1/projects/{fuzz.PROJECT}/snapshot", f"/v1/projects/{fuzz.PROJECT}/search?q=anything"):
        status, answer_headers, answer = send(fuzz.Request("GET", path.encode(), headers[:1], b""))
        assert status == 413
        assert contract_problems("GET", path, status, answer_headers, answer) == []


def test_every_reference_resolves_and_operation_ids_are_unique() -> None:
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "$ref" in node:
                refs.append(node["$ref"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(DOCUMENT)
    schemas = DOCUMENT["components"]["schemas"]
    assert refs and all(ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas for ref in refs)
    ids = [op.spec["operationId"] for op in operations()]
    assert len(ids) == len(set(ids))
    used = {ref.rsplit("/", 1)[1] for ref in refs}
    assert set(schemas) - used == set(), "schemas nothing refers to"
