"""A compare-and-swap register (one per ``key``): the checker's textbook model, and its histories.

Inputs: ``{"op": "read"}``, ``{"op": "write", "value": v}``, ``{"op": "cas", "expected": e,
"new": n}``, each with an optional ``"key"``; outputs ``{"value": v}`` for a read and
``{"ok": bool}`` for a cas (a write's output is ignored). Every key starts as ``null`` unless an
initial value is given (``--init 0``, or ``"init"`` in the history file's header), as
Porcupine's register models start at 0. Histories are partitioned per key.

``refute`` is the value pre-pass: a read of ``v`` (or a successful cas from ``v``) is
impossible when every operation that could have written ``v`` before it returned was over
before some other write began and ended, all before the read began. That costs one sort and
answers the common stale read without any search.

``generate_history`` writes histories the way Porcupine's users record them: K clients against
one locked register per key, uniform read/write/cas over a few values, optionally with one
planted stale read or double cas that no order can explain.
"""

from __future__ import annotations

import bisect
import heapq
import json
import random
from collections.abc import Sequence
from enum import StrEnum

from simulations.linearizability.checker import Guarded, Input, Model, Output, Refutation, StepFn, Update
from simulations.errors import SimulationError
from simulations.linearizability.history import Operation

__all__ = ["CAS_REGISTER", "Plant", "generate_history"]

# A register holds one JSON value, kept as its canonical text so that any JSON value hashes
# and 1, 1.0 and true stay apart.
_State = str
_NULL: _State = "null"
_CANON: dict[tuple[type, object], str] = {}
_EMPTY: tuple[_State, ...] = ()


def _canon(value: object) -> _State:
    kind = type(value)
    if kind in (int, str, bool, float) or value is None:
        key = (kind, value)
        text = _CANON.get(key)
        if text is None:
            text = json.dumps(value)
            if len(_CANON) < 100_000:
                _CANON[key] = text
        return text
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _step(state: _State, op_input: Input, output: Output) -> Sequence[_State]:
    return _compile(op_input, output)(state)


_COMPILED: dict[tuple[object, ...], StepFn[_State]] = {}


def _compile(op_input: Input, output: Output) -> StepFn[_State]:
    """One operation's step; operations with the same scalar arguments share one function."""
    kind = op_input.get("op")
    if kind == "read":
        value = None if output is None else output.get("value")
        sig: tuple[object, ...] = (kind, output is None, type(value), value)
    elif kind == "write":
        value = op_input.get("value")
        sig = (kind, type(value), value)
    else:
        e, n = op_input.get("expected"), op_input.get("new")
        sig = (kind, None if output is None else output.get("ok") is True, type(e), e, type(n), n)
    try:
        fn = _COMPILED.get(sig)
    except TypeError:  # a list or object argument: not hashable, compile it afresh
        return _compile_one(op_input, output)
    if fn is None:
        fn = _compile_one(op_input, output)
        if len(_COMPILED) < 100_000:
            _COMPILED[sig] = fn
    return fn


def _compile_one(op_input: Input, output: Output) -> StepFn[_State]:
    kind = op_input.get("op")
    if kind == "read":
        if output is None:
            return lambda s: (s,)
        seen = _canon(output.get("value"))
        return lambda s: (s,) if s == seen else _EMPTY
    if kind == "write":
        written = (_canon(op_input.get("value")),)
        return lambda s: written
    if kind == "cas":
        expected = _canon(op_input.get("expected"))
        swapped = (_canon(op_input.get("new")),)
        if output is None:
            return lambda s: swapped if s == expected else (s,)
        if output.get("ok") is True:
            return lambda s: swapped if s == expected else _EMPTY
        return lambda s: (s,) if s != expected else _EMPTY
    return lambda s: _EMPTY  # an operation this model does not know is never legal


def _rule(op_input: Input, output: Output) -> Guarded[_State]:
    """``_compile_one`` as a guarded update, for the compiled kernel."""
    kind = op_input.get("op")
    if kind == "read":
        if output is None:
            return Guarded(None, Update.KEEP, Update.KEEP)
        return Guarded(_canon(output.get("value")), Update.KEEP, Update.REFUSE)
    if kind == "write":
        written = _canon(op_input.get("value"))
        return Guarded(None, written, written)
    if kind == "cas":
        expected, new = _canon(op_input.get("expected")), _canon(op_input.get("new"))
        if output is None:
            return Guarded(expected, new, Update.KEEP)
        if output.get("ok") is True:
            return Guarded(expected, new, Update.REFUSE)
        return Guarded(expected, Update.REFUSE, Update.KEEP)
    return Guarded(None, Update.REFUSE, Update.REFUSE)


