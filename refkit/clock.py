"""Clocks: where the ledger's time comes from. Leases are tested by moving a clock, not by sleeping."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "AdvancingClock", "SystemClock", "ManualClock", "OffsetClock"]


@runtime_checkable
class Clock(Protocol):
    """Where the ledger reads the time: Unix milliseconds, once per request."""

    def now_ms(self) -> int: ...


@runtime_checkable
class AdvancingClock(Clock, Protocol):
    """A clock that can be moved forward: what the ``/__test__/clock`` extension needs."""

    def advance(self, ms: int) -> None: ...


class SystemClock:
    """Wall-clock Unix milliseconds, as upstream reads them once per request."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (for tests and deterministic simulations)."""

    def __init__(self, start_ms: int = 1_767_225_600_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def advance(self, ms: int) -> None:
        with self._lock:
            self._now += ms

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms


class OffsetClock:
    """Wall time plus an offset that only grows: the ``--test-clock`` server's clock."""

    def __init__(self) -> None:
        self._offset = 0
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return time.time_ns() // 1_000_000 + self._offset

    def advance(self, ms: int) -> None:
        with self._lock:
            self._offset += ms
