"""The seed's timeline between Claude and Codex, one check per step (XM-FLOW).

taskStart -> recall_context -> recordDecision -> recordBugFix -> taskEnd -> recall_context by the
other agent. Both agents use keys of one owner and assert their agent ids with the headers, as
the seed does; each check plays the steps before its own as setup (a failure there is
UNTESTABLE, not a failure of this step).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from conformance.errors import Untestable
from conformance.expect import expect_status
from conformance.marks import reads
from conformance.profiles.xmemo.world import Key, XMemoWorld, estimate_tokens, is_uuid, items_of

FIRST_QUERY = "deployment adapter decision and current bug"
LAST_QUERY = "deployment adapter decision, Codex fix, and handoff status"
OPTIONS = {"session_id": "handoff-session-1", "task_id": "handoff-1"}


@dataclass(slots=True)
class Timeline:
    claude: Key
    codex: Key
    ids: dict[str, str] = field(default_factory=dict)
    packets: dict[int, Any] = field(default_factory=dict)

    def capture(self, who: str, step: str, content: str, memory_type: str, status: str | None = None) -> Any:
        key = self.claude if who == "claude" else self.codex
        body: dict[str, Any] = {"memory_type": memory_type, "source": who, "path": f"workflow/handoff-1/{step}",
                                "metadata": {"workflow": step, **OPTIONS}}
        if status is not None:
            body["status"] = status
        return key.request("POST", "/v1/remember", json_body={"content": content, "scope": key.world.scope, **body},
                           agent=who, instance=f"{who}-install-1")

    def recall(self, who: str, query: str) -> Any:
        key = self.claude if who == "claude" else self.codex
        return key.recall(query, agent=who, instance=f"{who}-install-1", max_items=6, max_tokens=1200,
                          prefer_working=True)


# step -> (agent, helper, content, memory_type, status); steps 2 and 6 are recalls.
CAPTURES: dict[int, tuple[str, str, str, str, str | None]] = {
    1: ("claude", "task_start", "Review the deployment adapter", "working", "started"),
    3: ("claude", "decision", "Use the hosted network MCP transport for remote agents.", "semantic", None),
    4: ("codex", "bug_fix", "Fixed streamable-http token identity fallback.", "semantic", None),
    5: ("codex", "task_end", "Deployment adapter fix completed for handoff.", "working", "completed"),
}
RECALLS = {2: ("codex", FIRST_QUERY), 6: ("claude", LAST_QUERY)}


def play(world: XMemoWorld, upto: int) -> tuple[Timeline, Any]:
    """Steps 1..upto-1 as setup; returns the timeline and step ``upto``'s own answer."""
    claude, codex = world.pair()
    timeline = Timeline(claude=claude, codex=codex)
    result = None
    for number in range(1, upto + 1):
        if number in RECALLS:
            answer = timeline.recall(*RECALLS[number])
        else:
            answer = timeline.capture(*CAPTURES[number])
        if number == upto:
            result = answer
            break
        if answer.status != 200:
            raise Untestable(f"step {number} of the timeline failed ({answer.status}), so step {upto} was not reached")
        if number in CAPTURES:
            timeline.ids[CAPTURES[number][1]] = answer.json().get("id") or answer.json().get("memory_id")
    return timeline, result


def bounded_items(answer: Any) -> dict[Any, Any]:
    """The recalled items by id, after checking the seed's bounds (6 items, 1200 tokens)."""
    items = {item.get("id"): item for item in items_of(answer)}
    used = estimate_tokens(answer.json().get("context_text") or "")
    assert len(items) <= 6 and used <= 1200, f"the packet exceeds the seed's bounds: {len(items)} items, {used} tokens"
    return items


def captured(key: Key, answer: Any, memory_type: str, status: str | None = None) -> None:
    """A 200 with a UUID id, and the memory reads back with that type (and status), as stored."""
    data = expect_status(answer, 200)
    memory_id = data.get("id") or data.get("memory_id")
    assert is_uuid(memory_id), f"the capture answered no UUID id: {data}"
    # The write answer may leave a field out; the stored memory may not.
    assert data.get("memory_type", memory_type) == memory_type, f"captured as {data.get('memory_type')!r}"
    assert status is None or data.get("status", status) == status, f"captured with status {data.get('status')!r}"
    stored = expect_status(key.request("GET", f"/v1/memories/{memory_id}"), 200)
    assert stored.get("memory_type") == memory_type and (status is None or stored.get("status") == status), (
        f"GET /v1/memories/{memory_id} reads {stored}")


@reads("XM-FLOW-1", "working", "uuid")
def test_step_1_claude_starts_the_task(world: XMemoWorld) -> None:
    timeline, answer = play(world, 1)
    captured(timeline.claude, answer, "working", "started")


@pytest.mark.requirement("XM-FLOW-2")
def test_step_2_codex_recalls_the_bounded_context(world: XMemoWorld) -> None:
    timeline, answer = play(world, 2)
    items = bounded_items(answer)
    start = timeline.ids["task_start"]
    assert start in items, "Codex does not see Claude's task start"
    assert items[start]["agent_boundary"]["relation"] == "other_agent", items[start]["agent_boundary"]


@pytest.mark.requirement("XM-FLOW-3")
def test_step_3_claude_records_the_decision(world: XMemoWorld) -> None:
    timeline, answer = play(world, 3)
    captured(timeline.claude, answer, "semantic")


@pytest.mark.requirement("XM-FLOW-4")
def test_step_4_codex_records_the_bug_fix(world: XMemoWorld) -> None:
    timeline, answer = play(world, 4)
    captured(timeline.codex, answer, "semantic")


@pytest.mark.requirement("XM-FLOW-5")
def test_step_5_codex_ends_the_task(world: XMemoWorld) -> None:
    timeline, answer = play(world, 5)
    captured(timeline.codex, answer, "working", "completed")


@pytest.mark.requirement("XM-FLOW-6")
def test_step_6_claude_recalls_the_decision_and_the_fix(world: XMemoWorld) -> None:
    timeline, answer = play(world, 6)
    items = bounded_items(answer)
    decision, fix = timeline.ids["decision"], timeline.ids["bug_fix"]
    assert decision in items, "Claude's follow-up recall lost the decision (its query shares no word with it)"
    assert fix in items, "Claude's follow-up recall lost Codex's fix"
    assert items[decision]["agent_boundary"]["relation"] == "self", items[decision]["agent_boundary"]
    assert items[fix]["agent_boundary"]["relation"] == "other_agent", items[fix]["agent_boundary"]
