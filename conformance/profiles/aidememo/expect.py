"""Assertions AideMemo checks make about raw answers; each failure message carries the evidence."""

from __future__ import annotations

import re
from typing import Any

from conformance.expect import expect_status, shown
from conformance.http import Exchange

__all__ = ["RECEIPT_FIELDS", "expect_error", "expect_receipt", "expect_status", "is_error_shape", "record_of",
           "rpc_error", "tool_error", "tool_ok", "tool_result"]

RECEIPT_FIELDS = ("command_id", "fingerprint", "tenant_id", "project_id", "actor_id", "project_seq", "resource",
                  "revision", "committed_at_ms")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def expect_error(exchange: Exchange, status: int, code: str) -> dict[str, Any]:
    """Assert an AideMemo error answer: status, ``{"error":{"code","message"}}`` and the code."""
    assert exchange.status == status and exchange.error_code() == code, (
        f"expected HTTP {status} {code}; {shown(exchange)}"
    )
    error: dict[str, Any] = exchange.json()["error"]
    assert isinstance(error.get("message"), str), f"error body lacks a string message; {shown(exchange)}"
    return error


def expect_receipt(exchange: Exchange, *, kind: str | None = None, resource_id: str | None = None) -> dict[str, Any]:
    """Assert a 200 command receipt with every field of wire §2.5 well-typed."""
    receipt = expect_status(exchange, 200)
    assert isinstance(receipt, dict), f"a receipt must be a JSON object; {shown(exchange)}"
    missing = [name for name in RECEIPT_FIELDS if name not in receipt]
    assert not missing, f"receipt lacks {missing}; {shown(exchange)}"
    assert isinstance(receipt["fingerprint"], str) and _HEX64.match(receipt["fingerprint"]), (
        f"fingerprint is not 64 lowercase hex: {receipt['fingerprint']!r}")
    for name in ("project_seq", "revision", "committed_at_ms"):
        assert isinstance(receipt[name], int) and not isinstance(receipt[name], bool) and receipt[name] >= 1, (
            f"receipt {name} must be a positive integer, got {receipt[name]!r}")
    if kind is not None:
        assert receipt["resource"] == {"kind": kind, "id": resource_id}, (
            f"receipt resource {receipt['resource']!r} is not {kind}/{resource_id}")
    return receipt


def record_of(exchange: Exchange) -> tuple[int, dict[str, Any]]:
    """Assert a 200 typed status answer; return (revision, record)."""
    data = expect_status(exchange, 200)
    assert isinstance(data, dict) and isinstance(data.get("revision"), int) and isinstance(data.get("record"), dict), (
        f"typed status must be {{revision, record}}; {shown(exchange)}")
    return data["revision"], data["record"]


def is_error_shape(exchange: Exchange) -> bool:
    code = exchange.error_code()
    return code is not None and bool(_SNAKE.match(code))


# -- the MCP gateway (wire §1.18) ---------------------------------------------------------------
def rpc_error(exchange: Exchange, status: int, code: int) -> str:
    """A JSON-RPC error answer of the MCP gateway with this HTTP status and code; its message."""
    data = exchange.json() if exchange.body else None
    error = data.get("error") if isinstance(data, dict) else None
    assert exchange.status == status and isinstance(error, dict) and error.get("code") == code, (
        f"expected HTTP {status} with JSON-RPC error {code}, got {exchange.status} {exchange.body[:240]!r}")
    return str(error.get("message"))


def tool_result(exchange: Exchange) -> dict[str, Any]:
    """The JSON-RPC ``result`` of a 200 MCP answer."""
    assert exchange.status == 200, f"MCP answered {exchange.status} {exchange.body[:240]!r}"
    result = exchange.json().get("result")
    assert isinstance(result, dict), f"no JSON-RPC result: {exchange.body[:240]!r}"
    return result


def tool_ok(exchange: Exchange) -> Any:
    """The structured answer of a successful tool call."""
    result = tool_result(exchange)
    assert result.get("isError") is False, f"the tool call failed: {result.get('content')!r}"
    return result["structuredContent"]


def tool_error(exchange: Exchange, code: str) -> dict[str, Any]:
    """A failed tool call: still 200, ``isError`` true, the REST error inside."""
    result = tool_result(exchange)
    assert result.get("isError") is True, f"expected a failed tool call (isError true): {result!r}"
    error = (result.get("structuredContent") or {}).get("error")
    assert isinstance(error, dict) and error.get("code") == code, f"expected tool error {code}, got {error!r}"
    return error
