"""What every state machine shares: the target and the model side by side, and the invariants
about handoff records, each named as the fact it checks.

Every write goes to the target and to the model (``model.apply``); the target's answer must be
the model's (status, error code, and the receipt's revision, resource, actor, ``project_seq``
and ``committed_at_ms``), or the rule fails. After every step the invariants below hold. They
are predicates over the step's ``StepReads``, read once before any invariant runs (in
``check_invariants``): the handoffs the step wrote (one typed status read each), plus one other
handoff in turn, so a handoff changed behind the machine's back is caught within a few steps,
beside what the previous read of each showed. Invariants send no request and keep no books;
``teardown`` reads every handoff and asks them once more.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, invariant, precondition, rule

from simulations.machines._hot import LeanInvariants
from simulations.machines.wire import ACTORS, WRITERS, Wire
from simulations.model import Answer, Command, Handoff, LedgerState, Op, Status, apply
from simulations.plan import READER

__all__ = ["CreatingMachine", "LedgerMachine", "Seen", "StepReads"]

_ROUTES = {
    Op.SESSION_CREATE: "sessions",
    Op.FACT_CREATE: "facts",
    Op.CONTEXT_CREATE: "handoff-contexts",
    Op.SEND: "handoffs",
}
_KINDS = {Op.SESSION_CREATE: "session", Op.FACT_CREATE: "fact", Op.CONTEXT_CREATE: "handoff_context"}  # else handoff
SOURCES = ("project:sim", None, "project:other")


@dataclass(frozen=True, slots=True)
class Seen:
    """What the reads of one handoff before a step showed."""

    revision: int  # the highest revision read
    record: Mapping[str, Any]  # the last record read
    completed: bool  # whether any read showed it completed


@dataclass(frozen=True, slots=True)
class StepReads:
    """The handoff records read once after a step, and what the reads before it showed of each."""

    records: Mapping[str, Mapping[str, Any]] = field(default_factory=lambda: MappingProxyType({}))
    revisions: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    # Handoffs among ``records`` a write was refused on this step: for them the one fact to report
    # is ``refused_writes_change_nothing``, which compares them whole.
    refused: frozenset[str] = frozenset()
    before: Mapping[str, Seen] = field(default_factory=lambda: MappingProxyType({}))

    def written(self) -> list[tuple[str, Mapping[str, Any], Seen | None]]:
        """``(handoff, record, what was seen before)`` for the records read but the refused ones."""
        return [(h, r, self.before.get(h)) for h, r in self.records.items() if h not in self.refused]


class LedgerMachine(LeanInvariants):
    """The target beside the model; subclasses add the rules of one kind of traffic."""

    sessions = Bundle("sessions")
    # How the machine reaches a ledger; ``bound_to`` swaps it (a URL, a broken variant).
    wire_factory: ClassVar[Callable[[], Wire]] = staticmethod(Wire.embedded)
    # Whether each step also reads one handoff it did not write (in turn), so that a record
    # changed behind the machine's back is caught within a few steps.
    audits: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.wire = type(self).wire_factory()
        self.model = LedgerState()
        for actor in ACTORS:
            self.model = self.model.with_member(actor, "reader" if actor == READER else "writer")
        self.ids = itertools.count(1)
        self.claims: dict[str, list[str]] = {}
        self.seq_map: dict[int, int] = {}  # model project_seq -> target project_seq
        self.first_receipt: dict[str, Any] = {}  # command_id -> the first receipt answered for it
        self.replays_differ: list[str] = []
        # What the record invariants read: the handoffs written since they last looked.
        self.touched: set[str] = set()
        self.touched_resources: set[tuple[str, str]] = set()  # (kind, id) written: for visibility
        self.refused: set[str] = set()  # handoffs a write was refused on since the records were read
        self.reads = StepReads()  # what the record invariants look at: the last step's reads
        self.seen: dict[str, Seen] = {}  # handoff -> what all reads so far showed
        self._generation = 0
        self._read_generation = -1
        self._audit = 0  # round robin over the handoffs not touched
        self._writes = 0  # writes sent: a read shared between invariants is valid until the next
        self._shared: dict[tuple[str, str], tuple[int, str | None, Any]] = {}  # (actor, handoff) -> read
        self._shared_at: tuple[int, int | None] = (-1, None)  # (writes, target clock) of those reads
        self._afresh = False  # teardown forgot the steps' reads: those since are its own
        self._of_model: LedgerState | None = None  # the model state _by_status is of
        self._handoffs: dict[str, tuple[object, Handoff]] = {}  # id -> (the model's resource, its record)
        self._by_status: dict[Status, list[str]] = {}
        self.epoch, self.start_seq = self._head()

    def teardown(self) -> None:
        try:
            if sys.exc_info()[1] is not None:
                return  # a step already failed: that failure is the report, not a second one
            self.touched |= set(self.handoff_ids())
            self.forget_reads()
            self.read_step()
            for check in (self.revisions_only_grow, self.at_most_one_live_claim,
                          self.attempt_count_moves_only_with_new_claim, self.completed_stays_completed,
                          self.records_are_the_models):
                check()
        finally:
            self.wire.close()

    # -- plumbing -------------------------------------------------------------------------------

    def new_id(self, kind: str) -> str:
        return f"{kind}-{self.wire.prefix}-{next(self.ids)}"

    def base(self) -> str:
        return f"/v1/projects/{self.wire.project}"

    def _head(self) -> tuple[str, int]:
        status, _, doc = self.wire.request(READER, "GET", f"{self.base()}/snapshot")
        assert status == 200, f"snapshot answered {status}"
        return str(doc["project_epoch"]), int(doc["at_seq"])

    def handoff_ids(self) -> list[str]:
        return [rid for (kind, rid) in self.model.resources if kind == "handoff"]

    def _model_now(self) -> None:
        if self._of_model is not self.model:
            self._of_model, self._by_status = self.model, {}

    def modelled(self, handoff_id: str) -> Handoff | None:
        """The model's record of a handoff, built once per version of it (every invariant and
        precondition asks; a write leaves the other resources of the model as they were)."""
        resource = self.model.resources.get(("handoff", handoff_id))
        if resource is None:
            return None
        known = self._handoffs.get(handoff_id)
        if known is None or known[0] is not resource:
            h = self.model.handoff(handoff_id)
            assert h is not None
            known = self._handoffs[handoff_id] = (resource, h)
        return known[1]

    def read_status(self, actor: str, handoff_id: str) -> tuple[int, str | None, Any]:
        """``actor``'s typed status read of a handoff. Invariants that need the same read
        share one until the next write or clock move: a second identical read proves nothing
        the first did not."""
        at = (self._writes, self.wire.now_ms())
        if at != self._shared_at:
            self._shared, self._shared_at = {}, at
        got = self._shared.get((actor, handoff_id))
        if got is None:
            got = self._shared[(actor, handoff_id)] = self.wire.request(
                actor, "GET", f"{self.base()}/handoffs/{handoff_id}")
        return got

    def forget_reads(self) -> None:
        """Teardown reads afresh: a target without a clock the kit sets (a URL) may have moved
        since the last step's reads although nothing was written. Once: the reads a subclass's
        teardown makes afterwards are fresh, and this class's teardown shares them."""
        if not self._afresh:
            self._shared, self._shared_at = {}, (-1, None)
            self._afresh = True

    def shared_status(self, handoff_id: str) -> tuple[int, str | None, Any] | None:
        """A participant's status read of the handoff made since the last write, if any."""
        h = self.modelled(handoff_id)
        if h is None or (self._writes, self.wire.now_ms()) != self._shared_at:
            return None
        return self._shared.get((h.to_actor, handoff_id)) or self._shared.get((h.from_actor, handoff_id))

    def record_reader(self, handoff_id: str) -> str:
        """Who reads a handoff for the record invariants: its receiver (a subclass may pick the
        participant whose read it makes anyway)."""
        h = self.modelled(handoff_id)
        assert h is not None
        return h.to_actor

    def write(self, operation: Op, actor: str, resource_id: str, payload: Mapping[str, Any],
              expected_revision: int | None = None, command_id: str | None = None) -> Command:
        """Send one write to the target and the model; their answers must agree."""
        cmd = Command(actor=actor, operation=operation, command_id=command_id or self.new_id("cmd"),
                      resource_id=resource_id, payload=dict(payload), expected_revision=expected_revision,
                      now_ms=self.wire.now_ms())
        expected, self.model = apply(self.model, cmd)
        if operation in _ROUTES:
            path = f"{self.base()}/{_ROUTES[operation]}"
            body: dict[str, Any] = {"command_id": cmd.command_id, "payload": dict(cmd.payload)}
        else:
            path = f"{self.base()}/handoffs/{resource_id}/{operation.removeprefix('handoff.')}"
            body = {"command_id": cmd.command_id, "expected_revision": expected_revision,
                    "payload": dict(cmd.payload)}
        self._writes += 1
        self._compare(cmd, expected, self.wire.request(actor, "POST", path, body))
        kind = _KINDS.get(operation, "handoff")
        self.touched_resources.add((kind, resource_id))
        if kind == "handoff":
            self.touched.add(resource_id)
            if expected.receipt is None and self.modelled(resource_id) is not None:
                self.refused.add(resource_id)
        self._generation += 1
        return cmd

    def _compare(self, cmd: Command, expected: Answer, got: tuple[int, str | None, Any]) -> None:
        status, code, doc = got
        what = f"{cmd.actor} {cmd.operation} {cmd.resource_id} (command {cmd.command_id})"
        assert (status, code) == (expected.http, expected.code), (
            f"{what}: the model answers {expected.http} {expected.code}, the target {status} {code}")
        receipt = expected.receipt
        if receipt is None:
            return
        first = self.first_receipt.setdefault(cmd.command_id, doc)
        if first != doc:
            self.replays_differ.append(f"command {cmd.command_id}: {first} then {doc}")
        assert doc["command_id"] == cmd.command_id and doc["revision"] == receipt.revision, (
            f"{what}: receipt revision {doc.get('revision')}, the model says {receipt.revision}")
        assert doc["resource"] == {"kind": receipt.kind, "id": receipt.resource_id}, f"{what}: receipt resource"
        assert doc["actor_id"] == receipt.actor, f"{what}: receipt actor"
        assert receipt.project_seq is not None  # the whole-project view always knows it
        known = self.seq_map.setdefault(receipt.project_seq, int(doc["project_seq"]))
        assert known == doc["project_seq"], (
            f"{what}: a replay must return the stored receipt (project_seq {known}, got {doc['project_seq']})")
        if receipt.committed_at_ms is not None:
            assert doc["committed_at_ms"] == receipt.committed_at_ms, f"{what}: committed_at_ms"

    def claim(self, handoff_id: str, choice: str) -> str:
        """The handoff's current claim, its first (old) one, or a new one."""
        h = self.modelled(handoff_id)
        old = self.claims.setdefault(handoff_id, [])
        if choice == "current" and h is not None and h.claim_id is not None:
            return h.claim_id
        if choice == "old" and old:
            return old[0]
        claim = self.new_id("claim")
        old.append(claim)
        return claim

    def revision(self, handoff_id: str, stale: bool = False) -> int:
        """The handoff's revision, or with ``stale`` one the target must refuse."""
        h = self.modelled(handoff_id)
        current = 1 if h is None else h.revision
        return max(1, current - 1) if stale and current > 1 else current + (1 if stale else 0)

    def receiver(self, handoff: str, wrong_actor: bool = False) -> str:
        h = self.modelled(handoff)
        if h is None:
            return WRITERS[1]
        return h.from_actor if wrong_actor else h.to_actor

    def check_invariants(self, *args: Any, **kwargs: Any) -> None:
        # Hypothesis calls this after every step: the step's state is read here, once, before
        # any invariant looks at it.
        self.read_step()
        super().check_invariants(*args, **kwargs)

    def read_step(self) -> None:
        """Read the handoffs written since the last look, and one more in turn, into ``reads``;
        what the reads before showed of each moves to ``reads.before`` (skipped when nothing
        was written and nothing is due)."""
        if self._read_generation == self._generation and not self.touched:
            return
        self._read_generation = self._generation
        wanted = set(self.touched)
        others = [h for h in self.handoff_ids() if h not in wanted] if self.audits else []
        if others:
            wanted.add(others[self._audit % len(others)])
            self._audit += 1
        self.touched.clear()
        refused, self.refused = self.refused, set()
        records: dict[str, Mapping[str, Any]] = {}
        revisions: dict[str, int] = {}
        for handoff_id in sorted(wanted):
            if self.modelled(handoff_id) is None:
                continue
            reader = self.record_reader(handoff_id)
            status, _, doc = self.shared_status(handoff_id) or self.read_status(reader, handoff_id)
            assert status == 200, f"{reader} reading {handoff_id}: {status}"
            records[handoff_id], revisions[handoff_id] = doc["record"], int(doc["revision"])
        before = {h: self.seen[h] for h in records if h in self.seen}
        self.reads = StepReads(records=records, revisions=revisions, refused=frozenset(refused & records.keys()),
                               before=before)
        for h, record in records.items():
            if h in refused:
                continue  # reported by refused_writes_change_nothing; not what the handoff was
            seen = before.get(h)
            self.seen[h] = Seen(revision=max(revisions[h], seen.revision if seen else 0), record=record,
                                completed=record["status"] == "completed" or (seen is not None and seen.completed))

    # -- the record invariants: each one fact over ``reads``, reported under its own name --------------

    @invariant()
    def revisions_only_grow(self) -> None:
        """AM-HL-REV-1: a handoff's revision never goes back, and is the model's."""
        for handoff_id, _, before in self.reads.written():
            revision = self.reads.revisions[handoff_id]
            assert before is None or revision >= before.revision, f"{handoff_id}: revision went back"
            h = self.modelled(handoff_id)
            assert h is not None and revision == h.revision, f"{handoff_id}: revision {revision}, model {h and h.revision}"

    @invariant()
    def at_most_one_live_claim(self) -> None:
        """AM-HO-3, AM-HL-CAS-3: a handoff has at most one live claim. A pending handoff holds
        none, an accepted one names the claim that holds it, and a new claim replaces another
        only once that one is no longer live: it failed, or its lease had run out when the new
        one began (its heartbeat time). A step writes at most one transition of a handoff, so the
        read before it shows the claim that was replaced."""
        for handoff_id, record, before in self.reads.written():
            claim = record["claim_id"]
            if record["status"] == "pending":
                assert claim is None, f"{handoff_id}: a pending handoff holds claim {claim}"
            elif record["status"] == "accepted":
                assert claim is not None, f"{handoff_id}: accepted, but no claim holds it"
            old = None if before is None else before.record
            if old is None or old["claim_id"] in (None, claim) or old["outcome"] == "failed":
                continue
            began, expired = record["claim_heartbeat_at_ms"], old["claim_expires_at_ms"]
            assert expired is None or (began is not None and began >= expired), (
                f"{handoff_id}: claim {claim} began at {began} while claim {old['claim_id']} was live "
                f"until {expired}")

    @invariant()
    def attempt_count_moves_only_with_new_claim(self) -> None:
        """AM-HO-5, AM-HL-ACC-3: attempt_count changes only when a new claim begins, by one."""
        for handoff_id, record, before in self.reads.written():
            if before is None:
                continue
            now, then = (int(record["attempt_count"]), record["claim_id"]), (
                int(before.record["attempt_count"]), before.record["claim_id"])
            if now[0] != then[0]:
                assert now[0] == then[0] + 1 and now[1] != then[1], (
                    f"{handoff_id}: attempt_count {then[0]} -> {now[0]} with claim {then[1]} -> {now[1]}")

    @invariant()
    def completed_stays_completed(self) -> None:
        """AM-HL-RET-4: a completed handoff stays completed, with the same evidence."""
        for handoff_id, record, before in self.reads.written():
            if before is not None and before.completed:
                assert record["status"] == "completed", f"{handoff_id} left completed"

    @invariant()
    def records_are_the_models(self) -> None:
        """AM-HO-2, AM-HL-SEND-1: every field of the handoff record is the model's (the lease's
        times for their shape only, when the target's clock is not known)."""
        for handoff_id, record, _ in self.reads.written():
            h = self.modelled(handoff_id)
            assert h is not None
            self.lease_times_match(record, h.body(), f"{handoff_id} is")

    @invariant()
    def refused_writes_change_nothing(self) -> None:
        """AM-HL-CAS-2, AM-HL-REV-1: after a refused write the record is what it was before."""
        for handoff_id in self.reads.refused:
            h = self.modelled(handoff_id)
            if h is None:
                continue
            revision = self.reads.revisions[handoff_id]
            assert revision == h.revision, f"{handoff_id}: revision {revision} after a refused write, model {h.revision}"
            self.lease_times_match(self.reads.records[handoff_id], h.body(), f"{handoff_id} after a refused write")

    @invariant()
    def identical_replays_return_identical_receipts(self) -> None:
        """AM-CMD-2: a command id answers with one receipt, byte for byte, however often it is sent."""
        assert not self.replays_differ, self.replays_differ[0]

    # -- a first session, which every machine's traffic needs -----------------------------------------

    @initialize(target=sessions)
    def first_session(self) -> str:
        session_id = self.new_id("session")
        self.write(Op.SESSION_CREATE, WRITERS[0], session_id,
                   {"session_id": session_id, "source_id": SOURCES[0], "topic": "state machine"})
        return session_id

    def lease_times_match(self, got: Mapping[str, Any], want: Mapping[str, Any], what: str) -> None:
        """Records agree; when the target's clock is unknown, lease times are checked for shape only."""
        if self.wire.now_ms() is not None or "claim_expires_at_ms" not in want:
            assert dict(got) == dict(want), f"{what} as {got}, model {want}"
            return
        times = ("claim_heartbeat_at_ms", "claim_expires_at_ms")
        assert {k: v for k, v in got.items() if k not in times} == {k: v for k, v in want.items() if k not in times}, (
            f"{what} as {got}, model {want}")
        beat, expires = got["claim_heartbeat_at_ms"], got["claim_expires_at_ms"]
        if beat is not None:
            lease_ms = self.model.lease_ms
            assert expires == beat + lease_ms, f"{what}: the lease is not {lease_ms} ms"


