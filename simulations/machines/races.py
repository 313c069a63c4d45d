"""The races STYLE.md names, one machine each: concurrent senders, accepters racing for one
handoff, and stale writers.

A sequential machine races by interleaving: each accepter or writer is a process that reads a
revision, and later writes with the revision it read, while the others write in between, as
agents that read, think and then write do. Each machine adds the invariant its race threatens.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, initialize, invariant, precondition, rule

from simulations.machines.base import LedgerMachine
from simulations.machines.wire import WRITERS
from simulations.model import LEASE_MS, Op
from simulations.plan import READER

__all__ = ["ConcurrentSenders", "RacingAccepters", "StaleWriters"]


class ConcurrentSenders(LedgerMachine):
    """Senders that race for handoff ids: the same id from two senders, retries of one send,
    one command id reused for another send, and sends naming someone else's context."""

    sends = Bundle("sends")  # (command id, sender, handoff id, payload) of sends made

    def __init__(self) -> None:
        super().__init__()
        self.first_sender: dict[str, tuple[str, str]] = {}  # handoff -> (from_actor, to_actor) that won

    def _send(self, sender: str, handoff: str, session: str, receiver: str, context: str | None = None,
              command_id: str | None = None) -> tuple[str, str, str, dict[str, Any]]:
        payload: dict[str, Any] = {"handoff_id": handoff, "session_id": session, "to_actor": receiver}
        if context is not None:
            payload["context_id"] = context
        cmd = self.write(Op.SEND, sender, handoff, payload, command_id=command_id)
        h = self.modelled(handoff)
        if h is not None:
            self.first_sender.setdefault(handoff, (h.from_actor, h.to_actor))
        return cmd.command_id, sender, handoff, payload

    @rule(target=sends, sender=st.sampled_from((*WRITERS, READER)), receiver=st.sampled_from((*WRITERS, READER)),
          session=LedgerMachine.sessions)
    def send(self, sender: str, receiver: str, session: str) -> tuple[str, str, str, dict[str, Any]]:
        return self._send(sender, self.new_id("handoff"), session, receiver)

    @rule(target=sends, sent=sends, sender=st.sampled_from(WRITERS), receiver=st.sampled_from(WRITERS))
    def send_the_same_id(self, sent: tuple[str, str, str, dict[str, Any]], sender: str,
                         receiver: str) -> tuple[str, str, str, dict[str, Any]]:
        """Another sender, a new command, the same handoff id: resource_already_exists once it exists."""
        _, _, handoff, payload = sent
        return self._send(sender, handoff, str(payload["session_id"]), receiver)

    @rule(sent=sends)
    def retry_the_send(self, sent: tuple[str, str, str, dict[str, Any]]) -> None:
        """The identical send again: the stored receipt, or the same refusal."""
        command_id, sender, handoff, payload = sent
        self.write(Op.SEND, sender, handoff, payload, command_id=command_id)

    @rule(sent=sends, session=LedgerMachine.sessions)
    def reuse_the_command_id(self, sent: tuple[str, str, str, dict[str, Any]], session: str) -> None:
        """The send's command id for another handoff: command_conflict when it was stored."""
        command_id, sender, _, payload = sent
        self._send(sender, self.new_id("handoff"), session, str(payload["to_actor"]), command_id=command_id)

    @rule(sender=st.sampled_from(WRITERS), receiver=st.sampled_from(WRITERS), session=LedgerMachine.sessions,
          own=st.booleans())
    def send_with_a_context(self, sender: str, receiver: str, session: str, own: bool) -> None:
        """A context written for one handoff, named by a send of it or of another handoff."""
        handoff, context = self.new_id("handoff"), self.new_id("context")
        self.write(Op.CONTEXT_CREATE, sender, context, {"context_id": context, "handoff_id": handoff,
                                                        "session_id": session, "to_actor": receiver,
                                                        "content": "# packet"})
        self._send(sender, handoff if own else self.new_id("handoff"), session, receiver, context)

    @invariant()
    def the_first_send_wins(self) -> None:
        """AM-TYPED-1: a handoff keeps the sender and receiver of the send that created it."""
        for handoff_id, record in self.reads.records.items():
            if handoff_id in self.first_sender:
                got = (record["from_actor"], record["to_actor"])
                assert got == self.first_sender[handoff_id], f"{handoff_id}: {got}, first send {self.first_sender[handoff_id]}"


