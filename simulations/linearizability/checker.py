"""Linearizability checking of recorded histories against any executable model.

Theory of operation. A history is linearizable when every operation can be given one instant
inside its closed interval [call, return] so that, in instant order, the model accepts every
operation with the output actually observed. Any such order can be rearranged so that each
operation takes effect as late as it may: at the return of itself or of an operation ordered
after it (Lowe's "just in time" linearization). So the search walks the history's events in
time order and keeps the *frontier*: every configuration (which still-open operations have
already taken effect, as a small integer bitset over the open ones, and the model's state) that
explains everything seen so far. A call adds an open operation; the return of an operation that
has not taken effect yet extends each configuration by every sequence of open operations that
ends with it, and configurations where that is impossible die. When none is left the history is
illegal, and the event where that happened is the earliest cut that is illegal: no bisection
and no re-search are needed to find it. Two rules keep the frontier small: an operation that
never changes the state (a read, a refused write) takes effect as soon as it is legal, since
that configuration can do everything the one without it can; and an operation whose answer
never came (open for ever) is never applied where it would change nothing.

Unlike a depth-first search with a cache of every (linearized set, state) pair seen, as
Porcupine does, the frontier holds only the present, so memory is bounded by the concurrency of
the history rather than by its length; a cap on the frontier's size turns an explosion into
UNKNOWN instead of an out-of-memory. The frontier also persists: ``Checker`` keeps it per
partition between calls, so a campaign that appends batches checks only what is new.

Models are Porcupine's shape (``Model``): an initial state, a pure ``step`` that returns every
possible next state (none = refused), and an optional per-operation ``partition`` key (per
register, per handoff) whose parts are checked separately. States must be hashable: equal
states are equal values. A model may add a ``refute`` pre-pass, a cheap sound argument that
some operation is impossible (for registers: a read no write can explain), which is tried
before the search; ``check`` asks the kernel first and tries it only on a partition the kernel
did not find linearizable, with the same verdict and explanation.

Three verdicts: OK, ILLEGAL, and UNKNOWN when the time or size budget ran out; never a guess.
For an ILLEGAL partition the checker shrinks the evidence: the latest start time from which the
operations are still illegal whatever state the earlier ones left ("a window"), then each
operation of the window in turn is relaxed (it may take effect at any time, with any result,
or not at all, once called) and stays relaxed while the rest is still illegal. What remains is
to blame.

Here: ``Checker`` (incremental) and ``check`` (once). The model's shape and the results are in
``spec.py``, the search in ``search.py``, shrinking and explaining in ``witness.py``; ``check``
hands each partition to the compiled kernel (``native.py``) when it was built and the model has
a ``rule``, and the incremental ``Checker`` of a campaign keeps the pure frontier. None of
them knows a protocol: models live in ``register.py``, ``kv.py`` and ``ledger.py``.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import simulations.linearizability.native as native
from simulations.errors import SimulationError
from simulations.linearizability.history import Operation
from simulations.linearizability.search import DEFAULT_MAX_CONFIGS, Frontier, OutOfBudget, Prepared, feed, native_verdict, prepare
from simulations.linearizability.spec import (CheckResult, Guarded, Input, Model, Output, PartitionResult, Refutation, StepFn, Update,
                              Verdict)
from simulations.linearizability.witness import explain, shrink

__all__ = [
    "DEFAULT_MAX_CONFIGS",
    "CheckResult",
    "Checker",
    "Guarded",
    "Input",
    "Model",
    "Output",
    "PartitionResult",
    "Refutation",
    "StepFn",
    "Update",
    "Verdict",
    "check",
]

S = TypeVar("S", bound=Hashable)

# Below this size a partition's search is about as cheap as the pre-pass, so the pre-pass only
# runs once the search has found a violation, to explain it.
_PREPASS_MIN_OPS = 1_000


# -- checking, once or incrementally ------------------------------------------------------------


@dataclass(slots=True)
class _Part(Generic[S]):
    """One partition's progress: its operations, and the search state kept between runs."""

    indices: list[int] = field(default_factory=list)  # into the checker's history
    ops: list[Operation] = field(default_factory=list)  # the history's operations at ``indices``
    index: bytes = b""  # a scanned history's: ``indices`` as int32, and ``ops`` built on demand
    fed: int = 0  # how many of ``indices`` are in ``prepared``
    prepared: Prepared[S] | None = None
    frontier: Frontier[S] | None = None
    pos: int = 0  # next event of ``prepared.events`` to feed
    failed: int | None = None  # the operation whose return no configuration survived
    last_ns: int = -1  # time of the last event fed
    # ``forget``: the operations dropped once their frontier had nothing open (indices before
    # ``indices``); ``ops`` and ``prepared`` then hold only what came after.
    settled: array[int] = field(default_factory=lambda: array("q"))
    verdict: Verdict | None = None  # None: not checked yet
    result: PartitionResult | None = None
    prepass_deferred: bool = False  # the kernel searched it before the pre-pass ran (one-shot)


