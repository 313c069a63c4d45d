"""The httpx client behaves like upstream's remote CLI (cli/tests/remote_handoff.rs)."""

from __future__ import annotations

from pathlib import Path

from collections.abc import Callable, Iterator

import httpx
import pytest
import respx

from aidememo_client import AideMemoClient, AideMemoClientError, AideMemoHTTPError, ClientRefusal, OutcomeUnknown
from aidememo_ref import ManualClock, ReferenceLedger, stable_claim_id

P1, P2 = "p1-token-0123456789", "p2-token-0123456789"


@pytest.fixture
def ledger(tmp_path: Path) -> ReferenceLedger:
    ledger = ReferenceLedger(tmp_path / "c.sqlite", clock=ManualClock())
    for actor, token in (("codex-p1", "p1-token-0123456789"), ("codex-p2", "p2-token-0123456789")):
        ledger.provision(tenant_id="t", project_id="project_cli_remote", actor_id=actor, token=token)
    return ledger


def client(ledger: ReferenceLedger, token: str, transport: httpx.BaseTransport | None = None) -> AideMemoClient:
    return AideMemoClient("http://ref", token, "project_cli_remote", transport=transport or ledger.transport())


def test_accept_and_return_recover_like_the_cli(ledger: ReferenceLedger) -> None:
    p1, p2 = client(ledger, P1), client(ledger, P2)
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


def test_http_errors_carry_the_wire_code(ledger: ReferenceLedger) -> None:
    p1 = client(ledger, P1)
    with pytest.raises(AideMemoHTTPError) as info:
        p1.status("missing")
    assert (info.value.status, info.value.code) == (404, "resource_not_found")
    bad = AideMemoClient("http://ref", "wrong-token", "project_cli_remote", transport=ledger.transport())
    with pytest.raises(AideMemoHTTPError) as info:
        bad.identity()
    assert info.value.code == "authentication_failed"


# -- the error tree, with respx standing between the client and the ledger ----------------------
Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def router() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url="http://ref", assert_all_called=False, assert_all_mocked=True) as mock:
        yield mock


def through(router: respx.MockRouter, ledger: ReferenceLedger, token: str) -> AideMemoClient:
    """A client whose requests meet ``router``'s routes first; the rest pass through to the ledger."""
    if "ledger" not in router.routes:
        router.route(name="ledger").mock(side_effect=ledger.transport().handle_request)
    return AideMemoClient("http://ref", token, "project_cli_remote", transport=httpx.MockTransport(router.handler))


def lose_answers(ledger: ReferenceLedger, times: int) -> Handler:
    """The server applies the request, then the answer is lost on the way back ``times`` times."""
    inner, lost = ledger.transport(), [0]

    def handle(request: httpx.Request) -> httpx.Response:
        response = inner.handle_request(request)
        if lost[0] < times:
            lost[0] += 1
            raise httpx.ReadError("connection reset by peer", request=request)
        return response

    return handle


class BrokenBody(httpx.SyncByteStream):
    def __iter__(self) -> Iterator[bytes]:
        yield b'{"command_id":'
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_the_tree_has_one_root_exported_from_the_package() -> None:
    import aidememo_client

    for name in ("ClientRefusal", "AideMemoHTTPError", "OutcomeUnknown", "MalformedAnswer"):
        assert issubclass(getattr(aidememo_client, name), aidememo_client.AideMemoClientError), name
    assert not issubclass(OutcomeUnknown, (ClientRefusal, AideMemoHTTPError))


