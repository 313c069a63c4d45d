"""Canonical JSON and the command fingerprint (wire spec §7.2, errata 1 and 3).

Upstream parses bodies with serde_json and re-serializes them with sorted keys; receipts carry
SHA-256 of the canonical form of ``{project_id, expected_revision, operation, payload, resource,
change}``. Byte-exact receipts need serde's number formatting, which differs from Python's.
"""

from __future__ import annotations

import hashlib
import json
import re
from decimal import Decimal
from json.encoder import c_make_encoder  # type: ignore[attr-defined]  # None without the C accelerator
from json.encoder import encode_basestring as _quote  # json.dumps(str, ensure_ascii=False)
from typing import NoReturn

from refkit.jsonvalue import Json as Json

from aidememo_wire.errors import WireError

__all__ = ["Json", "JsonError", "parse_json", "canonical_json", "fingerprint", "envelope_digest", "format_float",
           "MAX_DEPTH", "U64_MAX"]

MAX_DEPTH = 128  # serde_json's recursion limit (errata 3)
U64_MAX = (1 << 64) - 1  # Rust's u64::MAX: revisions, counters and sequence numbers
_I64_MIN = -(1 << 63)


class JsonError(WireError, ValueError):
    """The body is not JSON that serde_json would accept; the text is serde-like detail."""


def _parse_int(text: str) -> int | float:
    # serde_json keeps integers that fit i64/u64 and turns others into f64; "-0" becomes -0.0.
    # Past f64's range (or Python's 4300-digit int limit, far beyond it) serde refuses the number.
    if len(text) < 19 and text != "-0":
        return int(text)  # at most 18 digits: inside i64 (the common case first)
    try:
        value = int(text)
    except ValueError:
        raise JsonError("number out of range") from None
    if text.startswith("-") and value == 0:
        return -0.0
    if _I64_MIN <= value <= U64_MAX:
        return value
    try:
        return float(value)
    except OverflowError:
        raise JsonError("number out of range") from None


def _parse_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise JsonError("number out of range")
    return value


def _reject_constant(name: str) -> NoReturn:
    raise JsonError(f"expected value (got {name})")


