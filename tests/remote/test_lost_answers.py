"""Answers lost after the server applied the write: one identical retry, then recovery by rerun.

The proxy forwards each request to the real server, lets it commit, and closes the client's
connection instead of answering. Whatever happens, the server must hold exactly one transition
per intent and the rerun must converge on it (``recovered: true``, no duplicate handoff).
"""

from __future__ import annotations

from tests.remote.conftest import World
from tests.remote.proxy import DroppingProxy


def _post(suffix: str):  # type: ignore[no-untyped-def]
    return lambda method, path: method == "POST" and path.endswith(suffix)


def test_accept_answer_lost_once_is_retried_with_the_identical_body(world: World, proxy: DroppingProxy) -> None:
    handoff_id = world.send(world.session())["handoff_id"]
    drops = proxy.drop(_post("/accept"), count=1)
    accepted = world.remote("codex-p2", "accept", handoff_id)
    # The retry met the stored receipt: same command, one transition.
    assert drops.dropped and accepted["recovered"] is False
    assert accepted["receipt"]["command_id"] == accepted["command_id"] and accepted["receipt"]["revision"] == 2
    assert [p for m, p in proxy.seen if m == "POST" and p.endswith("/accept")] == [f"/v1/projects/project_cli_remote"
                                                                                  f"/handoffs/{handoff_id}/accept"] * 2
    assert world.commits(handoff_id) == 2


def test_accept_lost_twice_fails_then_the_rerun_recovers(world: World, proxy: DroppingProxy) -> None:
    handoff_id = world.send(world.session())["handoff_id"]
    proxy.drop(_post("/accept"), count=2)
    message = world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", "accept", handoff_id)
    assert message.startswith("internal error: remote server request failed: ")
    assert world.status(handoff_id)["record"]["status"] == "accepted"  # the server did apply it
    rerun = world.remote("codex-p2", "accept", handoff_id)
    assert rerun["recovered"] is True and rerun["receipt"] is None
    assert world.status(handoff_id)["record"]["claim_id"] == rerun["claim_id"]
    assert world.commits(handoff_id) == 2  # send + one accept: the rerun made no new transition


def test_return_lost_twice_then_the_rerun_recovers(world: World, proxy: DroppingProxy) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    world.remote("codex-p2", "accept", handoff_id)
    fact_id = world.result_fact(session_id)
    proxy.drop(_post("/return"), count=2)
    args = ("return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    assert "remote server request failed" in world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", *args)
    assert world.status(handoff_id)["record"]["status"] == "completed"
    rerun = world.remote("codex-p2", *args)
    assert rerun["recovered"] is True and rerun["receipt"] is None
    assert world.commits(handoff_id) == 3  # send, accept, return


def test_return_fact_upload_lost_is_finished_by_the_rerun(world: World, proxy: DroppingProxy) -> None:
    session_id = world.session()
    handoff_id = world.send(session_id)["handoff_id"]
    world.remote("codex-p2", "accept", handoff_id)
    fact_id = world.result_fact(session_id)
    proxy.drop(_post("/facts"), count=2)
    args = ("return", "--outcome", "succeeded", "--result-fact-id", fact_id, handoff_id)
    assert "remote server request failed" in world.refused("codex-p2", "handoff", "--remote-profile", "codex-p2", *args)
    assert world.status(handoff_id)["record"]["status"] == "accepted"  # the fact landed, the return was never sent
    returned = world.remote("codex-p2", *args)
    assert returned["recovered"] is False and returned["receipt"]["revision"] == 3
    assert world.commits(handoff_id) == 3


def test_send_answer_lost_queues_it_and_the_rerun_creates_no_second_handoff(world: World,
                                                                             proxy: DroppingProxy) -> None:
    session_id = world.session()
    proxy.drop(_post("/handoffs"), count=2)
    lost = world.send(session_id)
    assert (lost["status"], lost["dispatched"], lost["queued"]) == ("failed", False, True)
    assert "remote server request failed" in lost["last_error"] and lost["actor_id"] == "codex-p1"
    handoff_id = lost["handoff_id"]
    assert world.handoffs() == [handoff_id]  # the server committed it before the answer was lost

    queued = world.j("codex-p1", "replica", "outbox", "--remote-profile", "codex-p1")
    assert queued["count"] == 1 and queued["entries"][0]["handoff_id"] == handoff_id
    assert queued["entries"][0]["state"] == "failed"

    rerun = world.send(session_id)
    assert rerun["recovered"] is True and rerun["dispatched"] is True and rerun["status"] == "committed"
    assert (rerun["handoff_id"], rerun["context_id"], rerun["operation_id"]) == (
        handoff_id, lost["context_id"], lost["operation_id"])
    assert rerun["receipt"]["revision"] == 1  # the server replayed the send's receipt
    assert world.handoffs() == [handoff_id] and world.commits(handoff_id) == 1
    assert world.j("codex-p1", "replica", "outbox")["count"] == 0
    # Once committed, the same send answers from the outbox without a request.
    before = len(proxy.seen)
    again = world.send(session_id)
    assert again["recovered"] is True and again["receipt"] is None and again["status"] == "committed"
    assert len(proxy.seen) == before


def test_replica_publish_finishes_a_queued_send_with_its_reserved_ids(world: World, proxy: DroppingProxy) -> None:
    session_id = world.session()
    proxy.drop(_post("/handoffs"), count=2)
    handoff_id = world.send(session_id)["handoff_id"]
    before = world.status(handoff_id)
    published = world.j("codex-p1", "replica", "publish", "--remote-profile", "codex-p1")
    assert (published["attempted"], published["published"], published["failed"], published["conflicts"]) == (1, 1, 0, 0)
    entry = published["entries"][0]
    assert entry["handoff_id"] == handoff_id and entry["state"] == "committed" and entry["last_error"] is None
    assert world.status(handoff_id) == before and world.handoffs() == [handoff_id]
    assert world.ok("codex-p1", "replica", "outbox").out == "remote outbox: empty\n"


def test_a_changed_send_while_one_is_pending_is_refused(world: World, proxy: DroppingProxy) -> None:
    session_id = world.session()
    proxy.drop(_post("/handoffs"), count=2)
    world.send(session_id)
    message = world.refused("codex-p1", "handoff", "--remote-profile", "codex-p1", "send", "--source-id",
                            "project:aidememo", "--focus", "Something else", "codex-p2", session_id)
    assert "a pending remote send for this session route has different evidence" in message


def test_a_changed_send_after_commit_starts_a_new_assignment(world: World) -> None:
    session_id = world.session()
    first = world.send(session_id)
    second = world.send(session_id, focus="A second, different review")
    assert second["recovered"] is False and second["handoff_id"] != first["handoff_id"]
    assert sorted(world.handoffs()) == sorted([first["handoff_id"], second["handoff_id"]])
