"""The verbs checks speak with: a project's ``Actor`` objects, one protocol request per method.

A check asks its world (``world.World``) for a project with named actors; the world provisions
it and hands back ``Actor`` objects whose methods send one protocol request each and return the
raw ``Exchange``. Nothing here asserts: checks judge the answers.

``setup_*`` helpers are the exception: they run a prerequisite step and raise ``Untestable``
when it does not succeed, so a broken prerequisite is never mistaken for the behaviour a
check tests.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from conformance.errors import Untestable
from conformance.http import Exchange, Wire
from conformance.profiles.aidememo.isolation import Isolation, IsolationError, refusal
from conformance.profiles.aidememo.leases import Lease, lease_of
from conformance.transcript import Transcript

__all__ = ["Actor", "HandoffRef", "MCP_VERSION", "Project", "Stage", "setup_ok", "setup_revision"]

MCP_VERSION = "2026-07-28"


class Stage(Protocol):
    """What an actor needs of its world (``world.World`` is one): the wire, the transcript, seeded ids and texts."""

    @property
    def wire(self) -> Wire: ...

    @property
    def transcript(self) -> Transcript: ...

    @property
    def rng(self) -> random.Random: ...

    def new_id(self, prefix: str) -> str: ...

    def text(self, what: str) -> str: ...


def setup_ok(exchange: Exchange, step: str) -> dict[str, Any]:
    """The JSON of a successful prerequisite step; anything else makes the check untestable."""
    exchange.expect(f"HTTP 200 (set-up step '{step}')")
    if exchange.status != 200:
        raise Untestable(f"setup step '{step}' answered {exchange.status} {exchange.body[:160]!r}")
    try:
        data = exchange.json()
    except AssertionError as exc:
        raise Untestable(f"setup step '{step}': {exc}") from None
    if not isinstance(data, dict):
        raise Untestable(f"setup step '{step}' did not answer a JSON object")
    return data


def setup_revision(exchange: Exchange, step: str) -> int:
    """The ``revision`` at the top of a successful prerequisite step's JSON (else untestable)."""
    return _revision(setup_ok(exchange, step), step)


def _revision(receipt: dict[str, Any], step: str) -> int:
    revision = receipt.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise Untestable(f"setup step '{step}' answered without a positive integer revision")
    return revision


@dataclass(frozen=True, slots=True)
class HandoffRef:
    """A handoff a check created: its ids and the revision it was last seen at."""

    handoff_id: str
    session_id: str
    revision: int
    claim_id: str | None = None

    @property
    def claim(self) -> str:
        """The claim of an accepted handoff (what ``setup_accept`` returns)."""
        if self.claim_id is None:
            raise Untestable(f"handoff {self.handoff_id} has no claim: it was not accepted in setup")
        return self.claim_id


