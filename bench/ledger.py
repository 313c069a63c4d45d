#!/usr/bin/env python3
"""Throughput of the reference ledger against baselines measured in the same run.

1. In-process: commands per second through ``ReferenceLedger.handle`` (decode, auth, rules,
   one transaction) against raw single-row transactions on the same storage (SQLite: same disk
   and pragmas; PostgreSQL: same server, one-row INSERT transactions from one connection).
   For SQLite three floors and the general path are timed beside them, in interleaved rounds so that load from other
   work hits all six alike: the least a command writes (one log row, which is the change, the
   receipt and the index fields: one append to one rowid table, as one statement); the
   store's own write path without request handling (receipt lookup, rules, log append, on
   commands decoded beforehand); and the request handling without a transaction (the write
   replaced by a made-up receipt), both on the general path; and the in-process commands again
   without the raw route's shortcut (``aidememo_ref/_hot.py``), which a replaced recipe turns
   off. ``docs/hardening.md`` explains what they show. PostgreSQL's
   two lines are interleaved the same way. Then the time (and memory) to open a file of
   100,000 commands: the SQLite store builds its state in memory from the whole log.
2. Over HTTP: commands per second from 8 concurrent keep-alive clients against a separately
   started ``aidememo-ref serve``, against the same server's ``/health`` rate.

Both backends run in one go. PostgreSQL is the database in ``$AIDEMEMO_POSTGRES_URL`` or, when
that is unset, a throwaway cluster started with ``scripts/postgres.sh`` (fsync on, as shipped);
without either, the PostgreSQL rows say why and are skipped.

    python bench/ledger.py [--seconds 3] [--clients 8] [--backend sqlite|postgres|both]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from _conditions import Window, closing, opening
from aidememo_ref import ReferenceLedger, provision

if TYPE_CHECKING:
    from aidememo_ref._commands import Command
    from aidememo_ref._records import Membership
    from aidememo_ref._store import Execute
from refkit.process import ReferenceProcess

TOKEN = "bench-token-0123456789"
AUTH = [(b"authorization", f"Bearer {TOKEN}".encode()), (b"content-type", b"application/json")]


def put_body(i: int, tag: str) -> bytes:
    return json.dumps({
        "command_id": f"{tag}-{i}", "project_id": "p", "expected_revision": None, "operation": "resource.put",
        "payload": {"i": i, "text": "bench"}, "resource": {"kind": "custom.bench", "id": f"{tag}-{i % 64}"},
        "change": "upsert",
    }).encode()


def raw_sqlite_step(path: Path) -> "callable[[int], None]":  # type: ignore[valid-type]
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE t(k INTEGER PRIMARY KEY, v TEXT)")

    def step(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t(k, v) VALUES (?, ?)", (i, "bench"))
        conn.execute("COMMIT")

    return step


def least_write_step(path: Path) -> "callable[[int], None]":  # type: ignore[valid-type]
    """The least a command writes, as the reference's own table and statement write it: one log
    row (change, receipt and index fields), appended to one rowid table."""
    from aidememo_ref._sqlite import SQLiteStore, append_statement

    conn = SQLiteStore(path).connection()
    fingerprint = "f" * 64
    append = append_statement(handoff_fields=False)

    def step(i: int) -> None:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(append, (i + 1, "t", "p", i + 1, "custom.bench", f"least-{i % 64}", i // 64 + 1, "a",
                              1_700_000_000_000 + i, '{"i":1,"text":"bench"}', f"least-{i}", fingerprint))
        conn.execute("COMMIT")

    return step


def open_seconds(path: Path, commands: int) -> tuple[float, float]:
    """(seconds, MiB of memory) to open a file holding ``commands`` puts: the store builds its
    state from the whole log. The rows are the ones the bench's puts write (64 resources per
    1,000 commands), inserted in one transaction to make the file quickly."""
    from aidememo_ref._sqlite import SQLiteStore, append_statement

    SQLiteStore(path).close()
    conn = sqlite3.connect(path)
    conn.executemany(append_statement(handoff_fields=True), ((i + 1, "t", "p", i + 1, "custom.bench", f"open-{i % 1000 // 16}-{i // 1000}",
                                i % 16 + 1, "a", 1_700_000_000_000 + i, json.dumps({"i": i, "text": "bench"}),
                                f"open-{i}", f"{i:064x}", None, None, None, None) for i in range(commands)))
    conn.commit()
    conn.close()
    began = time.perf_counter()
    SQLiteStore(path).close()
    seconds = time.perf_counter() - began
    tracemalloc.start()  # a second open, traced: what the state holds once built
    store = SQLiteStore(path)
    held = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    store.close()
    return seconds, held


def store_path_step(path: Path) -> "callable[[int], None]":  # type: ignore[valid-type]
    """The store's write path (``_store.execute``) for commands decoded before the clock starts."""
    from aidememo_wire.canonical import parse_json
    from aidememo_ref._commands import check_raw, raw_command
    from aidememo_wire.ids import bearer_digest
    from aidememo_ref._ledger import decide
    from aidememo_ref._records import Membership
    from aidememo_ref._store import NO_SCHEDULER, execute

    ledger = ReferenceLedger(path)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    member = ledger.store.authenticate(bearer_digest(TOKEN), "p")
    assert isinstance(member, Membership)
    commands: dict[int, object] = {}

    def step(i: int) -> None:
        command = commands.pop(i, None) or check_raw(raw_command(parse_json(put_body(i, "store"))))
        execute(ledger.store, member, command, 1_700_000_000_000 + i, decide, NO_SCHEDULER)  # type: ignore[arg-type]

    step.prepare = lambda start, count: commands.update(  # type: ignore[attr-defined]
        (i, check_raw(raw_command(parse_json(put_body(i, "store"))))) for i in range(start, start + count))
    return step


