"""How the suite's Wire handles scripted answers: 503 retries, indeterminate outcomes, the breaker, bounds.

respx stands in for the target behind the suite's real httpx transport, so each answer is exactly
the one scripted here, with no server to coax into it.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import respx

from conformance.errors import Indeterminate, TargetError
from conformance.http import Wire
from conformance.profiles.aidememo.target import storage_failure
from conformance.transcript import Transcript

BASE = "http://target.test"
BUSY = httpx.Response(503, json={"error": {"code": "storage_failure", "message": "canonical storage temporarily unavailable"}})
OK = httpx.Response(200, json={"status": "ok", "mode": "single_node", "schema_version": 4})


@pytest.fixture
def target() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def wire(**kwargs: int) -> Wire:
    """The suite's Wire as the AideMemo profile builds it: 503 storage_failure is retryable."""
    return Wire(BASE, timeout_s=5, max_body_bytes=kwargs.pop("max_body_bytes", 1 << 20), retryable=storage_failure,
                **kwargs)


def test_a_busy_answer_is_retried_and_every_attempt_is_in_the_transcript(target: respx.MockRouter) -> None:
    route = target.get("/health").mock(side_effect=[BUSY, BUSY, OK])
    transcript = Transcript()
    exchange = wire(retries=2).request(transcript, "GET", "/health")
    assert exchange.status == 200 and route.call_count == 3
    assert [e.status for e in transcript.entries] == [503, 503, 200]


def test_only_busy_answers_are_an_indeterminate_outcome_not_a_verdict(target: respx.MockRouter) -> None:
    route = target.post("/v1/commands").mock(return_value=BUSY)
    with pytest.raises(Indeterminate, match="3 answers of 503 storage_failure"):
        wire(retries=2).request(Transcript(), "POST", "/v1/commands", json_body={"command_id": "c"})
    assert route.call_count == 3
    assert len({call.request.content for call in route.calls}) == 1  # the identical request each time


def test_another_503_is_an_answer_not_a_retry(target: respx.MockRouter) -> None:
    other = httpx.Response(503, json={"error": {"code": "artifact_store_unavailable", "message": "x"}})
    route = target.get("/health").mock(return_value=other)
    assert wire().request(None, "GET", "/health").status == 503 and route.call_count == 1


def test_the_breaker_stops_sending_after_consecutive_transport_failures(target: respx.MockRouter) -> None:
    route = target.get("/health").mock(side_effect=httpx.ConnectError("connection refused"))
    bounded = wire(breaker_limit=2)
    for _ in range(2):
        with pytest.raises(TargetError, match="ConnectError"):
            bounded.request(None, "GET", "/health")
    transcript = Transcript()
    with pytest.raises(TargetError, match="not sent"):
        bounded.request(transcript, "GET", "/health")
    assert route.call_count == 2 and transcript.entries[0].status == 0


def test_an_answer_over_the_body_bound_is_the_targets_fault(target: respx.MockRouter) -> None:
    target.get("/snapshot").mock(return_value=httpx.Response(200, content=b"x" * 5000))
    transcript = Transcript()
    with pytest.raises(TargetError, match="exceeds 1024 bytes"):
        wire(max_body_bytes=1024).request(transcript, "GET", "/snapshot")
    assert transcript.entries[0].truncated and len(transcript.entries[0].body) <= 1024


def test_a_transport_error_mid_body_is_the_targets_fault(target: respx.MockRouter) -> None:
    class Broken(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            yield b'{"status":'
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")

    target.get("/health").mock(return_value=httpx.Response(200, stream=Broken()))
    with pytest.raises(TargetError, match="RemoteProtocolError"):
        wire().request(None, "GET", "/health")
