"""The state machines against the embedded reference, over a socket, and against broken ledgers,
each caught by the invariant that names its fault."""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from aidememo_ref import ReferenceLedger
from aidememo_ref._commands import Op
from aidememo_ref._ledger import Write, decide
from aidememo_ref._records import Handoff, Status
from simulations.machines import (
    ActorVisibility,
    ConcurrentSenders,
    HandoffLifecycle,
    LedgerMachine,
    RacingAccepters,
    StaleWriters,
    Wire,
    bound_to,
)
from simulations.machines.base import Seen, StepReads
from simulations.machines.wire import WRITERS
from simulations.plan import READER
from simulations.targets import EmbeddedTarget, Reply

from .served import served

# The default run: every machine under the profile's budget (--hypothesis-profile dev|ci|deep).
TestHandoffLifecycle = HandoffLifecycle.TestCase
TestConcurrentSenders = ConcurrentSenders.TestCase
TestRacingAccepters = RacingAccepters.TestCase
TestStaleWriters = StaleWriters.TestCase
TestActorVisibility = ActorVisibility.TestCase


def _double_count(database: Path, *, clock: Any, scheduler: Any) -> ReferenceLedger:
    """The reference with one sequential bug in its rules: an accept counts two attempts."""

    def broken(command: Any, actor: str, view: Any, now_ms: int) -> Write:
        write = decide(command, actor, view, now_ms)
        record = write.record
        if command.op is Op.ACCEPT and isinstance(record, Handoff) and record.status is Status.ACCEPTED:
            return Write.of(write.kind, write.resource_id, replace(record, attempt_count=record.attempt_count + 1))
        return write

    return ReferenceLedger(database, clock=clock, scheduler=scheduler, decide=broken)


class _Doctored(EmbeddedTarget):
    """The reference behind a wire that breaks one rule in what it answers or what it does."""

    def __init__(self, fault: str) -> None:
        super().__init__(WRITERS, seed=0)
        self.fault = fault
        self.reads: dict[str, int] = {}
        self.last_write_ok: dict[str, bool] = {}  # handoff path -> did the last write on it commit
        self.refused_since_read: set[str] = set()  # handoff paths refused a write since last read

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        reply = super().request(actor, method, path, body)
        if method == "POST" and body is not None:
            return self._after_write(actor, path, body, reply)
        if "?" in path:
            return self._listing(path, reply)
        if "/handoffs/" in path:
            return self._status(actor, path, reply)
        return reply

    def _after_write(self, actor: str, path: str, body: bytes, reply: Reply) -> Reply:
        doc = reply.json()
        handoff_path = path.rsplit("/", 1)[0]
        self.last_write_ok[handoff_path] = reply.status == 200
        if reply.status != 200:
            self.refused_since_read.add(handoff_path)
        refused = isinstance(doc, dict) and isinstance(doc.get("error"), dict) and doc["error"]["code"] == "stale_revision"
        if self.fault == "stale write lands" and refused:
            # The refusal is answered, yet the write is applied at the current revision.
            current = super().request(actor, "GET", path.rsplit("/", 1)[0]).json()
            sent = json.loads(body)
            sent |= {"command_id": f"{sent['command_id']}-again", "expected_revision": current["revision"]}
            super().request(actor, "POST", path, json.dumps(sent).encode())
        return reply

    def _listing(self, path: str, reply: Reply) -> Reply:
        if self.fault == "inbox drops one" and "box=inbox" in path and reply.status == 200:
            doc = reply.json()
            doc["assignments"] = doc["assignments"][1:]
            return Reply(200, json.dumps(doc).encode())
        return reply

    def _status(self, actor: str, path: str, reply: Reply) -> Reply:
        if self.fault == "status leaks" and actor == READER and reply.status == 403:
            # The reader is shown what only the participants may see.
            return next((r for r in (super(_Doctored, self).request(a, "GET", path) for a in WRITERS)
                         if r.status == 200), reply)
        if reply.status != 200:
            return reply
        doc = reply.json()
        record = doc["record"]
        refused = path in self.refused_since_read
        self.refused_since_read.discard(path)
        handoff = f"{path} {record['status']}"  # the path names the project: examples stay apart
        self.reads[handoff] = self.reads.get(handoff, 0) + 1  # reads of it in this status
        if self.fault == "claim forgotten" and record["status"] == "accepted":
            record["claim_id"] = None
        elif (self.fault == "claim taken over" and record["status"] == "accepted" and self.reads[handoff] > 1
              and not refused):
            record["claim_id"] = "claim-intruder"  # beside the receiver's, which is still live
        elif (self.fault == "completed reopens" and record["status"] == "completed" and self.reads[handoff] > 1
              and not refused):  # after a refusal, refused_writes_change_nothing would speak first
            record["status"] = "accepted"
        elif (self.fault == "revision goes back" and doc["revision"] > 1 and self.reads[handoff] % 2 == 0
              and self.last_write_ok.get(path)):
            doc["revision"] -= 1
        elif self.fault == "outcome dropped" and record["outcome"] is not None:
            record["outcome"] = None
        else:
            return reply
        return Reply(200, json.dumps(doc).encode())


