"""Simulator figures: the checker against Porcupine's, campaign rate, state-machine steps/s.

    python bench/sim.py [--ops 10000] [--seed 1] [--big-ops 100000] [--big-budget 60]
                        [--campaign 120] [--skip-big] [--skip-campaign] [--skip-machines]

Every figure is printed beside a baseline measured in the same run on the same data, so
ratios compare like with like on a loaded machine. The checker's times are also set against
the Porcupine times quoted in issue 13 (measured on this kind of machine, on histories of
this shape); when ``go`` is on PATH and ``PORCUPINE_SRC`` names a Porcupine checkout, each
history is also checked by Porcupine itself, side by side (never in CI). Nothing here asserts
a time.

Histories are generated the way Porcupine's users record them (``register.generate_history``):
8 clients against a locked register per key, uniform read/write/cas over values 0..4, every key
starting at 0; one key and 100 keys; linearizable, with a planted stale read, with a planted
double cas.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulations.checker import Verdict, check  # noqa: E402
from simulations.history import Header, Operation, dump_history, parse_history  # noqa: E402
from simulations.register import CAS_REGISTER, Plant, generate_history  # noqa: E402

# Porcupine on the histories (issue 13): seconds per history.
PORCUPINE_QUOTED = {
    (1, None): 0.14,
    (1, Plant.STALE_READ): 1.6,
    (1, Plant.DOUBLE_CAS): 2.2,
    (100, None): 0.016,
}
MODEL = CAS_REGISTER.with_init(0)
HEADER = Header(model="cas-register", init=0, has_init=True)


def _best(runs: int, work: object, spend_s: float = 1.0) -> tuple[float, object, float]:
    """Best wall time of ``runs`` or more, the result, and the best CPU time (this process's):
    on a shared machine the CPU time is what compares with figures taken on an idle one. Quick
    work is repeated until ``spend_s`` seconds went by (at most 30 runs), since one neighbour's
    burst can double a 30 ms figure."""
    times: list[float] = []
    cpus: list[float] = []
    result = None
    spent = 0.0
    while len(times) < runs or (spent < spend_s and len(times) < 30):
        gc.collect()  # each run starts from the same heap, not from the garbage of the one before
        started, cpu = time.perf_counter(), time.process_time()
        result = work()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        spent += times[-1]
    return min(times), result, min(cpus)


def _text(history: list[Operation]) -> str:
    buf = io.StringIO()
    dump_history(history, buf, HEADER)
    return buf.getvalue()


def _baseline(text: str) -> None:
    """A sequential pass: parse the file's text, step the model once per op in call order."""
    _, ops = parse_history(text.splitlines())
    state = MODEL.init()
    for op in ops:
        nxt = MODEL.step(state, op.input, op.output)
        state = next(iter(nxt), state)


def _porcupine_runner() -> Path | None:
    source = os.environ.get("PORCUPINE_SRC")
    if not source or shutil.which("go") is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="porcupine-bench-"))
    shutil.copy(Path(__file__).with_name("porcupine") / "main.go", work / "main.go")
    (work / "go.mod").write_text(
        "module porcupinebench\n\ngo 1.18\n\nrequire github.com/anishathalye/porcupine v0.0.0\n\n"
        f"replace github.com/anishathalye/porcupine => {Path(source).resolve()}\n")
    done = subprocess.run(["go", "build", "-o", "bench", "."], cwd=work, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"(cannot build the Porcupine runner: {done.stderr.strip()[:300]})")
        return None
    return work / "bench"


def _porcupine(runner: Path, path: Path, timeout_s: float) -> str:
    done = subprocess.run([str(runner), str(path), str(timeout_s)], capture_output=True, text=True,
                          timeout=timeout_s * 3 + 60)
    if done.returncode != 0:
        return f"failed: {done.stderr.strip()[:80]}"
    doc = json.loads(done.stdout)
    return f"{doc['verdict'].lower()} {doc['seconds']:.3f} s"


def bench_checker(ops: int, seed: int, runs: int) -> None:
    runner = _porcupine_runner()
    print(f"checker: {ops}-operation cas-register histories, 8 clients, values 0..4, init 0, seed {seed}; "
          f"best of {runs} or more (up to 30 within a second)")
    print("  (baseline: parse the file and step the model once per op; 'search': the pre-pass off; "
          "'CPU s': the check's CPU time, which 'x Porcupine' uses: Porcupine's figures are from an idle machine)")
    head = (f"{'keys':>5} {'history':>12} {'verdict':>8} {'check s':>8} {'CPU s':>7} {'search s':>9} "
            f"{'baseline s':>10} {'x base':>7} {'Porcupine (issue)':>18} {'x Porcupine':>11}")
    print(head + ("   Porcupine here" if runner else ""))
    search_only = replace(MODEL, refute=None)
    work = Path(tempfile.mkdtemp(prefix="sim-bench-"))
    for keys in (1, 100):
        for plant in (None, Plant.STALE_READ, Plant.DOUBLE_CAS):
            history = generate_history(seed=seed, operations=ops, clients=8, keys=keys, plant=plant)
            text = _text(history)
            path = work / f"k{keys}-{plant or 'ok'}.jsonl"
            path.write_text(text)
            base, _, _ = _best(runs, lambda: _baseline(text))
            took, result, cpu = _best(runs, lambda: check(MODEL, history, budget_s=600, explain_budget_s=0))
            searched, plain, _ = _best(runs, lambda: check(search_only, history, budget_s=600, explain_budget_s=0))
            expected = Verdict.OK if plant is None else Verdict.ILLEGAL
            verdict = result.verdict  # type: ignore[attr-defined]
            mark = "" if verdict is expected and plain.verdict is expected else f" (expected {expected.value}!)"  # type: ignore[attr-defined]
            quoted = PORCUPINE_QUOTED.get((keys, plant))
            versus = f"{cpu / quoted:>10.2f}x" if quoted else f"{'-':>11}"
            line = (f"{keys:>5} {plant or 'linearizable':>12} {verdict.value:>8} {took:>8.3f} {cpu:>7.3f} "
                    f"{searched:>9.3f} {base:>10.4f} {took / base:>6.1f}x {quoted if quoted else '-':>18} {versus}")
            if runner:
                line += "   " + _porcupine(runner, path, 600)
            print(line + mark, flush=True)
    shutil.rmtree(work, ignore_errors=True)


