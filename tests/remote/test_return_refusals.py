"""A remote return is refused, fail-closed, for each rule: nothing reaches the server's handoff.

The client's pre-checks (upstream ``cmd/remote_handoff.rs``) run on the receiver's own store
before anything is uploaded; the server's rules catch what a client could not know.
"""

from __future__ import annotations

import pytest

from tests.remote.conftest import SOURCE, World


@pytest.fixture
def accepted(world: World) -> tuple[str, str]:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    world.remote("codex-p2", "accept", handoff_id)
    return session_id, handoff_id


def _refused(world: World, handoff_id: str, fact_id: str, outcome: str = "succeeded",
             account: str = "codex-p2") -> str:
    before = world.status(handoff_id)
    message = world.refused(account, "handoff", "--remote-profile", account, "return", "--outcome", outcome,
                            "--result-fact-id", fact_id, handoff_id)
    assert world.status(handoff_id) == before, "a refused return changed the handoff"
    return message


def test_outcome_must_be_succeeded_or_failed(world: World, accepted: tuple[str, str]) -> None:
    session_id, handoff_id = accepted
    assert _refused(world, handoff_id, world.result_fact(session_id), "done") == \
        "invalid input: outcome must be succeeded or failed"


def test_result_id_must_be_a_local_ulid(world: World, accepted: tuple[str, str]) -> None:
    assert _refused(world, accepted[1], "fact-1") == "invalid input: result_fact_id must be a valid local fact ULID"


def test_fact_must_exist_in_the_handoff_source(world: World, accepted: tuple[str, str]) -> None:
    session_id, handoff_id = accepted
    other = world.j("codex-p2", "fact", "add", "written elsewhere", "--type", "note", "--source-id", "project:other",
                    "--actor-id", "codex-p2", "--entities", session_id)["id"]
    assert _refused(world, handoff_id, other) == f"fact not found: '{other}'"
    assert _refused(world, handoff_id, "01JBBBBBBBBBBBBBBBBBBBBBBB") == "fact not found: '01JBBBBBBBBBBBBBBBBBBBBBBB'"


def test_fact_must_be_attached_to_the_session(world: World, accepted: tuple[str, str]) -> None:
    handoff_id = accepted[1]
    loose = world.j("codex-p2", "fact", "add", "not on the session", "--type", "note", "--source-id", SOURCE,
                    "--actor-id", "codex-p2")["id"]
    assert _refused(world, handoff_id, loose) == (
        f"invalid input: result fact {loose} is not attached to remote handoff session {accepted[0]}")


def test_fact_must_be_written_by_the_bearer_actor(world: World, accepted: tuple[str, str]) -> None:
    session_id, handoff_id = accepted
    borrowed = world.j("codex-p2", "fact", "add", "someone else's words", "--type", "note", "--source-id", SOURCE,
                       "--actor-id", "hermes", "--session-id", session_id)["id"]
    assert _refused(world, handoff_id, borrowed) == (
        f"invalid input: result fact {borrowed} was not written by authenticated remote actor codex-p2")


def test_a_server_copy_with_other_evidence_is_refused(world: World, accepted: tuple[str, str]) -> None:
    session_id, handoff_id = accepted
    fact_id = world.result_fact(session_id)
    # Hermes published a fact under the same id first: the client never overwrites or adopts it.
    world.http.post("/v1/projects/project_cli_remote/facts", headers={"Authorization": "Bearer hermes-token-0123456789"},
                    json={"command_id": "hermes-squat", "payload": {"fact_id": fact_id, "session_id": session_id,
                                                                    "content": "squatted"}}).raise_for_status()
    assert _refused(world, handoff_id, fact_id) == \
        "invalid input: remote canonical resource already exists with different evidence"


def test_a_non_receiver_is_refused_by_the_server(world: World, accepted: tuple[str, str]) -> None:
    session_id, handoff_id = accepted
    # Hermes' own store has a fact on an entity named like the session: every local check passes.
    hermes_fact = world.j("hermes", "fact", "add", "hermes evidence", "--type", "note", "--source-id", SOURCE,
                          "--actor-id", "hermes", "--entities", session_id)["id"]
    assert _refused(world, handoff_id, hermes_fact, account="hermes") == (
        "invalid input: remote server returned HTTP 403: authenticated actor is not allowed to perform this handoff"
        " action")


def test_different_evidence_after_a_return_is_unsafe(world: World, accepted: tuple[str, str]) -> None:
    session_id, handoff_id = accepted
    first = world.result_fact(session_id)
    world.remote("codex-p2", "return", "--outcome", "failed", "--result-fact-id", first, handoff_id)
    second = world.result_fact(session_id, content="A different result")
    assert _refused(world, handoff_id, second, "failed") == ("invalid input: remote handoff already contains different"
                                                             " result evidence; automatic retry recovery is unsafe")


def test_return_before_accept_is_refused(world: World) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    world.j("codex-p2", "session", "new", "--source-id", SOURCE, "local only")  # a store for codex-p2
    assert _refused(world, handoff_id, "01JBBBBBBBBBBBBBBBBBBBBBBB") == \
        "internal error: remote response omitted string field claim_id"


def test_the_server_refuses_a_fact_from_another_actor(world: World, accepted: tuple[str, str]) -> None:
    # Past every client check (hermes' fact uploaded by hermes), the server's own rule bites.
    session_id, handoff_id = accepted
    world.http.post("/v1/projects/project_cli_remote/facts", headers={"Authorization": "Bearer hermes-token-0123456789"},
                    json={"command_id": "hf", "payload": {"fact_id": "fact_hermes", "session_id": session_id,
                                                          "content": "x"}}).raise_for_status()
    revision = world.status(handoff_id)["revision"]
    claim = world.status(handoff_id)["record"]["claim_id"]
    answer = world.http.post(f"/v1/projects/project_cli_remote/handoffs/{handoff_id}/return",
                             headers={"Authorization": "Bearer codex-p2-token-0123456789"},
                             json={"command_id": "r1", "expected_revision": revision,
                                   "payload": {"claim_id": claim, "result_fact_id": "fact_hermes",
                                               "outcome": "succeeded"}})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "handoff_conflict"