def _depth_ok(value: Json) -> bool:
    stack: list[tuple[Json, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            if depth > MAX_DEPTH:
                return False
            stack.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            if depth > MAX_DEPTH:
                return False
            stack.extend((child, depth + 1) for child in node)
    return True


def _surrogate_free(value: Json) -> bool:
    stack: list[Json] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return True


_DECODER = json.JSONDecoder(parse_int=_parse_int, parse_float=_parse_float, parse_constant=_reject_constant)


def parse_json(body: bytes) -> Json:
    """Parse a request body as serde_json would; raises ``JsonError`` with a one-line detail."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonError(f"invalid UTF-8 at byte {exc.start}") from exc
    try:
        # The decoder's scanner directly when the text starts with a value and ends with it
        # (every body a client library sends); anything else, and every error, goes through
        # decode itself, so its results and error texts are json's.
        if text and (text[0] == "{" or text[0] == "["):
            try:
                value, end = _DECODER.scan_once(text, 0)  # type: ignore[attr-defined]  # set by __init__
            except (StopIteration, ValueError):
                value, end = None, -1  # decode raises the error with its position
            if end != len(text):
                value = _DECODER.decode(text)
        else:
            value = _DECODER.decode(text)
    except RecursionError as exc:
        raise JsonError("recursion limit exceeded") from exc
    except json.JSONDecodeError as exc:
        raise JsonError(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    # The walks are skipped when the raw text shows they cannot fail (the common case): a
    # depth past MAX_DEPTH needs that many brackets opened and closed.
    if len(body) > 2 * MAX_DEPTH and body.count(b"[") + body.count(b"{") > MAX_DEPTH and not _depth_ok(value):
        raise JsonError("recursion limit exceeded")
    if "\\" in text and "\\u" in text and not _surrogate_free(value):  # a one-character search is memchr
        raise JsonError("lone surrogate in hex escape")
    result: Json = value
    return result


def format_float(value: float) -> str:
    """Format like the pinned serde_json: shortest round trip, ryu layout, ``e+`` exponents."""
    if value == 0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    sign, digits, exponent = Decimal(repr(value)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0")
    exponent += len(digits) - len(text)
    length = len(text)
    point = length + exponent  # position of the decimal point relative to the digits
    prefix = "-" if sign else ""
    if 0 <= exponent and point <= 16:
        return f"{prefix}{text}{'0' * exponent}.0"
    if 0 < point <= 16:
        return f"{prefix}{text[:point]}.{text[point:]}"
    if -5 < point <= 0:
        return f"{prefix}0.{'0' * -point}{text}"
    power = point - 1
    exp = f"e+{power}" if power >= 0 else f"e{power}"
    if length == 1:
        return f"{prefix}{text}{exp}"
    return f"{prefix}{text[0]}.{text[1:]}{exp}"


def _encode(value: object, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(json.dumps(value, ensure_ascii=False))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(format_float(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key in sorted(value):
            if not first:
                out.append(",")
            first = False
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _encode(value[key], out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        _not_json(value)


def _has_float(value: object) -> bool:
    stack: list[object] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, float):
            return True
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return False


def _not_json(value: object) -> NoReturn:
    raise TypeError(f"not a JSON value: {type(value).__name__}")


# The C encoder json.dumps builds on every call, built once: sorted keys, compact separators,
# raw UTF-8, no cycle check (values come from a parser or from records, never cyclic), and
# infinities and NaN refused (no JSON has them).
_SORTED = c_make_encoder(None, _not_json, _quote, None, ":", ",", True, False, False) if c_make_encoder else None
_SORTED_PY = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
# Python writes every finite float with a digit right before its "." or "e": a text without
# that pair holds no float, whatever its strings say.
_MAYBE_FLOAT = re.compile("[0-9][.eE]").search


def canonical_json(value: object) -> str:
    """Compact JSON with object keys sorted by code point, serde_json escaping and numbers."""
    # Without floats the C encoder already writes serde's bytes: code point key order, raw
    # UTF-8, and the same escapes (short forms, lower-case \u00xx for other controls).
    if _SORTED is not None:
        text = "".join(_SORTED(value, 0))
        if _MAYBE_FLOAT(text) is None or not _has_float(value):
            return text
    elif not _has_float(value):
        return _SORTED_PY.encode(value)
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def fingerprint(
    *,
    project_id: str,
    expected_revision: int | None,
    operation: str,
    payload: Json,
    resource_kind: str,
    resource_id: str,
    change: str,
) -> str:
    """The 64-hex command fingerprint of §7.2 for any envelope (``command_id`` is deliberately
    not covered)."""
    def inner(text: str) -> str:  # a JSON string's content, escaped as serde escapes it
        return _quote(text)[1:-1]

    return envelope_digest(inner(project_id), expected_revision, inner(operation), canonical_json(payload),
                           inner(resource_kind), inner(resource_id), inner(change))


def envelope_digest(project_id: str, expected_revision: int | None, operation: str, payload_json: str,
                    resource_kind: str, resource_id: str, change: str) -> str:
    """``fingerprint`` of a decoded command: the payload already in canonical form (so a command
    encodes it once), every other string an id, a name or the change kind checked against its
    grammar (§0.5), which needs no JSON escaping, so each goes between quotes as it is."""
    # canonical_json of the envelope, written out: its keys in code point order.
    revision = "null" if expected_revision is None else str(expected_revision)
    text = (
        f'{{"change":"{change}","expected_revision":{revision},"operation":"{operation}",'
        f'"payload":{payload_json},"project_id":"{project_id}",'
        f'"resource":{{"id":"{resource_id}","kind":"{resource_kind}"}}}}'
    )
    return hashlib.sha256(text.encode()).hexdigest()
