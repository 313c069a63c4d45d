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
        action = args.get("action") if isinstance(args.get("action"), str) else "list"
        actor_id = read.text(args.get("actor_id"))
        if action == "show" and actor_id is not None:
            raise ToolError("actor_id cannot override actor identity for a remote profile")

        def handoff_id() -> str:
            found = read.text(args.get("handoff_id"))
            if found is None:
                raise ToolError(f"handoff_id required for action={action}")
            return found

        limit = args.get("limit")
        limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit >= 0 else 20
        outcome = result_fact_id = target = None
        if action in ("show", "status"):
            target = handoff_id()
        elif action == "accept":
            if read.text(args.get("claim_id")) is not None:
                raise ToolError("claim_id cannot override the generated claim for a remote profile")
            target = handoff_id()
        elif action == "return":
            outcome, result_fact_id = read.text(args.get("outcome")), read.text(args.get("result_fact_id"))
            if outcome is None:
                raise ToolError("outcome required for action=return")
            if result_fact_id is None:
                raise ToolError("result_fact_id required for action=return")
            target = handoff_id()
        elif action in LOCAL_ACTIONS:
            raise ToolError(f"remote profiles do not support handoff inbox action {json.dumps(action)}")
        elif action not in ("list", "outbox"):
            raise ToolError(f"unknown handoff inbox action {json.dumps(action)}; expected list, outbox, show, status,"
                            " accept, or return")
        handoffs.identity()  # upstream resolves identity before it judges the actor override
        if action != "show":
            reject_actor_override(actor_id)
        if action in ("list", "outbox"):
            completed = args.get("include_completed")
            include = completed if isinstance(completed, bool) else action == "outbox"
            return handoffs.mailbox("inbox" if action == "list" else "outbox", self._source(args), include, limit)
        assert target is not None
        if action in ("show", "status"):
            return handoffs.show(target)
        if action == "accept":
            return handoffs.accept(target, self._store)
        assert outcome is not None and result_fact_id is not None
        return handoffs.return_result(target, result_fact_id, outcome, self._store)
