"""A key-value store of strings with get, put and append: Porcupine's ``kvModel``.

Inputs: ``{"op": "get", "key": k}``, ``{"op": "put", "key": k, "value": v}``, ``{"op": "append",
"key": k, "value": v}``; a get's output is ``{"value": v}``. Every key starts as the empty
string (or ``--init``), and histories are partitioned per key, as Porcupine does.
"""

from __future__ import annotations

from simulations.linearizability.checker import Input, Model, Output
from simulations.errors import SimulationError

__all__ = ["KV"]


def _step(state: str, op_input: Input, output: Output) -> tuple[str, ...]:
    kind = op_input.get("op")
    if kind == "get":
        return (state,) if output is None or output.get("value") == state else ()
    if kind == "put":
        return (str(op_input.get("value")),)
    if kind == "append":
        return (state + str(op_input.get("value")),)
    return ()  # an operation this model does not know is never legal


def _initial(value: object) -> str:
    if not isinstance(value, str):
        raise SimulationError(f"the kv model's initial value is a string, not {value!r}")
    return value


def _describe_operation(op_input: Input, output: Output) -> str:
    kind, key = op_input.get("op"), op_input.get("key")
    if kind == "get":
        return f"get({key!r}) -> {'?' if output is None else repr(output.get('value'))}"
    return f"{kind}({key!r}, {op_input.get('value')!r})"


KV: Model[str] = Model(
    name="kv",
    init=lambda: "",
    step=_step,
    partition=lambda op_input: str(op_input.get("key")),
    effect_free=lambda op_input, output: op_input.get("op") == "get",
    initial=_initial,
    describe_operation=_describe_operation,
    describe_state=repr,
    describe_expected=lambda state, op_input: repr(state) if op_input.get("op") == "get" else "ok",
    key_field="key",
)
