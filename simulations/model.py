"""An executable model of the AideMemo remote ledger, written apart from ``aidememo_ref``.

It imports nothing from the reference (a test pins that), so the two cannot share a bug. It
owns the rules as the research notes state them (handoff notes §2.2, §3.1, §4.3, §5.1, §6.1,
§8.1; wire notes §1.9-§1.17, §5; errata 5 and 6) and nothing else: no I/O, no clock, no ids.

Two views of the same rules, each rule stated once, here:

* ``LedgerState`` and ``apply``/the read functions: the whole project (sessions, facts,
  contexts, handoffs, receipts, the change log), used step by step by the state machines.
* ``ledger.LEDGER``: a checker model over one handoff at a time, for the concurrent runner's
  histories; it calls ``replayed``, ``addressed_refusal``, ``new_handoff`` and ``on_handoff``.

Every state is a frozen value and every function here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final, TypedDict, TypeVar, cast

__all__ = [
    "LEASE_MS",
    "Answer",
    "Command",
    "FactInfo",
    "Handoff",
    "LedgerState",
    "Op",
    "Receipt",
    "addressed_refusal",
    "apply",
    "new_handoff",
    "on_handoff",
    "replayed",
    "status_of",
    "transition",
    "read_changes",
    "read_mailbox",
    "may_read",
    "read_resource",
    "read_snapshot",
    "read_status",
]

LEASE_MS: Final = 120_000  # HANDOFF_LEASE_MS upstream (handoff notes §2.2)
SESSION, FACT, CONTEXT, HANDOFF = "session", "fact", "handoff_context", "handoff"


class Op(StrEnum):
    """Operation names as on the wire (the receipt's ``operation``)."""

    SESSION_CREATE = "session.create"
    FACT_CREATE = "fact.create"
    CONTEXT_CREATE = "handoff_context.create"
    SEND = "handoff.send"
    ACCEPT = "handoff.accept"
    HEARTBEAT = "handoff.heartbeat"
    RETURN = "handoff.return"


class Status(StrEnum):
    PENDING = "pending"
    ACCEPTED = "accepted"
    COMPLETED = "completed"


class Outcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"


_KIND_OF: Final = {
    Op.SESSION_CREATE: SESSION,
    Op.FACT_CREATE: FACT,
    Op.CONTEXT_CREATE: CONTEXT,
    Op.SEND: HANDOFF,
    Op.ACCEPT: HANDOFF,
    Op.HEARTBEAT: HANDOFF,
    Op.RETURN: HANDOFF,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Handoff:
    """A handoff record and its revision (wire notes §1.9 ``HandoffRecord``)."""

    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    focus: str | None = None
    done_when: str | None = None
    context_id: str | None = None
    status: Status = Status.PENDING
    claim_id: str | None = None
    claim_heartbeat_at_ms: int | None = None
    claim_expires_at_ms: int | None = None
    attempt_count: int = 0
    result_fact_id: str | None = None
    outcome: Outcome | None = None
    revision: int = 1

    def body(self) -> dict[str, object]:
        return {
            "handoff_id": self.handoff_id,
            "session_id": self.session_id,
            "source_id": self.source_id,
            "from_actor": self.from_actor,
            "to_actor": self.to_actor,
            "focus": self.focus,
            "done_when": self.done_when,
            "context_id": self.context_id,
            "status": str(self.status),
            "claim_id": self.claim_id,
            "claim_heartbeat_at_ms": self.claim_heartbeat_at_ms,
            "claim_expires_at_ms": self.claim_expires_at_ms,
            "attempt_count": self.attempt_count,
            "result_fact_id": self.result_fact_id,
            "outcome": None if self.outcome is None else str(self.outcome),
        }

    def visible_to(self, actor: str) -> bool:
        return actor in (self.from_actor, self.to_actor)

    def stale_at(self, now_ms: int | None) -> bool:
        """Lease expired: accepted, not failed, with an expiry reached (``claim_is_stale_at``)."""
        return (
            self.status is Status.ACCEPTED
            and self.outcome is not Outcome.FAILED
            and self.claim_expires_at_ms is not None
            and now_ms is not None
            and now_ms >= self.claim_expires_at_ms
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class FactInfo:
    """What a return needs to know about its result fact."""

    session_id: str
    source_id: str | None
    actor_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One write as a client sends it; ``resource_id`` is the coordinate's id."""

    actor: str
    operation: Op
    command_id: str
    resource_id: str
    payload: Mapping[str, object]
    expected_revision: int | None = None
    now_ms: int | None = None  # None: the target's clock is not known (URL without test clock)

    def fingerprint(self) -> str:
        """Equality stand-in for the wire fingerprint: the same fields, not the same hash."""
        return _SORTED_JSON(
            {
                "operation": str(self.operation),
                "expected_revision": self.expected_revision,
                "payload": dict(self.payload),
                "resource": [_KIND_OF[self.operation], self.resource_id],
            }
        )


# json.dumps(value, sort_keys=True), without building an encoder per call (one per write).
_SORTED_JSON: Final = json.JSONEncoder(sort_keys=True).encode


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    command_id: str
    actor: str
    fingerprint: str
    kind: str
    resource_id: str
    revision: int
    project_seq: int | None  # None where the view cannot know it (one handoff at a time)
    committed_at_ms: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """The model's answer: HTTP status, error code, and a receipt or a read body."""

    http: int
    code: str | None = None
    receipt: Receipt | None = None
    body: object = None


def _err(http: int, code: str) -> Answer:
    return Answer(http=http, code=code)


NOT_FOUND = _err(404, "resource_not_found")
STALE = _err(409, "stale_revision")
CONFLICT = _err(409, "handoff_conflict")
MISMATCH = _err(403, "handoff_actor_mismatch")
EXISTS = _err(409, "resource_already_exists")
COMMAND_CONFLICT = _err(409, "command_conflict")
INVALID = _err(400, "invalid_command")


# -- handoff rules (handoff notes §2.2; errata 6 for the return order) --------------------------


def _begin_claim(h: Handoff, claim_id: str, now_ms: int | None, lease_ms: int) -> Handoff:
    return replace(
        h,
        status=Status.ACCEPTED,
        claim_id=claim_id,
        claim_heartbeat_at_ms=now_ms,
        claim_expires_at_ms=None if now_ms is None else now_ms + lease_ms,
        attempt_count=h.attempt_count + 1,
        result_fact_id=None,
        outcome=None,
    )


def transition(
    h: Handoff, cmd: Command, fact: FactInfo | None, lease_ms: int = LEASE_MS
) -> tuple[Answer, Handoff | None]:
    """Accept, heartbeat or return on an existing handoff, after the revision check; a claim
    begun or renewed lasts ``lease_ms``.

    Returns the refusal and None, or a 200 answer (receipt filled by the caller) and the new
    record (revision not yet bumped).
    """
    now = cmd.now_ms
    claim = cmd.payload.get("claim_id")
    ok = Answer(http=200)
    if cmd.operation is Op.RETURN and fact is None:
        return NOT_FOUND, None
    if cmd.actor != h.to_actor:
        return MISMATCH, None
    if cmd.operation is Op.ACCEPT:
        if h.status is Status.PENDING:
            return ok, _begin_claim(h, str(claim), now, lease_ms)
        if h.status is Status.COMPLETED:
            return CONFLICT, None
        if claim == h.claim_id:
            return (CONFLICT, None) if h.stale_at(now) else (ok, h)
        if h.outcome is Outcome.FAILED or h.stale_at(now):
            return ok, _begin_claim(h, str(claim), now, lease_ms)
        return CONFLICT, None
    if cmd.operation is Op.HEARTBEAT:
        if h.status is not Status.ACCEPTED or claim != h.claim_id:
            return CONFLICT, None
        if h.outcome is Outcome.FAILED or h.stale_at(now):
            return CONFLICT, None
        expires = None if now is None else now + lease_ms
        return ok, replace(h, claim_heartbeat_at_ms=now, claim_expires_at_ms=expires)
    # Return: everything after the receiver check is a 409 handoff_conflict, so the order of
    # the remaining guards does not show on the wire.
    assert fact is not None
    result_fact_id = cmd.payload.get("result_fact_id")
    outcome = cmd.payload.get("outcome")
    if h.status is Status.ACCEPTED and claim != h.claim_id:
        return CONFLICT, None
    if h.stale_at(now):
        return CONFLICT, None
    if (fact.session_id, fact.source_id, fact.actor_id) != (h.session_id, h.source_id, h.to_actor):
        return CONFLICT, None
    if h.status is Status.COMPLETED:
        same = (claim, result_fact_id, outcome) == (h.claim_id, h.result_fact_id, h.outcome)
        return (ok, h) if same else (CONFLICT, None)
    if h.status is Status.PENDING:
        return CONFLICT, None
    if outcome == Outcome.SUCCEEDED:
        return ok, replace(h, status=Status.COMPLETED, result_fact_id=str(result_fact_id), outcome=Outcome.SUCCEEDED)
    if outcome == Outcome.FAILED:
        return ok, replace(
            h,
            result_fact_id=str(result_fact_id),
            outcome=Outcome.FAILED,
            claim_heartbeat_at_ms=None,
            claim_expires_at_ms=None,
        )
    return INVALID, None


# -- rules the two views share: the project here, one handoff at a time in ledger.py --------


def replayed(stored: Receipt | None, cmd: Command) -> Answer | None:
    """A command id seen before: its stored receipt when the command is identical, else
    ``command_conflict``; None for a new command id (handoff notes §5.1)."""
    if stored is None:
        return None
    same = (stored.actor, stored.fingerprint, stored.kind, stored.resource_id) == (
        cmd.actor, cmd.fingerprint(), _KIND_OF[cmd.operation], cmd.resource_id)
    return Answer(http=200, receipt=stored) if same else COMMAND_CONFLICT


def addressed_refusal(cmd: Command, *, session_found: bool, receiver_writable: bool, exists: bool) -> Answer | None:
    """The checks a send and a handoff context share, in the wire's order (wire notes §1.11,
    §1.12): the session, the receiver's role, the id, then sending to oneself."""
    if not session_found:
        return NOT_FOUND
    if not receiver_writable:
        return INVALID
    if exists:
        return EXISTS
    if str(cmd.payload.get("to_actor")) == cmd.actor:
        return INVALID
    return None


def new_handoff(cmd: Command, source_id: str | None) -> Handoff:
    """The record a successful send creates (revision set by the caller)."""
    p = cmd.payload
    return Handoff(
        handoff_id=cmd.resource_id, session_id=str(p["session_id"]), source_id=source_id,
        from_actor=cmd.actor, to_actor=str(p["to_actor"]), focus=_optional_str(p.get("focus")),
        done_when=_optional_str(p.get("done_when")), context_id=_optional_str(p.get("context_id")),
    )


def on_handoff(h: Handoff | None, cmd: Command, fact: FactInfo | None,
               lease_ms: int = LEASE_MS) -> tuple[Answer, Handoff | None]:
    """Accept, heartbeat or return: absent, then stale, then the transition (handoff §3.1)."""
    if h is None:
        return NOT_FOUND, None
    if cmd.expected_revision != h.revision:
        return STALE, None
    return transition(h, cmd, fact, lease_ms)


def _optional_str(value: object) -> str | None:
    return None if value is None else str(value)


# -- the whole project ----------------------------------------------------------------------


_K = TypeVar("_K")
_V = TypeVar("_V")


def _frozen(mapping: Mapping[_K, _V]) -> Mapping[_K, _V]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, slots=True, kw_only=True)
class Resource:
    kind: str
    resource_id: str
    revision: int
    body: Mapping[str, object]


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    seq: int
    kind: str
    resource_id: str
    revision: int
    actor: str
    committed_at_ms: int | None
    body: Mapping[str, object]


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerState:
    """One project: members and roles, current resources, receipts, the change log, and the
    length of the claim leases its ledger grants (upstream's unless the target was started
    with another)."""

    members: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    resources: Mapping[tuple[str, str], Resource] = field(default_factory=lambda: MappingProxyType({}))
    receipts: Mapping[str, Receipt] = field(default_factory=lambda: MappingProxyType({}))
    changes: tuple[Change, ...] = ()
    lease_ms: int = LEASE_MS

    @property
    def head(self) -> int:
        return len(self.changes)

    def handoff(self, handoff_id: str) -> Handoff | None:
        res = self.resources.get((HANDOFF, handoff_id))
        return None if res is None else _handoff_from(res)

    def with_member(self, actor: str, role: str) -> LedgerState:
        return replace(self, members=_frozen({**self.members, actor: role}))


class _HandoffBody(TypedDict):
    """A handoff resource's body as ``Handoff.body`` writes it (what ``_handoff_from`` reads back)."""

    handoff_id: str
    session_id: str
    source_id: str | None
    from_actor: str
    to_actor: str
    focus: str | None
    done_when: str | None
    context_id: str | None
    status: str
    claim_id: str | None
    claim_heartbeat_at_ms: int | None
    claim_expires_at_ms: int | None
    attempt_count: int
    result_fact_id: str | None
    outcome: str | None


def _handoff_from(res: Resource) -> Handoff:
    b = cast("_HandoffBody", res.body)  # the model wrote it with Handoff.body
    return Handoff(
        handoff_id=b["handoff_id"],
        session_id=b["session_id"],
        source_id=b["source_id"],
        from_actor=b["from_actor"],
        to_actor=b["to_actor"],
        focus=b["focus"],
        done_when=b["done_when"],
        context_id=b["context_id"],
        status=Status(b["status"]),
        claim_id=b["claim_id"],
        claim_heartbeat_at_ms=b["claim_heartbeat_at_ms"],
        claim_expires_at_ms=b["claim_expires_at_ms"],
        attempt_count=b["attempt_count"],
        result_fact_id=b["result_fact_id"],
        outcome=None if b["outcome"] is None else Outcome(b["outcome"]),
        revision=res.revision,
    )


def _writable(state: LedgerState, actor: str) -> bool:
    return state.members.get(actor) in ("owner", "admin", "writer")


def _create(state: LedgerState, cmd: Command) -> tuple[Answer, dict[str, object] | None]:
    """Validation of the four create routes (wire notes §1.9-§1.12), in their order."""
    p = cmd.payload
    res = state.resources
    if cmd.operation is Op.SESSION_CREATE:
        if (SESSION, cmd.resource_id) in res:
            return EXISTS, None
        return Answer(http=200), {
            "session_id": cmd.resource_id, "source_id": p.get("source_id"), "topic": p["topic"],
            "created_by": cmd.actor,
        }
    session = res.get((SESSION, str(p.get("session_id"))))
    if cmd.operation is Op.FACT_CREATE:
        if session is None:
            return NOT_FOUND, None
        if (FACT, cmd.resource_id) in res:
            return EXISTS, None
        return Answer(http=200), {
            "fact_id": cmd.resource_id, "session_id": p["session_id"],
            "source_id": session.body["source_id"], "actor_id": cmd.actor, "content": p["content"],
        }
    kind = CONTEXT if cmd.operation is Op.CONTEXT_CREATE else HANDOFF
    refusal = addressed_refusal(cmd, session_found=session is not None,
                                receiver_writable=_writable(state, str(p.get("to_actor"))),
                                exists=(kind, cmd.resource_id) in res)
    if refusal is not None:
        return refusal, None
    assert session is not None
    source_id = _optional_str(session.body["source_id"])
    if cmd.operation is Op.CONTEXT_CREATE:
        return Answer(http=200), {
            "context_id": cmd.resource_id, "handoff_id": p["handoff_id"], "session_id": p["session_id"],
            "source_id": source_id, "from_actor": cmd.actor, "to_actor": p["to_actor"],
            "content": p["content"],
        }
    h = new_handoff(cmd, source_id)
    if h.context_id is not None:
        ctx = res.get((CONTEXT, h.context_id))
        if ctx is None:
            return NOT_FOUND, None
        b = ctx.body
        if (b["handoff_id"], b["session_id"], b["source_id"], b["from_actor"], b["to_actor"]) != (
            h.handoff_id, h.session_id, h.source_id, h.from_actor, h.to_actor
        ):
            return CONFLICT, None
    return Answer(http=200), h.body()


def apply(state: LedgerState, cmd: Command) -> tuple[Answer, LedgerState]:
    """One write against the whole project: the answer and the next state."""
    if not _writable(state, cmd.actor):
        return _err(403, "project_unauthorized"), state
    kind = _KIND_OF[cmd.operation]
    replay = replayed(state.receipts.get(cmd.command_id), cmd)
    if replay is not None:
        return replay, state
    body: dict[str, object] | None
    if kind != HANDOFF or cmd.operation is Op.SEND:
        answer, body = _create(state, cmd)
    else:
        fact_res = state.resources.get((FACT, str(cmd.payload.get("result_fact_id"))))
        fact = None if fact_res is None else FactInfo(
            session_id=str(fact_res.body["session_id"]),
            source_id=_optional_str(fact_res.body["source_id"]),
            actor_id=str(fact_res.body["actor_id"]),
        )
        answer, new = on_handoff(state.handoff(cmd.resource_id), cmd, fact, state.lease_ms)
        body = None if new is None else new.body()
    if body is None:
        return answer, state
    previous = state.resources.get((kind, cmd.resource_id))
    revision = 1 if previous is None else previous.revision + 1
    seq = state.head + 1
    receipt = Receipt(
        command_id=cmd.command_id, actor=cmd.actor, fingerprint=cmd.fingerprint(), kind=kind,
        resource_id=cmd.resource_id, revision=revision, project_seq=seq, committed_at_ms=cmd.now_ms,
    )
    # Each dict below is made here and held by no one else: it is sealed without a copy.
    frozen_body = MappingProxyType(body)
    return Answer(http=200, receipt=receipt), replace(
        state,
        resources=MappingProxyType({**state.resources, (kind, cmd.resource_id): Resource(
            kind=kind, resource_id=cmd.resource_id, revision=revision, body=frozen_body)}),
        receipts=MappingProxyType({**state.receipts, cmd.command_id: receipt}),
        changes=state.changes + (Change(
            seq=seq, kind=kind, resource_id=cmd.resource_id, revision=revision, actor=cmd.actor,
            committed_at_ms=cmd.now_ms, body=frozen_body),),
    )


# -- reads, as each actor may see them (handoff notes §8.1, wire notes §5) ------------------


def _visible(kind: str, body: Mapping[str, object], actor: str) -> bool:
    if kind in (HANDOFF, CONTEXT):
        return actor in (body["from_actor"], body["to_actor"])
    return True


def read_status(state: LedgerState, actor: str, handoff_id: str) -> Answer:
    return status_of(state.handoff(handoff_id), actor)


def status_of(h: Handoff | None, actor: str) -> Answer:
    """Typed status: 404 when absent, 403 for a non-participant (handoff notes §8.1)."""
    if h is None:
        return NOT_FOUND
    if not h.visible_to(actor):
        return MISMATCH
    return Answer(http=200, body={"revision": h.revision, "record": h.body()})


def may_read(state: LedgerState, actor: str, kind: str, resource_id: str) -> bool:
    """Whether a generic read of the resource answers it (200) rather than 404."""
    res = state.resources.get((kind, resource_id))
    return res is not None and _visible(kind, res.body, actor)


def read_resource(state: LedgerState, actor: str, kind: str, resource_id: str) -> Answer:
    """Generic resource read: a hidden handoff or context is 404, like an absent one."""
    if not may_read(state, actor, kind, resource_id):
        return NOT_FOUND
    res = state.resources[(kind, resource_id)]
    return Answer(http=200, body={"revision": res.revision, "body": dict(res.body)})


def read_mailbox(
    state: LedgerState, actor: str, box: str, include_completed: bool | None = None
) -> list[tuple[int, int, str]]:
    """(project_seq of the latest mutation, revision, handoff_id), newest first."""
    if include_completed is None:
        include_completed = box == "outbox"
    side = "to_actor" if box == "inbox" else "from_actor"
    latest: dict[str, int] = {}
    for change in state.changes:
        if change.kind == HANDOFF:
            latest[change.resource_id] = change.seq
    rows = []
    for handoff_id, seq in latest.items():
        res = state.resources[(HANDOFF, handoff_id)]
        if res.body[side] != actor:
            continue
        if not include_completed and res.body["status"] == Status.COMPLETED:
            continue
        rows.append((seq, res.revision, handoff_id))
    return sorted(rows, reverse=True)


def read_snapshot(state: LedgerState, actor: str) -> list[tuple[str, str, int]]:
    """(kind, id, revision) of every resource the actor may see, in the snapshot's order."""
    return sorted(
        (res.kind, res.resource_id, res.revision)
        for res in state.resources.values()
        if _visible(res.kind, res.body, actor)
    )


def read_changes(
    state: LedgerState, actor: str, *, materialized: bool
) -> list[tuple[int, str, str, int]]:
    """(seq, kind, id, revision) of the feed entries the actor may see, from the start.

    The metadata feed judges visibility on the resource as it is now; the materialized feed on
    the body at that change's revision (wire notes §5.1).
    """
    out = []
    for change in state.changes:
        body = change.body if materialized else state.resources[(change.kind, change.resource_id)].body
        if _visible(change.kind, body, actor):
            out.append((change.seq, change.kind, change.resource_id, change.revision))
    return out
