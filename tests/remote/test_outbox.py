"""The durable send outbox (upstream send_operation.rs's own tests, on the kit's port)."""

from __future__ import annotations

from pathlib import Path

import pytest

from aidememo_cli._remote._errors import RemoteError
from aidememo_cli._remote._outbox import Outbox, SendPlan, SendState, failure_state
from aidememo_cli._remote._profiles import RemoteProfile

META = RemoteProfile(name="codex-p1", url="http://server.test", project_id="project", token="t", added_at=42)


def _plan(content: str) -> SendPlan:
    return SendPlan(session_id="session-1", source_id="source-1", topic="topic", to_actor="codex-p2", focus="review",
                    done_when="tests pass", content=content)


def _outbox(path: Path) -> Outbox:
    return Outbox(str(path / "send"), lambda: 1_700_000_000_000)


def test_pending_send_is_reused_after_reopen(tmp_path: Path) -> None:
    first = _outbox(tmp_path).reserve("intent", "payload", META)
    second = _outbox(tmp_path).reserve("intent", "payload", META)
    assert second.reused_pending and not second.already_committed
    assert (second.operation_id, second.handoff_id, second.context_id) == (
        first.operation_id, first.handoff_id, first.context_id)
    assert first.handoff_id.startswith("handoff_") and first.operation_id.startswith("operation_")


def test_replay_plan_survives_reopen_and_lists_as_queued(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    op = box.reserve("intent", "payload", META)
    box.store_plan("intent", op.operation_id, _plan("packet"))
    (pending,) = _outbox(tmp_path).pending("codex-p1")
    assert (pending.operation_id, pending.state, pending.profile_url, pending.plan.content) == (
        op.operation_id, SendState.QUEUED, "http://server.test", "packet")


def test_actor_binding_and_last_error_survive_reopen(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    op = box.reserve("intent", "payload", META)
    box.store_plan("intent", op.operation_id, _plan("packet"))
    box.bind_actor("intent", op.operation_id, META, "actor-live")
    box.record_failure("intent", op.operation_id, SendState.FAILED, "connection refused")
    (pending,) = _outbox(tmp_path).pending(None)
    assert (pending.actor_id, pending.state, pending.last_error) == ("actor-live", SendState.FAILED, "connection refused")
    with pytest.raises(RemoteError, match="already bound to a different authenticated actor"):
        box.bind_actor("intent", op.operation_id, META, "actor-other")


def test_changed_profile_generation_fails_closed(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    op = box.reserve("intent", "payload", META)
    changed = RemoteProfile(name="codex-p1", url="http://server.test", project_id="project", token="t", added_at=43)
    with pytest.raises(RemoteError, match="profile identity changed"):
        box.bind_actor("intent", op.operation_id, changed, "actor-live")


def test_changed_pending_payload_fails_closed(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    box.reserve("intent", "payload-a", META)
    with pytest.raises(RemoteError, match="different evidence"):
        box.reserve("intent", "payload-b", META)


def test_changed_replay_plan_fails_closed(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    op = box.reserve("intent", "payload", META)
    box.store_plan("intent", op.operation_id, _plan("packet-a"))
    with pytest.raises(RemoteError, match="replay data changed"):
        box.store_plan("intent", op.operation_id, _plan("packet-b"))


def test_committed_exact_send_is_recovered_but_not_pending(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    first = box.reserve("intent", "payload", META)
    box.store_plan("intent", first.operation_id, _plan("packet"))
    box.bind_actor("intent", first.operation_id, META, "actor-live")
    box.mark_committed("intent", first.operation_id)
    second = box.reserve("intent", "payload", META)
    assert second.reused_pending and second.already_committed and second.operation_id == first.operation_id
    assert box.pending(None) == []


def test_changed_committed_send_starts_a_new_assignment(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    first = box.reserve("intent", "payload-a", META)
    box.store_plan("intent", first.operation_id, _plan("packet-a"))
    box.mark_committed("intent", first.operation_id)
    second = box.reserve("intent", "payload-b", META)
    assert not second.reused_pending
    assert {second.operation_id, second.handoff_id, second.context_id}.isdisjoint(
        {first.operation_id, first.handoff_id, first.context_id})
    assert (tmp_path / "send" / f"intent.done.{first.operation_id}" / "committed").exists()


def test_commit_marker_is_idempotent_for_same_operation(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    op = box.reserve("intent", "payload", META)
    box.mark_committed("intent", op.operation_id)
    box.mark_committed("intent", op.operation_id)
    assert (tmp_path / "send" / "intent" / "committed").read_text() == op.operation_id


def test_no_token_is_written_and_conflicts_are_classified(tmp_path: Path) -> None:
    box = _outbox(tmp_path)
    op = box.reserve("intent", "payload", META)
    box.store_plan("intent", op.operation_id, _plan("packet"))
    for path in (tmp_path / "send").rglob("*"):
        assert not path.is_file() or '"token"' not in path.read_text()
    assert failure_state("invalid input: remote server returned HTTP 409: command conflict") is SendState.CONFLICT
    assert failure_state("internal error: remote server request failed: connection refused") is SendState.FAILED
