"""``profile export``: the read-only project profile from current typed facts."""

from __future__ import annotations

import argparse

from aidememo_cli._local import _memory as memory

from ._context import Context, Parser, add_command, add_group, clean, positive
from .session import write_artifact


def cmd_export(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        content, facts, entities = memory.profile_export(store, clean(args.source_id), args.limit,
                                                         args.include_sessions)
    ctx.out(write_artifact(args.output, content, {
        "artifact": "project_profile", "fact_count": facts, "entity_count": entities,
        "bytes": len(content.encode("utf-8"))}, ctx))
    return 0


COMMANDS = ('export',)


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    profile = add_group(groups, "profile", "derived project artifacts")
    p = add_command(profile, "export", cmd_export, "the project profile (Markdown)")
    p.add_argument("-o", "--output", metavar="PATH")
    p.add_argument("-l", "--limit", type=positive("--limit"), default=80)
    p.add_argument("--source-id")
    p.add_argument("--include-sessions", action="store_true")
