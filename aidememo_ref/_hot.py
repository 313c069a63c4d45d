"""The request path's shortcuts: each stands for general code that stays the statement of the rule.

Why this module exists: ``bench/ledger.py`` holds a command against a raw one-row SQLite
transaction, and the general path spends much of a command in small Python steps (a
NamedTuple's generated ``__new__``, binding None values, a field-by-field decoder). The speed
tricks of the AideMemo reference live here, so the modules that use them read plainly; where a
trick stays inline for its speed, its line points here.

* ``build`` makes a record from all its fields in order, without the Python-level ``__new__``
  that ``Cls(...)`` runs (``python bench/records.py`` times both): for the ``_Request`` of every
  request, the raw route's ``Command``, ``ResourcePayload`` and ``Write``, every ``Row`` the
  SQLite store appends or reads back and the ``Receipt`` it answers, and the ``Resource`` and
  ``Change`` rows its reads hand on, where each field is at hand and already checked. Those records are NamedTuples, not frozen dataclasses,
  for the same reason (so are ``FeedEntry`` and ``MailboxRow``, one per entry of a listing): a
  frozen dataclass's ``__init__`` (an ``object.__setattr__`` per field) costs more
  (``bench/records.py`` again).
* ``AppendStatements`` keeps the ``INSERT`` of a log row keyed by the positions of its None
  fields, which are left to the column's default (NULL) rather than bound: sqlite3 binds None
  through its adapter lookup, which raises and clears two AttributeErrors per value
  (``bench/records.py`` times an ``INSERT`` both ways).
* ``quick_test`` passes a field kind's ordinary valid values as they are, for ``_decode``:
  every field of every request comes through it, and whatever it does not pass goes through
  ``_decode._field_value``, which accepts it or words the refusal.
* ``plain_raw`` decodes the common ``POST /v1/commands`` body in one pass, for
  ``_commands.raw_command``: anything it is not sure of returns None and ``decode_struct`` runs,
  which accepts it or words the refusal.
* The raw route's shortcut, which stays in the two modules it reaches into (this one is below
  both): ``Service._plain_command`` answers ``POST /v1/commands`` when every check before the
  store's passes (a JSON body ``plain_raw`` decodes, an Authorization value that proved a
  membership before, ``check_raw``), and hands the command to ``SQLiteStore.put_plain``, which
  runs ``_store.execute``'s recipe for a new command of a member the thread remembers in one
  function: ``_Tx.__enter__`` (its catch-up and membership check only when ``PRAGMA
  data_version`` moved), the rules themselves (``_ledger.decide``, through a view of the
  project's memory and member table: a planted or mutated rule runs here too), ``_Tx.apply``'s
  row and ``_Tx.__exit__``'s commit and memory. A replay, a caller not
  remembered or whose membership changed, another body, or a replaced recipe, rules or store:
  None with nothing written, and the general path answers from the start; a refusal or a fault
  is answered as the general path answers it. ``bench/ledger.py`` prints the general path
  beside the in-process line (cachegrind: 204,517 instructions a command before, 175,343 after;
  restating ``_raw``'s rule instead of asking it gave 168,848, which mutation testing cannot see).

Below this package, which it cannot name: ``refkit.response.Response`` (shared with XMemo) sets
its slots through their own descriptors rather than a frozen dataclass's ``object.__setattr__``
calls (``bench/records.py`` times both), and points here; ``aidememo_wire.canonical`` skips its
float walk when the text shows no float, and the envelope digest writes checked ids unescaped
(both explained there, beside the general encoder they stand for).
``tests/ref/test_request_path.py`` holds each shortcut equal to the code it stands for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Final, TypeAlias

from aidememo_wire.canonical import U64_MAX, Json, canonical_json, envelope_digest
from aidememo_wire.ids import ID_PATTERN, NAME_PATTERN, valid_id, valid_name

__all__ = ["build", "AppendStatements", "quick_test", "RawFields", "plain_raw"]

build: Final = tuple.__new__  # build(Record, (field, ...)) == Record(field, ...)


def quick_test(kind: str) -> Callable[[Json], bool] | None:
    """A test passing the ordinary valid values of a ``_decode.Field`` kind; None for a nested
    struct, which always goes through the field decoder."""
    if kind == "any":
        return lambda value: True
    if kind == "id":
        return lambda value: type(value) is str and valid_id(value) is not None
    if kind == "name":
        return lambda value: type(value) is str and valid_name(value) is not None
    if kind == "string":
        return lambda value: type(value) is str
    if kind.startswith("enum:"):
        variants = frozenset(kind[5:].split(","))
        return lambda value: type(value) is str and value in variants
    if kind == "revision":
        return lambda value: type(value) is int and 0 < value <= U64_MAX
    if kind == "u64":
        return lambda value: type(value) is int and 0 <= value <= U64_MAX
    if kind == "bool":
        return lambda value: type(value) is bool
    return None


# A RawCommand's fields in order (see ``_commands.RawCommand``).
RawFields: TypeAlias = tuple[str, str, str, str, str, int | None, Json, str, str, str]

# command_id, project_id, operation, resource kind and id joined by newlines, in one test: no
# grammar's class holds a newline, so each part must match its own grammar.
_ENVELOPE_NAMES: Final = re.compile("\n".join((ID_PATTERN, ID_PATTERN, NAME_PATTERN, NAME_PATTERN, ID_PATTERN))).fullmatch


def plain_raw(body: dict[str, Json]) -> RawFields | None:
    """A RawCommand's fields for a body (of known field names only) whose fields are all valid
    as they are; None for anything else, which ``decode_struct`` then decides."""
    try:
        command_id, project_id, operation = body["command_id"], body["project_id"], body["operation"]
        payload, resource, change = body["payload"], body["resource"], body["change"]
        expected = body.get("expected_revision")
        kind, resource_id = resource["kind"], resource["id"]  # type: ignore[call-overload,index]
    except (KeyError, TypeError):  # a field missing, or resource not a map (JSON's only str-indexed type)
        return None
    if not (type(command_id) is str and type(project_id) is str and type(operation) is str and type(kind) is str
            and type(resource_id) is str and (change == "upsert" or change == "delete")
            and (expected is None or (type(expected) is int and 0 < expected <= U64_MAX))
            and _ENVELOPE_NAMES(f"{command_id}\n{project_id}\n{operation}\n{kind}\n{resource_id}") is not None):
        return None
    payload_json = canonical_json(payload)
    return (command_id, project_id, operation, kind, resource_id, expected, payload, payload_json, change,
            envelope_digest(project_id, expected, operation, payload_json, kind, resource_id, change))


class AppendStatements:
    """``INSERT INTO table(...)`` statements naming only the non-None fields of a row."""

    __slots__ = ("_table", "_names", "_by_nulls")

    def __init__(self, table: str, names: Sequence[str]) -> None:
        self._table, self._names = table, tuple(names)
        self._by_nulls: dict[tuple[int, ...], str] = {}

    def statement(self, nulls: tuple[int, ...]) -> str:
        """The statement for a row whose fields at the positions ``nulls`` are None."""
        sql = self._by_nulls.get(nulls)
        if sql is None:
            names = [name for i, name in enumerate(self._names) if i not in nulls]
            sql = self._by_nulls[nulls] = (f"INSERT INTO {self._table}({', '.join(names)}) "
                                           f"VALUES ({','.join('?' * len(names))})")
        return sql

    def of(self, row: Sequence[object]) -> tuple[str, tuple[object, ...]]:
        """The statement appending ``row`` and its non-None values."""
        return (self.statement(tuple(i for i, value in enumerate(row) if value is None)),
                tuple(value for value in row if value is not None))
