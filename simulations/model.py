"""An executable model of the AideMemo remote ledger, written apart from ``aidememo_ref``.

It imports nothing from the reference (a test pins that), so the two cannot share a bug. It
owns the rules as the research notes state them (handoff notes §2.2, §3.1, §4.3, §5.1, §6.1,
§8.1; wire notes §1.9-§1.17, §5; errata 5 and 6) and nothing else: no I/O, no clock, no ids.

Two views of the same rules:

* ``LedgerState`` and ``apply``/the read functions: the whole project (sessions, facts,
  contexts, handoffs, receipts, the change log), used step by step by the state machines.
* ``LEDGER``: a checker ``Model`` over one handoff at a time (the histories of the concurrent
  runner are partitioned per handoff), whose outputs are the answer's shape: HTTP status, error
  code and revision, plus the record for status reads.

Outputs the model cannot know in a partition (``project_seq``, the fingerprint) are checked
elsewhere: receipts of one command id must be identical; project_seq must follow real time.
Every state is a frozen value and every function here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import MappingProxyType
from typing import Final, TypeVar

from simulations.checker import Input, Model, Output
from simulations.history import Operation

__all__ = [
    "LEASE_MS",
    "Answer",
    "Command",
    "Handoff",
    "LedgerState",
    "Op",
    "LEDGER",
    "apply",
    "read_changes",
    "read_mailbox",
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
        return json.dumps(
            {
                "operation": str(self.operation),
                "expected_revision": self.expected_revision,
                "payload": dict(self.payload),
                "resource": [_KIND_OF[self.operation], self.resource_id],
            },
            sort_keys=True,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Receipt:
    command_id: str
    actor: str
    fingerprint: str
    kind: str
    resource_id: str
    revision: int
    project_seq: int
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


def _begin_claim(h: Handoff, claim_id: str, now_ms: int | None) -> Handoff:
    return replace(
        h,
        status=Status.ACCEPTED,
        claim_id=claim_id,
        claim_heartbeat_at_ms=now_ms,
        claim_expires_at_ms=None if now_ms is None else now_ms + LEASE_MS,
        attempt_count=h.attempt_count + 1,
        result_fact_id=None,
        outcome=None,
    )


def transition(
    h: Handoff, cmd: Command, fact: FactInfo | None
) -> tuple[Answer, Handoff | None]:
    """Accept, heartbeat or return on an existing handoff, after the revision check.

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
            return ok, _begin_claim(h, str(claim), now)
        if h.status is Status.COMPLETED:
            return CONFLICT, None
        if claim == h.claim_id:
            return (CONFLICT, None) if h.stale_at(now) else (ok, h)
        if h.outcome is Outcome.FAILED or h.stale_at(now):
            return ok, _begin_claim(h, str(claim), now)
        return CONFLICT, None
    if cmd.operation is Op.HEARTBEAT:
        if h.status is not Status.ACCEPTED or claim != h.claim_id:
            return CONFLICT, None
        if h.outcome is Outcome.FAILED or h.stale_at(now):
            return CONFLICT, None
        expires = None if now is None else now + LEASE_MS
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
    """One project: members and roles, current resources, receipts, the change log."""

    members: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    resources: Mapping[tuple[str, str], Resource] = field(default_factory=lambda: MappingProxyType({}))
    receipts: Mapping[str, Receipt] = field(default_factory=lambda: MappingProxyType({}))
    changes: tuple[Change, ...] = ()

    @property
    def head(self) -> int:
        return len(self.changes)

    def handoff(self, handoff_id: str) -> Handoff | None:
        res = self.resources.get((HANDOFF, handoff_id))
        return None if res is None else _handoff_from(res)

    def with_member(self, actor: str, role: str) -> LedgerState:
        return replace(self, members=_frozen({**self.members, actor: role}))