class Checker(Generic[S]):
    """Checks a history that grows: ``add`` operations, ``run`` to check what is new.

    Each partition keeps its frontier between runs, so appending operations that begin after
    everything already checked costs only the new events; an operation that begins earlier
    makes its partition start over (still correct, just not incremental). A verdict is about the
    operations added so far: ILLEGAL is final once nothing added later began before the last
    answer already added, as in a campaign, whose batches run one after another.

    ``one_shot`` (what ``check`` asks for): each partition is searched once, whole, by the
    compiled kernel when it is there and the model has a ``rule``; nothing is kept to go on from.

    ``reread`` (a campaign whose history is on disk) makes the checker forget: ``history`` stays
    empty, and a partition whose frontier has nothing open after a run keeps only that frontier,
    dropping its operations and compiled steps, so memory follows the concurrency, not the
    length of the run. ``reread(indices)`` gives those operations back when a violation needs
    explaining. Operations must then arrive in batches that begin after the last answer checked.
    """

    def __init__(self, model: Model[S], *, max_configs: int = DEFAULT_MAX_CONFIGS, one_shot: bool = False,
                 reread: Callable[[Sequence[int]], list[Operation]] | None = None) -> None:
        self.model = model
        self.max_configs = max_configs
        self.history: Sequence[Operation] = []
        self._reread = reread
        self._count = 0  # operations added
        self._one_shot = one_shot and native.available(model)
        self._encoding: native.Encoding[S] | None = None  # a scanned history's kinds
        self._parts: dict[Hashable, _Part[S]] = {}
        self._init = model.init()
        self._violation: PartitionResult | None = None
        # Partitions with operations not yet checked, or whose check ran out of budget: a run
        # visits only these, so its cost does not grow with the partitions already settled.
        self._pending: dict[Hashable, _Part[S]] = {}
        self._unknown = 0  # partitions whose last verdict was UNKNOWN

    def add(self, ops: Iterable[Operation]) -> None:
        if isinstance(ops, native.ScannedHistory) and self._add_scanned(ops):
            return
        key = self.model.partition
        parts = self._parts
        if not isinstance(self.history, list):
            self.history = list(self.history)
        new = list(ops)
        start = self._count
        self._count += len(new)
        if self._reread is None:
            self.history.extend(new)
        if key is None:
            part = parts.get(None)
            if part is None:
                part = parts[None] = _Part()
            part.indices.extend(range(start, self._count))
            part.ops.extend(new)
            if new:
                self._pending[None] = part
            return
        # One pass, the partition lists bound once per key: this runs for every operation.
        lists: dict[Hashable, tuple[Callable[[int], None], Callable[[Operation], None]]] = {}
        for i, op in enumerate(new, start):
            k = key(op.input)
            appends = lists.get(k)
            if appends is None:
                part = parts.get(k)
                if part is None:
                    part = parts[k] = _Part()
                self._pending[k] = part
                appends = lists[k] = (part.indices.append, part.ops.append)
            appends[0](i)
            appends[1](op)

    def _add_scanned(self, scanned: native.ScannedHistory) -> bool:
        """Partition a history the kernel read, building no operation; False: add it as a list."""
        model = self.model
        if self.history or not self._one_shot or model.partition is None or model.key_field != scanned.key_field:
            return False
        encoding: native.Encoding[S] = native.Encoding()
        if not scanned.encode(model, encoding):
            return False
        self.history, self._encoding = scanned, encoding
        self._count = len(scanned)
        for number, index in enumerate(scanned.partitions(model)):
            part = self._parts[number] = self._pending[number] = _Part(index=index)
            part.indices = memoryview(index).cast("i").tolist()
        return True

    def _ops(self, part: _Part[S]) -> list[Operation]:
        if len(part.ops) < len(part.indices):  # a scanned history's partition: built when needed
            history = self.history
            part.ops = [history[i] for i in part.indices]
        return part.ops

    def run(self, budget_s: float = 10.0, explain_budget_s: float = 5.0,
            progress: Callable[[str], None] | None = None) -> CheckResult:
        """Check every partition with new operations within ``budget_s`` seconds.

        The first ILLEGAL partition stops the run and is shrunk and explained within
        ``explain_budget_s`` (0 skips that: the witness is then the partition).
        """
        detail = self.advance(budget_s, explain_budget_s, progress)
        return self._result(detail)

    def advance(self, budget_s: float = 10.0, explain_budget_s: float = 5.0,
                progress: Callable[[str], None] | None = None) -> str:
        """``run`` without building the result: what a campaign calls after every batch.

        Returns why the budget ran out ("" if it did not); ``verdict`` and ``violation`` say
        where the history stands.
        """
        if budget_s <= 0:
            raise SimulationError("the checker's budget must be positive")
        deadline = time.monotonic() + budget_s
        reported = time.monotonic()
        detail = ""
        parts = list(self._pending.items())
        done = 0
        while done < len(parts) and self._violation is None:
            if progress is not None and time.monotonic() - reported > 2.0:
                reported = time.monotonic()
                progress(f"checked {done}/{len(parts)} partitions ({budget_s - (deadline - reported):.0f} s)")
            run = self._small_scanned(parts, done)
            if run:
                # Many small partitions of a scanned history: one kernel call, up to the first
                # that is not OK, which is then settled like any other.
                settled, outcome = self._search_run(run, deadline)
                for key, part in run[:settled]:
                    part.verdict, part.fed = Verdict.OK, len(part.indices)
                    del self._pending[key]
                done += settled
                if settled == len(run):
                    continue
            key, part = parts[done]
            done += 1
            self._unknown -= part.verdict is Verdict.UNKNOWN
            if run and outcome.status != native.Outcome.TOO_WIDE:
                why = self._settle_native(part, outcome)
            else:
                why = self._advance(part, deadline)
            self._unknown += part.verdict is Verdict.UNKNOWN
            if part.verdict is not Verdict.UNKNOWN:
                del self._pending[key]
            if why:
                detail = why
            if part.verdict is Verdict.ILLEGAL:
                self._violation = self._illegal(part, explain_budget_s)
        return detail

    def _small_scanned(self, parts: list[tuple[Hashable, _Part[S]]], start: int) -> list[tuple[Hashable, _Part[S]]]:
        """The scanned partitions from ``start`` on, never searched and too small for the pre-pass."""
        if self._encoding is None:
            return []
        run = []
        refute = self.model.refute
        for key, part in parts[start:]:
            if not part.index or part.verdict is not None or (refute is not None and len(part.indices) >= _PREPASS_MIN_OPS):
                break
            run.append((key, part))
        return run

    def _search_run(self, run: list[tuple[Hashable, _Part[S]]], deadline: float) -> tuple[int, native.Outcome]:
        scanned, encoding = self.history, self._encoding
        assert isinstance(scanned, native.ScannedHistory) and encoding is not None
        return encoding.search_many(scanned.calls, scanned.rets, scanned.sigs, [part.index for _, part in run],
                                    [self._init], deadline=deadline, max_configs=self.max_configs)

    @property
    def verdict(self) -> Verdict:
        if self._violation is not None:
            return Verdict.ILLEGAL
        return Verdict.UNKNOWN if self._unknown or self._pending else Verdict.OK

    @property
    def violation(self) -> PartitionResult | None:
        return self._violation

    def _advance(self, part: _Part[S], deadline: float) -> str:
        """Feed a partition's new events; returns why the budget ran out, if it did."""
        model = self.model
        restart = part.prepared is None or any(op.call_ns <= part.last_ns for op in self._ops(part)[part.fed:])
        if restart and part.settled:
            raise SimulationError("an operation began before the last answer checked, whose partition's "
                                  "earlier operations were already forgotten")
        if restart:
            prepass = model.refute is not None and len(part.indices) >= _PREPASS_MIN_OPS
            if self._one_shot:
                # The kernel first: a linearizable partition (the common case) then never builds
                # its operations for the pre-pass. An ILLEGAL one gets the pre-pass's proof when
                # it has one (``_illegal``), an UNKNOWN one gets it here: the verdict and the
                # explanation are what the pre-pass first would give.
                part.prepass_deferred = prepass
                outcome = self._native_search(part, deadline)
                if outcome is not None and outcome.status != native.Outcome.TOO_WIDE:
                    unknown = outcome.status in (native.Outcome.OUT_OF_TIME, native.Outcome.OUT_OF_ROOM)
                    if unknown and prepass and self._prepass(part):
                        return ""
                    return self._settle_native(part, outcome)
            if prepass and self._prepass(part):
                return ""
            part.prepared = prepare(model, self._ops(part))
            part.frontier = Frontier([self._init], deadline=deadline, max_configs=self.max_configs)
            part.pos = 0
        else:
            assert part.prepared is not None
            self._grow(part.prepared, prepare(model, part.ops[part.fed:]))
        part.fed = len(part.indices)
        assert part.frontier is not None and part.prepared is not None
        part.frontier.deadline = deadline
        try:
            part.pos, part.failed = feed(part.frontier, part.prepared, part.prepared.events, part.pos)
        except OutOfBudget as exc:
            part.verdict = Verdict.UNKNOWN
            part.pos = exc.pos
            return self._ran_out(exc)
        events = part.prepared.events
        part.last_ns = events[part.pos - 1][0] if part.pos else -1
        part.verdict = Verdict.OK if part.failed is None else Verdict.ILLEGAL
        if self._reread is not None and part.failed is None and not part.frontier.open:
            self._forget(part)
        return ""

    def _prepass(self, part: _Part[S]) -> bool:
        """The model's pre-pass on a whole partition: True when it proved it ILLEGAL."""
        assert self.model.refute is not None
        part.prepass_deferred = False
        refutation = self.model.refute(self._ops(part), self._init)
        if refutation is None:
            return False
        part.verdict = Verdict.ILLEGAL
        part.fed = len(part.indices)
        part.result = self._refuted(part, refutation)
        return True

    def _forget(self, part: _Part[S]) -> None:
        """Keep a settled partition's frontier (its states, nothing open) and drop its operations."""
        part.settled.extend(part.indices)
        part.indices, part.ops = [], []
        part.prepared = prepare(self.model, [])
        part.pos = part.fed = 0

    @staticmethod
    def _grow(prepared: Prepared[S], grown: Prepared[S]) -> None:
        offset = len(prepared.ops)
        prepared.ops.extend(grown.ops)
        prepared.fns.extend(grown.fns)
        prepared.inert.extend(grown.inert)
        prepared.events.extend((t, k, i + offset) for t, k, i in grown.events)
        prepared.twins.update((i + offset, text) for i, text in grown.twins.items())
        prepared.returns.extend(grown.returns)

    def _ran_out(self, exc: OutOfBudget) -> str:
        return "the time budget ran out" if exc.why == "time" else (
            f"the search needed more than {self.max_configs} configurations at once")

    def _native_search(self, part: _Part[S], deadline: float) -> native.Outcome | None:
        if part.index and self._encoding is not None:
            scanned = self.history
            assert isinstance(scanned, native.ScannedHistory)
            return self._encoding.search(scanned.calls, scanned.rets, scanned.sigs, [self._init], index=part.index,
                                         deadline=deadline, max_configs=self.max_configs)
        return native.search_operations(self.model, self._ops(part), [self._init], deadline=deadline,
                                        max_configs=self.max_configs)

    def _settle_native(self, part: _Part[S], outcome: native.Outcome) -> str:
        """A partition the kernel searched whole: nothing is kept to go on from."""
        part.fed = len(part.indices)
        part.prepared = part.frontier = None
        try:
            legal = native_verdict(outcome)
        except OutOfBudget as exc:
            part.verdict = Verdict.UNKNOWN
            return self._ran_out(exc)
        part.verdict = Verdict.OK if legal else Verdict.ILLEGAL
        part.failed = None if legal else outcome.failed
        return ""

    def _illegal(self, part: _Part[S], explain_budget_s: float) -> PartitionResult:
        if part.result is not None:
            return part.result  # refuted by the model's pre-pass: already explained
        assert part.failed is not None
        ops = self._ops(part)
        failed = part.failed
        if part.settled:
            # Explained from the start of the partition: the forgotten operations are read back.
            assert self._reread is not None
            failed += len(part.settled)
            part.indices = [*part.settled, *part.indices]
            part.settled = array("q")
            ops = part.ops = self._reread(part.indices)
        if self.model.refute is not None and (len(ops) < _PREPASS_MIN_OPS or part.prepass_deferred):
            # The search found it first; the pre-pass's proof, when it has one, reads better.
            refutation = self.model.refute(ops, self._init)
            if refutation is not None:
                return self._refuted(part, refutation)
        if explain_budget_s <= 0:
            return PartitionResult(verdict=Verdict.ILLEGAL, operations=tuple(part.indices),
                                   witness=tuple(part.indices), explanation="(not shrunk: no explanation budget)")
        evidence = shrink(self.model, ops, failed, self._init, explain_budget_s, self.max_configs)
        explained = explain(self.model, ops, evidence, explain_budget_s, part.indices.__getitem__)
        return PartitionResult(verdict=Verdict.ILLEGAL, operations=tuple(part.indices),
                               witness=tuple(sorted(part.indices[i] for i in evidence.witness)),
                               minimal=evidence.minimal, explanation=explained.text,
                               expected=tuple((part.indices[i], answers) for i, answers in explained.expected.items()))

    def _refuted(self, part: _Part[S], refutation: Refutation) -> PartitionResult:
        return PartitionResult(verdict=Verdict.ILLEGAL, operations=tuple(part.indices),
                               witness=tuple(sorted(part.indices[i] for i in refutation.witness)),
                               minimal=True, explanation=refutation.explanation)

    def _result(self, detail: str) -> CheckResult:
        results: list[PartitionResult] = []
        for part in self._parts.values():
            if part.verdict is Verdict.ILLEGAL:
                assert self._violation is not None
                results.append(self._violation)
            elif part.verdict is not None:
                results.append(PartitionResult(verdict=part.verdict, operations=tuple(part.indices)))
        if self._violation is not None:
            verdict = Verdict.ILLEGAL
        elif any(r.verdict is Verdict.UNKNOWN for r in results):
            verdict = Verdict.UNKNOWN
        else:
            verdict = Verdict.OK
        return CheckResult(verdict=verdict, model=self.model.name, partitions=tuple(results),
                           operations=self._count, detail=detail if verdict is Verdict.UNKNOWN else "")


def check(
    model: Model[S],
    history: Sequence[Operation],
    budget_s: float = 10.0,
    explain_budget_s: float = 5.0,
    progress: Callable[[str], None] | None = None,
    max_configs: int = DEFAULT_MAX_CONFIGS,
) -> CheckResult:
    """Check ``history`` against ``model`` within ``budget_s`` seconds of search.

    Partitions are checked in order; the first ILLEGAL one stops the check and is shrunk and
    explained within ``explain_budget_s`` (0 skips that: the witness is then the partition).
    ``progress`` hears about the partitions done, at most every two seconds; ``max_configs``
    bounds the search's memory (UNKNOWN beyond it).
    """
    checker = Checker(model, max_configs=max_configs, one_shot=True)
    checker.add(history)
    return checker.run(budget_s, explain_budget_s, progress)
