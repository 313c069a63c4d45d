"""Memory follows the checks in flight, not the bytes received: a judged check's transcript keeps
what its report shows (``SHOWN_BYTES`` of each body and its length), and the report reads the
same as before. The peak of a whole run against 1 MB answers is measured by
``bench/hostile_memory.py``, not asserted here."""

from __future__ import annotations

from conformance.http import REPLAYED_BODY_BYTES, Exchange
from conformance.process import CommandExchange
from conformance.transcript import SHOWN_BYTES, WHOLE_ENTRIES, Transcript

MEGABYTE = b'{"padding": "' + b"x" * (1 << 20) + b'"}'


def test_a_settled_exchange_keeps_what_its_report_shows_and_nothing_more() -> None:
    exchange = Exchange(method="POST", url="http://t/v1/x", request_headers=(("authorization", "Bearer tok-1234"),),
                        request_body=b"y" * (REPLAYED_BODY_BYTES + 1), status=200, body=MEGABYTE)
    transcript = Transcript()
    transcript.secret("tok-1234", "writer")
    transcript.record(exchange)
    before = transcript.to_list()
    transcript.settle()
    (settled,) = transcript.entries
    assert isinstance(settled, Exchange)
    assert len(settled.body) <= SHOWN_BYTES and len(settled.request_body) <= SHOWN_BYTES
    assert transcript.to_list() == before  # the report is the same, byte for byte
    assert f"({len(MEGABYTE)} bytes)" in str(before[0]["response_body"])
    transcript.settle()
    assert transcript.to_list() == before  # settling twice changes nothing


def test_a_small_exchange_and_a_replayable_request_are_kept_whole() -> None:
    exchange = Exchange(method="POST", url="http://t/v1/x", request_headers=(), request_body=b"z" * 20_000,
                        status=200, body=b"{}")
    assert exchange.settled() is exchange
    assert exchange.to_dict()["request_body_exact"] == "z" * 20_000


def test_a_settled_command_run_keeps_what_its_report_shows() -> None:
    run = CommandExchange(argv=("aidememo", "inbox"), env=(), stdin=b"", exit_code=0, stdout=MEGABYTE,
                          stderr=b"e" * 20_000)
    settled = run.settled()
    assert len(settled.stdout) <= SHOWN_BYTES and len(settled.stderr) <= SHOWN_BYTES
    assert settled.to_dict() == run.to_dict()


def test_a_check_with_many_requests_holds_only_the_recent_answers_whole() -> None:
    transcript = Transcript()
    for n in range(WHOLE_ENTRIES + 40):
        transcript.record(Exchange(method="GET", url=f"http://t/{n}", request_headers=(), request_body=b"",
                                   status=200, body=MEGABYTE))
    whole = [e for e in transcript.entries if isinstance(e, Exchange) and len(e.body) > SHOWN_BYTES]
    assert len(whole) <= WHOLE_ENTRIES + 1
    assert all(f"({len(MEGABYTE)} bytes)" in str(e["response_body"]) for e in transcript.to_list())
