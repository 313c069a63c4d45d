"""The workflows of ``aidememo-sim``, one module per command (``simulations.cli`` parses the
arguments and dispatches): ``run`` (with ``faults`` for ``run --faults``), ``replay``, ``check``,
``clients`` and ``xmemo``; ``targets`` reads what the arguments name and ``output`` ends a
command. Each module imports its campaign when it runs, so ``--help`` loads none.
"""

from __future__ import annotations

__all__ = ["EXIT_OK", "EXIT_UNKNOWN", "EXIT_USAGE", "EXIT_VIOLATION"]

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
EXIT_UNKNOWN = 3
