"""Many writers on one database: exactly one winner per revision, no lost update.

Threads share one ledger (one SQLite connection per thread); processes open the same file.
"""

from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

from aidememo_ref import ManualClock, ReferenceLedger

WRITER = "writer-token-0123456789"
RECEIVER = "receiver-token-0123456789"
_T = TypeVar("_T")


def _prepare(path: Path) -> None:
    ledger = ReferenceLedger(path, clock=ManualClock())
    for actor, token in (("sender", WRITER), ("receiver", RECEIVER)):
        ledger.provision(tenant_id="t", project_id="p", actor_id=actor, token=token, project_epoch="e")
    http = httpx.Client(transport=ledger.transport(), base_url="http://ref",
                        headers={"Authorization": f"Bearer {WRITER}"})
    assert http.post("/v1/projects/p/sessions", json={"command_id": "s", "payload": {"session_id": "s", "topic": "t"}}).status_code == 200
    assert http.post("/v1/projects/p/handoffs", json={"command_id": "h", "payload": {
        "handoff_id": "h", "session_id": "s", "to_actor": "receiver"}}).status_code == 200
    ledger.close()


def _accept(path: str, claim: str, barrier: object) -> tuple[int, str]:
    ledger = ReferenceLedger(path, clock=ManualClock())
    http = httpx.Client(transport=ledger.transport(), base_url="http://ref",
                        headers={"Authorization": f"Bearer {RECEIVER}"})
    barrier.wait()  # type: ignore[attr-defined]
    r = http.post("/v1/projects/p/handoffs/h/accept",
                  json={"command_id": f"accept-{claim}", "expected_revision": 1, "payload": {"claim_id": claim}})
    ledger.close()
    return r.status_code, r.json().get("error", {}).get("code", "ok")


def _in_threads(count: int, work: Callable[[int], _T]) -> list[_T]:
    """``work(0) .. work(count - 1)`` at once, one thread each; a thread's exception is raised here
    (a bare ``threading.Thread`` would only print it, and the test would judge the survivors)."""
    with ThreadPoolExecutor(max_workers=count) as pool:
        futures = [pool.submit(work, i) for i in range(count)]
        return [future.result(timeout=120) for future in futures]


def _check_one_winner(path: Path, outcomes: list[tuple[int, str]]) -> None:
    winners = [o for o in outcomes if o[0] == 200]
    assert len(winners) == 1, outcomes
    assert all(o == (409, "stale_revision") for o in outcomes if o[0] != 200), outcomes
    ledger = ReferenceLedger(path)
    http = httpx.Client(transport=ledger.transport(), base_url="http://ref",
                        headers={"Authorization": f"Bearer {WRITER}"})
    status = http.get("/v1/projects/p/handoffs/h").json()
    assert (status["revision"], status["record"]["attempt_count"]) == (2, 1)
    feed = http.get("/v1/projects/p/changes?project_epoch=e&after_seq=0").json()
    assert [e["seq"] for e in feed["entries"]] == [1, 2, 3]
    inbox = httpx.Client(transport=ledger.transport(), base_url="http://ref",
                         headers={"Authorization": f"Bearer {RECEIVER}"}).get("/v1/projects/p/handoffs?box=inbox").json()
    assert inbox["assignments"][0]["revision"] == 2  # the mailbox index follows the winner
    ledger.close()


@pytest.mark.parametrize("threads", [2, 16])
def test_racing_accepts_in_threads_have_one_winner(tmp_path: Path, threads: int) -> None:
    path = tmp_path / "race.sqlite"
    _prepare(path)
    barrier = threading.Barrier(threads)
    outcomes = _in_threads(threads, lambda i: _accept(str(path), f"claim-{i}", barrier))
    _check_one_winner(path, outcomes)


def _process_main(path: str, claim: str, barrier: object, queue: object) -> None:
    queue.put(_accept(path, claim, barrier))  # type: ignore[attr-defined]


def test_racing_accepts_in_two_processes_have_one_winner(tmp_path: Path) -> None:
    path = tmp_path / "race.sqlite"
    _prepare(path)
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_process_main, args=(str(path), f"claim-{i}", barrier, queue)) for i in range(2)]
    for p in procs:
        p.start()
    outcomes = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [p.exitcode for p in procs] == [0, 0]
    _check_one_winner(path, outcomes)


def test_compare_and_swap_increments_lose_no_update(tmp_path: Path) -> None:
    path = tmp_path / "counter.sqlite"
    _prepare(path)
    ledger = ReferenceLedger(path)
    workers, increments = 8, 15
    counter = {"command_id": "init", "project_id": "p", "expected_revision": None, "operation": "resource.put",
               "payload": {"n": 0}, "resource": {"kind": "custom.counter", "id": "c"}, "change": "upsert"}
    http = httpx.Client(transport=ledger.transport(), base_url="http://ref", headers={"Authorization": f"Bearer {WRITER}"})
    assert http.post("/v1/commands", json=counter).status_code == 200
    conflicts = []

    def run(w: int) -> None:
        client = httpx.Client(transport=ledger.transport(), base_url="http://ref",
                              headers={"Authorization": f"Bearer {WRITER}"})
        done = 0
        while done < increments:
            current = client.get("/v1/projects/p/resources/custom.counter/c").json()
            body = {**counter, "command_id": f"w{w}-{done}-{current['revision']}", "expected_revision": current["revision"],
                    "payload": {"n": current["state"]["body"]["n"] + 1}}
            r = client.post("/v1/commands", json=body)
            if r.status_code == 200:
                done += 1
            else:
                assert r.json()["error"]["code"] == "stale_revision", r.text
                conflicts.append(w)

    _in_threads(workers, run)
    final = http.get("/v1/projects/p/resources/custom.counter/c").json()
    assert final["state"]["body"]["n"] == workers * increments
    assert final["revision"] == workers * increments + 1
    ledger.close()


def test_two_server_processes_on_one_database_grant_one_claim(tmp_path: Path) -> None:
    from refkit.process import ReferenceProcess

    path = tmp_path / "shared.sqlite"
    _prepare(path)
    servers = [ReferenceProcess.start(path) for _ in range(2)]
    try:
        urls = [server.url for server in servers]
        barrier = threading.Barrier(len(urls) * 4)

        def run(i: int) -> tuple[int, str]:
            with httpx.Client(base_url=urls[i % len(urls)], timeout=30,
                              headers={"Authorization": f"Bearer {RECEIVER}"}) as http:
                barrier.wait()
                r = http.post("/v1/projects/p/handoffs/h/accept",
                              json={"command_id": f"accept-{i}", "expected_revision": 1, "payload": {"claim_id": f"c{i}"}})
            return r.status_code, r.json().get("error", {}).get("code", "ok")

        outcomes = _in_threads(len(urls) * 4, run)
    finally:
        for server in servers:
            server.stop()
    _check_one_winner(path, outcomes)
