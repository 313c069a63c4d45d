"""Hypothesis state machines: the target and the model side by side, one step at a time.

``HandoffLifecycle`` sends every write the protocol has (sessions, facts, contexts, sends,
accepts, heartbeats, returns), deliberately stale writes, replays of earlier commands, command
ids reused with another body, clock moves past the lease, and reads by non-participants. After
each step the answer must be the model's (status, error code, receipt), and after every step the
invariants below hold, each named as the fact it checks. Every actor, the reader included, must
see exactly what the model lets it see: typed status, resources, both mailboxes, the snapshot
and both change feeds.

The target is the embedded reference by default (a fresh ledger per example, on a manual clock)
or any server by URL (``Wire.over_http``; ids carry a per-example prefix and project sequence
numbers are compared through the receipts, so earlier data on the server does not matter).
"""

from __future__ import annotations

import itertools
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, precondition, rule

from aidememo_ref.wire import error_detail
from simulations.concurrency import READER
from simulations.model import (
    LEASE_MS,
    Answer,
    Command,
    LedgerState,
    Op,
    apply,
    read_changes,
    read_mailbox,
    read_resource,
    read_snapshot,
    read_status,
)

__all__ = ["HandoffLifecycle", "Wire", "bench_machines", "lifecycle_against"]

WRITERS = ("agent-a", "agent-b", "agent-c")
ACTORS = (*WRITERS, READER)
SOURCES = ("project:sim", None, "project:other")
_RARELY = st.sampled_from((False, False, False, True))  # stale or misaddressed writes: 1 in 4
_ROUTES = {
    Op.SESSION_CREATE: "sessions",
    Op.FACT_CREATE: "facts",
    Op.CONTEXT_CREATE: "handoff-contexts",
    Op.SEND: "handoffs",
}


@dataclass(slots=True)
class Wire:
    """One client per actor on one project, and the target's clock if it can be moved."""

    clients: dict[str, httpx.Client]
    project: str
    prefix: str
    advance: Callable[[int], None] | None
    now_ms: Callable[[], int | None]
    close: Callable[[], None]
    names: Mapping[str, str] = field(default_factory=dict)  # machine actor name -> target actor id

    def outgoing(self, value: Any) -> Any:
        return _rename(value, self.names)

    def incoming(self, value: Any) -> Any:
        return _rename(value, {v: k for k, v in self.names.items()})

    @staticmethod
    def embedded(decide: Any = None) -> Wire:
        """The reference in-process; ``decide`` swaps its rule function (for planted bugs)."""
        from aidememo_ref import ManualClock, ReferenceLedger

        workdir = tempfile.TemporaryDirectory(prefix="aidememo-sm-")
        clock = ManualClock(1_767_225_600_000)
        ledger = ReferenceLedger(Path(workdir.name) / "ledger.sqlite", clock=clock, decide=decide)
        clients = {}
        for actor in ACTORS:
            ledger.provision(tenant_id="t", project_id="p", actor_id=actor, token=f"token-{actor}",
                             role="reader" if actor == READER else "writer")
            clients[actor] = httpx.Client(transport=ledger.transport(), base_url="http://ref",
                                          headers={"authorization": f"Bearer token-{actor}"})

        def close() -> None:
            for c in clients.values():
                c.close()
            ledger.close()
            workdir.cleanup()

        return Wire(clients=clients, project="p", prefix="x", advance=clock.advance,
                    now_ms=lambda: int(clock.now_ms()), close=close)

    @staticmethod
    def over_http(url: str, project: str, tokens: Mapping[str, str]) -> Wire:
        """Tokens by actor id: three writers and a reader named ``observer``, or any three writer
        ids plus ``observer`` (the machine calls the writers agent-a, -b, -c in id order)."""
        writers = sorted(a for a in tokens if a != READER)
        if len(writers) < 3 or READER not in tokens:
            raise ValueError("the state machine needs three writer tokens and a reader token ('observer')")
        names = dict(zip(WRITERS, writers[:3]))
        clients = {machine: httpx.Client(base_url=url, timeout=10.0,
                                         headers={"authorization": f"Bearer {tokens[real]}"})
                   for machine, real in (*names.items(), (READER, READER))}

        def close() -> None:
            for c in clients.values():
                c.close()

        return Wire(clients=clients, project=project, prefix=f"x{secrets.token_hex(4)}", advance=None,
                    now_ms=lambda: None, close=close, names={k: v for k, v in names.items() if k != v})