class CreatingMachine(LedgerMachine):
    """A machine whose traffic also creates sessions and facts, by any actor (readers refused)."""

    facts = Bundle("facts")

    @precondition(lambda self: sum(k == "session" for k, _ in self.model.resources) < 3)
    @rule(target=LedgerMachine.sessions, actor=st.sampled_from(ACTORS), source=st.sampled_from(SOURCES))
    def create_session(self, actor: str, source: str | None) -> str:
        session_id = self.new_id("session")
        self.write(Op.SESSION_CREATE, actor, session_id, {"session_id": session_id, "source_id": source, "topic": "t"})
        return session_id

    @rule(target=facts, actor=st.sampled_from(ACTORS), session=LedgerMachine.sessions)
    def create_fact(self, actor: str, session: str) -> str:
        fact_id = self.new_id("fact")
        self.write(Op.FACT_CREATE, actor, fact_id, {"fact_id": fact_id, "session_id": session, "content": "result"})
        return fact_id

    def send_handoff(self, sender: str, receiver: str, session: str, with_context: bool,
                     **fields: object) -> str:
        """A send, after writing its context when ``with_context``; returns the handoff id."""
        handoff_id = self.new_id("handoff")
        payload: dict[str, Any] = {"handoff_id": handoff_id, "session_id": session, "to_actor": receiver, **fields}
        if with_context:
            context_id = self.new_id("context")
            self.write(Op.CONTEXT_CREATE, sender, context_id, {
                "context_id": context_id, "handoff_id": handoff_id, "session_id": session,
                "to_actor": receiver, "content": "# packet"})
            payload["context_id"] = context_id
        self.write(Op.SEND, sender, handoff_id, payload)
        return handoff_id

    def with_status(self, status: Status) -> list[str]:
        """The handoffs in ``status``, once per model state (preconditions ask at every draw)."""
        self._model_now()
        found = self._by_status.get(status)
        if found is None:
            found = self._by_status[status] = sorted(
                h for h in self.handoff_ids() if (modelled := self.modelled(h)) is not None and modelled.status is status)
        return found

    def write_and_return_result(self, handoff: str, outcome: str) -> str:
        """The usual path: the receiver writes its result in the handoff's session, then returns
        it with its current claim and revision; returns the fact id."""
        h = self.modelled(handoff)
        assert h is not None
        fact_id = self.new_id("fact")
        self.write(Op.FACT_CREATE, h.to_actor, fact_id, {"fact_id": fact_id, "session_id": h.session_id,
                                                         "content": "done"})
        self.write(Op.RETURN, h.to_actor, handoff, {"claim_id": self.claim(handoff, "current"),
                                                    "result_fact_id": fact_id, "outcome": outcome}, h.revision)
        return fact_id