_DOCTORED: dict[str, _Doctored] = {}


def _doctored(fault: str) -> Callable[[], Wire]:
    """One doctored ledger per fault, a fresh project per example (as ``Wire.embedded`` does)."""

    def wire() -> Wire:
        target = _DOCTORED.get(fault)
        if target is None:
            target = _DOCTORED[fault] = _Doctored(fault)
        else:
            target.next_project()
        return Wire(target, prefix="x", shared=True)

    return wire


INVARIANTS = {name for machine in (HandoffLifecycle, ConcurrentSenders, RacingAccepters, StaleWriters,
                                    ActorVisibility) for name, _ in inspect.getmembers(machine)
              if hasattr(getattr(machine, name), "hypothesis_stateful_invariant")}


def _failing_invariant(machine: type[LedgerMachine], wire: Callable[[], Wire]) -> str:
    """Run the machine against a broken ledger until it fails; the invariant that failed."""
    with pytest.raises(AssertionError) as caught:
        # Finding is the point here; shrinking would only cost time.
        run_state_machine_as_test(bound_to(machine, wire), settings=settings(
            max_examples=300, database=None, phases=[Phase.generate], deadline=None, derandomize=True))
    frames = [entry.name for entry in caught.traceback]
    failed = [name for name in frames if name in INVARIANTS]
    assert failed, f"the failure came from a rule, not an invariant: {caught.value}"
    return failed[-1]  # after a step, or in the final full check of teardown


@pytest.mark.parametrize("machine, fault, invariant", [
    (HandoffLifecycle, "claim forgotten", "at_most_one_live_claim"),
    (HandoffLifecycle, "claim taken over", "at_most_one_live_claim"),
    (HandoffLifecycle, "completed reopens", "completed_stays_completed"),
    (RacingAccepters, "outcome dropped", "records_are_the_models"),
    (RacingAccepters, "revision goes back", "revisions_only_grow"),
    (StaleWriters, "stale write lands", "refused_writes_change_nothing"),
    (ActorVisibility, "status leaks", "status_reads_follow_participation"),
    (ActorVisibility, "inbox drops one", "mailboxes_list_exactly_their_handoffs"),
])
def test_each_fault_is_reported_under_the_invariant_it_breaks(
        machine: type[LedgerMachine], fault: str, invariant: str) -> None:
    assert _failing_invariant(machine, _doctored(fault)) == invariant


def test_a_rule_bug_in_the_reference_is_caught_under_its_invariant() -> None:
    assert _failing_invariant(HandoffLifecycle, lambda: Wire.embedded(_double_count)) == \
        "attempt_count_moves_only_with_new_claim"


def _reads(old: dict[str, Any] | None, new: dict[str, Any]) -> Any:
    """A machine as its record invariants see it: the step's reads, nothing else."""
    base = {"status": "accepted", "claim_id": "c1", "claim_heartbeat_at_ms": 1_000,
            "claim_expires_at_ms": 121_000, "attempt_count": 1, "outcome": None}
    before = {} if old is None else {"h": Seen(revision=2, record=base | old, completed=False)}
    return SimpleNamespace(reads=StepReads(records={"h": base | new}, revisions={"h": 3}, before=before))