def handling_step(path: Path) -> "callable[[int], None]":  # type: ignore[valid-type]
    """``ReferenceLedger.handle`` with the transaction replaced by a made-up receipt: the request
    handling alone (headers, JSON, decoding, fingerprint, bearer and membership, receipt bytes)."""
    from aidememo_ref._records import Receipt

    def no_transaction(store: object, member: "Membership", command: "Command", now_ms: int, *_: object) -> Receipt:
        return Receipt(command_id=command.command_id, fingerprint=command.fingerprint, tenant_id=member.tenant_id,
                       project_id=member.project_id, actor_id=member.actor_id, project_seq=1, kind=command.kind,
                       resource_id=command.resource_id, revision=1, committed_at_ms=now_ms)

    return in_process_step(path, execute=no_transaction)


def in_process_step(path: Path, execute: "Execute | None" = None) -> "callable[[int], None]":  # type: ignore[valid-type]
    ledger = ReferenceLedger(path, execute=execute)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    bodies: dict[int, bytes] = {}

    def step(i: int) -> None:
        response = ledger.handle("POST", "/v1/commands", AUTH, bodies.pop(i, None) or put_body(i, "inproc"))
        assert response.status == 200, response.body

    step.prepare = lambda start, count: bodies.update(  # type: ignore[attr-defined]
        (i, put_body(i, "inproc")) for i in range(start, start + count))
    return step


def general_step(path: Path) -> "callable[[int], None]":  # type: ignore[valid-type]
    """``in_process_step`` with the recipe replaced by itself, which turns off the raw route's
    shortcut (``aidememo_ref/_hot.py``): the general path it stands for."""
    from aidememo_ref._store import execute

    return in_process_step(path, execute=lambda *args: execute(*args))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def interleaved(steps: dict[str, "callable[[int], None]"], seconds: float,  # type: ignore[valid-type]
                chunk: int = 250) -> dict[str, tuple[float, float]]:
    """(operations per wall second, CPU microseconds per operation) of each step, run in turns of
    ``chunk`` operations until each has run about ``seconds``; inputs are made between turns."""
    spent = {name: [0.0, 0.0, 0] for name in steps}
    start = 0
    while min(wall for wall, _, _ in spent.values()) < seconds:
        for name, step in steps.items():
            prepare = getattr(step, "prepare", None)
            if prepare is not None:
                prepare(start, chunk)
            cpu, began = _cpu(), time.perf_counter()
            for i in range(start, start + chunk):
                step(i)
            spent[name][0] += time.perf_counter() - began
            spent[name][1] += _cpu() - cpu
            spent[name][2] += chunk
        start += chunk
    return {name: (count / wall, cpu / count * 1e6) for name, (wall, cpu, count) in spent.items()}


def raw_postgres_step(url: str) -> "callable[[int], None]":  # type: ignore[valid-type]
    import psycopg

    conn = psycopg.connect(url)
    conn.execute("CREATE TABLE bench_raw(k BIGINT PRIMARY KEY, v TEXT)")
    conn.commit()

    def step(i: int) -> None:
        conn.execute("INSERT INTO bench_raw(k, v) VALUES (%s, %s)", (i, "bench"))
        conn.commit()

    step.close = conn.close  # type: ignore[attr-defined]
    return step


def in_process_postgres_step(url: str) -> "callable[[int], None]":  # type: ignore[valid-type]
    ledger = ReferenceLedger(postgres_url=url)
    ledger.provision(tenant_id="t", project_id="p", actor_id="a", token=TOKEN)

    def step(i: int) -> None:
        response = ledger.handle("POST", "/v1/commands", AUTH, put_body(i, "inproc"))
        assert response.status == 200, response.body

    step.close = ledger.close  # type: ignore[attr-defined]
    return step


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


