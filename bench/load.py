#!/usr/bin/env python3
"""Load campaign: many actors on many handoffs against `aidememo-ref serve` on loopback.

Each actor runs several worker threads (one HTTP connection each) that send handoffs to other
actors, read their inbox, and accept, heartbeat, write a result fact and return. Workers of the
same actor race on purpose for the same pending handoff, so some accepts, heartbeats and returns
lose with 409 ``stale_revision`` or ``handoff_conflict``: those are the expected errors. A
``503 storage_failure`` (a writer waited for the database lock longer than the busy timeout;
retryable, ERRATA 7) is sent again as it was, with the same command id, a few times, as a client
would: the retries are counted and printed, and only a 503 that outlasts them is an error.
Anything else (another status or code, a 5xx, a transport failure) is unexpected; the goal is 0.

    python bench/load.py --actors 8 --workers 2 --ops 20000 --seconds 120 --seed 7

The run stops at whichever cap comes first (operations or wall time). It prints throughput,
p50/p99 latency per operation and, as a baseline measured in the same run with the same
threads, the latency of GET /health, with each operation's p50 as a ratio of it. Afterwards
every handoff sent is read back and must be in a state its answered commands allow. Exit 0
when no unexpected error was seen. Only loopback is used.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import httpx
from faker import Faker

from aidememo_wire.shapes import error_detail

sys.path.append(str(Path(__file__).resolve().parent))  # bench/ itself, also when a test imports this file
from _conditions import Window, closing, opening  # noqa: E402

PROJECT: Final = "p-load"
SESSION: Final = "s-load"
EXPECTED: Final = frozenset({(409, "stale_revision"), (409, "handoff_conflict")})
RACING_OPS: Final = frozenset({"accept", "heartbeat", "return"})
BUSY: Final = (503, "storage_failure")
BUSY_RETRIES: Final = 3  # each after a pause of 50 ms times its number


class OneLineParser(argparse.ArgumentParser):
    """Bad input is one line on stderr and exit 2, never a usage block or a traceback."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"error: {message}\n")
        raise SystemExit(2)


def positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


