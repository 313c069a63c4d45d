"""The checker on a long history, timed as a user waits for it (issue 40's row).

    python bench/checker.py [--ops 1000000] [--clients 16] [--seed 1] [--runs 1] [--budget SECONDS]

Generates a linearizable one-key history with the project's generator (``register.generate_history``:
``--clients`` clients against a locked register, uniform read/write/cas over values 0..4, starting
at 0), writes it to a temporary file and runs ``aidememo-sim check FILE --model cas-register
--init 0`` on it in a subprocess, ``--runs`` times. For each run: the verdict line, the wall time,
the CPU time and the peak RSS of the command (``wait4``, as ``/usr/bin/time`` reads them), with the load
average at its start and end and whether the kit's bytecode was cached. The machine may be
shared: on 2 cores a figure taken at load above 1 is marked, and CPU time is the figure that
load disturbs least. Nothing here asserts a time. The goal (issue 40): 1,000,000 operations,
16 clients, OK within 20 s and under 300 MB.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulations.linearizability import native  # noqa: E402
from simulations.linearizability.history import Header, dump_history  # noqa: E402
from simulations.linearizability.register import generate_history  # noqa: E402

BUSY_LOAD = 1.0  # on this 2-core machine, above this another job shares the cores
PACKAGE = ROOT / "simulations" / "linearizability"


def load_average() -> str:
    """The 1-minute load average, marked when the machine was busy."""
    load = os.getloadavg()[0]
    return f"{load:.2f}" + (" (busy: above 1)" if load > BUSY_LOAD else "")


def bytecode() -> str:
    """Whether the checker's modules load from cached bytecode in the command this runs."""
    cached = any((PACKAGE / "__pycache__").glob("checker.*.pyc"))
    unwritten = sys.dont_write_bytecode or bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
    if cached:
        return "bytecode cached: yes"
    return "bytecode cached: no" + (" (PYTHONDONTWRITEBYTECODE set: bytecode not cached)" if unwritten else "")


def _command(path: Path, budget: float | None) -> list[str]:
    """``aidememo-sim`` as installed beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("aidememo-sim")
    start = [str(script)] if script.exists() else [sys.executable, "-m", "simulations.cli"]
    extra = [] if budget is None else ["--budget", f"{budget:g}"]
    return start + ["check", str(path), "--model", "cas-register", "--init", "0", *extra]


def _write(path: Path, ops: int, clients: int, seed: int) -> float:
    started = time.perf_counter()
    history = generate_history(seed=seed, operations=ops, clients=clients, keys=1)
    with path.open("w", encoding="utf-8") as out:
        dump_history(history, out, Header(model="cas-register", init=0, has_init=True))
    return time.perf_counter() - started


def run_once(command: list[str]) -> tuple[int, str, float, float, int, str, str]:
    """(exit code, first line printed, wall s, CPU s, peak RSS in KiB, load at start, at end) of one
    run; CPU and peak RSS are the command's own (``wait4``), whatever ran before it."""
    at_start = load_average()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        _, status, usage = os.wait4(child.pid, 0)
        took = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        line = (out.read().decode("utf-8", "replace").strip().splitlines() or [""])[0]
    return (child.returncode, line, took, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, at_start,
            load_average())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--budget", type=float, default=None, help="passed to the command (its default: 60 s)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-checker-") as work:
        path = Path(work) / "history.jsonl"
        generated = _write(path, args.ops, args.clients, args.seed)
        command = _command(path, args.budget)
        kernel = "built" if native.available() else "not built: pure path"
        print(f"history: {args.ops} operations, 1 key, {args.clients} clients, seed {args.seed}, "
              f"{path.stat().st_size / 1e6:.0f} MB, generated in {generated:.1f} s; compiled kernel {kernel}; "
              f"{bytecode()}")
        print(f"command: {' '.join(command)}")
        for number in range(1, args.runs + 1):
            code, line, took, used, peak, at_start, at_end = run_once(command)
            print(f"run {number}: exit {code}: {line}")
            print(f"  wall {took:.1f} s, CPU {used:.1f} s, peak RSS {peak / 1024:.0f} MB; "
                  f"load {at_start} at start, {at_end} at end")


if __name__ == "__main__":
    main()
