"""Decoding of request bodies and query strings with upstream's strictness (wire spec §0.3–0.4).

Upstream decodes into serde structs with ``deny_unknown_fields``; every failure becomes 400
``invalid_command`` whose detail reads like axum's rejection text. Field tables below are in
upstream declaration order, which matters because serde also accepts a struct as a JSON array
of exactly its fields in that order (errata 2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote_to_bytes

from aidememo_wire.canonical import U64_MAX, Json
from aidememo_wire.errors import LedgerError
from aidememo_wire.ids import id_problem, name_problem
from ._hot import quick_test
from ._errors import AideMemoRefError

__all__ = ["Field", "decode_struct", "decode_query", "type_name", "BODY_PREFIX", "QUERY_PREFIX"]

BODY_PREFIX: Final = "Failed to deserialize the JSON body into the target type: "
QUERY_PREFIX: Final = "Failed to deserialize query string: "


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    kind: str  # id | name | string | revision | u64 | bool | any | enum:a,b | struct:<name>
    optional: bool = False


class _Fail(AideMemoRefError):
    pass


def type_name(value: Json) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean `{str(value).lower()}`"
    if isinstance(value, int):
        return f"integer `{value}`"
    if isinstance(value, float):
        return f"floating point `{value}`"
    if isinstance(value, str):
        return f'string "{value}"'
    if isinstance(value, list):
        return "a sequence"
    return "a map"


def _field_value(field: Field, value: Json, structs: dict[str, tuple[Field, ...]]) -> Json:
    if value is None and field.optional:
        return None
    kind = field.kind
    if kind == "any":
        return value
    if kind in ("id", "name", "string") or kind.startswith("enum:"):
        if not isinstance(value, str):
            raise _Fail(f"{field.name}: invalid type: {type_name(value)}, expected a string")
        if kind == "id":
            problem = id_problem(value)
            if problem is not None:
                raise _Fail(f"{field.name}: invalid {field.name}: {problem}")
        elif kind == "name":
            label = "operation name" if field.name == "operation" else "resource kind"
            problem = name_problem(label, value)
            if problem is not None:
                raise _Fail(f"{field.name}: {problem}")
        elif kind.startswith("enum:"):
            variants = kind[5:].split(",")
            if value not in variants:
                expected = " or ".join(f"`{v}`" for v in variants)
                raise _Fail(f"{field.name}: unknown variant `{value}`, expected {expected}")
        return value
    if kind in ("revision", "u64"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Fail(f"{field.name}: invalid type: {type_name(value)}, expected u64")
        if value < 0 or value > U64_MAX:
            raise _Fail(f"{field.name}: invalid value: {type_name(value)}, expected u64")
        if kind == "revision" and value == 0:
            raise _Fail(f"{field.name}: invalid value: integer `0`, expected a nonzero u64")
        return value
    if kind == "bool":
        if not isinstance(value, bool):
            raise _Fail(f"{field.name}: invalid type: {type_name(value)}, expected a boolean")
        return value
    if kind.startswith("struct:"):
        name = kind[7:]
        return _struct(name, value, structs, strict=name != "resource")
    raise AssertionError(kind)


_Check = tuple[str, bool, Callable[[Json], bool] | None, Field]  # name, optional, quick test, field
_Compiled = tuple[frozenset[str], tuple[_Check, ...]]
_COMPILED: dict[str, tuple[tuple[Field, ...], _Compiled]] = {}  # struct name -> (its fields, compiled)


def _compiled(name: str, fields: tuple[Field, ...]) -> _Compiled:
    """A struct's field names and quick tests (``_hot``), computed once per table: the entry is
    the struct's while it holds these very fields (another table's struct of the same name
    compiles its own). Keyed by name, not by the tuple, whose hash would be computed anew for
    every request."""
    entry = _COMPILED.get(name)
    if entry is None or entry[0] is not fields:
        names = frozenset(field.name for field in fields)
        checks = tuple((field.name, field.optional, quick_test(field.kind), field) for field in fields)
        entry = _COMPILED[name] = (fields, (names, checks))
    return entry[1]


def _struct(name: str, value: Json, structs: dict[str, tuple[Field, ...]], *, strict: bool) -> dict[str, Json]:
    fields = structs[name]
    if isinstance(value, list):
        if len(value) != len(fields):
            raise _Fail(f"invalid length {len(value)}, expected struct {name} with {len(fields)} elements")
        value = {field.name: item for field, item in zip(fields, value)}
    if not isinstance(value, dict):
        raise _Fail(f"invalid type: {type_name(value)}, expected struct {name}")
    known, checks = _compiled(name, fields)
    if strict and not known.issuperset(value):
        for key in value:
            if key not in known:
                expected = ", ".join(f"`{f.name}`" for f in fields)
                raise _Fail(f"unknown field `{key}`, expected one of {expected}")
    out: dict[str, Json] = {}
    for field_name, optional, accepts, field in checks:
        if field_name not in value:
            if optional:
                out[field_name] = None
                continue
            raise _Fail(f"missing field `{field_name}`")
        item = value[field_name]
        if (accepts is not None and accepts(item)) or (item is None and optional):
            out[field_name] = item
        else:
            out[field_name] = _field_value(field, item, structs)
    return out


def decode_struct(name: str, value: Json, structs: dict[str, tuple[Field, ...]]) -> dict[str, Json]:
    """Decode a parsed JSON body into the named struct or raise 400 ``invalid_command``."""
    try:
        return _struct(name, value, structs, strict=True)
    except _Fail as exc:
        raise LedgerError.invalid_command(BODY_PREFIX + str(exc)) from None


def _parse_u64(name: str, text: str) -> int:
    """``u64::from_str``, with its three error texts (a present empty value is not an absence)."""
    if not text:
        raise _Fail(f"{name}: cannot parse integer from empty string")
    digits = text[1:] if text[0] == "+" and len(text) > 1 else text
    value = 0
    for ch in digits:  # Rust checks each digit before the overflow it would cause
        if ch not in "0123456789":
            raise _Fail(f"{name}: invalid digit found in string")
        value = value * 10 + ord(ch) - 48
        if value > U64_MAX:
            raise _Fail(f"{name}: number too large to fit in target type")
    return value


def decode_query(query: bytes, fields: tuple[Field, ...]) -> dict[str, Json]:
    """Decode ``application/x-www-form-urlencoded`` like serde_urlencoded with deny_unknown_fields."""
    try:
        raw: dict[str, str] = {}
        known = {field.name: field for field in fields}
        if query:
            for pair in query.split(b"&"):
                if not pair:
                    continue
                key_b, _, val_b = pair.partition(b"=")
                key = unquote_to_bytes(key_b.replace(b"+", b" ")).decode("utf-8")
                val = unquote_to_bytes(val_b.replace(b"+", b" ")).decode("utf-8")
                if key not in known:
                    expected = ", ".join(f"`{f.name}`" for f in fields)
                    raise _Fail(f"unknown field `{key}`, expected one of {expected}")
                if key in raw:
                    raise _Fail(f"duplicate field `{key}`")
                raw[key] = val
        out: dict[str, Json] = {}
        for field in fields:
            if field.name not in raw:
                if not field.optional:
                    raise _Fail(f"missing field `{field.name}`")
                out[field.name] = None
                continue
            text = raw[field.name]
            if field.kind in ("u64", "revision"):
                out[field.name] = _parse_u64(field.name, text)
            elif field.kind == "bool":
                if text not in ("true", "false"):
                    raise _Fail(f"{field.name}: provided string was not `true` or `false`")
                out[field.name] = text == "true"
            else:
                out[field.name] = _field_value(field, text, {})
        return out
    except UnicodeDecodeError:
        raise LedgerError.invalid_command(QUERY_PREFIX + "invalid utf-8 sequence") from None
    except _Fail as exc:
        raise LedgerError.invalid_command(QUERY_PREFIX + str(exc)) from None