def _handoff_from(res: Resource) -> Handoff:
    b = res.body
    return Handoff(
        handoff_id=str(b["handoff_id"]),
        session_id=str(b["session_id"]),
        source_id=b["source_id"],  # type: ignore[arg-type]
        from_actor=str(b["from_actor"]),
        to_actor=str(b["to_actor"]),
        focus=b["focus"],  # type: ignore[arg-type]
        done_when=b["done_when"],  # type: ignore[arg-type]
        context_id=b["context_id"],  # type: ignore[arg-type]
        status=Status(str(b["status"])),
        claim_id=b["claim_id"],  # type: ignore[arg-type]
        claim_heartbeat_at_ms=b["claim_heartbeat_at_ms"],  # type: ignore[arg-type]
        claim_expires_at_ms=b["claim_expires_at_ms"],  # type: ignore[arg-type]
        attempt_count=int(b["attempt_count"]),  # type: ignore[call-overload]
        result_fact_id=b["result_fact_id"],  # type: ignore[arg-type]
        outcome=None if b["outcome"] is None else Outcome(str(b["outcome"])),
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
    if session is None:
        return NOT_FOUND, None
    if cmd.operation is Op.FACT_CREATE:
        if (FACT, cmd.resource_id) in res:
            return EXISTS, None
        return Answer(http=200), {
            "fact_id": cmd.resource_id, "session_id": p["session_id"],
            "source_id": session.body["source_id"], "actor_id": cmd.actor, "content": p["content"],
        }
    to_actor = str(p.get("to_actor"))
    if to_actor not in state.members or not _writable(state, to_actor):
        return INVALID, None
    kind = CONTEXT if cmd.operation is Op.CONTEXT_CREATE else HANDOFF
    if (kind, cmd.resource_id) in res:
        return EXISTS, None
    if to_actor == cmd.actor:
        return INVALID, None
    if cmd.operation is Op.CONTEXT_CREATE:
        return Answer(http=200), {
            "context_id": cmd.resource_id, "handoff_id": p["handoff_id"], "session_id": p["session_id"],
            "source_id": session.body["source_id"], "from_actor": cmd.actor, "to_actor": to_actor,
            "content": p["content"],
        }
    h = Handoff(
        handoff_id=cmd.resource_id, session_id=str(p["session_id"]), source_id=session.body["source_id"],  # type: ignore[arg-type]
        from_actor=cmd.actor, to_actor=to_actor, focus=p.get("focus"), done_when=p.get("done_when"),  # type: ignore[arg-type]
        context_id=p.get("context_id"),  # type: ignore[arg-type]
    )
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
    stored = state.receipts.get(cmd.command_id)
    if stored is not None:
        same = (stored.actor, stored.fingerprint, stored.kind, stored.resource_id) == (
            cmd.actor, cmd.fingerprint(), kind, cmd.resource_id
        )
        return (Answer(http=200, receipt=stored), state) if same else (COMMAND_CONFLICT, state)
    body: dict[str, object] | None
    if kind != HANDOFF or cmd.operation is Op.SEND:
        answer, body = _create(state, cmd)
    else:
        h = state.handoff(cmd.resource_id)
        if h is None:
            return NOT_FOUND, state
        if cmd.expected_revision != h.revision:
            return STALE, state
        fact_res = state.resources.get((FACT, str(cmd.payload.get("result_fact_id"))))
        fact = None if fact_res is None else FactInfo(
            session_id=str(fact_res.body["session_id"]),
            source_id=fact_res.body["source_id"],  # type: ignore[arg-type]
            actor_id=str(fact_res.body["actor_id"]),
        )
        answer, new = transition(h, cmd, fact)
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
    frozen_body = _frozen(body)
    return Answer(http=200, receipt=receipt), replace(
        state,
        resources=_frozen({**state.resources, (kind, cmd.resource_id): Resource(
            kind=kind, resource_id=cmd.resource_id, revision=revision, body=frozen_body)}),
        receipts=_frozen({**state.receipts, cmd.command_id: receipt}),
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
    """Typed status: 404 when absent, 403 for a non-participant."""
    h = state.handoff(handoff_id)
    if h is None:
        return NOT_FOUND
    if not h.visible_to(actor):
        return MISMATCH
    return Answer(http=200, body={"revision": h.revision, "record": h.body()})


def read_resource(state: LedgerState, actor: str, kind: str, resource_id: str) -> Answer:
    """Generic resource read: a hidden handoff or context is 404, like an absent one."""
    res = state.resources.get((kind, resource_id))
    if res is None or not _visible(kind, res.body, actor):
        return NOT_FOUND
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


# -- the checker model: one handoff at a time -------------------------------------------------
#
# Inputs written by the concurrent runner: {"op": <Op or "handoff.status">, "actor", "handoff_id",
# "command_id", "expected_revision", "payload", "now_ms", "fact": {session_id, source_id,
# actor_id} | null, "session": {source_id} | null, "receiver_writable": bool}. Outputs:
# {"http", "code", "revision"} for writes, plus "record" (status, claim_id, attempt_count,
# result_fact_id, outcome) for status reads.


@dataclass(frozen=True, slots=True)
class _PartState:
    handoff: Handoff | None
    receipts: frozenset[tuple[str, str, str, int]]  # (command_id, actor, fingerprint, revision)


def _abstract(h: Handoff) -> dict[str, object]:
    return {
        "status": str(h.status),
        "claim_id": h.claim_id,
        "attempt_count": h.attempt_count,
        "result_fact_id": h.result_fact_id,
        "outcome": None if h.outcome is None else str(h.outcome),
    }


def _command_of(inp: Input) -> Command:
    return Command(
        actor=str(inp["actor"]),
        operation=Op(str(inp["op"])),
        command_id=str(inp["command_id"]),
        resource_id=str(inp["handoff_id"]),
        payload=inp.get("payload") or {},  # type: ignore[arg-type]
        expected_revision=inp.get("expected_revision"),  # type: ignore[arg-type]
        now_ms=inp.get("now_ms"),  # type: ignore[arg-type]
    )


def _part_answer(state: _PartState, inp: Input) -> tuple[dict[str, object], _PartState]:
    """The deterministic answer of the model to one input, and the next state."""
    h = state.handoff
    if inp["op"] == "handoff.status":
        if h is None:
            return {"http": 404, "code": "resource_not_found"}, state
        if not h.visible_to(str(inp["actor"])):
            return {"http": 403, "code": "handoff_actor_mismatch"}, state
        return {"http": 200, "code": None, "revision": h.revision, "record": _abstract(h)}, state
    cmd = _command_of(inp)
    for command_id, actor, fp, revision in state.receipts:
        if command_id == cmd.command_id:
            if (actor, fp) == (cmd.actor, cmd.fingerprint()):
                return {"http": 200, "code": None, "revision": revision}, state
            return {"http": 409, "code": "command_conflict"}, state
    answer: Answer
    new: Handoff | None
    if cmd.operation is Op.SEND:
        session = inp.get("session")
        p = cmd.payload
        if not isinstance(session, Mapping):
            answer, new = NOT_FOUND, None
        elif not inp.get("receiver_writable"):
            answer, new = INVALID, None
        elif h is not None:
            answer, new = EXISTS, None
        elif p.get("to_actor") == cmd.actor:
            answer, new = INVALID, None
        else:
            answer = Answer(http=200)
            new = Handoff(
                handoff_id=cmd.resource_id, session_id=str(p["session_id"]),
                source_id=session.get("source_id"),
                from_actor=cmd.actor, to_actor=str(p["to_actor"]), revision=0,
            )
    elif h is None:
        answer, new = NOT_FOUND, None
    elif cmd.expected_revision != h.revision:
        answer, new = STALE, None
    else:
        raw = inp.get("fact")
        fact = FactInfo(**raw) if isinstance(raw, Mapping) else None
        answer, new = transition(h, cmd, fact)
    if new is None:
        return {"http": answer.http, "code": answer.code}, state
    revision = 1 if h is None else h.revision + 1
    new = replace(new, revision=revision)
    receipts = state.receipts | {(cmd.command_id, cmd.actor, cmd.fingerprint(), revision)}
    return {"http": 200, "code": None, "revision": revision}, _PartState(new, receipts)


def _matches(expected: Mapping[str, object], output: Mapping[str, object]) -> bool:
    return all(output.get(k) == v for k, v in expected.items())


def _step(state: _PartState, inp: Input, output: Output) -> list[_PartState]:
    expected, nxt = _part_answer(state, inp)
    if output is None:
        # Unanswered: it took effect (the model's answer) or it did not.
        return [nxt, state] if nxt != state else [state]
    return [nxt] if _matches(expected, output) else []


def _partition(history: Sequence[Operation]) -> list[list[int]]:
    parts: dict[str, list[int]] = {}
    for i, op in enumerate(history):
        parts.setdefault(str(op.input.get("handoff_id")), []).append(i)
    return list(parts.values())


def _describe_operation(inp: Input, output: Output) -> str:
    op = str(inp.get("op", "?")).removeprefix("handoff.")
    args = []
    if inp.get("expected_revision") is not None:
        args.append(f"rev={inp['expected_revision']}")
    payload = inp.get("payload") or {}
    assert isinstance(payload, Mapping)
    for key in ("claim_id", "outcome", "result_fact_id", "to_actor"):
        if payload.get(key) is not None:
            args.append(f"{key}={payload[key]}")
    if inp.get("command_id"):
        args.append(f"cmd={inp['command_id']}")
    head = f"{inp.get('actor')} {op} {inp.get('handoff_id')}({', '.join(args)})"
    if output is None:
        return f"{head} -> unknown"
    got = f"{output.get('http')} {output.get('code') or ''}".strip()
    if output.get("revision") is not None:
        got += f" rev {output['revision']}"
    if isinstance(output.get("record"), Mapping):
        rec = output["record"]
        assert isinstance(rec, Mapping)
        got += f" [{rec.get('status')} claim={rec.get('claim_id')} attempts={rec.get('attempt_count')}]"
    return f"{head} -> {got}"


def _describe_state(state: _PartState) -> str:
    h = state.handoff
    if h is None:
        return "no handoff"
    return (
        f"rev {h.revision} {h.status} claim={h.claim_id} attempts={h.attempt_count} "
        f"outcome={h.outcome} expires={h.claim_expires_at_ms}"
    )


def _describe_expected(state: _PartState, inp: Input) -> str:
    answer, _ = _part_answer(state, inp)
    text = f"{answer['http']} {answer.get('code') or ''}".strip()
    if answer.get("revision") is not None:
        text += f" rev {answer['revision']}"
    return f"{text} (in {_describe_state(state)})"


LEDGER: Model[_PartState] = Model(
    name="ledger",
    init=lambda: _PartState(None, frozenset()),
    step=_step,
    partition=_partition,
    effect_free=lambda inp: inp.get("op") == "handoff.status",
    describe_operation=_describe_operation,
    describe_state=_describe_state,
    describe_expected=_describe_expected,
)
