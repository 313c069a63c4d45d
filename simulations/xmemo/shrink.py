"""Shrinking a failing XMemo campaign: fewest batches, then operations, that still show a violation
of the same kind under the same seed, each cut rerun on the embedded reference along the recorded
schedule. The census (the last batch) stays, reading only the keys some remaining capture uses.
"""

from __future__ import annotations

import time

from simulations.plan import Batch, Plan
from simulations.xmemo.campaign import XMemoRun, rerun
from simulations.xmemo.targets import XMemoFactory, reference_factory

__all__ = ["shrink"]


def _trim_census(batches: list[Batch]) -> list[Batch]:
    """The census (last batch) reads only keys some remaining capture still uses."""
    used = {op.input.get("key") for batch in batches[:-1] for op in batch.ops if op.input.get("op") == "capture"}
    census = batches[-1]
    return [*batches[:-1], Batch(clock_ms=None, ops=tuple(op for op in census.ops if op.input.get("key") in used))]


def shrink(run: XMemoRun, factory: XMemoFactory = reference_factory, budget_s: float = 30.0) -> XMemoRun:
    """Fewest batches, then operations, that still show a violation of the same kind under the same seed."""
    if run.finding is None:
        return run
    kind, deadline, best = run.finding.kind, time.monotonic() + budget_s, run

    def attempt(batches: list[Batch], schedule: list[tuple[int, ...]]) -> XMemoRun | None:
        batches = _trim_census(batches)
        plan = Plan(actors=best.plan.actors, workers=best.plan.workers, batches=tuple(batches), run_id=best.plan.run_id)
        if time.monotonic() > deadline or plan.operations == 0:
            return None
        trial = rerun(plan, run.seed, factory, schedule)
        return trial if any(f.kind == kind for f in trial.findings) else None

    b = 0
    while b < len(best.plan.batches) - 1:  # the census (last) stays
        batches, schedule = list(best.plan.batches), list(best.decisions)
        got = attempt(batches[:b] + batches[b + 1:], schedule[:b] + schedule[b + 1:])
        if got is not None:
            best = got
            continue
        i = 0
        while i < len(best.plan.batches[b].ops):
            batches = list(best.plan.batches)
            batches[b] = Batch(clock_ms=None, ops=batches[b].ops[:i] + batches[b].ops[i + 1:])
            got = attempt(batches, list(best.decisions))
            if got is not None:
                best = got
            else:
                i += 1
        b += 1
    return best
