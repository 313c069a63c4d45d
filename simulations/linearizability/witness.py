"""Shrinking an illegal partition to the operations to blame, and explaining them.

The search failed at some operation's return: the history as it stood then is illegal. The
latest start time from which the operations are still illegal whatever state the earlier ones
left is found by bisection (when the model knows its universe of states); then each operation
in the window is relaxed in turn (it may take effect at any time after its call, with any
result, or not at all) and stays relaxed while the rest is still illegal. What remains is the
witness. The explanation starts from the operation whose answer failed: the states the
recorded history lets it take effect in (a search of the history with that operation replaced
by a probe), what the model would have answered in each, then the witness.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from simulations.linearizability.history import Operation
from simulations.linearizability.search import DEFAULT_MAX_CONFIGS, Frontier, OutOfBudget, feed, linearizable, prepare
from simulations.linearizability.spec import Input, Model, Output

__all__ = ["Evidence", "Explanation", "explain", "shrink"]

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
    failed: int  # the operation whose return no configuration survived


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
                     starts=[init], t0=None, until=cut_ns, minimal=False, failed=failed)
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
                        starts=universe, t0=times[k], until=best.until, minimal=False,
                        failed=best.failed)

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
_STATES_LISTED = 6


@dataclass(frozen=True, slots=True)
class Explanation:
    """The text, and for the operation whose answer failed, what the model would have answered
    in each state it could have taken effect in (``expected``: operation index -> answers)."""

    text: str
    expected: dict[int, tuple[str, ...]]


def explain(model: Model[S], ops: Sequence[Operation], evidence: Evidence[S], budget_s: float,
            number: Callable[[int], int]) -> Explanation:
    """Say which answer failed, in which states the recorded history lets it take effect and what
    the model would have answered there, and which operations the shrunk witness blames."""
    deadline = time.monotonic() + budget_s

    def name(i: int) -> str:
        return f"#{number(i)} (client {ops[i].client})"

    failed = evidence.failed
    lines = [f"{name(failed)}: {model.describe_operation(ops[failed].input, ops[failed].output)}",
             f"has an answer that no order of the recorded operations explains (model '{model.name}')."]
    expected: dict[int, tuple[str, ...]] = {}
    states = _states_before(model, ops, evidence, deadline)
    if states is None:
        lines.append("(the states it could have taken effect in were not listed: the explanation budget ran out)")
    elif states:
        answers = [(model.describe_state(s), _expected(model, s, ops[failed].input)) for s in states]
        expected[failed] = tuple(sorted({a for _, a in answers if a}))
        lines.append("Given every answer recorded before its own, it can take effect only while the state is one "
                     "of these" + (", where the model would have answered:" if model.describe_expected else ":"))
        shown = sorted(set(answers))
        for state, answer in shown[:_STATES_LISTED]:
            lines.append(f"  {state}" + (f": {answer}" if answer else ""))
        if len(shown) > _STATES_LISTED:
            lines.append(f"  ... and {len(shown) - _STATES_LISTED} more")
    lines += _blamed(model, ops, evidence, deadline, name)
    return Explanation("\n".join(lines), expected)


def _expected(model: Model[S], state: S, op_input: Input) -> str:
    return "" if model.describe_expected is None else model.describe_expected(state, op_input)


def _blamed(model: Model[S], ops: Sequence[Operation], evidence: Evidence[S], deadline: float,
            name: Callable[[int], str]) -> list[str]:
    """The shrunk witness: the operations to blame, and the longest legal order among them."""
    by_call = sorted(evidence.witness, key=lambda i: ops[i].call_ns)
    whence = ("" if evidence.t0 is None else
              f", starting from any state the earlier operations may have left "
              f"({_states_text(model, evidence.starts)})")
    if by_call == [evidence.failed]:
        return [f"It alone is to blame: it cannot take effect as model '{model.name}' requires{whence}, even when "
                "every other operation may take effect at any time after its call, with any result."]
    lines = [
        f"The operations to blame: these {len(by_call)} cannot be ordered as model '{model.name}' requires{whence},",
        "even when every other operation may take effect at any time after its call, with any result:",
    ]
    for i in by_call[:_LISTED]:
        op = evidence.trial[i]
        lines.append(f"  {name(i)}: {model.describe_operation(op.input, op.output)}")
    if len(by_call) > _LISTED:
        lines.append(f"  ... and {len(by_call) - _LISTED} more")
    if len(by_call) < 2:
        return lines
    trial = evidence.trial
    local = list(trial)
    prepared = prepare(model, [trial[i] for i in local], evidence.until)
    frontier = Frontier(evidence.starts, deadline=deadline, max_configs=DEFAULT_MAX_CONFIGS, trace=True)
    try:
        _, stuck_at = feed(frontier, prepared, prepared.events)
    except OutOfBudget:
        return lines
    configs = frontier.last if stuck_at is not None else frontier.configs
    trace = (frontier.last_trace if stuck_at is not None else frontier.trace) or {}
    orders = sorted((trace.get(c, ()) for c in configs), key=len, reverse=True)
    shown = set(evidence.witness)
    legal = [local[k] for k in (orders[0] if orders else ()) if local[k] in shown]
    tail = legal[-_LISTED:]
    lines.append("Longest legal order of them: " + ("... " if len(legal) > len(tail) else "")
                 + (", ".join(name(i) for i in tail) or "none, not even the first") + ".")
    return lines


# The probe that stands in for the failed operation: a state of the inner model, and the state
# the probe saw when it took effect (None: not yet).
_Probed = tuple[S, S | None]
_PROBE = "__probe__"


def _states_before(model: Model[S], ops: Sequence[Operation], evidence: Evidence[S],
                   deadline: float) -> list[S] | None:
    """Every state in which the failed operation could have taken effect, given every other
    answer recorded up to its return; None when the budget ran out.

    The failed operation is replaced by a probe over the same interval that changes nothing
    and remembers the state it took effect in. A configuration that survives to the probe's
    return remembers a state the recorded history allows at some instant of that interval: the
    search keeps only the orders every recorded answer agrees with, so no state is listed that
    the history (the timeline's table) rules out.
    """
    failed = ops[evidence.failed]
    probe = Operation(client=failed.client, input={_PROBE: True}, output={}, call_ns=failed.call_ns,
                      return_ns=failed.return_ns)
    others = [op for i, op in enumerate(ops) if i != evidence.failed and op.call_ns <= evidence.until]
    inner_step, effect_free = model.step, model.effect_free

    def step(state: _Probed[S], op_input: Input, output: Output) -> list[_Probed[S]]:
        inner, seen = state
        if op_input.get(_PROBE):
            return [(inner, inner)] if seen is None else []
        return [(s, seen) for s in inner_step(inner, op_input, output)]

    probing: Model[_Probed[S]] = Model(
        name=model.name, init=lambda: (model.init(), None), step=step,
        effect_free=None if effect_free is None else (
            lambda op_input, output: not op_input.get(_PROBE) and effect_free(op_input, output)))
    prepared = prepare(probing, [*others, probe], evidence.until)
    frontier: Frontier[_Probed[S]] = Frontier([(model.init(), None)], deadline=deadline,
                                              max_configs=DEFAULT_MAX_CONFIGS)
    try:
        _, stuck = feed(frontier, prepared, prepared.events)
    except OutOfBudget:
        return None
    if stuck is not None:
        return []  # the others alone do not fit either: nothing true to say about one state
    seen = {s for _, (_, s) in frontier.configs if s is not None}
    return sorted(seen, key=model.describe_state)


def _states_text(model: Model[S], states: Sequence[S]) -> str:
    shown = sorted(model.describe_state(s) for s in states)[:4]  # sorted: the same text every run
    return " | ".join(shown) + (" | ..." if len(states) > 4 else "")