def _effect_free(op_input: Input, output: Output) -> bool:
    kind = op_input.get("op")
    return kind == "read" or (kind == "cas" and output is not None and output.get("ok") is not True)


def _partition(op_input: Input) -> object:
    key = op_input.get("key")
    return key if type(key) is str else _canon(key)


def _written(op: Operation) -> _State | None:
    """The value an operation may write (None: it cannot write)."""
    kind = op.input.get("op")
    if kind == "write":
        return _canon(op.input.get("value"))
    if kind == "cas" and (op.output is None or op.output.get("ok") is True):
        return _canon(op.input.get("new"))
    return None


def _needed(op: Operation) -> _State | None:
    """The value an operation proves the register held (None: it proves nothing)."""
    if op.output is None:
        return None
    kind = op.input.get("op")
    if kind == "read":
        return _canon(op.output.get("value"))
    if kind == "cas" and op.output.get("ok") is True:
        return _canon(op.input.get("expected"))
    return None


def _refute(ops: Sequence[Operation], init: _State) -> Refutation | None:
    """The value pre-pass (see the module docstring); a sound proof or None."""
    inf = float("inf")
    # Possible writers of each value, by call time, with the running latest return.
    writers: dict[_State, list[tuple[int, float, int]]] = {}
    # Certain writes (they returned, so they took effect within their interval), by call time.
    certain: list[tuple[int, int, _State, int]] = []
    for i, op in enumerate(ops):
        value = _written(op)
        if value is None:
            continue
        end = inf if op.return_ns is None else op.return_ns
        writers.setdefault(value, []).append((op.call_ns, end, i))
        if op.output is not None and op.return_ns is not None:
            certain.append((op.call_ns, op.return_ns, value, i))
    calls: dict[_State, list[int]] = {}
    latest: dict[_State, list[tuple[float, int]]] = {}  # running (max return, its op)
    for value, rows in writers.items():
        rows.sort()
        calls[value] = [c for c, _, _ in rows]
        best: tuple[float, int] = (-inf, -1)
        run = []
        for _, end, i in rows:
            if end > best[0]:
                best = (end, i)
            run.append(best)
        latest[value] = run
    certain.sort()
    starts = [c for c, _, _, _ in certain]
    # Suffix minima of the return of certain writes, keeping the best two distinct values, so
    # "the earliest-ending write of a value other than v among those called after t" is O(log n).
    suffix: list[tuple[tuple[int, _State, int] | None, tuple[int, _State, int] | None]] = [(None, None)] * (
        len(certain) + 1)
    for k in range(len(certain) - 1, -1, -1):
        _, end, value, i = certain[k]
        first, second = suffix[k + 1]
        row = (end, value, i)
        if first is None or end < first[0]:
            second = first if first is None or first[1] != value else second
            first = row
        elif value != first[1] and (second is None or end < second[0]):
            second = row
        suffix[k] = (first, second)
    for r, op in enumerate(ops):
        value = _needed(op)
        if value is None or op.return_ns is None or _written(op) == value:
            continue
        # The writers of ``value`` that could take effect before ``op`` does.
        k = bisect.bisect_right(calls.get(value, []), op.return_ns)
        if k:
            last_end, last = latest[value][k - 1]
        elif value == init:
            last_end, last = -inf, -1  # only the initial value, "written" before everything
        else:
            return Refutation(witness=(r,), explanation=_no_source(op, r, value, init))
        if last_end == inf:
            continue
        first, second = suffix[bisect.bisect_right(starts, last_end)]
        cover = first if first is not None and first[1] != value else second
        if cover is not None and cover[0] < op.call_ns:
            witness = tuple(sorted({r, cover[2]} | ({last} if last >= 0 else set())))
            return Refutation(witness=witness, explanation=_covered(ops, r, value, last, cover[2], init))
    return None


