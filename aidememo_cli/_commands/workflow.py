"""``workflow start TITLE``: a tracked session for a ticket, its ticket fact and a context pack."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from aidememo_cli._local import _memory as memory
from aidememo_cli._local._errors import LocalError, LocalErrorCode, invalid_input

from ._context import Context, Parser, add_command, add_group, clean, positive


def _body(args: argparse.Namespace) -> str | None:
    given = sum(1 for present in (args.body is not None, args.body_file is not None, args.from_stdin) if present)
    if given > 1:
        raise invalid_input("pass only one of --body, --body-file, or --from-stdin")
    if args.body_file is not None:
        try:
            with open(args.body_file, encoding="utf-8") as handle:
                return handle.read()
        except OSError as exc:
            raise LocalError(LocalErrorCode.INTERNAL, f"read {args.body_file}: {exc.strerror}") from exc
    if args.from_stdin:
        return sys.stdin.read()
    body: str | None = args.body
    return body


def _text(pack: dict[str, Any], max_chars: int) -> str:
    """Upstream's ``render_workflow_start_text``."""
    out = f"# workflow start · {pack['title']}\n\nsession: `{pack['session_id']}`\nresume environment:\n```sh\n"
    out += f"{pack['export']}\n```\n"
    for key, label in (("source", "source"), ("source_id", "source_id"), ("ticket_fact_id", "ticket_fact")):
        if pack.get(key) is not None:
            out += f"{label}: `{pack[key]}`\n"
    for title, hits in (("context hits", pack["context"]["search"]), ("relevant decisions", pack["relevant_decisions"]),
                        ("prior lessons", pack["prior_lessons"]), ("prior errors", pack["prior_errors"])):
        out += f"\n## {title} ({len(hits)})\n" + "".join(f"- [{h['fact_id']}] {h['content']}\n" for h in hits[:5])
    if len(out.encode("utf-8")) > max_chars:
        out = out.encode("utf-8")[: max(0, max_chars - 20)].decode("utf-8", "ignore") + "\n... [truncated]\n"
    return out


def cmd_start(args: argparse.Namespace, ctx: Context) -> int:
    body = _body(args)
    with ctx.store(write=True) as store:
        pack = memory.workflow_start(
            store, title=args.title, body=body, source=args.source, source_id=clean(args.source_id),
            actor_id=ctx.actor(args.actor_id, store), parent_session_id=args.parent_session, limit=args.limit,
            recent_limit=args.recent_limit, now_ms=ctx.now_ms,
        )
    ctx.emit(pack, _text(pack, args.max_chars))
    return 0


COMMANDS = ('start',)


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    workflow = add_group(groups, "workflow", "workflow-triggered tasks")
    p = add_command(workflow, "start", cmd_start, "start a tracked session from a ticket")
    p.add_argument("--body")
    p.add_argument("--body-file", metavar="PATH")
    p.add_argument("--from-stdin", action="store_true")
    p.add_argument("--source")
    p.add_argument("--source-id")
    p.add_argument("--actor-id")
    p.add_argument("--parent-session", metavar="SESSION")
    p.add_argument("-l", "--limit", type=positive("--limit"), default=8)
    p.add_argument("-d", "--depth", type=positive("--depth"), default=2)
    p.add_argument("--recent-limit", type=positive("--recent-limit"), default=5)
    p.add_argument("--bm25-only", action="store_true", help="accepted; this kit's retrieval is lexical anyway")
    p.add_argument("--max-chars", type=positive("--max-chars"), default=6000)
    p.add_argument("title", metavar="TITLE")
