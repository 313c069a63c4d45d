"""The simulator's one exception root.

Two signals stay outside it, caught inside the package and never raised to a caller of its
API: ``targets.Lost`` (a target did not answer) and ``linearizability.search.OutOfBudget``. As
subclasses of this root they would also be ``ValueError``s, and the command line's one-line
handler would take them for bad input."""

from __future__ import annotations

__all__ = ["SimulationError"]


class SimulationError(ValueError):
    """Bad simulator input (history, replay file, options, target); CLIs print it on one line."""
