"""The frontier search: every configuration that explains a history's events so far.

See ``checker.py`` for the theory of operation. This module is the search alone: operations
prepared into time-ordered events, fed one by one to a ``Frontier``; a return that no
configuration survives is where the history became illegal. ``linearizable`` asks the compiled
kernel first (``native.py``), which runs the same search on integers and gives the same answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import simulations.linearizability.native as native
from simulations.linearizability.history import Operation
from simulations.linearizability.spec import Model, StepFn

__all__ = ["DEFAULT_MAX_CONFIGS", "Frontier", "OutOfBudget", "Prepared", "feed", "linearizable", "native_verdict",
           "prepare"]

S = TypeVar("S", bound=Hashable)

# About 120 bytes per configuration in CPython: the default keeps a search under ~250 MB even
# when every open operation doubles the frontier.
DEFAULT_MAX_CONFIGS = 1_000_000
_TICK = 1023  # check the clock every 1024 expansions


class OutOfBudget(Exception):
    """The search ran out of time ("time") or of room ("size"); ``pos``: the event it was on."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
        self.pos = 0


class Frontier(Generic[S]):
    """Every configuration that explains the events fed so far (see the module docstring).

    ``call`` and ``ret`` must be fed in time order, calls before returns at equal times. A
    ``ret`` either completes or raises ``OutOfBudget`` leaving the frontier as it was, so a
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

    @property
    def open(self) -> bool:
        """Whether any operation called is still open (not taken effect, or never answered)."""
        return bool(self._bit)

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

    def alone_all(self, ops: Sequence[int], fns: Sequence[StepFn[S]]) -> int | None:
        """``alone`` for operations one after another; the first that no configuration
        survives, or None. While there is one configuration and no trace (most of a history
        whose operations rarely overlap) the state is stepped directly, without a set per
        operation."""
        n, end = 0, len(ops)
        while n < end:
            if self.trace is None and len(self.configs) == 1:
                (_, s), = self.configs
                prev, start = s, n
                while n < end:
                    nxt = fns[ops[n]](s)
                    if len(nxt) != 1:  # refused, or more than one way on: the general step
                        break
                    prev, s = s, nxt[0]
                    n += 1
                if n > start:
                    self.last, self.configs = {(0, prev)}, {(0, s)}
                if n == end:
                    return None
            if not self.alone(ops[n], fns[ops[n]]):
                return ops[n]
            n += 1
        return None

    def ret(self, op: int) -> bool:
        """Process the return of ``op``; False when no configuration survives it."""
        bit = self._bit[op]
        survivors = self._ret_one_way(op, bit) if len(self.configs) == 1 and self.trace is None else None
        if survivors is None:
            survivors = self._ret_every_way(op, bit)
        self._commit(op, bit, survivors)
        return bool(survivors)

    def _ret_one_way(self, op: int, bit: int) -> set[tuple[int, S]] | None:
        """The common case, one way to explain everything so far: no search is needed when the
        operation already took effect, or when nothing else that changes the state is open
        (None: something is, so search)."""
        (mask, state), = self.configs
        if mask & bit:
            return {(mask ^ bit, state)}
        if len(self._effectful) != (bit in self._effectful):
            return None
        survivors = set()
        for after in self._fn[op](state):
            applied = mask
            for other, fn in self._inert.items():
                if other != bit and not applied & other and fn(after):
                    applied |= other
            survivors.add((applied, after))
        return survivors

    def _ret_every_way(self, op: int, bit: int) -> set[tuple[int, S]]:
        """Each configuration extended by every sequence of open operations ending with ``op``."""
        trace = self.trace
        survivors: set[tuple[int, S]] = set()
        orders: dict[tuple[int, S], tuple[int, ...]] = {}  # survivor -> its order (with trace)
        pending: list[tuple[int, S]] = []
        for config in self.configs:
            mask, state = config
            if mask & bit:  # it already took effect
                survivors.add((mask ^ bit, state))
                if trace is not None:
                    orders.setdefault((mask ^ bit, state), trace[config])
            else:
                pending.append(config)
        if pending:
            self._explore(op, bit, pending, survivors, orders)
        if self._forever and len(survivors) > 1:
            survivors = _prune_unused(survivors, self._forever)
        if trace is not None:
            self.last_trace = trace
            self.trace = {c: orders[c] for c in survivors}
        return survivors

    def _explore(self, op: int, bit: int, pending: list[tuple[int, S]], survivors: set[tuple[int, S]],
                 orders: dict[tuple[int, S], tuple[int, ...]]) -> None:
        """Depth first from each pending configuration: ``op`` takes effect now (a survivor), or
        another open operation that changes the state does first (explored further)."""
        finish = self._fn[op]
        inert = [(other, fn) for other, fn in self._inert.items() if other != bit]
        # The open effect-free operations legal in a state, as bits: they take effect as soon as
        # they are legal, and which are legal depends on the state alone (asked once per state).
        legal_in: dict[S, int] = {}
        lower = self._lower
        movers = [(other, fn, lower.get(other, 0)) for other, fn in self._effectful.items() if other != bit]
        forever = self._forever
        trace = self.trace
        seen = set(pending)
        stack = pending
        work = self._work
        while stack:
            work += 1
            if not work & _TICK:
                if time.monotonic() > self.deadline:
                    raise OutOfBudget("time")
                if len(seen) + len(survivors) > self.max_configs:
                    raise OutOfBudget("size")
            mask, state = stack.pop()
            order = trace[(mask, state)] if trace is not None else ()
            for after in finish(state):
                legal = legal_in.get(after)
                if legal is None:
                    legal = legal_in[after] = _legal(inert, after)
                survivors.add((mask | legal, after))
                if trace is not None:
                    orders.setdefault((mask | legal, after), order + (op,))
            for other, fn, twins_before in movers:
                if mask & other or mask & twins_before != twins_before:
                    continue  # taken already, or an earlier interchangeable twin is not
                for after in fn(state):
                    if after == state and other & forever:
                        continue  # an answer that never came changing nothing: no news
                    legal = legal_in.get(after)
                    if legal is None:
                        legal = legal_in[after] = _legal(inert, after)
                    config = (mask | other | legal, after)
                    if config not in seen:
                        seen.add(config)
                        stack.append(config)
                        if trace is not None:
                            trace[config] = order + (self._op_at[other],)
        self._work = work

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


def _legal(inert: Sequence[tuple[int, StepFn[S]]], state: S) -> int:
    """The bits of the effect-free operations in ``inert`` that are legal in ``state``."""
    bits = 0
    for b, fn in inert:
        if fn(state):
            bits |= b
    return bits


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
class Prepared(Generic[S]):
    """One partition's operations, ready for the frontier: events in time order."""

    ops: list[Operation]
    fns: list[StepFn[S]]
    inert: list[bool]
    events: list[tuple[int, int, int]]  # (time, 0 call / 1 return, op)
    returns: list[bool]  # has a return event (False: unanswered, or answered after the cut)
    twins: dict[int, str]  # unanswered effectful op -> its input's text, to spot twins


