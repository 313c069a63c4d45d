"""``mcp [--remote-profile NAME] [WIKI_ROOT]``: the stdio MCP server on the local store (its handoff
tools routed to a server with a remote profile)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ._context import Context, Parser, clean

if TYPE_CHECKING:
    from aidememo_cli._mcp._remote import RemoteTools


def cmd_mcp(args: argparse.Namespace, ctx: Context) -> int:
    from aidememo_cli._mcp._local import LocalTools
    from aidememo_cli._mcp._protocol import serve

    local = LocalTools(ctx.store_path, ctx.env, ctx.clock)
    tools: LocalTools | RemoteTools = local
    if profile := clean(args.remote_profile) or ctx.env_value("AIDEMEMO_REMOTE_PROFILE"):
        from .remote import remote_tools  # the HTTP stack only for a remote profile

        tools = remote_tools(ctx, profile, local)

    def write(line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()

    try:
        serve(sys.stdin, write, tools, _version())
    finally:
        tools.close()
    return 0


def _version() -> str:
    from refkit.version import VERSION

    return VERSION


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    p = groups.add_parser("mcp", help="stdio MCP server (newline-delimited JSON-RPC)")
    p.set_defaults(func=cmd_mcp)
    p.add_argument("--remote-profile", metavar="NAME")
    p.add_argument("wiki_root", nargs="?", metavar="WIKI_ROOT", help="store path (overrides --store)")
