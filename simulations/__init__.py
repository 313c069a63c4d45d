"""Race simulations for AideMemo ledgers: model, state machines, history checker, replay.

``aidememo-sim`` (``simulations.cli``) runs concurrent actors against a ledger, checks the
recorded history against ``model.py`` (written apart from ``aidememo_ref``) with ``checker.py``,
and writes each failure as a shrunk, exactly replayable case. See docs/simulations.md.
"""

from simulations.errors import SimulationError

__all__ = ["SimulationError"]
