#!/usr/bin/env python3
"""The XMemo reference in-process, against baselines measured in the same run.

1. Captures per second (``POST /v1/remember`` through ``XMemoService.handle``: headers, JSON,
   schema check, key, rules, one SQLite transaction, the answer) against raw one-row SQLite
   transactions on the same disk and pragmas (``BEGIN IMMEDIATE``, one ``INSERT`` of a two-column
   row, ``COMMIT``: ``bench/ledger.py``'s baseline), and ``GET /health`` through the same service,
   run in interleaved turns of 250 so that load from other work hits all alike. Two kinds of
   capture: the single body (eight of twelve words, ``path`` and ``scope``) that recall below
   reads, and a mix shaped like the published clients' captures (``MIX``, drawn from a seed per
   index): content of 2 to 80 words from a vocabulary of about a hundred, so 10 to about 600
   characters, and
   * 40% as the Hermes plugin sends them (``hermes_xmemo`` ``XMemoClient.remember``): ``path``,
     ``bucket`` "work", ``scope`` "hermes/default", ``memory_type`` "semantic", ``dedupe``; a
     quarter of them with ``importance`` and a ``semantic_key``;
   * 30% as OpenClaw's auto-capture (``xmemo-protocol.md``, "auto-capture"): ``memory_type``
     "auto", ``importance`` 0.7, ``source`` "openclaw-auto-capture", ``metadata.category``, with a
     ``path`` and ``scope``;
   * 30% as the Agent Framework host's capture (``xmemo_agent_framework.capture``), to
     ``/api/v1/remember``: ``path`` "capture/<project>", ``bucket`` "work", ``scope``
     "tenant:project:<id>", ``source``, ``semantic_key`` "maf-capture:<sha256>", ``dedupe`` and
     ``metadata.capture`` (run and session ids, source ids, time, receipts, idempotency key).
2. Recall latency (``POST /v1/recall/context``, the seed's query and bounds) as the tenant grows,
   without a scope and with the one its captures carry (as the published clients send it): the
   median of repeated recalls per size against the smallest size's, with the packet's items and
   tokens to show the bounds hold, and the first recall after each batch of captures apart (it
   brings the recall index up to date with them).

3. With ``--instructions``: instructions per capture, of each kind, counted by valgrind's
   cachegrind, which no other work on the machine moves: the difference between a run of 2,500
   captures and one of 500 (each after 300 captures of the same kind, the bodies built before
   either, no interpreter teardown, string hashing seeded alike), divided by 2,000; beside it, the
   raw one-row transaction's.
   Those are the figures ``xmemo_ref/_hot.py``'s shortcuts are held to.

    python bench/xmemo.py [--seconds 3] [--sizes 100,10000,100000] [--instructions]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from _conditions import Window, closing, opening
from ledger import interleaved, raw_sqlite_step

from xmemo_ref import XMemoReference

KEY = "xmemo-bench-key-0123456789abcdef"
RATE_KEY = "xmemo-bench-rate-0123456789abcdef"  # another owner: the capture-rate memories stay out of recall
WORDS = "deploy adapter decision transport token fix handoff redis review status timeout pool".split()


def headers(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-api-key", key.encode()), (b"x-memory-os-agent-id", b"bench"), (b"content-type", b"application/json")]


def body(i: int) -> bytes:
    """A memory of eight of the twelve words: every recall's query shares two words with most of them."""
    return json.dumps({"content": f"memory {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8)),
                       "path": f"bench/{i % 50}", "scope": "bench"}).encode()


VOCABULARY = tuple("""deploy adapter decision transport token fix handoff redis review status timeout pool
    the a to of and in for on with we it is was that this user prefers always never use uses
    build test release branch merge commit rollback migration schema index query cache latency
    retry queue worker cron job api endpoint auth key scope session agent memory recall capture
    bug root cause because after before when staging production config flag feature team owner
    ticket issue docs readme python typescript rust postgres sqlite docker kubernetes ci pipeline
    cluster node region backup restore error warning log metric alert dashboard incident""".split())
MIX = (("hermes", 0.4), ("openclaw", 0.3), ("maf", 0.3))  # the clients' shares of the captures
CATEGORIES = ("preference", "decision", "entity", "fact", "other")
MAF_PROJECT = "bench-project"  # the capture key's project: the host's scope must name it


def _content(rng: random.Random) -> str:
    """2 to 80 words, short ones commonest (a note or a preference) and some a paragraph long."""
    words = min(80, max(2, int(rng.expovariate(1 / 18))))
    return " ".join(rng.choice(VOCABULARY) for _ in range(words))


