"""Wall time of the whole suite with lease expiry waited for in real time, serially and under -n.

Prints figures, never asserts them. The target is `aidememo-ref serve` on a fresh database,
reached through its bootstrap template as an implementer's server would be, granting leases
of ``--lease-ms`` (the reference's own 120 s by default). The baseline is the serial run of the
same run; each run also prints how long its lease wait went on after the other checks (read
from its terminal lines), the machine's load and whether bytecode was cached.

    python bench/leases.py [--lease-ms 15000] [--workers 2] [--requirement AM-HL- ...]
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _conditions import closing, load, mark, opening
from refkit.process import ReferenceProcess

TEMPLATE = ("aidememo-ref bootstrap --database {database} --tenant-id {{tenant}} --project-id {{project}} "
            "--actor-id {{actor}} --token-file {{token_file}} --role {{role}}")
AFTER = re.compile(r"lease wait over after ([\d.]+) s \(([\d.]+) s of it after the other checks\)")


def _run(url: str, database: Path, workers: int | None, selection: list[str], report: Path) -> dict[str, object]:
    args = [sys.executable, "-m", "conformance.cli", "run", "--url", url, "--provision-command",
            TEMPLATE.format(database=database), "--real-time-leases", "--seed", "1",
            "--report-dir", str(report), *selection, *(["-n", str(workers)] if workers else [])]
    began = load()
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    wall = time.perf_counter() - start
    waits = AFTER.findall(done.stderr)
    verdicts = next((line for line in done.stdout.splitlines() if line.startswith("verdicts: ")), "verdicts: ?")
    return {"wall": wall, "loads": (began, load()), "waits": waits, "verdicts": verdicts.split("   ")[0], "exit": done.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease-ms", type=int, default=120_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--requirement", action="append", default=[], help="only these requirement prefixes")
    args = parser.parse_args()
    if shutil.which("aidememo-ref") is None:
        raise SystemExit("aidememo-ref is not on PATH (pip install -e .)")
    selection = [word for rid in args.requirement for word in ("--requirement", rid)]
    opening("bench/leases.py (the runs inherit this environment's bytecode setting)")
    print(f"lease {args.lease_ms} ms; selection {' '.join(args.requirement) or 'whole suite'}")
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        database = Path(workdir) / "ledger.sqlite"
        extra = ["--claim-lease-ms", str(args.lease_ms)] if args.lease_ms != 120_000 else []
        with ReferenceProcess.start(database, extra_args=extra) as server:
            for workers in (None, args.workers):
                rows.append((workers, _run(server.url, database, workers, selection, Path(workdir) / f"r{workers}")))
    serial = float(rows[0][1]["wall"])  # type: ignore[arg-type]
    for workers, row in rows:
        waits = "; ".join(f"wait {total} s, {after} s after the other checks" for total, after in row["waits"]) or (
            "no lease wait")
        began, ended = row["loads"]  # type: ignore[misc]
        print(mark(f"{'serial' if workers is None else f'-n {workers}':>7}: {row['wall']:7.1f} s  "
                   f"({float(row['wall']) / serial:.2f} of serial)  {row['verdicts']}  exit {row['exit']}  "  # type: ignore[arg-type]
                   f"{waits}", began, ended))
    closing()


if __name__ == "__main__":
    main()