@pytest.mark.parametrize("old, new, holds", [
    (None, {"status": "pending", "claim_id": None}, True),
    (None, {"status": "pending"}, False),  # a pending handoff holding a claim
    (None, {"claim_id": None}, False),  # accepted, held by no claim
    ({}, {"claim_heartbeat_at_ms": 60_000}, True),  # the same claim, renewed
    ({}, {"claim_id": "c2", "claim_heartbeat_at_ms": 60_000, "attempt_count": 2}, False),  # c1 still live
    ({}, {"claim_id": "c2", "claim_heartbeat_at_ms": 121_000, "attempt_count": 2}, True),  # c1 expired then
    ({"outcome": "failed"}, {"claim_id": "c2", "claim_heartbeat_at_ms": 60_000, "attempt_count": 2}, True),
])
def test_at_most_one_live_claim_is_a_predicate_over_the_steps_reads(
        old: dict[str, Any] | None, new: dict[str, Any], holds: bool) -> None:
    """The invariant reads nothing but ``reads`` (no model, no wire) and holds exactly when no two
    claims were live at once."""
    machine = _reads(old, new)
    if holds:
        LedgerMachine.at_most_one_live_claim(machine)
    else:
        with pytest.raises(AssertionError):
            LedgerMachine.at_most_one_live_claim(machine)


def test_invariants_send_no_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The step's state is read before the invariants run; they only look at it."""
    sent: list[str] = []
    looking = [False]
    record_invariants = [name for name in INVARIANTS if hasattr(LedgerMachine, name)]
    request = Wire.request

    def counted(self: Wire, *args: Any, **kwargs: Any) -> Any:
        if looking[0]:
            sent.append(str(args[2]))
        return request(self, *args, **kwargs)

    monkeypatch.setattr(Wire, "request", counted)

    class Counting(HandoffLifecycle):
        def check_invariants(self, *args: Any, **kwargs: Any) -> None:
            self.read_step()
            looking[0] = True
            try:
                for name in record_invariants:
                    getattr(self, name)()
            finally:
                looking[0] = False

    run_state_machine_as_test(Counting, settings=settings(max_examples=5, stateful_step_count=10, database=None,
                                                          derandomize=True))
    assert len(record_invariants) >= 7 and sent == []


def test_rules_that_cannot_apply_are_never_drawn() -> None:
    """Preconditions, not rules that silently do nothing: each guarded rule has its precondition."""
    for machine, name in [(HandoffLifecycle, "return_own_result"), (HandoffLifecycle, "stale_accept"),
                          (StaleWriters, "write_what_was_read"), (StaleWriters, "read"),
                          (ActorVisibility, "accept"), (ActorVisibility, "complete")]:
        rule = getattr(getattr(machine, name), "hypothesis_stateful_rule")
        assert rule.preconditions, f"{machine.__name__}.{name} has no precondition"


@pytest.mark.parametrize("machine", [HandoffLifecycle, ActorVisibility])
def test_the_machines_run_against_a_server_by_url(machine: type[LedgerMachine],
                                                  served: tuple[str, dict[str, str]]) -> None:
    url, tokens = served
    run_state_machine_as_test(bound_to(machine, lambda: Wire.over_http(url, "p", tokens)),
                              settings=settings(max_examples=4, stateful_step_count=12, database=None))


def test_the_machine_renames_actors_of_a_server_that_has_its_own(tmp_path: Path) -> None:
    with served(ReferenceLedger(tmp_path / "ledger.sqlite"), ("alice", "bob", "carol", READER)) as (url, tokens):
        run_state_machine_as_test(bound_to(HandoffLifecycle, lambda: Wire.over_http(url, "p", tokens)),
                                  settings=settings(max_examples=3, stateful_step_count=12, database=None))


@pytest.mark.skipif(not os.environ.get("AIDEMEMO_SIM_CONFIG"),
                    reason="set AIDEMEMO_SIM_CONFIG=target.toml to run the state machines against your server")
@pytest.mark.parametrize("machine", [HandoffLifecycle, ConcurrentSenders, RacingAccepters, StaleWriters,
                                     ActorVisibility])
