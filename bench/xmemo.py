#!/usr/bin/env python3
"""The XMemo reference in-process, against baselines measured in the same run.

1. Captures per second (``POST /v1/remember`` through ``XMemoService.handle``: headers, JSON,
   schema check, key, rules, one SQLite transaction, the answer) against raw one-row SQLite
   transactions on the same disk and pragmas (``BEGIN IMMEDIATE``, one ``INSERT`` of a two-column
   row, ``COMMIT``: ``bench/ledger.py``'s baseline), and ``GET /health`` through the same service,
   run in interleaved turns of 250 so that load from other work hits all three alike.
2. Recall latency (``POST /v1/recall/context``, the seed's query and bounds) as the tenant grows,
   without a scope and with the one its captures carry (as the published clients send it): the
   median of repeated recalls per size against the smallest size's, with the packet's items and
   tokens to show the bounds hold, and the first recall after each batch of captures apart (it
   brings the recall index up to date with them).

    python bench/xmemo.py [--seconds 3] [--sizes 100,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

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


def capture_steps(tmp: Path) -> dict[str, "callable[[int], None]"]:  # type: ignore[valid-type]
    ref = XMemoReference(tmp / "rate.sqlite")
    ref.provision(owner_id="bench-rate", key=RATE_KEY)
    service, sent = ref.service, headers(RATE_KEY)
    bodies: dict[int, bytes] = {}

    def capture(i: int) -> None:
        assert service.handle("POST", "/v1/remember", sent, bodies.pop(i)).status == 200

    def health(i: int) -> None:
        assert service.handle("GET", "/health", sent).status == 200

    capture.prepare = lambda start, count: bodies.update(  # type: ignore[attr-defined]
        (i, body(i)) for i in range(start, start + count))
    return {"raw": raw_sqlite_step(tmp / "raw.sqlite"), "capture": capture, "health": health}


def recall_medians(tmp: Path, sizes: list[int]) -> None:
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
            print(f"recall over {size:7,d} memories, scope {scope or '-':5}: median {median_ms:7.2f} ms | "
                  f"ratio to {sizes[0]:,}: {median_ms / base:5.2f} | items {len(packet['items'])}/6, "
                  f"tokens {packet['budget']['used_tokens']}/1200, candidates {packet['coverage']['candidates']:,} "
                  f"| first recall after the captures {catch_up:8.1f} ms")
    ref.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--sizes", default="100,10000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    cached = "not written (PYTHONDONTWRITEBYTECODE)" if sys.dont_write_bytecode else "written and reused"
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs, bytecode {cached} "
          "(ratios are same-run; absolute rates move with load)")
    with tempfile.TemporaryDirectory() as tmp:
        rates = interleaved(capture_steps(Path(tmp)), args.seconds)
        (raw, raw_cpu), (ours, ours_cpu), (health, _) = rates["raw"], rates["capture"], rates["health"]
        print(f"POST /v1/remember: {ours:8.0f} captures/s | raw SQLite one-row transactions: {raw:8.0f}/s | "
              f"ratio {ours / raw:.2f} (cpu {ours_cpu:.0f} vs {raw_cpu:.0f} us) | GET /health {health:8.0f}/s")
        recall_medians(Path(tmp), sizes)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory {peak:.0f} MiB (both references and the baseline's file)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
