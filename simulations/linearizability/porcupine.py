"""Histories in the formats Porcupine reads: its Operation and Event lists, and Jepsen logs.

* ``porcupine``: a JSON array (or JSON lines) of Porcupine ``Operation`` records
  ``{"ClientId": 0, "Input": {...}, "Call": 0, "Output": {...}, "Return": 100}`` or ``Event``
  records ``{"ClientId": 0, "Kind": false, "Value": {...}, "Id": 0}`` (``Kind`` false or
  ``"call"`` for a call, true or ``"return"`` for a return), as Go's ``encoding/json`` writes
  them. Inputs and outputs are given in the chosen model's vocabulary. An event list has no
  clock, so its order is the time; a call without a return is an answer that never came.
* ``jepsen-log``: the etcd logs of Porcupine's test data, ``INFO jepsen.util - 3 :invoke :cas
  [1 4]``, read as Porcupine's own parser reads them (a cas that ``:fail``\\ s returned false; a
  ``:fail :read :timed-out`` and an ``:info`` are unknown), for model ``cas-register`` starting
  at nil.
* ``edn``: Jepsen/Knossos history maps, one per line, ``{:process 0, :type :invoke, :f :get,
  :key "0", :value nil}``; ``:f`` read/write/cas gives ``cas-register`` operations, get/put/append
  gives ``kv`` ones (Porcupine's key-value test data). ``:fail`` means it did not happen, except
  for a cas, which returned false (as in the etcd logs); ``:info`` is unknown.

``load`` reads a file: this kit's JSON lines through the compiled kernel's scanner when it is
there (``native.scan``), everything else, and whatever the scanner declines, as text here.

This module only translates; it checks nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import simulations.linearizability.native as native
from simulations.errors import SimulationError
from simulations.linearizability.history import Header, Operation, parse_history

__all__ = ["FORMATS", "detect_format", "load", "parse"]

FORMATS = ("auto", "jsonl", "porcupine", "jepsen-log", "edn")

_JEPSEN_LINE = re.compile(r"^INFO\s+jepsen\.util\s+-\s+(\d+)\s+:(\w+)\s+:([\w-]+)\s+(.*?)\s*$")
_EDN_TOKEN = re.compile(r'\s*(?:(?P<open>[\[{(])|(?P<close>[\]})])|(?P<str>"(?:[^"\\]|\\.)*")'
                        r'|(?P<atom>[^\s,\[\]{}()"]+)|(?P<comma>,))')


def detect_format(text: str) -> str:
    """The format of ``text`` by its first non-blank line."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if line.startswith("["):
        return "porcupine"
    if line.startswith("INFO") and "jepsen.util" in line:
        return "jepsen-log"
    if line.startswith("{:"):
        return "edn"
    if line.startswith("{"):
        try:
            first = json.loads(line)
        except json.JSONDecodeError:
            return "jsonl"
        if isinstance(first, dict) and ("ClientId" in first or "Kind" in first or "Call" in first):
            return "porcupine"
    return "jsonl"


def load(path: Path, fmt: str) -> tuple[Header, Sequence[Operation]]:
    """Read the history file at ``path`` in ``fmt`` (one of ``FORMATS``).

    Raises:
        SimulationError: when the file cannot be read, is nested past the interpreter's recursion
            limit (a crafted file, never one the kit wrote), or naming the line that is wrong.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SimulationError(f"cannot read history {path}: {exc.strerror}") from exc
    try:
        return _load(data, fmt, path)
    except RecursionError:
        raise SimulationError(f"{path}: a value nested too deeply to read") from None


def _load(data: bytes, fmt: str, path: Path) -> tuple[Header, Sequence[Operation]]:
    if fmt in ("auto", "jsonl") and native.available():
        head = data[:65536]  # the first line, without copying the whole file
        start = len(head) - len(head.lstrip())
        end = data.find(b"\n", start)
        first = data[start:end if end >= 0 else len(data)].decode("utf-8", errors="replace")
        if fmt == "jsonl" or detect_format(first) == "jsonl":
            found = native.scan(data)
            if found is not None:
                header_line, history = found
                if header_line is None:
                    return Header(), history
                try:
                    return Header.from_json(json.loads(header_line), ""), history
                except SimulationError:
                    pass  # the pure reader below names the header's line
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SimulationError(f"{path} is not UTF-8 text") from None
    return parse(text, fmt, str(path))


def parse(text: str, fmt: str, source: str) -> tuple[Header, list[Operation]]:
    """Read a history in ``fmt`` (one of ``FORMATS``).

    Raises:
        SimulationError: naming the line or record that cannot be read.
    """
    if fmt == "auto":
        fmt = detect_format(text)
    if fmt == "jsonl":
        return parse_history(text.splitlines(), source)
    if fmt == "porcupine":
        return Header(), _porcupine(text, source)
    if fmt == "jepsen-log":
        return Header(model="cas-register", init=None, has_init=True), _jepsen(text, source)
    if fmt == "edn":
        return _edn(text, source)
    raise SimulationError(f"unknown history format {fmt!r}; choose one of: {', '.join(FORMATS)}")


# -- Porcupine's own records ------------------------------------------------------------------------


def _records(text: str, source: str) -> list[tuple[str, object]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SimulationError(f"{source}: not JSON ({exc.msg} at line {exc.lineno})") from exc
        if not isinstance(doc, list):
            raise SimulationError(f"{source}: expected a JSON array of operations or events")
        return [(f"{source}: record {n}", raw) for n, raw in enumerate(doc)]
    out: list[tuple[str, object]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append((f"{source}:{number}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise SimulationError(f"{source}:{number}: not JSON ({exc.msg})") from exc
    return out


def _int(raw: Mapping[str, object], key: str, where: str) -> int:
    value = raw.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise SimulationError(f"{where}: {key!r} must be an integer")
    return value


def _mapping(value: object, key: str, where: str) -> Mapping[str, object] | None:
    if value is None or isinstance(value, dict):
        return value
    raise SimulationError(f"{where}: {key!r} must be an object (in the model's vocabulary) or null")


def _porcupine(text: str, source: str) -> list[Operation]:
    records = _records(text, source)
    if not records:
        return []
    where, first = records[0]
    if not isinstance(first, dict):
        raise SimulationError(f"{where}: expected a JSON object")
    if "Kind" in first:
        return _events(records)
    ops = []
    for where, raw in records:
        if not isinstance(raw, dict):
            raise SimulationError(f"{where}: expected a JSON object")
        inp = _mapping(raw.get("Input"), "Input", where) or {}
        # A Go nil output is an answer without content; only a missing return is no answer.
        returned = None if raw.get("Return") is None else _int(raw, "Return", where)
        out = None if returned is None else (_mapping(raw.get("Output"), "Output", where) or {})
        try:
            ops.append(Operation(client=_int(raw, "ClientId", where) if "ClientId" in raw else 0, input=inp,
                                 output=out, call_ns=_int(raw, "Call", where), return_ns=returned))
        except SimulationError as exc:
            raise SimulationError(f"{where}: {exc}") from exc
    return ops


def _events(records: Sequence[tuple[str, object]]) -> list[Operation]:
    calls: dict[int, tuple[int, int, Mapping[str, object]]] = {}  # id -> (client, time, input)
    done: list[Operation] = []
    for time, (where, raw) in enumerate(records):
        if not isinstance(raw, dict):
            raise SimulationError(f"{where}: expected a JSON object")
        kind = raw.get("Kind")
        if kind not in (False, True, "call", "return"):
            raise SimulationError(f"{where}: 'Kind' must be false/\"call\" or true/\"return\"")
        ident = _int(raw, "Id", where)
        client = _int(raw, "ClientId", where) if "ClientId" in raw else 0
        value = _mapping(raw.get("Value"), "Value", where)
        if kind in (False, "call"):
            if ident in calls:
                raise SimulationError(f"{where}: a second call with Id {ident}")
            calls[ident] = (client, time, value or {})
            continue
        if ident not in calls:
            raise SimulationError(f"{where}: a return with Id {ident} before its call")
        client, call, inp = calls.pop(ident)
        done.append(Operation(client=client, input=inp, output=value or {}, call_ns=call, return_ns=time))
    done.extend(Operation(client=c, input=i, output=None, call_ns=t, return_ns=None) for c, t, i in calls.values())
    return sorted(done, key=lambda op: op.call_ns)


# -- Jepsen --------------------------------------------------------------------------------------------


class _EdnReader:
    """One line's EDN forms, read from a token list (maps, vectors, lists, strings, atoms)."""

    def __init__(self, text: str, where: str) -> None:
        self.where = where
        self.tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            match = _EDN_TOKEN.match(text, pos)
            if match is None:
                if not text[pos:].strip():
                    break
                raise SimulationError(f"{where}: cannot read EDN at {text[pos:pos + 20]!r}")
            pos = match.end()
            kind = match.lastgroup
            if kind is not None and kind != "comma":
                self.tokens.append((kind, match.group(kind)))
        self.pos = 0

    def value(self) -> object:
        if self.pos >= len(self.tokens):
            raise SimulationError(f"{self.where}: unexpected end of an EDN value")
        kind, text = self.tokens[self.pos]
        self.pos += 1
        if kind == "open":
            closing = {"[": "]", "(": ")", "{": "}"}[text]
            items: list[object] = []
            while True:
                if self.pos >= len(self.tokens):
                    raise SimulationError(f"{self.where}: unclosed {text!r}")
                k, t = self.tokens[self.pos]
                if k == "close":
                    self.pos += 1
                    if t != closing:
                        raise SimulationError(f"{self.where}: {text!r} closed by {t!r}")
                    break
                items.append(self.value())
            if text == "{":
                if len(items) % 2:
                    raise SimulationError(f"{self.where}: a map with an odd number of forms")
                return {str(items[n]): items[n + 1] for n in range(0, len(items), 2)}
            return items
        if kind == "close":
            raise SimulationError(f"{self.where}: unexpected {text!r}")
        if kind == "str":
            return json.loads(text)
        return _atom(text)


def _atom(text: str) -> object:
    if text == "nil":
        return None
    if text in ("true", "false"):
        return text == "true"
    if text.startswith(":"):
        return text  # a keyword stays its text, colon included
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _parse_edn(text: str, where: str) -> object:
    return _EdnReader(text, where).value()


@dataclass(slots=True)
class _Open:
    client: int
    call: int
    input: dict[str, object]


class _JepsenHistory:
    """Pairs Jepsen's invoke/ok/fail/info records per process into operations."""

    def __init__(self) -> None:
        self.open: dict[int, _Open] = {}
        self.done: list[Operation] = []
        self.model: str | None = None

    def record(self, process: int, kind: str, f: str, value: object, key: object, time: int,
               where: str) -> None:
        if kind == "invoke":
            stale = self.open.pop(process, None)
            if stale is not None:  # a process that invokes again never got its answer
                self._unknown(stale)
            self.open[process] = _Open(process, time, self._input(f, value, key, where))
            return
        op = self.open.pop(process, None)
        if op is None:
            return  # a completion Jepsen logged without its invocation: nothing to check
        if kind == "ok":
            output: dict[str, object] = {}
            if f in ("read", "get"):
                output = {"value": value}
            elif f == "cas":
                output = {"ok": True}
            self.done.append(Operation(client=op.client, input=op.input, output=output, call_ns=op.call,
                                       return_ns=time))
        elif kind == "fail" and f == "cas" and value != ":timed-out":
            self.done.append(Operation(client=op.client, input=op.input, output={"ok": False}, call_ns=op.call,
                                       return_ns=time))
        elif kind == "fail" and value != ":timed-out":
            pass  # it did not happen: nothing to check
        else:
            self._unknown(op)  # :info, or a timed-out :fail: it may or may not have happened

    def _unknown(self, op: _Open) -> None:
        self.done.append(Operation(client=op.client, input=op.input, output=None, call_ns=op.call, return_ns=None))

    def _input(self, f: str, value: object, key: object, where: str) -> dict[str, object]:
        model = "kv" if f in ("get", "put", "append") else "cas-register"
        if self.model is None:
            self.model = model
        elif self.model != model:
            raise SimulationError(f"{where}: {f!r} does not belong to the {self.model} operations before it")
        inp: dict[str, object]
        if f in ("read", "get"):
            inp = {"op": f}
        elif f in ("write", "put", "append"):
            inp = {"op": f, "value": value}
        elif f == "cas":
            if not isinstance(value, list) or len(value) != 2:
                raise SimulationError(f"{where}: a cas takes [expected new], not {value!r}")
            inp = {"op": "cas", "expected": value[0], "new": value[1]}
        else:
            raise SimulationError(f"{where}: unknown operation :{f}")
        if key is not None:
            inp["key"] = key
        return inp

    def operations(self) -> list[Operation]:
        for op in list(self.open.values()):
            self._unknown(op)
        self.open.clear()
        return sorted(self.done, key=lambda op: op.call_ns)


def _jepsen(text: str, source: str) -> list[Operation]:
    history = _JepsenHistory()
    for number, line in enumerate(text.splitlines(), start=1):
        match = _JEPSEN_LINE.match(line)
        if match is None:
            continue  # Jepsen logs interleave other loggers' lines: only jepsen.util's count
        where = f"{source}:{number}"
        process, kind, f, rest = match.groups()
        history.record(int(process), kind, f, _parse_edn(rest, where), None, number, where)
    return history.operations()


def _edn(text: str, source: str) -> tuple[Header, list[Operation]]:
    history = _JepsenHistory()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{number}"
        doc = _parse_edn(line, where)
        if not isinstance(doc, dict):
            raise SimulationError(f"{where}: expected an EDN map")
        process, kind, f = doc.get(":process"), doc.get(":type"), doc.get(":f")
        if not isinstance(process, int) or not isinstance(kind, str) or not isinstance(f, str):
            raise SimulationError(f"{where}: a record needs :process, :type and :f")
        if kind not in (":invoke", ":ok", ":fail", ":info"):
            raise SimulationError(f"{where}: unknown :type {kind}")
        history.record(process, kind[1:], f[1:], doc.get(":value"), doc.get(":key"), number, where)
    ops = history.operations()
    return Header(model=history.model), ops
