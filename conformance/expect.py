"""Assertions any profile's checks make about raw HTTP answers; each failure carries the evidence."""

from __future__ import annotations

from typing import Any

from conformance.http import Exchange

__all__ = ["expect_status", "shown"]


def shown(exchange: Exchange) -> str:
    """``METHOD URL answered STATUS: <first 300 bytes of the body>``, for assertion messages."""
    body = exchange.body[:300].decode("utf-8", "replace")
    return f"{exchange.method} {exchange.url} answered {exchange.status}: {body}"


def expect_status(exchange: Exchange, status: int) -> Any:
    """Assert the status; return the JSON body when there is one."""
    assert exchange.status == status, f"expected HTTP {status}; {shown(exchange)}"
    return exchange.json() if exchange.body else None
