"""Values a check must compute itself: canonical JSON, the command fingerprint, derived ids.

Pinned by the test vectors of the wire reference (§7.1–§7.3) in ``tests/suite/test_derive.py``.
This module must not import the reference ledger: a check that borrowed the ledger's own
fingerprint code could not notice the ledger computing it wrongly.
"""

from __future__ import annotations

import hashlib
import math
from decimal import Decimal

__all__ = [
    "bearer_digest_hex",
    "canonical_json",
    "command_fingerprint",
    "stable_operation_id",
]

_I64_MIN = -(2**63)
_U64_MAX = 2**64 - 1
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    # serde_json escapes only the quote, the backslash and C0 controls; the rest is raw UTF-8.
    out = ['"']
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _float(value: float) -> str:
    # ryu as used by serde_json (ERRATA 1): shortest round-trip digits; plain decimal while the
    # decimal exponent is in -5..=15, otherwise `d.ddde+X` / `d.ddde-X`.
    if not math.isfinite(value):
        raise ValueError("JSON has no representation for NaN or infinity")
    if value == 0.0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digit_tuple, exponent = Decimal(repr(value)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    exponent += len("".join(map(str, digit_tuple))) - len(digits)
    point = len(digits) + exponent  # position of the decimal point from the left of `digits`
    scientific = point - 1
    head = "-" if sign else ""
    if -5 <= scientific <= 15:
        if point <= 0:
            return f"{head}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{head}{digits}{'0' * (point - len(digits))}.0"
        return f"{head}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + (f".{digits[1:]}" if len(digits) > 1 else "")
    return f"{head}{mantissa}e{'+' if scientific > 0 else '-'}{abs(scientific)}"


def canonical_json(value: object) -> str:
    """Serialize ``value`` as the server stores it: sorted keys, compact, serde_json text.

    Raises:
        TypeError: for a value JSON cannot carry.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        # serde_json keeps 64-bit integers exact and parses anything wider as f64.
        return str(value) if _I64_MIN <= value <= _U64_MAX else _float(float(value))
    if isinstance(value, float):
        return _float(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical_json(item) for item in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda key: key.encode("utf-8"))
        return "{" + ",".join(f"{_string(key)}:{canonical_json(value[key])}" for key in keys) + "}"
    raise TypeError(f"cannot canonicalize {type(value).__name__}")


def command_fingerprint(
    *,
    project_id: str,
    expected_revision: int | None,
    operation: str,
    payload: object,
    resource_kind: str,
    resource_id: str,
    change: str = "upsert",
) -> str:
    """The 64-hex fingerprint every receipt carries (wire §7.2); ``command_id`` is not part of it."""
    envelope = {
        "project_id": project_id,
        "expected_revision": expected_revision,
        "operation": operation,
        "payload": payload,
        "resource": {"kind": resource_kind, "id": resource_id},
        "change": change,
    }
    return hashlib.sha256(canonical_json(envelope).encode("utf-8")).hexdigest()


def stable_operation_id(prefix: str, parts: list[str] | tuple[str, ...]) -> str:
    """``prefix_<sha256>`` over length-prefixed parts, as the upstream CLI derives claim and command ids (wire §7.3)."""
    digest = hashlib.sha256()
    for piece in (prefix, *parts):
        raw = piece.encode("utf-8")
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return f"{prefix}_{digest.hexdigest()}"


def bearer_digest_hex(token: str) -> str:
    """Lowercase hex SHA-256 of the token, the key the server stores (wire §7.1)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()
