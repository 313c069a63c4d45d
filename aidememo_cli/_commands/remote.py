"""``handoff --remote-profile NAME VERB``: the handoff verbs routed to an authenticated server.

The route is taken for ``--remote-profile`` or ``AIDEMEMO_REMOTE_PROFILE``, as upstream. The
arguments are the local verbs' own (one parser), judged here as ``cmd/remote_handoff.rs`` does:
identity comes only from the token (``--actor-id``/``--from`` refused), ``board``, ``complete``
and ``run`` are local-only, and the answers are upstream's. The embedded store (``--store``) is
where ``send`` renders its packet and ``accept``/``return`` keep the receiver's local context.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from aidememo_cli._local._errors import invalid_input
from aidememo_cli._local._packet import resume_exports
from aidememo_cli._local._store import LocalStore
from aidememo_cli._remote._handoffs import RemoteHandoffs
from aidememo_cli._remote._http import Remote
from aidememo_cli._remote._profiles import load_profile
from aidememo_cli._remote._input import reject_actor_override

from ._context import Context, clean, dumps

if TYPE_CHECKING:
    from aidememo_cli._mcp._local import LocalTools
    from aidememo_cli._mcp._remote import RemoteTools
    from aidememo_cli._remote._outbox import Outbox
    from aidememo_cli._remote._send import Sender

# The reads (inbox, outbox, show) are most remote calls: the outbox and the sender (shutil,
# dataclasses) are imported by the verbs that use them, so a read starts like a local command.

__all__ = ["run", "connect", "outbox", "remote_tools", "sender"]

LOCAL_ONLY = "remote profiles currently support handoff send, inbox, outbox, show/status, accept, heartbeat, and return"


def outbox(ctx: Context) -> Outbox:
    from aidememo_cli._remote._outbox import Outbox, outbox_dir

    return Outbox(outbox_dir(ctx.env), ctx.clock)


@contextmanager
def connect(ctx: Context, name: str) -> Iterator[RemoteHandoffs]:
    """The profile's handoff verbs, closed afterwards."""
    with Remote(load_profile(name, ctx.env)) as remote:
        yield RemoteHandoffs(remote, ctx.clock)


def sender(ctx: Context, handoffs: RemoteHandoffs) -> Sender:
    from aidememo_cli._remote._send import Sender

    return Sender(handoffs, outbox(ctx))


@contextmanager
def _store(ctx: Context) -> Iterator[LocalStore]:
    store = LocalStore(ctx.store_path)
    try:
        yield store
    finally:
        store.close()


def _text(value: dict[str, Any]) -> str | None:
    """Upstream's text rendering (``render`` in cmd/remote_handoff.rs); None: pretty JSON."""
    if value.get("artifact") == "remote_handoff_accept":
        return (f"# aidememo remote handoff accepted: {value['handoff_id']}\n"
                f"# local context fact: {value['local_context_fact_id']}\n"
                f"{resume_exports(value['session_id'], value['source_id'])}\n"
                f"export AIDEMEMO_ACTOR_ID={value['actor_id']}")
    assignments = value.get("assignments")
    if isinstance(assignments, list):
        if not assignments:
            return "(no remote handoff assignments)"
        rows = [f"{len(assignments)} remote handoff assignment(s):"]
        for entry in assignments:
            record = entry.get("record", entry) if isinstance(entry, dict) else {}

            def field(name: str) -> str:
                found = record.get(name)
                return found if isinstance(found, str) else "-"

            rows.append(f"  {field('handoff_id')} [{field('status')}] {field('from_actor')} -> {field('to_actor')}"
                        f" session={field('session_id')}")
        return "\n".join(rows)
    return None


def _emit(ctx: Context, value: dict[str, Any]) -> int:
    text = _text(value)
    ctx.emit(value, text if text is not None else dumps(value, sort=True), sort=True)
    return 0


def run(args: argparse.Namespace, ctx: Context, name: str) -> int:
    """Run one remote handoff verb for profile ``name``."""
    command = args.command
    if command in ("board", "complete", "run"):
        raise invalid_input(LOCAL_ONLY)
    source_default = ctx.env_value("AIDEMEMO_SOURCE_ID")
    if command == "send":
        reject_actor_override(clean(args.from_actor))
        if clean(args.kanban_task) or clean(args.kanban_board):
            raise invalid_input("remote handoff send does not yet persist Hermes Kanban metadata")
        with connect(ctx, name) as handoffs, _store(ctx) as store:
            session = args.session or ctx.env.get("AIDEMEMO_SESSION_ID")
            return _emit(ctx, sender(ctx, handoffs).send(store, args.alias.strip(), session,
                                            clean(args.source_id) or source_default, clean(args.focus),
                                            clean(args.done_when)))
    with connect(ctx, name) as handoffs:
        handoffs.identity()  # upstream resolves identity before it judges the verb's flags
        if command != "show":
            reject_actor_override(clean(args.actor_id))
        if command == "inbox":
            value = handoffs.mailbox("inbox", clean(args.source_id) or source_default, args.include_completed,
                                     args.limit)
        elif command == "outbox":
            value = handoffs.mailbox("outbox", clean(args.source_id) or source_default,
                                     args.include_completed or not args.pending_only, args.limit)
        elif command in ("show", "status"):
            value = handoffs.show(args.handoff_id)
        elif command == "heartbeat":
            value = handoffs.heartbeat(args.handoff_id)
        elif command == "accept":
            if clean(getattr(args, "claim_id", None)):
                raise invalid_input("claim_id cannot override the generated claim for a remote profile")
            with _store(ctx) as store:
                value = handoffs.accept(args.handoff_id, store)
        elif command == "return":
            with _store(ctx) as store:
                value = handoffs.return_result(args.handoff_id, args.result_fact_id, args.outcome, store)
        else:  # pragma: no cover - the parser knows every verb
            raise invalid_input(LOCAL_ONLY)
    return _emit(ctx, value)


def remote_tools(ctx: Context, name: str, local: LocalTools) -> RemoteTools:
    """The stdio MCP backend for ``mcp --remote-profile NAME``, once the actor pin is checked."""
    from aidememo_cli._mcp._protocol import ToolError
    from aidememo_cli._mcp._remote import RemoteTools, check_actor

    remote = Remote(load_profile(name, ctx.env))
    try:
        check_actor(ctx.env_value("AIDEMEMO_ACTOR_ID"), RemoteHandoffs(remote, ctx.clock).actor_id)
    except ToolError as exc:
        remote.close()
        raise invalid_input(str(exc)) from None
    except BaseException:
        remote.close()
        raise
    return RemoteTools(local, remote, outbox(ctx), ctx.store_path, ctx.env, ctx.clock)