def served_rates(database: Path | None, postgres_url: str | None, clients: int, seconds: float) -> tuple[float, float]:
    with ReferenceProcess.start(database, postgres_url=postgres_url) as server:
        health = http_rate(server.url, clients, seconds, "/health", "h")
        commands = http_rate(server.url, clients, seconds, "/v1/commands", "c")
    return commands, health


def _fresh_database(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[call-overload]
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[call-overload]
    return f"{server_url.rsplit('/', 1)[0]}/{name}"


def bench_sqlite(tmp: Path, args: argparse.Namespace) -> None:
    window = Window()
    rates = interleaved({
        "raw": raw_sqlite_step(tmp / "raw.sqlite"),
        "least": least_write_step(tmp / "least.sqlite"),
        "store": store_path_step(tmp / "store.sqlite"),
        "ours": in_process_step(tmp / "inproc.sqlite"),
        "handling": handling_step(tmp / "handling.sqlite"),
        "general": general_step(tmp / "general.sqlite"),
    }, args.seconds)
    (base, base_cpu), (ours, ours_cpu) = rates["raw"], rates["ours"]
    print(window.mark(f"sqlite     in-process: {ours:8.0f} commands/s | raw SQLite single-row transactions: "
                      f"{base:8.0f}/s | ratio {ours / base:.2f} (cpu {ours_cpu:.0f} vs {base_cpu:.0f} us: "
                      f"{base_cpu / ours_cpu:.2f})"))
    for name, label in (("least", "floor: a command's least write (1 b-tree, 1 statement)"),
                        ("store", "floor: the store's write path, no request handling"),
                        ("handling", "floor: request handling alone, no transaction"),
                        ("general", "the same commands without the raw route's shortcut (aidememo_ref/_hot.py)")):
        rate, cpu = rates[name]
        print(window.mark(f"sqlite     {label}: {rate:8.0f}/s | ratio {rate / base:.2f} "
                          f"(cpu {cpu:.0f} us: {base_cpu / cpu:.2f})"))
    window = Window()
    seconds, held = open_seconds(tmp / "open.sqlite", 100_000)
    print(window.mark(f"sqlite     open of a 100,000-command file (memory built from the log): {seconds:.2f} s, "
                      f"holding {held:.0f} MiB (traced Python allocations)"))
    db = tmp / "http.sqlite"
    provision(db, tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    window = Window()
    commands, health = served_rates(db, None, args.clients, args.seconds)
    print(window.mark(f"sqlite     over HTTP, {args.clients} clients: {commands:8.0f} commands/s | same server's "
                      f"/health: {health:8.0f}/s | ratio {commands / health:.2f}"))


def bench_postgres(server_url: str, args: argparse.Namespace) -> None:
    # Interleaved in turns of 50 commits, like the SQLite lines: fsync times drift by 2-3x over
    # seconds here, and separate windows would time the drift instead of the ledger.
    window = Window()
    steps = {"raw": raw_postgres_step(_fresh_database(server_url, "bench_raw")),
             "ours": in_process_postgres_step(_fresh_database(server_url, "bench_inproc"))}
    rates = interleaved(steps, args.seconds, chunk=50)
    for step in steps.values():
        step.close()  # type: ignore[attr-defined]
    (base, _), (ours, _) = rates["raw"], rates["ours"]  # CPU here is the client's only: not shown
    print(window.mark(f"postgres   in-process: {ours:8.0f} commands/s | raw PostgreSQL single-row transactions: "
                      f"{base:8.0f}/s | ratio {ours / base:.2f}"))
    url = _fresh_database(server_url, "bench_http")
    provision(postgres_url=url, tenant_id="t", project_id="p", actor_id="a", token=TOKEN)
    window = Window()
    commands, health = served_rates(None, url, args.clients, args.seconds)
    print(window.mark(f"postgres   over HTTP, {args.clients} clients: {commands:8.0f} commands/s | same server's "
                      f"/health: {health:8.0f}/s | ratio {commands / health:.2f}"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="both")
    args = parser.parse_args()
    opening("bench/ledger.py (ratios are same-run; absolute rates move with load)")
    try:
        _run(args)
    finally:
        closing()
    return 0


def _run(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend in ("sqlite", "both"):
            bench_sqlite(Path(tmp), args)
        if args.backend in ("postgres", "both"):
            server = os.environ.get("AIDEMEMO_POSTGRES_URL")
            script = Path(__file__).resolve().parents[1] / "scripts" / "postgres.sh"
            cluster = Path(tmp) / "pg"
            if not server:
                started = subprocess.run(["bash", str(script), "start", str(cluster)], capture_output=True, text=True)
                if started.returncode != 0:
                    print(f"postgres   skipped: {(started.stderr.strip().splitlines() or ['no server'])[-1]}")
                    return
                server = started.stdout.strip()
            try:
                bench_postgres(server, args)
            finally:
                if not os.environ.get("AIDEMEMO_POSTGRES_URL"):
                    subprocess.run(["bash", str(script), "stop", str(cluster)], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
