"""Simulator figures: checker time on generated register histories, state-machine steps/s.

Run ``python bench/sim.py [--ops 10000] [--seed 1] [--skip-machines]``. Every figure is printed
beside a trivial baseline measured in the same run on the same data, so ratios compare like with
like on whatever machine runs it. Nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from simulations.checker import Verdict, check  # noqa: E402
from simulations.history import dump_history, parse_history  # noqa: E402
from simulations.register import CAS_REGISTER, generate_history  # noqa: E402


def _baseline_s(history: list) -> float:
    """A sequential pass: serialise, parse back, and step the model once per op in call order."""
    started = time.perf_counter()
    buf = io.StringIO()
    dump_history(history, buf)
    ops = parse_history(buf.getvalue().splitlines())
    state = CAS_REGISTER.init()
    for op in ops:
        nxt = list(CAS_REGISTER.step(state, op.input, op.output))
        state = nxt[0] if nxt else state
    return time.perf_counter() - started


def bench_checker(ops: int, seed: int) -> None:
    print(f"checker: {ops}-operation cas-register histories, 8 clients, seed {seed}")
    print(f"{'keys':>5} {'history':>11} {'verdict':>8} {'check s':>9} {'baseline s':>11} {'ratio':>7}")
    for keys in (1, 100):
        for stale in (False, True):
            history = generate_history(seed=seed, operations=ops, clients=8, keys=keys, stale_read=stale)
            base = _baseline_s(history)
            started = time.perf_counter()
            result = check(CAS_REGISTER, history, budget_s=600, explain_budget_s=0)
            took = time.perf_counter() - started
            expected = Verdict.ILLEGAL if stale else Verdict.OK
            mark = "" if result.verdict is expected else f"  (expected {expected.value}!)"
            kind = "stale read" if stale else "linearizable"
            print(f"{keys:>5} {kind:>11} {result.verdict.value:>8} {took:>9.3f} {base:>11.4f} {took / base:>7.1f}x{mark}")


def bench_runner(seed: int, batches: int) -> None:
    """Concurrent batches on the embedded reference, against the same requests sent one by one."""
    from simulations.concurrency import Batch, Plan
    from simulations.runner import rerun, run_campaign

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--skip-machines", action="store_true")
    parser.add_argument("--machine-steps", type=int, default=2_000)
    args = parser.parse_args()
    bench_checker(args.ops, args.seed)
    bench_runner(args.seed, 60)
    if not args.skip_machines:
        from simulations.machines import bench_machines

        bench_machines(args.machine_steps, args.seed)


if __name__ == "__main__":
    main()
