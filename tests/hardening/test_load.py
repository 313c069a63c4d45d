"""The load campaign's CI-sized run: deliberate races only ever lose in the expected ways.

Times are printed by ``bench/load.py``, never asserted here.
"""

from __future__ import annotations

import re
import subprocess
import sys
from types import ModuleType

import pytest

from .conftest import ROOT, load_script


def _run(*argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "load.py"), *argv],
                          capture_output=True, text=True, timeout=timeout)


def test_short_load_run_has_no_unexpected_error() -> None:
    result = _run("--actors", "3", "--workers", "2", "--ops", "400", "--seconds", "60", "--seed", "5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "unexpected errors: 0" in result.stdout
    operations = int(re.search(r"operations: (\d+)", result.stdout).group(1))  # type: ignore[union-attr]
    assert 0 < operations <= 400
    for op in ("send", "inbox", "accept", "return"):
        assert re.search(rf"^  {op} +n=\d+ +p50 .* p99 .* p50/health", result.stdout, re.M), op
    assert "seed=5" in result.stdout and "handoffs read back: " in result.stdout


def test_the_book_tells_expected_races_from_anything_else() -> None:
    load: ModuleType = load_script("bench/load.py")
    book = load.Book()
    book.record("accept", 0.001, 409, "stale_revision", "")
    book.record("return", 0.001, 409, "handoff_conflict", "")
    book.record("send", 0.001, 409, "handoff_conflict", "")  # a send has no race to lose
    book.record("accept", 0.001, 409, "command_conflict", "")
    book.record("fact", 0.001, 503, "storage_failure", "")
    book.record("inbox", 0.001, None, None, "ConnectError")
    assert sum(book.expected.values()) == 2
    assert sum(book.unexpected.values()) == 4
    assert len(book.examples) == 4


@pytest.mark.parametrize("argv", [["--actors", "1"], ["--ops", "0"], ["--seconds", "-3"], ["--seconds", "inf"],
                                  ["--workers", "x"], ["--seed", "-2"]])
def test_bad_input_is_one_line(argv: list[str]) -> None:
    result = _run(*argv, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_the_audit_flags_records_no_answered_command_allows() -> None:
    import httpx
    import respx

    load: ModuleType = load_script("bench/load.py")
    records = {
        "h-ok": {"status": "completed", "claim_id": "c", "attempt_count": 1, "outcome": "succeeded", "result_fact_id": "f"},
        "h-lost-result": {"status": "completed", "claim_id": "c", "attempt_count": 1, "outcome": "succeeded",
                          "result_fact_id": None},
        "h-ghost-claim": {"status": "pending", "claim_id": "c", "attempt_count": 0, "outcome": None, "result_fact_id": None},
        "h-unclaimed": {"status": "accepted", "claim_id": None, "attempt_count": 1, "outcome": None, "result_fact_id": None},
    }

    server = respx.MockRouter(base_url=f"http://load/v1/projects/{load.PROJECT}/handoffs")
    for hid, record in records.items():
        server.get(f"/{hid}").respond(200, json={"revision": 2, "record": record})
    server.route().respond(404, json={"error": {"code": "resource_not_found", "message": "resource not found"}})
    client = httpx.Client(transport=httpx.MockTransport(server.handler), base_url="http://load")
    book = load.Book()
    book.sent.extend((hid, "a") for hid in [*records, "h-vanished"])
    states = load.audit({"a": client}, book)
    assert states == {"completed": 2, "pending": 1, "accepted": 1}
    assert book.unexpected == {"audit: inconsistent record": 3, "audit: status read answered 404": 1}


@pytest.mark.parametrize("busy_answers, unexpected", [(2, {}), (4, {"accept: 503 storage_failure": 1})])
def test_a_lock_wait_is_sent_again_and_only_a_lasting_one_is_an_error(busy_answers: int,
                                                                      unexpected: dict[str, int]) -> None:
    # Under load a writer may wait for SQLite's lock longer than the busy timeout: 503
    # storage_failure, retryable. The run sends it again (same command id) up to three times.
    import httpx

    load: ModuleType = load_script("bench/load.py")
    answers = [httpx.Response(503, json={"error": {"code": "storage_failure", "message": "database is locked"}})
               ] * busy_answers + [httpx.Response(200, json={"revision": 2})]
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return answers[len(sent) - 1]

    book = load.Book()
    worker = load.Worker("http://load", "a", 0, ["a", "b"], {"a": "token-a"}, 1, book, 10, 0.0)
    worker.http = httpx.Client(transport=httpx.MockTransport(handler), base_url="http://load")
    response = worker.call("accept", "POST", "/accept", {"command_id": "acc-1"})
    assert response is not None and len(sent) == min(busy_answers + 1, 4) and len(set(sent)) == 1
    assert book.busy == {"accept": min(busy_answers, 3)} and book.unexpected == unexpected
