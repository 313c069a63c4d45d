"""The checker's compiled kernel (``_native.c``), when it was built, and what it is fed.

The kernel only accelerates: ``available`` is False when the extension was not built (no C
compiler at install time) or ``AIDEMEMO_SIM_PURE`` is set in the environment, and every caller
then takes the pure path, which gives the same verdicts (``tests/sim/test_native.py`` holds the
two equal). The kernel searches models whose steps are ``Guarded`` updates (``Model.rule``),
and keeps fewer configurations than the pure frontier: of two in one state, it drops the one
the other does better (see ``_native.c``), which changes no verdict and no failing return.
Here the rules are encoded as the integers it reads. ``ScannedHistory`` is a JSON-lines history read
by the kernel into columns: each distinct input (less its key) and output is decoded once, and
an ``Operation`` is built only when something asks for it.
"""

from __future__ import annotations

import importlib
import json
import os
from array import array
from collections.abc import Hashable, Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any, Generic, TypeVar, overload

from simulations.linearizability.history import Operation
from simulations.linearizability.spec import Guarded, Model, StepFn, Update

__all__ = ["NO_RETURN", "Encoding", "Outcome", "ScannedHistory", "available", "encode_operations", "scan",
           "search_operations"]

S = TypeVar("S", bound=Hashable)


def _load() -> ModuleType | None:
    if os.environ.get("AIDEMEMO_SIM_PURE"):
        return None
    try:
        return importlib.import_module("simulations.linearizability._native")
    except ImportError:
        return None


_NATIVE = _load()

NO_RETURN = -(2**63)  # the kernel's "no return time"
_KEEP, _REFUSE, _NO_GUARD = -2, -1, -3


class Outcome:
    """The kernel's answer for one partition: ``status`` is one of the constants below."""

    OK, ILLEGAL, OUT_OF_TIME, OUT_OF_ROOM, TOO_WIDE = range(5)
    __slots__ = ("status", "failed", "pos")

    def __init__(self, status: int, failed: int, pos: int) -> None:
        self.status = status
        self.failed = failed  # ILLEGAL: the partition's operation whose return no one survived
        self.pos = pos


def available(model: Model[Any] | None = None) -> bool:
    """Whether the kernel is loaded (and, given a model, can search it)."""
    return _NATIVE is not None and (model is None or model.rule is not None)


class Encoding(Generic[S]):
    """States and rules interned as the kernel's integers, and the kinds of operation."""

    def __init__(self) -> None:
        self.states: dict[S, int] = {}
        self.table = array("i")  # per rule: guard, next when equal, next otherwise
        self.inert = bytearray()  # per rule: effect-free
        self.kind_rule = array("i")
        self.kind_known = bytearray()  # per kind: the output is known
        self._frozen: tuple[bytes, ...] | None = None  # the arrays as the kernel reads them

    def state(self, state: S) -> int:
        found = self.states.get(state)
        if found is None:
            found = self.states[state] = len(self.states)
        return found

    def _target(self, target: S | Update) -> int:
        if target is Update.KEEP:
            return _KEEP
        if target is Update.REFUSE:
            return _REFUSE
        return self.state(target)

    def rule(self, guarded: Guarded[S], inert: bool) -> int:
        self._frozen = None
        guard = _NO_GUARD if guarded.guard is None else self.state(guarded.guard)
        self.table.extend((guard, self._target(guarded.equal), self._target(guarded.other)))
        self.inert.append(inert)
        return len(self.inert) - 1

    def kind(self, rule: int, known: bool) -> int:
        """A new kind of operation: its rule, and whether its answer came."""
        self._frozen = None
        self.kind_rule.append(rule)
        self.kind_known.append(known)
        return len(self.kind_rule) - 1

    def _arrays(self) -> tuple[bytes, ...]:
        if self._frozen is None:
            self._frozen = (self.kind_rule.tobytes(), bytes(self.kind_known), self.table.tobytes(), bytes(self.inert))
        return self._frozen

    def search(self, calls: Any, rets: Any, kinds: Any, starts: Sequence[S], *, deadline: float, max_configs: int,
               index: Any = b"", until: int | None = None) -> Outcome:
        """One partition's search: the operations ``index`` names (all of them when empty)."""
        assert _NATIVE is not None
        first = array("i", [self.state(s) for s in starts]).tobytes()
        kind_rule, kind_known, table, inert = self._arrays()
        status, failed, pos = _NATIVE.search(calls, rets, kinds, index, kind_rule, kind_known, table, inert, first,
                                             len(self.states), NO_RETURN if until is None else until, deadline,
                                             max_configs)
        return Outcome(status, failed, pos)

    def search_many(self, calls: Any, rets: Any, kinds: Any, indexes: list[bytes], starts: Sequence[S], *,
                    deadline: float, max_configs: int) -> tuple[int, Outcome]:
        """``search`` of each partition in turn (one call, for many small ones) until one is not
        OK: how many were, and that one's outcome (OK when all were)."""
        assert _NATIVE is not None
        first = array("i", [self.state(s) for s in starts]).tobytes()
        kind_rule, kind_known, table, inert = self._arrays()
        done, status, failed, pos = _NATIVE.search_many(
            calls, rets, kinds, indexes, kind_rule, kind_known, table, inert, first, len(self.states), NO_RETURN,
            deadline, max_configs)
        return done, Outcome(status, failed, pos)