@dataclass(slots=True)
class Book:
    """Latencies and errors from every worker (one lock; appends are cheap next to a request)."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    expected: Counter[str] = field(default_factory=Counter)
    unexpected: Counter[str] = field(default_factory=Counter)
    busy: Counter[str] = field(default_factory=Counter)  # 503 storage_failure answers, sent again
    examples: list[str] = field(default_factory=list)
    sent: list[tuple[str, str]] = field(default_factory=list)  # (handoff_id, sender)
    ops: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_slot(self, cap: int) -> bool:
        with self.lock:
            if self.ops >= cap:
                return False
            self.ops += 1
            return True

    def record(self, op: str, seconds: float, status: int | None, code: str | None, detail: str) -> None:
        with self.lock:
            self.latencies.setdefault(op, []).append(seconds)
            if status is None or status == 200:
                if status is None:
                    self.unexpected[f"{op}: transport error"] += 1
                    self._example(f"{op}: {detail}")
                return
            if op in RACING_OPS and (status, code) in EXPECTED:
                self.expected[f"{op} {code}"] += 1
                return
            self.unexpected[f"{op}: {status} {code}"] += 1
            self._example(f"{op}: {status} {detail}")

    def retried(self, op: str) -> None:
        with self.lock:
            self.busy[op] += 1

    def flag(self, label: str, detail: str) -> None:
        """An unexpected finding that is not a timed request (the audit's)."""
        with self.lock:
            self.unexpected[label] += 1
            self._example(f"{label}: {detail}")

    def _example(self, text: str) -> None:
        if len(self.examples) < 10:
            self.examples.append(text[:300])


def _code(response: httpx.Response) -> str:
    try:
        detail = error_detail(response.json())
    except ValueError:
        detail = None
    return detail["code"] if detail else "(no wire error body)"


class Worker:
    """One thread of one actor: a connection, a seeded rng and its own claim ids."""

    def __init__(self, url: str, actor: str, index: int, actors: list[str], tokens: dict[str, str], seed: int,
                 book: Book, cap: int, deadline: float) -> None:
        self.http = httpx.Client(base_url=url, timeout=30, headers={"authorization": f"Bearer {tokens[actor]}"})
        self.actor, self.index, self.others = actor, index, [a for a in actors if a != actor]
        self.rng = random.Random(f"{seed}/{actor}/{index}")
        # Realistic text from a stream of its own, so adding words never shifts a seeded choice.
        self.faker = Faker()
        self.faker.seed_instance(f"{seed}/{actor}/{index}/text")
        self.book, self.cap, self.deadline = book, cap, deadline
        self.step = 0

    def call(self, op: str, method: str, path: str, body: dict[str, Any] | None = None,
             params: dict[str, Any] | None = None) -> httpx.Response | None:
        started = time.perf_counter()
        for attempt in range(BUSY_RETRIES + 1):
            try:
                response = self.http.request(method, path, json=body, params=params)
            except httpx.HTTPError as exc:
                self.book.record(op, time.perf_counter() - started, None, None, f"{type(exc).__name__}: {exc}")
                return None
            code = None if response.status_code == 200 else _code(response)
            if (response.status_code, code) != BUSY or attempt == BUSY_RETRIES:
                break
            self.book.retried(op)  # the same request again: a write's command id makes it safe
            time.sleep(0.05 * (attempt + 1))
        self.book.record(op, time.perf_counter() - started, response.status_code, code, response.text)
        return response

    def run(self) -> None:
        base = f"/v1/projects/{PROJECT}"
        while time.monotonic() < self.deadline and self.book.take_slot(self.cap):
            self.step += 1
            tag = f"{self.actor}-{self.index}-{self.step}"
            if self.rng.random() < 0.3:
                sent = self.call("send", "POST", f"{base}/handoffs", {"command_id": f"send-{tag}", "payload": {
                    "handoff_id": f"h-{tag}", "session_id": SESSION, "to_actor": self.rng.choice(self.others),
                    "focus": f"Review {self.faker.bs()}", "done_when": self.faker.sentence(nb_words=8)}})
                if sent is not None and sent.status_code == 200:
                    with self.book.lock:
                        self.book.sent.append((f"h-{tag}", self.actor))
                continue
            inbox = self.call("inbox", "GET", f"{base}/handoffs", params={"box": "inbox", "limit": 20})
            if inbox is None or inbox.status_code != 200:
                continue
            assignments = inbox.json()["assignments"]
            if not assignments:
                continue
            # Workers of one actor prefer the oldest entries, so they collide on the same handoff.
            entry = self.rng.choice(assignments[-3:])
            self.work(base, entry, tag)

    def work(self, base: str, entry: dict[str, Any], tag: str) -> None:
        hid = entry["record"]["handoff_id"]
        revision = entry["revision"]
        claim = f"claim-{tag}"
        if entry["record"]["status"] == "accepted":
            # Someone (maybe a sibling) holds it: trying to take it over is a deliberate race.
            claim = entry["record"]["claim_id"] if self.rng.random() < 0.5 else claim
        if not self.book.take_slot(self.cap):
            return
        accepted = self.call("accept", "POST", f"{base}/handoffs/{hid}/accept", {
            "command_id": f"acc-{tag}", "expected_revision": revision, "payload": {"claim_id": claim}})
        if accepted is None or accepted.status_code != 200:
            return
        revision = accepted.json()["revision"]
        if self.rng.random() < 0.5 and self.book.take_slot(self.cap):
            beat = self.call("heartbeat", "POST", f"{base}/handoffs/{hid}/heartbeat", {
                "command_id": f"hb-{tag}", "expected_revision": revision, "payload": {"claim_id": claim}})
            if beat is None or beat.status_code != 200:
                return
            revision = beat.json()["revision"]
        if not self.book.take_slot(self.cap):
            return
        fact = self.call("fact", "POST", f"{base}/facts", {"command_id": f"fact-{tag}", "payload": {
            "fact_id": f"f-{tag}", "session_id": SESSION, "content": self.faker.paragraph(nb_sentences=3)}})
        if fact is None or fact.status_code != 200 or not self.book.take_slot(self.cap):
            return
        self.call("return", "POST", f"{base}/handoffs/{hid}/return", {
            "command_id": f"ret-{tag}", "expected_revision": revision, "payload": {
                "claim_id": claim, "result_fact_id": f"f-{tag}", "outcome": "succeeded"}})


def audit(clients: dict[str, httpx.Client], book: Book) -> Counter[str]:
    """Read every handoff back after the run: each must be in a state its answered commands
    allow (a completed handoff carries a succeeded outcome and its result fact; an accepted
    one a claim and at least one attempt). Problems count as unexpected errors."""
    states: Counter[str] = Counter()
    for hid, sender in book.sent:
        answer = clients[sender].get(f"/v1/projects/{PROJECT}/handoffs/{hid}")
        if answer.status_code != 200:
            book.flag(f"audit: status read answered {answer.status_code}", answer.text)
            continue
        record = answer.json()["record"]
        states[record["status"]] += 1
        broken = {
            "pending": record["claim_id"] is not None or record["attempt_count"] != 0,
            "accepted": record["claim_id"] is None or record["attempt_count"] < 1,
            "completed": record["outcome"] != "succeeded" or record["result_fact_id"] is None,
        }.get(record["status"], True)
        if broken:
            book.flag("audit: inconsistent record", json.dumps(record))
    return states


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def health_baseline(url: str, threads: int, per_thread: int) -> list[float]:
    """Latency of GET /health from the same number of threads: the floor any route pays."""
    samples: list[float] = []
    lock = threading.Lock()

    def run() -> None:
        with httpx.Client(base_url=url, timeout=30) as http:
            mine = []
            for _ in range(per_thread):
                started = time.perf_counter()
                http.get("/health")
                mine.append(time.perf_counter() - started)
        with lock:
            samples.extend(mine)

    pool = [threading.Thread(target=run) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return samples


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=positive_int, default=6, help="actors (default 6; at least 2)")
    parser.add_argument("--workers", type=positive_int, default=2, help="threads per actor (default 2)")
    parser.add_argument("--ops", type=positive_int, default=3000, help="cap on operations (default 3000)")
    parser.add_argument("--seconds", type=positive_float, default=60.0, help="cap on wall time (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="seed of every random choice (default: random, printed)")
    args = parser.parse_args(argv)
    if args.actors < 2:
        parser.error("--actors must be at least 2 (handoffs go between actors)")
    if args.seed is not None and args.seed < 0:
        parser.error("--seed must be non-negative")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 32)
    replay = (f"python bench/load.py --actors {args.actors} --workers {args.workers} --ops {args.ops} "
              f"--seconds {args.seconds:g} --seed {seed}")
    opening("bench/load.py")
    print(f"seed={seed}  (replay: {replay}; thread interleaving is not replayed, only every choice)", flush=True)
    from aidememo_ref import provision
    from refkit.process import ReferenceProcess, ServerStartError

    actors = [f"actor-{i}" for i in range(args.actors)]
    tokens = {actor: f"load-token-{actor}-0123456789" for actor in actors}
    book = Book()
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / "load.sqlite"
        for actor in actors:
            provision(database, tenant_id="t-load", project_id=PROJECT, actor_id=actor, token=tokens[actor],
                      project_epoch="e-load")
        try:
            server = ReferenceProcess.start(database)
        except ServerStartError as exc:
            raise SystemExit(f"error: {exc}") from None
        url = server.url
        try:
            created = httpx.post(f"{url}/v1/projects/{PROJECT}/sessions", headers={"authorization": f"Bearer {tokens[actors[0]]}"},
                                 json={"command_id": "session", "payload": {"session_id": SESSION, "topic": "load"}}, timeout=30)
            if created.status_code != 200:
                raise SystemExit(f"error: could not create the session: {created.status_code} {created.text[:200]}")
            threads = args.actors * args.workers
            per_thread = max(20, min(200, args.ops // threads))
            baseline = health_baseline(url, threads, per_thread)
            deadline = time.monotonic() + args.seconds
            workers = [Worker(url, actor, i, actors, tokens, seed, book, args.ops, deadline)
                       for actor in actors for i in range(args.workers)]
            pool = [threading.Thread(target=w.run) for w in workers]
            window, started = Window(), time.monotonic()
            for t in pool:
                t.start()
            for t in pool:
                t.join()
            elapsed = time.monotonic() - started
            alive = server.process.poll() is None
            states: Counter[str] = Counter()
            if alive:
                # Measured before and after the load and pooled: one pass alone drifts with warm-up.
                baseline += health_baseline(url, threads, per_thread)
                readers = {actor: httpx.Client(base_url=url, timeout=30, headers={"authorization": f"Bearer {token}"})
                           for actor, token in tokens.items()}
                states = audit(readers, book)
                for client in readers.values():
                    client.close()
        finally:
            server.stop()
    code = _report(args, book, baseline, elapsed, threads, states, alive, replay, window)
    closing()
    return code


def _report(args: argparse.Namespace, book: Book, baseline: list[float], elapsed: float, threads: int,
            states: Counter[str], alive: bool, replay: str, window: Window) -> int:
    """Print the run's figures against the same run's /health baseline; 1 on an unexpected error."""
    done = sum(len(v) for v in book.latencies.values())
    base_p50 = percentile(baseline, 0.5)
    print(window.mark(f"actors: {args.actors} x {args.workers} workers  operations: {done}  elapsed: {elapsed:.1f} s  "
                      f"throughput: {done / elapsed:.0f} ops/s"))
    print(window.mark(f"baseline GET /health (same run, {threads} threads): p50 {base_p50 * 1000:.2f} ms  "
                      f"p99 {percentile(baseline, 0.99) * 1000:.2f} ms"))
    print("handoffs read back: " + " ".join(f"{state} {n}" for state, n in sorted(states.items())))
    for op in ("send", "inbox", "accept", "heartbeat", "fact", "return"):
        values = book.latencies.get(op, [])
        if values:
            p50 = percentile(values, 0.5)
            print(window.mark(f"  {op:<9} n={len(values):<6} p50 {p50 * 1000:7.2f} ms  "
                              f"p99 {percentile(values, 0.99) * 1000:7.2f} ms  p50/health {p50 / base_p50:5.1f}x"))
    expected = " ".join(f"[{k}: {n}]" for k, n in sorted(book.expected.items())) or "none"
    print(f"expected errors (deliberate races): {sum(book.expected.values())}  {expected}")
    busy = " ".join(f"[{k}: {n}]" for k, n in sorted(book.busy.items()))
    print(f"busy answers sent again (503 storage_failure): {sum(book.busy.values())}  {busy}".rstrip())
    unexpected = sum(book.unexpected.values()) + (0 if alive else 1)
    detail = " ".join(f"[{k}: {n}]" for k, n in sorted(book.unexpected.items()))
    print(f"unexpected errors: {unexpected}  {detail}".rstrip() + ("" if alive else "  [server died]"))
    for example in book.examples:
        print(f"UNEXPECTED: {example}")
    if unexpected:
        print(f"replay: {replay}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
