"""Every route, status and error code the reference answers, in upstream's check order."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pathlib import Path
from typing import Any

from aidememo_ref import ReferenceLedger, _ledger
from aidememo_ref._state import LEASE_MS

from . import admin
from .conftest import World, error_of

AUTH_FAILED = b'{"error":{"code":"authentication_failed","message":"authentication failed"}}'


def raw(cid: str, rid: str = "n1", payload: object = None, *, rev: int | None = None,
        op: str = "resource.put", change: str = "upsert", kind: str = "custom.note", **extra: object) -> dict[str, object]:
    body = {"command_id": cid, "project_id": "project_http", "expected_revision": rev, "operation": op,
            "payload": payload if payload is not None or op == "resource.delete" else {"v": 1},
            "resource": {"kind": kind, "id": rid}, "change": change}
    body.update(extra)
    return body


def test_health_and_framework_answers(world: World) -> None:
    r = world.call(None, "GET", "/health")
    version = {"sqlite": b"4", "postgres": b"2"}[world.backend]  # upstream's schema version per backend
    assert (r.status_code, r.content) == (200, b'{"status":"ok","mode":"single_node","schema_version":' + version + b"}")
    head = world.call(None, "HEAD", "/health")
    assert (head.status_code, head.content) == (200, b"")
    assert (world.call(None, "GET", "/nope").status_code, world.call(None, "GET", "/nope").content) == (404, b"")
    assert world.call(None, "GET", "/health/").status_code == 404
    assert world.call("codex-p1", "GET", "/v1/projects//identity").status_code == 404
    wrong = world.call(None, "POST", "/health")
    assert (wrong.status_code, wrong.content, wrong.headers["allow"]) == (405, b"", "GET,HEAD")


@pytest.mark.parametrize(
    "header",
    [None, "Bearer nope-token", "bearer writer-token-0123456789", "Bearer  writer-token-0123456789",
     "Bearer " + "x" * 4097, "Bearer", "Bearer ", "Basic writer-token-0123456789"],
)
def test_bad_credentials_are_401_with_one_body(world: World, header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}
    r = world.call(None, "GET", world.p("/identity"), headers=headers)
    assert (r.status_code, r.content) == (401, AUTH_FAILED)


def test_non_ascii_authorization_is_401(world: World) -> None:
    r = world.ledger.handle("GET", "/v1/projects/project_http/identity", [(b"authorization", b"Bearer \xff\xfe")])
    assert (r.status, r.body) == (401, AUTH_FAILED)


def test_foreign_or_missing_project_is_403_never_404(world: World) -> None:
    world.ledger.provision(tenant_id="tenant_other", project_id="project_other", actor_id="x", token="other-token")
    for project in ("project_other", "project_missing"):
        r = world.call("codex-p1", "GET", f"/v1/projects/{project}/identity")
        assert error_of(r) == (403, "project_unauthorized")
        assert r.json()["error"]["message"] == f"actor is not authorized to mutate project {project}"


def test_identity(world: World) -> None:
    assert world.call("reader_actor", "GET", world.p("/identity")).content == (
        b'{"tenant_id":"tenant_http","project_id":"project_http","project_epoch":"epoch_http",'
        b'"actor_id":"reader_actor","role":"reader"}')


def test_reader_cannot_write_but_can_read(world: World) -> None:
    world.session()
    r = world.call("reader_actor", "POST", "/v1/commands", raw("c1"))
    assert error_of(r) == (403, "project_unauthorized")
    r = world.call("reader_actor", "POST", world.p("/sessions"),
                   {"command_id": "c2", "payload": {"session_id": "s2", "topic": "t"}})
    assert error_of(r) == (403, "project_unauthorized")
    assert world.call("reader_actor", "GET", world.p("/resources/session/session_remote")).status_code == 200


@pytest.mark.parametrize("field", ["tenant_id", "actor_id", "created_by", "source_id"])
def test_identity_fields_in_bodies_are_refused(world: World, field: str) -> None:
    r = world.call("codex-p1", "POST", "/v1/commands", raw("c1", **{field: "x"}))
    assert error_of(r) == (400, "invalid_command")
    r = world.call("codex-p1", "POST", world.p("/facts"), {"command_id": "c", field: "x", "payload": {}})
    assert error_of(r) == (400, "invalid_command")


def test_body_problems_are_400_before_authentication(world: World) -> None:
    url = world.p("/sessions")
    no_type = world.http.post(url, content=b"{}")
    assert error_of(no_type) == (400, "invalid_command")
    assert "Content-Type: application/json" in no_type.json()["error"]["message"]
    bad = world.http.post(url, content=b"{", headers={"content-type": "application/json"})
    assert bad.json()["error"]["message"].startswith("invalid command: Failed to parse the request body as JSON")
    big = world.http.post(url, content=b" " * (1_048_577), headers={"content-type": "application/json"})
    assert big.json()["error"]["message"] == "invalid command: Failed to buffer the request body: length limit exceeded"
    deep = world.http.post(url, content=b"[" * 5000 + b"]" * 5000, headers={"content-type": "application/json"})
    assert error_of(deep) == (400, "invalid_command")
    vnd = world.http.post(url, content=b'{"command_id":"c"}', headers={"content-type": "application/vnd.x+json; charset=utf-8"})
    assert vnd.json()["error"]["message"].endswith("missing field `payload`")


@pytest.mark.parametrize(
    ("path", "kind"),
    [("/v1/projects/bad%20id/identity", "project_id"),
     ("/v1/projects/project_http/handoffs/%C3%A9", "handoff_id"),
     ("/v1/projects/project_http/resources/Custom.Note/x", "resource kind"),
     ("/v1/projects/project_http/resources/custom.note/" + "x" * 129, "resource_id")],
)
def test_bad_path_ids_are_invalid_identifier(world: World, path: str, kind: str) -> None:
    r = world.call("codex-p1", "GET", path)
    assert error_of(r) == (400, "invalid_identifier")
    assert r.json()["error"]["message"].startswith(f"invalid {kind}:")


def test_non_utf8_path_segment_is_plain_400(world: World) -> None:
    r = world.ledger.handle("GET", b"/v1/projects/%FF/identity", [])
    assert r.status == 400 and b"Invalid URL" in r.body


def test_raw_command_rules(world: World) -> None:
    first = world.call("codex-p1", "POST", "/v1/commands", raw("c1", payload={"z": 2}))
    assert first.json()["revision"] == 1 and first.json()["project_seq"] == 1
    assert world.call("codex-p1", "POST", "/v1/commands", raw("c1", payload={"z": 2})).content == first.content
    for body in (raw("c1", payload={"z": 3}), raw("c1", "n2", payload={"z": 2}), raw("c1", payload={"z": 2}, rev=1)):
        assert error_of(world.call("codex-p1", "POST", "/v1/commands", body)) == (409, "command_conflict")
    assert error_of(world.call("codex-p2", "POST", "/v1/commands", raw("c1", payload={"z": 2}))) == (409, "command_conflict")
    kind = world.call("codex-p1", "POST", "/v1/commands", raw("c2", kind="fact", op="fact.add"))
    assert error_of(kind) == (400, "invalid_command") and "custom.*" in kind.json()["error"]["message"]
    pair = world.call("codex-p1", "POST", "/v1/commands", raw("c3", op="resource.put", change="delete"))
    assert error_of(pair) == (400, "invalid_command")
    payload = world.call("codex-p1", "POST", "/v1/commands", raw("c4", op="resource.delete", change="delete", payload={"x": 1}))
    assert payload.json()["error"]["message"] == "invalid command: resource.delete payload must be JSON null"
    stale = world.call("codex-p1", "POST", "/v1/commands", raw("c5", rev=2))
    assert stale.json()["error"] == {"code": "stale_revision", "message": "stale revision: expected 2, current 1"}
    absent = world.call("codex-p1", "POST", "/v1/commands", raw("c6", "missing", rev=1))
    assert error_of(absent) == (404, "resource_not_found")
    delete = world.call("codex-p1", "POST", "/v1/commands", raw("c7", op="resource.delete", change="delete", rev=1))
    assert delete.json()["revision"] == 2
    got = world.call("reader_actor", "GET", world.p("/resources/custom.note/n1")).json()
    assert (got["revision"], got["state"]) == (2, {"state": "deleted"})
    again = world.call("codex-p1", "POST", "/v1/commands", raw("c8", payload={"back": True}))
    assert again.json()["revision"] == 3  # a put resurrects a tombstone
    assert world.call("codex-p1", "POST", "/v1/commands", raw("c9", "fresh", op="resource.delete", change="delete")).json()["revision"] == 1


def test_resource_bodies_come_back_sorted(world: World) -> None:
    world.call("codex-p1", "POST", "/v1/commands", raw("c1", payload={"z": 2, "a": {"d": 4, "b": 3}}))
    r = world.call("codex-p1", "GET", world.p("/resources/custom.note/n1"))
    assert r.content == (b'{"scope":{"tenant_id":"tenant_http","project_id":"project_http"},'
                         b'"resource":{"kind":"custom.note","id":"n1"},"revision":1,'
                         b'"state":{"state":"present","body":{"a":{"b":3,"d":4},"z":2}}}')
    assert error_of(world.call("codex-p1", "GET", world.p("/resources/custom.note/none"))) == (404, "resource_not_found")


def test_typed_create_rules(world: World) -> None:
    world.session()
    dup = world.call("codex-p1", "POST", world.p("/sessions"),
                     {"command_id": "other", "payload": {"session_id": "session_remote", "topic": "T"}})
    assert error_of(dup) == (409, "resource_already_exists")
    cases = (("x" * 513, "session topic must contain 1 to 512 bytes"), ("   ", "session topic must contain 1 to 512 bytes"),
             ("a\x07b", "session topic must not contain control characters"))
    for n, (topic, message) in enumerate(cases):
        r = world.call("codex-p1", "POST", world.p("/sessions"),
                       {"command_id": f"t{n}", "payload": {"session_id": f"s{n}", "topic": topic}})
        assert r.json()["error"] == {"code": "invalid_command", "message": f"invalid command: {message}"}
    missing = world.call("codex-p1", "POST", world.p("/facts"),
                         {"command_id": "f1", "payload": {"fact_id": "f1", "session_id": "nope", "content": "c"}})
    assert error_of(missing) == (404, "resource_not_found")
    fact_body = world.call("codex-p1", "POST", world.p("/facts"),
                           {"command_id": "f2", "payload": {"fact_id": "f2", "session_id": "session_remote", "content": "c"}})
    assert fact_body.status_code == 200
    stored = world.call("codex-p2", "GET", world.p("/resources/fact/f2")).json()["state"]["body"]
    assert stored == {"actor_id": "codex-p1", "content": "c", "fact_id": "f2", "session_id": "session_remote",
                      "source_id": "project:aidememo"}

    def send(cid: str, **payload: object) -> tuple[int, str]:
        base = {"handoff_id": "h1", "session_id": "session_remote", "to_actor": "codex-p2"}
        base.update(payload)
        r = world.call("codex-p1", "POST", world.p("/handoffs"), {"command_id": cid, "payload": base})
        return r.status_code, r.json().get("error", {}).get("message", "")

    assert send("s1", to_actor="codex-p1") == (400, "invalid command: handoff sender and receiver must differ")
    assert send("s2", to_actor="stranger") == (400, "invalid command: handoff receiver is not an active project member")
    assert send("s3", to_actor="reader_actor") == (400, "invalid command: handoff receiver must have a writable project membership")
    assert send("s4", session_id="nope")[0] == 404
    assert send("s5", focus="") == (400, "invalid command: handoff focus must contain 1 to 4096 bytes")
    assert send("s6", context_id="ctx_missing")[0] == 404
    ctx = {"context_id": "ctx", "handoff_id": "other_handoff", "session_id": "session_remote",
           "to_actor": "codex-p2", "content": "packet"}
    assert world.call("codex-p1", "POST", world.p("/handoff-contexts"), {"command_id": "cx", "payload": ctx}).status_code == 200
    assert send("s7", context_id="ctx") == (409, "handoff conflict: context belongs to a different handoff")
    self_ctx = {**ctx, "context_id": "ctx2", "to_actor": "codex-p1"}
    r = world.call("codex-p1", "POST", world.p("/handoff-contexts"), {"command_id": "cx2", "payload": self_ctx})
    assert r.json()["error"]["message"] == "invalid command: handoff context sender and receiver must differ"
    assert send("s8")[0] == 200
    assert send("s9") == (409, "resource already exists")


def test_the_lease_is_the_ledgers_setting(tmp_path: Path) -> None:
    """A ledger given a lease grants and enforces it; another in the same process keeps upstream's."""
    short, usual = World(tmp_path / "short.sqlite", lease_ms=400), World(tmp_path / "usual.sqlite")
    try:
        for w in (short, usual):
            w.session()
            w.send("h1")
            w.transition("h1", "accept", 1, {"claim_id": "c1"}, "a1").raise_for_status()
        records: list[Any] = [w.status("h1")["record"] for w in (short, usual)]
        assert [r["claim_expires_at_ms"] - r["claim_heartbeat_at_ms"] for r in records] == [400, LEASE_MS]
        for w in (short, usual):
            w.clock.advance(400)
        assert error_of(short.transition("h1", "heartbeat", 2, {"claim_id": "c1"}, "hb")) == (409, "handoff_conflict")
        usual.transition("h1", "heartbeat", 2, {"claim_id": "c1"}, "hb").raise_for_status()
    finally:
        for w in (short, usual):
            w.http.close()
            w.ledger.close()
    with pytest.raises(ValueError, match="replacement decide"):
        ReferenceLedger(tmp_path / "other.sqlite", decide=_ledger.decide, lease_ms=400)


