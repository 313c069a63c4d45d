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
before the search.

Three verdicts: OK, ILLEGAL, and UNKNOWN when the time or size budget ran out; never a guess.
For an ILLEGAL partition the checker shrinks the evidence: the latest start time from which the
operations are still illegal whatever state the earlier ones left ("a window"), then each
operation of the window in turn is relaxed (it may take effect at any time, with any result,
or not at all, once called) and stays relaxed while the rest is still illegal. What remains is
to blame.

This module knows no protocol: models live in ``register.py``, ``kv.py`` and ``model.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Generic, TypeVar

from simulations.errors import SimulationError
from simulations.history import Operation

__all__ = [
    "DEFAULT_MAX_CONFIGS",
    "CheckResult",
    "Checker",
    "Model",
    "PartitionResult",
    "Refutation",
    "Verdict",
    "check",
]

S = TypeVar("S", bound=Hashable)

Input = Mapping[str, object]
Output = Mapping[str, object] | None
StepFn = Callable[[S], Sequence[S]]

# About 120 bytes per configuration in CPython: the default keeps a search under ~250 MB even
# when every open operation doubles the frontier.
DEFAULT_MAX_CONFIGS = 1_000_000
_TICK = 1023  # check the clock every 1024 expansions
# Below this size a partition's search is about as cheap as the pre-pass, so the pre-pass only
# runs once the search has found a violation, to explain it.
_PREPASS_MIN_OPS = 1_000


def _describe_operation(op_input: Input, output: Output) -> str:
    return f"{dict(op_input)} -> {'?' if output is None else dict(output)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Refutation:
    """A model's own proof that a partition is illegal: the operations it rests on, and why."""

    witness: tuple[int, ...]  # indices into the partition given to ``refute``
    explanation: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Model(Generic[S]):
    """An executable specification in Porcupine's shape.

    Attributes:
        name: registry name, e.g. ``cas-register``.
        init: the initial state.
        step: every state the model may be in after ``(state, input, output)``; an empty result
            means the model refuses that output. ``output is None`` (unknown) must allow at least
            one state, because an unanswered request may always be placed last.
        partition: the key of the independent part an input belongs to (e.g. its register).
        effect_free: true when an operation with this input and output never changes the state
            (a read; a refused write). Such operations are applied as soon as they are legal,
            and dropped when their output is unknown.
        compile: ``step`` specialised to one operation (``state -> next states``), for speed.
        refute: a sound pre-pass ``(partition, initial state) -> Refutation | None``.
        universe: every state a partition could reach (a superset is fine), so a window of the
            history can be checked "from any state"; None: the states the search found.
        initial: the state for a user-given initial value (``--init``); None: not settable.
        describe_operation, describe_state: plain text for explanations and timelines.
        describe_expected: what the model would answer in a state, to say why an output is wrong.
    """

    name: str
    init: Callable[[], S]
    step: Callable[[S, Input, Output], Iterable[S]]
    partition: Callable[[Input], Hashable] | None = None
    effect_free: Callable[[Input, Output], bool] | None = None
    compile: Callable[[Input, Output], StepFn[S]] | None = None
    refute: Callable[[Sequence[Operation], S], Refutation | None] | None = None
    universe: Callable[[Sequence[Operation], S], Collection[S]] | None = None
    initial: Callable[[object], S] | None = None
    describe_operation: Callable[[Input, Output], str] = _describe_operation
    describe_state: Callable[[S], str] = repr
    describe_expected: Callable[[S, Input], str] | None = None

    def with_init(self, value: object) -> Model[S]:
        """The same model starting from ``value`` (as the history file or ``--init`` gives it).

        Raises:
            SimulationError: when the model has no settable initial state or refuses the value.
        """
        if self.initial is None:
            raise SimulationError(f"model '{self.name}' has no settable initial state")
        state = self.initial(value)
        return replace(self, init=lambda: state)

    def compiled(self, op: Operation) -> StepFn[S]:
        if self.compile is not None:
            return self.compile(op.input, op.output)
        step, inp, out = self.step, op.input, op.output
        return lambda state: tuple(step(state, inp, out))

    def inert(self, op: Operation) -> bool:
        return self.effect_free is not None and self.effect_free(op.input, op.output)


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
    detail: str = ""  # for UNKNOWN: which budget ran out

    @property
    def violation(self) -> PartitionResult | None:
        return next((p for p in self.partitions if p.verdict is Verdict.ILLEGAL), None)

    def summary(self) -> str:
        counts = {v: sum(p.verdict is v for p in self.partitions) for v in Verdict}
        text = (
            f"{self.verdict.value.upper()}: {self.operations} operations, "
            f"{len(self.partitions)} partitions checked against model '{self.model}' "
            f"({counts[Verdict.OK]} ok, {counts[Verdict.ILLEGAL]} illegal, "
            f"{counts[Verdict.UNKNOWN]} unknown)"
        )
        return text + (f"; {self.detail}" if self.detail else "")