def prepare(model: Model[S], ops: Sequence[Operation], until: int | None = None) -> Prepared[S]:
    """``until``: the history as it stood then; later calls are left out, and operations still
    open then keep their answer but need not take effect (their return is not yet seen)."""
    compile_ = model.compile
    effect_free = model.effect_free
    if compile_ is not None:
        fns = [compile_(op.input, op.output) for op in ops]
    else:
        fns = [model.compiled(op) for op in ops]
    if effect_free is None:
        inert = [False] * len(fns)
    else:
        # Whether an operation is effect-free is a property of its step, so operations sharing
        # one compiled step (the register compiles each distinct signature once) ask once.
        inert_of: dict[StepFn[S], bool] = {}
        inert = []
        for fn, op in zip(fns, ops):
            known = inert_of.get(fn)
            if known is None:
                known = inert_of[fn] = effect_free(op.input, op.output)
            inert.append(known)
    if until is None:
        returns = [op.return_ns is not None for op in ops]
    else:
        returns = [op.return_ns is not None and op.return_ns <= until for op in ops]
    events: list[tuple[int, int, int]] = []
    twins: dict[int, str] = {}
    add_event = events.append
    for i, op in enumerate(ops):
        if (inert[i] and op.output is None) or (until is not None and op.call_ns > until):
            continue  # an effect-free operation with an unknown answer constrains nothing
        add_event((op.call_ns, 0, i))
        if returns[i]:
            add_event((op.return_ns, 1, i))  # type: ignore[arg-type]
        elif op.output is None:
            twins[i] = json.dumps(op.input, sort_keys=True, default=repr)
    events.sort()
    return Prepared(list(ops), fns, inert, events, returns, twins)


def feed(frontier: Frontier[S], prepared: Prepared[S], events: Sequence[tuple[int, int, int]],
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
                    # Called and answered while nothing else was open: it takes effect alone, as
                    # do the operations right after it that overlap nothing either.
                    run = [i]
                    nxt = pos + 2
                    while nxt + 1 < end and events[nxt][1] == 0 and events[nxt + 1][2] == events[nxt][2]:
                        run.append(events[nxt][2])
                        nxt += 2
                    failed = frontier.alone_all(run, fns)
                    if failed is not None:
                        return pos + 2 * (run.index(failed) + 1), failed
                    pos = nxt
                    continue
                frontier.call(i, fns[i], inert=inert[i], returns=returns[i], twin=twins.get(i))
            elif not frontier.ret(i):
                return pos + 1, i
            pos += 1
    except OutOfBudget as exc:
        exc.pos = pos  # the event that did not complete: where a later run resumes
        raise
    return len(events), None


def linearizable(model: Model[S], ops: Sequence[Operation], starts: Iterable[S], deadline: float,
                  max_configs: int, until: int | None = None) -> bool:
    """One-shot search, by the compiled kernel when it can; raises OutOfBudget."""
    starts = list(starts)
    if native.available(model):
        outcome = native.search_operations(model, ops, starts, deadline=deadline, max_configs=max_configs,
                                           until=until)
        if outcome is not None and outcome.status != native.Outcome.TOO_WIDE:
            return native_verdict(outcome)
    prepared = prepare(model, ops, until)
    frontier = Frontier(starts, deadline=deadline, max_configs=max_configs)
    return feed(frontier, prepared, prepared.events)[1] is None


def native_verdict(outcome: native.Outcome) -> bool:
    """The kernel's answer as ``feed`` gives it: linearizable or not; raises OutOfBudget."""
    if outcome.status == native.Outcome.OUT_OF_TIME or outcome.status == native.Outcome.OUT_OF_ROOM:
        exc = OutOfBudget("time" if outcome.status == native.Outcome.OUT_OF_TIME else "size")
        exc.pos = outcome.pos
        raise exc
    return outcome.status == native.Outcome.OK
