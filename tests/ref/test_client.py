"""The httpx client behaves like upstream's remote CLI (cli/tests/remote_handoff.rs)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from aidememo_ref import AideMemoClient, AideMemoHTTPError, ManualClock, ReferenceLedger, stable_claim_id
from aidememo_ref.client import ClientRefusal


class LosingTransport(httpx.BaseTransport):
    """Fails the first POST to a path: before the server sees it, or after it answered."""

    def __init__(self, inner: httpx.BaseTransport, *, after: bool) -> None:
        self.inner, self.after, self.failed, self.seen = inner, after, False, 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST" and not self.failed:
            self.failed = True
            if self.after:
                self.inner.handle_request(request).read()
            raise httpx.ConnectError("connection reset", request=request)
        self.seen += 1
        return self.inner.handle_request(request)


@pytest.fixture
def ledger(tmp_path: Path) -> ReferenceLedger:
    ledger = ReferenceLedger(tmp_path / "c.sqlite", clock=ManualClock())
    for actor, token in (("codex-p1", "p1-token-0123456789"), ("codex-p2", "p2-token-0123456789")):
        ledger.provision(tenant_id="t", project_id="project_cli_remote", actor_id=actor, token=token)
    return ledger


def client(ledger: ReferenceLedger, token: str, transport: httpx.BaseTransport | None = None) -> AideMemoClient:
    return AideMemoClient("http://ref", token, "project_cli_remote", transport=transport or ledger.transport())


def test_accept_and_return_recover_like_the_cli(ledger: ReferenceLedger) -> None:
    p1, p2 = client(ledger, "p1-token-0123456789"), client(ledger, "p2-token-0123456789")
    p1.create_session("session_01", "topic", "project:aidememo")
    p1.send("handoff_test", "session_01", "codex-p2")
    with pytest.raises(ClientRefusal, match="not addressed"):
        p1.accept("handoff_test")
    first = p2.accept("handoff_test")
    assert first["recovered"] is False and first["receipt"]["revision"] == 2
    assert first["claim_id"] == stable_claim_id("project_cli_remote", "codex-p2", "handoff_test", 1)
    assert first["claim_id"] == "claim_911b8e64e132327ac7001e821076ab4b4cab7f027546fb86337c23e2481e2fac"
    again = p2.accept("handoff_test")
    assert (again["recovered"], again["claim_id"], again["command_id"], again["receipt"]) == (
        True, first["claim_id"], first["command_id"], None)
    p2.create_fact("01HZZZZZZZZZZZZZZZZZZZZZZZ", "session_01", "review failed")
    failed = p2.return_result("handoff_test", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "failed")
    assert failed["recovered"] is False
    assert p2.return_result("handoff_test", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "failed")["recovered"] is True
    retry = p2.accept("handoff_test")
    assert retry["recovered"] is False and retry["claim_id"] != first["claim_id"]
    assert retry["claim_id"] == "claim_ef5637d9df4db897096cdb1267dfbba871da52cd22a9a4416cf5d1890695b023"
    done = p2.return_result("handoff_test", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "succeeded")
    assert done["recovered"] is False
    assert p2.return_result("handoff_test", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "succeeded")["recovered"] is True
    assert p2.accept("handoff_test")["recovered"] is True
    assert p1.status("handoff_test")["record"]["attempt_count"] == 2
    with pytest.raises(ClientRefusal, match="different result evidence"):
        p2.return_result("handoff_test", "01HZZZZZZZZZZZZZZZZZZZZZZZ", "failed")


@pytest.mark.parametrize("after", [False, True], ids=["lost-request", "lost-response"])
def test_one_identical_retry_after_a_transport_failure(ledger: ReferenceLedger, after: bool) -> None:
    losing = LosingTransport(ledger.transport(), after=after)
    p1 = client(ledger, "p1-token-0123456789", losing)
    receipt = p1.create_session("session_01", "topic")
    assert losing.failed and receipt["revision"] == 1 and receipt["project_seq"] == 1
    direct = client(ledger, "p1-token-0123456789").create_session("session_01", "topic")
    assert direct == receipt  # the stored receipt: one effect, whichever attempt landed


def test_http_errors_carry_the_wire_code(ledger: ReferenceLedger) -> None:
    p1 = client(ledger, "p1-token-0123456789")
    with pytest.raises(AideMemoHTTPError) as info:
        p1.status("missing")
    assert (info.value.status, info.value.code) == (404, "resource_not_found")
    bad = AideMemoClient("http://ref", "wrong-token", "project_cli_remote", transport=ledger.transport())
    with pytest.raises(AideMemoHTTPError) as info:
        bad.identity()
    assert info.value.code == "authentication_failed"