# The wire the machine uses; tests swap it (``lifecycle_against``), the default is embedded.
_wire_factory: Callable[[], Wire] = Wire.embedded


def _rename(value: Any, names: Mapping[str, str]) -> Any:
    if not names:
        return value
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {k: _rename(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename(v, names) for v in value]
    return value


def _answer(response: httpx.Response) -> tuple[int, str | None, Any]:
    try:
        doc = response.json()
    except ValueError:
        doc = None
    detail = error_detail(doc)
    return response.status_code, detail["code"] if detail else None, doc


class HandoffLifecycle(RuleBasedStateMachine):
    """Writes of every kind by several actors, checked against the model after every step."""

    sessions = Bundle("sessions")
    facts = Bundle("facts")
    handoffs = Bundle("handoffs")
    commands = Bundle("commands")

    def __init__(self) -> None:
        super().__init__()
        self.wire = _wire_factory()
        self.model = LedgerState()
        for actor in ACTORS:
            self.model = self.model.with_member(actor, "reader" if actor == READER else "writer")
        self.ids = itertools.count(1)
        self.claims: dict[str, list[str]] = {}
        self.seq_map: dict[int, int] = {}  # model project_seq -> target project_seq
        self.seen_revision: dict[str, int] = {}
        self.seen_attempts: dict[str, tuple[int, str | None]] = {}
        self.completed: set[str] = set()
        self.receipts: dict[str, list[Any]] = {}  # command_id -> every receipt answered for it
        self.epoch, self.start_seq = self._head()

    def teardown(self) -> None:
        self.wire.close()

    # -- plumbing -------------------------------------------------------------------------------

    def _id(self, kind: str) -> str:
        return f"{kind}-{self.wire.prefix}-{next(self.ids)}"

    def _head(self) -> tuple[str, int]:
        status, _, doc = _answer(self.wire.clients[READER].get(f"/v1/projects/{self.wire.project}/snapshot"))
        assert status == 200, f"snapshot answered {status}"
        return str(doc["project_epoch"]), int(doc["at_seq"])

    def _send(self, cmd: Command) -> tuple[int, str | None, Any]:
        base = f"/v1/projects/{self.wire.project}"
        if cmd.operation in _ROUTES:
            path = f"{base}/{_ROUTES[cmd.operation]}"
            body: dict[str, Any] = {"command_id": cmd.command_id, "payload": dict(cmd.payload)}
        else:
            path = f"{base}/handoffs/{cmd.resource_id}/{cmd.operation.removeprefix('handoff.')}"
            body = {"command_id": cmd.command_id, "expected_revision": cmd.expected_revision,
                    "payload": dict(cmd.payload)}
        status, code, doc = _answer(self.wire.clients[cmd.actor].post(path, json=self.wire.outgoing(body)))
        return status, code, self.wire.incoming(doc)

    def _write(self, operation: Op, actor: str, resource_id: str, payload: Mapping[str, Any],
               expected_revision: int | None = None, command_id: str | None = None) -> Command:
        cmd = Command(actor=actor, operation=operation, command_id=command_id or self._id("cmd"),
                      resource_id=resource_id, payload=dict(payload), expected_revision=expected_revision,
                      now_ms=self.wire.now_ms())
        expected, self.model = apply(self.model, cmd)
        self._compare(cmd, expected, self._send(cmd))
        return cmd

    def _compare(self, cmd: Command, expected: Answer, got: tuple[int, str | None, Any]) -> None:
        status, code, doc = got
        what = f"{cmd.actor} {cmd.operation} {cmd.resource_id} (command {cmd.command_id})"
        assert (status, code) == (expected.http, expected.code), (
            f"{what}: the model answers {expected.http} {expected.code}, the target {status} {code}")
        receipt = expected.receipt
        if receipt is None:
            return
        self.receipts.setdefault(cmd.command_id, []).append(doc)
        assert doc["command_id"] == cmd.command_id and doc["revision"] == receipt.revision, (
            f"{what}: receipt revision {doc.get('revision')}, the model says {receipt.revision}")
        assert doc["resource"] == {"kind": receipt.kind, "id": receipt.resource_id}
        assert doc["actor_id"] == receipt.actor
        known = self.seq_map.setdefault(receipt.project_seq, int(doc["project_seq"]))
        assert known == doc["project_seq"], (
            f"{what}: a replay must return the stored receipt (project_seq {known}, got {doc['project_seq']})")
        if receipt.committed_at_ms is not None:
            assert doc["committed_at_ms"] == receipt.committed_at_ms

    def _claim(self, handoff_id: str, choice: str) -> str:
        h = self.model.handoff(handoff_id)
        old = self.claims.setdefault(handoff_id, [])
        if choice == "current" and h is not None and h.claim_id is not None:
            return h.claim_id
        if choice == "old" and old:
            return old[0]
        claim = self._id("claim")
        old.append(claim)
        return claim

    def _revision(self, handoff_id: str, stale: bool) -> int:
        h = self.model.handoff(handoff_id)
        current = 1 if h is None else h.revision
        return max(1, current - 1) if stale and current > 1 else current + (1 if stale else 0)

    # -- rules: creates --------------------------------------------------------------------------

    @initialize(target=sessions)
    def first_session(self) -> str:
        session_id = self._id("session")
        self._write(Op.SESSION_CREATE, WRITERS[0], session_id,
                    {"session_id": session_id, "source_id": SOURCES[0], "topic": "state machine"})
        return session_id

    @precondition(lambda self: sum(k == "session" for k, _ in self.model.resources) < 3)
    @rule(target=sessions, actor=st.sampled_from(ACTORS), source=st.sampled_from(SOURCES))
    def create_session(self, actor: str, source: str | None) -> str:
        session_id = self._id("session")
        self._write(Op.SESSION_CREATE, actor, session_id, {"session_id": session_id, "source_id": source, "topic": "t"})
        return session_id

    @rule(target=facts, actor=st.sampled_from(ACTORS), session=sessions)
    def create_fact(self, actor: str, session: str) -> str:
        fact_id = self._id("fact")
        self._write(Op.FACT_CREATE, actor, fact_id, {"fact_id": fact_id, "session_id": session, "content": "result"})
        return fact_id

    @rule(target=handoffs, sender=st.sampled_from((*WRITERS, *WRITERS, READER)),
          receiver=st.sampled_from((*WRITERS, *WRITERS, READER)), session=sessions, with_context=st.booleans())
    def send(self, sender: str, receiver: str, session: str, with_context: bool) -> str:
        handoff_id = self._id("handoff")
        payload: dict[str, Any] = {"handoff_id": handoff_id, "session_id": session, "to_actor": receiver,
                                   "focus": "review", "done_when": None, "context_id": None}
        if with_context:
            context_id = self._id("context")
            self._write(Op.CONTEXT_CREATE, sender, context_id, {
                "context_id": context_id, "handoff_id": handoff_id, "session_id": session,
                "to_actor": receiver, "content": "# packet"})
            payload["context_id"] = context_id
        self._write(Op.SEND, sender, handoff_id, payload)
        return handoff_id

    @rule(sender=st.sampled_from(WRITERS), handoff=handoffs, session=sessions)
    def send_again_with_the_same_id(self, sender: str, handoff: str, session: str) -> None:
        receiver = next(a for a in WRITERS if a != sender)
        self._write(Op.SEND, sender, handoff, {"handoff_id": handoff, "session_id": session, "to_actor": receiver})

    # -- rules: transitions ----------------------------------------------------------------------

    def _receiver(self, handoff: str, wrong_actor: bool) -> str:
        h = self.model.handoff(handoff)
        if h is None:
            return WRITERS[1]
        return h.from_actor if wrong_actor else h.to_actor

    @rule(target=commands, handoff=handoffs, claim=st.sampled_from(["new", "new", "current", "old"]),
          stale=_RARELY, wrong_actor=_RARELY)
    def accept(self, handoff: str, claim: str, stale: bool, wrong_actor: bool) -> Command:
        return self._write(Op.ACCEPT, self._receiver(handoff, wrong_actor), handoff,
                           {"claim_id": self._claim(handoff, claim)}, self._revision(handoff, stale))

    @rule(target=commands, handoff=handoffs, claim=st.sampled_from(["current", "current", "old", "new"]),
          stale=_RARELY, wrong_actor=_RARELY)
    def heartbeat(self, handoff: str, claim: str, stale: bool, wrong_actor: bool) -> Command:
        return self._write(Op.HEARTBEAT, self._receiver(handoff, wrong_actor), handoff,
                           {"claim_id": self._claim(handoff, claim)}, self._revision(handoff, stale))

    @rule(target=commands, handoff=handoffs, fact=facts, claim=st.sampled_from(["current", "old", "new"]),
          outcome=st.sampled_from(["succeeded", "failed"]), stale=_RARELY, wrong_actor=_RARELY)
    def return_result(self, handoff: str, fact: str, claim: str, outcome: str, stale: bool,
                      wrong_actor: bool) -> Command:
        return self._write(Op.RETURN, self._receiver(handoff, wrong_actor), handoff,
                           {"claim_id": self._claim(handoff, claim), "result_fact_id": fact, "outcome": outcome},
                           self._revision(handoff, stale))

    @rule(target=facts, handoff=handoffs, outcome=st.sampled_from(["succeeded", "failed"]))
    def return_own_result(self, handoff: str, outcome: str) -> str:
        """The usual path: the receiver writes its result in the handoff's session, then returns it."""
        h = self.model.handoff(handoff)
        fact_id = self._id("fact")
        if h is None:
            return fact_id
        self._write(Op.FACT_CREATE, h.to_actor, fact_id, {"fact_id": fact_id, "session_id": h.session_id,
                                                          "content": "done"})
        self._write(Op.RETURN, h.to_actor, handoff, {"claim_id": self._claim(handoff, "current"),
                                                     "result_fact_id": fact_id, "outcome": outcome}, h.revision)
        return fact_id

    @rule(handoff=handoffs, claim=st.sampled_from(["new", "current"]))
    def stale_accept(self, handoff: str, claim: str) -> None:
        """A writer that read long ago: its expected revision is behind by one or more."""
        h = self.model.handoff(handoff)
        if h is not None and h.revision > 1:
            self._write(Op.ACCEPT, h.to_actor, handoff, {"claim_id": self._claim(handoff, claim)}, h.revision - 1)

    @rule(command=commands)
    def replay_command(self, command: Command) -> None:
        """The identical command again (a client retry): the stored receipt, unchanged."""
        self._write(command.operation, command.actor, command.resource_id, command.payload,
                    command.expected_revision, command.command_id)

    @rule(command=commands, handoff=handoffs)
    def reuse_command_id(self, command: Command, handoff: str) -> None:
        """The same command id with another body: command_conflict, never a second effect."""
        self._write(Op.ACCEPT, command.actor, handoff, {"claim_id": self._id("claim")},
                    self._revision(handoff, False), command.command_id)

    @precondition(lambda self: self.wire.advance is not None)
    @rule(ms=st.sampled_from([1_000, LEASE_MS - 1, LEASE_MS, LEASE_MS + 1]))
    def advance_clock(self, ms: int) -> None:
        assert self.wire.advance is not None
        self.wire.advance(ms)

    # -- invariants -------------------------------------------------------------------------------

    def _handoff_ids(self) -> list[str]:
        return [rid for (kind, rid) in self.model.resources if kind == "handoff"]

    def _status(self, actor: str, handoff_id: str) -> tuple[int, str | None, Any]:
        status, code, doc = _answer(self.wire.clients[actor].get(f"/v1/projects/{self.wire.project}/handoffs/{handoff_id}"))
        return status, code, self.wire.incoming(doc)

    def _same_record(self, got: Mapping[str, Any], want: Mapping[str, Any], what: str) -> None:
        if self.wire.now_ms() is not None or "claim_expires_at_ms" not in want:
            assert dict(got) == dict(want), f"{what} as {got}, model {want}"
            return
        # The target's clock is unknown: lease times are the server's; only their shape is checked.
        times = ("claim_heartbeat_at_ms", "claim_expires_at_ms")
        assert {k: v for k, v in got.items() if k not in times} == {k: v for k, v in want.items() if k not in times}, (
            f"{what} as {got}, model {want}")
        beat, expires = got["claim_heartbeat_at_ms"], got["claim_expires_at_ms"]
        if beat is not None:
            assert expires == beat + LEASE_MS, f"{what}: the lease is not {LEASE_MS} ms"

    @invariant()
    def revisions_only_grow(self) -> None:
        """HL-CAS: a handoff's revision never goes back (handoff notes §3.1)."""
        for handoff_id in self._handoff_ids():
            h = self.model.handoff(handoff_id)
            assert h is not None
            status, _, doc = self._status(h.to_actor, handoff_id)
            assert status == 200
            revision = int(doc["revision"])
            assert revision >= self.seen_revision.get(handoff_id, 0), f"{handoff_id}: revision went back"
            self.seen_revision[handoff_id] = revision
            record = doc["record"]
            # at_most_one_live_claim, attempt_count_moves_only_with_new_claim and
            # completed_stays_completed read the same record, so they share this request.
            self._one_live_claim(handoff_id, record)
            self._attempts_move_with_claims(handoff_id, record)
            self._completed_stays(handoff_id, record)

    @invariant()
    def identical_replays_return_identical_receipts(self) -> None:
        """A command id answers with one receipt, byte for byte, however often it is sent (§5.1)."""
        for command_id, answers in self.receipts.items():
            assert all(a == answers[0] for a in answers), f"command {command_id} got different receipts: {answers}"

    def _one_live_claim(self, handoff_id: str, record: Mapping[str, Any]) -> None:
        """At most one live claim per handoff: the record's claim is the model's (§4.4)."""
        h = self.model.handoff(handoff_id)
        assert h is not None
        assert record["claim_id"] == h.claim_id, f"{handoff_id}: claim {record['claim_id']}, model {h.claim_id}"
        if record["status"] == "pending":
            assert record["claim_id"] is None

    def _attempts_move_with_claims(self, handoff_id: str, record: Mapping[str, Any]) -> None:
        """attempt_count changes only when a new claim begins (§4.3)."""
        now = (int(record["attempt_count"]), record["claim_id"])
        before = self.seen_attempts.get(handoff_id)
        if before is not None and now[0] != before[0]:
            assert now[0] > before[0] and now[1] != before[1], f"{handoff_id}: attempt_count moved without a new claim"
        self.seen_attempts[handoff_id] = now

    def _completed_stays(self, handoff_id: str, record: Mapping[str, Any]) -> None:
        """A completed handoff stays completed, with the same evidence (§2.1)."""
        if handoff_id in self.completed:
            assert record["status"] == "completed", f"{handoff_id} left completed"
        if record["status"] == "completed":
            self.completed.add(handoff_id)

    @invariant()
    def each_actor_sees_what_the_model_allows(self) -> None:
        """Visibility per actor (handoff notes §8.1): status, resources, mailbox, snapshot, feeds."""
        base = f"/v1/projects/{self.wire.project}"
        mine = self.wire.prefix
        to_target = self.seq_map.get
        for actor in ACTORS:
            client = self.wire.clients[actor]
            for handoff_id in self._handoff_ids():
                want = read_status(self.model, actor, handoff_id)
                status, code, doc = self._status(actor, handoff_id)
                assert (status, code) == (want.http, want.code), f"{actor} status of {handoff_id}"
                if status == 200:
                    assert doc["revision"] == want.body["revision"]  # type: ignore[index]
                    self._same_record(doc["record"], want.body["record"], f"{actor} sees {handoff_id}")  # type: ignore[index]
            for (kind, rid) in self.model.resources:
                want = read_resource(self.model, actor, kind, rid)
                status, code, doc = _answer(client.get(f"{base}/resources/{kind}/{rid}"))
                doc = self.wire.incoming(doc)
                assert (status, code) == (want.http, want.code), f"{actor} reading {kind}/{rid}"
                if status == 200:
                    assert doc["revision"] == want.body["revision"]  # type: ignore[index]
                    self._same_record(doc["state"]["body"], want.body["body"], f"{actor} reads {kind}/{rid}")  # type: ignore[index]
            for box in ("inbox", "outbox"):
                status, _, doc = _answer(client.get(f"{base}/handoffs", params={"box": box, "limit": 100}))
                doc = self.wire.incoming(doc)
                assert status == 200
                got = [(e["project_seq"], e["revision"], e["record"]["handoff_id"]) for e in doc["assignments"]
                       if f"-{mine}-" in e["record"]["handoff_id"]]
                want_rows = [(to_target(seq), rev, hid) for seq, rev, hid in read_mailbox(self.model, actor, box)]
                assert got == want_rows[: len(got)] and len(got) == min(len(want_rows), 100), f"{actor} {box}"
            status, _, doc = _answer(client.get(f"{base}/snapshot"))
            assert status == 200
            got_snapshot = [(r["resource"]["kind"], r["resource"]["id"], r["revision"]) for r in doc["resources"]
                            if f"-{mine}-" in r["resource"]["id"]]
            assert got_snapshot == read_snapshot(self.model, actor), f"{actor} snapshot"
            for materialized in (False, True):
                path = f"{base}/changes/materialized" if materialized else f"{base}/changes"
                status, _, doc = _answer(client.get(path, params={
                    "project_epoch": self.epoch, "after_seq": self.start_seq, "limit": 10_000}))
                assert status == 200
                entries = [e["change"] if materialized else e for e in doc["entries"]]
                got_feed = [(e["seq"], e["resource"]["kind"], e["resource"]["id"], e["revision"]) for e in entries
                            if f"-{mine}-" in e["resource"]["id"]]
                want_feed = [(to_target(seq), k, rid, rev) for seq, k, rid, rev in
                             read_changes(self.model, actor, materialized=materialized)]
                assert got_feed == want_feed, f"{actor} {'materialized ' if materialized else ''}feed"


def lifecycle_against(factory: Callable[[], Wire]) -> type[HandoffLifecycle]:
    """The machine bound to another wire (a URL, a variant of the reference)."""

    class Bound(HandoffLifecycle):
        def __init__(self) -> None:
            global _wire_factory
            saved, _wire_factory = _wire_factory, factory
            try:
                super().__init__()
            finally:
                _wire_factory = saved

    Bound.__name__ = Bound.__qualname__ = "HandoffLifecycle"
    return Bound


def bench_machines(steps: int, seed: int) -> None:
    """Print state-machine steps per second, beside the model alone as the baseline."""
    import random

    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    counted = {"steps": 0}

    class Counted(HandoffLifecycle):
        @invariant()
        def count_steps(self) -> None:  # invariants run once after each step (and after setup)
            counted["steps"] += 1

    rounds = max(1, steps // 25)
    started = time.perf_counter()
    run_state_machine_as_test(Counted, settings=settings(
        max_examples=rounds, stateful_step_count=25, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck)))
    took = time.perf_counter() - started
    # Baseline: the model alone applying the same number of random commands.
    rng = random.Random(seed)
    state = LedgerState()
    for actor in ACTORS:
        state = state.with_member(actor, "writer")
    base_started = time.perf_counter()
    _, state = apply(state, Command(actor="agent-a", operation=Op.SESSION_CREATE, command_id="c0",
                                    resource_id="s", payload={"session_id": "s", "source_id": None, "topic": "t"}))
    for n in range(counted["steps"]):
        actor, receiver = rng.sample(WRITERS, 2)
        _, state = apply(state, Command(actor=actor, operation=Op.SEND, command_id=f"c{n + 1}",
                                        resource_id=f"h{n}", payload={"handoff_id": f"h{n}", "session_id": "s",
                                                                      "to_actor": receiver}))
    base = time.perf_counter() - base_started
    print(f"state machine: {counted['steps']} steps in {took:.2f} s = {counted['steps'] / took:.0f} steps/s "
          f"(each step: one write plus every invariant read by 4 actors)")
    print(f"baseline (the model alone, same number of writes): {counted['steps'] / max(base, 1e-9):.0f} steps/s; "
          f"ratio {took / max(base, 1e-9):.0f}x")
