"""Shrinking a failing campaign on the embedded reference to the fewest batches, operations and
actors that still fail under the same seed.

First only the handoffs the witness is about are kept (usually most of the plan goes at once),
then chunks of batches are dropped (halves, quarters, ...), as delta debugging does, then single
operations, then actors no remaining operation names. Each cut is kept only if it still fails
when rerun, following the recorded schedule wherever it still applies. Shrinking needs reruns
that behave the same, so it is for the embedded reference (or a variant built on its store).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from simulations.campaign import RunResult, rerun
from simulations.plan import Batch
from simulations.targets import LedgerFactory, reference_factory

__all__ = ["shrink"]


def _named_actors(result: RunResult) -> set[str]:
    """Actors the plan's operations name: sender, receiver, fact author."""
    named: set[str] = set()
    for batch in result.plan.batches:
        for op in batch.ops:
            named.add(op.actor)
            named.add(str((op.input.get("payload") or {}).get("to_actor")))
            named.add(str((op.input.get("fact") or {}).get("actor_id")))
    return named


def shrink(result: RunResult, factory: LedgerFactory = reference_factory, budget_s: float = 60.0) -> RunResult:
    """Fewest batches, then operations, then actors, that still fail under the same seed."""
    deadline = time.monotonic() + budget_s
    best = result

    def attempt(batches: Sequence[Batch], schedule: Sequence[Sequence[int]]) -> RunResult | None:
        kept = [(b, d) for b, d in zip(batches, schedule) if b.ops]
        plan = best.plan.with_batches([b for b, _ in kept])
        if time.monotonic() > deadline or plan.operations == 0:
            return None
        trial = rerun(plan, result.seed, factory, [d for _, d in kept], explain=False)
        return trial if trial.finding is not None else None

    batches, schedule = list(best.plan.batches), list(best.decisions)
    if best.finding is not None:
        blamed = {str(best.history[i].input.get("handoff_id")) for i in best.finding.witness}
        focused = [Batch(clock_ms=b.clock_ms, ops=tuple(op for op in b.ops if str(op.input.get("handoff_id")) in blamed))
                   for b in batches]
        got = attempt(focused, schedule)
        if got is not None:
            best, batches, schedule = got, list(got.plan.batches), list(got.decisions)
    chunk = max(1, len(batches) // 2)
    while chunk >= 1:
        start = 0
        while start < len(batches):
            got = attempt(batches[:start] + batches[start + chunk:], schedule[:start] + schedule[start + chunk:])
            if got is not None:
                best, batches, schedule = got, list(got.plan.batches), list(got.decisions)
            else:
                start += chunk
        chunk //= 2
    b = 0
    while b < len(batches):
        i = 0
        while i < len(batches[b].ops):
            cut = list(batches)
            cut[b] = Batch(clock_ms=batches[b].clock_ms, ops=batches[b].ops[:i] + batches[b].ops[i + 1:])
            got = attempt(cut, schedule)
            if got is not None:
                emptied = len(got.plan.batches) < len(batches)
                best, batches, schedule = got, list(got.plan.batches), list(got.decisions)
                if emptied:
                    break
            else:
                i += 1
        else:
            b += 1
    actors = tuple(a for a in best.plan.actors if a in _named_actors(best))
    if 2 <= len(actors) < len(best.plan.actors) and time.monotonic() < deadline:
        trial = rerun(best.plan.with_batches(best.plan.batches, actors), result.seed, factory, best.decisions,
                      explain=False)
        if trial.finding is not None:
            best = trial
    if best is result:
        return result
    # The same run once more, explained: the shrinking runs only needed a verdict.
    final = rerun(best.plan, result.seed, factory, best.decisions)
    return final if final.finding is not None else best