def test_transitions_check_order_and_lease(world: World) -> None:
    world.session()
    world.send("h1")
    world.fact("f_p2")
    assert error_of(world.transition("nope", "accept", 1, {"claim_id": "c"}, "a0")) == (404, "resource_not_found")
    stale = world.transition("h1", "accept", 5, {"claim_id": "c"}, "a1", actor="hermes")
    assert error_of(stale) == (409, "stale_revision")  # revision is checked before the actor
    assert error_of(world.transition("h1", "accept", 1, {"claim_id": "c"}, "a2", actor="hermes")) == (403, "handoff_actor_mismatch")
    assert world.transition("h1", "accept", 1, {"claim_id": "c1"}, "a3").json()["revision"] == 2
    same = world.transition("h1", "accept", 2, {"claim_id": "c1"}, "a4")
    assert same.json()["revision"] == 3  # errata 5: a new revision, an unchanged record
    rec = world.status("h1")["record"]
    assert (rec["attempt_count"], rec["claim_id"]) == (1, "c1")
    assert error_of(world.transition("h1", "accept", 3, {"claim_id": "c2"}, "a5")) == (409, "handoff_conflict")
    assert error_of(world.transition("h1", "heartbeat", 3, {"claim_id": "c1"}, "hb0", actor="codex-p1")) == (403, "handoff_actor_mismatch")
    assert world.transition("h1", "heartbeat", 3, {"claim_id": "c1"}, "hb1").json()["revision"] == 4
    world.clock.advance(LEASE_MS)
    expired = world.transition("h1", "return", 4, {"claim_id": "c1", "result_fact_id": "f_p2", "outcome": "succeeded"}, "r0")
    assert expired.json()["error"]["message"] == "handoff conflict: handoff claim lease expired before result return"
    missing = world.transition("h1", "return", 4, {"claim_id": "c1", "result_fact_id": "nofact", "outcome": "succeeded"}, "r1")
    assert error_of(missing) == (404, "resource_not_found")
    bad_outcome = world.transition("h1", "return", 4, {"claim_id": "c1", "result_fact_id": "f_p2", "outcome": "done"}, "r2")
    assert error_of(bad_outcome) == (400, "invalid_command")
    takeover = world.transition("h1", "accept", 4, {"claim_id": "c2"}, "a6")
    assert takeover.status_code == 200
    rec = world.status("h1", actor="codex-p2")["record"]
    assert (rec["attempt_count"], rec["claim_id"]) == (2, "c2")
    failed = world.transition("h1", "return", 5, {"claim_id": "c2", "result_fact_id": "f_p2", "outcome": "failed"}, "r3")
    assert failed.status_code == 200
    rec = world.status("h1")["record"]
    assert (rec["status"], rec["outcome"], rec["claim_expires_at_ms"]) == ("accepted", "failed", None)
    assert world.transition("h1", "accept", 6, {"claim_id": "c3"}, "a7").status_code == 200
    ok = world.transition("h1", "return", 7, {"claim_id": "c3", "result_fact_id": "f_p2", "outcome": "succeeded"}, "r4")
    assert ok.json()["revision"] == 8
    again = world.transition("h1", "return", 8, {"claim_id": "c3", "result_fact_id": "f_p2", "outcome": "succeeded"}, "r5")
    assert again.json()["revision"] == 9 and world.status("h1")["record"]["status"] == "completed"


