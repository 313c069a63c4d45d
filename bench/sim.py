"""Simulator figures: the checker against Porcupine, campaign rate, state-machine steps/s.

    python bench/sim.py [--ops 10000] [--seed 1] [--runs 7] [--ours 3] [--big-ops 100000] [--big-budget 60]
                        [--pure] [--campaign 120] [--workers-budget 20] [--skip-big] [--skip-campaign]
                        [--skip-workers] [--skip-checker] [--skip-machines]

Every figure is printed beside a baseline measured in the same run on the same data, so
ratios compare like with like on a loaded machine. The checker is timed as a user waits for it:
the whole ``aidememo-sim check FILE --model cas-register --init 0``, minus the same command on a
one-operation history (its start-up) run just before it, the median over ``--runs`` x ``--ours``
passes (a process's start-up varies by more than a short check takes, so ours runs ``--ours``
times for each time Porcupine runs), against the median of Porcupine's check times on the same
file. When ``go`` is on PATH and ``PORCUPINE_SRC`` names a Porcupine checkout, Porcupine is
built and timed here, interleaved with the checker's runs (never in CI); otherwise the Porcupine
times issue 13 quotes are shown, labelled as such. ``--pure`` also times the pure-Python path
(``AIDEMEMO_SIM_PURE=1``). Nothing here asserts a time.

Histories are generated the way Porcupine's users record them (``register.generate_history``):
8 clients against a locked register per key, uniform read/write/cas over values 0..4, every key
starting at 0; one key and 100 keys; linearizable, with a planted stale read, with a planted
double cas. The big one: 100,000 operations, 16 clients, one key.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simulations.linearizability import native  # noqa: E402
from simulations.linearizability.history import Header, Operation, dump_history  # noqa: E402
from simulations.linearizability.register import Plant, generate_history  # noqa: E402

# Porcupine on the histories (issue 13, an idle machine of this kind): seconds per history.
PORCUPINE_QUOTED = {
    (1, None): 0.14,
    (1, Plant.STALE_READ): 1.6,
    (1, Plant.DOUBLE_CAS): 2.2,
    (100, None): 0.016,
}
HEADER = Header(model="cas-register", init=0, has_init=True)
VERDICTS = {0: "ok", 1: "illegal", 3: "unknown"}


def _write(path: Path, history: list[Operation]) -> Path:
    with path.open("w", encoding="utf-8") as out:
        dump_history(history, out, HEADER)
    return path


def _command() -> list[str]:
    """``aidememo-sim`` as installed beside this interpreter, else the module."""
    script = Path(sys.executable).with_name("aidememo-sim")
    return [str(script)] if script.exists() else [sys.executable, "-m", "simulations.cli"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _check_once(path: Path, env: dict[str, str]) -> tuple[float, float, int]:
    """The command's wall time, its CPU time, and its exit code."""
    cpu, started = _children_cpu(), time.perf_counter()
    done = subprocess.run(_command() + ["check", str(path), "--model", "cas-register", "--init", "0"],
                          capture_output=True, text=True, env=env, timeout=900)
    return time.perf_counter() - started, _children_cpu() - cpu, done.returncode


def _porcupine_runner() -> Path | None:
    source = os.environ.get("PORCUPINE_SRC")
    if not source or shutil.which("go") is None:
        return None
    work = Path(tempfile.mkdtemp(prefix="porcupine-bench-"))
    shutil.copy(Path(__file__).with_name("porcupine") / "main.go", work / "main.go")
    (work / "go.mod").write_text(
        "module porcupinebench\n\ngo 1.18\n\nrequire github.com/anishathalye/porcupine v0.0.0\n\n"
        f"replace github.com/anishathalye/porcupine => {Path(source).resolve()}\n")
    done = subprocess.run(["go", "build", "-o", "bench", "."], cwd=work, capture_output=True, text=True,
                          env={**os.environ, "GOFLAGS": "-mod=mod"})
    if done.returncode != 0:
        print(f"(cannot build the Porcupine runner: {done.stderr.strip()[:300]})")
        return None
    return work / "bench"


def _porcupine(runner: Path, path: Path, timeout_s: float) -> tuple[float, float, str]:
    """Porcupine's check: wall time, CPU time (all its threads), verdict."""
    done = subprocess.run([str(runner), str(path), str(timeout_s)], capture_output=True, text=True,
                          timeout=timeout_s * 3 + 60)
    if done.returncode != 0:
        return float("nan"), float("nan"), f"failed: {done.stderr.strip()[:80]}"
    doc = json.loads(done.stdout)
    return float(doc["seconds"]), float(doc.get("cpu_seconds", "nan")), str(doc["verdict"]).lower()


