"""``aidememo-ref``: the reference server's command line, and the token-free local flow.

``bootstrap`` and ``serve`` mirror ``aidememo-server``; every other command group (session,
fact, workflow, agent, handoff, mcp, ...) belongs to the local flow in ``local``, which mirrors
upstream ``aidememo``. Nothing heavy is imported here: agents call the local commands many
times per task.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

SERVER_COMMANDS = ("bootstrap", "serve")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in SERVER_COMMANDS:
        from ._args import UsageError, fail

        if args[0] == "bootstrap":
            from .bootstrap import run
        else:
            from .serve import run
        try:
            return run(args[1:])
        except UsageError as exc:
            fail(str(exc), code=2)
    from .local import main as local_main

    return local_main(args)
