"""A client for any AideMemo server that behaves like upstream's remote CLI.

It knows only wire shapes, never the reference's internals, so it works against servers we
did not write. Like ``cmd/remote_handoff.rs``: command ids and claim ids are derived (wire
spec §7.3), a POST is retried once with the identical body after a transport failure (the
server's receipt replay makes that safe), and an accept or return that turns out to be applied
already is reported with ``recovered: True`` instead of being sent again.

Everything it raises derives from ``AideMemoClientError`` (the tree is drawn in ``errors``).
After ``OutcomeUnknown``, *resume*: call the same method again. Ids are derived from the
request, so a repeated ``accept``/``return_result`` recovers and a repeated create replays its
receipt; never resend the change under a new command id. No message carries the token.

Requests go through a wire (``_wire``): httpx when a transport is handed in or the URL is
``https://``, and a standard-library socket for ``http://`` otherwise (``_plain``), so a
command line that makes two requests does not first spend most of its run importing httpx.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Literal, TypedDict, cast
from urllib.parse import urlsplit

from aidememo_wire.ids import stable_operation_id, token_problem
from ._wire import Answer, HttpxWire, NoAnswer, Wire
from .errors import AideMemoClientError, AideMemoHTTPError, ClientRefusal, MalformedAnswer, OutcomeUnknown
from .recovery import normalize_outcome, plan_accept, plan_heartbeat, plan_return

if TYPE_CHECKING:  # the shapes only type answers; a command line need not import them
    import httpx

    from aidememo_wire.shapes import (
        JSON,
        ChangeBatch,
        HandoffOutcome,
        HandoffPage,
        Health,
        Identity,
        JSONObject,
        Mailbox,
        Receipt,
        ResourceAnswer,
        SearchAnswer,
        SearchMode,
        Snapshot,
        TypedHandoff,
    )

__all__ = [
    "AideMemoClient",
    "AideMemoClientError",
    "ClientRefusal",
    "MalformedAnswer",
    "AideMemoHTTPError",
    "OutcomeUnknown",
    "AcceptResult",
    "HeartbeatResult",
    "ReturnResult",
]

QueryValue = str | int | bool | None
Transition = Literal["accept", "heartbeat", "return"]


class AcceptResult(TypedDict):
    handoff_id: str
    command_id: str
    claim_id: str
    recovered: bool
    receipt: Receipt | None  # None when recovered: nothing was sent


class HeartbeatResult(TypedDict):
    handoff_id: str
    command_id: str
    claim_id: str
    expected_revision: int
    receipt: Receipt


class ReturnResult(TypedDict):
    handoff_id: str
    command_id: str
    result_fact_id: str
    outcome: HandoffOutcome
    recovered: bool
    receipt: Receipt | None  # None when recovered: nothing was sent


def _decode(method: str, path: str, answer: Answer) -> JSON:
    """The one place an answer becomes JSON or an error of this module's tree."""
    if 200 <= answer.status < 300:
        try:
            return cast("JSON", json.loads(answer.content))
        except ValueError as exc:
            raise OutcomeUnknown(method, path, f"HTTP {answer.status} answer is not JSON", exc) from exc
    from aidememo_wire.shapes import error_detail

    try:
        detail = error_detail(json.loads(answer.content))
    except ValueError:
        detail = None
    code = detail["code"] if detail else None
    message = detail["message"] if detail and detail["message"] else answer.text
    raise AideMemoHTTPError(answer.status, code, message, answer.content)


def _token_header(token: str) -> str:
    # Checked here so a bad token is a refusal, not an encoding error deep in a wire.
    problem = token_problem(token)
    if problem is not None:
        raise ClientRefusal(problem)
    return f"Bearer {token}"


