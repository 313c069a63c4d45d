"""Linearizability checking of recorded histories against any executable model.

Theory of operation. A history is linearizable when every operation can be given one instant
inside its closed interval [call, return] so that, in instant order, the model accepts every
operation with the output actually observed. The search is Wing & Gong's, with Lowe's memoisation
as Porcupine does it: call and return events sit in one time-ordered linked list; the search
linearizes the first call it may, lifts it out of the list, and backtracks when it meets a return
whose call it could not linearize. A (linearized-set bitset, state) pair seen once is never
explored again, which is what keeps the search tractable.

Models are Porcupine's shape (``Model``): an initial state, a pure ``step`` that returns every
possible next state (none = refused), an equality given as a hashable ``key``, and an optional
``partition`` into independent sub-histories (per key, per handoff) checked separately. The
search runs over *sets* of possible states, so nondeterministic steps (unknown outputs) need
nothing special.

Three verdicts: OK, ILLEGAL, and UNKNOWN when the time budget ran out; never a guess. For an
ILLEGAL partition the checker shrinks the evidence to a small set of operations that is illegal
on its own even when every other operation of the partition may take effect at any time with any
result ("relaxed"), and explains the longest legal order it found and why nothing can follow it.

This module knows no protocol: models live in ``register.py`` and ``model.py``.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Generic, TypeVar

from simulations.errors import SimulationError
from simulations.history import Operation

__all__ = [
    "CheckResult",
    "Model",
    "PartitionResult",
    "Verdict",
    "check",
    "model_named",
    "MODEL_NAMES",
]

S = TypeVar("S")

Input = Mapping[str, object]
Output = Mapping[str, object] | None


def _identity(state: object) -> Hashable:
    return state


def _describe_operation(op_input: Input, output: Output) -> str:
    return f"{dict(op_input)} -> {'?' if output is None else dict(output)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Model(Generic[S]):
    """An executable specification in Porcupine's shape.

    Attributes:
        name: registry name, e.g. ``cas-register``.
        init: the initial state.
        step: every state the model may be in after ``(state, input, output)``; an empty result
            means the model refuses that output. ``output is None`` (unknown) must allow at least
            one state, because an unanswered request may always be placed last.
        key: equality: two states are equal when their keys are equal (default: the state).
        partition: splits a history into independent parts, as lists of indices.
        effect_free: true for inputs that never change state (reads); a relaxed one is dropped.
        describe_operation, describe_state: plain text for explanations and timelines.
        describe_expected: what the model would answer in a state, to say why an output is wrong.
    """

    name: str
    init: Callable[[], S]
    step: Callable[[S, Input, Output], Iterable[S]]
    key: Callable[[S], Hashable] = _identity
    partition: Callable[[Sequence[Operation]], list[list[int]]] | None = None
    effect_free: Callable[[Input], bool] | None = None
    describe_operation: Callable[[Input, Output], str] = _describe_operation
    describe_state: Callable[[S], str] = repr
    # What the model would answer to ``input`` in ``state``, for explanations (optional).
    describe_expected: Callable[[S, Input], str] | None = None


class Verdict(StrEnum):
    OK = "ok"
    ILLEGAL = "illegal"
    UNKNOWN = "unknown"  # the budget ran out before the search did


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionResult:
    """The verdict on one independent part; indices refer to the checked history."""

    verdict: Verdict
    operations: tuple[int, ...]
    witness: tuple[int, ...] = ()
    minimal: bool = False  # False when the shrinking budget ran out first
    explanation: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckResult:
    verdict: Verdict
    model: str
    partitions: tuple[PartitionResult, ...]
    operations: int

    @property
    def violation(self) -> PartitionResult | None:
        return next((p for p in self.partitions if p.verdict is Verdict.ILLEGAL), None)

    def summary(self) -> str:
        counts = {v: sum(p.verdict is v for p in self.partitions) for v in Verdict}
        return (
            f"{self.verdict.value.upper()}: {self.operations} operations, "
            f"{len(self.partitions)} partitions checked against model '{self.model}' "
            f"({counts[Verdict.OK]} ok, {counts[Verdict.ILLEGAL]} illegal, "
            f"{counts[Verdict.UNKNOWN]} unknown)"
        )


@dataclass(slots=True)
class _Trace:
    """What the deepest branch of a search reached, for the explanation."""

    order: list[int] = field(default_factory=list)
    states: tuple[object, ...] = ()


class _OutOfTime(Exception):
    pass


def _power_step(model: Model[S], states: tuple[S, ...], op: Operation) -> tuple[S, ...]:
    seen: dict[Hashable, S] = {}
    for state in states:
        for nxt in model.step(state, op.input, op.output):
            seen.setdefault(model.key(nxt), nxt)
    return tuple(seen.values())


def _search(
    model: Model[S], ops: Sequence[Operation], deadline: float, trace: _Trace | None = None
) -> bool:
    """Wing-Gong-Lowe over ``ops``; True when linearizable. Raises _OutOfTime at the deadline."""
    n = len(ops)
    if n == 0:
        return True
    inf = float("inf")
    # Calls sort before returns at equal times: intervals are closed, so touching ones overlap.
    events = sorted(
        [(op.call_ns, 0, i) for i, op in enumerate(ops)]
        + [(inf if op.return_ns is None else op.return_ns, 1, i) for i, op in enumerate(ops)]
    )
    size = len(events) + 1  # node 0 is the head sentinel; -1 is the end
    nxt = [-1] * size
    prv = [-1] * size
    op_of = [-1] * size
    is_call = [False] * size
    match = [-1] * size
    call_node = [0] * n
    for pos, (_, kind, i) in enumerate(events, start=1):
        op_of[pos] = i
        is_call[pos] = kind == 0
        if kind == 0:
            call_node[i] = pos
        else:
            match[call_node[i]] = pos
        prv[pos] = pos - 1
        nxt[pos - 1] = pos

    states: tuple[S, ...] = (model.init(),)
    linearized = 0
    depth = 0
    cache: set[tuple[int, frozenset[Hashable]]] = set()
    stack: list[tuple[int, tuple[S, ...]]] = []
    entry = nxt[0]
    budget_tick = 0
    while nxt[0] != -1:
        budget_tick += 1
        if budget_tick & 0x3FF == 0 and time.monotonic() > deadline:
            raise _OutOfTime
        if is_call[entry]:
            i = op_of[entry]
            new_states = _power_step(model, states, ops[i])
            if new_states:
                new_linearized = linearized | (1 << i)
                memo = (new_linearized, frozenset(model.key(s) for s in new_states))
                if memo not in cache:
                    cache.add(memo)
                    stack.append((entry, states))
                    states, linearized = new_states, new_linearized
                    depth += 1
                    if trace is not None and depth > len(trace.order):
                        trace.order = [op_of[e] for e, _ in stack]
                        trace.states = tuple(states)
                    # Lift the call and its return out of the list.
                    ret = match[entry]
                    nxt[prv[entry]] = nxt[entry]
                    prv[nxt[entry]] = prv[entry]
                    nxt[prv[ret]] = nxt[ret]
                    if nxt[ret] != -1:
                        prv[nxt[ret]] = prv[ret]
                    entry = nxt[0]
                    continue
            entry = nxt[entry]
        else:
            if not stack:
                return False
            entry, states = stack.pop()
            linearized &= ~(1 << op_of[entry])
            depth -= 1
            # Unlift in reverse order of lifting, so the saved neighbours are still right.
            ret = match[entry]
            nxt[prv[ret]] = ret
            if nxt[ret] != -1:
                prv[nxt[ret]] = ret
            nxt[prv[entry]] = entry
            prv[nxt[entry]] = entry
            entry = nxt[entry]
    return True


def _verdict(model: Model[S], ops: Sequence[Operation], budget_s: float) -> Verdict:
    try:
        ok = _search(model, ops, time.monotonic() + budget_s)
    except _OutOfTime:
        return Verdict.UNKNOWN
    return Verdict.OK if ok else Verdict.ILLEGAL


def _truncated(ops: Sequence[Operation], at_ns: int) -> list[int]:
    """Indices of operations called by ``at_ns``; ones still open then become unknown."""
    return [i for i, op in enumerate(ops) if op.call_ns <= at_ns]


def _as_of(ops: Sequence[Operation], indices: Sequence[int], at_ns: int) -> list[Operation]:
    out = []
    for i in indices:
        op = ops[i]
        if op.return_ns is not None and op.return_ns > at_ns:
            op = Operation(client=op.client, input=op.input, output=None, call_ns=op.call_ns, return_ns=None)
        out.append(op)
    return out


def _shrink(
    model: Model[S], ops: Sequence[Operation], budget_s: float, check_s: float
) -> tuple[list[int], int, bool]:
    """Smallest illegal evidence: (witness indices, truncation time, minimal?).

    First the earliest time T at which the history cut at T (later calls dropped, answers after T
    unknown) is already illegal; a cut of a linearizable history is linearizable, so the search
    is a bisection. Then each operation in turn is relaxed (may take effect any time, any result)
    and stays relaxed when the rest is still illegal, so what remains is to blame by itself.
    """
    deadline = time.monotonic() + budget_s
    # A cut is never harder than the whole partition, whose check took ``check_s``.
    per_check = max(4 * check_s, 0.1)
    times = sorted({op.return_ns for op in ops if op.return_ns is not None})
    last_time = times[-1] if times else 0
    lo, hi = 0, len(times) - 1
    cut_time = last_time
    while lo <= hi and time.monotonic() < deadline:
        mid = (lo + hi) // 2
        at = times[mid]
        if _verdict(model, _as_of(ops, _truncated(ops, at), at), per_check) is Verdict.ILLEGAL:
            cut_time, hi = at, mid - 1
        else:
            lo = mid + 1
    kept = _truncated(ops, cut_time)
    current = {i: op for i, op in zip(kept, _as_of(ops, kept, cut_time))}
    witness = list(kept)
    minimal = True
    for i in kept:
        if time.monotonic() > deadline:
            minimal = False
            break
        trial = dict(current)
        if model.effect_free is not None and model.effect_free(ops[i].input):
            del trial[i]
        else:
            trial[i] = ops[i].relaxed()
        verdict = _verdict(model, list(trial.values()), per_check)
        if verdict is Verdict.ILLEGAL:
            current = trial
            witness.remove(i)
        elif verdict is Verdict.UNKNOWN:
            minimal = False  # kept because the check ran out of time, not because it is needed
    return witness, cut_time, minimal


_LISTED = 40  # longer lists help nobody; the timeline shows everything


def _explain(
    model: Model[S],
    ops: Sequence[Operation],
    witness: Sequence[int],
    cut_time: int,
    budget_s: float,
    number: Callable[[int], int],
) -> str:
    shown = set(witness)
    kept = _truncated(ops, cut_time)
    # The same trial the shrinker accepted: the witness as observed, the rest relaxed.
    trial = [
        (i, op if i in shown else op.relaxed())
        for i, op in zip(kept, _as_of(ops, kept, cut_time))
        if i in shown or model.effect_free is None or not model.effect_free(op.input)
    ]
    trace = _Trace()
    try:
        _search(model, [op for _, op in trial], time.monotonic() + budget_s, trace)
    except _OutOfTime:
        pass

    def name(i: int) -> str:
        return f"#{number(i)} (client {ops[i].client})"

    by_call = sorted(witness, key=lambda i: ops[i].call_ns)
    observed = dict(trial)
    lines = [
        f"These {len(by_call)} operation(s) cannot be ordered as model '{model.name}' requires,",
        "even when every other operation may take effect at any time with any result:",
    ]
    for i in by_call[:_LISTED]:
        op = observed[i]
        lines.append(f"  {name(i)}: {model.describe_operation(op.input, op.output)}")
    if len(by_call) > _LISTED:
        lines.append(f"  ... and {len(by_call) - _LISTED} more")
    legal = [trial[k][0] for k in trace.order if trial[k][0] in shown]
    tail = legal[-_LISTED:]
    lines.append(
        "Longest legal order found: "
        + ("... " if len(legal) > len(tail) else "")
        + (", ".join(name(i) for i in tail) or "none, not even the first of them")
        + "."
    )
    states = list(trace.states) if trace.states else [model.init()]
    shown_states = [model.describe_state(s) for s in states[:4]]  # type: ignore[arg-type]
    more = " | ..." if len(states) > 4 else ""
    when = "After it" if legal else ("Before it" if len(by_call) == 1 else "Before them")
    lines.append(f"{when}, the state could be: " + " | ".join(shown_states) + more)
    stuck = [i for i in by_call if i not in legal]
    if stuck:
        listed = ", ".join(name(i) for i in stuck[:_LISTED]) + (" ..." if len(stuck) > _LISTED else "")
        lines.append(f"None of {listed} can come next with the output it had.")
        if model.describe_expected is not None:
            for i in stuck[:3]:
                answers = sorted({model.describe_expected(s, ops[i].input) for s in states[:4]})  # type: ignore[arg-type]
                lines.append(f"  {name(i)}: the model would answer " + " or ".join(answers))
    return "\n".join(lines)


def check(
    model: Model[S],
    history: Sequence[Operation],
    budget_s: float = 10.0,
    explain_budget_s: float = 5.0,
    progress: Callable[[str], None] | None = None,
) -> CheckResult:
    """Check ``history`` against ``model`` within ``budget_s`` seconds of search.

    Partitions are checked in order; the first ILLEGAL one stops the check and is shrunk and
    explained within ``explain_budget_s`` (0 skips that: the witness is then the partition).
    ``progress`` hears about the partitions done, at most every two seconds.
    """
    if budget_s <= 0:
        raise SimulationError("the checker's budget must be positive")
    parts = model.partition(history) if model.partition else [list(range(len(history)))]
    deadline = time.monotonic() + budget_s
    results: list[PartitionResult] = []
    overall = Verdict.OK
    reported = time.monotonic()
    for done, indices in enumerate(parts):
        if progress is not None and time.monotonic() - reported > 2.0:
            reported = time.monotonic()
            progress(f"checked {done}/{len(parts)} partitions ({budget_s - (deadline - reported):.0f} s)")
        sub = [history[i] for i in indices]
        started = time.monotonic()
        remaining = deadline - started
        verdict = _verdict(model, sub, remaining) if remaining > 0 else Verdict.UNKNOWN
        if verdict is Verdict.ILLEGAL and explain_budget_s <= 0:
            results.append(
                PartitionResult(
                    verdict=verdict,
                    operations=tuple(indices),
                    witness=tuple(indices),
                    explanation="(not shrunk: no explanation budget)",
                )
            )
            overall = Verdict.ILLEGAL
            break
        if verdict is Verdict.ILLEGAL:
            local, cut_time, minimal = _shrink(
                model, sub, explain_budget_s, time.monotonic() - started
            )
            results.append(
                PartitionResult(
                    verdict=verdict,
                    operations=tuple(indices),
                    witness=tuple(sorted(indices[i] for i in local)),
                    minimal=minimal,
                    explanation=_explain(
                        model, sub, local, cut_time, explain_budget_s, indices.__getitem__
                    ),
                )
            )
            overall = Verdict.ILLEGAL
            break
        results.append(PartitionResult(verdict=verdict, operations=tuple(indices)))
        if verdict is Verdict.UNKNOWN:
            overall = Verdict.UNKNOWN
    return CheckResult(verdict=overall, model=model.name, partitions=tuple(results), operations=len(history))


# Named models, imported on first use so that checking a register never loads the ledger model.
_REGISTRY: dict[str, str] = {
    "cas-register": "simulations.register:CAS_REGISTER",
    "ledger": "simulations.model:LEDGER",
}
MODEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def model_named(name: str) -> Model[object]:
    """The registered model called ``name``.

    Raises:
        SimulationError: for a name that is not registered.
    """
    if name not in _REGISTRY:
        raise SimulationError(f"unknown model {name!r}; choose one of: {', '.join(MODEL_NAMES)}")
    module, attr = _REGISTRY[name].split(":")
    model: Model[object] = getattr(importlib.import_module(module), attr)
    return model
