"""``handoff send|inbox|outbox|show|status|accept|heartbeat|return|complete|board|run``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from aidememo_cli._local import _assignments as assignments
from aidememo_cli._local import _memory as memory
from aidememo_cli._local._errors import invalid_input
from aidememo_cli._local._packet import DEFAULT_PACKET_LIMIT, Route
from aidememo_cli._local._records import Assignment
from aidememo_cli._local._rules import parse_duration_ms

from ._context import Context, Parser, add_command, clean, positive

if TYPE_CHECKING:
    from aidememo_cli._local._store import LocalStore


def _dash(value: object) -> str:
    return "-" if value is None else str(value)


def _need_actor(flag: str | None, ctx: Context, store: LocalStore, doing: str) -> str:
    actor = ctx.actor(flag, store)
    if actor is None:
        raise invalid_input(f"pass --actor-id or set AIDEMEMO_ACTOR_ID before {doing}")
    return actor


def _record_line(record: Assignment) -> str:
    return (f"Handoff {record.handoff_id} [{record.status}] {record.from_actor} -> {record.to_actor}"
            f" session={record.session_id} outcome={_dash(record.outcome)} result={_dash(record.result_fact_id)}")


def cmd_send(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=True) as store:
        profile = assignments.profile_or_refuse(store, args.alias)
        sender = ctx.actor(args.from_actor, store)
        if sender is None:
            raise invalid_input("set AIDEMEMO_ACTOR_ID or pass --from with the sending account alias")
        source_id = ctx.source(args.source_id, store) or profile.source_id
        to_actor, to_agent = args.alias.strip(), str(profile.agent)
        # Upstream renders the packet first: an invisible session is refused before anything is stored.
        built = memory.packet(store, args.session or ctx.env.get("AIDEMEMO_SESSION_ID"), Route(
            from_actor=sender, to_actor=to_actor, to_agent=to_agent, focus=args.focus, done_when=args.done_when,
            source_id=source_id), DEFAULT_PACKET_LIMIT)
        record = assignments.dispatch(store, assignments.NewAssignment(
            session_id=built.session.name, source_id=source_id, from_actor=sender, to_actor=to_actor,
            to_agent=to_agent, focus=args.focus, done_when=args.done_when,
            upstream_task_id=clean(args.kanban_task) or ctx.env_value("HERMES_KANBAN_TASK"),
            upstream_board_id=clean(args.kanban_board) or ctx.env_value("HERMES_KANBAN_BOARD"),
        ), ctx.now_ms)
    ctx.emit(record.to_json(), (
        f"Sent handoff {record.handoff_id} to {record.to_actor} [{record.status}]\nSession: {record.session_id}\n"
        f"Run: aidememo handoff run {args.alias}\nShow: aidememo handoff show {record.handoff_id}"
    ), sort=False)
    return 0


def _mailbox(args: argparse.Namespace, ctx: Context, *, sent: bool) -> int:
    with ctx.store(write=False) as store:
        actor = _need_actor(args.actor_id, ctx, store, "reading the outbox" if sent else "reading the inbox")
        source_id = ctx.source(args.source_id, store)
        include = (args.include_completed or not args.pending_only) if sent else args.include_completed
        records = assignments.mailbox(store, actor, source_id, include, args.limit, sent=sent)
    data = {"actor_id": actor, "source_id": source_id, "assignments": [r.to_json() for r in records]}
    if not records:
        ctx.emit(data, f"(no sent handoff assignments for {actor})" if sent else f"(no handoff assignments for {actor})")
        return 0
    if sent:
        rows = [f"  {r.handoff_id} [{r.status}] session={r.session_id} to={r.to_actor}"
                f" outcome={_dash(r.outcome)} result={_dash(r.result_fact_id)}" for r in records]
        head = f"{len(records)} sent handoff assignment(s) for {actor}:"
    else:
        rows = [f"  {r.handoff_id} [{r.status}] session={r.session_id} from={r.from_actor} focus={r.focus or '-'}"
                for r in records]
        head = f"{len(records)} handoff assignment(s) for {actor}:"
    ctx.emit(data, "\n".join([head, *rows]))
    return 0


def cmd_inbox(args: argparse.Namespace, ctx: Context) -> int:
    return _mailbox(args, ctx, sent=False)


def cmd_outbox(args: argparse.Namespace, ctx: Context) -> int:
    return _mailbox(args, ctx, sent=True)


def cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        record, _ = assignments.load(store, args.handoff_id)
    ctx.emit(record.to_json(), _record_line(record), sort=False)
    return 0


def cmd_status(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=False) as store:
        actor = _need_actor(args.actor_id, ctx, store, "reading handoff status")
        record = assignments.status(store, args.handoff_id, actor)
    ctx.emit(record.to_json(), _record_line(record), sort=False)
    return 0


def cmd_accept(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=True) as store:
        actor = _need_actor(args.actor_id, ctx, store, "accepting a handoff")
        accepted = assignments.accept(store, args.handoff_id, actor, args.claim_id, ctx.now_ms)
    envelope = accepted.to_json()
    ctx.emit(envelope, f"# Accepted assignment `{accepted.assignment.handoff_id}`\n\n{accepted.packet.content}\n"
                       f"Resume: {envelope['resume']['command']}")
    return 0


def cmd_heartbeat(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=True) as store:
        actor = _need_actor(args.actor_id, ctx, store, "sending a heartbeat")
        record = assignments.heartbeat(store, args.handoff_id, actor, ctx.now_ms)
    ctx.emit(record.to_json(), f"Heartbeat {record.handoff_id} count={record.heartbeat_count}"
                               f" at={record.last_heartbeat_at or 0}", sort=False)
    return 0


def cmd_complete(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=True) as store:
        actor = _need_actor(args.actor_id, ctx, store, "completing a handoff")
        record = assignments.complete(store, args.handoff_id, actor, ctx.now_ms)
    ctx.emit(record.to_json(), f"Completed handoff {record.handoff_id} for session {record.session_id} as {actor}",
             sort=False)
    return 0


def cmd_return(args: argparse.Namespace, ctx: Context) -> int:
    with ctx.store(write=True) as store:
        actor = _need_actor(args.actor_id, ctx, store, "returning a handoff")
        record, _ = assignments.return_result(store, args.handoff_id, actor, args.result_fact_id, args.outcome,
                                              ctx.now_ms)
    ctx.emit(record.to_json(), f"Returned handoff {record.handoff_id} outcome={_dash(record.outcome)}"
                               f" status={record.status} result={_dash(record.result_fact_id)}", sort=False)
    return 0


def cmd_board(args: argparse.Namespace, ctx: Context) -> int:
    stale_after = parse_duration_ms(args.stale_after)
    with ctx.store(write=False) as store:
        report = assignments.board(store, clean(args.actor_id), ctx.source(args.source_id, store), stale_after,
                                   args.include_completed, args.limit, ctx.now_ms)
    items = report["assignments"]
    lanes = report["lanes"]
    rows = [f"  {i['assignment']['handoff_id']} [{i['lane']}] {i['assignment']['from_actor']} ->"
            f" {i['assignment']['to_actor']} next={i['next_action']} owner={i['lifecycle_owner']}" for i in items]
    head = (f"Handoff board: ready={lanes['ready']} in_progress={lanes['in_progress']}"
            f" attention={lanes['attention']} returned={lanes['returned']}")
    ctx.emit(report, "\n".join([head, *rows]) if items else "(no handoff assignments)", sort=False)
    return 0


def cmd_run(args: argparse.Namespace, ctx: Context) -> int:
    from aidememo_cli._local import _worker  # subprocess and threads only when running

    alias = args.installation or args.alias
    handoff_id = args.handoff_id
    if args.installation and args.alias:
        if handoff_id is not None:
            raise invalid_input("do not combine --installation with the positional agent alias")
        handoff_id = args.alias  # the legacy `--installation ALIAS HANDOFF_ID` form
    if not alias:
        raise invalid_input("pass an agent alias, e.g. `aidememo handoff run codex-two`")
    request = _worker.RunRequest(
        alias=alias, handoff_id=handoff_id, next=args.next, workspace=args.workspace,
        kanban_task=clean(args.kanban_task), timeout_s=args.timeout, heartbeat_interval_s=args.heartbeat_interval,
        store_path=ctx.store_path, backend=ctx.backend,
    )
    return _worker.run(request, ctx)


COMMANDS = ('send', 'inbox', 'outbox', 'show', 'status', 'accept', 'heartbeat', 'complete', 'return', 'board', 'run')


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    group = groups.add_parser("handoff", help="assignments")
    group.add_argument("--remote-profile", metavar="NAME", help="route through an authenticated server profile")
    handoff = group.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)
    p = add_command(handoff, "send", cmd_send, "send the current tracked session to a configured agent alias")
    p.add_argument("--from", dest="from_actor", metavar="ACTOR_ID")
    p.add_argument("--source-id")
    p.add_argument("--focus")
    p.add_argument("--done-when")
    p.add_argument("--kanban-task")
    p.add_argument("--kanban-board")
    p.add_argument("alias", metavar="AGENT")
    p.add_argument("session", nargs="?", metavar="SESSION")
    p.set_defaults(trailing="session")
    for name, func, help_text in (("inbox", cmd_inbox, "assignments addressed to an actor"),
                                  ("outbox", cmd_outbox, "assignments an actor sent, with returned results")):
        p = add_command(handoff, name, func, help_text)
        p.add_argument("--actor-id")
        p.add_argument("--source-id")
        p.add_argument("--include-completed", action="store_true")
        if name == "outbox":
            p.add_argument("--pending-only", action="store_true")
        p.add_argument("-l", "--limit", type=positive("--limit"), default=20)
    p = add_command(handoff, "show", cmd_show, "one assignment, no actor needed")
    p.add_argument("handoff_id", metavar="HANDOFF_ID")
    for name, func, help_text in (
        ("status", cmd_status, "one assignment routed through the actor"),
        ("accept", cmd_accept, "acknowledge an assignment and print its packet"),
        ("heartbeat", cmd_heartbeat, "record worker liveness on an accepted assignment"),
        ("complete", cmd_complete, "legacy: mark accepted work completed without evidence"),
    ):
        p = add_command(handoff, name, func, help_text)
        p.add_argument("--actor-id")
        if name == "accept":
            p.add_argument("--claim-id", help="worker claim token (kit extension; upstream's CLI passes none)")
        p.add_argument("handoff_id", metavar="HANDOFF_ID")
    p = add_command(handoff, "return", cmd_return, "link receiver evidence, fail-closed")
    p.add_argument("--actor-id")
    p.add_argument("--outcome", required=True, metavar="succeeded|failed")
    p.add_argument("--result-fact-id", required=True, metavar="FACT_ID")
    p.add_argument("handoff_id", metavar="HANDOFF_ID")
    p = add_command(handoff, "board", cmd_board, "derived lanes with next actions")
    p.add_argument("--actor-id")
    p.add_argument("--source-id")
    p.add_argument("--stale-after", default="1h", metavar="DURATION")
    p.add_argument("--include-completed", action="store_true")
    p.add_argument("-l", "--limit", type=positive("--limit"), default=50)
    p = add_command(handoff, "run", cmd_run, "run one assignment through aidememo-worker-lane")
    p.add_argument("--next", action="store_true")
    p.add_argument("--installation", metavar="ALIAS")
    p.add_argument("--workspace", metavar="PATH")
    p.add_argument("--kanban-task")
    p.add_argument("--timeout", type=positive("--timeout"), metavar="SECONDS")
    p.add_argument("--heartbeat-interval", type=positive("--heartbeat-interval"), metavar="SECONDS")
    p.add_argument("alias", nargs="?", metavar="AGENT")
    p.add_argument("handoff_id", nargs="?", metavar="HANDOFF_ID")
    p.set_defaults(trailing="handoff_id")