def test_the_machines_against_the_configured_target(machine: type[LedgerMachine]) -> None:
    from simulations.targets import target_from_config

    target = target_from_config(Path(os.environ["AIDEMEMO_SIM_CONFIG"]), actors=3)
    bound = machine if target is None else bound_to(
        machine, lambda: Wire.over_http(target.url, target.project, dict(target.tokens)))
    run_state_machine_as_test(bound)


class _Counting(EmbeddedTarget):
    """The reference, remembering every request it answered (actor, method, path)."""

    def __init__(self) -> None:
        super().__init__(WRITERS, seed=0)
        self.seen: list[tuple[str, str, str]] = []

    def request(self, actor: str, method: str, path: str, body: bytes | None = None) -> Reply:
        self.seen.append((actor, method, path))
        return super().request(actor, method, path, body)


def _counted_visibility() -> tuple[Any, _Counting]:
    target = _Counting()
    machine = bound_to(ActorVisibility, lambda: Wire(target, prefix="x"))()
    target.seen.clear()  # the machine's own look at the project's head
    return machine, target


def _after_step(machine: Any) -> None:
    for name, _ in inspect.getmembers(type(machine)):
        if name in INVARIANTS:
            getattr(machine, name)()


def _listings(seen: list[tuple[str, str, str]]) -> int:
    return sum(method == "GET" and (path.endswith("/snapshot") or "/changes" in path or "/handoffs?" in path)
               for _, method, path in seen)


def test_a_step_that_committed_nothing_reads_no_listing_and_the_next_one_reads_on() -> None:
    machine, target = _counted_visibility()
    session = machine.first_session()
    _after_step(machine)
    assert _listings(target.seen) == 1
    for _ in range(2):
        before = len(target.seen)
        machine.create_session(actor=READER, source=None)  # the reader may not write: refused
        _after_step(machine)
        assert target.seen[before:] and _listings(target.seen[before:]) == 0, "a refused step read a listing"
    before = len(target.seen)
    machine.create_fact(actor=WRITERS[0], session=session)
    _after_step(machine)
    assert _listings(target.seen[before:]) == 1
    machine.teardown()


def test_teardown_reads_each_handoff_status_once_for_a_participant() -> None:
    machine, target = _counted_visibility()
    session = machine.first_session()
    machine.send(sender=WRITERS[0], receiver=WRITERS[1], session=session, with_context=False)
    handoff = machine.handoff_ids()[0]
    before = len(target.seen)
    machine.teardown()
    participants = [a for a, method, path in target.seen[before:]
                    if method == "GET" and path.endswith(f"/handoffs/{handoff}") and a in WRITERS[:2]]
    assert len(participants) == 1, f"participants' status reads in teardown: {participants}"


@pytest.mark.parametrize("machine", [HandoffLifecycle, ConcurrentSenders, RacingAccepters, StaleWriters,
                                     ActorVisibility])
def test_the_benchs_empty_machine_has_the_machines_shape(machine: type[LedgerMachine]) -> None:
    """The bench's Hypothesis-alone baseline: the same rules with the same strategies and
    targets, as many invariants, and nothing else (no preconditions: they read the machine)."""
    from simulations.machines.bench import empty_like

    def shape(cls: type[Any], marker: str) -> dict[str, tuple[Any, ...]]:
        found = {name: getattr(getattr(cls, name), marker, None) for name in dir(cls)}
        return {name: (tuple(r.targets), tuple(sorted((k, repr(v)) for k, v in r.arguments.items())))
                for name, r in found.items() if r is not None}

    empty = empty_like(machine)
    for marker in ("hypothesis_stateful_rule", "hypothesis_stateful_initialize_rule"):
        assert shape(empty, marker) == shape(machine, marker)
        assert not any(getattr(getattr(empty, name), marker).preconditions for name in shape(empty, marker))
    def invariants(cls: type[Any]) -> list[str]:
        return [name for name in dir(cls) if hasattr(getattr(cls, name), "hypothesis_stateful_invariant")]

    assert invariants(empty) == invariants(machine) != []
