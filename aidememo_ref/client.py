"""An httpx client for any AideMemo server that behaves like upstream's remote CLI.

It knows only wire shapes, never the reference's internals, so it works against servers we
did not write. Like ``cli/remote_handoff.rs``: command ids and claim ids are derived
(wire spec §7.3), a POST is retried once with the identical body after a transport failure
(the server's receipt replay makes that safe), and an accept or return that turns out to be
applied already is reported with ``recovered: True`` instead of being sent again.
"""

from __future__ import annotations

from typing import Any

import httpx

from ._ids import stable_claim_id, stable_operation_id

__all__ = ["AideMemoClient", "AideMemoHTTPError", "ClientRefusal"]


class AideMemoHTTPError(Exception):
    """The server answered with a non-2xx status."""

    def __init__(self, status: int, code: str | None, message: str, body: bytes) -> None:
        super().__init__(f"HTTP {status} {code or '-'}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.body = body


class ClientRefusal(Exception):
    """The client refused locally because going on would be unsafe (no request was sent)."""


def _raise_for(response: httpx.Response) -> Any:
    if 200 <= response.status_code < 300:
        return response.json()
    code, message = None, response.text
    try:
        error = response.json()["error"]
        code, message = error["code"], error["message"]
    except (ValueError, KeyError, TypeError):
        pass
    raise AideMemoHTTPError(response.status_code, code, message, response.content)


class AideMemoClient:
    """One actor's view of one project on one server.

    Args:
        base_url: server root, e.g. ``http://127.0.0.1:3030``.
        token: bearer token (sent only in the Authorization header).
        project_id: the project every call addresses.
        transport: an httpx transport (e.g. ``ReferenceLedger.transport()`` for no socket).
        timeout: seconds for every request.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        project_id: str,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.project_id = project_id
        self._http = httpx.Client(
            base_url=base_url,
            transport=transport,
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}"},
        )
        self._actor_id: str | None = None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AideMemoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------------
    @property
    def _base(self) -> str:
        return f"/v1/projects/{self.project_id}"

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        clean = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in (params or {}).items() if v is not None}
        return _raise_for(self._http.get(path, params=clean))

    def post(self, path: str, body: dict[str, Any]) -> Any:
        """POST once, and once more with the identical body after a transport failure."""
        try:
            response = self._http.post(path, json=body)
        except httpx.TransportError:
            response = self._http.post(path, json=body)
        return _raise_for(response)

    # -- identity and reads -----------------------------------------------------------------
    def health(self) -> Any:
        return _raise_for(self._http.get("/health"))

    def identity(self) -> dict[str, Any]:
        identity: dict[str, Any] = self.get(f"{self._base}/identity")
        self._actor_id = identity["actor_id"]
        return identity

    @property
    def actor_id(self) -> str:
        if self._actor_id is None:
            self.identity()
        assert self._actor_id is not None
        return self._actor_id

    def resource(self, kind: str, resource_id: str) -> Any:
        return self.get(f"{self._base}/resources/{kind}/{resource_id}")

    def snapshot(self) -> Any:
        return self.get(f"{self._base}/snapshot")

    def changes(self, project_epoch: str, after_seq: int, limit: int | None = None, *, materialized: bool = False) -> Any:
        path = f"{self._base}/changes/materialized" if materialized else f"{self._base}/changes"
        return self.get(path, {"project_epoch": project_epoch, "after_seq": after_seq, "limit": limit})

    def search(self, q: str, **params: Any) -> Any:
        return self.get(f"{self._base}/search", {"q": q, **params})

    def mailbox(self, box: str, **params: Any) -> Any:
        return self.get(f"{self._base}/handoffs", {"box": box, **params})

    def inbox(self, **params: Any) -> Any:
        return self.mailbox("inbox", **params)

    def outbox(self, **params: Any) -> Any:
        return self.mailbox("outbox", **params)

    def status(self, handoff_id: str) -> Any:
        return self.get(f"{self._base}/handoffs/{handoff_id}")

    # -- raw extension resources ------------------------------------------------------------
    def put(self, kind: str, resource_id: str, payload: Any, *, expected_revision: int | None = None,
            command_id: str) -> Any:
        return self.post("/v1/commands", {
            "command_id": command_id, "project_id": self.project_id, "expected_revision": expected_revision,
            "operation": "resource.put", "payload": payload, "resource": {"kind": kind, "id": resource_id},
            "change": "upsert",
        })

    def delete(self, kind: str, resource_id: str, *, expected_revision: int | None = None, command_id: str) -> Any:
        return self.post("/v1/commands", {
            "command_id": command_id, "project_id": self.project_id, "expected_revision": expected_revision,
            "operation": "resource.delete", "payload": None, "resource": {"kind": kind, "id": resource_id},
            "change": "delete",
        })

    # -- typed creates (command ids derived as upstream's CLI does) -------------------------
    def create_session(self, session_id: str, topic: str, source_id: str | None = None,
                       command_id: str | None = None) -> Any:
        return self.post(f"{self._base}/sessions", {
            "command_id": command_id or stable_operation_id("command_session", [self.project_id, session_id]),
            "payload": {"session_id": session_id, "source_id": source_id, "topic": topic},
        })

    def create_fact(self, fact_id: str, session_id: str, content: str, command_id: str | None = None) -> Any:
        return self.post(f"{self._base}/facts", {
            "command_id": command_id or stable_operation_id("command_fact", [self.project_id, fact_id]),
            "payload": {"fact_id": fact_id, "session_id": session_id, "content": content},
        })

    def create_context(self, context_id: str, handoff_id: str, session_id: str, to_actor: str, content: str,
                       command_id: str | None = None) -> Any:
        return self.post(f"{self._base}/handoff-contexts", {
            "command_id": command_id or stable_operation_id("command_context", [self.project_id, context_id]),
            "payload": {"context_id": context_id, "handoff_id": handoff_id, "session_id": session_id,
                        "to_actor": to_actor, "content": content},
        })

    def send(self, handoff_id: str, session_id: str, to_actor: str, *, focus: str | None = None,
             done_when: str | None = None, context_id: str | None = None, command_id: str | None = None) -> Any:
        return self.post(f"{self._base}/handoffs", {
            "command_id": command_id or stable_operation_id("command_send", [self.project_id, handoff_id]),
            "payload": {"handoff_id": handoff_id, "session_id": session_id, "to_actor": to_actor,
                        "focus": focus, "done_when": done_when, "context_id": context_id},
        })

    def transition(self, handoff_id: str, operation: str, *, expected_revision: int, payload: dict[str, Any],
                   command_id: str) -> Any:
        """Send one accept/heartbeat/return body exactly as given (no derivation, no recovery)."""
        return self.post(f"{self._base}/handoffs/{handoff_id}/{operation}", {
            "command_id": command_id, "expected_revision": expected_revision, "payload": payload,
        })

    # -- transitions with the remote CLI's recovery -----------------------------------------
    def _addressed(self, handoff_id: str) -> tuple[int, dict[str, Any]]:
        current = self.status(handoff_id)
        record = current["record"]
        if record["to_actor"] != self.actor_id:
            raise ClientRefusal(f"remote handoff is not addressed to authenticated actor {self.actor_id}")
        return current["revision"], record

    def accept(self, handoff_id: str) -> dict[str, Any]:
        """Claim with the derived claim id; ``recovered`` when this claim already holds it."""
        revision, record = self._addressed(handoff_id)
        status, outcome, attempts = record["status"], record["outcome"], record["attempt_count"]
        if (status, outcome) in (("pending", None), ("accepted", "failed")):
            attempt, recovered = attempts + 1, False
        elif (status, outcome) in (("accepted", None), ("completed", "succeeded")):
            attempt, recovered = attempts, True
        else:
            raise ClientRefusal(f"remote handoff has inconsistent retry state: status={status}, outcome={outcome}")
        claim_id = stable_claim_id(self.project_id, self.actor_id, handoff_id, attempt)
        command_id = stable_operation_id("command_accept", [self.project_id, self.actor_id, handoff_id, claim_id])
        receipt = None
        if recovered:
            if record["claim_id"] != claim_id:
                raise ClientRefusal(
                    "remote handoff was accepted with a legacy or different claim; automatic retry recovery is unsafe"
                )
        else:
            receipt = self.transition(handoff_id, "accept", expected_revision=revision,
                                      payload={"claim_id": claim_id}, command_id=command_id)
        return {"handoff_id": handoff_id, "command_id": command_id, "claim_id": claim_id,
                "recovered": recovered, "receipt": receipt}

    def heartbeat(self, handoff_id: str) -> dict[str, Any]:
        revision, record = self._addressed(handoff_id)
        if record["status"] != "accepted":
            raise ClientRefusal("remote handoff must be accepted before heartbeat")
        if record["outcome"] is not None or record["result_fact_id"] is not None:
            raise ClientRefusal("remote handoff with result evidence cannot be heartbeated")
        claim_id = record["claim_id"]
        command_id = stable_operation_id(
            "command_heartbeat", [self.project_id, self.actor_id, handoff_id, claim_id, str(revision)]
        )
        receipt = self.transition(handoff_id, "heartbeat", expected_revision=revision,
                                  payload={"claim_id": claim_id}, command_id=command_id)
        return {"handoff_id": handoff_id, "command_id": command_id, "claim_id": claim_id,
                "expected_revision": revision, "receipt": receipt}

    def return_result(self, handoff_id: str, result_fact_id: str, outcome: str) -> dict[str, Any]:
        """Return evidence for the current claim; ``recovered`` when exactly this is stored."""
        outcome = outcome.strip().lower()
        if outcome not in ("succeeded", "failed"):
            raise ClientRefusal("outcome must be succeeded or failed")
        revision, record = self._addressed(handoff_id)
        claim_id = record["claim_id"]
        if claim_id is None:
            raise ClientRefusal("remote handoff must be accepted before returning a result")
        command_id = stable_operation_id(
            "command_return", [self.project_id, self.actor_id, handoff_id, claim_id, result_fact_id, outcome]
        )
        recovered = record["result_fact_id"] == result_fact_id and record["outcome"] == outcome
        receipt = None
        if not recovered:
            if record["result_fact_id"] is not None or record["outcome"] is not None:
                raise ClientRefusal(
                    "remote handoff already contains different result evidence; automatic retry recovery is unsafe"
                )
            receipt = self.transition(handoff_id, "return", expected_revision=revision, command_id=command_id,
                                      payload={"claim_id": claim_id, "result_fact_id": result_fact_id,
                                               "outcome": outcome})
        return {"handoff_id": handoff_id, "command_id": command_id, "result_fact_id": result_fact_id,
                "outcome": outcome, "recovered": recovered, "receipt": receipt}