def _load() -> str:
    """The 1-minute load average; above 1 this 2-core machine is shared, and the figure says so."""
    load = os.getloadavg()[0]
    return f"{load:.2f}" + (" (busy: above 1)" if load > 1 else "")


def _conditions(load_at_start: str) -> str:
    """The load at a figure's start and end, whether the checker's bytecode was cached (it is
    not where PYTHONDONTWRITEBYTECODE is set and no __pycache__ holds it), and the kernel."""
    cached = any((ROOT / "simulations" / "linearizability" / "__pycache__").glob("checker.*.pyc"))
    kernel = "built" if native.available() else "not built: pure path"
    return (f"load {load_at_start} at start, {_load()} at end; bytecode cached: {'yes' if cached else 'no'}; "
            f"compiled kernel {kernel}")


_NOISE_S = 0.002  # a check shorter than this is lost in the start-up it is measured against


def _seconds(value: float) -> str:
    """A difference of two best times: below the noise it reads "~0", never a negative time."""
    return f"{value:.4f}" if value != value or value >= _NOISE_S else "~0"


def _times(ratio: float, check_s: float) -> str:
    """A ratio to Porcupine's time: "-" when that time is not known, "~0x" when ours is noise."""
    if ratio != ratio:
        return "-"
    return "~0x" if check_s < _NOISE_S else f"{ratio:.2f}x"


def bench_checker(ops: int, seed: int, runs: int, ours: int, pure: bool) -> None:
    runner = _porcupine_runner()
    work = Path(tempfile.mkdtemp(prefix="sim-bench-"))
    one = _write(work / "one.jsonl", generate_history(seed=seed, operations=1, clients=8))
    cases = [(keys, plant, _write(work / f"k{keys}-{plant or 'ok'}.jsonl",
                                  generate_history(seed=seed, operations=ops, clients=8, keys=keys, plant=plant)))
             for keys in (1, 100) for plant in (None, Plant.STALE_READ, Plant.DOUBLE_CAS)]
    started = _load()
    print(f"checker: {ops}-operation cas-register histories, 8 clients, values 0..4, init 0, seed {seed}; "
          f"{runs * ours} runs (Porcupine: {runs}), interleaved; load {started} at start")
    print("  ('command s': aidememo-sim check FILE --model cas-register --init 0, best; 'check s', 'CPU s': the "
          "median over passes of that minus the same command on a one-operation history, run just before; "
          "Porcupine's: the median of its check times)")
    envs = {"kernel": {**os.environ}}
    if pure:
        envs["pure"] = {**os.environ, "AIDEMEMO_SIM_PURE": "1"}
    wall: dict[tuple[str, str], float] = {}
    codes: dict[tuple[str, str], int] = {}
    # Each case runs right after the one-operation history: its check time is the median over
    # passes of its time minus that start-up, so drift in the machine's speed cancels.
    extra: dict[tuple[str, str], list[float]] = {}
    extra_cpu: dict[tuple[str, str], list[float]] = {}
    theirs: dict[str, list[tuple[float, float, str]]] = {}  # every Porcupine run: wall, CPU, verdict
    for _ in range(runs):
        for name, env in [item for item in envs.items() for _ in range(ours)]:
            for _, _, path in cases:
                start_s, start_cpu, _ = _check_once(one, env)
                wall[(name, "one")] = min(wall.get((name, "one"), start_s), start_s)
                took, used, code = _check_once(path, env)
                wall[(name, path.stem)] = min(wall.get((name, path.stem), took), took)
                extra.setdefault((name, path.stem), []).append(took - start_s)
                extra_cpu.setdefault((name, path.stem), []).append(used - start_cpu)
                if codes.setdefault((name, path.stem), code) != code:
                    codes[(name, path.stem)] = -1  # not the same verdict twice: flagged below
        if runner is not None:
            for _, _, path in cases:
                took, used, verdict = _porcupine(runner, path, 600)
                theirs.setdefault(path.stem, []).append((took, used, verdict))
    print(f"  start-up (one operation): {wall[('kernel', 'one')]:.3f} s"
          + (f"; pure path {wall[('pure', 'one')]:.3f} s" if pure else ""))
    where = "Porcupine here (CPU)" if runner is not None else "Porcupine (issue 13)"
    print(f"{'keys':>5} {'history':>12} {'verdict':>8} {'command s':>10} {'check s':>8} {'CPU s':>7} {where:>27} "
          f"{'x Porcupine':>11} {'(CPU)':>6}" + (f" {'pure check s':>13}" if pure else ""))
    for keys, plant, path in cases:
        expected = 0 if plant is None else 1
        code = codes[("kernel", path.stem)]
        check_s = statistics.median(extra[("kernel", path.stem)])
        check_cpu = statistics.median(extra_cpu[("kernel", path.stem)])
        if runner is not None:
            runs_of = theirs.get(path.stem, [(float("nan"), float("nan"), "-")])
            # The same estimator on both sides: the median of Porcupine's runs, as of ours.
            their_s = statistics.median(run[0] for run in runs_of)
            their_cpu = statistics.median(run[1] for run in runs_of)
            verdict = "/".join(sorted({run[2] for run in runs_of}))
            shown, versus, versus_cpu = f"{verdict} {their_s:.4f} ({their_cpu:.4f})", check_s / their_s, check_cpu / their_cpu
        else:
            quoted = PORCUPINE_QUOTED.get((keys, plant), float("nan"))
            shown = "not quoted" if quoted != quoted else f"{quoted}"
            versus, versus_cpu = check_s / quoted, float("nan")
        line = (f"{keys:>5} {plant or 'linearizable':>12} {VERDICTS.get(code, f'exit {code}'):>8} "
                f"{wall[('kernel', path.stem)]:>10.3f} {_seconds(check_s):>8} {_seconds(check_cpu):>7} {shown:>27} "
                f"{_times(versus, check_s):>11} {_times(versus_cpu, check_cpu):>6}")
        if pure:
            line += f" {statistics.median(extra[('pure', path.stem)]):>13.4f}"
        marks = [f"exit {code}, expected {expected}"] if code != expected else []
        if pure and codes[("pure", path.stem)] != code:
            marks.append(f"the pure path exited {codes[('pure', path.stem)]}")
        print(line + (f" ({'; '.join(marks)}!)" if marks else ""), flush=True)
    print(f"  {_conditions(started)}")
    shutil.rmtree(work, ignore_errors=True)