def test_one_identical_retry_after_a_lost_request(router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    route = router.post("/v1/projects/project_cli_remote/sessions").mock(
        side_effect=[httpx.ConnectError("connection refused"), ledger.transport().handle_request])
    receipt = through(router, ledger, P1).create_session("session_01", "topic")
    assert route.call_count == 2 and route.calls[0].request.content == route.calls[1].request.content
    assert (receipt["revision"], receipt["project_seq"]) == (1, 1)


def test_a_lost_answer_is_retried_and_replays_the_receipt(router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    route = router.post("/v1/projects/project_cli_remote/sessions").mock(side_effect=lose_answers(ledger, 1))
    receipt = through(router, ledger, P1).create_session("session_01", "topic")
    assert route.call_count == 2
    direct = client(ledger, P1).create_session("session_01", "topic")
    assert direct == receipt  # the stored receipt: one effect, whichever attempt landed


def test_two_lost_answers_are_an_unknown_outcome_and_resuming_recovers(
        router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    route = router.post("/v1/projects/project_cli_remote/handoffs/handoff_test/accept").mock(
        side_effect=lose_answers(ledger, 2))
    p1, p2 = client(ledger, P1), through(router, ledger, P2)
    p1.create_session("session_01", "topic")
    p1.send("handoff_test", "session_01", "codex-p2")
    with pytest.raises(OutcomeUnknown) as info:
        p2.accept("handoff_test")
    assert isinstance(info.value.cause, httpx.ReadError) and route.call_count == 2
    assert (info.value.method, info.value.path) == ("POST", "/v1/projects/project_cli_remote/handoffs/handoff_test/accept")
    assert p1.status("handoff_test")["record"]["status"] == "accepted"  # it was applied after all
    resumed = p2.accept("handoff_test")
    assert resumed["recovered"] is True and resumed["receipt"] is None and route.call_count == 2  # no resend


@pytest.mark.parametrize("failures", [1, 2], ids=["retried", "unknown"])
def test_a_transport_error_mid_body(router: respx.MockRouter, ledger: ReferenceLedger, failures: int) -> None:
    inner = ledger.transport()
    broken = [0]

    def handle(request: httpx.Request) -> httpx.Response:
        answer = inner.handle_request(request)
        if broken[0] < failures:
            broken[0] += 1
            return httpx.Response(200, headers={"content-type": "application/json"}, stream=BrokenBody())
        return answer

    router.post("/v1/projects/project_cli_remote/sessions").mock(side_effect=handle)
    p1 = through(router, ledger, P1)
    if failures == 1:
        assert p1.create_session("session_01", "topic") == client(ledger, P1).create_session("session_01", "topic")
    else:
        with pytest.raises(OutcomeUnknown, match="RemoteProtocolError") as info:
            p1.create_session("session_01", "topic")
        assert isinstance(info.value.cause, httpx.RemoteProtocolError)


def test_a_read_is_not_retried_and_its_failure_is_an_unknown_outcome(
        router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    route = router.get("/health").mock(side_effect=httpx.ConnectTimeout("timed out"))
    with pytest.raises(OutcomeUnknown):
        through(router, ledger, P1).health()
    assert route.call_count == 1  # upstream's client retries POSTs only


def test_a_2xx_answer_that_is_not_json_is_an_unknown_outcome(router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    router.post("/v1/projects/project_cli_remote/facts").mock(return_value=httpx.Response(200, text="<html>proxy</html>"))
    with pytest.raises(OutcomeUnknown, match="not JSON"):
        through(router, ledger, P1).create_fact("f1", "s1", "content")


def test_an_error_answer_without_the_wire_shape_keeps_its_status(router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    router.get("/health").mock(return_value=httpx.Response(502, text="bad gateway"))
    with pytest.raises(AideMemoHTTPError) as info:
        through(router, ledger, P1).health()
    assert (info.value.status, info.value.code, info.value.message) == (502, None, "bad gateway")


@pytest.mark.parametrize("token", ["tøken-0123456789", "two words", ""], ids=["non-ascii", "space", "empty"])
def test_a_bad_token_is_refused_and_never_shown(router: respx.MockRouter, token: str) -> None:
    with pytest.raises(ClientRefusal) as info:
        AideMemoClient("http://ref", token, "project_cli_remote", transport=httpx.MockTransport(router.handler))
    assert not router.calls and (not token or token not in str(info.value))
    assert isinstance(info.value, AideMemoClientError)


@pytest.mark.parametrize("url", ["ftp://127.0.0.1:9", "http://[::1"], ids=["scheme", "malformed"])
def test_a_url_httpx_cannot_send_to_is_a_refusal(url: str) -> None:
    with pytest.raises(ClientRefusal):
        AideMemoClient(url, P1, "project_cli_remote").identity()


def test_a_bad_outcome_is_refused_before_any_request(router: respx.MockRouter, ledger: ReferenceLedger) -> None:
    with pytest.raises(ClientRefusal, match="outcome must be succeeded or failed"):
        through(router, ledger, P2).return_result("handoff_test", "f1", "done")
    assert not router.calls
