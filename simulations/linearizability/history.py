"""Recorded histories: one operation per client call, read and written as JSON lines.

A line is ``{"client": 3, "input": {...}, "output": {...}, "call": ns, "return": ns}``: a closed
interval on one monotonic clock. An operation whose answer never came (timeout, reset, 5xx not
resolved by a replay) has ``"output": null`` and ``"return": null``; the checker lets it take
effect at any point after its call, with any result, or not at all.

The first line may instead be a header, ``{"history": "aidememo-sim/1", "model": "cas-register",
"init": 0}`` (every key optional): the model the history is meant for and its initial state,
so that a file carries what it takes to check it.

This module owns the format and the recorder; it knows no protocol and checks nothing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import IO

from simulations.errors import SimulationError

__all__ = ["FORMAT", "Header", "Operation", "Recorder", "dump_history", "parse_history"]

FORMAT = "aidememo-sim/1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """What a history file says about itself; ``has_init`` tells ``init: null`` from no init."""

    model: str | None = None
    init: object = None
    has_init: bool = False

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {"history": FORMAT}
        if self.model is not None:
            doc["model"] = self.model
        if self.has_init:
            doc["init"] = self.init
        return doc

    @staticmethod
    def from_json(raw: Mapping[str, object], where: str) -> Header:
        unknown = sorted(set(raw) - {"history", "model", "init"})
        if unknown:
            raise SimulationError(f"{where}: unknown header field(s) {', '.join(unknown)}")
        if raw.get("history", FORMAT) != FORMAT:
            raise SimulationError(f"{where}: this is a {raw.get('history')!r} history; this kit reads {FORMAT}")
        model = raw.get("model")
        if model is not None and not isinstance(model, str):
            raise SimulationError(f"{where}: 'model' must be a string")
        return Header(model=model, init=raw.get("init"), has_init="init" in raw)


@dataclass(frozen=True, slots=True, kw_only=True)
class Operation:
    """One call of one client: what was asked, what came back, and when.

    ``output is None`` means unknown (indeterminate outcome); ``return_ns is None`` then marks
    the interval as open on the right.
    """

    client: int
    input: Mapping[str, object]
    output: Mapping[str, object] | None
    call_ns: int
    return_ns: int | None

    def __post_init__(self) -> None:
        if self.return_ns is not None and self.return_ns < self.call_ns:
            raise SimulationError(
                f"operation of client {self.client} returns ({self.return_ns}) before its call"
                f" ({self.call_ns})"
            )
        if self.output is None and self.return_ns is not None:
            # A known return time with no output is a contradiction: the answer either came or not.
            raise SimulationError(f"operation of client {self.client} has a return time but no output")

    @property
    def unknown(self) -> bool:
        return self.output is None

    def to_json(self) -> dict[str, object]:
        return {
            "client": self.client,
            "input": dict(self.input),
            "output": None if self.output is None else dict(self.output),
            "call": self.call_ns,
            "return": self.return_ns,
        }

    def relaxed(self) -> Operation:
        """The same request, answered nothing, callable at any time: "it may have happened"."""
        return Operation(client=self.client, input=self.input, output=None, call_ns=0, return_ns=None)


def _operation_from_json(raw: object, where: str) -> Operation:
    if not isinstance(raw, dict):
        raise SimulationError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    client, inp, out, call, ret = (raw.get(k) for k in ("client", "input", "output", "call", "return"))
    if not isinstance(client, int) or isinstance(client, bool):
        raise SimulationError(f"{where}: 'client' must be an integer")
    if not isinstance(inp, dict):
        raise SimulationError(f"{where}: 'input' must be an object")
    if out is not None and not isinstance(out, dict):
        raise SimulationError(f"{where}: 'output' must be an object or null")
    if not isinstance(call, int) or isinstance(call, bool):
        raise SimulationError(f"{where}: 'call' must be an integer (monotonic ns)")
    if ret is not None and (not isinstance(ret, int) or isinstance(ret, bool)):
        raise SimulationError(f"{where}: 'return' must be an integer (monotonic ns) or null")
    try:
        return Operation(client=client, input=inp, output=out, call_ns=call, return_ns=ret)
    except SimulationError as exc:
        raise SimulationError(f"{where}: {exc}") from exc


def parse_history(lines: Iterable[str], source: str = "<history>") -> tuple[Header, list[Operation]]:
    """Parse JSON lines (blank lines ignored), the first maybe a header, into operations.

    Raises:
        SimulationError: naming the line that is not a valid operation.
    """
    ops: list[Operation] = []
    header = Header()
    first = True
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SimulationError(f"{source}:{number}: not JSON ({exc.msg})") from exc
        if first and isinstance(raw, dict) and "client" not in raw and "history" in raw:
            header = Header.from_json(raw, f"{source}:{number}")
        else:
            ops.append(_operation_from_json(raw, f"{source}:{number}"))
        first = False
    return header, ops


def dump_history(ops: Iterable[Operation], out: IO[str], header: Header | None = None) -> None:
    if header is not None:
        out.write(json.dumps(header.to_json(), sort_keys=True, separators=(",", ":")) + "\n")
    for op in ops:
        out.write(json.dumps(op.to_json(), sort_keys=True, separators=(",", ":")) + "\n")


@dataclass(slots=True)
class Recorder:
    """Thread-safe invoke/ok/unknown recorder on ``time.monotonic_ns``.

    ``fail`` (the request provably never reached the target) drops the operation: it cannot have
    taken effect, so it has nothing to be checked against. ``keep=False`` forgets what ``take``
    handed out (a campaign that streams its history to a file), and ``history`` is then refused.
    """

    keep: bool = True
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _open: dict[int, tuple[int, Mapping[str, object], int]] = field(default_factory=dict)
    _done: list[Operation] = field(default_factory=list)
    _next: int = 0
    _taken: int = 0  # how many of ``_done`` ``take`` has handed out

    def invoke(self, client: int, op_input: Mapping[str, object]) -> int:
        with self._lock:
            ticket = self._next
            self._next += 1
            self._open[ticket] = (client, op_input, time.monotonic_ns())
            return ticket

    def ok(self, ticket: int, output: Mapping[str, object]) -> None:
        now = time.monotonic_ns()
        with self._lock:
            client, op_input, call = self._open.pop(ticket)
            self._done.append(
                Operation(client=client, input=op_input, output=output, call_ns=call, return_ns=now)
            )

    def unknown(self, ticket: int) -> None:
        with self._lock:
            client, op_input, call = self._open.pop(ticket)
            self._done.append(
                Operation(client=client, input=op_input, output=None, call_ns=call, return_ns=None)
            )

    def fail(self, ticket: int) -> None:
        with self._lock:
            self._open.pop(ticket)

    def take(self) -> list[Operation]:
        """The operations answered since the last ``take``, in call order; a campaign takes
        each batch once it is over, so the cost never depends on the history's length."""
        with self._lock:
            if self._open:
                raise SimulationError(f"{len(self._open)} operations are still in flight")
            new = sorted(self._done[self._taken:], key=lambda op: op.call_ns)
            if not self.keep:
                self._done = []
                return new
            self._done[self._taken:] = new
            self._taken = len(self._done)
            return new

    def history(self) -> list[Operation]:
        with self._lock:
            if not self.keep:
                raise SimulationError("this recorder keeps no history (keep=False)")
            if self._open:
                raise SimulationError(f"{len(self._open)} operations are still in flight")
            return sorted(self._done, key=lambda op: op.call_ns)
