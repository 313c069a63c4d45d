"""``replica pull|status|get|outbox|publish|reset``: the exact-read cache and the send outbox.

Upstream's commands and output (``cmd/replica.rs``). ``status``, ``get``, ``outbox`` and
``reset`` never contact the server. The default replica file is ``<store>.replica.sqlite``.
"""

from __future__ import annotations

import argparse
import json

from aidememo_wire.ids import id_problem, name_problem
from aidememo_cli._local._errors import invalid_input
from aidememo_cli._remote._http import Remote
from aidememo_cli._remote._profiles import load_profile
from aidememo_cli._remote._replica import ReplicaStore, pull, replica_path

from ._context import Context, Parser, add_command, add_group, dumps, positive
from .remote import connect, outbox, sender


def _path(args: argparse.Namespace, ctx: Context) -> str:
    return replica_path(ctx.store_path, args.replica_path)


def cmd_pull(args: argparse.Namespace, ctx: Context) -> int:
    path = _path(args, ctx)
    profile = load_profile(args.remote_profile, ctx.env)
    with Remote(profile) as remote, ReplicaStore(path, ctx.clock) as store:
        report = pull(remote, store, 100 if args.limit is None else args.limit)
    verb = "bootstrapped" if report["bootstrapped"] else "updated"
    ctx.emit({"replica_path": path, "remote_profile": args.remote_profile, "report": report},
             f"replica {verb}: {path} profile={args.remote_profile} actor={report['identity']['actor_id']}"
             f" seq={report['after_seq']} changes={report['changes']} resources={report['resource_count']}"
             f" tombstones={report['tombstone_count']}")
    return 0


def cmd_status(args: argparse.Namespace, ctx: Context) -> int:
    path = _path(args, ctx)
    with ReplicaStore(path, ctx.clock) as store:
        status = store.status()
    if status["scope"] is not None and status["project_epoch"] is not None and status["actor_id"] is not None:
        text = (f"replica status: {path} tenant={status['scope']['tenant_id']} project={status['scope']['project_id']}"
                f" actor={status['actor_id']} epoch={status['project_epoch']} seq={status['after_seq']}"
                f" resources={status['resource_count']} tombstones={status['tombstone_count']}"
                f" updated_at_ms={status['updated_at_ms'] or 0}")
    else:
        text = f"replica status: {path} uninitialized (run `aidememo replica pull --remote-profile NAME`)"
    ctx.emit({"replica_path": path, "status": status}, text)
    return 0


def cmd_get(args: argparse.Namespace, ctx: Context) -> int:
    if (problem := name_problem("resource kind", args.kind)) is not None:
        raise invalid_input(problem)
    if (problem := id_problem(args.resource_id)) is not None:
        raise invalid_input(f"invalid resource_id: {problem}")
    with ReplicaStore(_path(args, ctx), ctx.clock) as store:
        resource = store.resource(args.kind, args.resource_id)
    if resource is None:
        raise invalid_input(f"cached resource {args.kind}/{args.resource_id} was not found")
    ctx.emit(resource, dumps(resource, sort=True, pretty=False))
    return 0


def cmd_outbox(args: argparse.Namespace, ctx: Context) -> int:
    entries = [entry.to_json(entry.state, entry.last_error) for entry in outbox(ctx).pending(args.remote_profile)]
    value = {"count": len(entries), "entries": entries}
    text = ("remote outbox: empty" if not entries
            else f"remote outbox: {len(entries)} queued send(s)\n{dumps(value, sort=True)}")
    ctx.emit(value, text)
    return 0


def cmd_publish(args: argparse.Namespace, ctx: Context) -> int:
    with connect(ctx, args.remote_profile) as handoffs:
        value = sender(ctx, handoffs).publish()
    ctx.emit(value, f"remote outbox publish: profile={args.remote_profile} published={value['published']}"
                    f" failed={value['failed']} conflicts={value['conflicts']}")
    return 0


def cmd_reset(args: argparse.Namespace, ctx: Context) -> int:
    if not args.force:
        raise invalid_input("replica reset removes cached scope, cursor, resources, and tombstones; pass --force")
    path = _path(args, ctx)
    with ReplicaStore(path, ctx.clock) as store:
        store.reset()
    # Upstream prints this one compact, not pretty.
    ctx.out(json.dumps({"replica_path": path, "reset": True}, separators=(",", ":"), ensure_ascii=False)
            if ctx.as_json else f"replica reset: {path}")
    return 0


COMMANDS = ("pull", "status", "get", "outbox", "publish", "reset")


def register(groups: argparse._SubParsersAction[Parser]) -> None:
    replica = add_group(groups, "replica", "exact-read replica of a remote project, and the send outbox")
    p = add_command(replica, "pull", cmd_pull, "bootstrap or catch up the replica")
    p.add_argument("--remote-profile", required=True, metavar="NAME")
    p.add_argument("--replica-path", metavar="PATH", help="default: <store>.replica.sqlite")
    p.add_argument("--limit", type=positive("--limit"), metavar="N", help="changes per batch (1..=1000, default 100)")
    p = add_command(replica, "status", cmd_status, "the durable cursor, offline")
    p.add_argument("--replica-path", metavar="PATH")
    p = add_command(replica, "get", cmd_get, "one cached resource, offline")
    p.add_argument("--replica-path", metavar="PATH")
    p.add_argument("kind", metavar="KIND")
    p.add_argument("resource_id", metavar="ID")
    p = add_command(replica, "outbox", cmd_outbox, "queued remote sends, offline")
    p.add_argument("--remote-profile", metavar="NAME")
    p = add_command(replica, "publish", cmd_publish, "replay queued sends with their reserved ids")
    p.add_argument("--remote-profile", required=True, metavar="NAME")
    p = add_command(replica, "reset", cmd_reset, "clear the replica (scope, cursor, resources)")
    p.add_argument("--replica-path", metavar="PATH")
    p.add_argument("--force", action="store_true")