_PEAK = """
import resource, subprocess, sys, time
started = time.perf_counter()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
took = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # KiB on Linux
print(done.returncode, took, peak, done.stdout.strip().splitlines()[0] if done.stdout.strip() else "")
"""


def bench_big(ops: int, budget_s: float, seed: int) -> None:
    """One key, 16 clients, ``ops`` operations, through the command: where Porcupine ran out of
    memory (measured there at 17 GB; not run here, for the machine's sake)."""
    work = Path(tempfile.mkdtemp(prefix="sim-big-"))
    path = _write(work / "big.jsonl", generate_history(seed=seed, operations=ops, clients=16, keys=1))
    command = _command() + ["check", str(path), "--model", "cas-register", "--init", "0", "--budget", f"{budget_s:g}"]
    started = _load()
    done = subprocess.run([sys.executable, "-c", _PEAK, *command], capture_output=True, text=True,
                          timeout=budget_s * 4 + 300)
    shutil.rmtree(work, ignore_errors=True)
    if done.returncode != 0:
        print(f"big history: the measurement failed: {done.stderr.strip()[-500:]}")
        return
    code, took, peak, summary = done.stdout.split(maxsplit=3)
    print(f"big history: {ops} operations, 1 key, 16 clients, --budget {budget_s:g}: verdict "
          f"{VERDICTS.get(int(code), 'exit ' + code).upper()} in {float(took):.1f} s (the whole command), peak RSS "
          f"{int(peak) / 1024:.0f} MB; {_conditions(started)}. {summary}")
    print("  Porcupine (issue 13): Unknown after 60 s at 17 GB.")


def bench_runner(seed: int, batches: int) -> None:
    """Concurrent batches on the embedded reference, against the same requests sent one by one."""
    from simulations.campaign import rerun, run_campaign
    from simulations.plan import Batch, Plan

    started_load = _load()
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
          f"verdict {again.verdict.value}; {_conditions(started_load)}")


