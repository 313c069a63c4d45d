"""The handoff guide's two-account flow, judged on what the CLI's remote verbs print and what the
server then holds (the ``remote`` capability)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from conformance.marks import reads
from conformance.profiles.aidememo_local.remote import P1, P2, REMOTE_SOURCE, TwoAccounts
from conformance.profiles.aidememo_local.world import LocalWorld

OVERRIDE = "--actor-id/--from cannot override actor identity for a remote profile"


def _ids(page: Any) -> list[str]:
    return [entry["record"]["handoff_id"] for entry in page["assignments"]]


def _sent(world: LocalWorld) -> tuple[TwoAccounts, str, Any]:
    """Two logged-in accounts and (the session, the send's answer) of one handoff from the first."""
    accounts = TwoAccounts.open(world)
    accounts.login()
    session_id = accounts.session()
    return accounts, session_id, accounts.send(session_id)


def _refusal(done: Any) -> str:
    assert done.exit_code != 0, "the command was accepted"
    return str(done.stderr.decode(errors="replace").strip())


@pytest.mark.requirement("AML-REM-1")
def test_two_profiles_complete_a_remote_handoff(world: LocalWorld) -> None:
    accounts = TwoAccounts.open(world)
    accounts.login()
    listed = accounts.run(P1, "auth", "list")
    assert listed.exit_code == 0 and all(f"profile={name}" in listed.text() for name in (P1, P2)), listed.text()
    session_id = accounts.session()
    sent = accounts.send(session_id)
    handoff_id = sent["handoff_id"]
    assert sent["actor_id"] == P1 and sent["to_actor"] == P2, sent
    assert _ids(accounts.remote(P2, "inbox", "--source-id", REMOTE_SOURCE)) == [handoff_id], "not in the receiver's inbox"
    assert handoff_id not in _ids(accounts.remote(P1, "inbox")), "the sender's own inbox shows it"
    accounts.remote(P2, "accept", handoff_id)
    fact_id = accounts.result_fact(session_id)
    returned = accounts.remote(P2, "return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    assert (returned["outcome"], returned["result_fact_id"]) == ("succeeded", fact_id), returned
    outbox = accounts.remote(P1, "outbox")
    assert _ids(outbox) == [handoff_id], outbox
    record = outbox["assignments"][0]["record"]
    assert (record["status"], record["outcome"], record["result_fact_id"]) == ("completed", "succeeded", fact_id), record
    server = accounts.record(handoff_id)
    assert (server["status"], server["result_fact_id"], server["from_actor"], server["to_actor"]) == (
        "completed", fact_id, P1, P2), server


@reads("AML-REM-2", "materialize", "exports")
def test_accept_materializes_into_the_receivers_store(world: LocalWorld) -> None:
    accounts, session_id, sent = _sent(world)
    # The guide's form: eval "$(aidememo --store ./codex-p2.sqlite handoff --remote-profile codex-p2 accept ID)"
    done = accounts.run(P2, "handoff", "--remote-profile", P2, "accept", sent["handoff_id"])
    assert done.exit_code == 0, done.stderr.decode(errors="replace")
    shell = subprocess.run(["bash", "-c", 'eval "$1" && printf "%s\\n" "$AIDEMEMO_SESSION_ID" "$AIDEMEMO_SOURCE_ID" '
                            '"$AIDEMEMO_ACTOR_ID"', "accept", done.text()], capture_output=True, text=True,
                           timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert shell.returncode == 0 and shell.stdout.splitlines() == [session_id, REMOTE_SOURCE, P2], (
        f"the accept's exports do not evaluate to the session, source and bearer actor: {done.text()!r}")
    context_ids = [line.split(":", 1)[1].strip() for line in done.text().splitlines()
                   if line.startswith("# local context fact:")]
    assert len(context_ids) == 1, f"no '# local context fact:' line: {done.text()!r}"
    fact = accounts.json(P2, "fact", "get", context_ids[0], "--source-id", REMOTE_SOURCE)
    assert fact.get("content") == sent["content"], "the receiver's store does not hold the context packet"
    resumed = accounts.run(P2, "session", "resume", "--source-id", REMOTE_SOURCE, session_id)
    assert resumed.exit_code == 0, f"the session is not in the receiver's store: {resumed.stderr.decode(errors='replace')}"


@pytest.mark.requirement("AML-REM-3")
def test_identity_comes_only_from_the_token(world: LocalWorld) -> None:
    accounts, session_id, sent = _sent(world)
    handoff_id = sent["handoff_id"]
    accounts.remote(P2, "accept", handoff_id)
    refusals = {
        "inbox --actor-id": ("inbox", "--actor-id", P1),
        "outbox --actor-id": ("outbox", "--actor-id", P2),
        "status --actor-id": ("status", "--actor-id", P1, handoff_id),
        "accept --actor-id": ("accept", "--actor-id", P1, handoff_id),
        "send --from": ("send", P2, "--from", P2, "--source-id", REMOTE_SOURCE, session_id),
    }
    for name, words in refusals.items():
        line = _refusal(accounts.run(P1, "handoff", "--remote-profile", P1, *words))
        assert OVERRIDE in line, f"{name}: {line!r}"
    # The sender's token cannot accept what is addressed to the receiver, whatever it claims.
    line = _refusal(accounts.run(P1, "handoff", "--remote-profile", P1, "accept", handoff_id))
    assert "not addressed to authenticated actor codex-p1" in line, line
    assert accounts.record(handoff_id)["claim_id"] is not None and accounts.commits(handoff_id) == 2


@reads("AML-REM-4", "rerun", "advance")
def test_reruns_recover_instead_of_repeating(world: LocalWorld) -> None:
    accounts, session_id, sent = _sent(world)
    handoff_id = sent["handoff_id"]
    first = accounts.remote(P2, "accept", handoff_id)
    assert first["recovered"] is False, first
    again = accounts.remote(P2, "accept", handoff_id)
    assert again["recovered"] is True and (again["claim_id"], again["command_id"]) == (
        first["claim_id"], first["command_id"]), again
    assert accounts.commits(handoff_id) == 2, "a rerun accept made a new transition"
    fact_id = accounts.result_fact(session_id)
    words = ("return", "--outcome", "failed", "--result-fact-id", fact_id, handoff_id)
    failed = accounts.remote(P2, *words)
    replay = accounts.remote(P2, *words)
    assert failed["recovered"] is False and replay["recovered"] is True, (failed, replay)
    assert replay["command_id"] == failed["command_id"] and accounts.commits(handoff_id) == 3, (
        "a rerun return made a new transition")
    second = accounts.remote(P2, "accept", handoff_id)
    assert second["recovered"] is False and second["claim_id"] != first["claim_id"], (
        f"the accept after a failed outcome did not advance to a new claim: {second}")
    server = accounts.record(handoff_id)
    assert (server["attempt_count"], server["claim_id"], accounts.commits(handoff_id)) == (2, second["claim_id"], 4), server


@pytest.mark.requirement("AML-REM-5")
def test_a_send_rerun_makes_no_second_handoff(world: LocalWorld) -> None:
    accounts, session_id, first = _sent(world)
    again = accounts.send(session_id)
    assert again["handoff_id"] == first["handoff_id"] and again["recovered"] is True, again
    assert accounts.handoffs() == [first["handoff_id"]], "the rerun created a second handoff"