def mixed(i: int) -> tuple[str, bytes]:
    """(path, body) of the i-th capture of the clients' mix (``MIX``), the same for the same i."""
    rng = random.Random(i)
    client = rng.choices([name for name, _ in MIX], [share for _, share in MIX])[0]
    content, project = _content(rng), f"proj-{rng.randrange(8)}"
    if client == "hermes":
        sent: dict[str, object] = {"content": content, "path": f"hermes/{project}", "bucket": "work",
                                   "scope": "hermes/default", "memory_type": "semantic", "dedupe": True}
        if rng.random() < 0.25:
            sent.update(importance=0.8, semantic_key=f"hermes:{project}:{i}")
        return "/v1/remember", json.dumps(sent).encode()
    if client == "openclaw":
        return "/v1/remember", json.dumps({
            "content": content, "path": f"openclaw/{project}", "scope": "openclaw/main", "memory_type": "auto",
            "importance": 0.7, "source": "openclaw-auto-capture",
            "metadata": {"category": rng.choice(CATEGORIES)}}).encode()
    key = hashlib.sha256(f"{MAF_PROJECT}:{i}:{content}".encode()).hexdigest()
    return "/api/v1/remember", json.dumps({
        "content": content, "path": f"capture/{MAF_PROJECT}", "bucket": "work",
        "scope": f"tenant:project:{MAF_PROJECT}",
        "source": "maf-agent", "semantic_key": f"maf-capture:{key}", "dedupe": True,
        "metadata": {"capture": {"run_id": f"run-{i}", "session_id": f"session-{i // 10}",
                                 "source_ids": [f"msg-{i}"], "occurred_at": "2026-01-02T03:04:05+00:00",
                                 "server_receipts": ["identity", "project-context"], "idempotency_key": key}},
    }).encode()


def mix_shares(count: int = 10_000) -> str:
    """The mix as drawn: each client's share and the content's length, over the first ``count``."""
    drawn = [mixed(i) for i in range(count)]
    lengths = sorted(len(json.loads(sent)["content"]) for _, sent in drawn)
    metadata = sum(1 for _, sent in drawn if b'"metadata"' in sent)
    return (f"Hermes {MIX[0][1]:.0%}, OpenClaw auto-capture {MIX[1][1]:.0%}, Agent Framework {MIX[2][1]:.0%}; "
            f"content {lengths[0]}-{lengths[-1]} chars (median {lengths[len(lengths) // 2]}); "
            f"{metadata / count:.0%} with metadata")


def capture_steps(tmp: Path) -> dict[str, "callable[[int], None]"]:  # type: ignore[valid-type]
    ref = XMemoReference(tmp / "rate.sqlite")
    ref.provision(owner_id="bench-rate", key=RATE_KEY, project_id=MAF_PROJECT)
    service, sent = ref.service, headers(RATE_KEY)
    bodies: dict[int, bytes] = {}
    mix: dict[int, tuple[str, bytes]] = {}

    def capture(i: int) -> None:
        assert service.handle("POST", "/v1/remember", sent, bodies.pop(i)).status == 200

    def capture_mix(i: int) -> None:
        path, sent_body = mix.pop(i)
        answer = service.handle("POST", path, sent, sent_body)
        assert answer.status == 200, answer.body

    def health(i: int) -> None:
        assert service.handle("GET", "/health", sent).status == 200

    capture.prepare = lambda start, count: bodies.update(  # type: ignore[attr-defined]
        (i, body(i)) for i in range(start, start + count))
    capture_mix.prepare = lambda start, count: mix.update(  # type: ignore[attr-defined]
        (i, mixed(i)) for i in range(start, start + count))
    return {"raw": raw_sqlite_step(tmp / "raw.sqlite"), "capture": capture, "mix": capture_mix, "health": health}


