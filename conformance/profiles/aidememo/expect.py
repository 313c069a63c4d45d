"""Assertions AideMemo checks make about raw answers; each failure message carries the evidence."""

from __future__ import annotations

import re
from typing import Any

from conformance.expect import depart, expect_status, shown
from conformance.http import Exchange

__all__ = ["RECEIPT_FIELDS", "expect_error", "expect_receipt", "expect_status", "is_error_shape", "record_of",
           "rpc_error", "tool_error", "tool_ok", "tool_result"]

RECEIPT_FIELDS = ("command_id", "fingerprint", "tenant_id", "project_id", "actor_id", "project_seq", "resource",
                  "revision", "committed_at_ms")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


def expect_error(exchange: Exchange, status: int, code: str) -> dict[str, Any]:
    """Assert an AideMemo error answer: status, ``{"error":{"code","message"}}`` and the code.

    The message is any string: its words are the server's (``implementation_defined.MESSAGE``).
    """
    expected = exchange.expect(f"HTTP {status} {code}")
    if exchange.status != status or exchange.error_code() != code:
        raise depart(exchange, expected, f"expected HTTP {status} {code}; {shown(exchange)}")
    error: dict[str, Any] = exchange.json()["error"]
    if not isinstance(error.get("message"), str):
        raise depart(exchange, expected, f"error body lacks a string message; {shown(exchange)}")
    return error


def expect_receipt(exchange: Exchange, *, kind: str | None = None, resource_id: str | None = None) -> dict[str, Any]:
    """Assert a 200 command receipt with every field of wire §2.5 well-typed."""
    expected = exchange.expect("HTTP 200 with a receipt" + (f" of {kind}/{resource_id}" if kind is not None else ""))
    receipt = expect_status(exchange, 200)
    if not isinstance(receipt, dict):
        raise depart(exchange, expected, f"a receipt must be a JSON object; {shown(exchange)}")
    missing = [name for name in RECEIPT_FIELDS if name not in receipt]
    if missing:
        raise depart(exchange, expected, f"receipt lacks {missing}; {shown(exchange)}")
    if not (isinstance(receipt["fingerprint"], str) and _HEX64.match(receipt["fingerprint"])):
        raise depart(exchange, expected, f"fingerprint is not 64 lowercase hex: {receipt['fingerprint']!r}")
    for name in ("project_seq", "revision", "committed_at_ms"):
        value = receipt[name]
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise depart(exchange, expected, f"receipt {name} must be a positive integer, got {value!r}")
    if kind is not None and receipt["resource"] != {"kind": kind, "id": resource_id}:
        raise depart(exchange, expected, f"receipt resource {receipt['resource']!r} is not {kind}/{resource_id}")
    return receipt


def record_of(exchange: Exchange) -> tuple[int, dict[str, Any]]:
    """Assert a 200 typed status answer; return (revision, record)."""
    expected = exchange.expect("HTTP 200 with {revision, record}")
    data = expect_status(exchange, 200)
    if not (isinstance(data, dict) and isinstance(data.get("revision"), int) and isinstance(data.get("record"), dict)):
        raise depart(exchange, expected, f"typed status must be {{revision, record}}; {shown(exchange)}")
    return data["revision"], data["record"]


def is_error_shape(exchange: Exchange) -> bool:
    code = exchange.error_code()
    return code is not None and bool(_SNAKE.match(code))


# -- the MCP gateway (wire §1.18) ---------------------------------------------------------------
def rpc_error(exchange: Exchange, status: int, code: int) -> None:
    """A JSON-RPC error answer of the MCP gateway with this HTTP status and code. Its message is not
    returned: messages are the server's own (W §8 item 1), no verdict may read one."""
    expected = exchange.expect(f"HTTP {status} with JSON-RPC error {code}")
    data = exchange.json() if exchange.body else None
    error = data.get("error") if isinstance(data, dict) else None
    if exchange.status != status or not isinstance(error, dict) or error.get("code") != code:
        raise depart(exchange, expected, f"expected HTTP {status} with JSON-RPC error {code}; {shown(exchange)}")


def tool_result(exchange: Exchange) -> dict[str, Any]:
    """The JSON-RPC ``result`` of a 200 MCP answer."""
    expected = exchange.expect("HTTP 200 with a JSON-RPC result")
    if exchange.status != 200:
        raise depart(exchange, expected, f"MCP: {shown(exchange)}")
    data = exchange.json()
    result = data.get("result") if isinstance(data, dict) else None
    if not isinstance(result, dict):
        raise depart(exchange, expected, f"no JSON-RPC result: {shown(exchange)}")
    return result


def tool_ok(exchange: Exchange) -> Any:
    """The structured answer of a successful tool call."""
    result = tool_result(exchange)
    expected = exchange.expect("a successful tool call (isError false)")
    if result.get("isError") is not False:
        raise depart(exchange, expected, f"the tool call failed: {result.get('content')!r}")
    return result["structuredContent"]


def tool_error(exchange: Exchange, code: str) -> dict[str, Any]:
    """A failed tool call: still 200, ``isError`` true, the REST error inside."""
    result = tool_result(exchange)
    expected = exchange.expect(f"a failed tool call with error {code}")
    if result.get("isError") is not True:
        raise depart(exchange, expected, f"expected a failed tool call (isError true): {result!r}")
    content = result.get("structuredContent")
    error = content.get("error") if isinstance(content, dict) else None
    if not isinstance(error, dict) or error.get("code") != code:
        raise depart(exchange, expected, f"expected tool error {code}, got {error!r}")
    return error
