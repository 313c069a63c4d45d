"""``session new|start|resume|current|list|handoff`` (upstream's texts and JSON shapes)."""

from __future__ import annotations

import argparse
from typing import Any

from aidememo_cli._local import _assignments as assignments
from aidememo_cli._local import _memory as memory
from aidememo_cli._local._errors import LocalError, LocalErrorCode, invalid_input
from aidememo_cli._local._packet import DEFAULT_PACKET_LIMIT, Route, resolve_endpoint, resume_command, resume_exports

from ._context import Context, Parser, add_command, add_group, clean, dumps, positive


def cmd_new(args: argparse.Namespace, ctx: Context) -> int:
    source_id = clean(args.source_id)
    with ctx.store(write=True) as store:
        session = memory.session_new(store, args.topic, source_id, ctx.now_ms)
    exports = resume_exports(session.name, source_id)
    topic_line = args.topic.replace("\r", " ").replace("\n", " ")
    ctx.emit({"session_id": session.name, "topic": args.topic, "source_id": source_id, "export": exports},
             f"# aidememo session: {topic_line}\n# id: {session.name}\n{exports}")
    return 0


def cmd_start(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        envelope = memory.session_start(store, clean(args.source_id), args.recent_limit, args.recent_days,
                                        args.top_entities_limit, ctx.now_ms)
    stats = envelope["stats"]
    lines = [f"stats: {stats['entity_count']} entities, {stats['fact_count']} facts"
             + (", relations unavailable in source scope" if args.source_id else ", 0 relations"),
             f"pinned (0/{args.pinned_limit}):",
             f"recent (last {args.recent_days}d, {len(envelope['recent'])}/{args.recent_limit}):"]
    lines += [f"  [{f['id']}] {f['content'][:80]}" for f in envelope["recent"][:5]]
    lines.append(f"top entities ({len(envelope['top_entities'])}):")
    lines += [f"  - {e['name']} ({e['type']}) [{e['fact_count']} facts]" for e in envelope["top_entities"]]
    lines.append("open issues: unavailable in source scope" if args.source_id else "open issues: 0")
    cli_view = {key: envelope[key] for key in ("stats", "pinned", "recent", "top_entities", "open_issues")}
    ctx.emit(cli_view, "\n".join(lines))
    return 0


def cmd_resume(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        source_id = ctx.source(args.source_id, store)
        session = memory.resolve_session(store, args.session, source_id)
    exports = resume_exports(session.name, source_id)
    topic = (session.source_page or "-").replace("\r", " ").replace("\n", " ")
    data = {"session_id": session.name, "topic": session.source_page, "source_id": source_id,
            "env": {"AIDEMEMO_SESSION_ID": session.name, "AIDEMEMO_SOURCE_ID": source_id}, "export": exports}
    ctx.emit(data, f"# aidememo resume: {topic}\n# id: {session.name}\n{exports}")
    return 0


def cmd_current(args: argparse.Namespace, ctx: Context) -> int:
    name = ctx.env.get("AIDEMEMO_SESSION_ID")
    if name is None:
        ctx.out("null" if ctx.as_json else
                "(no current session — set AIDEMEMO_SESSION_ID or run `aidememo session new`)")
        return 0
    source_id = clean(args.source_id)
    with ctx.store(write=False) as store:
        entity = store.entity(name)
        if entity is None or not store.visible(entity.entity_id, source_id):
            raise LocalError(LocalErrorCode.ENTITY_NOT_FOUND, name)
        count = store.entity_fact_count(entity.entity_id, source_id)
    ctx.emit({"session_id": entity.name, "topic": entity.source_page, "fact_count": count,
              "created_at": entity.created_at},
             f"session: {entity.name}\ntopic:   {entity.source_page or '-'}\nfacts:   {count}")
    return 0


def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    source_id = clean(args.source_id)
    with ctx.store(write=False) as store:
        sessions = memory.session_list(store, source_id, args.limit)
    if not sessions:
        ctx.emit([], "(no tracked sessions yet — run `aidememo session new <topic>`)")
        return 0
    text = f"{len(sessions)} session(s):\n" + "".join(f"  {s['name']} ({s['fact_count']} facts)\n" for s in sessions)
    ctx.emit(sessions, text, sort=False)
    return 0


def cmd_handoff(args: argparse.Namespace, ctx: Context) -> int:
    from_agent, from_profile = resolve_endpoint("from", args.from_route, args.from_agent, args.from_profile)
    to_agent, to_profile = resolve_endpoint("to", args.to_route, args.to_agent, args.to_profile)
    to_actor = clean(args.to_actor)
    session_name = args.session or ctx.env.get("AIDEMEMO_SESSION_ID")
    with ctx.store(write=args.dispatch) as store:
        source_id, from_actor = ctx.source(args.source_id, store), ctx.actor(args.from_actor, store)
        route = Route(from_actor=from_actor, from_agent=from_agent, from_profile=from_profile, to_actor=to_actor,
                      to_agent=to_agent, to_profile=to_profile, focus=args.focus, done_when=args.done_when,
                      source_id=source_id)
        built = memory.packet(store, session_name, route, args.limit)
        record = None
        if args.dispatch:
            if from_actor is None:
                raise invalid_input("--dispatch requires --from-actor or AIDEMEMO_ACTOR_ID")
            if to_actor is None:
                raise invalid_input("--dispatch requires --to-actor")
            task = ctx.env_value("HERMES_KANBAN_TASK")
            record = assignments.dispatch(store, assignments.NewAssignment(
                session_id=built.session.name, source_id=source_id, from_actor=from_actor, to_actor=to_actor,
                from_agent=from_agent, from_profile=from_profile, to_agent=to_agent, to_profile=to_profile,
                focus=args.focus, done_when=args.done_when, upstream_task_id=task,
                upstream_board_id=ctx.env_value("HERMES_KANBAN_BOARD"),
            ), ctx.now_ms)
    resume = resume_command(built.session.name, source_id)
    payload: dict[str, Any] = {
        "artifact": "agent_handoff", "session_id": built.session.name, "topic": built.session.source_page,
        "fact_count": len(built.facts), "source_id": source_id,
        "handoff_id": None if record is None else record.handoff_id,
        "status": None if record is None else str(record.status), "dispatched": record is not None,
        "from_actor": from_actor, "from_agent": from_agent, "from_profile": from_profile, "to_agent": to_agent,
        "to_profile": to_profile, "to_actor": to_actor, "focus": args.focus, "done_when": args.done_when,
        "resume": {"command": resume,
                   "env": {"AIDEMEMO_SESSION_ID": built.session.name, "AIDEMEMO_SOURCE_ID": source_id}},
        "bytes": len(built.content.encode("utf-8")),
    }
    text = write_artifact(args.output, built.content, payload, ctx)
    if args.output is not None and not ctx.as_json:
        text += f"\nResume: {resume}"
    if record is not None and not ctx.as_json:
        text += f"\nAssignment: {record.from_actor} -> {record.to_actor} [{record.handoff_id}]"
    ctx.out(text)
    return 0


def cmd_canvas(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        built = memory.canvas(store, args.session or ctx.env.get("AIDEMEMO_SESSION_ID"), clean(args.source_id),
                              args.limit)
    ctx.out(write_artifact(args.output, built.content, {
        "artifact": "session_canvas", "session_id": built.session.name, "topic": built.session.source_page,
        "fact_count": len(built.facts), "bytes": len(built.content.encode("utf-8"))}, ctx))
    return 0


def write_artifact(output: str | None, body: str, payload: dict[str, Any], ctx: Context) -> str:
    """Upstream's ``write_artifact_or_stdout``: the file and a one-line receipt, or the body."""
    if output is not None:
        try:
            with open(output, "w", encoding="utf-8") as handle:
                handle.write(body)
        except OSError as exc:
            raise LocalError(LocalErrorCode.INTERNAL, f"write {output}: {exc.strerror}") from exc
        payload["output"] = output
        return dumps(payload, sort=True) if ctx.as_json else f"Wrote {payload['bytes']} bytes to {output}"
    if ctx.as_json:
        return dumps(payload | {"output": None, "content": body}, sort=True)
    return body


COMMANDS = ('new', 'start', 'resume', 'current', 'list', 'canvas', 'handoff')


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    session = add_group(groups, "session", "tracked sessions")
    p = add_command(session, "new", cmd_new, "start a tracked session; prints eval-able exports")
    p.add_argument("--source-id")
    p.add_argument("topic", metavar="TOPIC")
    p = add_command(session, "start", cmd_start, "one warm-up envelope: stats, recent facts, top entities")
    p.add_argument("--pinned-limit", type=positive("--pinned-limit"), default=20)
    p.add_argument("--recent-limit", type=positive("--recent-limit"), default=10)
    p.add_argument("--recent-days", type=positive("--recent-days"), default=7)
    p.add_argument("--top-entities-limit", type=positive("--top-entities-limit"), default=10)
    p.add_argument("--source-id")
    p = add_command(session, "resume", cmd_resume, "validate a session and print the exports that resume it")
    p.add_argument("--source-id")
    p.add_argument("session", metavar="SESSION")
    p = add_command(session, "current", cmd_current, "the session named by AIDEMEMO_SESSION_ID")
    p.add_argument("--source-id")
    p = add_command(session, "list", cmd_list, "recent tracked sessions")
    p.add_argument("--limit", type=positive("--limit"), default=20)
    p.add_argument("--source-id")
    p = add_command(session, "canvas", cmd_canvas, "the session as Markdown plus a Mermaid fact graph")
    p.add_argument("-o", "--output", metavar="PATH")
    p.add_argument("-l", "--limit", type=positive("--limit"), default=80)
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--source-id")
    p.add_argument("session", nargs="?", metavar="SESSION")
    p = add_command(session, "handoff", cmd_handoff, "the read-only handoff packet (or --dispatch it)")
    p.add_argument("-o", "--output", metavar="PATH")
    p.add_argument("-l", "--limit", type=positive("--limit"), default=DEFAULT_PACKET_LIMIT)
    p.add_argument("--include-superseded", action="store_true")
    p.add_argument("--source-id")
    p.add_argument("--from-actor")
    p.add_argument("--from", dest="from_route", metavar="AGENT[/PROFILE]")
    p.add_argument("--to", dest="to_route", metavar="AGENT[/PROFILE]")
    p.add_argument("--from-agent")
    p.add_argument("--from-profile")
    p.add_argument("--to-agent")
    p.add_argument("--to-profile")
    p.add_argument("--to-actor")
    p.add_argument("--focus")
    p.add_argument("--done-when")
    p.add_argument("--dispatch", action="store_true")
    p.add_argument("session", nargs="?", metavar="SESSION")
