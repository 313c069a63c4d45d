"""Peak memory of a whole suite run against a server whose every answer carries a 1 MB body.

A run's memory must follow its concurrency, not the bytes it receives: once a check is judged,
each exchange keeps what its report shows (8 KiB of each body, its size). The target is the
reference on a fresh database behind a proxy that adds a 1 MB string field to every JSON object
it answers (the identity read excepted); ``aidememo-conformance run`` runs the whole AideMemo
suite against it, provisioned by the reference's bootstrap command. Prints the run's peak RSS
(the child's ``ru_maxrss``), its wall time and verdicts, the load average at start and end and
whether bytecode was cached. Prints figures, never asserts them (the goal: under 200 MB).

    python bench/hostile_memory.py [--padding-bytes 1048576] [--workers N] [CHECK ...]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.hardening import hostile  # noqa: E402  (the proxy the hostile tests use)
from tests.sim.served import bootstrap_command, served_file  # noqa: E402
from tests.targetfile import write_target  # noqa: E402

from _conditions import Window, closing, opening  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--padding-bytes", type=int, default=hostile.HUGE_BYTES,
                        help=f"bytes added to every JSON object answer (default {hostile.HUGE_BYTES})")
    parser.add_argument("--workers", help="pytest-xdist workers of the run (-n); default: one process")
    parser.add_argument("checks", nargs="*", help="checks to run (default: the whole suite)")
    args = parser.parse_args()
    hostile.HUGE_BYTES = args.padding_bytes  # read by the proxy's rewrite at each answer
    opening("bench/hostile_memory.py (the run inherits this environment's bytecode setting)")
    print(f"aidememo-conformance run against answers padded with {args.padding_bytes} bytes")
    with tempfile.TemporaryDirectory(prefix="hostile-memory-") as workdir:
        database, config = Path(workdir) / "ref.sqlite", Path(workdir) / "target.toml"
        with served_file(database, config) as url, hostile.hostile_proxy(url, "huge") as bent:
            write_target(config, bent, timeout_s=30, provision={"command": bootstrap_command(database)})
            command = [sys.executable, "-m", "conformance.cli", "run", "--config", str(config), "--seed", "1",
                       "--report-dir", str(Path(workdir) / "report"), *(["-n", args.workers] if args.workers else []),
                       *args.checks]
            window, started = Window(), time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=3600)
            wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # KiB on Linux
    verdicts = next((line for line in done.stdout.splitlines() if line.startswith("verdicts: ")), "verdicts: ?")
    print(window.mark(f"exit {done.returncode} in {wall:.1f} s; {verdicts.split('   ')[0]}"))
    print(window.mark(f"peak RSS of the run (largest process): {peak_mb:.0f} MB (goal: under 200 MB)"))
    closing()
    if done.returncode not in (0, 1):
        print(done.stderr[-2000:], file=sys.stderr)


if __name__ == "__main__":
    main()