def test_mailbox_query_rules(world: World) -> None:
    for query in ("box=inbox&limit=0", "box=inbox&limit=101"):
        r = world.call(None, "GET", world.p(f"/handoffs?{query}"))  # no token: limit is checked first
        assert r.json()["error"] == {"code": "invalid_command",
                                     "message": "invalid command: handoff mailbox limit must be between 1 and 100"}
    for query in ("", "box=sideways", "box=inbox&limit=+5", "box=inbox&limit=-1", "box=inbox&include_completed=yes",
                  "box=inbox&box=outbox", "box=inbox&before_seq=9223372036854775808"):
        assert error_of(world.call("codex-p2", "GET", world.p(f"/handoffs?{query}"))) == (400, "invalid_command")
    assert world.call("codex-p2", "GET", world.p("/handoffs?box=inbox&limit=%2B5")).status_code == 200


def test_feed_cursor_rules(world: World) -> None:
    world.session()
    base = world.p("/changes?project_epoch=epoch_http")
    for suffix, expected in (("&after_seq=0&limit=0", (400, "invalid_change_batch")),
                             ("&after_seq=0&limit=10001", (400, "invalid_change_batch")),
                             ("&after_seq=2", (409, "cursor_out_of_range")),
                             ("&after_seq=0&extra=1", (400, "invalid_command"))):
        assert error_of(world.call("codex-p1", "GET", base + suffix)) == expected
    for feed in ("changes", "changes/materialized"):  # beyond what SQLite can bind, still a 409
        huge = world.call("codex-p1", "GET", world.p(f"/{feed}?project_epoch=epoch_http&after_seq=18446744073709551615"))
        assert error_of(huge) == (409, "cursor_out_of_range")
    epoch = world.call("codex-p1", "GET", world.p("/changes?project_epoch=epoch_replaced&after_seq=0"))
    assert epoch.json()["error"] == {"code": "cursor_epoch_mismatch",
                                     "message": "cursor epoch epoch_replaced does not match current project epoch epoch_http"}
    at_head = world.call("codex-p1", "GET", base + "&after_seq=1").json()
    assert (at_head["entries"], at_head["has_more"], at_head["next_cursor"]["after_seq"]) == ([], False, 1)


