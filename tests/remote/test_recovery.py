"""The remote CLI's pure rules: derived ids (spec vectors) and the retry-state table."""

from __future__ import annotations

from typing import Any

import pytest

from aidememo_wire.ids import stable_claim_id, stable_operation_id
import httpx

from aidememo_cli._local._errors import LocalError
from aidememo_cli._remote._errors import RemoteError, client_errors
from aidememo_client.errors import AideMemoClientError, AideMemoHTTPError, ClientRefusal, MalformedAnswer, OutcomeUnknown
from aidememo_client.recovery import plan_accept, plan_heartbeat, plan_return

P, A, H = "project_cli_remote", "codex-p2", "handoff_test"


def _status(status: str = "pending", outcome: str | None = None, attempts: int = 0, claim: str | None = None,
            revision: int = 1, to: str = A, fact: str | None = None) -> dict[str, Any]:
    return {"revision": revision, "record": {
        "handoff_id": H, "session_id": "s", "source_id": "src", "from_actor": "codex-p1", "to_actor": to,
        "focus": None, "done_when": None, "context_id": None, "status": status, "claim_id": claim,
        "claim_heartbeat_at_ms": None, "claim_expires_at_ms": None, "attempt_count": attempts,
        "result_fact_id": fact, "outcome": outcome}}


def test_the_handoff_spec_vectors() -> None:
    one = stable_claim_id(P, A, H, 1)
    assert one == "claim_911b8e64e132327ac7001e821076ab4b4cab7f027546fb86337c23e2481e2fac"
    assert stable_claim_id(P, A, H, 2) == "claim_ef5637d9df4db897096cdb1267dfbba871da52cd22a9a4416cf5d1890695b023"
    assert stable_operation_id("command_accept", [P, A, H, one]) == \
        "command_accept_52fcfbc7808662889693c1d01a1c2a9f03dc495bf3623f64dd8e939b6cf08475"
    assert stable_operation_id("command_return", [P, A, H, one, "01HZZZZZZZZZZZZZZZZZZZZZZZ", "succeeded"]) == \
        "command_return_892416171d2c68436d753b3864e8031e9874139f1fc8e3b42cc0116ddb68df2a"
    assert stable_operation_id("command_heartbeat", [P, A, H, one, "2"]) == \
        "command_heartbeat_f1d6675345e216e4c21f38eda7e7b0e9dd273057564ae737e42e28c96781c7c9"
    assert stable_operation_id("command_send", [P, H]) == \
        "command_send_e605e347987bc45f5509133d981caa3a3db5a018231b8b27ebd698e4da6d3319"


def test_accept_attempts_and_recovery_follow_the_table() -> None:
    one, two = stable_claim_id(P, A, H, 1), stable_claim_id(P, A, H, 2)
    fresh = plan_accept(P, A, H, _status())
    assert (fresh.attempt, fresh.claim_id, fresh.recovered) == (1, one, False)
    assert fresh.body() == {"command_id": fresh.command_id, "expected_revision": 1, "payload": {"claim_id": one}}
    held = plan_accept(P, A, H, _status("accepted", attempts=1, claim=one, revision=2))
    assert (held.claim_id, held.recovered, held.command_id) == (one, True, fresh.command_id)
    retry = plan_accept(P, A, H, _status("accepted", "failed", attempts=1, claim=one, revision=3))
    assert (retry.attempt, retry.claim_id, retry.recovered) == (2, two, False)
    done = plan_accept(P, A, H, _status("completed", "succeeded", attempts=2, claim=two, revision=5))
    assert (done.claim_id, done.recovered) == (two, True)


@pytest.mark.parametrize(("status", "message"), [
    (_status(to="hermes"), "not addressed to authenticated actor codex-p2"),
    (_status("accepted", attempts=1, claim="claim_legacy"), "legacy or different claim"),
    (_status("completed", "failed", attempts=1), "inconsistent retry state: status=completed, outcome=failed"),
    (_status("pending", "succeeded"), "inconsistent retry state: status=pending, outcome=succeeded"),
])
def test_accept_refuses_unsafe_states(status: dict[str, Any], message: str) -> None:
    with pytest.raises(ClientRefusal, match=message):
        plan_accept(P, A, H, status)


def test_return_recovers_exactly_the_stored_evidence() -> None:
    one = stable_claim_id(P, A, H, 1)
    new = plan_return(P, A, H, _status("accepted", attempts=1, claim=one, revision=2), "01HZZZZZZZZZZZZZZZZZZZZZZZ",
                      " Succeeded ")
    assert (new.outcome, new.recovered) == ("succeeded", False)
    stored = _status("completed", "succeeded", attempts=1, claim=one, revision=3, fact="01HZZZZZZZZZZZZZZZZZZZZZZZ")
    again = plan_return(P, A, H, stored, "01HZZZZZZZZZZZZZZZZZZZZZZZ", "succeeded")
    assert again.recovered and again.command_id == new.command_id
    with pytest.raises(ClientRefusal, match="different result evidence"):
        plan_return(P, A, H, stored, "01HZZZZZZZZZZZZZZZZZZZZZZZ", "failed")
    with pytest.raises(ClientRefusal, match="outcome must be succeeded or failed"):
        plan_return(P, A, H, stored, "x", "maybe")


def test_heartbeat_names_the_revision() -> None:
    one = stable_claim_id(P, A, H, 1)
    beat = plan_heartbeat(P, A, H, _status("accepted", attempts=1, claim=one, revision=7))
    assert beat.command_id == stable_operation_id("command_heartbeat", [P, A, H, one, "7"])
    assert beat.body()["expected_revision"] == 7
    with pytest.raises(ClientRefusal, match="must be accepted before heartbeat"):
        plan_heartbeat(P, A, H, _status())


def test_an_answer_without_what_the_rules_need_is_a_malformed_answer() -> None:
    with pytest.raises(MalformedAnswer, match="remote handoff response omitted record"):
        plan_accept(P, A, H, {"revision": 1})
    with pytest.raises(MalformedAnswer, match="remote response omitted integer field revision"):
        plan_heartbeat(P, A, H, {"record": _status("accepted", claim="c")["record"]})


def test_the_planner_raises_the_clients_errors_and_never_the_command_lines() -> None:
    assert not issubclass(AideMemoClientError, LocalError)
    assert all(cls.__module__.startswith(("aidememo_client", "builtins")) for cls in MalformedAnswer.__mro__)


@pytest.mark.parametrize(("raised", "text", "kind"), [
    (ClientRefusal("outcome must be succeeded or failed"), "invalid input: outcome must be succeeded or failed",
     "RemoteRefusal"),
    (MalformedAnswer("remote response omitted string field claim_id"),
     "internal error: remote response omitted string field claim_id", "RemoteRefusal"),
    (AideMemoHTTPError(409, "stale_revision", "stale revision", b"{}"),
     "invalid input: remote server returned HTTP 409: stale revision", "RemoteHTTPError"),
    (OutcomeUnknown("POST", "/v1/x", "no answer", httpx.ConnectError("connection refused")),
     "internal error: remote server request failed: ConnectError: connection refused", "RemoteUnavailable"),
])
def test_the_command_line_converts_each_client_error_once_with_upstreams_words(
        raised: AideMemoClientError, text: str, kind: str) -> None:
    with pytest.raises(RemoteError) as caught:
        with client_errors():
            raise raised
    assert str(caught.value) == text and type(caught.value).__name__ == kind
    assert caught.value.__cause__ is None and caught.value.__suppress_context__  # no second wrapper inside

