"""``aidememo-ref``: the reference server's command line, and the token-free local flow.

``bootstrap`` and ``serve`` mirror ``aidememo-server``; ``xmemo bootstrap|serve`` run the XMemo
reference; every other command group (session, fact, workflow, agent, handoff, mcp, ...)
belongs to the local flow, which mirrors upstream ``aidememo``: the commands in ``_commands``
over the MCP server (``_mcp``), the remote flow (``_remote``) and the local store (``_local``).
Nothing heavy is imported here: agents call the local commands many times per task.
``AideMemoCliError`` is the root of every exception the command line defines.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aidememo_cli._local._errors import AideMemoCliError

__all__ = ["AideMemoCliError", "main"]


def __getattr__(name: str) -> object:
    # Lazily: the server commands load nothing of the local flow.
    if name == "AideMemoCliError":
        from aidememo_cli._local._errors import AideMemoCliError

        return AideMemoCliError
    raise AttributeError(f"module 'aidememo_cli' has no attribute {name!r}")

SERVER_COMMANDS = ("bootstrap", "serve")


def _server(run: Callable[[list[str]], int], argv: list[str]) -> int:
    """The server commands print bad syntax as ``error: …`` and exit 2."""
    from refkit.args import UsageError, fail

    try:
        return run(argv)
    except UsageError as exc:
        fail(str(exc), code=2)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--version"]:
        from refkit.version import VERSION

        print(f"aidememo-ref {VERSION}")
        return 0
    if args and args[0] == "xmemo":
        from xmemo_ref.verbs import run as xmemo_run

        return _server(xmemo_run, args[1:])
    if args and args[0] in SERVER_COMMANDS:
        from aidememo_ref import verbs

        return _server(verbs.bootstrap if args[0] == "bootstrap" else verbs.serve, args[1:])
    from ._commands import main as local_main

    return local_main(args)
