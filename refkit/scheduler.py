"""The seam through which a simulation orders concurrent writes in either reference's store."""

from __future__ import annotations

from typing import Final, Protocol

__all__ = ["Scheduler", "NO_SCHEDULER"]


class Scheduler(Protocol):
    """Called at a write's boundaries (``begin``, ``decided``, ``commit``) so a simulation can
    force an interleaving."""

    def point(self, name: str) -> None: ...


class _NoScheduler:
    def point(self, name: str) -> None:
        return None


NO_SCHEDULER: Final[Scheduler] = _NoScheduler()
