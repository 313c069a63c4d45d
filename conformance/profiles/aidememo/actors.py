"""Fresh identities and the verbs checks speak with.

A check asks its ``world`` for a project with named actors; the world provisions a fresh
project (ids derived from the run seed and the check's node id, so any order and any xdist
split works) and hands back ``Actor`` objects whose methods send one protocol request each
and return the raw ``Exchange``. Nothing here asserts: checks judge the answers.

``setup_*`` helpers are the exception: they run a prerequisite step and raise ``Untestable``
when it does not succeed, so a broken prerequisite is never mistaken for the behaviour a
check tests.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from aidememo_wire.shapes import WRITER_ROLES
from conformance.errors import NotScored, Untestable
from conformance.http import Exchange, Wire
from conformance.profile import CheckContext
from conformance.pool import Pending
from conformance.profiles.aidememo.ahead import expected_identities, project_identities
from conformance.profiles.aidememo.leases import MARKER, Arranged, Lease, LeaseMode, lease_of, margin_before
from conformance.profiles.aidememo.leases import not_observable
from conformance.profiles.aidememo.target import AideMemoTarget, advance_clock
from conformance.provisioning import FixedIdentity
from conformance.world import BaseWorld

__all__ = ["Actor", "HandoffRef", "MCP_VERSION", "Project", "World", "setup_ok"]

MCP_VERSION = "2026-07-28"
REAL_HTTP = "real_http"  # the marker of checks whose answers depend on HTTP's bytes


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


def _revision(receipt: dict[str, Any], step: str) -> int:
    revision = receipt.get("revision")
    if not isinstance(revision, int) or isinstance(revision, bool) or revision < 1:
        raise Untestable(f"setup step '{step}' returned a receipt without a positive integer revision")
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

    # -- plumbing --------------------------------------------------------------------------------
    def request(self, method: str, path: str, **kwargs: Any) -> Exchange:
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
    """A project provisioned for one check, with its actors by name."""

    world: World
    tenant_id: str
    project_id: str
    actors: dict[str, Actor] = field(default_factory=dict)

    def __getattr__(self, name: str) -> Actor:
        try:
            return self.actors[name]
        except KeyError:
            # A misspelt actor is the check's bug: AttributeError reads ERROR, never FAIL.
            raise AttributeError(f"the project has no actor {name!r} (it has {', '.join(self.actors) or 'none'})"
                                 ) from None


@dataclass(slots=True)
class World(BaseWorld):
    """One check's view of the target: fresh ids, provisioning, the transcript, the clock."""

    runtime: AideMemoTarget = field(kw_only=True)
    context: CheckContext = field(kw_only=True)
    fresh_project: bool = field(default=False, kw_only=True)

    @classmethod
    def build(cls, context: CheckContext) -> World:
        world = cls(**cls.context_fields(context), runtime=context.target, context=context,
                    fresh_project="fresh_project" in context.markers)
        pool = world.runtime.pool
        if pool is not None:
            if not world.runtime.pool_fed:  # the process's first check: what the rest will ask for
                world.runtime.pool_fed = True
                pool.expect(expected_identities(context.ahead(), context.run_tag))
            pool.begin(context.check)
        if world.runtime.lease_mode is LeaseMode.REAL and not world.runtime.lease_wait.begun:
            world._lease_ahead()
        return world

    def _lease_ahead(self) -> None:
        """At the process's first check, set up the lease of every lease-expiry check it will run
        (they run last, so their one wait overlaps the rest of the run: ``leases``)."""
        wait = self.runtime.lease_wait
        wait.begun = True  # before the siblings' worlds are built: they come through here too
        own = [self] if MARKER in self.context.markers else []
        worlds = own + [s.world() for s in self.context.siblings(MARKER) if s.check != self.context.check]
        if worlds:
            wait.begin(worlds, lambda world: world.context.markers[MARKER][0], self.context.progress)

    @property
    def wire(self) -> Wire:
        """The wire this check speaks over (a ``real_http`` check: a socket, even to the embedded reference)."""
        return self.runtime.wire_for(REAL_HTTP in self.context.markers)

    def require(self, capability: str) -> None:
        self.runtime.require(capability)

    def advance_clock(self, advance_ms: int) -> int:
        self.runtime.require("test-clock")
        return advance_clock(self.wire, self.transcript, advance_ms)

    @property
    def clock_is_virtual(self) -> bool:
        """Checks move the test clock only in virtual lease mode (a real-time wait must not be disturbed)."""
        return self.runtime.lease_mode is LeaseMode.VIRTUAL

    def after_lease_expiry(self) -> Arranged:
        """This check's arrangement (``after_lease_expiry(arrange)`` on the check) once its lease expired.

        Raises:
            NotScored: the target offers no way to observe expiry.
            Untestable: the set-up failed, or the wait was interrupted.
        """
        marker = self.context.markers.get(MARKER)
        if not marker or not callable(marker[0]):
            raise Untestable(f"{self.context.check} lacks @after_lease_expiry(arrange) (a bug in the kit)")
        mode = self.runtime.lease_mode
        if mode is None:
            raise not_observable()
        if mode is LeaseMode.VIRTUAL:
            arranged: Arranged = marker[0](self)
            lease = arranged.lease
            if arranged.before_expiry is not None:
                # The test clock runs on from the wall clock too: what already passed counts.
                passed_ms = int((time.monotonic() - lease.sent_at) * 1000)
                self.advance_clock(max(0, lease.lease_ms - int(margin_before(lease.lease_s) * 1000) - passed_ms))
                arranged.before = arranged.before_expiry()
            else:
                self.advance_clock(lease.lease_ms)
            return arranged
        wait = self.runtime.lease_wait
        if wait.covers(self):
            arranged = wait.finish(self, self.context.progress, self.context.stop)
            self.transcript.notes.append("lease set up at the process's first check; the real-time wait was "
                                         "shared by every lease-expiry check of the process")
            return arranged
        # Nobody set this lease up ahead (its process learnt of it late): set up the leases of the
        # siblings not set up yet, and wait one whole lease for them.
        siblings = [s.world() for s in self.context.siblings(MARKER)
                    if s.check != self.context.check and not wait.covers(s.world())]
        waited = wait.run([self, *siblings], lambda world: world.context.markers[MARKER][0],
                          self.context.progress, self.context.stop)
        for world in (self, *siblings):
            world.transcript.notes.append(f"real-time lease wait of {waited:.1f} s, shared by "
                                          f"{1 + len(siblings)} check(s)")
        return wait.result(self)

    def project(self, writers: tuple[str, ...] = ("writer",), readers: tuple[str, ...] = ()) -> Project:
        """Provision a fresh project with the named actors (or draw them from the fixed tokens).

        Raises:
            NotScored: the target has no way to provide these identities.
            Untestable: provisioning failed.
        """
        if self.runtime.provisioner is None:
            return self._fixed_project(writers, readers)
        first = self._counter + 1  # the ids project_identities derives, minted here in the same order
        project_id, identities = project_identities(self.run_tag, self.check_tag, first, writers, readers)
        tenant = identities[0]["tenant"] if identities else f"t-{self.run_tag}"
        self.transcript.minted(tenant, self.run_tag)
        names = [*writers, *readers]
        minted = [self.new_id("p"), *(self.new_id(name) for name in names)]
        if minted != [project_id, *(identity["actor"] for identity in identities)]:  # the pool's ids would be wrong
            raise RuntimeError(f"project ids {minted} differ from their derivation (a bug in the kit)")
        project = Project(self, tenant, project_id)
        # The actors are provisioned together (a command provisioner runs them concurrently).
        started = [self._start(identity) for identity in identities]
        for name, identity, pending in zip(names, identities, started):
            self._provisioned(project, name, identity, pending)
            self.transcript.notes.append(f"{project.actors[name].name}: tenant {tenant}, project {project_id}, "
                                         f"actor {identity['actor']}, role {identity['role']}")
        return project

    def bound(self, project: Project, name: str, source_id: str, as_actor: Actor | None = None) -> Actor:
        """A new writer of ``project`` whose token is bound (``--auth-bindings-file``) to ``source_id``
        and to ``as_actor``'s id (default: its own), for the gateway's binding rules.

        Raises:
            NotScored: the target does not claim ``mcp-bindings`` or cannot bind tokens.
        """
        self.runtime.require("mcp-bindings")
        if self.runtime.provisioner is None or not self.runtime.binds_tokens:
            raise NotScored("the target claims mcp-bindings but its provisioning cannot bind a token to a source")
        actor_id = self.new_id(name)
        bound_to = as_actor.actor_id if as_actor is not None else actor_id
        identity = {"tenant": project.tenant_id, "project": project.project_id, "actor": actor_id, "role": "writer",
                    "bind_source": source_id, "bind_actor": bound_to}
        actor = self._provisioned(project, name, identity)
        self.transcript.notes.append(f"{actor.name}: actor {actor_id}, token bound to source {source_id}, "
                                     f"actor {bound_to}")
        return actor

    def _start(self, identity: dict[str, str]) -> Pending | str:
        """Start provisioning ``identity``: through the pool (a ``Pending``), or a new credential
        to provision in ``_provisioned``."""
        if self.runtime.pool is not None:
            return self.runtime.pool.provision(identity)
        return self.fresh_credential("tok-")

    def _provisioned(self, project: Project, name: str, identity: dict[str, str],
                     started: Pending | str | None = None) -> Actor:
        """Provision ``identity`` with a new credential (or wait for ``started``); the actor ``name``
        of ``project``.

        Its credential label is unique in the transcript (a second project's writer is ``writer-2``),
        so reports and replays never mix up two actors' tokens.
        """
        assert self.runtime.provisioner is not None
        label = self.transcript.label(name)
        started = self._start(identity) if started is None else started
        token = started if isinstance(started, str) else started.token
        self.transcript.secret(token, label)
        self.transcript.identity(label, identity)
        try:
            if isinstance(started, str):
                token = self.runtime.provisioner.provision(identity, token)
            else:
                token = started.result()[1]
        except Untestable:
            raise
        except Exception as exc:  # a provisioner is foreign code; its failure blocks only this check
            raise Untestable(f"provisioning {name} ({identity['role']}) failed: {exc}") from exc
        self.transcript.secret(token, label)
        project.actors[name] = Actor(label, identity["actor"], identity["role"], token, project)
        return project.actors[name]

    def _fixed_project(self, writers: tuple[str, ...], readers: tuple[str, ...]) -> Project:
        if self.fresh_project:
            raise NotScored("this check needs a fresh project; the fixed token list cannot provide one")
        for project_id, identities in sorted(self.runtime.fixed_tokens.grouped("project").items()):
            writer_pool = [i for i in identities if i["role"] in WRITER_ROLES]
            reader_pool = [i for i in identities if i["role"] == "reader"]
            if len(writer_pool) >= len(writers) and len(reader_pool) >= len(readers):
                project = Project(self, "(fixed)", project_id)
                pairs: list[tuple[str, FixedIdentity]] = [*zip(writers, writer_pool), *zip(readers, reader_pool)]
                for name, identity in pairs:
                    label = self.transcript.label(name)
                    self.transcript.secret(identity.token, label)
                    self.transcript.identity(label, {"project": project_id, "actor": identity["actor"],
                                                     "role": identity["role"]})
                    project.actors[name] = Actor(label, identity["actor"], identity["role"], identity.token, project)
                return project
        raise NotScored(
            f"the fixed token list has no project with {len(writers)} writer(s) and {len(readers)} reader(s)"
        )
