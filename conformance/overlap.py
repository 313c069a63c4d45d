"""Checks started ahead in threads, for a profile whose checks mostly wait on its target's processes.

A profile with ``overlap`` above 1 (aidememo-local: each check is a few dozen CLI processes on
a store of its own) has its checks started, in pytest's order, at most ``overlap`` at once, as
soon as the first of them sets up; pytest then meets each check's outcome where it would have
called it, and its return or its exception is the check's own. The verdicts are those of a
serial run because such checks share nothing one of them could see (a store, a project and
identities each), every check's steps keep their order, and each check's world (its seeded
randomness, ids and transcript) is built in pytest's thread before the check starts.

Only a check whose only fixture is ``world`` runs ahead, and only where its capabilities are
claimed (an unclaimed one is skipped by its fixture as before); any other runs where pytest calls it.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

__all__ = ["Overlap", "runs_ahead"]

# The fixtures a check run ahead may use: its world, and what the world is built from.
_AHEAD_FIXTURES = frozenset({"world", "conformance_target", "request"})


def runs_ahead(item: Any) -> bool:
    """Whether ``item`` (a pytest item) can be called with its world alone, away from pytest's thread."""
    function = getattr(item, "obj", None)
    if function is None or hasattr(item, "callspec") or not set(item.fixturenames) <= _AHEAD_FIXTURES:
        return False
    return list(inspect.signature(function).parameters) == ["world"]


class Overlap:
    """The checks of one pytest process started ahead: nodeid -> the running check's future."""

    def __init__(self, width: int) -> None:
        self._pool = ThreadPoolExecutor(max_workers=width, thread_name_prefix="conformance-check")
        self._started: dict[str, Future[object]] = {}
        self._lock = threading.Lock()

    def start(self, nodeid: str, check: Callable[[], object]) -> None:
        with self._lock:
            if nodeid not in self._started:
                self._started[nodeid] = self._pool.submit(check)

    def outcome(self, nodeid: str) -> Future[object] | None:
        """The check's future, when it was started ahead."""
        with self._lock:
            return self._started.get(nodeid)

    def close(self) -> None:
        """Drop the checks not started yet; wait for the running ones (each command has its deadline),
        so the target they use is not closed under them."""
        self._pool.shutdown(wait=True, cancel_futures=True)
