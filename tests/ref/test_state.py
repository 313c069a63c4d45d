"""The handoff transitions without I/O: the table itself, then every row of upstream's lease
state machine as a scenario, then the diagram in the docs against the table."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import itertools
from dataclasses import replace
from pathlib import Path

import pytest

from aidememo_ref import LedgerError, _ledger
from aidememo_ref._commands import Op
from aidememo_ref._records import Handoff, LedgerFact, Outcome, Status
from aidememo_ref._state import (
    LEASE_MS,
    TRANSITIONS,
    Attempt,
    Refusal,
    claim_is_stale,
    new_handoff,
    select,
    transition,
)

NOW = 1_000_000
ROOT = Path(__file__).resolve().parents[2]
HANDOFF_OPS = (Op.ACCEPT, Op.HEARTBEAT, Op.RETURN)


def record(**changes: object) -> Handoff:
    base = new_handoff(handoff_id="h", session_id="s", source_id="src", from_actor="a", to_actor="b",
                       focus=None, done_when=None, context_id=None)
    return replace(base, **changes)  # type: ignore[arg-type]


def accepted(claim: str = "c1", at: int = NOW, **changes: object) -> Handoff:
    fields: dict[str, object] = {"status": Status.ACCEPTED, "claim_id": claim, "claim_heartbeat_at_ms": at,
                                 "claim_expires_at_ms": at + LEASE_MS, "attempt_count": 1}
    return record(**{**fields, **changes})


FACT = LedgerFact(fact_id="f", session_id="s", source_id="src", actor_id="b", content="done")


def accept(rec: Handoff, actor: str, claim: str, now: int) -> Handoff:
    return transition(rec, Attempt(op=Op.ACCEPT, actor_id=actor, claim_id=claim, now_ms=now))


def heartbeat(rec: Handoff, actor: str, claim: str, now: int) -> Handoff:
    return transition(rec, Attempt(op=Op.HEARTBEAT, actor_id=actor, claim_id=claim, now_ms=now))


def return_result(rec: Handoff, actor: str, claim: str, fact: LedgerFact, outcome: str, now: int) -> Handoff:
    return transition(rec, Attempt(op=Op.RETURN, actor_id=actor, claim_id=claim, now_ms=now, fact=fact,
                                   outcome=Outcome(outcome)))


def conflict(fn: object, *args: object) -> str:
    with pytest.raises(LedgerError) as info:
        fn(*args)  # type: ignore[operator]
    assert info.value.code == "handoff_conflict", info.value.code
    return info.value.message.removeprefix("handoff conflict: ")


# -- the table ------------------------------------------------------------------------------------
def _records() -> list[Handoff]:
    """Every shape a stored handoff takes: status x claim x lease x outcome."""
    shapes = [record()]
    for claim, lease, outcome in itertools.product(("c1", "c2"), ("live", "expired", "none"), (None, "failed")):
        at = NOW - LEASE_MS if lease == "expired" else NOW - 10
        shapes.append(accepted(claim=claim, at=at, outcome=None if outcome is None else Outcome.FAILED,
                               result_fact_id=None if outcome is None else "f"))
        if lease == "none":
            shapes[-1] = replace(shapes[-1], claim_heartbeat_at_ms=None, claim_expires_at_ms=None)
    for claim, fact_id in itertools.product(("c1", "c2"), ("f", "g")):
        shapes.append(accepted(claim=claim, status=Status.COMPLETED, result_fact_id=fact_id,
                               outcome=Outcome.SUCCEEDED))
    return shapes


def _attempts() -> list[Attempt]:
    facts = [FACT, replace(FACT, session_id="other"), replace(FACT, source_id=None), replace(FACT, actor_id="a"),
             replace(FACT, fact_id="g")]
    out = []
    for actor, claim in itertools.product(("b", "a"), ("c1", "c2")):
        out += [Attempt(op=Op.ACCEPT, actor_id=actor, claim_id=claim, now_ms=NOW),
                Attempt(op=Op.HEARTBEAT, actor_id=actor, claim_id=claim, now_ms=NOW)]
        out += [Attempt(op=Op.RETURN, actor_id=actor, claim_id=claim, now_ms=NOW, fact=fact, outcome=outcome)
                for fact, outcome in itertools.product(facts, Outcome)]
    return out


def test_every_input_finds_a_row_every_row_is_reachable_and_the_rules_do_what_it_says() -> None:
    fired = set()
    for rec, attempt in itertools.product(_records(), _attempts()):
        row = select(rec, attempt)
        assert row is not None, f"no row for {attempt} on {rec}"
        fired.add(TRANSITIONS.index(row))
        if isinstance(row.target, Refusal):
            with pytest.raises(LedgerError) as info:
                transition(rec, attempt)
            assert info.value.code == row.target.code
            if row.target.code == "handoff_conflict":
                assert info.value.message == f"handoff conflict: {row.target.detail}"
        else:
            moved = transition(rec, attempt)
            assert moved.status is row.target
            assert moved == replace(row.effect(rec, attempt), status=row.target)
    assert fired == set(range(len(TRANSITIONS))), [TRANSITIONS[i] for i in set(range(len(TRANSITIONS))) - fired]


def test_the_receiver_check_comes_first_for_every_operation() -> None:
    for op in HANDOFF_OPS:
        first = next(r for r in TRANSITIONS if r.op is op)
        assert (first.source, first.guard.__name__) == (None, "not_receiver")
        assert isinstance(first.target, Refusal) and first.target.code == "handoff_actor_mismatch"


def test_a_table_without_a_row_behaves_without_it() -> None:
    """The rules read the table: dropping the receiver rows lets anyone accept."""
    table = tuple(r for r in TRANSITIONS if r.guard.__name__ != "not_receiver")
    moved = transition(record(), Attempt(op=Op.ACCEPT, actor_id="a", claim_id="c1", now_ms=NOW), table)
    assert moved.status is Status.ACCEPTED
    with pytest.raises(LedgerError):
        accept(record(), "a", "c1", NOW)


# -- upstream's scenarios, message by message -----------------------------------------------------
def test_accept_pending_begins_a_claim_with_a_lease() -> None:
    out = accept(record(), "b", "c1", NOW)
    assert (out.status, out.claim_id, out.attempt_count) == (Status.ACCEPTED, "c1", 1)
    assert out.claim_expires_at_ms is not None and out.claim_heartbeat_at_ms is not None
    assert out.claim_expires_at_ms - out.claim_heartbeat_at_ms == LEASE_MS == 120_000


def test_only_the_receiver_may_transition() -> None:
    for fn, args in ((accept, ("c1", NOW)), (heartbeat, ("c1", NOW)), (return_result, ("c1", FACT, "succeeded", NOW))):
        with pytest.raises(LedgerError) as info:
            fn(accepted(), "a", *args)  # type: ignore[operator]
        assert (info.value.code, info.value.status) == ("handoff_actor_mismatch", 403)


def test_same_live_claim_is_a_no_op_and_keeps_the_attempt() -> None:
    rec = accepted()
    assert accept(rec, "b", "c1", NOW + 5) is rec


def test_lease_is_stale_exactly_at_expiry() -> None:
    rec = accepted(at=1030)
    assert not claim_is_stale(rec, 1030 + LEASE_MS - 1)
    assert claim_is_stale(rec, 1030 + LEASE_MS)


def test_competing_claims() -> None:
    rec = accepted()
    assert conflict(accept, rec, "b", "c2", NOW + 1) == "handoff is already claimed by another live worker"
    late = NOW + LEASE_MS
    assert conflict(accept, rec, "b", "c1", late) == "handoff claim lease expired; acquire a new claim"
    again = accept(rec, "b", "c2", late)
    assert (again.claim_id, again.attempt_count) == ("c2", 2)
    # The replaced claim can neither return nor heartbeat.
    assert conflict(return_result, again, "b", "c1", FACT, "succeeded", late) == (
        "result claim does not match the active handoff claim")
    assert conflict(heartbeat, again, "b", "c1", late) == "heartbeat claim does not match the active handoff claim"


def test_heartbeat_rules() -> None:
    assert conflict(heartbeat, record(), "b", "c1", NOW) == "handoff must be accepted before heartbeat"
    assert conflict(heartbeat, accepted(), "b", "zz", NOW) == "heartbeat claim does not match the active handoff claim"
    failed = accepted(outcome=Outcome.FAILED, claim_heartbeat_at_ms=None, claim_expires_at_ms=None)
    assert conflict(heartbeat, failed, "b", "c1", NOW) == "failed handoff claim cannot be heartbeated"
    assert conflict(heartbeat, accepted(), "b", "c1", NOW + LEASE_MS) == "handoff claim lease expired"
    renewed = heartbeat(accepted(), "b", "c1", NOW + 10)
    assert renewed.claim_expires_at_ms == NOW + 10 + LEASE_MS
    assert (renewed.claim_id, renewed.attempt_count) == ("c1", 1)


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        (replace(FACT, session_id="other"), "result fact belongs to a different session"),
        (replace(FACT, source_id=None), "result fact belongs to a different source"),
        (replace(FACT, actor_id="a"), "result fact was not written by the receiving actor"),
    ],
)
def test_return_fails_closed_on_foreign_evidence(fact: LedgerFact, message: str) -> None:
    assert conflict(return_result, accepted(), "b", "c1", fact, "succeeded", NOW) == message


def test_return_order_and_outcomes() -> None:
    assert conflict(return_result, record(), "b", "c1", FACT, "succeeded", NOW) == (
        "handoff must be accepted before returning a result")
    assert conflict(return_result, accepted(), "b", "c1", FACT, "succeeded", NOW + LEASE_MS) == (
        "handoff claim lease expired before result return")
    done = return_result(accepted(), "b", "c1", FACT, "succeeded", NOW)
    assert (done.status, done.result_fact_id, done.outcome) == (Status.COMPLETED, "f", Outcome.SUCCEEDED)
    assert done.claim_expires_at_ms is not None  # claim fields are kept on success
    assert return_result(done, "b", "c1", FACT, "succeeded", NOW + 10 * LEASE_MS) is done
    assert conflict(return_result, done, "b", "c1", FACT, "failed", NOW) == (
        "handoff is already completed with different evidence")
    assert conflict(accept, done, "b", "c9", NOW) == "completed handoff cannot be accepted"


def test_failed_return_keeps_the_claim_without_a_lease_and_allows_a_new_claim() -> None:
    failed = return_result(accepted(), "b", "c1", FACT, "failed", NOW)
    assert (failed.status, failed.outcome, failed.claim_id) == (Status.ACCEPTED, Outcome.FAILED, "c1")
    assert failed.claim_heartbeat_at_ms is None and failed.claim_expires_at_ms is None
    assert not claim_is_stale(failed, NOW + 10 * LEASE_MS)
    assert accept(failed, "b", "c1", NOW) is failed  # same claim: no-op (wire spec §8 item 4)
    retry = accept(failed, "b", "c2", NOW + 1)
    assert (retry.attempt_count, retry.outcome, retry.result_fact_id) == (2, None, None)


def test_the_attempt_counter_never_wraps() -> None:
    assert conflict(accept, accepted(outcome=Outcome.FAILED, attempt_count=(1 << 64) - 1), "b", "c2", NOW) == (
        "handoff attempt counter overflow")


# -- the docs -------------------------------------------------------------------------------------
def test_the_architecture_diagram_is_the_table() -> None:
    spec = importlib.util.spec_from_file_location("state_diagram", ROOT / "scripts" / "state_diagram.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    docs = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert module.render(TRANSITIONS) in docs, "docs/ARCHITECTURE.md is stale: run python scripts/state_diagram.py"
    assert module.render_before(_ledger.BEFORE_TABLE) in docs, (
        "docs/ARCHITECTURE.md is stale: run python scripts/state_diagram.py")


def test_the_transition_runs_the_listed_checks_in_order_then_the_table() -> None:
    """``_ledger.BEFORE_TABLE`` (what the docs list) is what ``_transition`` calls, in that order, before the table."""
    listed = {step.__name__ for step in _ledger.BEFORE_TABLE} | {"transition"}
    tree = ast.parse(inspect.getsource(_ledger._transition))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = [name for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset))
             if (name := getattr(node.func, "id", getattr(node.func, "attr", None))) in listed]
    assert names == [*(step.__name__ for step in _ledger.BEFORE_TABLE), "transition"]


def test_text_rules_trim_with_rusts_whitespace_set() -> None:
    import sys

    from aidememo_ref._state import text_problem
    from refkit.text import RUST_WHITESPACE, ascii_lower, trim

    python_space = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert python_space - set(RUST_WHITESPACE) == set("\x1c\x1d\x1e\x1f")  # the only disagreement
    assert trim("\u3000\xa0 x\x1f\t") == "x\x1f" and ascii_lower("AİK\u212a") == "aİk\u212a"
    # "\x1f" is not blank upstream: it is refused for its control character, not for its size.
    assert (text_problem("\x1f", 64), text_problem(" \u2003", 64)) == ("control", "size")


def test_text_control_rule_is_unicodes_cc_but_tab_and_line_ends() -> None:
    import sys
    import unicodedata

    from aidememo_ref._state import text_problem

    # Lone surrogates never get here: the wire refuses them (aidememo_wire.canonical).
    points = [c for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF]
    refused = {c for c in points if text_problem(f"a{chr(c)}", 64) == "control"}
    expected = {c for c in points if unicodedata.category(chr(c)) == "Cc" and chr(c) not in "\n\r\t"}
    assert refused == expected
