#!/usr/bin/env python3
"""The XMemo reference in-process, against baselines measured in the same run.

1. Captures per second (``POST /v1/remember``: decode, schema check, auth, rules, one SQLite
   transaction) against ``GET /health`` through the same service (routing and audit id only).
2. Recall latency as the tenant grows: recall ranks every visible memory, so its cost is linear
   in what the caller may see; printed per size against the 100-memory figure, with the packet
   size to show the bounds hold.

    python bench/xmemo.py [--seconds 2] [--sizes 100,1000,5000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from aidememo_ref.xmemo import XMemoReference

KEY = "xmemo-bench-key-0123456789abcdef"
RATE_KEY = "xmemo-bench-rate-0123456789abcdef"  # another owner: the capture-rate memories stay out of recall


def headers(key: str) -> list[tuple[bytes, bytes]]:
    return [(b"x-api-key", key.encode()), (b"x-memory-os-agent-id", b"bench"), (b"content-type", b"application/json")]


HEADERS = headers(KEY)
WORDS = "deploy adapter decision transport token fix handoff redis review status timeout pool".split()


def rate(seconds: float, step: Callable[[int], None]) -> tuple[float, int]:
    """Calls per second of ``step`` over ``seconds``, and how many calls that was."""
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        step(count)
        count += 1
    return count / elapsed, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--sizes", default="100,1000,5000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        ref = XMemoReference(Path(tmp) / "bench.sqlite")
        ref.provision(owner_id="bench", key=KEY)
        ref.provision(owner_id="bench-rate", key=RATE_KEY)
        service = ref.service

        def health(i: int) -> None:
            assert service.handle("GET", "/health", HEADERS).status == 200

        def capture(i: int, who: list[tuple[bytes, bytes]] = HEADERS) -> None:
            body = json.dumps({"content": f"memory {i}: " + " ".join(WORDS[(i + k) % len(WORDS)] for k in range(8)),
                               "path": f"bench/{i % 50}", "scope": "bench"}).encode()
            assert service.handle("POST", "/v1/remember", who, body).status == 200

        health_rate, _ = rate(args.seconds, health)
        capture_rate, _ = rate(args.seconds, lambda i: capture(i, headers(RATE_KEY)))
        stored = 0
        print(f"GET /health          {health_rate:9.0f}/s  (baseline)")
        print(f"POST /v1/remember    {capture_rate:9.0f}/s  ratio to /health {capture_rate / health_rate:.3f}")
        recall = json.dumps({"query": "deployment adapter decision and current bug", "max_items": 6,
                             "max_tokens": 1200}).encode()
        first = None
        for size in sizes:
            while stored < size:
                capture(stored)
                stored += 1
            times = []
            for _ in range(max(5, int(20 * 1000 / size))):
                started = time.perf_counter()
                answer = service.handle("POST", "/v1/recall/context", HEADERS, recall)
                times.append(time.perf_counter() - started)
            packet = answer.json()
            median_ms = statistics.median(times) * 1000
            first = first or median_ms
            print(f"recall over {size:6d} memories: median {median_ms:8.2f} ms  ratio to {sizes[0]}: "
                  f"{median_ms / first:6.1f}  items {len(packet['items'])}/6  tokens "
                  f"{packet['budget']['used_tokens']}/1200")
        ref.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
