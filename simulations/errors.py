"""The simulator's one exception root."""

from __future__ import annotations

__all__ = ["SimulationError"]


class SimulationError(ValueError):
    """Bad simulator input (history, replay file, options, target); CLIs print it on one line."""
