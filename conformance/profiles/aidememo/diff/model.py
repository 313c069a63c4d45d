"""The generator's model of one episode: what the *reference* answered so far, and the record states it implies.

Only successful writes change it, as the reference reported them: a handoff's status moves on
a 200 accept (``accepted``), return (``completed`` or ``failed``) and heartbeat (the lease
renewed); the test clock moves on a 200 clock step. ``state`` names what the model knows of a
handoff for the coverage's record state (``coverage``): its status, and for a live claim whether
half its lease (``aged``) or all of it (``expired``) has gone by on the test clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from conformance.profiles.aidememo.diff.steps import Step

__all__ = ["LEASE_MS", "Context", "Handoff", "Model", "state"]

LEASE_MS = 120_000  # the spec's lease (W §1.12); only ever compared on the shared test clock


@dataclass(slots=True)
class Handoff:
    session: str
    to: str
    sender: str
    revision: int = 1
    claim: str | None = None
    status: str = "pending"  # pending, accepted, failed (accepted, the claim's failure recorded), completed
    claimed_ms: int = 0  # the model clock at the last accept or heartbeat
    evidence: tuple[str, str] | None = None  # (result fact, outcome) of the last return


@dataclass(frozen=True, slots=True)
class Context:
    handoff: str
    session: str
    author: str
    to: str


@dataclass(slots=True)
class Model:
    """What the reference answered so far in this episode (only successful writes count)."""

    sessions: dict[str, str] = field(default_factory=dict)  # session id -> creator
    sources: dict[str, str | None] = field(default_factory=dict)  # session id -> its source_id
    facts: dict[str, tuple[str, str]] = field(default_factory=dict)  # fact id -> (session, author)
    handoffs: dict[str, Handoff] = field(default_factory=dict)
    contexts: dict[str, Context] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)  # raw resource id -> revision
    writes: list[Step] = field(default_factory=list)  # writes sent, for command-id reuse
    committed: list[Step] = field(default_factory=list)  # the writes the reference committed
    texts: list[str] = field(default_factory=list)  # fact contents, for search terms (a list: seeded order)
    max_seq: int = 0
    now_ms: int = 0  # how far the clock steps moved both test clocks

    def present(self) -> str:
        """The handoff statuses of the episode, for reads that list or page many records."""
        statuses = sorted({state(record, self.now_ms) for record in self.handoffs.values()})
        return "+".join(statuses) or "no handoffs"


def state(record: Handoff | None, now_ms: int) -> str:
    if record is None:
        return "unknown"
    age = now_ms - record.claimed_ms
    if record.status == "accepted" and age >= LEASE_MS // 2:
        return "expired" if age >= LEASE_MS else "aged"
    return record.status
