"""Answers as checks read them: decoded JSON whose missing or mistyped parts raise ``ShapeError``.

A check subscripts what a target answered (``receipt["revision"]``, ``items[0]``). When the
target left a promised field out, or sent an array where an object was promised, that is the
target's departure and must read FAIL; when a check trips over its own code (a misspelt name,
a wrong argument) the kit is at fault and must read ERROR. Python raises ``KeyError`` or
``TypeError`` for both, so answers never reach a check as plain containers: ``parse`` wraps
every object and array, and only a subscript of a wrapped one raises ``ShapeError``, naming
the step that answered and the path inside the answer.

``.get()``, iteration, ``in``, ``==`` and ``json.dumps`` behave as on ``dict`` and ``list``;
scalars (strings, numbers, ``None``) are left as they are, so a check that computes with a
value of the wrong type still raises Python's own error: a check reads a value's type through
a helper (``expect_receipt``) before it computes with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from conformance.errors import ShapeError
from refkit.jsonvalue import loads

__all__ = ["AnswerArray", "AnswerObject", "parse", "wrap"]


@dataclass(frozen=True, slots=True)
class _Source:
    """Which step answered: ``GET URL answered 200``, and the step itself (for the reports)."""

    step: str
    entry: object = None


class AnswerObject(dict[str, Any]):
    """A JSON object of an answer; a missing key or an index raises ``ShapeError``."""

    __slots__ = ("_path", "_source")
    _path: str
    _source: _Source

    def __getitem__(self, key: str) -> Any:
        try:
            return super().__getitem__(key)
        except (KeyError, TypeError):
            if not isinstance(key, str):
                raise _shape(self._source, self._path, f"an array, but got an object (indexed with {key!r})") from None
            raise _shape(self._source, self._path, f"the promised field {key!r}, which is missing") from None


class AnswerArray(list[Any]):
    """A JSON array of an answer; an index out of range or a key raises ``ShapeError``."""

    __slots__ = ("_path", "_source")
    _path: str
    _source: _Source

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return list.__getitem__(self, index)
        if not isinstance(index, int):
            raise _shape(self._source, self._path, f"an object with the field {index!r}, but got an array")
        try:
            return list.__getitem__(self, index)
        except IndexError:
            raise _shape(self._source, self._path,
                         f"an element [{index}], but the array has {len(self)}") from None

    # Read as an object, an array departs the same way a missing field does.
    def get(self, key: str, default: Any = None) -> Any:
        raise _shape(self._source, self._path, f"an object with the field {key!r}, but got an array")

    def keys(self) -> Any:
        raise _shape(self._source, self._path, "an object, but got an array")

    items = values = keys


def _shape(source: _Source, path: str, what: str) -> ShapeError:
    return ShapeError(f"{source.step}: at {path} the check expected {what}", entry=source.entry, path=path)


def wrap(value: Any, step: str, entry: object = None) -> Any:
    """``value`` (decoded JSON) with every object and array wrapped; ``step`` names who answered."""
    return _wrap(value, "$", _Source(step, entry))


def _wrap(value: Any, path: str, source: _Source) -> Any:
    if isinstance(value, dict):
        wrapped = AnswerObject((key, _wrap(item, f"{path}.{key}", source)) for key, item in value.items())
        wrapped._path, wrapped._source = path, source
        return wrapped
    if isinstance(value, list):
        array = AnswerArray(_wrap(item, f"{path}[{index}]", source) for index, item in enumerate(value))
        array._path, array._source = path, source
        return array
    return value


def parse(raw: bytes | str, step: str, entry: object = None) -> Any:
    """Decode a JSON answer and wrap it (see the module docstring).

    Every answer of the protocols the kit speaks is an object or an array; a bare ``null``,
    number or string would reach a check as a value it cannot read, so it departs here.

    Raises:
        ShapeError: the answer is not JSON at all, or not an object or array.
    """
    shown = raw[:200] if isinstance(raw, str) else raw[:200].decode("utf-8", "replace")
    try:
        value = loads(raw)
    except ValueError as exc:
        why = "" if isinstance(exc, json.JSONDecodeError) else f" ({exc})"
        raise ShapeError(f"{step} with a body that is not JSON{why}: {shown!r}", entry=entry, path="$") from None
    if not isinstance(value, dict | list):
        raise ShapeError(f"{step} with the JSON {shown}, not an object or array", entry=entry, path="$")
    return wrap(value, step, entry)
