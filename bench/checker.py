"""The checker on a long history, timed as a user waits for it (issue 40's row).

    python bench/checker.py [--ops 1000000] [--clients 16] [--seed 1] [--runs 1] [--budget SECONDS]
                            [--baseline DIR]

Generates a linearizable one-key history with the project's generator (``register.generate_history``:
``--clients`` clients against a locked register, uniform read/write/cas over values 0..4, starting
at 0), writes it to a temporary file and runs ``aidememo-sim check FILE --model cas-register
--init 0`` on it in a subprocess, ``--runs`` times. ``--baseline DIR`` also runs the command with
the kit of another checkout (``PYTHONPATH=DIR``, e.g. ``git worktree add DIR REV`` with its kernel
built), alternating with this one: a baseline measured in the same run, on the same file. For each run: the verdict line, the wall time,
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


def _write(path: Path, ops: int, clients: int, seed: int) -> None:
    history = generate_history(seed=seed, operations=ops, clients=clients, keys=1)
    with path.open("w", encoding="utf-8") as out:
        dump_history(history, out, Header(model="cas-register", init=0, has_init=True))


def _generate(path: Path, ops: int, clients: int, seed: int) -> float:
    """The history written by a process of its own: a child's peak RSS counts its parent's at the
    fork, so this one must never hold the history (a million operations: 500 MB)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--ops", str(ops), "--clients", str(clients), "--seed", str(seed),
                    "--write", str(path)], check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return time.perf_counter() - started


def run_once(command: list[str], kit: Path) -> tuple[int, str, float, float, int, str, str]:
    """(exit code, first line printed, wall s, CPU s, peak RSS in KiB, load at start, at end) of one
    run; CPU and peak RSS are the command's own (``wait4``), whatever ran before it."""
    at_start = load_average()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                 env={**os.environ, "PYTHONPATH": str(kit)})
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
    parser.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                        help="another checkout of the kit, run alternately with this one")
    parser.add_argument("--write", type=Path, default=None, help=argparse.SUPPRESS)  # _generate's child
    args = parser.parse_args()
    if args.write is not None:
        _write(args.write, args.ops, args.clients, args.seed)
        return
    with tempfile.TemporaryDirectory(prefix="bench-checker-") as work:
        path = Path(work) / "history.jsonl"
        generated = _generate(path, args.ops, args.clients, args.seed)
        command = _command(path, args.budget)
        kernel = "built" if native.available() else "not built: pure path"
        print(f"history: {args.ops} operations, 1 key, {args.clients} clients, seed {args.seed}, "
              f"{path.stat().st_size / 1e6:.0f} MB, generated in {generated:.1f} s; compiled kernel {kernel}; "
              f"{bytecode()}")
        print(f"command: {' '.join(command)}")
        kits = [("this checkout", ROOT)] + ([("baseline " + str(args.baseline), args.baseline)] if args.baseline else [])
        for number in range(1, args.runs + 1):
            for name, kit in kits:
                code, line, took, used, peak, at_start, at_end = run_once(command, kit)
                print(f"run {number}, {name}: exit {code}: {line}")
                print(f"  wall {took:.1f} s, CPU {used:.1f} s, peak RSS {peak / 1024:.0f} MB; "
                      f"load {at_start} at start, {at_end} at end", flush=True)


if __name__ == "__main__":
    main()
