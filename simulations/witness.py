"""Shrinking an illegal partition to the operations to blame, and explaining them.

The search failed at some operation's return: the history as it stood then is illegal. The
latest start time from which the operations are still illegal whatever state the earlier ones
left is found by bisection (when the model knows its universe of states); then each operation
in the window is relaxed in turn (it may take effect at any time after its call, with any
result, or not at all) and stays relaxed while the rest is still illegal. What remains is the
witness, explained by a traced search over it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from simulations.history import Operation
from simulations.search import DEFAULT_MAX_CONFIGS, Frontier, OutOfBudget, feed, linearizable, prepare
from simulations.spec import Model

__all__ = ["Evidence", "explain", "shrink"]

S = TypeVar("S", bound=Hashable)


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
class Evidence(Generic[S]):
    """What the shrinker settled on: a trial history and where it starts."""

    trial: dict[int, Operation]
    witness: list[int]
    starts: list[S]
    t0: int | None  # None: from the model's initial state
    until: int  # the cut: the history as it stood at the failing return
    minimal: bool


def shrink(model: Model[S], ops: Sequence[Operation], failed: int, init: S, budget_s: float,
            max_configs: int) -> Evidence[S]:
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
            return not linearizable(model, list(trial.values()), starts, end, max_configs, cut_ns)
        except OutOfBudget:
            return None

    best = Evidence(trial=cut, witness=[i for i, op in cut.items() if op.output is not None],
                     starts=[init], t0=None, until=cut_ns, minimal=False)
    if universe is not None:
        best = _latest_window(model, cut, universe, best, lambda trial: illegal(trial, universe), deadline)
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


def _latest_window(model: Model[S], cut: Mapping[int, Operation], universe: list[S], best: Evidence[S],
                   illegal: Callable[[Mapping[int, Operation]], bool | None], deadline: float) -> Evidence[S]:
    """The latest start time from which the cut is still illegal from any state (monotone: a
    window that starts earlier holds this one). Windows grow from the end, where they are small
    and cheap to check, until one is illegal; then bisection between it and the last legal one."""
    times = sorted({op.call_ns for op in cut.values()})

    def window(k: int) -> Evidence[S] | None:
        trial = _window(model, cut, times[k])
        if not illegal(trial):
            return None  # legal, or the check ran out of time
        return Evidence(trial=trial, witness=[i for i, op in trial.items() if op.call_ns >= times[k]],
                        starts=universe, t0=times[k], until=best.until, minimal=False)

    first, legal_from, step = 1, len(times), 1
    found: int | None = None
    while found is None and legal_from > first and time.monotonic() < deadline:
        k = max(first, len(times) - step)
        evidence = window(k)
        if evidence is None:
            legal_from = k
        else:
            best, found = evidence, k
        step *= 2
    if found is None:
        return best
    lo, hi = found + 1, legal_from - 1
    while lo <= hi and time.monotonic() < deadline:
        mid = (lo + hi) // 2
        evidence = window(mid)
        if evidence is None:
            hi = mid - 1
        else:
            best, lo = evidence, mid + 1
    return best


_LISTED = 40  # longer lists help nobody; the timeline shows everything


def explain(model: Model[S], ops: Sequence[Operation], evidence: Evidence[S], budget_s: float,
             number: Callable[[int], int]) -> str:
    trial = evidence.trial
    local = list(trial)
    prepared = prepare(model, [trial[i] for i in local], evidence.until)
    frontier = Frontier(evidence.starts, deadline=time.monotonic() + budget_s, max_configs=DEFAULT_MAX_CONFIGS,
                         trace=True)
    try:
        _, stuck_at = feed(frontier, prepared, prepared.events)
    except OutOfBudget:
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
    shown = sorted(model.describe_state(s) for s in states)[:4]  # sorted: the same text every run
    return " | ".join(shown) + (" | ..." if len(states) > 4 else "")
