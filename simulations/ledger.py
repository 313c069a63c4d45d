"""The ledger as a checker model, one handoff at a time: what the concurrent runner's histories
are checked against (``aidememo-sim check --model ledger``).

The rules are ``model.py``'s, called, not restated: the receipt replay (``replayed``), the
checks a send shares with a context (``addressed_refusal``), the record a send creates
(``new_handoff``), and accept/heartbeat/return (``on_handoff``). This module only adapts them
to the checker: a partition's state is the handoff and the receipts of its commands, and the
outputs compared are the answer's shape (HTTP status, error code, revision, and the record for
status reads).

Inputs, as the runner writes them: ``{"op": <Op or "handoff.status">, "actor", "handoff_id",
"command_id", "expected_revision", "payload", "now_ms", "now_max_ms", "fact": {session_id,
source_id, actor_id} | null, "session": {source_id} | null, "receiver_writable": bool}``, and on
a transition ``"lease_ms"`` when the target grants another lease than upstream's. What
one handoff cannot know (``project_seq``, other handoffs' receipts) is checked in ``receipts.py``.

Time. ``now_ms`` alone is the target's exact clock (the embedded reference: nothing moves it
during a batch). Over a URL the server's clock is only known to lie between ``now_ms`` (read
before the batch) and ``now_max_ms`` (read after it): wall time passes, and anything else that
moves a shared test clock (another shard of a hunt) moves it under the batch. A command decided
inside that window is modelled at the time its receipt gives when that lies in the window (the
server's own word, so its lease is exact), else at both ends: a lease's expiry is monotone in
both times, so the two ends give every answer some time in the window could give. Modelling
only ``now_ms`` accused correct servers whose clock another client had moved. A server without
the test clock is timed by the runner's own wall clock (``"clock": "wall"``): its leases run on
the server's wall clock, at the same rate, and a lease compares two times of one clock; without
it the model could not know a lease had run out in real time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from simulations.linearizability.checker import Input, Model, Output
from simulations.model import (
    HANDOFF,
    LEASE_MS,
    Answer,
    Command,
    FactInfo,
    Handoff,
    Op,
    Receipt,
    addressed_refusal,
    new_handoff,
    on_handoff,
    replayed,
    status_of,
)

__all__ = ["LEDGER", "answer_parts", "describe_answer"]


@dataclass(frozen=True, slots=True)
class _PartState:
    handoff: Handoff | None
    receipts: frozenset[Receipt]


def _abstract(h: Handoff) -> dict[str, object]:
    return {
        "status": str(h.status),
        "claim_id": h.claim_id,
        "attempt_count": h.attempt_count,
        "result_fact_id": h.result_fact_id,
        "outcome": None if h.outcome is None else str(h.outcome),
    }


def _command_of(inp: Input, now: object) -> Command:
    payload = inp.get("payload")
    expected = inp.get("expected_revision")
    return Command(
        actor=str(inp["actor"]),
        operation=Op(str(inp["op"])),
        command_id=str(inp["command_id"]),
        resource_id=str(inp["handoff_id"]),
        payload=payload if isinstance(payload, Mapping) else {},
        expected_revision=expected if isinstance(expected, int) else None,
        now_ms=now if isinstance(now, int) else None,
    )


def _fact_of(inp: Input) -> FactInfo | None:
    raw = inp.get("fact")
    if not isinstance(raw, Mapping):
        return None
    source = raw.get("source_id")
    return FactInfo(session_id=str(raw.get("session_id")), source_id=None if source is None else str(source),
                    actor_id=str(raw.get("actor_id")))


def _times(inp: Input, output: Output) -> tuple[object, ...]:
    """The times the model decides ``inp`` at: one where the clock is exact, else the receipt's
    time within the window, else both ends of it."""
    low, high = inp.get("now_ms"), inp.get("now_max_ms")
    if not isinstance(low, int) or not isinstance(high, int) or high <= low:
        return (low,)
    if inp.get("clock") == "wall":  # the runner's clock, not the server's: receipts speak the other
        return (low, high)
    receipt = output.get("receipt") if output is not None else None
    said = receipt.get("committed_at_ms") if isinstance(receipt, Mapping) else None
    if isinstance(said, int) and low <= said <= high:
        return (said,)
    return (low, high)


def _answer(state: _PartState, inp: Input, now: object) -> tuple[dict[str, object], _PartState]:
    """The deterministic answer of the model to one input decided at ``now``, and the next state."""
    h = state.handoff
    if inp["op"] == "handoff.status":
        status = status_of(h, str(inp["actor"]))
        if status.body is None:
            return {"http": status.http, "code": status.code}, state
        assert h is not None
        return {"http": 200, "code": None, "revision": h.revision, "record": _abstract(h)}, state
    cmd = _command_of(inp, now)
    replay = replayed(next((r for r in state.receipts if r.command_id == cmd.command_id), None), cmd)
    if replay is not None:
        if replay.receipt is None:
            return {"http": replay.http, "code": replay.code}, state
        return {"http": 200, "code": None, "revision": replay.receipt.revision}, state
    answer: Answer
    new: Handoff | None
    if cmd.operation is Op.SEND:
        session = inp.get("session")
        refusal = addressed_refusal(cmd, session_found=isinstance(session, Mapping),
                                    receiver_writable=bool(inp.get("receiver_writable")), exists=h is not None)
        if refusal is not None:
            answer, new = refusal, None
        else:
            assert isinstance(session, Mapping)
            source = session.get("source_id")
            answer, new = Answer(http=200), new_handoff(cmd, None if source is None else str(source))
    else:
        lease_ms = inp.get("lease_ms", LEASE_MS)
        answer, new = on_handoff(h, cmd, _fact_of(inp), lease_ms if isinstance(lease_ms, int) else LEASE_MS)
    if new is None:
        return {"http": answer.http, "code": answer.code}, state
    revision = 1 if h is None else h.revision + 1
    receipt = Receipt(command_id=cmd.command_id, actor=cmd.actor, fingerprint=cmd.fingerprint(), kind=HANDOFF,
                      resource_id=cmd.resource_id, revision=revision, project_seq=None, committed_at_ms=cmd.now_ms)
    return ({"http": 200, "code": None, "revision": revision},
            _PartState(replace(new, revision=revision), state.receipts | {receipt}))


def _matches(expected: Mapping[str, object], output: Mapping[str, object]) -> bool:
    return all(output.get(k) == v for k, v in expected.items())


def _step(state: _PartState, inp: Input, output: Output) -> list[_PartState]:
    answers = [_answer(state, inp, now) for now in _times(inp, output)]
    if output is None:
        # Unanswered: it took effect (the model's answer at some time) or it did not.
        return list(dict.fromkeys([*(nxt for _, nxt in answers), state]))
    return list(dict.fromkeys(nxt for expected, nxt in answers if _matches(expected, output)))


def _effect_free(inp: Input, output: Output) -> bool:
    # A status read never changes the handoff; nor does a write the target refused.
    return inp.get("op") == "handoff.status" or (output is not None and output.get("http") != 200)


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
    return f"{head} -> {'unknown' if output is None else describe_answer(output)}"


def _describe_state(state: _PartState) -> str:
    h = state.handoff
    if h is None:
        return "no handoff"
    return (
        f"rev {h.revision} {h.status} claim={h.claim_id} attempts={h.attempt_count} "
        f"outcome={h.outcome} expires={h.claim_expires_at_ms}"
    )


_ANSWER = re.compile(r"(\d{3})(?: (?!rev )([a-z_]+))?(?: rev (\d+))?")


def describe_answer(answer: Mapping[str, object]) -> str:
    """An answer as status, code, revision and (for a status read) the record's fields:
    ``409 stale_revision``, ``200 rev 3 [accepted claim=c1 attempts=1]``."""
    text = f"{answer.get('http')} {answer.get('code') or ''}".strip()
    if answer.get("revision") is not None:
        text += f" rev {answer['revision']}"
    rec = answer.get("record")
    if isinstance(rec, Mapping):
        text += f" [{rec.get('status')} claim={rec.get('claim_id')} attempts={rec.get('attempt_count')}]"
    return text


def answer_parts(text: str) -> tuple[int, str | None, int | None] | None:
    """The status, error code and revision of an answer ``describe_answer`` wrote."""
    match = _ANSWER.match(text)
    if match is None:
        return None
    return int(match[1]), match[2], None if match[3] is None else int(match[3])


def _describe_expected(state: _PartState, inp: Input) -> str:
    answers = dict.fromkeys(describe_answer(_answer(state, inp, now)[0]) for now in _times(inp, None))
    return " or ".join(answers)


LEDGER: Model[_PartState] = Model(
    name="ledger",
    init=lambda: _PartState(None, frozenset()),
    step=_step,
    partition=lambda inp: str(inp.get("handoff_id")),
    effect_free=_effect_free,
    describe_operation=_describe_operation,
    describe_state=_describe_state,
    describe_expected=_describe_expected,
)
