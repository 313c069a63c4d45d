#!/usr/bin/env python3
"""Instructions per operation of ``bench/ledger.py``'s SQLite steps, counted by valgrind.

A count no other work on the machine can move, unlike the rates and CPU times ``bench/ledger.py``
prints: each step runs under ``valgrind --tool=cachegrind`` twice, ``--small`` and ``--large``
operations after 300 of warm-up, with every request body built before either, and the
difference of the two totals divided by the difference of the counts is what one operation
costs (start-up, imports and warm-up cancel out). ``docs/hardening.md`` quotes these figures.
Valgrind runs no CPU's SHA extensions, so SHA-256 counts more here than it costs.

    python bench/instructions.py [--steps ours,general,raw] [--small 500] [--large 2500]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

STEPS = ("ours", "general", "raw", "least", "store", "handling")
_TOTAL = re.compile(r"I\s+refs:\s+([\d,]+)")


def run_step(name: str, count: int, prepared: int) -> None:
    """Run ``count`` operations of one of ``bench/ledger.py``'s steps after a warm-up (the child side)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import ledger

    make = {"ours": ledger.in_process_step, "general": ledger.general_step, "raw": ledger.raw_sqlite_step,
            "least": ledger.least_write_step, "store": ledger.store_path_step, "handling": ledger.handling_step}[name]
    with tempfile.TemporaryDirectory() as tmp:
        step = make(Path(tmp) / "bench.sqlite")
        prepare = getattr(step, "prepare", None)
        if prepare is not None:
            prepare(0, 300 + prepared)  # every body before the count starts, the same in both runs
        for i in range(300 + count):
            step(i)


def instructions(name: str, count: int, prepared: int) -> int:
    """Valgrind's instruction total for a run of ``count`` operations of step ``name``."""
    done = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                           sys.executable, __file__, "--child", name, str(count), str(prepared)],
                          capture_output=True, text=True, check=False)
    found = _TOTAL.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"error: valgrind run of {name} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        run_step(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", default="ours,general,raw")
    parser.add_argument("--small", type=int, default=500)
    parser.add_argument("--large", type=int, default=2500)
    args = parser.parse_args()
    steps = args.steps.split(",")
    if not set(steps) <= set(STEPS) or not 0 <= args.small < args.large:
        parser.error(f"--steps takes some of {','.join(STEPS)}; --small must be below --large")
    if shutil.which("valgrind") is None:
        print("error: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        return 2
    for name in steps:
        small, large = (instructions(name, count, args.large) for count in (args.small, args.large))
        print(f"sqlite     {name}: {(large - small) / (args.large - args.small):,.0f} instructions per operation "
              f"(cachegrind, {args.large} minus {args.small} operations)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