_BIG = """
import resource, sys, time
from simulations.checker import check
from simulations.register import CAS_REGISTER, generate_history
ops, clients, seed, budget = (int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]))
history = generate_history(seed=seed, operations=ops, clients=clients, keys=1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started, cpu = time.perf_counter(), time.process_time()
result = check(CAS_REGISTER.with_init(0), history, budget_s=budget, explain_budget_s=0)
took, cpu = time.perf_counter() - started, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(result.verdict.value, took, cpu, before, peak, result.detail)
"""


def bench_big(ops: int, budget_s: float, seed: int) -> None:
    """One key, 16 clients, ``ops`` operations: where Porcupine ran out of memory."""
    done = subprocess.run([sys.executable, "-c", _BIG, str(ops), "16", str(seed), str(budget_s)],
                          capture_output=True, text=True, timeout=budget_s * 4 + 300,
                          cwd=Path(__file__).resolve().parent.parent)
    if done.returncode != 0:
        print(f"big history: the checker failed: {done.stderr.strip()[-500:]}")
        return
    verdict, took, cpu, before, peak, *detail = done.stdout.split(maxsplit=5)
    # ru_maxrss is in KiB on Linux.
    print(f"big history: {ops} operations, 1 key, 16 clients, budget {budget_s:g} s: verdict {verdict.upper()} "
          f"in {float(took):.1f} s ({float(cpu):.1f} s CPU); peak RSS {int(peak) / 1024:.0f} MB (the history alone: "
          f"{int(before) / 1024:.0f} MB){' - ' + detail[0].strip() if detail else ''}. "
          f"Porcupine (issue): Unknown after 60 s at 17 GB.")


def bench_runner(seed: int, batches: int) -> None:
    """Concurrent batches on the embedded reference, against the same requests sent one by one."""
    from simulations.campaign import rerun, run_campaign
    from simulations.plan import Batch, Plan

    result = run_campaign(seed=seed, max_batches=batches, budget_s=600)
    started = time.perf_counter()
    again = rerun(result.plan, result.seed, schedule=result.decisions)
    took = time.perf_counter() - started
    one_by_one = Plan(actors=result.plan.actors, workers=result.plan.workers,
                      batches=tuple(Batch(clock_ms=b.clock_ms, ops=(op,)) for b in result.plan.batches for op in b.ops))
    started = time.perf_counter()
    rerun(one_by_one, result.seed)
    base = time.perf_counter() - started
    n = len(again.history)
    print(f"runner: {n} operations in {batches} concurrent batches, seeded scheduler, checked: {n / took:.0f} ops/s; "
          f"the same requests one per batch (baseline): {n / base:.0f} ops/s; ratio {took / base:.2f}x; "
          f"verdict {again.verdict.value}")


def bench_campaign(seconds: float, seed: int) -> None:
    """A long campaign's rate over its first and its last tenth (incremental checking)."""
    from simulations.campaign import run_campaign

    stamps: list[tuple[float, int]] = []
    result = run_campaign(seed=seed, budget_s=seconds, on_batch=lambda at, total: stamps.append((at, total)))
    if len(stamps) < 20:
        print(f"campaign: only {len(stamps)} batches in {seconds:g} s; too few to compare tenths")
        return
    end = stamps[-1][0]

    def rate(lo: float, hi: float) -> float:
        inside = [(t, n) for t, n in stamps if lo <= t <= hi]
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / max(t1 - t0, 1e-9)

    first, last = rate(0, end / 10), rate(end * 9 / 10, end)
    print(f"campaign: seed {seed}, {seconds:g} s, {len(result.history)} operations in {len(stamps)} batches, "
          f"verdict {result.verdict.value}: first tenth {first:.0f} ops/s, last tenth {last:.0f} ops/s, "
          f"last/first {last / first:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3, help="best of N for each checker time")
    parser.add_argument("--big-ops", type=int, default=100_000)
    parser.add_argument("--big-budget", type=float, default=60.0)
    parser.add_argument("--campaign", type=float, default=120.0, metavar="SECONDS")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--skip-campaign", action="store_true")
    parser.add_argument("--skip-machines", action="store_true")
    parser.add_argument("--machine-steps", type=int, default=2_000)
    args = parser.parse_args()
    bench_checker(args.ops, args.seed, args.runs)
    if not args.skip_big:
        bench_big(args.big_ops, args.big_budget, args.seed)
    bench_runner(args.seed, 60)
    if not args.skip_campaign:
        bench_campaign(args.campaign, 7)
    if not args.skip_machines:
        from simulations.machines.bench import bench_machines

        bench_machines(args.machine_steps, args.seed)


if __name__ == "__main__":
    main()
