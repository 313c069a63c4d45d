#!/usr/bin/env python3
"""Throughput of the reference ledger against baselines measured in the same run.

1. In-process: commands per second through ``ReferenceLedger.handle`` (decode, auth, rules,
   one SQLite transaction) against raw single-row SQLite transactions on the same disk with the
   same pragmas (the physical limit of the storage).
2. Over HTTP: commands per second from 8 concurrent keep-alive clients against a separately
   started ``aidememo-ref serve``, against the same server's ``/health`` rate.

    python bench/ledger.py [--seconds 3] [--clients 8]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from aidememo_ref import ReferenceLedger, provision
from aidememo_ref.process import ReferenceProcess

TOKEN = "bench-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]


def put_body(i: int, tag: str) -> bytes:
    return json.dumps({
        "command_id": f"{tag}-{i}", "project_id": "p", "expected_revision": None, "operation": "resource.put",
        "payload": {"i": i, "text": "bench"}, "resource": {"kind": "custom.bench", "id": f"{tag}-{i % 64}"},
        "change": "upsert",
    }).encode()


def timed(seconds: float, step: "callable[[int], None]") -> float:  # type: ignore[valid-type]
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step(count)
        count += 1
    return count / elapsed


def raw_sqlite_rate(path: Path, seconds: float) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")

    def step(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t(k, v) VALUES (?, ?)", (i, "bench"))
        conn.execute("COMMIT")

    rate = timed(seconds, step)
    conn.close()
    return rate


def in_process_rate(path: Path, seconds: float) -> float:
    ledger = ReferenceLedger(path)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)

    def step(i: int) -> None:
        response = ledger.handle("POST", "/v1/commands", AUTH, put_body(i, "inproc"))
        assert response.status == 200, response.body

    rate = timed(seconds, step)
    ledger.close()
    return rate


def http_rate(url: str, clients: int, seconds: float, path: str, tag: str) -> float:
    counts = [0] * clients
    stop = threading.Event()
    errors: list[str] = []

    def run(c: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {TOKEN}",
                                                 "content-type": "application/json"}) as http:
            i = 0
            while not stop.is_set():
                if path == "/health":
                    r = http.get(path)
                else:
                    r = http.post(path, content=put_body(i, f"{tag}{c}"))
                if r.status_code != 200:
                    errors.append(r.text)
                    return
                i += 1
                counts[c] += 1

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise SystemExit(f"error: {errors[0]}")
    return sum(counts) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = raw_sqlite_rate(Path(tmp) / "raw.sqlite", args.seconds)
        ours = in_process_rate(Path(tmp) / "inproc.sqlite", args.seconds)
        print(f"in-process: {ours:9.0f} commands/s | raw SQLite single-row transactions: {base:9.0f}/s "
              f"| ratio {ours / base:.2f}")
        db = Path(tmp) / "http.sqlite"
        provision(db, tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
        with ReferenceProcess.start(db) as server:
            health = http_rate(server.url, args.clients, args.seconds, "/health", "h")
            commands = http_rate(server.url, args.clients, args.seconds, "/v1/commands", "c")
        print(f"over HTTP, {args.clients} clients: {commands:9.0f} commands/s | same server's /health: "
              f"{health:9.0f}/s | ratio {commands / health:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