def test_materialized_feed_pins_bodies_to_revisions(world: World) -> None:
    world.call("codex-p1", "POST", "/v1/commands", raw("c1", payload={"fixture": "a"}))
    world.call("codex-p1", "POST", "/v1/commands", raw("c2", payload={"fixture": "d"}, rev=1))
    world.call("codex-p1", "POST", "/v1/commands", raw("c3", op="resource.delete", change="delete", rev=2))
    page = world.call("codex-p1", "GET", world.p("/changes/materialized?project_epoch=epoch_http&after_seq=0")).json()
    states = [(e["change"]["revision"], e["change"]["operation"], e["resource"]["state"]) for e in page["entries"]]
    assert states == [(1, "upsert", {"state": "present", "body": {"fixture": "a"}}),
                      (2, "upsert", {"state": "present", "body": {"fixture": "d"}}),
                      (3, "delete", {"state": "deleted"})]
    snap = world.call("codex-p1", "GET", world.p("/snapshot")).json()
    assert (snap["at_seq"], snap["resources"][0]["state"]) == (3, {"state": "deleted"})


def test_snapshot_is_bounded_before_filtering(sqlite_world: World) -> None:
    world = sqlite_world
    assert world.ledger.database is not None
    conn = sqlite3.connect(world.ledger.database)  # another writer: the store reads the rows from the log's tail
    n, seq = conn.execute("SELECT coalesce(max(n), 0), coalesce(max(seq), 0) FROM log").fetchone()
    conn.executemany(
        "INSERT INTO log(n, tenant_id, project_id, seq, kind, id, revision, actor_id, committed_at_ms, body, "
        "command_id, fingerprint) VALUES (?,'tenant_http','project_http',?,'custom.bulk',?,1,'codex-p1',1,'{}',?,'f')",
        [(n + i, seq + i, f"r{i}", f"bulk-{i}") for i in range(1, 10_002)],
    )
    conn.commit()
    conn.close()
    r = world.call("reader_actor", "GET", world.p("/snapshot"))
    assert r.json()["error"] == {"code": "snapshot_too_large",
                                 "message": "project snapshot exceeds the current limit of 10000 resources"}
    assert r.status_code == 413


