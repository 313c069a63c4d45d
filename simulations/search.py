"""The frontier search: every configuration that explains a history's events so far.

See ``checker.py`` for the theory of operation. This module is the search alone: operations
prepared into time-ordered events, fed one by one to a ``Frontier``; a return that no
configuration survives is where the history became illegal.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from simulations.history import Operation
from simulations.spec import Model, StepFn

__all__ = ["DEFAULT_MAX_CONFIGS", "Frontier", "OutOfBudget", "Prepared", "feed", "linearizable", "prepare"]

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
                        raise OutOfBudget("time")
                    if len(seen) + len(nxt) > cap:
                        raise OutOfBudget("size")
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
                    # Called and answered while nothing else was open: it takes effect alone.
                    if not frontier.alone(i, fns[i]):
                        return pos + 2, i
                    pos += 2
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
    """One-shot search; raises OutOfBudget."""
    prepared = prepare(model, ops, until)
    frontier = Frontier(starts, deadline=deadline, max_configs=max_configs)
    return feed(frontier, prepared, prepared.events)[1] is None
