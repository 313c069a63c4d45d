"""The handoff transitions without I/O: every row of upstream's lease state machine."""

from __future__ import annotations

from typing import Any

import pytest

from aidememo_ref import LedgerError
from aidememo_ref._state import LEASE_MS, accept, claim_is_stale, heartbeat, new_handoff, return_result

NOW = 1_000_000


def record(**changes: Any) -> dict[str, Any]:
    base = new_handoff(handoff_id="h", session_id="s", source_id="src", from_actor="a", to_actor="b",
                       focus=None, done_when=None, context_id=None)
    base.update(changes)
    return base


def accepted(claim: str = "c1", at: int = NOW, **changes: Any) -> dict[str, Any]:
    return record(status="accepted", claim_id=claim, claim_heartbeat_at_ms=at,
                  claim_expires_at_ms=at + LEASE_MS, attempt_count=1, **changes)


FACT = {"fact_id": "f", "session_id": "s", "source_id": "src", "actor_id": "b"}


def conflict(fn: Any, *args: Any) -> str:
    with pytest.raises(LedgerError) as info:
        fn(*args)
    assert info.value.code == "handoff_conflict", info.value.code
    return info.value.message.removeprefix("handoff conflict: ")


def test_accept_pending_begins_a_claim_with_a_lease() -> None:
    out = accept(record(), "b", "c1", NOW)
    assert (out["status"], out["claim_id"], out["attempt_count"]) == ("accepted", "c1", 1)
    assert out["claim_expires_at_ms"] - out["claim_heartbeat_at_ms"] == LEASE_MS == 120_000


def test_only_the_receiver_may_transition() -> None:
    for fn, args in ((accept, ("c1", NOW)), (heartbeat, ("c1", NOW)), (return_result, ("c1", FACT, "succeeded", NOW))):
        with pytest.raises(LedgerError) as info:
            fn(accepted(), "a", *args)
        assert (info.value.code, info.value.status) == ("handoff_actor_mismatch", 403)


def test_same_live_claim_is_a_no_op_and_keeps_the_attempt() -> None:
    rec = accepted()
    assert accept(rec, "b", "c1", NOW + 5) == rec


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
    assert (again["claim_id"], again["attempt_count"]) == ("c2", 2)
    # The replaced claim can neither return nor heartbeat.
    assert conflict(return_result, again, "b", "c1", FACT, "succeeded", late) == (
        "result claim does not match the active handoff claim")
    assert conflict(heartbeat, again, "b", "c1", late) == "heartbeat claim does not match the active handoff claim"


def test_heartbeat_rules() -> None:
    assert conflict(heartbeat, record(), "b", "c1", NOW) == "handoff must be accepted before heartbeat"
    assert conflict(heartbeat, accepted(), "b", "zz", NOW) == "heartbeat claim does not match the active handoff claim"
    failed = {**accepted(), "outcome": "failed", "claim_heartbeat_at_ms": None, "claim_expires_at_ms": None}
    assert conflict(heartbeat, failed, "b", "c1", NOW) == "failed handoff claim cannot be heartbeated"
    assert conflict(heartbeat, accepted(), "b", "c1", NOW + LEASE_MS) == "handoff claim lease expired"
    renewed = heartbeat(accepted(), "b", "c1", NOW + 10)
    assert renewed["claim_expires_at_ms"] == NOW + 10 + LEASE_MS
    assert (renewed["claim_id"], renewed["attempt_count"]) == ("c1", 1)


@pytest.mark.parametrize(
    ("fact", "message"),
    [
        ({**FACT, "session_id": "other"}, "result fact belongs to a different session"),
        ({**FACT, "source_id": None}, "result fact belongs to a different source"),
        ({**FACT, "actor_id": "a"}, "result fact was not written by the receiving actor"),
    ],
)
def test_return_fails_closed_on_foreign_evidence(fact: dict[str, Any], message: str) -> None:
    assert conflict(return_result, accepted(), "b", "c1", fact, "succeeded", NOW) == message


def test_return_order_and_outcomes() -> None:
    assert conflict(return_result, record(), "b", "c1", FACT, "succeeded", NOW) == (
        "handoff must be accepted before returning a result")
    assert conflict(return_result, accepted(), "b", "c1", FACT, "succeeded", NOW + LEASE_MS) == (
        "handoff claim lease expired before result return")
    done = return_result(accepted(), "b", "c1", FACT, "succeeded", NOW)
    assert (done["status"], done["result_fact_id"], done["outcome"]) == ("completed", "f", "succeeded")
    assert done["claim_expires_at_ms"] is not None  # claim fields are kept on success
    assert return_result(done, "b", "c1", FACT, "succeeded", NOW + 10 * LEASE_MS) == done
    assert conflict(return_result, done, "b", "c1", FACT, "failed", NOW) == (
        "handoff is already completed with different evidence")
    assert conflict(accept, done, "b", "c9", NOW) == "completed handoff cannot be accepted"


def test_failed_return_keeps_the_claim_without_a_lease_and_allows_a_new_claim() -> None:
    failed = return_result(accepted(), "b", "c1", FACT, "failed", NOW)
    assert (failed["status"], failed["outcome"], failed["claim_id"]) == ("accepted", "failed", "c1")
    assert failed["claim_heartbeat_at_ms"] is None and failed["claim_expires_at_ms"] is None
    assert not claim_is_stale(failed, NOW + 10 * LEASE_MS)
    assert accept(failed, "b", "c1", NOW) == failed  # same claim: no-op (wire spec §8 item 4)
    retry = accept(failed, "b", "c2", NOW + 1)
    assert (retry["attempt_count"], retry["outcome"], retry["result_fact_id"]) == (2, None, None)


def test_text_rules_trim_with_rusts_whitespace_set() -> None:
    import sys

    from aidememo_ref._state import text_problem
    from aidememo_ref._text import RUST_WHITESPACE, ascii_lower, trim

    python_space = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()}
    assert python_space - set(RUST_WHITESPACE) == set("\x1c\x1d\x1e\x1f")  # the only disagreement
    assert trim("\u3000\xa0 x\x1f\t") == "x\x1f" and ascii_lower("AİK\u212a") == "aİk\u212a"
    # "\x1f" is not blank upstream: it is refused for its control character, not for its size.
    assert (text_problem("\x1f", 64), text_problem(" \u2003", 64)) == ("control", "size")
