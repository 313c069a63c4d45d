"""Shrinking a failing campaign to the fewest batches, operations and actors that still fail
under the same seed.

First only the handoffs the witness is about are kept (usually most of the plan goes at once),
then chunks of batches are dropped (halves, quarters, ...), as delta debugging does, then single
operations, then actors no remaining operation names. Each cut is kept only if it still fails
when rerun.

On the embedded reference a rerun follows the recorded schedule wherever it still applies, so
a cut that fails once fails every time. Over a URL the network interleaves: each rerun sends
the cut with fresh ids into the target's project, and a cut is kept when it fails in at least
one of ``tries`` reruns. Before the actors go, a case shrunk over a URL is also tried one request
at a time: a bug that needs no interleaving then reproduces every time, by curl too.
``reproduction`` says how often the shrunk case fails. ``shrink_where_found`` is the one path from
a failing campaign to its shrunk case and that measure, for ``aidememo-sim run`` and a hunt's shards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from simulations.campaign import RunResult, rerun, rerun_over_http
from simulations.plan import Batch, Plan
from simulations.targets import HttpTarget, LedgerFactory, reference_factory

__all__ = ["shrink", "shrink_where_found"]

URL_TRIES = 3  # reruns a cut gets over a URL before it is given up as not failing
URL_RATE_RUNS = 10  # reruns that measure how often a case shrunk over a URL reproduces

# (plan, schedule, explain) -> the rerun when it failed, else None
_Trial = Callable[[Plan, Sequence[Sequence[int]], bool], RunResult | None]


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
    """Fewest batches, then operations, then actors, that still fail on the embedded reference
    (or ``factory``) under the same seed."""

    def trial(plan: Plan, schedule: Sequence[Sequence[int]], explain: bool) -> RunResult | None:
        got = rerun(plan, result.seed, factory, schedule, explain=explain)
        return got if got.finding is not None else None

    return _shrink(result, trial, budget_s)


def shrink_over_http(result: RunResult, target: HttpTarget, *, tries: int = URL_TRIES,
                     budget_s: float = 60.0) -> RunResult:
    """``shrink`` for a failure found over a URL: a cut is kept when one of ``tries`` reruns fails."""

    def trial(plan: Plan, schedule: Sequence[Sequence[int]], explain: bool) -> RunResult | None:
        for _ in range(tries):
            got = rerun_over_http(plan, result.seed, target, explain=explain)
            if got.finding is not None:
                return got
        return None

    return _shrink(result, trial, budget_s, serialize=True)


def reproduction(result: RunResult, target: HttpTarget, runs: int) -> int:
    """How many of ``runs`` reruns of ``result``'s plan over the URL fail."""
    return sum(rerun_over_http(result.plan, result.seed, target, explain=False).finding is not None
               for _ in range(runs))


def shrink_where_found(result: RunResult, factory: LedgerFactory, target: HttpTarget | None,
                       progress: Callable[[str], None] | None = None) -> tuple[RunResult, tuple[int, int] | None]:
    """A failing campaign shrunk where it was found (the embedded reference under ``factory``, or
    ``target``'s URL) and, over a URL, how often the shrunk case reproduces there: (failing
    reruns, reruns), or None on the embedded reference, where it replays every time. ``progress``
    gets the lines a person watching the run reads."""
    say = progress or (lambda line: None)
    if target is None:
        say("shrinking ...")
        shrunk = shrink(result, factory)
    else:
        say(f"shrinking over the URL (a cut is kept when one of {URL_TRIES} reruns with fresh ids fails) ...")
        shrunk = shrink_over_http(result, target)
    say(f"shrunk to {shrunk.plan.operations} operations in {len(shrunk.plan.batches)} batches, "
        f"{len(shrunk.plan.actors)} actors:")
    if shrunk.finding is not None:
        say(shrunk.finding.explanation)
    if target is None:
        return shrunk, None
    rate = (reproduction(shrunk, target, URL_RATE_RUNS), URL_RATE_RUNS)
    say(f"over the URL the shrunk case reproduced {rate[0]}/{rate[1]} times (each with fresh ids)")
    return shrunk, rate


def _shrink(result: RunResult, trial: _Trial, budget_s: float, serialize: bool = False) -> RunResult:
    deadline = time.monotonic() + budget_s
    best = result

    def attempt(batches: Sequence[Batch], schedule: Sequence[Sequence[int]]) -> RunResult | None:
        # Over a URL there is no schedule: every batch pairs with an empty one.
        padded = [*schedule, *[()] * (len(batches) - len(schedule))]
        kept = [(b, d) for b, d in zip(batches, padded) if b.ops]
        plan = best.plan.with_batches([b for b, _ in kept])
        if time.monotonic() > deadline or plan.operations == 0:
            return None
        return trial(plan, [d for _, d in kept], False)

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
    if serialize and any(len(b.ops) > 1 for b in batches):
        # One request at a time, in the plan's order: when it still fails, the case no longer
        # depends on how the network interleaves it (a curl script then shows it every time).
        got = attempt([Batch(clock_ms=b.clock_ms, ops=(op,)) for b in batches for op in b.ops], [])
        if got is not None:
            best = got
    actors = tuple(a for a in best.plan.actors if a in _named_actors(best))
    if 2 <= len(actors) < len(best.plan.actors) and time.monotonic() < deadline:
        got = trial(best.plan.with_batches(best.plan.batches, actors), best.decisions, False)
        if got is not None:
            best = got
    if best is result:
        return result
    # The same run once more, explained: the shrinking runs only needed a verdict.
    final = trial(best.plan, best.decisions, True)
    return final if final is not None else best
