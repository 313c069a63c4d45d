"""The remote backend of ``aidememo-ref mcp --remote-profile NAME``: handoff tools routed to a server.

As upstream's ``dispatch_with_remote_profile`` (``cmd/mcp_tools.rs``): ``aidememo_handoff`` with
``dispatch: true`` is a remote send, ``aidememo_handoff_inbox`` runs the remote verbs (list,
outbox, show, status, accept, return; heartbeat, board and complete are refused), and every other
tool (and a packet preview) stays on the local store, where accept materializes the context and
the receiver writes its evidence. Identity is the bearer's: ``actor_id``, ``from_actor`` and a
caller ``claim_id`` are refused. Each call reads the identity afresh and answers upstream's JSON.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aidememo_cli._local._errors import LocalError, invalid_input
from aidememo_cli._local._packet import resolve_endpoint
from aidememo_cli._local._store import LocalStore
from aidememo_cli._remote._handoffs import RemoteHandoffs
from aidememo_cli._remote._http import Remote
from aidememo_cli._remote._outbox import Outbox
from aidememo_cli._remote._input import reject_actor_override
from aidememo_cli._remote._send import Sender

from . import _arguments as read
from ._inbox import action_of, unknown_action
from ._local import LocalTools
from ._protocol import ToolError, ToolResult

__all__ = ["RemoteTools", "check_actor"]

LOCAL_ACTIONS = ("heartbeat", "board", "complete")


def check_actor(configured: str | None, authenticated: str) -> None:
    """The stdio server starts only when ``AIDEMEMO_ACTOR_ID`` is the bearer's actor (upstream's rule)."""
    if configured is None:
        raise ToolError("remote MCP requires AIDEMEMO_ACTOR_ID; use `aidememo mcp-install --remote-profile <NAME>` to"
                        " derive it from the bearer binding")
    if configured != authenticated:
        raise ToolError(f"AIDEMEMO_ACTOR_ID {json.dumps(configured)} does not match remote profile actor"
                        f" {json.dumps(authenticated)}")


def _compact(value: object) -> ToolResult:
    return ToolResult(json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


class RemoteTools:
    """The local tools, with the handoff ones sent through one profile."""

    def __init__(self, local: LocalTools, remote: Remote, outbox: Outbox, store_path: str, env: Mapping[str, str],
                 clock: Callable[[], int]) -> None:
        self._local = local
        self._remote = remote
        self._outbox = outbox
        self._environ = env
        self._clock = clock
        self._store = LocalStore(store_path)

    def tools(self) -> list[dict[str, Any]]:
        return self._local.tools()

    def close(self) -> None:
        self._store.close()
        self._local.close()
        self._remote.close()

    def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        remote = name == "aidememo_handoff_inbox" or (name == "aidememo_handoff" and read.flag(arguments.get("dispatch"),
                                                                                           False))
        if not remote:
            return self._local.call(name, arguments)
        handoffs = RemoteHandoffs(self._remote, self._clock)
        try:
            if name == "aidememo_handoff":
                return _compact(self._send(Sender(handoffs, self._outbox), arguments))
            return _compact(self._inbox(handoffs, arguments))
        except LocalError as exc:
            raise ToolError(str(exc)) from exc

    def _env(self, name: str) -> str | None:
        return read.text(self._environ.get(name))

    def _source(self, args: Mapping[str, Any]) -> str | None:
        return read.text(args.get("source_id")) or self._env("AIDEMEMO_SOURCE_ID")

    def _send(self, sender: Sender, args: Mapping[str, Any]) -> dict[str, Any]:
        # The route fields are parsed first, as upstream's tool does before it branches.
        resolve_endpoint("from", read.text(args.get("from")) or read.text(args.get("from_route")),
                         read.text(args.get("from_agent")), read.text(args.get("from_profile")))
        resolve_endpoint("to", read.text(args.get("to")) or read.text(args.get("to_route")),
                         read.text(args.get("to_agent")), read.text(args.get("to_profile")))
        to_actor = read.text(args.get("to_actor"))
        if to_actor is None:
            raise ToolError("remote dispatch requires to_actor")
        reject_actor_override(read.text(args.get("from_actor")))
        if (read.text(args.get("kanban_task")) or self._env("HERMES_KANBAN_TASK")
                or read.text(args.get("kanban_board")) or self._env("HERMES_KANBAN_BOARD")):
            raise invalid_input("remote handoff send does not yet persist Hermes Kanban metadata")
        session = read.text(args.get("session")) or read.text(args.get("session_id")) or self._environ.get("AIDEMEMO_SESSION_ID")
        return sender.send(self._store, to_actor, session, self._source(args), read.text(args.get("focus")),
                             read.text(args.get("done_when")))

    def _inbox(self, handoffs: RemoteHandoffs, args: Mapping[str, Any]) -> dict[str, Any]:
        action = action_of(args)
        call = _InboxCall(handoffs, self._store, args, action, read.text(args.get("actor_id")), self._source(args))
        prepare = _INBOX.get(action)
        if prepare is None:
            if action in LOCAL_ACTIONS:
                raise ToolError(f"remote profiles do not support handoff inbox action {json.dumps(action)}")
            raise unknown_action(action, _INBOX)
        run = prepare(call)  # the arguments are judged first, then identity, then the actor override
        handoffs.identity()
        if action != "show":
            reject_actor_override(call.actor_id)
        return run()


# -- aidememo_handoff_inbox ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _InboxCall:
    """One remote inbox call. Each action checks its arguments and answers the request to run."""

    handoffs: RemoteHandoffs
    store: LocalStore
    args: Mapping[str, Any]
    action: str
    actor_id: str | None
    source_id: str | None

    def handoff_id(self) -> str:
        found = read.text(self.args.get("handoff_id"))
        if found is None:
            raise ToolError(f"handoff_id required for action={self.action}")
        return found


_Run = Callable[[], dict[str, Any]]


def _mailbox(call: _InboxCall) -> _Run:
    limit = call.args.get("limit")
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else 20
    completed = call.args.get("include_completed")
    include = completed if isinstance(completed, bool) else call.action == "outbox"
    box = "inbox" if call.action == "list" else "outbox"
    return lambda: call.handoffs.mailbox(box, call.source_id, include, limit)


def _show(call: _InboxCall) -> _Run:
    if call.action == "show" and call.actor_id is not None:
        raise ToolError("actor_id cannot override actor identity for a remote profile")
    target = call.handoff_id()
    return lambda: call.handoffs.show(target)


def _accept(call: _InboxCall) -> _Run:
    if read.text(call.args.get("claim_id")) is not None:
        raise ToolError("claim_id cannot override the generated claim for a remote profile")
    target = call.handoff_id()
    return lambda: call.handoffs.accept(target, call.store)


def _return(call: _InboxCall) -> _Run:
    outcome, result_fact_id = read.text(call.args.get("outcome")), read.text(call.args.get("result_fact_id"))
    if outcome is None:
        raise ToolError("outcome required for action=return")
    if result_fact_id is None:
        raise ToolError("result_fact_id required for action=return")
    target = call.handoff_id()
    return lambda: call.handoffs.return_result(target, result_fact_id, outcome, call.store)


# In upstream's order: its refusal of an unknown action lists them so. Status answers as show.
_INBOX: dict[str, Callable[[_InboxCall], _Run]] = {
    "list": _mailbox, "outbox": _mailbox, "show": _show, "status": _show, "accept": _accept, "return": _return,
}