def test_search(world: World) -> None:
    world.session(sid="session-alpha", source="alpha")
    world.session(sid="session-beta", source="beta")
    for fid, sid, content in (("fact-alpha", "session-alpha", "redis cluster timeout decision"),
                              ("fact-beta", "session-beta", "redis cache fallback")):
        world.call("codex-p1", "POST", world.p("/facts"), {"command_id": fid, "payload": {"fact_id": fid, "session_id": sid, "content": content}})
    r = world.call("codex-p1", "GET", world.p("/search?q=redis&source_id=alpha"))
    assert r.content == (b'{"project_epoch":"epoch_http","index_seq":4,"mode":"lexical","semantic_model":null,'
                         b'"results":[{"fact_id":"fact-alpha","session_id":"session-alpha","source_id":"alpha",'
                         b'"actor_id":"codex-p1","content":"redis cluster timeout decision",'
                         b'"score":0.17225472236974854,"lexical_score":0.17225472236974854}]}')
    both = world.call("codex-p1", "GET", world.p("/search?q=REDIS+cache")).json()["results"]
    assert [hit["fact_id"] for hit in both] == ["fact-beta", "fact-alpha"]
    for query, message in (("q=%20%20", "search query must contain 1..=4096 bytes"),
                           ("q=x&limit=0", "search limit must be between 1 and 100")):
        assert world.call(None, "GET", world.p(f"/search?{query}")).json()["error"]["message"] == f"invalid command: {message}"
    ahead = world.call("codex-p1", "GET", world.p("/search?q=x&at_least_seq=5"))
    assert ahead.json()["error"]["message"] == "cursor sequence 5 is ahead of current project sequence 4"
    assert error_of(world.call("codex-p1", "GET", world.p("/search?q=x&mode=fuzzy"))) == (400, "invalid_command")
    assert error_of(world.call("codex-p1", "GET", world.p("/search?q=x&mode=HYBRID"))) == (400, "invalid_command")
    assert world.call("codex-p1", "GET", world.p("/search?q=x&mode=%20Lexical")).json()["mode"] == "lexical"


