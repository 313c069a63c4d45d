"""Clocks: where the ledger's time comes from. Leases are tested by moving a clock, not by sleeping."""

from __future__ import annotations

import threading
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "AdvancingClock", "HOLD_LAPSES_MS", "SystemClock", "ManualClock", "OffsetClock"]

# A held clock runs on by itself after this much wall time, so a run interrupted while it held the
# clock (a script killed between its hold and its release) cannot leave a server's time stopped.
HOLD_LAPSES_MS = 60_000


@runtime_checkable
class Clock(Protocol):
    """Where the ledger reads the time: Unix milliseconds, once per request."""

    def now_ms(self) -> int: ...


@runtime_checkable
class AdvancingClock(Clock, Protocol):
    """A clock that can be moved forward and held still: what the ``/__test__/clock`` extension needs."""

    def advance(self, ms: int) -> None: ...

    def hold(self, held: bool) -> None:
        """Stand still at the current reading (``held``), or run on from it."""
        ...


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

    def hold(self, held: bool) -> None:
        """Nothing to do: this clock never moves by itself."""

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms


class OffsetClock:
    """Wall time plus an offset: the ``--test-clock`` server's clock. It never goes back: an advance
    adds to the offset, and a hold keeps the reading still (one request's time is then exactly
    what the test set, whatever the requests' latency) until it is released or lapses
    (``HOLD_LAPSES_MS``), after which it runs on from the held reading."""

    def __init__(self) -> None:
        self._offset = 0
        self._held: tuple[int, int] | None = None  # (the held reading, the wall time the hold began)
        self._lock = threading.Lock()

    @staticmethod
    def _wall() -> int:
        return time.time_ns() // 1_000_000

    def _now(self, wall: int) -> int:
        if self._held is not None:
            reading, since = self._held
            if wall - since < HOLD_LAPSES_MS:
                return reading
            self._offset, self._held = reading - since - HOLD_LAPSES_MS, None  # lapsed: on from the reading
        return wall + self._offset

    def now_ms(self) -> int:
        with self._lock:
            return self._now(self._wall())

    def advance(self, ms: int) -> None:
        with self._lock:
            wall = self._wall()
            now = self._now(wall)
            if self._held is not None:
                self._held = (now + ms, self._held[1])
            else:
                self._offset += ms

    def hold(self, held: bool) -> None:
        with self._lock:
            wall = self._wall()
            now = self._now(wall)
            self._offset = now - wall
            self._held = (now, wall) if held else None
