"""``aidememo-ref``: the reference server's command line, and the token-free local flow.

``bootstrap`` and ``serve`` mirror ``aidememo-server``; ``xmemo bootstrap|serve`` run the XMemo
reference; every other command group (session,
fact, agent, handoff, with their global options) belongs to the local flow in ``local``.
Nothing heavy is imported here: agents call the local commands many times per task.
"""

from __future__ import annotations

import sys

__all__ = ["main"]

SERVER_COMMANDS = ("bootstrap", "serve")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "xmemo":
        from .xmemo import run as xmemo_run

        return xmemo_run(args[1:])
    if args and args[0] in SERVER_COMMANDS:
        if args[0] == "bootstrap":
            from .bootstrap import run
        else:
            from .serve import run
        return run(args[1:])
    if not args or args[0] in ("-h", "--help"):
        print(
            "usage: aidememo-ref bootstrap|serve ... (reference server)\n"
            "       aidememo-ref xmemo bootstrap|serve ... (XMemo reference server)\n"
            "       aidememo-ref [--store PATH] [--json] session|fact|agent|config|handoff ... (token-free local flow)"
        )
        return 0 if args else 2
    from .local import main as local_main

    return local_main(args)