def test_array_form_of_a_struct_is_accepted(world: World) -> None:
    body = ["c1", "project_http", None, "resource.put", {"v": 1}, {"kind": "custom.note", "id": "n1", "extra": 1}, "upsert"]
    r = world.http.post("/v1/commands", content=json.dumps(body), headers={
        "content-type": "application/json", "authorization": "Bearer writer-token-0123456789"})
    assert r.status_code == 200, r.text


def test_no_client_input_earns_a_5xx(world: World) -> None:
    world.session()
    world.send("h1")
    samples = [b"", b"null", b"[]", b'{"command_id":null}', b'{"command_id":"c","expected_revision":0,"payload":{}}',
               b'{"command_id":"c","expected_revision":18446744073709551616,"payload":{"claim_id":"c"}}',
               b'{"command_id":"c","expected_revision":-1,"payload":{"claim_id":"c"}}',
               b'{"command_id":"c","expected_revision":1.5,"payload":{"claim_id":"c"}}',
               b'{"command_id":"' + b"x" * 200 + b'","expected_revision":1,"payload":{"claim_id":"c"}}']
    for body in samples:
        for path in ("/v1/commands", world.p("/sessions"), world.p("/handoffs/h1/accept")):
            r = world.http.post(path, content=body, headers={"content-type": "application/json",
                                                             "authorization": "Bearer receiver-token-0123456789"})
            assert r.status_code < 500, (path, body, r.text)