class RacingAccepters(LedgerMachine):
    """Processes of the receiver (and one impostor) racing to accept one handoff.

    Each process reads the handoff's revision, and later accepts, heartbeats or returns with
    the revision it read and a claim of its own, while the others act in between; the clock
    moves past the lease now and then, so a new claim may take over.
    """

    PROCESSES = 3

    def __init__(self) -> None:
        super().__init__()
        self.handoff = ""
        self.read_revision = [1] * self.PROCESSES
        self.process_claim = [""] * self.PROCESSES
        self.fact = ""
        self.committed_from: dict[int, list[str]] = {}  # expected revision -> accepts that committed

    @initialize()
    def one_handoff(self) -> None:
        # Its own session: initializers run in no fixed order, so the shared one may not exist yet.
        session = self.new_id("session")
        self.write(Op.SESSION_CREATE, WRITERS[0], session, {"session_id": session, "source_id": None, "topic": "race"})
        self.handoff = self.new_id("handoff")
        self.write(Op.SEND, WRITERS[0], self.handoff, {"handoff_id": self.handoff, "session_id": session,
                                                      "to_actor": WRITERS[1]})
        self.fact = self.new_id("fact")
        self.write(Op.FACT_CREATE, WRITERS[1], self.fact, {"fact_id": self.fact, "session_id": session,
                                                          "content": "result"})
        self.process_claim = [self.new_id("claim") for _ in range(self.PROCESSES)]

    @rule(process=st.integers(0, PROCESSES - 1))
    def read(self, process: int) -> None:
        """A process reads the revision it will write against."""
        status, _, doc = self.wire.request(WRITERS[1], "GET", f"{self.base()}/handoffs/{self.handoff}")
        assert status == 200
        self.read_revision[process] = int(doc["revision"])

    def _process_writes(self, op: Op, process: int, payload: Mapping[str, Any], actor: str = WRITERS[1]) -> None:
        expected = self.read_revision[process]
        before = self.modelled(self.handoff)
        cmd = self.write(op, actor, self.handoff, payload, expected)
        after = self.modelled(self.handoff)
        if op is Op.ACCEPT and before is not None and after is not None and after.revision > before.revision:
            self.committed_from.setdefault(expected, []).append(cmd.command_id)

    @rule(process=st.integers(0, PROCESSES - 1), fresh_claim=st.booleans())
    def accept(self, process: int, fresh_claim: bool) -> None:
        if fresh_claim:
            self.process_claim[process] = self.new_id("claim")
        self._process_writes(Op.ACCEPT, process, {"claim_id": self.process_claim[process]})

    @rule(process=st.integers(0, PROCESSES - 1))
    def heartbeat(self, process: int) -> None:
        self._process_writes(Op.HEARTBEAT, process, {"claim_id": self.process_claim[process]})

    @rule(process=st.integers(0, PROCESSES - 1), outcome=st.sampled_from(["succeeded", "failed"]))
    def return_result(self, process: int, outcome: str) -> None:
        self._process_writes(Op.RETURN, process, {"claim_id": self.process_claim[process],
                                                  "result_fact_id": self.fact, "outcome": outcome})

    @rule(process=st.integers(0, PROCESSES - 1))
    def impostor_accepts(self, process: int) -> None:
        """The sender tries to take the handoff it sent: handoff_actor_mismatch (or stale first)."""
        self._process_writes(Op.ACCEPT, process, {"claim_id": self.new_id("claim")}, actor=WRITERS[0])

    @precondition(lambda self: self.wire.can_move_clock)
    @rule(ms=st.sampled_from([1_000, LEASE_MS + 1]))
    def advance_clock(self, ms: int) -> None:
        self.wire.advance(ms)

    @invariant()
    def one_accept_commits_per_revision(self) -> None:
        """AM-HL-CAS-3: of the accepts prepared from one revision, at most one commits."""
        for revision, winners in self.committed_from.items():
            assert len(winners) <= 1, f"{len(winners)} accepts prepared from revision {revision} committed: {winners}"


class StaleWriters(LedgerMachine):
    """Writers that read long ago: their expected revisions fall behind while others write."""

    WRITERS_AT = 3

    def __init__(self) -> None:
        super().__init__()
        self.handoffs_sent: list[str] = []
        self.remembered: dict[tuple[int, str], int] = {}  # (writer, handoff) -> revision it read
        self.facts: dict[str, str] = {}  # handoff -> a fact of its receiver in its session

    @rule(session=LedgerMachine.sessions)
    def send(self, session: str) -> None:
        handoff, fact = self.new_id("handoff"), self.new_id("fact")
        self.write(Op.SEND, WRITERS[0], handoff, {"handoff_id": handoff, "session_id": session, "to_actor": WRITERS[1]})
        self.write(Op.FACT_CREATE, WRITERS[1], fact, {"fact_id": fact, "session_id": session, "content": "result"})
        self.handoffs_sent.append(handoff)
        self.facts[handoff] = fact

    @precondition(lambda self: bool(self.handoffs_sent))
    @rule(data=st.data(), writer=st.integers(0, WRITERS_AT - 1))
    def read(self, data: st.DataObject, writer: int) -> None:
        """A writer looks at a handoff and remembers its revision."""
        handoff = data.draw(st.sampled_from(self.handoffs_sent), label="handoff")
        h = self.modelled(handoff)
        assert h is not None
        self.remembered[(writer, handoff)] = h.revision

    @precondition(lambda self: bool(self.remembered))
    @rule(data=st.data(), op=st.sampled_from([Op.ACCEPT, Op.HEARTBEAT, Op.RETURN]),
          claim=st.sampled_from(["current", "new"]))
    def write_what_was_read(self, data: st.DataObject, op: Op, claim: str) -> None:
        """A writer acts on the revision it remembers, however old by now."""
        writer, handoff = data.draw(st.sampled_from(sorted(self.remembered)), label="writer and handoff")
        payload: dict[str, Any] = {"claim_id": self.claim(handoff, claim)}
        if op is Op.RETURN:
            payload |= {"result_fact_id": self.facts[handoff], "outcome": "failed"}
        self.write(op, WRITERS[1], handoff, payload, self.remembered[(writer, handoff)])

    @precondition(lambda self: self.wire.can_move_clock)
    @rule(ms=st.sampled_from([1_000, LEASE_MS + 1]))
    def advance_clock(self, ms: int) -> None:
        self.wire.advance(ms)