def _sample(pid: int) -> tuple[int, int, int]:
    """(RSS, peak RSS, open descriptors) of a running process, from /proc (Linux)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value
    return (int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024,
            len(os.listdir(f"/proc/{pid}/fd")))


def bench_campaign(seconds: float, seed: int) -> None:
    """A long campaign as a user runs it (``aidememo-sim run``, its own process): its rate over its
    first and its last tenth, and its memory and descriptors, sampled from /proc as it runs."""
    progress = re.compile(r"^\s+([\d.]+) s: (\d+) batches, (\d+) operations")
    started = _load()
    with tempfile.TemporaryDirectory() as out:
        child = subprocess.Popen(_command() + ["run", "--seed", str(seed), "--budget", f"{seconds:g}", "--out", out],
                                 stdout=subprocess.PIPE, text=True)
        samples: list[tuple[float, int, int, int]] = []
        stamps: list[tuple[float, int]] = []
        started = time.monotonic()
        assert child.stdout is not None
        for line in child.stdout:  # a progress line about every 2 s
            matched = progress.match(line)
            if matched:
                stamps.append((float(matched.group(1)), int(matched.group(3))))
                try:
                    samples.append((time.monotonic() - started, *_sample(child.pid)))
                except (OSError, KeyError):
                    pass
        child.wait()
    if len(stamps) < 10 or not samples:
        print(f"campaign: only {len(stamps)} progress lines in {seconds:g} s; too few to compare tenths")
        return
    end = stamps[-1][0]

    def rate(lo: float, hi: float) -> float:
        inside = [(t, n) for t, n in stamps if lo <= t <= hi]
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / max(t1 - t0, 1e-9)

    first, last = rate(0, max(end / 10, 4.0)), rate(min(end * 9 / 10, end - 4.0), end)
    mark = 60.0 if end >= 90 else end / 10  # after the first minute; a short run: its first tenth
    after = next((s for s in samples if s[0] >= mark), samples[-1])
    print(f"campaign: seed {seed}, {seconds:g} s, {stamps[-1][1]} operations: first tenth {first:.0f} ops/s, "
          f"last tenth {last:.0f} ops/s, last/first {last / first:.2f}; peak RSS {samples[-1][2]} MB, "
          f"RSS after {after[0]:.0f} s {after[1]} MB, at the end {samples[-1][1]} MB "
          f"(end/after {samples[-1][1] / after[1]:.2f}x), descriptors at the end {samples[-1][3]} "
          f"(max {max(s[3] for s in samples)}); {_conditions(started)}")


def bench_workers(seconds: float, seed: int) -> None:
    """1 vs 2 campaign shards on a Dask LocalCluster, embedded reference: operations/s of the
    whole hunt (each shard's operations over its own campaign time, summed), side by side."""
    from simulations.hunt import Display, run_hunt
    from simulations.shards import ShardSpec

    rates = {}
    started = _load()
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as out:  # each shard's history file goes here, as in a hunt
            specs = [ShardSpec(root_seed=seed, index=i, actors=3, budget_s=seconds, max_batches=None, factory=None,
                               out=out) for i in range(workers)]
            hunt = run_hunt(specs, workers=workers, scheduler=None, out=Path(out), display=Display(io.StringIO()))
        rates[workers] = sum(o.operations / o.elapsed_s for o in hunt.done)
        print(f"workers: {workers} x {seconds:g} s shards: {hunt.operations} operations, {rates[workers]:.0f} ops/s")
    print(f"workers: 2 vs 1 {rates[2] / rates[1]:.2f}x (os.cpu_count {os.cpu_count()}); {_conditions(started)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--runs", type=int, default=7, help="rounds: Porcupine once, our command --ours times")
    parser.add_argument("--ours", type=int, default=3, help="runs of our command per round")
    parser.add_argument("--pure", action="store_true", help="also time the pure-Python path")
    parser.add_argument("--big-ops", type=int, default=100_000)
    parser.add_argument("--big-budget", type=float, default=60.0)
    parser.add_argument("--campaign", type=float, default=120.0, metavar="SECONDS")
    parser.add_argument("--skip-big", action="store_true")
    parser.add_argument("--skip-campaign", action="store_true")
    parser.add_argument("--workers-budget", type=float, default=20.0, metavar="SECONDS",
                        help="each shard's budget in the 1 vs 2 workers comparison")
    parser.add_argument("--skip-workers", action="store_true")
    parser.add_argument("--skip-checker", action="store_true", help="skip the checker and runner figures")
    parser.add_argument("--skip-machines", action="store_true")
    parser.add_argument("--machine-steps", type=int, default=2_000)
    args = parser.parse_args()
    if not args.skip_checker:
        bench_checker(args.ops, args.seed, args.runs, args.ours, args.pure)
    if not args.skip_big and not args.skip_checker:
        bench_big(args.big_ops, args.big_budget, args.seed)
    if not args.skip_checker:
        bench_runner(args.seed, 60)
    if not args.skip_workers:
        bench_workers(args.workers_budget, 7)
    if not args.skip_campaign:
        bench_campaign(args.campaign, 7)
    if not args.skip_machines:
        from simulations.machines.bench import bench_machines

        bench_machines(args.machine_steps, args.seed)


if __name__ == "__main__":
    main()