class AideMemoClient:
    """One actor's view of one project on one server.

    Args:
        base_url: server root, e.g. ``http://127.0.0.1:3030``.
        token: bearer token (sent only in the Authorization header, never shown in an error).
        project_id: the project every call addresses.
        transport: an httpx transport (e.g. ``ReferenceLedger.transport()`` for no socket); without
            one, ``https://`` uses httpx's default and ``http://`` a plain socket (no proxy).
        timeout: seconds for every request.

    Raises:
        ClientRefusal: the token is not visible ASCII, or the URL is not http(s).
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
        self.base_url = base_url
        self.project_id = project_id
        headers = {"Authorization": _token_header(token)}
        self._wire: Wire
        if transport is None and base_url.startswith("http://"):
            from ._plain import PlainWire

            self._wire = PlainWire(base_url, headers, timeout)
        else:
            self._wire = HttpxWire(base_url, headers, transport, timeout)
        self._actor_id: str | None = None

    def __repr__(self) -> str:
        parts = urlsplit(self.base_url)
        shown = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()  # never a URL's credentials
        return f"<AideMemoClient {shown!r} project_id={self.project_id!r}>"

    def close(self) -> None:
        """Close the connections; the client cannot be used afterwards (``with`` closes it too)."""
        self._wire.close()

    def __enter__(self) -> AideMemoClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the seam: every request goes through here ------------------------------------------
    def _send(self, method: str, path: str, *, params: Mapping[str, QueryValue] | None = None,
              body: Mapping[str, object] | None = None, retries: int = 0) -> JSON:
        query = {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in (params or {}).items() if v is not None}
        while True:
            try:
                answer = self._wire.exchange(method, path, query, body)
            except NoAnswer as lost:
                if retries > 0:
                    retries -= 1
                    continue
                exc = lost.cause
                raise OutcomeUnknown(method, path, f"{type(exc).__name__}: {exc}", exc) from exc
            return _decode(method, path, answer)

    def get(self, path: str, params: Mapping[str, QueryValue] | None = None) -> JSON:
        """GET ``path`` (absolute, e.g. ``/health``); ``None`` parameters are left out."""
        return self._send("GET", path, params=params)

    def post(self, path: str, body: Mapping[str, object]) -> JSON:
        """POST once, and once more with the identical body after a transport failure."""
        return self._send("POST", path, body=body, retries=1)

    @property
    def _base(self) -> str:
        return f"/v1/projects/{self.project_id}"

    # -- identity and reads -----------------------------------------------------------------
    def health(self) -> Health:
        """``GET /health``: the server's mode and schema version (no token needed)."""
        return cast("Health", self.get("/health"))

    def identity(self) -> Identity:
        """The token's actor, tenant, project and role in this project; remembers the actor id.

        Raises:
            AideMemoHTTPError: the token is not a member of the project (401/403).
        """
        identity = cast("Identity", self.get(f"{self._base}/identity"))
        self._actor_id = identity["actor_id"]
        return identity

    @property
    def actor_id(self) -> str:
        """The token's actor, asked of the server once."""
        if self._actor_id is None:
            return self.identity()["actor_id"]
        return self._actor_id

    def resource(self, kind: str, resource_id: str) -> ResourceAnswer:
        """One resource by kind and id, with its revision, as this actor may see it."""
        return cast("ResourceAnswer", self.get(f"{self._base}/resources/{kind}/{resource_id}"))

    def snapshot(self) -> Snapshot:
        """The project's current resources that this actor may see, at one ``at_seq``."""
        return cast("Snapshot", self.get(f"{self._base}/snapshot"))

    def changes(self, project_epoch: str, after_seq: int, limit: int | None = None) -> ChangeBatch:
        """The change log after ``after_seq`` in ``project_epoch``, at most ``limit`` entries
        (the server's default when None); an epoch that is not the project's is refused."""
        params: dict[str, QueryValue] = {"project_epoch": project_epoch, "after_seq": after_seq, "limit": limit}
        return cast("ChangeBatch", self.get(f"{self._base}/changes", params))

    def search(self, q: str, *, source_id: str | None = None, limit: int | None = None,
               at_least_seq: int | None = None, mode: SearchMode | None = None) -> SearchAnswer:
        """Search the project's visible resources for ``q``; with ``at_least_seq`` the server
        refuses when its index has not reached that sequence number; ``mode`` picks its search mode."""
        params = {"q": q, "source_id": source_id, "limit": limit, "at_least_seq": at_least_seq, "mode": mode}
        return cast("SearchAnswer", self.get(f"{self._base}/search", params))

    def mailbox(self, box: Mailbox, *, source_id: str | None = None, include_completed: bool | None = None,
                before_seq: int | None = None, limit: int | None = None) -> HandoffPage:
        """One page of this actor's handoffs: ``box`` is ``inbox`` (sent to it) or ``outbox`` (sent
        by it); ``before_seq`` continues from a previous page's cursor."""
        params = {"box": box, "source_id": source_id, "include_completed": include_completed,
                  "before_seq": before_seq, "limit": limit}
        return cast("HandoffPage", self.get(f"{self._base}/handoffs", params))

    def inbox(self, *, source_id: str | None = None, include_completed: bool | None = None,
              before_seq: int | None = None, limit: int | None = None) -> HandoffPage:
        """``mailbox("inbox", ...)``: the handoffs sent to this actor."""
        return self.mailbox("inbox", source_id=source_id, include_completed=include_completed,
                            before_seq=before_seq, limit=limit)

    def outbox(self, *, source_id: str | None = None, include_completed: bool | None = None,
               before_seq: int | None = None, limit: int | None = None) -> HandoffPage:
        """``mailbox("outbox", ...)``: the handoffs this actor sent."""
        return self.mailbox("outbox", source_id=source_id, include_completed=include_completed,
                            before_seq=before_seq, limit=limit)

    def status(self, handoff_id: str) -> TypedHandoff:
        """A handoff's typed record and revision; participants only (403 for anyone else)."""
        return cast("TypedHandoff", self.get(f"{self._base}/handoffs/{handoff_id}"))

    # -- raw extension resources ------------------------------------------------------------
    def _command(self, kind: str, resource_id: str, payload: JSON, *, expected_revision: int | None,
                 command_id: str, delete: bool) -> Receipt:
        return cast("Receipt", self.post("/v1/commands", {
            "command_id": command_id, "project_id": self.project_id, "expected_revision": expected_revision,
            "operation": "resource.delete" if delete else "resource.put", "payload": payload,
            "resource": {"kind": kind, "id": resource_id}, "change": "delete" if delete else "upsert",
        }))

    def put(self, kind: str, resource_id: str, payload: JSON, *, expected_revision: int | None = None,
            command_id: str) -> Receipt:
        """Write an extension resource (``resource.put``) through ``/v1/commands``; with
        ``expected_revision`` the write is refused unless the resource is at it."""
        return self._command(kind, resource_id, payload, expected_revision=expected_revision,
                             command_id=command_id, delete=False)

    def delete(self, kind: str, resource_id: str, *, expected_revision: int | None = None,
               command_id: str) -> Receipt:
        """Delete an extension resource (``resource.delete``), leaving a tombstone."""
        return self._command(kind, resource_id, None, expected_revision=expected_revision,
                             command_id=command_id, delete=True)

    # -- typed creates (command ids derived as upstream's CLI does) -------------------------
    def _create(self, segment: str, prefix: str, resource_id: str, payload: JSONObject,
                command_id: str | None) -> Receipt:
        derived = command_id or stable_operation_id(prefix, [self.project_id, resource_id])
        return cast("Receipt", self.post(f"{self._base}/{segment}", {"command_id": derived, "payload": payload}))

    def create_session(self, session_id: str, topic: str, source_id: str | None = None,
                       command_id: str | None = None) -> Receipt:
        """Create a session; the command id is derived from the project and session id unless
        given, so calling again after ``OutcomeUnknown`` replays the receipt."""
        payload: JSONObject = {"session_id": session_id, "source_id": source_id, "topic": topic}
        return self._create("sessions", "command_session", session_id, payload, command_id)

    def create_fact(self, fact_id: str, session_id: str, content: str, command_id: str | None = None) -> Receipt:
        """Record a fact in a session (command id derived as for ``create_session``)."""
        payload: JSONObject = {"fact_id": fact_id, "session_id": session_id, "content": content}
        return self._create("facts", "command_fact", fact_id, payload, command_id)

    def create_context(self, context_id: str, handoff_id: str, session_id: str, to_actor: str, content: str,
                       command_id: str | None = None) -> Receipt:
        """Write the context packet of a handoff not yet sent (command id derived likewise)."""
        payload: JSONObject = {"context_id": context_id, "handoff_id": handoff_id, "session_id": session_id,
                               "to_actor": to_actor, "content": content}
        return self._create("handoff-contexts", "command_context", context_id, payload, command_id)

    def send(self, handoff_id: str, session_id: str, to_actor: str, *, focus: str | None = None,
             done_when: str | None = None, context_id: str | None = None, command_id: str | None = None) -> Receipt:
        """Send a handoff to ``to_actor`` (command id derived likewise); ``context_id`` names a
        context written first with ``create_context``."""
        payload: JSONObject = {"handoff_id": handoff_id, "session_id": session_id, "to_actor": to_actor,
                               "focus": focus, "done_when": done_when, "context_id": context_id}
        return self._create("handoffs", "command_send", handoff_id, payload, command_id)

    def transition(self, handoff_id: str, operation: Transition, *, expected_revision: int,
                   payload: JSONObject, command_id: str) -> Receipt:
        """Send one accept/heartbeat/return body exactly as given (no derivation, no recovery)."""
        return cast("Receipt", self.post(f"{self._base}/handoffs/{handoff_id}/{operation}", {
            "command_id": command_id, "expected_revision": expected_revision, "payload": payload,
        }))

    # -- transitions with the remote CLI's recovery -----------------------------------------
    # The rules (derived ids, retry state, `recovered`) are the planner's (``recovery``), so the
    # CLI, the MCP server, the simulator and this client decide alike; it raises this tree's errors.
    def _addressed(self, handoff_id: str) -> TypedHandoff:
        current = self.status(handoff_id)
        actor = self.actor_id
        if current["record"]["to_actor"] != actor:
            raise ClientRefusal(f"remote handoff is not addressed to authenticated actor {actor}")
        return current

    def accept(self, handoff_id: str) -> AcceptResult:
        """Claim with the derived claim id; ``recovered`` when this claim already holds it."""
        current = self.status(handoff_id)
        plan = plan_accept(self.project_id, self.actor_id, handoff_id, current)
        receipt = None if plan.recovered else self.transition(
            handoff_id, "accept", expected_revision=plan.revision, payload={"claim_id": plan.claim_id},
            command_id=plan.command_id)
        return {"handoff_id": handoff_id, "command_id": plan.command_id, "claim_id": plan.claim_id,
                "recovered": plan.recovered, "receipt": receipt}

    def heartbeat(self, handoff_id: str) -> HeartbeatResult:
        """Renew the lease of this actor's current claim, at the handoff's current revision."""
        current = self.status(handoff_id)
        plan = plan_heartbeat(self.project_id, self.actor_id, handoff_id, current)
        receipt = self.transition(handoff_id, "heartbeat", expected_revision=plan.revision,
                                  payload={"claim_id": plan.claim_id}, command_id=plan.command_id)
        return {"handoff_id": handoff_id, "command_id": plan.command_id, "claim_id": plan.claim_id,
                "expected_revision": plan.revision, "receipt": receipt}

    def return_result(self, handoff_id: str, result_fact_id: str, outcome: str) -> ReturnResult:
        """Return evidence for the current claim; ``recovered`` when exactly this is stored."""
        normalize_outcome(outcome)
        current = self._addressed(handoff_id)  # stricter than the CLI: a non-receiver never gets as far as a POST
        if current["record"]["claim_id"] is None:
            raise ClientRefusal("remote handoff must be accepted before returning a result")
        plan = plan_return(self.project_id, self.actor_id, handoff_id, current, result_fact_id,
                           outcome)
        receipt = None if plan.recovered else self.transition(
            handoff_id, "return", expected_revision=plan.revision, command_id=plan.command_id,
            payload={"claim_id": plan.claim_id, "result_fact_id": result_fact_id, "outcome": plan.outcome})
        return {"handoff_id": handoff_id, "command_id": plan.command_id, "result_fact_id": result_fact_id,
                "outcome": cast("HandoffOutcome", plan.outcome), "recovered": plan.recovered, "receipt": receipt}
