#!/usr/bin/env python3
"""What the request paths' record and call shapes cost, measured in the same run.

The comments of the request-path modules (``aidememo_ref/_hot.py``, ``_records.py``,
``_ledger.py``, ``refkit/records.py``, ``refkit/response.py``, ``xmemo_ref/_hot.py``,
``xmemo_ref/_sqlite.py``) say a shape was chosen for its cost and point here for the figure,
rather than quoting a one-off measurement: each line prints both shapes and their ratio.

1. Building a record: a frozen, slotted, keyword-only dataclass, a ``@distinct`` NamedTuple by
   keyword, and the same NamedTuple from its fields in order with ``tuple.__new__`` (``_hot.build``).
2. Setting three slots: ``object.__setattr__`` per field (a frozen dataclass) against the slots'
   own descriptors (``refkit.response.Response``).
3. Entering three generator-based context managers against writing the same steps out.
4. An ``INSERT`` binding three None values against one leaving them to the columns' default
   (``aidememo_ref._hot.AppendStatements``), into an in-memory SQLite table.

    python bench/records.py [--number 200000]
"""

from __future__ import annotations

import argparse
import sqlite3
import timeit
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple

from _conditions import Window, closing, opening
from refkit.records import distinct


@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenRow:
    kind: str
    resource_id: str
    revision: int
    body: str | None


@distinct
class TupleRow(NamedTuple):
    kind: str
    resource_id: str
    revision: int
    body: str | None


class Slots:
    __slots__ = ("status", "headers", "body")


_SET_STATUS, _SET_HEADERS, _SET_BODY = (vars(Slots)[name].__set__ for name in Slots.__slots__)


@contextmanager
def _step() -> Iterator[None]:
    yield


def _managed() -> None:
    with _step(), _step(), _step():
        pass


def _written_out() -> None:
    try:
        pass
    finally:
        pass


def _by_setattr() -> None:
    record = object.__new__(Slots)
    object.__setattr__(record, "status", 200)
    object.__setattr__(record, "headers", ())
    object.__setattr__(record, "body", b"")


def _by_descriptor() -> None:
    record = object.__new__(Slots)
    _SET_STATUS(record, 200)
    _SET_HEADERS(record, ())
    _SET_BODY(record, b"")


def _inserts() -> tuple[Callable[[], object], Callable[[], object]]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("CREATE TABLE log (a TEXT, b TEXT, c TEXT, d TEXT)")
    cursor = conn.cursor()
    bound, defaulted = "INSERT INTO log VALUES (?, ?, ?, ?)", "INSERT INTO log (a) VALUES (?)"
    return (lambda: cursor.execute(bound, ("x", None, None, None)),
            lambda: cursor.execute(defaulted, ("x",)))


def _time(call: Callable[[], object], number: int) -> float:
    """The best of three runs, in nanoseconds per call: the least disturbed by other load."""
    return min(timeit.repeat(call, number=number, repeat=3)) / number * 1e9


def _line(label: str, general: tuple[str, Callable[[], object]], shortcut: tuple[str, Callable[[], object]],
          number: int) -> str:
    window = Window()
    slow, fast = _time(general[1], number), _time(shortcut[1], number)
    return window.mark(f"{label:<22} {general[0]:>18} {slow:6.0f} ns | {shortcut[0]:>13} {fast:6.0f} ns | "
                       f"ratio {fast / slow:.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=200_000, help="calls per timing (best of three)")
    args = parser.parse_args()
    new = tuple.__new__
    opening("bench/records.py (ratios are same-run)")
    print(_line("record, 4 fields", ("frozen dataclass", lambda: FrozenRow(kind="k", resource_id="r", revision=1,
                                                                            body=None)),
                ("NamedTuple", lambda: TupleRow(kind="k", resource_id="r", revision=1, body=None)), args.number))
    print(_line("NamedTuple, 4 fields", ("keyword call", lambda: TupleRow(kind="k", resource_id="r", revision=1,
                                                                          body=None)),
                ("tuple.__new__", lambda: new(TupleRow, ("k", "r", 1, None))), args.number))
    print(_line("three slots", ("object.__setattr__", _by_setattr), ("descriptors", _by_descriptor), args.number))
    print(_line("three context managers", ("generator managers", _managed), ("written out", _written_out),
                args.number))
    bound, defaulted = _inserts()
    print(_line("INSERT, three None", ("bound", bound), ("defaulted", defaulted), args.number // 4))
    closing()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
