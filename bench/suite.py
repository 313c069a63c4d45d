"""Wall time and request count of the whole conformance suite against the embedded reference.

Prints figures, never asserts them. Baselines measured in the same run: the suite's start-up
and collection alone (``--aidememo-list``) and the cost of N bare ``GET /health`` requests,
so the ratios say how much of a run is the server answering and how much is the kit.

    python bench/suite.py [--runs 3] [--workers 2] [--health 500]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, timeout=900)
    return time.perf_counter() - start, done


def _suite(workers: str | None, report: Path) -> tuple[float, int, dict[str, int]]:
    args = [sys.executable, "-m", "conformance.cli", "run", "--report-dir", str(report), "--seed", "1"]
    if workers:
        args += ["-n", workers]
    wall, done = _timed(args)
    if done.returncode != 0:
        raise SystemExit(f"suite run failed (exit {done.returncode}):\n{done.stdout[-2000:]}")
    results = json.loads((report / "results.json").read_text())
    return wall, results["requests"], results["counts"]


def _health_calls(count: int) -> float:
    from aidememo_ref import OffsetClock, ReferenceLedger

    from aidememo_ref import serve_in_thread
    from conformance.http import Wire

    with tempfile.TemporaryDirectory() as workdir:
        ledger = ReferenceLedger(str(Path(workdir) / "ledger.sqlite"), clock=OffsetClock(), test_clock=True)
        with serve_in_thread(ledger) as url:
            wire = Wire(url, timeout_s=10, max_body_bytes=1 << 20)
            wire.request(None, "GET", "/health")
            start = time.perf_counter()
            for _ in range(count):
                wire.request(None, "GET", "/health")
            elapsed = time.perf_counter() - start
            wire.close()
        ledger.close()
    return elapsed


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"bench/suite.py: {message}\n")
        raise SystemExit(2)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return int(text)


def main() -> None:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=_positive, default=3)
    parser.add_argument("--workers", default="2")
    parser.add_argument("--health", type=_positive, default=500)
    options = parser.parse_args()
    if not (options.workers.isdigit() or options.workers == "auto"):
        parser.error(f"--workers: expected a number or 'auto', got {options.workers!r}")
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        listing, _ = _timed([sys.executable, "-m", "conformance.cli", "requirements"])
        health = _health_calls(options.health)
        per_request_ms = health / options.health * 1000
        print(f"baseline: start-up + collection (aidememo-conformance requirements): {listing:.2f} s")
        print(f"baseline: {options.health} GET /health on the embedded server: {health:.2f} s "
              f"({per_request_ms:.2f} ms per request)")
        for label, workers in (("serial", None), (f"-n {options.workers}", options.workers)):
            walls = []
            for run in range(options.runs):
                wall, requests, counts = _suite(workers, base / f"{label}-{run}")
                walls.append(wall)
            median = statistics.median(walls)
            shown = ", ".join(f"{v} {n}" for v, n in counts.items() if n)
            print(f"suite {label:>5}: median {median:.2f} s over {options.runs} runs "
                  f"(min {min(walls):.2f}, max {max(walls):.2f}); {requests} requests; {shown}")
            print(f"    ratio to start-up baseline: {median / listing:.1f}x; "
                  f"requests x /health cost = {requests * per_request_ms / 1000:.2f} s of the wall time")


if __name__ == "__main__":
    main()
