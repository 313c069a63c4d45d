"""One AideMemo check's world: its identities, provisioning, the clock and lease expiry.

The world provisions a project for a check as its declared isolation allows (``isolation``): a
fresh one (ids derived from the run tag and the check's name, so any order and any xdist split
works), fresh actors in the process's shared project, or the shared project's actors, provisioned
once per process; and hands back its actors (``actors``), whose requests it guards.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from aidememo_wire.shapes import WRITER_ROLES
from conformance.errors import NotScored, Untestable
from conformance.http import Wire
from conformance.pool import Pending
from conformance.profile import CheckContext
from conformance.profiles.aidememo.actors import Actor, Project
from conformance.profiles.aidememo.ahead import expected_identities, project_identities
from conformance.profiles.aidememo.isolation import Isolation, IsolationError, isolation_of, own_actors, shares_actor
from conformance.profiles.aidememo.leases import MARKER, Arranged, LeaseMode, margin_before, not_observable
from conformance.profiles.aidememo.target import AideMemoTarget, advance_clock
from conformance.provisioning import FixedIdentity
from conformance.world import BaseWorld

__all__ = ["REAL_HTTP", "World"]


def _key(identity: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(identity.items()))

REAL_HTTP = "real_http"  # the marker of checks whose answers depend on HTTP's bytes


@dataclass(slots=True)
class World(BaseWorld):
    """One check's view of the target: fresh ids, provisioning, the transcript, the clock."""

    runtime: AideMemoTarget = field(kw_only=True)
    context: CheckContext = field(kw_only=True)
    fresh_project: bool = field(default=False, kw_only=True)
    isolation: Isolation = field(default=Isolation.PROJECT, kw_only=True)
    own: frozenset[str] | None = field(default=None, kw_only=True)  # an ``actors`` check's listed actors
    _projects: int = 0  # projects handed out: a shared world hands out one
    _held: bool = False  # the test clock stands still since this check's last hold_clock

    @classmethod
    def build(cls, context: CheckContext) -> World:
        runtime: AideMemoTarget = context.target
        fresh = runtime.settings.fresh_identities
        world = cls(**cls.context_fields(context), runtime=runtime, context=context,
                    fresh_project="fresh_project" in context.markers,
                    isolation=isolation_of(context.markers, fresh=fresh),
                    own=own_actors(context.markers, fresh=fresh))
        pool = runtime.pool
        if pool is not None:
            if not runtime.pool_fed:  # the process's first check: what the rest will ask for
                runtime.pool_fed = True
                pool.expect(expected_identities(context.ahead(), context.run_tag, fresh=fresh,
                                                known=lambda identity: _key(identity) in runtime.shared))
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
        # The move that lets a held clock run again: its replay sends it even after stopping early.
        released, self._held = self._held, False
        return advance_clock(self.wire, self.transcript, advance_ms, cleanup=released)

    def hold_clock(self, advance_ms: int) -> int:
        """Move the test clock and hold it still there (until the next ``advance_clock``); its reading."""
        self.runtime.require("test-clock")
        self._held = True
        return advance_clock(self.wire, self.transcript, advance_ms, hold=True)

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
        """A project with the named actors, as the check's isolation allows (or from the fixed tokens).

        Raises:
            NotScored: the target has no way to provide these identities.
            Untestable: provisioning failed.
            IsolationError: the check's declared isolation allows no (further) project.
        """
        level = self._admit_project()
        if self.runtime.provisioner is None:
            return self._fixed_project(writers, readers)
        tenant, project_id, identities = self._mint_project(writers, readers, level)
        project = Project(self, tenant, project_id, isolation=level)
        names = [*writers, *readers]
        shared = [shares_actor(level, self.own, name) for name in names]
        # The actors are provisioned together (a command provisioner runs them concurrently).
        started = [self._shared(identity) if is_shared else self._start(identity)
                   for identity, is_shared in zip(identities, shared)]
        for name, identity, pending, is_shared in zip(names, identities, started, shared):
            self._provisioned(project, name, identity, pending, shared=is_shared)
            self.transcript.notes.append(f"{project.actors[name].name}: tenant {tenant}, project {project_id}"
                                         f"{' (shared)' if level is not Isolation.PROJECT else ''}, actor "
                                         f"{identity['actor']}{' (shared)' if is_shared else ''}, "
                                         f"role {identity['role']}")
        return project

    def _admit_project(self) -> Isolation:
        """The check's level, once it may have this project: none in ``none``, one in a shared world."""
        level = self.isolation
        self._projects += 1
        if level is Isolation.NONE or (self._projects > 1 and level is not Isolation.PROJECT):
            raise IsolationError(f"{self.context.check} is declared isolation '{level}' but asks for "
                                 f"{'a' if level is Isolation.NONE else 'a second'} project (a bug in its declaration)")
        return level

    def _mint_project(self, writers: tuple[str, ...], readers: tuple[str, ...], level: Isolation
                      ) -> tuple[str, str, list[dict[str, str]]]:
        """(tenant, project id, identities) as ``level`` hands them out; the check's own ids are minted
        whatever the level, so they are the same in every mode (and ``ahead`` derives them alike)."""
        first = self._counter + 1
        project_id, identities = project_identities(self.run_tag, self.check_tag, first, writers, readers)
        tenant = identities[0]["tenant"] if identities else f"t-{self.run_tag}"
        self.transcript.minted(tenant, self.run_tag)
        minted = [self.new_id("p"), *(self.new_id(name) for name in (*writers, *readers))]
        if minted != [project_id, *(identity["actor"] for identity in identities)]:  # the pool's ids would be wrong
            raise RuntimeError(f"project ids {minted} differ from their derivation (a bug in the kit)")
        if level is not Isolation.PROJECT:
            project_id, identities = project_identities(self.run_tag, self.check_tag, first, writers, readers, level,
                                                        self.own)
            for value in (project_id, *(identity["actor"] for identity in identities)):
                self.transcript.minted(value, self.run_tag)
        return tenant, project_id, identities

    def _shared(self, identity: dict[str, str]) -> Pending:
        """The process's shared ``identity``, provisioned the first time a check asks for it."""
        key = _key(identity)
        pending = self.runtime.shared.get(key)
        if pending is None:
            started = self._start(identity)
            if isinstance(started, str):
                provisioner = self.runtime.provisioner
                assert provisioner is not None
                started = Pending.now(started, lambda token: provisioner.provision(identity, token))
            pending = self.runtime.shared[key] = started
        return pending

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
                     started: Pending | str | None = None, *, shared: bool = False) -> Actor:
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
        project.actors[name] = Actor(label, identity["actor"], identity["role"], token, project, shared)
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