def _no_source(op: Operation, r: int, value: _State, init: _State) -> str:
    return (f"#{r} (client {op.client}): {_describe_operation(op.input, op.output)} is impossible: no operation "
            f"that could write {value} was called before it returned, and the register started as {init}.")


def _covered(ops: Sequence[Operation], r: int, value: _State, last: int, cover: int, init: _State) -> str:
    op, w2 = ops[r], ops[cover]
    source = ("the initial value" if last < 0 else
              f"#{last} (client {ops[last].client}): {_describe_operation(ops[last].input, ops[last].output)}, "
              f"which ended at {ops[last].return_ns}")
    return "\n".join([
        f"#{r} (client {op.client}): {_describe_operation(op.input, op.output)} is impossible.",
        f"  The register can hold {value} only through an operation that could write it before #{r}"
        f" returned; the last of them to end is {source}.",
        f"  #{cover} (client {w2.client}): {_describe_operation(w2.input, w2.output)} began after that"
        f" ({w2.call_ns}) and ended ({w2.return_ns}) before #{r} began ({op.call_ns}),",
        f"  so when #{r} takes effect the register no longer holds {value}, whatever the order.",
    ])


def _universe(ops: Sequence[Operation], init: _State) -> set[_State]:
    """Every value a register of this partition could hold (a superset is fine)."""
    values = {init}
    for op in ops:
        written = _written(op)
        if written is not None:
            values.add(written)
    return values


def _describe_operation(op_input: Input, output: Output) -> str:
    key = f"[{op_input['key']}]" if "key" in op_input else ""
    kind = op_input.get("op")
    if kind == "read":
        got = "?" if output is None else _canon(output.get("value"))
        return f"read{key} -> {got}"
    if kind == "write":
        return f"write{key}({_canon(op_input.get('value'))})"
    if kind == "cas":
        got = "?" if output is None else ("ok" if output.get("ok") is True else "failed")
        return f"cas{key}({_canon(op_input.get('expected'))} -> {_canon(op_input.get('new'))}) -> {got}"
    return f"unknown operation {_canon(dict(op_input))}"


def _describe_expected(state: _State, op_input: Input) -> str:
    kind = op_input.get("op")
    if kind == "read":
        return f"value {state}"
    if kind == "cas":
        return "ok" if _canon(op_input.get("expected")) == state else "failed"
    return "ok"


CAS_REGISTER: Model[_State] = Model(
    name="cas-register",
    init=lambda: _NULL,
    step=_step,
    partition=_partition,
    effect_free=_effect_free,
    compile=_compile,
    refute=_refute,
    universe=_universe,
    initial=_canon,
    describe_operation=_describe_operation,
    describe_state=lambda state: f"value {state}",
    describe_expected=_describe_expected,
    rule=_rule,
    key_field="key",
)


# -- histories as Porcupine's users record them ----------------------------------------------------


class Plant(StrEnum):
    """A fault planted into a generated history so that no order can explain it."""

    STALE_READ = "stale-read"  # a read returns a value that was certainly overwritten
    DOUBLE_CAS = "double-cas"  # two concurrent cas from the same value both succeed


