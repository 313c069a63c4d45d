"""Assertions any profile's checks make about raw HTTP answers; each failure carries the evidence.

A failure raises ``Departure`` (an ``AssertionError``) naming the step and what was expected of
it, so the reports can mark that step and show the expected answer beside the received one.
Every expectation is also noted on the step itself (``Exchange.expect``), met or not, for the
replay script.
"""

from __future__ import annotations

from typing import Any

from conformance.errors import Departure
from conformance.http import Exchange

__all__ = ["depart", "expect_status", "shown"]

SHOWN_BODY = 2000  # bytes of a body an assertion message quotes; the transcript has it whole


def shown(exchange: Exchange) -> str:
    """``METHOD URL answered STATUS: <the body>`` for assertion messages (a long body is cut at a
    stated length, never silently)."""
    body = exchange.body[:SHOWN_BODY].decode("utf-8", "replace")
    more = f"... ({len(exchange.body)} bytes; the transcript has them all)" if len(exchange.body) > SHOWN_BODY else ""
    return f"{exchange.method} {exchange.url} answered {exchange.status}: {body}{more}"


def depart(exchange: Exchange, expected: str, message: str) -> Departure:
    """The departure of ``exchange`` from ``expected`` (raise it)."""
    return Departure(message, entry=exchange, expected=expected)


def expect_status(exchange: Exchange, status: int) -> Any:
    """Assert the status; return the JSON body when there is one."""
    expected = exchange.expect(f"HTTP {status}")
    if exchange.status != status:
        raise depart(exchange, expected, f"expected HTTP {status}; {shown(exchange)}")
    return exchange.json() if exchange.body else None
