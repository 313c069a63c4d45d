"""XMemo campaigns: seeded batches of concurrent captures and recalls, one history, the checks of
``xmemo.model``.

Theory of operation. Two agents (``claude``, ``codex``) of one owner each run two workers. Each
batch (``planner``) races captures with one idempotency key or one ``semantic_key`` from several
workers, plain appends and bounded recalls; after the last batch a census reads, per key, the
key's private path. Every request is recorded (invoke, then ok or unknown) in a ``History`` that
``xmemo.model.violations`` reads.

On the embedded reference the AideMemo simulator's ``SeededScheduler`` runs one worker at a time
and picks, from the seed, who goes next at each request and at each point the store reports
(``begin`` once it holds the write lock, ``decided``, ``commit``): the same plan and seed give
the same interleaving, so a failure replays (``rerun``). Memory ids come from the seed too. Over
a URL the interleaving is the network's. Batch seeds come from ``simulations.plan.batch_seed``,
the AideMemo campaign's formula: replay files depend on it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from simulations.linearizability.history import Operation, Recorder
from simulations.plan import SEGMENT_BATCHES, Batch, Plan, batch_seed, segment_seed
from simulations.xmemo.execution import execute_batch
from simulations.xmemo.model import Finding, violations
from simulations.xmemo.planner import XMemoPlanner
from simulations.xmemo.targets import AGENTS, WORKERS, Target, XMemoEmbeddedTarget, XMemoFactory, XMemoHttpTarget, \
    reference_factory

__all__ = ["BatchHooks", "XMemoRun", "rerun", "run_campaign"]


@dataclass(frozen=True, slots=True, kw_only=True)
class XMemoRun:
    """One campaign, or its last segment: ``seed``, ``plan`` and ``history`` are the segment's (what
    replays and shrinks alone); ``earlier`` counts the batches and operations of the segments
    before it."""

    seed: int
    plan: Plan
    history: tuple[Operation, ...]
    decisions: tuple[tuple[int, ...], ...]
    findings: tuple[Finding, ...]
    elapsed_s: float
    segment: int = 0
    earlier: tuple[int, int] = (0, 0)

    @property
    def finding(self) -> Finding | None:
        return self.findings[0] if self.findings else None

    @property
    def batches(self) -> int:
        """Batches run by the whole campaign, each segment's census included."""
        return self.earlier[0] + len(self.plan.batches)

    @property
    def operations(self) -> int:
        """Operations of the whole campaign."""
        return self.earlier[1] + len(self.history)


class BatchHooks(Protocol):
    """What hears of each batch before and after it (a fault campaign's nemesis); ``after``
    returning True ends the batches (the census still runs)."""

    def before(self, batch: int) -> None: ...

    def after(self, batch: int) -> bool: ...


def run_campaign(*, seed: int, budget_s: float = 10.0, max_batches: int | None = None,
                 factory: XMemoFactory = reference_factory, target: XMemoHttpTarget | None = None,
                 progress: Callable[[str], None] | None = None,
                 on_batch: Callable[[float, int], None] | None = None,
                 segment_batches: int = SEGMENT_BATCHES, hooks: BatchHooks | None = None) -> XMemoRun:
    """Plan and run batches until ``max_batches`` or the budget, then the census; check the history.

    On the embedded reference the campaign runs in segments of ``segment_batches`` batches (0:
    one segment), each on a fresh reference under its own seed (``segment_seed``: the first is
    the campaign's, so a run shorter than a segment is the run it always was), closed by its own
    census and checked, so memory is one segment's however long the run. A violation ends the
    campaign with its segment, which replays and shrinks alone. Over a URL: one segment.
    ``progress`` gets a line about every two seconds (batches and operations so far);
    ``on_batch(seconds since start, operations so far)`` hears about every batch (a hunt's shard
    publishes its counts with it); ``hooks`` hear of every batch but the census (a fault campaign
    over a URL).
    """
    started = time.monotonic()
    per_segment = None if target is not None or segment_batches <= 0 else segment_batches
    earlier, segment = (0, 0), 0
    reporter = _Reporter(started, progress, on_batch)
    while True:
        left = None if max_batches is None else max_batches - (earlier[0] - segment)  # censuses aside
        limit = per_segment if left is None else left if per_segment is None else min(left, per_segment)
        run = _segment(segment_seed(seed, segment), started, budget_s, limit, factory, target, reporter, earlier,
                       hooks)
        run = replace(run, segment=segment, earlier=earlier)
        over = time.monotonic() - started >= budget_s * 0.8 or (left is not None and limit == left)
        if run.findings or per_segment is None or over:
            return replace(run, elapsed_s=time.monotonic() - started)
        earlier, segment = (run.batches, run.operations), segment + 1


