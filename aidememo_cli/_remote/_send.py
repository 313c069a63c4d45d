"""``handoff --remote-profile NAME send`` and ``replica publish``: sends through the durable outbox.

A send renders the local session's packet, reserves (or finds) its operation, handoff and
context ids in the outbox (``_outbox``), then publishes: the typed session and the context packet,
each compared with what the server already has, then the handoff pointer under ``command_send``.
A publish that fails does not fail the command: the reservation stays queued with its last error
for the same command, or ``replica publish``, to finish with the same ids.
"""

from __future__ import annotations

from typing import Any

from aidememo_wire.ids import stable_operation_id
from aidememo_cli._local import _memory as memory
from aidememo_cli._local._packet import Route, resume_command
from aidememo_cli._local._store import LocalStore

from ._errors import RemoteError, refusal
from ._handoffs import RemoteHandoffs
from ._outbox import Outbox, QueuedSend, Reservation, SendPlan, SendState, failure_state, send_keys
from ._input import validate_id

__all__ = ["Sender", "PACKET_LIMIT", "MAX_CONTEXT_BYTES"]

PACKET_LIMIT = 80  # facts in a remote packet (upstream passes 80 to agent_handoff)
MAX_CONTEXT_BYTES = 65_536


class Sender:
    """One profile's sends, reserved in ``outbox``."""

    def __init__(self, handoffs: RemoteHandoffs, outbox: Outbox) -> None:
        self.handoffs = handoffs
        self.outbox = outbox

    def _submit(self, actor_id: str, handoff_id: str, context_id: str, plan: SendPlan) -> Any:
        self.handoffs.ensure_session(plan.session_id, plan.source_id, plan.topic)
        self.handoffs.ensure_context(context_id, handoff_id, plan, actor_id)
        return self.handoffs.remote.post("/handoffs", {
            "command_id": stable_operation_id("command_send", [self.handoffs.profile.project_id, handoff_id]),
            "payload": {"handoff_id": handoff_id, "session_id": plan.session_id, "to_actor": plan.to_actor,
                        "focus": plan.focus, "done_when": plan.done_when, "context_id": context_id},
        })

    def _publish(self, intent_key: str, operation_id: str, handoff_id: str, context_id: str, plan: SendPlan,
                 actor_id: str) -> Any:
        outbox = self.outbox
        outbox.bind_actor(intent_key, operation_id, self.handoffs.profile, actor_id)
        outbox.mark_queued(intent_key, operation_id)
        receipt = self._submit(actor_id, handoff_id, context_id, plan)
        outbox.mark_committed(intent_key, operation_id)
        return receipt

    def send(self, store: LocalStore, to_actor: str, session: str | None, source_id: str | None,
             focus: str | None, done_when: str | None) -> dict[str, Any]:
        """Route a local tracked session to ``to_actor`` through the durable outbox.

        A failure to publish does not fail the command: the reservation is kept (``queued``
        with ``last_error``) for the same command or ``replica publish`` to finish.
        """
        validate_id("receiver actor", to_actor)
        with store.transaction(write=False):
            built = memory.packet(store, session, Route(to_actor=to_actor, focus=focus, done_when=done_when,
                                                        source_id=source_id), PACKET_LIMIT)
        size = len(built.content.encode("utf-8"))
        if size > MAX_CONTEXT_BYTES:
            raise refusal(f"remote handoff packet is {size} bytes; canonical handoff contexts are limited to 65536 bytes")
        session_id, topic = built.session.name, built.session.source_page
        plan = SendPlan(session_id=session_id, source_id=source_id, topic=topic if topic is not None else session_id,
                        to_actor=to_actor, focus=focus, done_when=done_when, content=built.content)
        intent_key, payload_hash = send_keys(self.handoffs.profile, to_actor, session_id, source_id, focus, done_when,
                                             built.content)
        outbox = self.outbox
        reservation = outbox.reserve(intent_key, payload_hash, self.handoffs.profile)
        outbox.store_plan(intent_key, reservation.operation_id, plan)

        def answer(actor_id: str | None, state: SendState, receipt: Any, last_error: str | None) -> dict[str, Any]:
            dispatched = state is SendState.COMMITTED
            return {
                "artifact": "agent_handoff", "remote_profile": self.handoffs.profile.name, "actor_id": actor_id,
                "operation_id": reservation.operation_id, "recovered": reservation.reused_pending,
                "handoff_id": reservation.handoff_id, "status": str(state), "dispatched": dispatched,
                "queued": not dispatched, "last_error": last_error, "session_id": session_id, "topic": topic,
                "source_id": source_id, "to_actor": to_actor, "focus": focus, "done_when": done_when,
                "context_id": reservation.context_id, "fact_count": len(built.facts), "bytes": size,
                "resume": {"command": resume_command(session_id, source_id),
                           "env": {"AIDEMEMO_SESSION_ID": session_id, "AIDEMEMO_SOURCE_ID": source_id}},
                "content": built.content, "receipt": receipt,
            }

        if reservation.already_committed:
            return answer(reservation.actor_id, SendState.COMMITTED, None, None)
        try:
            actor_id = self.handoffs.actor_id
            receipt = self._publish(intent_key, reservation.operation_id, reservation.handoff_id,
                                    reservation.context_id, plan, actor_id)
        except RemoteError as exc:
            return answer(self._bound_actor(intent_key, reservation), *self._failed(intent_key, reservation, exc))
        return answer(actor_id, SendState.COMMITTED, receipt, None)

    def _failed(self, intent_key: str, reservation: Reservation, exc: RemoteError) -> tuple[SendState, None, str]:
        message = str(exc)
        state = failure_state(message)
        self.outbox.record_failure(intent_key, reservation.operation_id, state, message)
        return state, None, message

    def _bound_actor(self, intent_key: str, reservation: Reservation) -> str | None:
        for entry in self.outbox.pending(self.handoffs.profile.name):
            if entry.operation_id == reservation.operation_id:
                return entry.actor_id
        return None

    def publish(self) -> dict[str, Any]:
        """Replay every queued send of this profile with its reserved ids (``replica publish``)."""
        outbox = self.outbox
        queued = outbox.pending(self.handoffs.profile.name)
        counts = {"attempted": 0, "published": 0, "failed": 0, "conflicts": 0}
        results: list[dict[str, Any]] = []
        if queued:
            try:
                actor_id: str | None = self.handoffs.actor_id
                identity_error: RemoteError | None = None
            except RemoteError as exc:
                actor_id, identity_error = None, exc
            for entry in queued:
                if entry.state is SendState.CONFLICT:
                    counts["conflicts"] += 1
                    results.append(entry.to_json(SendState.CONFLICT, entry.last_error))
                    continue
                counts["attempted"] += 1
                results.append(self._publish_one(entry, actor_id, identity_error, counts))
        return {"remote_profile": self.handoffs.profile.name, **counts, "entries": results}

    def _publish_one(self, entry: QueuedSend, actor_id: str | None, identity_error: RemoteError | None,
                     counts: dict[str, int]) -> dict[str, Any]:
        outbox = self.outbox
        try:
            if identity_error is not None:
                raise identity_error
            assert actor_id is not None
            receipt = self._publish(entry.intent_key, entry.operation_id, entry.handoff_id, entry.context_id,
                                    entry.plan, actor_id)
        except RemoteError as exc:
            message = str(exc)
            state = failure_state(message)
            outbox.record_failure(entry.intent_key, entry.operation_id, state, message)
            counts["conflicts" if state is SendState.CONFLICT else "failed"] += 1
            return entry.to_json(state, message)
        counts["published"] += 1
        return entry.to_json(SendState.COMMITTED, None, receipt)
