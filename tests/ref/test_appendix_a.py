"""Upstream's end-to-end sequence (wire spec Appendix A), over real HTTP with uvicorn."""

from __future__ import annotations

from pathlib import Path

import httpx

from aidememo_ref import ManualClock, ReferenceLedger, serve_in_thread

from .conftest import START_MS, TOKENS


def test_appendix_a_sequence_over_http(tmp_path: Path) -> None:
    ledger = ReferenceLedger(tmp_path / "a.sqlite", clock=ManualClock(START_MS))
    for actor, (token, role) in TOKENS.items():
        ledger.provision(tenant_id="tenant_http", project_id="project_http", actor_id=actor, token=token,
                         role=role, project_epoch="epoch_http")
    with serve_in_thread(ledger) as url, httpx.Client(base_url=url, timeout=10) as http:
        def call(actor: str, method: str, path: str, body: object = None) -> httpx.Response:
            headers = {"Authorization": f"Bearer {TOKENS[actor][0]}"}
            return http.request(method, f"/v1/projects/project_http{path}", headers=headers, json=body)

        # 1. session, identical replay, same body from another actor.
        session = {"command_id": "command_session_remote",
                   "payload": {"session_id": "session_remote", "source_id": "project:aidememo",
                               "topic": "Remote handoff contract"}}
        first = call("codex-p1", "POST", "/sessions", session)
        assert first.status_code == 200
        assert first.content == (
            b'{"command_id":"command_session_remote",'
            b'"fingerprint":"b5e77245faf8bff81061b154a5de0dd3897a3e03b538e3319124f4f39524dbe7",'
            b'"tenant_id":"tenant_http","project_id":"project_http","actor_id":"codex-p1",'
            b'"project_seq":1,"resource":{"kind":"session","id":"session_remote"},'
            b'"revision":1,"committed_at_ms":1767225600123}'
        )
        assert call("codex-p1", "POST", "/sessions", session).content == first.content
        other = call("codex-p2", "POST", "/sessions", session)
        assert (other.status_code, other.json()["error"]["code"]) == (409, "command_conflict")
        # 2-3. context, then two handoffs.
        ctx = {"command_id": "command_context_p2", "payload": {
            "context_id": "context_p2", "handoff_id": "handoff_p2", "session_id": "session_remote",
            "to_actor": "codex-p2", "content": "# Bounded remote context\n\nReview the typed boundary."}}
        assert call("codex-p1", "POST", "/handoff-contexts", ctx).json()["project_seq"] == 2
        send = {"command_id": "command_send_p2", "payload": {
            "handoff_id": "handoff_p2", "session_id": "session_remote", "to_actor": "codex-p2",
            "focus": "Review the typed server boundary", "done_when": "Return a session-scoped fact",
            "context_id": "context_p2"}}
        r = call("codex-p1", "POST", "/handoffs", send).json()
        assert (r["revision"], r["project_seq"]) == (1, 3)
        second = {"command_id": "command_send_p2_second", "payload": {
            "handoff_id": "handoff_p2_second", "session_id": "session_remote", "to_actor": "codex-p2",
            "focus": "Keep pagination deterministic", "done_when": None}}
        r = call("codex-p1", "POST", "/handoffs", second).json()
        assert (r["revision"], r["project_seq"], r["fingerprint"]) == (
            1, 4, "998cca127d5faec77190f8889d046b76a233321f6d806f0c4e6c4182008b6812")
        # 4. paging the inbox.
        page = call("codex-p2", "GET", "/handoffs?box=inbox&limit=1").json()
        assert [a["record"]["handoff_id"] for a in page["assignments"]] == ["handoff_p2_second"]
        assert page["next_before_seq"] == 4
        page = call("codex-p2", "GET", "/handoffs?box=inbox&limit=1&before_seq=4").json()
        assert [a["record"]["handoff_id"] for a in page["assignments"]] == ["handoff_p2"]
        assert page["next_before_seq"] is None
        # 5. identity override refused; mailboxes are actor-relative.
        assert call("codex-p2", "GET", "/handoffs?box=inbox&actor_id=hermes").status_code == 400
        assert call("codex-p1", "GET", "/handoffs?box=inbox").json()["assignments"] == []
        assert len(call("codex-p1", "GET", "/handoffs?box=outbox").json()["assignments"]) == 2
        assert call("codex-p1", "GET", "/handoffs?box=outbox&source_id=project%3Aother").json()["assignments"] == []
        # 6. a reader cannot receive.
        bad = {"command_id": "command_send_reader", "payload": {
            "handoff_id": "handoff_reader", "session_id": "session_remote", "to_actor": "reader_actor"}}
        assert call("codex-p1", "POST", "/handoffs", bad).status_code == 400
        # 7. sender cannot accept; receiver accepts.
        accept = {"command_id": "command_accept_p2", "expected_revision": 1, "payload": {"claim_id": "claim_p2"}}
        r = call("codex-p1", "POST", "/handoffs/handoff_p2/accept", accept)
        assert (r.status_code, r.json()["error"]["code"]) == (403, "handoff_actor_mismatch")
        accepted = call("codex-p2", "POST", "/handoffs/handoff_p2/accept", accept)
        assert accepted.json()["revision"] == 2
        # 8. evidence from the receiver and from a third actor.
        for actor, fid in (("codex-p2", "fact_p2_result"), ("hermes", "fact_hermes_result")):
            body = {"command_id": f"command_{fid}", "payload": {
                "fact_id": fid, "session_id": "session_remote", "content": "Codex P2 completed the review"}}
            assert call(actor, "POST", "/facts", body).status_code == 200
        # 9. fail-closed returns, the right return, then a late replay of the accept.
        def ret(fact: str, claim: str, cid: str) -> httpx.Response:
            return call("codex-p2", "POST", "/handoffs/handoff_p2/return", {
                "command_id": cid, "expected_revision": 2,
                "payload": {"claim_id": claim, "result_fact_id": fact, "outcome": "succeeded"}})
        assert ret("fact_hermes_result", "claim_p2", "r1").json()["error"]["code"] == "handoff_conflict"
        assert ret("fact_p2_result", "claim_other", "r2").json()["error"]["code"] == "handoff_conflict"
        assert ret("fact_p2_result", "claim_p2", "r3").json()["revision"] == 3
        late = call("codex-p2", "POST", "/handoffs/handoff_p2/accept", accept)
        assert late.content == accepted.content
        # 10. the sender sees the result; inbox hides completed unless asked.
        status = call("codex-p1", "GET", "/handoffs/handoff_p2").json()
        assert (status["record"]["status"], status["record"]["result_fact_id"]) == ("completed", "fact_p2_result")
        inbox = call("codex-p2", "GET", "/handoffs?box=inbox").json()["assignments"]
        assert [a["record"]["handoff_id"] for a in inbox] == ["handoff_p2_second"]
        assert len(call("codex-p2", "GET", "/handoffs?box=inbox&include_completed=true").json()["assignments"]) == 2
        # 11. the reader's projection.
        assert call("reader_actor", "GET", "/handoffs/handoff_p2").status_code == 403
        assert call("reader_actor", "GET", "/resources/handoff/handoff_p2").status_code == 404
        assert call("reader_actor", "GET", "/resources/handoff_context/context_p2").status_code == 404
        assert call("codex-p2", "GET", "/resources/handoff_context/context_p2").status_code == 200
        snap = call("reader_actor", "GET", "/snapshot").json()
        assert {r["resource"]["kind"] for r in snap["resources"]} == {"session", "fact"}
        for feed in ("changes", "changes/materialized"):
            page = call("reader_actor", "GET", f"/{feed}?project_epoch=epoch_http&after_seq=1&limit=1").json()
            assert (page["entries"], page["next_cursor"]["after_seq"], page["has_more"]) == ([], 2, True)
            full = call("reader_actor", "GET", f"/{feed}?project_epoch=epoch_http&after_seq=0").json()
            assert full["next_cursor"]["after_seq"] == snap["at_seq"]
            kinds = {(e.get("change") or e)["resource"]["kind"] for e in full["entries"]}
            assert kinds == {"session", "fact"}
    ledger.close()
