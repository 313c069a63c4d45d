"""The remote handoff verbs of ``aidememo handoff --remote-profile NAME …``, as upstream runs them.

Every verb reads what it needs from the server, decides with ``_recovery`` and writes at most
once (plus the POST's one identical retry inside ``_http``). Accept and return touch the
receiver's embedded store (``_receiver``); send reserves its ids in the durable outbox first
(``_outbox``), so a lost answer is recovered by running the same command again or by
``replica publish``. The answers are upstream's JSON objects, key for key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aidememo_ref._ids import stable_operation_id
from aidememo_ref._local import _memory as memory
from aidememo_ref._local._packet import Route, resume_command
from aidememo_ref._local._store import LocalStore

from ._errors import RemoteError, internal, refusal
from ._http import Remote
from ._outbox import Outbox, QueuedSend, Reservation, SendPlan, SendState, failure_state, send_keys
from ._receiver import materialize_context, result_evidence
from ._recovery import (
    ensure_fields_match,
    normalize_outcome,
    plan_accept,
    plan_heartbeat,
    plan_return,
    record_of,
    required_str,
    validate_id,
)

__all__ = ["RemoteHandoffs", "PACKET_LIMIT", "MAX_CONTEXT_BYTES"]

PACKET_LIMIT = 80  # facts in a remote packet (upstream passes 80 to agent_handoff)
MAX_CONTEXT_BYTES = 65_536


class RemoteHandoffs:
    """One profile's handoff verbs.

    Args:
        remote: the server as the profile sees it.
        clock: milliseconds for local writes (materialized facts, outbox records).
        outbox: the sender's durable reservations (send and publish only).
    """

    def __init__(self, remote: Remote, clock: Callable[[], int], outbox: Outbox | None = None) -> None:
        self.remote = remote
        self.profile = remote.profile
        self.clock = clock
        self.outbox = outbox
        self._identity: dict[str, Any] | None = None

    # -- identity ----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = self.remote.identity()
        return self._identity

    @property
    def actor_id(self) -> str:
        return required_str(self.identity(), "actor_id")

    def _status(self, handoff_id: str) -> dict[str, Any]:
        return self.remote.status(validate_id("handoff_id", handoff_id))

    # -- reads -------------------------------------------------------------------------------
    def mailbox(self, box: str, source_id: str | None, include_completed: bool, limit: int) -> dict[str, Any]:
        if source_id is not None:
            validate_id("source_id", source_id)
        return self.remote.mailbox(box, source_id, include_completed, limit)

    def show(self, handoff_id: str) -> dict[str, Any]:
        return self._status(handoff_id)

    # -- accept ------------------------------------------------------------------------------
    def accept(self, handoff_id: str, store: LocalStore | None) -> dict[str, Any]:
        """Claim (or recover the claim of) a handoff and materialize its context into ``store``."""
        actor = self.actor_id
        status = self._status(handoff_id)
        plan = plan_accept(self.profile.project_id, actor, handoff_id, status)
        session = self.remote.resource_body("session", plan.session_id)
        if session is None:
            raise internal(f"remote handoff session {plan.session_id} is missing from canonical storage")
        ensure_fields_match(session, {"session_id": plan.session_id, "source_id": plan.source_id},
                            ("session_id", "source_id"))
        context = None
        if plan.context_id is not None:
            context = self.remote.resource_body("handoff_context", plan.context_id)
            if context is None:
                raise internal(f"remote handoff context {plan.context_id} is missing")
            ensure_fields_match(context, {
                "context_id": plan.context_id, "handoff_id": handoff_id, "session_id": plan.session_id,
                "source_id": plan.source_id, "from_actor": plan.from_actor, "to_actor": actor,
            }, ("context_id", "handoff_id", "session_id", "source_id", "from_actor", "to_actor"))
        if store is None:
            raise internal("remote handoff accept requires the embedded session store")
        # Upstream materializes before it posts: a local failure leaves the server untouched.
        with store.transaction(write=True):
            fact_id = materialize_context(store, record_of(status), session, context, self.clock())
        receipt = None if plan.recovered else self.remote.post(f"/handoffs/{handoff_id}/accept", plan.body())
        return {
            "artifact": "remote_handoff_accept", "remote_profile": self.profile.name, "actor_id": actor,
            "handoff_id": handoff_id, "command_id": plan.command_id, "claim_id": plan.claim_id,
            "recovered": plan.recovered, "session_id": plan.session_id, "source_id": plan.source_id,
            "context_id": plan.context_id, "local_context_fact_id": fact_id,
            "resume": {"command": resume_command(plan.session_id, plan.source_id),
                       "env": {"AIDEMEMO_SESSION_ID": plan.session_id, "AIDEMEMO_SOURCE_ID": plan.source_id,
                               "AIDEMEMO_ACTOR_ID": actor}},
            "receipt": receipt,
        }

    # -- heartbeat ---------------------------------------------------------------------------
    def heartbeat(self, handoff_id: str) -> dict[str, Any]:
        """Renew the lease of the stored claim at the revision just read."""
        actor = self.actor_id
        plan = plan_heartbeat(self.profile.project_id, actor, handoff_id, self._status(handoff_id))
        receipt = self.remote.post(f"/handoffs/{handoff_id}/heartbeat", plan.body())
        return {"remote_profile": self.profile.name, "actor_id": actor, "handoff_id": handoff_id,
                "command_id": plan.command_id, "claim_id": plan.claim_id, "expected_revision": plan.revision,
                "receipt": receipt}

    # -- return ------------------------------------------------------------------------------
    def return_result(self, handoff_id: str, result_fact_id: str, outcome: str,
                      store: LocalStore | None) -> dict[str, Any]:
        """Upload the receiver's local evidence and return it under the current claim."""
        normalize_outcome(outcome)  # before any request, as upstream
        status = self._status(handoff_id)
        actor = self.actor_id
        plan = plan_return(self.profile.project_id, actor, handoff_id, status, result_fact_id, outcome)
        if store is None:
            raise internal("remote handoff return requires the embedded session store")
        with store.transaction(write=False):
            evidence = result_evidence(store, result_fact_id, plan.session_id, plan.source_id, actor)
        self.ensure_fact(result_fact_id, plan.session_id, plan.source_id, actor, evidence.content)
        receipt = None if plan.recovered else self.remote.post(f"/handoffs/{handoff_id}/return", plan.body())
        return {"remote_profile": self.profile.name, "handoff_id": handoff_id, "command_id": plan.command_id,
                "result_fact_id": result_fact_id, "outcome": plan.outcome, "recovered": plan.recovered,
                "receipt": receipt}

    # -- canonical creates, each compared with what exists first -----------------------------
    def _ensure(self, kind: str, resource_id: str, expected: dict[str, Any], route: str, prefix: str,
                payload: dict[str, Any]) -> None:
        existing = self.remote.resource_body(kind, resource_id)
        if existing is not None:
            ensure_fields_match(existing, expected, tuple(expected))
            return
        self.remote.post(route, {"command_id": stable_operation_id(prefix, [self.profile.project_id, resource_id]),
                                 "payload": payload})

    def ensure_session(self, session_id: str, source_id: str | None, topic: str) -> None:
        validate_id("session_id", session_id)
        self._ensure("session", session_id, {"session_id": session_id, "source_id": source_id, "topic": topic},
                     "/sessions", "command_session", {"session_id": session_id, "source_id": source_id, "topic": topic})

    def ensure_fact(self, fact_id: str, session_id: str, source_id: str | None, actor_id: str, content: str) -> None:
        validate_id("fact_id", fact_id)
        self._ensure("fact", fact_id, {"fact_id": fact_id, "session_id": session_id, "source_id": source_id,
                                       "actor_id": actor_id, "content": content},
                     "/facts", "command_fact", {"fact_id": fact_id, "session_id": session_id, "content": content})

    def ensure_context(self, context_id: str, handoff_id: str, plan: SendPlan, from_actor: str) -> None:
        validate_id("context_id", context_id)
        self._ensure("handoff_context", context_id, {
            "context_id": context_id, "handoff_id": handoff_id, "session_id": plan.session_id,
            "source_id": plan.source_id, "from_actor": from_actor, "to_actor": plan.to_actor,
            "content": plan.content,
        }, "/handoff-contexts", "command_context", {
            "context_id": context_id, "handoff_id": handoff_id, "session_id": plan.session_id,
            "to_actor": plan.to_actor, "content": plan.content,
        })

    # -- send --------------------------------------------------------------------------------
    def _need_outbox(self) -> Outbox:
        if self.outbox is None:
            raise internal("remote handoff send requires the sender outbox")
        return self.outbox

    def _submit(self, actor_id: str, handoff_id: str, context_id: str, plan: SendPlan) -> Any:
        self.ensure_session(plan.session_id, plan.source_id, plan.topic)
        self.ensure_context(context_id, handoff_id, plan, actor_id)
        return self.remote.post("/handoffs", {
            "command_id": stable_operation_id("command_send", [self.profile.project_id, handoff_id]),
            "payload": {"handoff_id": handoff_id, "session_id": plan.session_id, "to_actor": plan.to_actor,
                        "focus": plan.focus, "done_when": plan.done_when, "context_id": context_id},
        })

    def _publish(self, intent_key: str, operation_id: str, handoff_id: str, context_id: str, plan: SendPlan,
                 actor_id: str) -> Any:
        outbox = self._need_outbox()
        outbox.bind_actor(intent_key, operation_id, self.profile, actor_id)
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
        intent_key, payload_hash = send_keys(self.profile, to_actor, session_id, source_id, focus, done_when,
                                             built.content)
        outbox = self._need_outbox()
        reservation = outbox.reserve(intent_key, payload_hash, self.profile)
        outbox.store_plan(intent_key, reservation.operation_id, plan)

        def answer(actor_id: str | None, state: SendState, receipt: Any, last_error: str | None) -> dict[str, Any]:
            dispatched = state is SendState.COMMITTED
            return {
                "artifact": "agent_handoff", "remote_profile": self.profile.name, "actor_id": actor_id,
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
            actor_id = self.actor_id
            receipt = self._publish(intent_key, reservation.operation_id, reservation.handoff_id,
                                    reservation.context_id, plan, actor_id)
        except RemoteError as exc:
            return answer(self._bound_actor(intent_key, reservation), *self._failed(intent_key, reservation, exc))
        return answer(actor_id, SendState.COMMITTED, receipt, None)

    def _failed(self, intent_key: str, reservation: Reservation, exc: RemoteError) -> tuple[SendState, None, str]:
        message = str(exc)
        state = failure_state(message)
        self._need_outbox().record_failure(intent_key, reservation.operation_id, state, message)
        return state, None, message

    def _bound_actor(self, intent_key: str, reservation: Reservation) -> str | None:
        for entry in self._need_outbox().pending(self.profile.name):
            if entry.operation_id == reservation.operation_id:
                return entry.actor_id
        return None

    def publish(self) -> dict[str, Any]:
        """Replay every queued send of this profile with its reserved ids (``replica publish``)."""
        outbox = self._need_outbox()
        queued = outbox.pending(self.profile.name)
        counts = {"attempted": 0, "published": 0, "failed": 0, "conflicts": 0}
        results: list[dict[str, Any]] = []
        if queued:
            try:
                actor_id: str | None = self.actor_id
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
        return {"remote_profile": self.profile.name, **counts, "entries": results}

    def _publish_one(self, entry: QueuedSend, actor_id: str | None, identity_error: RemoteError | None,
                     counts: dict[str, int]) -> dict[str, Any]:
        outbox = self._need_outbox()
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
