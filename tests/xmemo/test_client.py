"""The SDK-named client helpers against the reference, and their retry and decline rules."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from xmemo_ref.client import Reason, XMemoClient, XMemoProtocolError, is_read
from xmemo_ref._errors import XMemoHTTPError, XMemoTransportError

from .conftest import World, key

SCOPE = "memory-os"
OPTIONS = {"session_id": "handoff-session-1", "task_id": "handoff-1", "scope": SCOPE}


def client(world: World, who: str, *, agent: str | None = None, instance: str | None = None,
           transport: httpx.BaseTransport | None = None, sleeps: list[float] | None = None, **kw: object) -> XMemoClient:
    record = sleeps.append if sleeps is not None else (lambda s: None)
    return XMemoClient("http://xmemo.test", key(who), agent_id=agent, agent_instance_id=instance,
                       transport=transport or world.ref.transport(), sleep=record, **kw)  # type: ignore[arg-type]


def test_the_seed_timeline_with_the_helpers(world: World) -> None:
    claude = client(world, "shared", agent="claude", instance="claude-1")
    codex = client(world, "shared", agent="codex", instance="codex-1", auth="bearer")
    started = claude.task_start("Review the deployment adapter", source="claude", **OPTIONS)
    assert started.should_capture and started.reason == Reason.CAPTURED
    first = codex.recall_context("deployment adapter decision and current bug", scope=SCOPE, max_items=6,
                                 max_tokens=1200, prefer_working=True)
    assert [i["id"] for i in first.items] == [started.memory_id]
    decision = claude.record_decision("Use the hosted network MCP transport for remote agents.", source="claude",
                                      **OPTIONS)
    assert decision.should_capture, decision.reason
    fix = codex.record_bug_fix("Fixed streamable-http token identity fallback.", source="codex", **OPTIONS)
    ended = codex.task_end("Deployment adapter fix completed for handoff.", source="codex", **OPTIONS)
    assert fix.should_capture and ended.should_capture
    final = claude.recall_context("deployment adapter decision, Codex fix, and handoff status", scope=SCOPE,
                                  max_items=6, max_tokens=1200)
    by_id = {item["id"]: item for item in final.items}
    assert {decision.memory_id, fix.memory_id, started.memory_id, ended.memory_id} == set(by_id)
    assert by_id[fix.memory_id]["agent_boundary"]["relation"] == "other_agent"
    assert by_id[decision.memory_id]["agent_boundary"]["relation"] == "self"
    assert final.version == 1 and len(final.items) <= 6 and final.budget["used_tokens"] <= 1200
    # the task helpers' status and type read back; decision and fix are semantic
    assert (started.memory_type, started.status) == ("working", "started")
    assert (claude.get_memory(ended.memory_id or "")["status"], ended.memory_type) == ("completed", "working")
    assert claude.get_memory(fix.memory_id or "")["memory_type"] == "semantic"
    assert claude.get_memory(decision.memory_id or "")["metadata"] == {
        "workflow": "decision", "session_id": "handoff-session-1", "task_id": "handoff-1"}


@pytest.mark.parametrize(("who", "agent", "content", "reason"), [
    ("shared", "claude", "   ", Reason.EMPTY_CONTENT),
    ("shared", "claude", "x" * 8_193, Reason.CONTENT_TOO_LARGE),
    ("shared", "claude", "deploy with api_key=abcdef123456", Reason.SECRET_IN_CONTENT),
    ("shared", "claude", "Authorization: Bearer abcdefghijklmnop", Reason.SECRET_IN_CONTENT),
    ("shared", "claude", f"the key is {key('shared')}", Reason.SECRET_IN_CONTENT),
    ("reader", "claude", "a decision", Reason.MISSING_WRITE_SCOPE),
    ("shared", None, "a decision", Reason.IDENTITY_UNRESOLVED),
])
def test_declined_captures_send_no_write(world: World, who: str, agent: str | None, content: str, reason: str) -> None:
    seen: list[str] = []
    inner = world.ref.transport()

    def spy(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return inner.handle_request(request)

    result = client(world, who, agent=agent, transport=httpx.MockTransport(spy)).record_decision(content, **OPTIONS)
    assert (result.should_capture, result.reason, result.memory_id) == (False, reason, None)
    assert "POST /v1/remember" not in seen
    assert world.count("shared") == 0


def test_a_bound_key_resolves_identity_without_an_agent_header(world: World) -> None:
    result = client(world, "claude").record_decision("bound decision", **OPTIONS)
    assert result.should_capture and result.answer is not None and result.answer["agent_trust"] == "token_bound"


def test_a_repeated_capture_with_an_idempotency_key_reports_already_captured(world: World) -> None:
    helper = client(world, "shared", agent="claude")
    first = helper.record_decision("once", idempotency_key="decision-1", **OPTIONS)
    again = helper.record_decision("once", idempotency_key="decision-1", **OPTIONS)
    assert first.reason == Reason.CAPTURED and again.reason == Reason.ALREADY_CAPTURED
    assert first.memory_id == again.memory_id


class Flaky(httpx.BaseTransport):
    """Fails the first ``failures`` requests matching ``when`` (a transport error or a status), then passes."""

    def __init__(self, inner: httpx.BaseTransport, failures: int, *, status: int | None = None,
                 when: Callable[[httpx.Request], bool] = lambda r: True) -> None:
        self.inner, self.left, self.status, self.when = inner, failures, status, when
        self.sent: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.when(request):
            self.sent.append(f"{request.method} {request.url.path}")
            if self.left > 0:
                self.left -= 1
                if self.status is None:
                    raise httpx.ConnectError("refused", request=request)
                return httpx.Response(self.status, json={"detail": "busy"}, request=request)
        return self.inner.handle_request(request)


@pytest.mark.parametrize("status", [None, 503, 429])
def test_recall_counts_as_a_read_and_is_retried_with_backoff(world: World, status: int | None) -> None:
    flaky = Flaky(world.ref.transport(), 2, status=status, when=lambda r: r.url.path == "/v1/recall/context")
    sleeps: list[float] = []
    packet = client(world, "shared", agent="codex", transport=flaky, sleeps=sleeps).recall_context("q")
    assert packet.items == () and flaky.sent == ["POST /v1/recall/context"] * 3 and sleeps == [0.5, 1.0]


def test_a_read_gives_up_after_three_attempts_and_4xx_is_never_retried(world: World) -> None:
    flaky = Flaky(world.ref.transport(), 5, status=503, when=lambda r: r.method == "GET")
    with pytest.raises(XMemoHTTPError) as caught:
        client(world, "shared", transport=flaky).get_memory("00000000-0000-4000-8000-000000000000")
    assert caught.value.status == 503 and len(flaky.sent) == 3
    flaky = Flaky(world.ref.transport(), 0, when=lambda r: r.method == "GET")
    with pytest.raises(XMemoHTTPError) as caught:
        client(world, "shared", transport=flaky).get_memory("00000000-0000-4000-8000-000000000000")
    assert caught.value.status == 404 and len(flaky.sent) == 1


@pytest.mark.parametrize("status", [None, 503])
def test_a_write_is_sent_once_and_a_lost_answer_is_an_unknown_outcome(world: World, status: int | None) -> None:
    flaky = Flaky(world.ref.transport(), 1, status=status, when=lambda r: r.url.path == "/v1/remember")
    sleeps: list[float] = []
    result = client(world, "shared", agent="claude", transport=flaky, sleeps=sleeps).record_bug_fix("fix", **OPTIONS)
    assert flaky.sent == ["POST /v1/remember"] and sleeps == []
    assert not result.should_capture
    assert result.reason == (Reason.WRITE_OUTCOME_UNKNOWN if status is None else Reason.refused(503))


def test_is_read_is_the_published_rule() -> None:
    assert is_read("GET", "/v1/memories/x") and is_read("POST", "/v1/recall/context")
    assert not is_read("POST", "/v1/remember") and not is_read("POST", "/v1/projects/p/context")


def test_recall_fails_closed_on_a_packet_over_max_items(world: World) -> None:
    def oversized(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"items": [{"id": "a"}, {"id": "b"}], "context_text": "t"})

    with pytest.raises(XMemoProtocolError):
        client(world, "shared", transport=httpx.MockTransport(oversized)).recall_context("q", max_items=1)


def test_a_transport_failure_on_a_read_raises_the_clients_error(world: World) -> None:
    flaky = Flaky(world.ref.transport(), 3)
    with pytest.raises(XMemoTransportError):
        client(world, "shared", transport=flaky).recall_context("q")
    assert "xm-shared" not in repr(client(world, "shared"))
