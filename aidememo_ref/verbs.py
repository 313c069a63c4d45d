"""The server's command-line verbs, ``aidememo-ref bootstrap`` and ``aidememo-ref serve``: the
seam the command line calls. Each imports only what its verb needs."""

from __future__ import annotations

__all__ = ["bootstrap", "serve"]


def bootstrap(argv: list[str]) -> int:
    """``aidememo-ref bootstrap ARGS``: provision an actor into a project; the exit status."""
    from ._verbs.bootstrap import run

    return run(argv)


def serve(argv: list[str]) -> int:
    """``aidememo-ref serve ARGS``: serve the reference until stopped; the exit status."""
    from ._verbs.serve import run

    return run(argv)