def search_operations(model: Model[S], ops: Sequence[Operation], starts: Sequence[S], *, deadline: float,
                      max_configs: int, until: int | None = None) -> Outcome | None:
    """Search ``ops`` (one partition) with the kernel; None when the model has no rule for one."""
    encoded = encode_operations(model, ops)
    if encoded is None:
        return None
    enc, calls, rets, kinds = encoded
    return enc.search(calls, rets, kinds, starts, deadline=deadline, max_configs=max_configs, until=until)


def encode_operations(model: Model[S], ops: Sequence[Operation]
                      ) -> tuple[Encoding[S], array[int], array[int], array[int]] | None:
    """``ops`` as the kernel reads them: the encoding, and call times, return times and kinds."""
    rule_of = model.rule
    assert rule_of is not None
    effect_free = model.effect_free
    compile_ = model.compile
    enc: Encoding[S] = Encoding()
    # Operations that share a compiled step share its rule (the register compiles each distinct
    # signature once), so the model is asked once per step, not once per operation.
    rule_of_fn: dict[StepFn[S], int] = {}
    kinds_of: dict[tuple[int, bool], int] = {}
    kinds = array("i")
    for op in ops:
        fn = compile_(op.input, op.output) if compile_ is not None else None
        rule = rule_of_fn.get(fn) if fn is not None else None
        if rule is None:
            guarded = rule_of(op.input, op.output)
            if guarded is None:
                return None
            rule = enc.rule(guarded, effect_free is not None and effect_free(op.input, op.output))
            if fn is not None:
                rule_of_fn[fn] = rule
        key = (rule, op.output is not None)
        kind = kinds_of.get(key)
        if kind is None:
            kind = kinds_of[key] = enc.kind(*key)
        kinds.append(kind)
    calls = array("q", [op.call_ns for op in ops])
    rets = array("q", [NO_RETURN if op.return_ns is None else op.return_ns for op in ops])
    return enc, calls, rets, kinds


_ABSENT = object()


class ScannedHistory(Sequence[Operation]):
    """A history the kernel read into columns (``scan``); operations are built on demand."""

    def __init__(self, columns: tuple[bytes, bytes, bytes, bytes, bytes], sig_texts: list[bytes],
                 key_texts: list[bytes], key_field: str) -> None:
        self.clients, self.calls, self.rets, self.sigs, self.keys = columns
        self._clients = memoryview(self.clients).cast("q")
        self._calls = memoryview(self.calls).cast("q")
        self._rets = memoryview(self.rets).cast("q")
        self._sigs = memoryview(self.sigs).cast("i")
        self._keys = memoryview(self.keys).cast("i")
        self.key_field = key_field
        # Each distinct text decoded once, all of them in one call: one JSON array.
        decoded = json.loads(b"[" + b",".join(t.replace(b"\0", b",", 1) for t in sig_texts) + b"]")
        self.inputs: list[dict[str, object]] = decoded[0::2]  # per signature: the input less its key
        self.outputs: list[Mapping[str, object] | None] = decoded[1::2]
        values = json.loads(b"[" + b",".join(t or b"null" for t in key_texts) + b"]")
        self.key_values: list[object] = [_ABSENT if not t else v for t, v in zip(key_texts, values)]

    def __len__(self) -> int:
        return len(self._calls)

    @overload
    def __getitem__(self, i: int) -> Operation: ...

    @overload
    def __getitem__(self, i: slice) -> list[Operation]: ...

    def __getitem__(self, i: int | slice) -> Operation | list[Operation]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        sig, key = self._sigs[i], self.key_values[self._keys[i]]
        inp = self.inputs[sig]
        if key is not _ABSENT:
            inp = dict(inp)
            inp[self.key_field] = key
        ret = self._rets[i]
        return Operation(client=self._clients[i], input=inp, output=self.outputs[sig], call_ns=self._calls[i],
                         return_ns=None if ret == NO_RETURN else ret)

    def __iter__(self) -> Iterator[Operation]:
        return (self[i] for i in range(len(self)))

    def partitions(self, model: Model[Any]) -> list[bytes]:
        """The operations of each partition (int32 indices), in order of their first operation."""
        assert _NATIVE is not None and model.partition is not None and model.key_field == self.key_field
        ids: dict[Hashable, int] = {}
        part_of_key = array("i")
        for value in self.key_values:
            part = model.partition({} if value is _ABSENT else {self.key_field: value})
            part_of_key.append(ids.setdefault(part, len(ids)))
        found: list[bytes] = _NATIVE.split(self.keys, part_of_key)
        return found

    def encode(self, model: Model[S], enc: Encoding[S]) -> bool:
        """One kind per signature, in ``enc``; False when the model has no rule for one."""
        rule_of, effect_free = model.rule, model.effect_free
        assert rule_of is not None
        for inp, out in zip(self.inputs, self.outputs):
            guarded = rule_of(inp, out)
            if guarded is None:
                return False
            rule = enc.rule(guarded, effect_free is not None and effect_free(inp, out))
            enc.kind(rule, out is not None)
        return True


def scan(data: bytes, key_field: str = "key", *, min_split: int = 256 * 1024
         ) -> tuple[bytes | None, ScannedHistory] | None:
    """Read this kit's JSON lines with the kernel: (the header line, the history), or None when
    the kernel is not there or the text is outside what it reads (the pure reader then reads
    it, or says which line is wrong). A text of ``min_split`` bytes or more is read in two
    halves on two threads."""
    if _NATIVE is None:
        return None
    found = _NATIVE.scan(data, key_field, min_split)
    if found is None:
        return None
    header, clients, calls, rets, sigs, keys, sig_texts, key_texts = found
    return header, ScannedHistory((clients, calls, rets, sigs, keys), sig_texts, key_texts, key_field)