def test_lock_timeout_is_a_retryable_503(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aidememo_ref import ReferenceLedger

    ledger = ReferenceLedger(tmp_path / "busy.sqlite", busy_timeout_ms=50)
    ledger.provision(tenant_id="t", project_id="project_http", actor_id="a", token="busy-token-0123")
    blocker = sqlite3.connect(tmp_path / "busy.sqlite", isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        r = ledger.handle("POST", "/v1/commands", {"authorization": "Bearer busy-token-0123",
                                                   "content-type": "application/json"}, json.dumps(raw("c1")).encode())
    finally:
        blocker.execute("ROLLBACK")
    assert r.status == 503
    assert r.json() == {"error": {"code": "storage_failure", "message": "canonical storage temporarily unavailable"}}
    ok = ledger.handle("POST", "/v1/commands", {"authorization": "Bearer busy-token-0123",
                                                "content-type": "application/json"}, json.dumps(raw("c1")).encode())
    assert ok.status == 200


@pytest.mark.parametrize(
    ("table", "key", "expected"),
    [("memberships", {"tenant_id": "tenant_http", "project_id": "project_http", "actor_id": "codex-p1"}, 403),
     ("projects", {"tenant_id": "tenant_http", "project_id": "project_http"}, 403),
     ("actors", {"tenant_id": "tenant_http", "actor_id": "codex-p1"}, 401),
     ("tenants", {"tenant_id": "tenant_http"}, 401)],
)
def test_suspended_identities_lose_access_at_once(world: World, table: str, key: dict[str, str], expected: int) -> None:
    assert world.call("codex-p1", "GET", world.p("/identity")).status_code == 200
    admin.set_status(world.ledger, table, "suspended", postgres_url=world.postgres_url, **key)
    assert world.call("codex-p1", "GET", world.p("/identity")).status_code == expected


def test_a_suspension_from_another_connection_applies_to_the_next_request(sqlite_world: World) -> None:
    """Authentication is remembered per connection only while no other connection commits."""
    world = sqlite_world
    assert world.call("codex-p1", "GET", world.p("/identity")).status_code == 200
    assert world.ledger.database is not None
    other = sqlite3.connect(world.ledger.database)
    other.execute("UPDATE memberships SET status='suspended' WHERE actor_id='codex-p1'")
    other.commit()
    other.close()
    assert world.call("codex-p1", "GET", world.p("/identity")).status_code == 403


@pytest.mark.parametrize(("change", "expected"), [
    ("memberships", 403), ("projects", 403), ("actors", 401), ("tenants", 401), ("token", 401)])
def test_a_write_is_refused_once_another_process_suspends_its_writer(world: World, change: str,
                                                                      expected: int) -> None:
    """A write may take its membership from what the last one proved (a deferred check, made by
    its own transaction's first statement); a suspension or revocation committed by another
    process in between is still the answer, and the write is not applied."""
    from aidememo_ref import ReferenceLedger, bearer_digest

    assert world.call("codex-p1", "POST", "/v1/commands", raw("c1")).status_code == 200
    other = ReferenceLedger(world.ledger.database, postgres_url=world.postgres_url)
    try:
        if change == "token":
            admin.revoke_token(other, bearer_digest("writer-token-0123456789"), postgres_url=world.postgres_url)
        else:
            key = {"memberships": {"project_id": "project_http", "actor_id": "codex-p1"},
                   "projects": {"project_id": "project_http"}, "actors": {"actor_id": "codex-p1"},
                   "tenants": {}}[change]
            admin.set_status(other, change, "suspended", postgres_url=world.postgres_url, tenant_id="tenant_http",
                             **key)
    finally:
        other.close()
    assert world.call("codex-p1", "POST", "/v1/commands", raw("c2", rid="n2")).status_code == expected
    if change in ("memberships", "token"):  # the others' readers lose access too
        assert world.call("codex-p2", "GET", world.p("/resources/custom.note/n2")).status_code == 404


def test_revoked_token_is_401(world: World) -> None:
    from aidememo_ref import bearer_digest

    admin.revoke_token(world.ledger, bearer_digest("writer-token-0123456789"), postgres_url=world.postgres_url)
    assert world.call("codex-p1", "GET", world.p("/identity")).content == AUTH_FAILED


def test_an_internal_bug_still_answers_the_wire_shape(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from aidememo_ref import ReferenceLedger

    def broken(*args: object) -> None:
        raise RuntimeError("bug")

    ledger = ReferenceLedger(tmp_path / "bug.sqlite", decide=broken)  # type: ignore[arg-type]
    ledger.provision(tenant_id="t", project_id="project_http", actor_id="a", token="bug-token-0123")
    r = ledger.handle("POST", "/v1/commands", {"authorization": "Bearer bug-token-0123",
                                               "content-type": "application/json"}, json.dumps(raw("c1")).encode())
    assert (r.status, r.json()) == (500, {"error": {"code": "storage_failure", "message": "internal server error"}})
    assert ledger.handle("GET", "/health").status == 200


QUERY_FAILED = "invalid command: Failed to deserialize query string: "
EPOCH = "project_epoch=epoch_http"


@pytest.mark.parametrize(("route", "query", "detail"), [
    ("/search", "q=redis&mode=", None),  # Some(""): refused by the mode rule, not the default
    ("/search", "q=redis&mode", None),  # a key without "=" is the same empty value
    ("/search", "q=redis&mode=+", None),
    ("/search", "q=redis&limit=", "limit: cannot parse integer from empty string"),
    ("/search", "q=redis&at_least_seq=", "at_least_seq: cannot parse integer from empty string"),
    ("/search", "q=redis&source_id=", "source_id: invalid source_id: must not be empty"),
    ("/handoffs", "box=inbox&limit=", "limit: cannot parse integer from empty string"),
    ("/handoffs", "box=inbox&before_seq=", "before_seq: cannot parse integer from empty string"),
    ("/handoffs", "box=inbox&include_completed=", "include_completed: provided string was not `true` or `false`"),
    ("/handoffs", "box=inbox&source_id=", "source_id: invalid source_id: must not be empty"),
    ("/handoffs", "box=", "box: unknown variant ``, expected `inbox` or `outbox`"),
    ("/changes", f"{EPOCH}&after_seq=0&limit=", "limit: cannot parse integer from empty string"),
    ("/changes", f"{EPOCH}&after_seq=", "after_seq: cannot parse integer from empty string"),
    ("/changes/materialized", f"{EPOCH}&after_seq=0&limit=", "limit: cannot parse integer from empty string"),
    ("/changes", "project_epoch=&after_seq=0", "project_epoch: invalid project_epoch: must not be empty"),
])
def test_a_present_empty_query_value_is_a_value_not_an_absence(
        world: World, route: str, query: str, detail: str | None) -> None:
    # serde_urlencoded hands Option<T> fields Some(""), then parses "" as T (wire §0.4).
    r = world.call("codex-p1", "GET", world.p(f"{route}?{query}"))
    message = f"{QUERY_FAILED}{detail}" if detail else "invalid command: search mode must be auto, lexical, semantic, or hybrid"
    assert (r.status_code, r.json()["error"]) == (400, {"code": "invalid_command", "message": message})


@pytest.mark.parametrize(("value", "detail"), [
    ("18446744073709551616", "number too large to fit in target type"),
    ("99999999999999999999x", "number too large to fit in target type"),  # Rust stops at the overflow
    ("9x9999999999999999999", "invalid digit found in string"),
    ("%2B", "invalid digit found in string"),
    ("%2B%2B5", "invalid digit found in string"),
    ("-0", "invalid digit found in string"),
])
def test_integer_query_values_fail_with_rusts_parse_errors(world: World, value: str, detail: str) -> None:
    r = world.call("codex-p1", "GET", world.p(f"/changes?{EPOCH}&after_seq={value}"))
    assert r.json()["error"]["message"] == f"{QUERY_FAILED}after_seq: {detail}"


@pytest.mark.parametrize(("mode", "accepted"), [
    ("LEXICAL", True), ("%20Lexical%20", True), ("%09auto%0A", True), ("%C2%A0AUTO%E3%80%80", True),
    ("lexical%1F", False),  # U+001F is not White_Space: Rust's trim keeps it, Python's strip would not
    ("lex%20ical", False), ("%EF%BC%AC%EF%BC%A5%EF%BC%B8%EF%BC%A9%EF%BC%A3%EF%BC%A1%EF%BC%AC", False),  # fullwidth
    ("LEX%C4%B0CAL", False),  # dotted capital I: to_ascii_lowercase leaves it alone
])
def test_search_mode_is_trimmed_and_ascii_lowercased_like_upstream(world: World, mode: str, accepted: bool) -> None:
    r = world.call("codex-p1", "GET", world.p(f"/search?q=redis&mode={mode}"))
    if accepted:
        assert (r.status_code, r.json()["mode"]) == (200, "lexical")
    else:
        assert r.json()["error"]["message"] == "invalid command: search mode must be auto, lexical, semantic, or hybrid"


def test_search_query_is_trimmed_with_rusts_whitespace(world: World) -> None:
    # "\x1f" survives Rust's trim, so the query is one byte long: a 200 with no hits, not a 400.
    r = world.call("codex-p1", "GET", world.p("/search?q=%1F"))
    assert (r.status_code, r.json()["results"]) == (200, [])
    assert error_of(world.call("codex-p1", "GET", world.p("/search?q=%E3%80%80%C2%A0"))) == (400, "invalid_command")


def test_health_reports_the_stores_schema_version(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Upstream's /health asks the store (store.schema_version()); the reference must not hard-code 4.
    from aidememo_ref import ReferenceLedger
    from aidememo_ref._sqlite import SQLiteStore

    monkeypatch.setattr(SQLiteStore, "schema_version", lambda self: 7)
    ledger = ReferenceLedger(tmp_path / "v.sqlite")
    assert ledger.handle("GET", "/health").json() == {"status": "ok", "mode": "single_node", "schema_version": 7}
    ledger.close()
