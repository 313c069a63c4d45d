"""``aidememo-conformance diff``'s state coverage over time, beside its steps per second.

Runs ``diff`` as a user types it, the embedded reference against a fresh one (or against a
broken variant of ``tests/suite/mutants.py`` with ``--variant``), for ``--seconds`` with no
step cap, and prints from its ``diff.json`` the coverage timeline: every ``--every`` seconds the
steps sent, the steps per second over that interval and the (route, status, error code, record
state) pairs reached so far; then the aims tried, where the steps came from, and the load average
at the start and the end (the machine is shared: read the rate beside it). Bytecode is cached
in a private ``PYTHONPYCACHEPREFIX`` filled by an untimed warm-up run, as in an installed copy;
``--no-bytecode-cache`` compiles every module on each start, as these machines run by default.

    python bench/diff.py [--seconds 60] [--every 5] [--seed 7] [--variant NAME] [--no-bytecode-cache]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _conditions import Window, closing, opening

REPO = Path(__file__).resolve().parents[1]


def _environment(no_cache: bool, tmp: str, variant: bool) -> tuple[dict[str, str], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIDEMEMO_", "HERMES_"))}
    paths = [str(REPO), *([str(REPO / "tests" / "suite")] if variant else []), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    if no_cache:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
        return env, "none cached (every start compiles the kit's modules)"
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    return env, "cached (a private PYTHONPYCACHEPREFIX, filled by a warm-up run)"


def _diff(env: dict[str, str], report: str, seed: int, seconds: float, variant: str | None) -> dict[str, Any]:
    argv = [sys.executable, "-m", "conformance.cli", "diff", "--report-dir", report, "--seed", str(seed),
            "--budget", str(seconds), "--steps", "100000000",
            *(["--embedded-factory", f"mutants:{variant}"] if variant else [])]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    summary = Path(report, "diff.json")
    if done.returncode not in (0, 1) or not summary.exists():
        raise SystemExit(f"diff failed (exit {done.returncode}): {done.stderr[-1500:]}")
    return dict(json.loads(summary.read_text()))


def _timeline(summary: dict[str, Any], every: float) -> None:
    coverage = summary["coverage"]
    print(f"{'seconds':>8} {'steps':>7} {'steps/s':>8} {'pairs':>6}")
    last_s, last_steps, next_at = 0.0, 0, every
    points = coverage["timeline"]
    for index, (seconds, steps, pairs) in enumerate(points):
        if seconds < next_at and index != len(points) - 1:
            continue
        rate = (steps - last_steps) / (seconds - last_s) if seconds > last_s else 0.0
        print(f"{seconds:>8.1f} {steps:>7} {rate:>8.0f} {pairs:>6}")
        last_s, last_steps, next_at = seconds, steps, (seconds // every + 1) * every


def _summary(summary: dict[str, Any], window: Window) -> None:
    coverage = summary["coverage"]
    print(window.mark(f"total: {summary['steps']} steps in {summary['seconds']} s "
                      f"({summary['steps'] / summary['seconds']:.0f}/s), {summary['episodes']} episodes; "
                      f"{coverage['pairs']} (route, status, error code, record state) pairs, "
                      f"{coverage['route_states']} (route, record state) pairs, {len(coverage['aims'])} aims tried"))
    makers = coverage["makers"]
    planned = makers.get("aim", {}).get("steps", 0)
    print(f"steps from aims' plans: {planned} of {summary['steps']}; new pairs by source: "
          + ", ".join(f"{name} {m['new_pairs']}"
                      for name, m in sorted(makers.items(), key=lambda kv: -kv[1]["new_pairs"])))
    if summary["divergences"]:
        case = summary["divergences"][0]
        print(f"divergence after {summary['found_at_s']} s: {case['route']} ({case['field']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=5.0, help="print a line every this many seconds")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--variant", help="a broken variant of tests/suite/mutants.py as the target")
    parser.add_argument("--no-bytecode-cache", action="store_true")
    args = parser.parse_args()
    if args.seconds <= 0 or args.every <= 0:
        print("error: --seconds and --every must be positive", file=sys.stderr)
        return 2
    opening("bench/diff.py")
    with tempfile.TemporaryDirectory() as tmp:
        env, bytecode = _environment(args.no_bytecode_cache, tmp, args.variant is not None)
        if not args.no_bytecode_cache:
            _diff(env, os.path.join(tmp, "warm"), args.seed, 2.0, args.variant)
        print(f"diff, seed {args.seed}, {args.seconds:g} s, target: "
              f"{'mutants:' + args.variant if args.variant else 'the embedded reference'}")
        print(f"bytecode of the diff command: {bytecode}")
        window, started = Window(), time.monotonic()
        summary = _diff(env, os.path.join(tmp, "run"), args.seed, args.seconds, args.variant)
        wall = time.monotonic() - started
    _timeline(summary, args.every)
    _summary(summary, window)
    print(window.mark(f"wall time of the command: {wall:.1f} s (budget {args.seconds:g} s)"))
    closing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