def recall_medians(tmp: Path, sizes: list[int], window: Window) -> None:
    ref = XMemoReference(tmp / "recall.sqlite")
    ref.provision(owner_id="bench", key=KEY)
    service, sent = ref.service, headers(KEY)
    recalls = {scope: json.dumps({"query": "deployment adapter decision and current bug", "max_items": 6,
                                  "max_tokens": 1200, **({"scope": scope} if scope else {})}).encode()
               for scope in (None, "bench")}
    first: dict[str | None, float] = {}
    stored = 0
    for size in sizes:
        while stored < size:
            assert service.handle("POST", "/v1/remember", sent, body(stored)).status == 200
            stored += 1
        for scope, recall in recalls.items():
            began = time.perf_counter()
            service.handle("POST", "/v1/recall/context", sent, recall)
            catch_up = (time.perf_counter() - began) * 1000
            times = []
            for _ in range(25):
                began = time.perf_counter()
                answer = service.handle("POST", "/v1/recall/context", sent, recall)
                times.append(time.perf_counter() - began)
            packet = answer.json()
            median_ms = statistics.median(times) * 1000
            base = first.setdefault(scope, median_ms)
            print(window.mark(f"recall over {size:7,d} memories, scope {scope or '-':5}: median {median_ms:7.2f} ms | "
                              f"ratio to {sizes[0]:,}: {median_ms / base:5.2f} | items {len(packet['items'])}/6, "
                              f"tokens {packet['budget']['used_tokens']}/1200, "
                              f"candidates {packet['coverage']['candidates']:,} "
                              f"| first recall after the captures {catch_up:8.1f} ms"))
    ref.close()


COUNTED: Final = (500, 2_500)  # captures in the two counted runs (after WARM_UP); their difference is divided
WARM_UP: Final = 300


def _counted_run(kind: str, count: int) -> None:
    """The child valgrind counts: ``count`` steps of ``kind`` after the warm-up, then an exit
    without teardown (freeing every memory would count too)."""
    with tempfile.TemporaryDirectory() as tmp:
        steps = capture_steps(Path(tmp))
        step = steps[kind]
        prepare = getattr(step, "prepare", None)
        if prepare is not None:
            prepare(0, WARM_UP + COUNTED[-1])
        for i in range(WARM_UP):
            step(i)
        for i in range(WARM_UP, WARM_UP + count):
            step(i)
        sys.stdout.flush()
        os._exit(0)


def instructions() -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        print("bench/xmemo.py: --instructions needs valgrind on PATH", file=sys.stderr)
        return 2
    counts: dict[str, list[int]] = {}
    for kind in ("raw", "capture", "mix"):
        for count in COUNTED:
            done = subprocess.run([valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                                   sys.executable, __file__, "--counted-run", kind, str(count)],
                                  capture_output=True, text=True, check=False,
                                  env={**os.environ, "PYTHONHASHSEED": "0"})  # the same dict layouts every run
            found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
            if done.returncode != 0 or found is None:
                print(f"bench/xmemo.py: the counted run of {kind} failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
                return 1
            counts.setdefault(kind, []).append(int(found.group(1).replace(",", "")))
    per = {kind: (runs[1] - runs[0]) / (COUNTED[1] - COUNTED[0]) for kind, runs in counts.items()}
    for kind, label in (("capture", "single body"), ("mix", "clients' mix")):
        print(f"instructions per capture, {label}: {per[kind]:9,.0f} | raw SQLite one-row transaction: "
              f"{per['raw']:7,.0f} | ratio {per['raw'] / per[kind]:.2f} (cachegrind, {COUNTED[1]:,} minus "
              f"{COUNTED[0]:,} after {WARM_UP}: no load moves it)")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per capture under valgrind instead of timing")
    parser.add_argument("--counted-run", nargs=2, metavar=("KIND", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.counted_run:
        _counted_run(args.counted_run[0], int(args.counted_run[1]))
    if args.instructions:
        opening("bench/xmemo.py --instructions")
        print(f"capture mix: {mix_shares()}", flush=True)
        result = instructions()
        closing()
        return result
    sizes = [int(s) for s in args.sizes.split(",")]
    opening("bench/xmemo.py (ratios are same-run; absolute rates move with load)")
    print(f"capture mix: {mix_shares()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        window = Window()
        rates = interleaved(capture_steps(Path(tmp)), args.seconds)
        (raw, raw_cpu), (health, _) = rates["raw"], rates["health"]
        for name, label in (("capture", "POST /v1/remember, single body"), ("mix", "POST /v1/remember, clients' mix")):
            ours, ours_cpu = rates[name]
            print(window.mark(f"{label}: {ours:8.0f} captures/s | raw SQLite one-row transactions: {raw:8.0f}/s | "
                              f"ratio {ours / raw:.2f} (cpu {ours_cpu:.0f} vs {raw_cpu:.0f} us: "
                              f"{raw_cpu / ours_cpu:.2f}) | GET /health {health:8.0f}/s"))
        window = Window()
        recall_medians(Path(tmp), sizes, window)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory {peak:.0f} MiB (both references and the baseline's file)")
    closing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
