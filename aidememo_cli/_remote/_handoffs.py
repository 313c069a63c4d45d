"""The remote handoff verbs of ``aidememo handoff --remote-profile NAME …``, as upstream runs them.

Every verb reads what it needs from the server, decides with ``aidememo_client.recovery`` and writes at most
once (plus the POST's one identical retry inside ``_http``). Accept and return touch the
receiver's embedded store (``_receiver``); ``send`` and ``replica publish`` are ``_send``'s. The
answers are upstream's JSON objects, key for key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aidememo_wire.ids import stable_operation_id
from aidememo_cli._local._packet import resume_command
from aidememo_cli._local._store import LocalStore

from ._errors import client_errors, internal
from ._input import validate_id
from aidememo_client.recovery import (
    ensure_fields_match,
    normalize_outcome,
    plan_accept,
    plan_heartbeat,
    plan_return,
    record_of,
    required_str,
)

if TYPE_CHECKING:
    from ._http import Remote
    from ._outbox import SendPlan

__all__ = ["RemoteHandoffs"]


class RemoteHandoffs:
    """One profile's handoff verbs.

    Args:
        remote: the server as the profile sees it.
        clock: milliseconds for local writes (the materialized context fact).
    """

    def __init__(self, remote: Remote, clock: Callable[[], int]) -> None:
        self.remote = remote
        self.profile = remote.profile
        self.clock = clock
        self._identity: dict[str, Any] | None = None

    # -- identity ----------------------------------------------------------------------------
    def identity(self) -> dict[str, Any]:
        if self._identity is None:
            self._identity = self.remote.identity()
        return self._identity

    @property
    @client_errors()
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
    @client_errors()
    def accept(self, handoff_id: str, store: LocalStore | None) -> dict[str, Any]:
        """Claim (or recover the claim of) a handoff and materialize its context into ``store``."""
        # Here, not at the top: _receiver needs dataclasses, and the reads (most remote calls)
        # never write the embedded store.
        from ._receiver import materialize_context

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
    @client_errors()
    def heartbeat(self, handoff_id: str) -> dict[str, Any]:
        """Renew the lease of the stored claim at the revision just read."""
        actor = self.actor_id
        plan = plan_heartbeat(self.profile.project_id, actor, handoff_id, self._status(handoff_id))
        receipt = self.remote.post(f"/handoffs/{handoff_id}/heartbeat", plan.body())
        return {"remote_profile": self.profile.name, "actor_id": actor, "handoff_id": handoff_id,
                "command_id": plan.command_id, "claim_id": plan.claim_id, "expected_revision": plan.revision,
                "receipt": receipt}

    # -- return ------------------------------------------------------------------------------
    @client_errors()
    def return_result(self, handoff_id: str, result_fact_id: str, outcome: str,
                      store: LocalStore | None) -> dict[str, Any]:
        """Upload the receiver's local evidence and return it under the current claim."""
        from ._receiver import result_evidence

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
    @client_errors()
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