def generate_history(
    *,
    seed: int,
    operations: int,
    clients: int = 8,
    keys: int = 1,
    values: int = 5,
    init: int = 0,
    plant: Plant | None = None,
) -> list[Operation]:
    """K clients against one locked register per key, recorded as Porcupine's users do.

    Each client calls, its request reaches the server after a network delay, waits for the
    key's lock (first come, first served), takes effect while holding it, and its answer comes
    back after another delay; then it calls again. Operations are read, write and cas with equal
    probability, over values ``0 .. values-1``, each key starting at ``init``; times are in ns.
    So the history is linearizable by construction, until ``plant`` makes it not.

    Raises:
        SimulationError: when the history is too short to plant the fault in.
    """
    rng = random.Random(seed)
    free_at = [0] * keys  # when each key's lock is next free
    state = [init] * keys
    # Clients in the order their next request reaches the server: (arrival, client, call).
    pending: list[tuple[int, int, int]] = []
    for client in range(clients):
        call = rng.randrange(1_000)
        heapq.heappush(pending, (call + rng.randrange(1, 1_000), client, call))
    ops: list[Operation] = []
    while len(ops) < operations:
        arrival, client, call = heapq.heappop(pending)
        key = rng.randrange(keys)
        start = max(arrival, free_at[key])
        free_at[key] = start + rng.randrange(10, 100)  # the lock is held while the op takes effect
        roll = rng.randrange(3)
        inp: dict[str, object]
        out: dict[str, object]
        if roll == 0:
            inp, out = {"op": "read"}, {"value": state[key]}
        elif roll == 1:
            value = rng.randrange(values)
            inp, out = {"op": "write", "value": value}, {}
            state[key] = value
        else:
            expected, new = rng.randrange(values), rng.randrange(values)
            inp, out = {"op": "cas", "expected": expected, "new": new}, {"ok": state[key] == expected}
            if state[key] == expected:
                state[key] = new
        if keys > 1:
            inp["key"] = f"k{key}"
        ret = free_at[key] + rng.randrange(1, 1_000)
        ops.append(Operation(client=client, input=inp, output=out, call_ns=call, return_ns=ret))
        nxt = ret + rng.randrange(1, 50)
        heapq.heappush(pending, (nxt + rng.randrange(1, 1_000), client, nxt))
    ops.sort(key=lambda op: op.call_ns)
    if plant is Plant.STALE_READ:
        _plant_stale_read(ops, rng, _canon(init))
    elif plant is Plant.DOUBLE_CAS:
        _plant_double_cas(ops, rng)
    return ops


def _plant_stale_read(ops: list[Operation], rng: random.Random, init: _State) -> None:
    """Make one read in the middle return a value that the pre-pass proves overwritten."""
    order = list(range(len(ops) // 3, len(ops)))
    rng.shuffle(order)
    for r in order:
        op = ops[r]
        if op.input["op"] != "read" or op.output is None:
            continue
        seen = op.output.get("value")
        for value in sorted({_written(o) for o in ops[:r]} - {None, _canon(seen)}, key=str):
            assert value is not None
            trial = list(ops)
            trial[r] = Operation(client=op.client, input=op.input, output={"value": json.loads(value)},
                                 call_ns=op.call_ns, return_ns=op.return_ns)
            if _refute([o for o in trial if o.input.get("key") == op.input.get("key")], init) is not None:
                ops[r] = trial[r]
                return
    raise SimulationError("no read can be made stale in this history; use more operations")


def _plant_double_cas(ops: list[Operation], rng: random.Random) -> None:
    """Turn a concurrent read or failed cas into a second successful cas from the same value.

    Around a successful ``cas(e -> n)`` whose neighbourhood holds no operation that could write
    ``e``, another client's overlapping effect-free operation becomes the same cas, answered ok:
    both need the register to hold ``e`` and nothing can put ``e`` back between them.
    """
    calls = [op.call_ns for op in ops]
    longest = max(op.return_ns - op.call_ns for op in ops if op.return_ns is not None)
    order = list(range(len(ops) // 3, len(ops)))
    rng.shuffle(order)
    for c in order:
        first = ops[c]
        if first.input["op"] != "cas" or first.output is None or first.output.get("ok") is not True:
            continue
        first_end = first.return_ns
        if first.input["expected"] == first.input["new"] or first_end is None:
            continue
        key, expected = first.input.get("key"), _canon(first.input["expected"])
        near = range(bisect.bisect_left(calls, first.call_ns - longest), bisect.bisect_right(calls, first_end))
        for x in near:
            other = ops[x]
            other_end = other.return_ns
            if (other.client == first.client or other.input.get("key") != key or other_end is None
                    or other_end < first.call_ns or not _effect_free(other.input, other.output)):
                continue
            lo, hi = min(first.call_ns, other.call_ns), max(first_end, other_end)
            around = range(bisect.bisect_left(calls, lo - longest), bisect.bisect_right(calls, hi))
            if any(ops[o].input.get("key") == key and _written(ops[o]) == expected
                   and (ops[o].return_ns or lo) >= lo for o in around):  # unanswered: open for ever
                continue
            ops[x] = Operation(client=other.client, input=dict(first.input), output={"ok": True},
                               call_ns=other.call_ns, return_ns=other.return_ns)
            return
    raise SimulationError("no cas can be doubled in this history; use more operations")
