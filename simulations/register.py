"""A compare-and-swap register (one per ``key``): the checker's textbook model.

Inputs: ``{"op": "read"}``, ``{"op": "write", "value": v}``, ``{"op": "cas", "expected": e,
"new": n}``, each with an optional ``"key"``; outputs ``{"value": v}`` for a read and
``{"ok": bool}`` for a cas (a write's output is ignored). Every key starts as ``null``.
Histories are partitioned per key, which is where most of the checker's speed comes from.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence

from simulations.checker import Input, Model, Output
from simulations.history import Operation

__all__ = ["CAS_REGISTER", "generate_history"]

# A register holds one JSON value; it is kept as its canonical text so any JSON value hashes.
_State = str
_NULL: _State = "null"


def _canon(value: object) -> _State:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _step(state: _State, op_input: Input, output: Output) -> list[_State]:
    kind = op_input.get("op")
    if kind == "read":
        if output is None:
            return [state]
        return [state] if _canon(output.get("value")) == state else []
    if kind == "write":
        return [_canon(op_input.get("value"))]
    if kind == "cas":
        swapped = _canon(op_input.get("new"))
        matches = _canon(op_input.get("expected")) == state
        if output is None:
            return [swapped, state] if matches else [state]
        if output.get("ok") is True:
            return [swapped] if matches else []
        return [state] if not matches else []
    return []  # an operation this model does not know is never legal


def _partition(history: Sequence[Operation]) -> list[list[int]]:
    parts: dict[str, list[int]] = {}
    for i, op in enumerate(history):
        parts.setdefault(_canon(op.input.get("key")), []).append(i)
    return list(parts.values())


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


def _effect_free(op_input: Mapping[str, object]) -> bool:
    return op_input.get("op") == "read"


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
    describe_operation=_describe_operation,
    describe_state=lambda state: f"value {state}",
    describe_expected=_describe_expected,
)


def generate_history(
    *, seed: int, operations: int, clients: int = 8, keys: int = 1, stale_read: bool = False
) -> list[Operation]:
    """A register history from a real linearization, so it is linearizable by construction.

    Each client runs its operations one after another with random durations; each operation
    takes effect at a random instant inside its interval and sees the register as it is then.
    Written values are unique, so with ``stale_read`` one read that started after a value was
    overwritten (by a write that itself completed before the read began) is made to return that
    value: no order can explain it, and the history becomes illegal.
    """
    rng = random.Random(seed)
    planned: list[tuple[int, int, int, int, str]] = []  # (point, call, return, client, key)
    clock = [rng.randrange(1_000) for _ in range(clients)]
    for n in range(operations):
        client = n % clients
        call = clock[client] + rng.randrange(1, 200)
        ret = call + rng.randrange(1, 2_000)
        clock[client] = ret
        planned.append((rng.randrange(call, ret + 1), call, ret, client, f"k{rng.randrange(keys)}"))
    planned.sort()
    values: dict[str, object] = {}
    ops: list[Operation] = []
    fresh = 0
    for _, call, ret, client, key in planned:
        current = values.get(key)
        roll = rng.random()
        inp: dict[str, object]
        out: dict[str, object]
        if roll < 0.5:
            inp, out = {"op": "read", "key": key}, {"value": current}
        elif roll < 0.8:
            fresh += 1
            inp, out = {"op": "write", "key": key, "value": fresh}, {}
            values[key] = fresh
        else:
            fresh += 1
            expected = current if rng.random() < 0.5 else rng.randrange(fresh)
            inp = {"op": "cas", "key": key, "expected": expected, "new": fresh}
            out = {"ok": expected == current}
            if expected == current:
                values[key] = fresh
        ops.append(Operation(client=client, input=inp, output=out, call_ns=call, return_ns=ret))
    ops.sort(key=lambda op: op.call_ns)
    if stale_read:
        _plant_stale_read(ops, rng)
    return ops


def _plant_stale_read(ops: list[Operation], rng: random.Random) -> None:
    # Writers of a value, by key: (value, call, return), in call order.
    changes: dict[object, list[tuple[object, int, int]]] = {}
    for op in ops:
        if op.return_ns is None or op.output is None:
            continue
        if op.input["op"] == "write" or (op.input["op"] == "cas" and op.output.get("ok") is True):
            new = op.input["value"] if op.input["op"] == "write" else op.input["new"]
            changes.setdefault(op.input.get("key"), []).append((new, op.call_ns, op.return_ns))
    candidates = []
    for i, op in enumerate(ops):
        if op.input["op"] != "read" or op.output is None:
            continue
        writes = changes.get(op.input.get("key"), [])
        for value, _, w_ret in writes:
            # A later change that began after this value's write ended and ended before the read.
            if value != op.output.get("value") and any(
                c_call > w_ret and c_ret < op.call_ns for _, c_call, c_ret in writes
            ):
                candidates.append((i, value))
                break
    if not candidates:
        raise ValueError("no read can be made stale in this history; use more operations")
    i, value = candidates[len(candidates) // 2 + rng.randrange(max(1, len(candidates) // 4))]
    old = ops[i]
    ops[i] = Operation(
        client=old.client, input=old.input, output={"value": value}, call_ns=old.call_ns, return_ns=old.return_ns
    )