@dataclass(slots=True)
class Actor:
    """One authenticated actor of a project; every method is one request."""

    name: str
    actor_id: str
    role: str
    token: str
    project: Project
    shared: bool = False  # the process's actor: its mailboxes hold other checks' handoffs

    # -- plumbing --------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> Exchange:
        """One request with this actor's token, if the project's isolation lets the check read its answer.

        Raises:
            IsolationError: a listing the check's declared isolation forbids (its bug: ERROR).
        """
        level = self.project.isolation
        if level is not Isolation.PROJECT:
            shared_here = self.shared and level is Isolation.ACTORS  # a bystander: listed as in 'shared'
            why = refusal(Isolation.SHARED if shared_here else level, method, path.partition("?")[0],
                          kwargs.get("json_body"))
            if why is not None:
                whose = f" of the shared actor {self.name}" if shared_here else ""
                fix = ("name it among the check's own actors: isolation.actors(...)" if shared_here else
                       "declare it 'project' (or 'actors' for its own actors' mailboxes)")
                raise IsolationError(f"{why}{whose}, which a check declared isolation '{level}' must not read: {fix}")
        return self.project.world.wire.request(
            self.project.world.transcript, method, path, token=self.token, actor=self.name, **kwargs
        )

    @property
    def base(self) -> str:
        return f"/v1/projects/{self.project.project_id}"

    def new_id(self, prefix: str) -> str:
        return self.project.world.new_id(prefix)

    # -- reads -------------------------------------------------------------------------------
    def identity(self) -> Exchange:
        return self.request("GET", f"{self.base}/identity")

    def resource(self, kind: str, resource_id: str) -> Exchange:
        return self.request("GET", f"{self.base}/resources/{kind}/{resource_id}")

    def status(self, handoff_id: str) -> Exchange:
        return self.request("GET", f"{self.base}/handoffs/{handoff_id}")

    def mailbox(self, box: str, **params: Any) -> Exchange:
        return self.request("GET", f"{self.base}/handoffs", params={"box": box, **params})

    def snapshot(self) -> Exchange:
        return self.request("GET", f"{self.base}/snapshot")

    def changes(self, epoch: str, after_seq: int, limit: int | None = None, *, materialized: bool = False) -> Exchange:
        path = f"{self.base}/changes/materialized" if materialized else f"{self.base}/changes"
        return self.request("GET", path, params={"project_epoch": epoch, "after_seq": after_seq, "limit": limit})

    def search(self, q: str, **params: Any) -> Exchange:
        return self.request("GET", f"{self.base}/search", params={"q": q, **params})

    # -- the MCP gateway (wire §1.18) ------------------------------------------------------------
    def mcp(self, method: str, params: dict[str, Any] | None = None, **headers: str) -> Exchange:
        """One JSON-RPC request to the gateway with the protocol headers it requires (``headers``
        override them: ``Mcp_Name="x"`` sends ``Mcp-Name: x``)."""
        fields = dict(params or {})
        sent = {"Mcp-Protocol-Version": MCP_VERSION, "Mcp-Method": method}
        if method == "tools/call" and isinstance(fields.get("name"), str):
            sent["Mcp-Name"] = fields["name"]
        sent.update({name.replace("_", "-"): value for name, value in headers.items()})
        fields["_meta"] = {"io.modelcontextprotocol/protocolVersion": MCP_VERSION}
        body = {"jsonrpc": "2.0", "id": self.project.world.rng.getrandbits(31), "method": method, "params": fields}
        return self.request("POST", f"{self.base}/mcp", json_body=body, headers=sent)

    def tool(self, name: str, **arguments: Any) -> Exchange:
        return self.mcp("tools/call", {"name": name, "arguments": arguments})

    # -- raw commands ------------------------------------------------------------------------
    def command(
        self,
        *,
        kind: str,
        resource_id: str,
        payload: object,
        operation: str = "resource.put",
        change: str = "upsert",
        expected_revision: int | None = None,
        command_id: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Exchange:
        body: dict[str, Any] = {
            "command_id": command_id or self.new_id("cmd"),
            "project_id": self.project.project_id,
            "expected_revision": expected_revision,
            "operation": operation,
            "payload": payload,
            "resource": {"kind": kind, "id": resource_id},
            "change": change,
        }
        body.update(extra or {})
        return self.request("POST", "/v1/commands", json_body=body)

    def put(self, resource_id: str, payload: object, **kwargs: Any) -> Exchange:
        return self.command(kind=kwargs.pop("kind", "custom.note"), resource_id=resource_id, payload=payload, **kwargs)

    def delete(self, resource_id: str, **kwargs: Any) -> Exchange:
        return self.command(
            kind=kwargs.pop("kind", "custom.note"),
            resource_id=resource_id,
            payload=kwargs.pop("payload", None),
            operation="resource.delete",
            change="delete",
            **kwargs,
        )

    # -- typed creates -----------------------------------------------------------------------
    def create(self, route: str, payload: dict[str, Any], command_id: str | None = None, **extra: Any) -> Exchange:
        body = {"command_id": command_id or self.new_id("cmd"), "payload": payload, **extra}
        return self.request("POST", f"{self.base}/{route}", json_body=body)

    def create_session(self, session_id: str | None = None, *, source_id: str | None = "src", topic: str | None = None,
                       command_id: str | None = None) -> Exchange:
        payload = {"session_id": session_id if session_id is not None else self.new_id("session"), "source_id": source_id,
                   "topic": topic or self.project.world.text("topic")}
        return self.create("sessions", payload, command_id)

    def create_fact(self, session_id: str, fact_id: str | None = None, *, content: str | None = None,
                    command_id: str | None = None) -> Exchange:
        payload = {"fact_id": fact_id if fact_id is not None else self.new_id("fact"), "session_id": session_id,
                   "content": content or self.project.world.text("fact")}
        return self.create("facts", payload, command_id)

    def create_context(self, session_id: str, handoff_id: str, to: Actor, context_id: str | None = None,
                       *, command_id: str | None = None) -> Exchange:
        payload = {"context_id": context_id if context_id is not None else self.new_id("context"), "handoff_id": handoff_id,
                   "session_id": session_id, "to_actor": to.actor_id, "content": self.project.world.text("context")}
        return self.create("handoff-contexts", payload, command_id)

    def send(self, session_id: str, to: Actor | str, handoff_id: str | None = None, *, context_id: str | None = None,
             focus: str | None = None, command_id: str | None = None) -> Exchange:
        payload = {"handoff_id": handoff_id if handoff_id is not None else self.new_id("handoff"), "session_id": session_id,
                   "to_actor": to if isinstance(to, str) else to.actor_id, "focus": focus, "done_when": None,
                   "context_id": context_id}
        return self.create("handoffs", payload, command_id)

    # -- transitions -------------------------------------------------------------------------
    def transition(self, handoff_id: str, verb: str, expected_revision: int | None, payload: dict[str, Any],
                   command_id: str | None = None) -> Exchange:
        body: dict[str, Any] = {"command_id": command_id or self.new_id("cmd"), "payload": payload}
        if expected_revision is not None:
            body["expected_revision"] = expected_revision
        return self.request("POST", f"{self.base}/handoffs/{handoff_id}/{verb}", json_body=body)

    def accept(self, handoff_id: str, expected_revision: int | None, claim_id: str, **kw: Any) -> Exchange:
        return self.transition(handoff_id, "accept", expected_revision, {"claim_id": claim_id}, **kw)

    def heartbeat(self, handoff_id: str, expected_revision: int | None, claim_id: str, **kw: Any) -> Exchange:
        return self.transition(handoff_id, "heartbeat", expected_revision, {"claim_id": claim_id}, **kw)

    def return_result(self, handoff_id: str, expected_revision: int | None, claim_id: str, result_fact_id: str,
                      outcome: str = "succeeded", **kw: Any) -> Exchange:
        payload = {"claim_id": claim_id, "result_fact_id": result_fact_id, "outcome": outcome}
        return self.transition(handoff_id, "return", expected_revision, payload, **kw)

    # -- setup helpers (raise Untestable) ------------------------------------------------------
    def setup_session(self, source_id: str | None = "src") -> str:
        session_id = self.new_id("session")
        setup_ok(self.create_session(session_id, source_id=source_id), "create session")
        return session_id

    def setup_fact(self, session_id: str) -> str:
        fact_id = self.new_id("fact")
        setup_ok(self.create_fact(session_id, fact_id), "create fact")
        return fact_id

    def setup_handoff(self, to: Actor, session_id: str | None = None) -> HandoffRef:
        session_id = session_id or self.setup_session()
        handoff_id = self.new_id("handoff")
        receipt = setup_ok(self.send(session_id, to, handoff_id), "send handoff")
        return HandoffRef(handoff_id, session_id, _revision(receipt, "send handoff"))

    def setup_accept(self, ref: HandoffRef, claim_id: str | None = None) -> HandoffRef:
        claim = claim_id or self.new_id("claim")
        receipt = setup_ok(self.accept(ref.handoff_id, ref.revision, claim), "accept handoff")
        return HandoffRef(ref.handoff_id, ref.session_id, _revision(receipt, "accept handoff"), claim)

    def setup_lease(self, ref: HandoffRef, claim_id: str | None = None) -> tuple[HandoffRef, Lease]:
        """Accept, timing the request, and read the lease the server granted from the handoff's record."""
        sent_at = time.monotonic()
        accepted = self.setup_accept(ref, claim_id)
        answered_at = time.monotonic()
        _, record = self.setup_record(ref.handoff_id)
        return accepted, lease_of(record, sent_at, answered_at)

    def setup_record(self, handoff_id: str) -> tuple[int, dict[str, Any]]:
        data = setup_ok(self.status(handoff_id), "read handoff status")
        if not isinstance(data.get("record"), dict) or not isinstance(data.get("revision"), int):
            raise Untestable("handoff status lacks revision/record")
        return data["revision"], data["record"]

    def setup_epoch(self) -> str:
        epoch = setup_ok(self.identity(), "read identity").get("project_epoch")
        if not isinstance(epoch, str):
            raise Untestable("identity lacks project_epoch")
        return epoch


@dataclass(slots=True)
class Project:
    """A project provisioned for one check (or the process's shared one), with its actors by name."""

    world: Stage
    tenant_id: str
    project_id: str
    actors: dict[str, Actor] = field(default_factory=dict)
    isolation: Isolation = Isolation.PROJECT  # what its actors' requests may read (``isolation.refusal``)

    def __getattr__(self, name: str) -> Actor:
        try:
            return self.actors[name]
        except KeyError:
            # A misspelt actor is the check's bug: AttributeError reads ERROR, never FAIL.
            raise AttributeError(f"the project has no actor {name!r} (it has {', '.join(self.actors) or 'none'})"
                                 ) from None
