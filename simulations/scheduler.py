"""The seeded scheduler: one worker at a time, and the seed picks who goes next.

On the embedded reference the store calls ``point(name)`` at its transaction boundaries
(``begin`` once the write lock is held, ``decided``, ``commit``) and the workers add ``request``
and ``done`` around each request. At every point the scheduler parks the caller and, once every
live worker is parked, picks from the batch's seed (or from a recorded script) the one that
runs next. The same plan and seed therefore give the same interleaving, which is what makes a
failure replayable. A worker that holds the write lock stays the only candidate until its
request ends (others would block inside SQLite, outside any point, and the run would stall),
so a correct store's transactions stay atomic while a store that decides outside its
transaction gets interleaved there. A store that does more work after its transaction ended
says so with ``committed``: from there on others may run again.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence

__all__ = ["SeededScheduler"]


class _Thread(threading.local):
    # A class default rather than getattr(..., None): outside a batch (the state machines, set-up)
    # every store point would otherwise raise and clear an AttributeError.
    worker: int | None = None  # this thread's worker in the batch; None outside one


class SeededScheduler:
    """Runs one worker at a time; at every point the seed picks who goes next."""

    def __init__(self, seed: int = 0, script: Sequence[int] = ()) -> None:
        self._cond = threading.Condition()
        self._local = _Thread()
        self.reset(seed, script)

    def reset(self, seed: int, script: Sequence[int] = ()) -> None:
        """Start a batch: a fresh seed, and recorded decisions to follow first.

        A replay follows the script exactly; a shrunk plan follows it where it still can, so
        removing an operation keeps the rest of the interleaving.
        """
        with self._cond:
            self._rng = random.Random(seed)
            self._script = list(reversed(script))
            self._parked: dict[int, str] = {}
            self._live: set[int] = set()
            self._running: int | None = None
            self._holder: int | None = None
            self._expected = 0
            self.decisions: list[int] = []

    def expect(self, workers: int) -> None:
        with self._cond:
            self._expected = workers

    def _pick(self) -> None:
        # Called with the lock held, when nobody is running.
        if len(self._parked) < len(self._live) or len(self._live) < self._expected:
            return  # someone is still on its way to a point
        if not self._parked:
            return
        if self._holder is not None and self._holder in self._parked:
            candidates = [self._holder]
        else:
            candidates = sorted(self._parked)
        chosen: int | None = None
        while self._script and chosen is None:
            wanted = self._script.pop()
            if wanted in candidates:
                chosen = wanted
        if chosen is None:
            chosen = candidates[self._rng.randrange(len(candidates))]
        self.decisions.append(chosen)
        self._running = chosen
        self._cond.notify_all()

    def _wait_turn(self, me: int, name: str) -> None:
        self._parked[me] = name
        if self._running == me:
            self._running = None
        self._pick()
        while self._running != me:
            self._cond.wait()
        del self._parked[me]

    def enter(self, worker: int) -> None:
        """Register the calling thread as ``worker`` and wait for its first turn."""
        self._local.worker = worker
        with self._cond:
            self._live.add(worker)
            self._wait_turn(worker, "start")

    def leave(self) -> None:
        me = self._local.worker
        self._local.worker = None
        with self._cond:
            self._live.discard(me)
            self._expected -= 1
            if self._holder == me:
                self._holder = None
            if self._running == me:
                self._running = None
            self._pick()

    def point(self, name: str) -> None:
        me = self._local.worker
        if me is None:
            return  # setup and planning run outside the scheduler
        with self._cond:
            if name == "begin":
                self._holder = me
            elif name in ("done", "committed") and self._holder == me:
                self._holder = None
            self._wait_turn(me, name)