class _OutOfBudget(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
        self.pos = 0


# -- the frontier search ----------------------------------------------------------------------


class _Frontier(Generic[S]):
    """Every configuration that explains the events fed so far (see the module docstring).

    ``call`` and ``ret`` must be fed in time order, calls before returns at equal times. A
    ``ret`` either completes or raises ``_OutOfBudget`` leaving the frontier as it was, so a
    search that ran out of time can go on later. With ``trace`` each configuration carries the
    order in which its operations took effect, for explanations (small histories only).
    """

    __slots__ = ("configs", "_bit", "_op_at", "_fn", "_effectful", "_inert", "_forever", "_twins", "_lower",
                 "_free", "_width",
                 "max_configs", "deadline", "_work", "trace", "last", "last_trace")

    def __init__(self, starts: Iterable[S], *, deadline: float, max_configs: int, trace: bool = False) -> None:
        self.configs: set[tuple[int, S]] = {(0, s) for s in starts}
        self._bit: dict[int, int] = {}  # open operation -> its bit
        self._op_at: dict[int, int] = {}  # bit -> open operation
        self._fn: dict[int, StepFn[S]] = {}
        self._effectful: dict[int, StepFn[S]] = {}  # bit -> step, open operations that change state
        self._inert: dict[int, StepFn[S]] = {}  # bit -> step, open effect-free operations
        self._forever = 0  # bits of operations that never return
        # Unanswered operations with the same input are interchangeable once called: only the
        # earliest unused one of such twins is ever applied, so configurations never differ in
        # which twin they used. _lower[bit]: the bits of the twins called before it.
        self._twins: dict[Hashable, int] = {}
        self._lower: dict[int, int] = {}
        self._free: list[int] = []
        self._width = 0
        self.max_configs = max_configs
        self.deadline = deadline
        self._work = 0
        # config -> order of operations that took effect (only with trace)
        self.trace: dict[tuple[int, S], tuple[int, ...]] | None = (
            {c: () for c in self.configs} if trace else None)
        self.last: set[tuple[int, S]] = set(self.configs)  # the frontier before the last return
        self.last_trace = self.trace

    def _take_bit(self) -> int:
        if self._free:
            return self._free.pop()
        self._width += 1
        return 1 << (self._width - 1)

    def call(self, op: int, fn: StepFn[S], *, inert: bool, returns: bool, twin: Hashable = None) -> None:
        bit = self._take_bit()
        self._bit[op] = bit
        self._op_at[bit] = op
        self._fn[op] = fn
        if not returns:
            self._forever |= bit
            if twin is not None:
                lower = self._twins.get(twin, 0)
                if lower:
                    self._lower[bit] = lower
                self._twins[twin] = lower | bit
        if not inert:
            self._effectful[bit] = fn
            return
        self._inert[bit] = fn
        trace = self.trace
        if trace is None:
            self.configs = {(m | bit, s) if fn(s) else (m, s) for m, s in self.configs}
            return
        new: dict[tuple[int, S], tuple[int, ...]] = {}
        for (m, s), order in trace.items():
            if fn(s):
                new[(m | bit, s)] = order + (op,)
            else:
                new[(m, s)] = order
        self.trace = new
        self.configs = set(new)

    def alone(self, op: int, fn: StepFn[S]) -> bool:
        """Apply an operation that overlaps no other; False when no configuration survives it."""
        self.last = self.configs
        trace = self.trace
        if trace is None:
            self.configs = {(0, s2) for _, s in self.configs for s2 in fn(s)}
        else:
            self.last_trace = trace
            self.trace = {(0, s2): order + (op,) for (_, s), order in trace.items() for s2 in fn(s)}
            self.configs = set(self.trace)
        return bool(self.configs)

    def ret(self, op: int) -> bool:
        """Process the return of ``op``; False when no configuration survives it."""
        bit = self._bit[op]
        fo = self._fn[op]
        configs = self.configs
        if len(configs) == 1 and self.trace is None:
            # The common case, one way to explain everything so far: no search needed when the
            # operation already took effect, or when nothing else is open.
            (m, s), = configs
            if m & bit:
                self._commit(op, bit, {(m ^ bit, s)})
                return True
            if len(self._effectful) == (bit in self._effectful):
                nxt = set()
                for s2 in fo(s):
                    m2 = m
                    for b, fn in self._inert.items():
                        if b != bit and not m2 & b and fn(s2):
                            m2 |= b
                    nxt.add((m2, s2))
                self._commit(op, bit, nxt)
                return bool(nxt)
        others = [(b, fn) for b, fn in self._inert.items() if b != bit]
        lower = self._lower
        effectful = [(b, fn, lower.get(b, 0)) for b, fn in self._effectful.items() if b != bit]
        forever = self._forever
        trace = self.trace
        ntrace: dict[tuple[int, S], tuple[int, ...]] = {}
        nxt = set()
        pending: list[tuple[int, S]] = []
        for c in configs:
            if c[0] & bit:
                nxt.add((c[0] ^ bit, c[1]))
                if trace is not None:
                    ntrace.setdefault((c[0] ^ bit, c[1]), trace[c])
            else:
                pending.append(c)
        if pending:
            seen = set(pending)
            stack = pending
            cap = self.max_configs
            work = self._work
            while stack:
                work += 1
                if not work & _TICK:
                    if time.monotonic() > self.deadline:
                        raise _OutOfBudget("time")
                    if len(seen) + len(nxt) > cap:
                        raise _OutOfBudget("size")
                m, s = stack.pop()
                order = trace[(m, s)] if trace is not None else ()
                for s2 in fo(s):
                    m2 = m
                    for b, fn in others:
                        if not m2 & b and fn(s2):
                            m2 |= b
                    nxt.add((m2, s2))
                    if trace is not None:
                        ntrace.setdefault((m2, s2), order + (op,))
                for b, fn, earlier in effectful:
                    if m & b or m & earlier != earlier:
                        continue
                    for s2 in fn(s):
                        if s2 == s and b & forever:
                            continue  # an answer that never came changing nothing: no news
                        m2 = m | b
                        for ib, ifn in others:
                            if not m2 & ib and ifn(s2):
                                m2 |= ib
                        c2 = (m2, s2)
                        if c2 not in seen:
                            seen.add(c2)
                            stack.append(c2)
                            if trace is not None:
                                trace[c2] = order + (self._op_at[b],)
            self._work = work
        if forever and len(nxt) > 1:
            nxt = _prune_unused(nxt, forever)
        if trace is not None:
            self.last_trace = trace
            self.trace = {c: ntrace[c] for c in nxt}
        self._commit(op, bit, nxt)
        return bool(nxt)

    def _commit(self, op: int, bit: int, nxt: set[tuple[int, S]]) -> None:
        # Only here does the frontier change, so running out of budget above loses no state.
        self.last = self.configs
        self.configs = nxt
        del self._bit[op], self._fn[op], self._op_at[bit]
        if bit in self._inert:
            del self._inert[bit]
        else:
            del self._effectful[bit]
        self._free.append(bit)


def _prune_unused(configs: set[tuple[int, S]], forever: int) -> set[tuple[int, S]]:
    """Drop configurations that used an unanswered operation where another, same in all else,
    did not: the one that still may apply it can do everything the other can."""
    groups: dict[tuple[int, S], list[int]] = {}
    for m, s in configs:
        groups.setdefault((m & ~forever, s), []).append(m & forever)
    out: set[tuple[int, S]] = set()
    for (base, s), parts in groups.items():
        for p in parts:
            if len(parts) == 1 or not any(q != p and q & p == q for q in parts):
                out.add((base | p, s))
    return out


@dataclass(slots=True)
class _Prepared(Generic[S]):
    """One partition's operations, ready for the frontier: events in time order."""

    ops: list[Operation]
    fns: list[StepFn[S]]
    inert: list[bool]
    events: list[tuple[int, int, int]]  # (time, 0 call / 1 return, op)
    returns: list[bool]  # has a return event (False: unanswered, or answered after the cut)
    twins: dict[int, str]  # unanswered effectful op -> its input's text, to spot twins


def _prepare(model: Model[S], ops: Sequence[Operation], until: int | None = None) -> _Prepared[S]:
    """``until``: the history as it stood then; later calls are left out, and operations still
    open then keep their answer but need not take effect (their return is not yet seen)."""
    compile_ = model.compile
    effect_free = model.effect_free
    fns: list[StepFn[S]] = []
    inert: list[bool] = []
    returns: list[bool] = []
    events: list[tuple[int, int, int]] = []
    twins: dict[int, str] = {}
    for i, op in enumerate(ops):
        inp, out = op.input, op.output
        is_inert = effect_free is not None and effect_free(inp, out)
        fns.append(compile_(inp, out) if compile_ is not None else model.compiled(op))
        inert.append(is_inert)
        ret = op.return_ns
        returns.append(ret is not None and (until is None or ret <= until))
        if (is_inert and out is None) or (until is not None and op.call_ns > until):
            continue  # an effect-free operation with an unknown answer constrains nothing
        events.append((op.call_ns, 0, i))
        if returns[i]:
            events.append((ret, 1, i))  # type: ignore[arg-type]
        elif out is None:
            twins[i] = json.dumps(inp, sort_keys=True, default=repr)
    events.sort()
    return _Prepared(list(ops), fns, inert, events, returns, twins)


def _feed(frontier: _Frontier[S], prepared: _Prepared[S], events: Sequence[tuple[int, int, int]],
          start: int = 0) -> tuple[int, int | None]:
    """Feed ``events[start:]``; returns (next position, the op whose return failed or None)."""
    fns, inert, returns, twins = prepared.fns, prepared.inert, prepared.returns, prepared.twins
    pos = start
    end = len(events)
    is_open = frontier._bit
    try:
        while pos < end:
            _, kind, i = events[pos]
            if kind == 0:
                if not is_open and pos + 1 < end and events[pos + 1][2] == i:
                    # Called and answered while nothing else was open: it takes effect alone.
                    if not frontier.alone(i, fns[i]):
                        return pos + 2, i
                    pos += 2
                    continue
                frontier.call(i, fns[i], inert=inert[i], returns=returns[i], twin=twins.get(i))
            elif not frontier.ret(i):
                return pos + 1, i
            pos += 1
    except _OutOfBudget as exc:
        exc.pos = pos  # the event that did not complete: where a later run resumes
        raise
    return len(events), None


def _linearizable(model: Model[S], ops: Sequence[Operation], starts: Iterable[S], deadline: float,
                  max_configs: int, until: int | None = None) -> bool:
    """One-shot search; raises _OutOfBudget."""
    prepared = _prepare(model, ops, until)
    frontier = _Frontier(starts, deadline=deadline, max_configs=max_configs)
    return _feed(frontier, prepared, prepared.events)[1] is None


# -- shrinking and explaining -------------------------------------------------------------------


def _unknown(op: Operation, call_ns: int | None = None) -> Operation:
    return Operation(client=op.client, input=op.input, output=None,
                     call_ns=op.call_ns if call_ns is None else call_ns, return_ns=None)


def _window(model: Model[S], cut: Mapping[int, Operation], t0: int) -> dict[int, Operation]:
    """Operations called at or after ``t0`` as observed; those still open at ``t0`` relaxed
    (they may take effect after it, or may have before it: the window starts from any state)."""
    out: dict[int, Operation] = {}
    for i, op in cut.items():
        if op.call_ns >= t0:
            out[i] = op
        elif (op.return_ns is None or op.return_ns >= t0) and not _inert_unanswered(model, op):
            out[i] = _unknown(op, t0)
    return out


def _inert_unanswered(model: Model[S], op: Operation) -> bool:
    """Relaxed, would this operation constrain nothing? (A read: yes. A failed cas: no, it may
    have succeeded.)"""
    return model.effect_free is not None and model.effect_free(op.input, None)


@dataclass(slots=True)
class _Evidence(Generic[S]):
    """What the shrinker settled on: a trial history and where it starts."""

    trial: dict[int, Operation]
    witness: list[int]
    starts: list[S]
    t0: int | None  # None: from the model's initial state
    until: int  # the cut: the history as it stood at the failing return
    minimal: bool


def _shrink(model: Model[S], ops: Sequence[Operation], failed: int, init: S, budget_s: float,
            max_configs: int) -> _Evidence[S]:
    deadline = time.monotonic() + budget_s
    # The search failed at the return of ``failed``: the history as it stood then is illegal.
    cut_ns = ops[failed].return_ns
    assert cut_ns is not None
    cut = {i: op for i, op in enumerate(ops) if op.call_ns <= cut_ns}
    universe = None if model.universe is None else list(model.universe(list(cut.values()), init))
    per_check = max(budget_s / 8, 0.05)

    def illegal(trial: Mapping[int, Operation], starts: Iterable[S]) -> bool | None:
        end = min(deadline, time.monotonic() + per_check)
        try:
            return not _linearizable(model, list(trial.values()), starts, end, max_configs, cut_ns)
        except _OutOfBudget:
            return None

    best = _Evidence(trial=cut, witness=[i for i, op in cut.items() if op.output is not None],
                     starts=[init], t0=None, until=cut_ns, minimal=False)
    # The latest window that is illegal from any state; monotone when the universe is known.
    if universe is not None:
        times = sorted({op.call_ns for op in cut.values()})
        lo, hi = 1, len(times) - 1
        while lo <= hi and time.monotonic() < deadline:
            mid = (lo + hi) // 2
            trial = _window(model, cut, times[mid])
            if illegal(trial, universe):
                best = _Evidence(trial=trial, witness=[i for i, op in trial.items() if op.call_ns >= times[mid]],
                                 starts=universe, t0=times[mid], until=cut_ns, minimal=False)
                lo = mid + 1
            else:
                hi = mid - 1
    # Relax each remaining operation in turn, latest first (those are most often to blame).
    minimal = True
    for i in sorted(best.witness, key=lambda i: ops[i].call_ns, reverse=True):
        if time.monotonic() > deadline:
            minimal = False
            break
        trial = dict(best.trial)
        if _inert_unanswered(model, trial[i]):
            del trial[i]
        else:
            trial[i] = _unknown(trial[i])
        verdict = illegal(trial, best.starts)
        if verdict:
            best.trial = trial
            best.witness.remove(i)
        elif verdict is None:
            minimal = False  # kept because the check ran out of time, not because it is needed
    best.minimal = minimal
    return best


_LISTED = 40  # longer lists help nobody; the timeline shows everything


def _explain(model: Model[S], ops: Sequence[Operation], evidence: _Evidence[S], budget_s: float,
             number: Callable[[int], int]) -> str:
    trial = evidence.trial
    local = list(trial)
    prepared = _prepare(model, [trial[i] for i in local], evidence.until)
    frontier = _Frontier(evidence.starts, deadline=time.monotonic() + budget_s, max_configs=DEFAULT_MAX_CONFIGS,
                         trace=True)
    try:
        _, stuck_at = _feed(frontier, prepared, prepared.events)
    except _OutOfBudget:
        stuck_at = None
    shown = set(evidence.witness)

    def name(i: int) -> str:
        return f"#{number(i)} (client {ops[i].client})"

    by_call = sorted(evidence.witness, key=lambda i: ops[i].call_ns)
    whence = ("" if evidence.t0 is None else
              f", starting from any state the earlier operations may have left "
              f"({_states_text(model, evidence.starts)})")
    lines = [
        f"These {len(by_call)} operation(s) cannot be ordered as model '{model.name}' requires{whence},",
        "even when every other operation may take effect at any time after its call, with any result:",
    ]
    for i in by_call[:_LISTED]:
        op = trial[i]
        lines.append(f"  {name(i)}: {model.describe_operation(op.input, op.output)}")
    if len(by_call) > _LISTED:
        lines.append(f"  ... and {len(by_call) - _LISTED} more")
    configs = frontier.last if stuck_at is not None else frontier.configs
    trace = (frontier.last_trace if stuck_at is not None else frontier.trace) or {}
    orders = sorted((trace.get(c, ()) for c in configs), key=len, reverse=True)
    deepest = orders[0] if orders else ()
    legal = [local[k] for k in deepest if local[k] in shown]
    tail = legal[-_LISTED:]
    lines.append(
        "Longest legal order found: "
        + ("... " if len(legal) > len(tail) else "")
        + (", ".join(name(i) for i in tail) or "none, not even the first of them")
        + "."
    )
    states = sorted({s for _, s in configs}, key=model.describe_state)
    when = "After it" if legal else ("Before it" if len(by_call) == 1 else "Before them")
    lines.append(f"{when}, the state could be: {_states_text(model, states)}")
    stuck = [i for i in by_call if i not in legal]
    if stuck:
        listed = ", ".join(name(i) for i in stuck[:_LISTED]) + (" ..." if len(stuck) > _LISTED else "")
        lines.append(f"None of {listed} can come next with the output it had.")
        if model.describe_expected is not None:
            for i in stuck[:3]:
                answers = sorted({model.describe_expected(s, ops[i].input) for s in states[:4]})
                lines.append(f"  {name(i)}: the model would answer " + " or ".join(answers))
    return "\n".join(lines)


def _states_text(model: Model[S], states: Sequence[S]) -> str:
    shown = [model.describe_state(s) for s in list(states)[:4]]
    return " | ".join(shown) + (" | ..." if len(states) > 4 else "")


# -- checking, once or incrementally ------------------------------------------------------------


@dataclass(slots=True)
class _Part(Generic[S]):
    """One partition's progress: its operations, and the search state kept between runs."""

    indices: list[int] = field(default_factory=list)  # into the checker's history
    fed: int = 0  # how many of ``indices`` are in ``prepared``
    prepared: _Prepared[S] | None = None
    frontier: _Frontier[S] | None = None
    pos: int = 0  # next event of ``prepared.events`` to feed
    failed: int | None = None  # the operation whose return no configuration survived
    last_ns: int = -1  # time of the last event fed
    verdict: Verdict | None = None  # None: not checked yet
    result: PartitionResult | None = None


class Checker(Generic[S]):
    """Checks a history that grows: ``add`` operations, ``run`` to check what is new.

    Each partition keeps its frontier between runs, so appending operations that begin after
    everything already checked costs only the new events; an operation that begins earlier
    makes its partition start over (still correct, just not incremental). A verdict is about the
    operations added so far: ILLEGAL is final once nothing added later began before the last
    answer already added, as in a campaign, whose batches run one after another.
    """

    def __init__(self, model: Model[S], *, max_configs: int = DEFAULT_MAX_CONFIGS) -> None:
        self.model = model
        self.max_configs = max_configs
        self.history: list[Operation] = []
        self._parts: dict[Hashable, _Part[S]] = {}
        self._init = model.init()
        self._violation: PartitionResult | None = None
        # Partitions with operations not yet checked, or whose check ran out of budget: a run
        # visits only these, so its cost does not grow with the partitions already settled.
        self._pending: dict[Hashable, _Part[S]] = {}
        self._unknown = 0  # partitions whose last verdict was UNKNOWN

    def add(self, ops: Iterable[Operation]) -> None:
        key = self.model.partition
        parts = self._parts
        history = self.history
        for op in ops:
            k = None if key is None else key(op.input)
            part = parts.get(k)
            if part is None:
                part = parts[k] = _Part()
            part.indices.append(len(history))
            history.append(op)
            self._pending[k] = part

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
        for done, (key, part) in enumerate(parts):
            if self._violation is not None:
                break
            if progress is not None and time.monotonic() - reported > 2.0:
                reported = time.monotonic()
                progress(f"checked {done}/{len(parts)} partitions ({budget_s - (deadline - reported):.0f} s)")
            self._unknown -= part.verdict is Verdict.UNKNOWN
            why = self._advance(part, deadline)
            self._unknown += part.verdict is Verdict.UNKNOWN
            if part.verdict is not Verdict.UNKNOWN:
                del self._pending[key]
            if why:
                detail = why
            if part.verdict is Verdict.ILLEGAL:
                self._violation = self._illegal(part, explain_budget_s)
        return detail

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
        new_ops = [self.history[i] for i in part.indices[part.fed:]]
        restart = part.prepared is None or any(op.call_ns <= part.last_ns for op in new_ops)
        if restart:
            sub = [self.history[i] for i in part.indices]
            if model.refute is not None and len(sub) >= _PREPASS_MIN_OPS:
                refutation = model.refute(sub, self._init)
                if refutation is not None:
                    part.verdict = Verdict.ILLEGAL
                    part.fed = len(part.indices)
                    part.result = self._refuted(part, refutation)
                    return ""
            part.prepared = _prepare(model, sub)
            part.frontier = _Frontier([self._init], deadline=deadline, max_configs=self.max_configs)
            part.pos = 0
        else:
            assert part.prepared is not None
            grown = _prepare(model, new_ops)
            offset = len(part.prepared.ops)
            p = part.prepared
            p.ops.extend(grown.ops)
            p.fns.extend(grown.fns)
            p.inert.extend(grown.inert)
            p.events.extend((t, k, i + offset) for t, k, i in grown.events)
            p.twins.update((i + offset, text) for i, text in grown.twins.items())
            p.returns.extend(grown.returns)
        part.fed = len(part.indices)
        assert part.frontier is not None and part.prepared is not None
        part.frontier.deadline = deadline
        try:
            part.pos, part.failed = _feed(part.frontier, part.prepared, part.prepared.events, part.pos)
        except _OutOfBudget as exc:
            part.verdict = Verdict.UNKNOWN
            part.pos = exc.pos
            return "the time budget ran out" if exc.why == "time" else (
                f"the search needed more than {self.max_configs} configurations at once")
        events = part.prepared.events
        part.last_ns = events[part.pos - 1][0] if part.pos else -1
        part.verdict = Verdict.OK if part.failed is None else Verdict.ILLEGAL
        return ""

    def _illegal(self, part: _Part[S], explain_budget_s: float) -> PartitionResult:
        if part.result is not None:
            return part.result  # refuted by the model's pre-pass: already explained
        assert part.prepared is not None and part.failed is not None
        ops = part.prepared.ops
        failed = part.failed
        if self.model.refute is not None and len(ops) < _PREPASS_MIN_OPS:
            # The search found it first; the pre-pass's proof, when it has one, reads better.
            refutation = self.model.refute(ops, self._init)
            if refutation is not None:
                return self._refuted(part, refutation)
        if explain_budget_s <= 0:
            return PartitionResult(verdict=Verdict.ILLEGAL, operations=tuple(part.indices),
                                   witness=tuple(part.indices), explanation="(not shrunk: no explanation budget)")
        evidence = _shrink(self.model, ops, failed, self._init, explain_budget_s, self.max_configs)
        explanation = _explain(self.model, ops, evidence, explain_budget_s, part.indices.__getitem__)
        return PartitionResult(verdict=Verdict.ILLEGAL, operations=tuple(part.indices),
                               witness=tuple(sorted(part.indices[i] for i in evidence.witness)),
                               minimal=evidence.minimal, explanation=explanation)

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
                           operations=len(self.history), detail=detail if verdict is Verdict.UNKNOWN else "")


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
    checker = Checker(model, max_configs=max_configs)
    checker.add(history)
    return checker.run(budget_s, explain_budget_s, progress)