class _Reporter:
    """The campaign's counts, across its segments, for ``progress`` and ``on_batch``."""

    def __init__(self, started: float, progress: Callable[[str], None] | None,
                 on_batch: Callable[[float, int], None] | None) -> None:
        self.started, self.last = started, started
        self.progress, self.on_batch = progress, on_batch

    def batch(self, batches: int, operations: int) -> None:
        now = time.monotonic()
        if self.on_batch is not None:
            self.on_batch(now - self.started, operations)
        if self.progress is not None and now - self.last > 2.0:
            self.last = now
            self.progress(f"  {now - self.started:5.1f} s: {batches} batches, {operations} operations")


def _segment(seed: int, started: float, budget_s: float, max_batches: int | None, factory: XMemoFactory,
             target: XMemoHttpTarget | None, reporter: _Reporter, earlier: tuple[int, int],
             hooks: BatchHooks | None = None) -> XMemoRun:
    """One segment: batches on a fresh reference (or the URL) under ``seed``, its census, its check."""
    run_id = "r" if target is None else f"s{seed}x{random.SystemRandom().randrange(16**8):08x}"
    tgt: Target = XMemoEmbeddedTarget(seed=seed, factory=factory) if target is None else target
    planner = XMemoPlanner(rng=random.Random(seed), run_id=run_id, workers=WORKERS)
    recorder = Recorder()
    batches: list[Batch] = []
    decisions: list[tuple[int, ...]] = []
    sent = earlier[1]  # a count, not len(history()), which sorts the whole history
    try:
        while (max_batches is None or len(batches) < max_batches) and time.monotonic() - started < budget_s * 0.8:
            batch = planner.next_batch()
            if hooks is not None:
                hooks.before(len(batches))
            decisions.append(tuple(execute_batch(tgt, batch, recorder, batch_seed(seed, len(batches)))))
            batches.append(batch)
            sent += len(batch.ops)
            reporter.batch(earlier[0] + len(batches), sent)
            if hooks is not None and hooks.after(len(batches) - 1):
                break
        census = planner.census()
        decisions.append(tuple(execute_batch(tgt, census, recorder, batch_seed(seed, len(batches)))))
        batches.append(census)
    finally:
        tgt.close()
    history = tuple(recorder.history())
    plan = Plan(actors=AGENTS, workers=WORKERS, batches=tuple(batches), run_id=run_id)
    return XMemoRun(seed=seed, plan=plan, history=history, decisions=tuple(decisions),
                    findings=tuple(violations(history)), elapsed_s=time.monotonic() - started)


def rerun(plan: Plan, seed: int, factory: XMemoFactory = reference_factory,
          schedule: Sequence[Sequence[int]] = ()) -> XMemoRun:
    """Execute a recorded plan on a fresh embedded reference, following ``schedule`` where it applies."""
    started = time.monotonic()
    tgt = XMemoEmbeddedTarget(seed=seed, factory=factory)
    recorder = Recorder()
    decisions = []
    try:
        for index, batch in enumerate(plan.batches):
            script = schedule[index] if index < len(schedule) else ()
            decisions.append(tuple(execute_batch(tgt, batch, recorder, batch_seed(seed, index), script)))
    finally:
        tgt.close()
    history = tuple(recorder.history())
    return XMemoRun(seed=seed, plan=plan, history=history, decisions=tuple(decisions),
                    findings=tuple(violations(history)), elapsed_s=time.monotonic() - started)
