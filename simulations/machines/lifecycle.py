"""``HandoffLifecycle``: every write the protocol has, by every actor, against the model.

Sessions, facts, contexts, sends, accepts, heartbeats, returns, deliberately stale writes,
replays of earlier commands, command ids reused with another body, clock moves past the lease,
and writes by the wrong actor. Each answer must be the model's; the record invariants of
``LedgerMachine`` hold after every step.
"""

from __future__ import annotations


from hypothesis import strategies as st
from hypothesis.stateful import Bundle, precondition, rule

from simulations.machines.base import CreatingMachine, LedgerMachine
from simulations.machines.wire import WRITERS
from simulations.model import LEASE_MS, Command, Op, Status
from simulations.plan import READER

__all__ = ["HandoffLifecycle"]

RARELY = st.sampled_from((False, False, False, True))  # stale or misaddressed writes: 1 in 4


class HandoffLifecycle(CreatingMachine):
    """Writes of every kind by several actors, checked against the model after every step."""

    handoffs = Bundle("handoffs")
    commands = Bundle("commands")

    # -- creates --------------------------------------------------------------------------------

    @rule(target=handoffs, sender=st.sampled_from((*WRITERS, *WRITERS, READER)),
          receiver=st.sampled_from((*WRITERS, *WRITERS, READER)), session=LedgerMachine.sessions,
          with_context=st.booleans())
    def send(self, sender: str, receiver: str, session: str, with_context: bool) -> str:
        return self.send_handoff(sender, receiver, session, with_context, focus="review", done_when=None,
                                 context_id=None)

    @rule(sender=st.sampled_from(WRITERS), handoff=handoffs, session=LedgerMachine.sessions)
    def send_again_with_the_same_id(self, sender: str, handoff: str, session: str) -> None:
        receiver = next(a for a in WRITERS if a != sender)
        self.write(Op.SEND, sender, handoff, {"handoff_id": handoff, "session_id": session, "to_actor": receiver})

    # -- transitions ------------------------------------------------------------------------------

    @rule(target=commands, handoff=handoffs, claim=st.sampled_from(["new", "new", "current", "old"]),
          stale=RARELY, wrong_actor=RARELY)
    def accept(self, handoff: str, claim: str, stale: bool, wrong_actor: bool) -> Command:
        return self.write(Op.ACCEPT, self.receiver(handoff, wrong_actor), handoff,
                          {"claim_id": self.claim(handoff, claim)}, self.revision(handoff, stale))

    @rule(target=commands, handoff=handoffs, claim=st.sampled_from(["current", "current", "old", "new"]),
          stale=RARELY, wrong_actor=RARELY)
    def heartbeat(self, handoff: str, claim: str, stale: bool, wrong_actor: bool) -> Command:
        return self.write(Op.HEARTBEAT, self.receiver(handoff, wrong_actor), handoff,
                          {"claim_id": self.claim(handoff, claim)}, self.revision(handoff, stale))

    @rule(target=commands, handoff=handoffs, fact=CreatingMachine.facts, claim=st.sampled_from(["current", "old", "new"]),
          outcome=st.sampled_from(["succeeded", "failed"]), stale=RARELY, wrong_actor=RARELY)
    def return_result(self, handoff: str, fact: str, claim: str, outcome: str, stale: bool,
                      wrong_actor: bool) -> Command:
        return self.write(Op.RETURN, self.receiver(handoff, wrong_actor), handoff,
                          {"claim_id": self.claim(handoff, claim), "result_fact_id": fact, "outcome": outcome},
                          self.revision(handoff, stale))

    @precondition(lambda self: bool(self.with_status(Status.ACCEPTED)))
    @rule(target=CreatingMachine.facts, data=st.data(), outcome=st.sampled_from(["succeeded", "failed"]))
    def return_own_result(self, data: st.DataObject, outcome: str) -> str:
        """The usual path: the receiver writes its result, then returns it."""
        return self.write_and_return_result(data.draw(st.sampled_from(self.with_status(Status.ACCEPTED)), label="handoff"),
                                      outcome)

    def _revised(self) -> list[str]:
        return sorted(h for h in self.handoff_ids() if (modelled := self.modelled(h)) is not None and modelled.revision > 1)

    @precondition(lambda self: bool(self._revised()))
    @rule(data=st.data(), claim=st.sampled_from(["new", "current"]))
    def stale_accept(self, data: st.DataObject, claim: str) -> None:
        """A writer that read long ago: its expected revision is behind by one."""
        handoff = data.draw(st.sampled_from(self._revised()), label="handoff")
        h = self.modelled(handoff)
        assert h is not None
        self.write(Op.ACCEPT, h.to_actor, handoff, {"claim_id": self.claim(handoff, claim)}, h.revision - 1)

    @rule(command=commands)
    def replay_command(self, command: Command) -> None:
        """The identical command again (a client retry): the stored receipt, unchanged."""
        self.write(command.operation, command.actor, command.resource_id, command.payload,
                   command.expected_revision, command.command_id)

    @rule(command=commands, handoff=handoffs)
    def reuse_command_id(self, command: Command, handoff: str) -> None:
        """The same command id with another body: command_conflict, never a second effect."""
        self.write(Op.ACCEPT, command.actor, handoff, {"claim_id": self.new_id("claim")},
                   self.revision(handoff), command.command_id)

    @precondition(lambda self: self.wire.can_move_clock)
    @rule(ms=st.sampled_from([1_000, LEASE_MS - 1, LEASE_MS, LEASE_MS + 1]))
    def advance_clock(self, ms: int) -> None:
        self.wire.advance(ms)
