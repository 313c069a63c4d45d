"""The pure core without I/O: boundary relations, recall bounds and ranking, capture decisions."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xmemo_ref._boundary import boundary, instance_hash, resolve_caller
from xmemo_ref._errors import RequestError
from xmemo_ref._recall import estimate_tokens, pack, rank
from xmemo_ref._records import Kind, Memory, MemoryType, Principal, Relation, Tenant, Trust
from xmemo_ref._writes import Outcome, RecordEvent, Remember, UpdateState, decide

TENANT = Tenant(owner_id="acme", organization_id="org-acme", workspace_id="ws-acme", project_id="acme")
UNBOUND = Principal(tenant=TENANT, scopes=("memory:read", "memory:write"))
BOUND = replace(UNBOUND, bound_agent_id="claude")


def memory(mid: str = "m1", *, agent: str | None = "claude", instance: str | None = "laptop", content: str = "text",
           memory_type: MemoryType = MemoryType.SEMANTIC, updated: int = 1_000, kind: Kind = Kind.MEMORY,
           **fields: object) -> Memory:
    base = Memory(
        id=mid, tenant=TENANT, kind=kind, content=content, path="notes", bucket="work", scope="memory-os",
        team_id=None, memory_type=memory_type, status="active", importance=None, confidence=None,
        semantic_key=None, state_key=None, event_type=None, session_id=None, source=None, agent_id=agent,
        agent_instance_id_hash=None if instance is None else instance_hash(TENANT, instance),
        agent_trust=Trust.CLIENT_ASSERTED, metadata_json="{}", version=1, created_at_ms=updated,
        updated_at_ms=updated, expires_at_ms=None,
    )
    return base._replace(**fields)  # type: ignore[arg-type]


# (caller agent, caller instance, writer agent, writer instance) -> relation
RELATIONS = [
    ("claude", "laptop", "claude", "laptop", Relation.SELF),
    ("claude", None, "claude", None, Relation.SELF),
    ("claude", "desktop", "claude", "laptop", Relation.SAME_AGENT_OTHER_INSTANCE),
    ("claude", None, "claude", "laptop", Relation.SAME_AGENT_OTHER_INSTANCE),
    ("codex", "laptop", "claude", "laptop", Relation.OTHER_AGENT),
    (None, None, "claude", "laptop", Relation.OTHER_AGENT),
    ("codex", None, None, None, Relation.OTHER_AGENT),
]


@pytest.mark.parametrize(("agent", "instance", "writer", "writer_instance", "relation"), RELATIONS)
def test_relation_follows_agent_id_then_installation_hash(agent: str | None, instance: str | None, writer: str | None,
                                                          writer_instance: str | None, relation: Relation) -> None:
    caller = resolve_caller(UNBOUND, asserted_agent_id=agent, asserted_instance_id=instance)
    bound = boundary(caller, memory(agent=writer, instance=writer_instance))
    assert bound.relation is relation and bound.ownership is relation
    assert bound.current_agent_trust is Trust.CLIENT_ASSERTED
    assert bound.boundary_authority == "attribution_only"
    assert bound.current_agent_id == agent and bound.memory_agent_id == writer
    assert "\n" not in bound.explanation and bound.explanation


def test_seed_example_object_is_reproduced_exactly() -> None:
    caller = resolve_caller(UNBOUND, asserted_agent_id="codex", asserted_instance_id=None)
    assert boundary(caller, memory(agent="claude")).as_json() == {
        "relation": "other_agent",
        "ownership": "other_agent",
        "current_agent_id": "codex",
        "current_agent_trust": "client_asserted",
        "boundary_authority": "attribution_only",
        "memory_agent_id": "claude",
        "explanation": "memory agent_id differs from this caller",
    }


def test_a_bound_credential_keeps_its_agent_and_says_the_header_was_ignored() -> None:
    caller = resolve_caller(BOUND, asserted_agent_id="codex", asserted_instance_id="laptop")
    assert caller.agent_id == "claude" and caller.trust is Trust.TOKEN_BOUND
    bound = boundary(caller, memory(agent="claude", instance="laptop"))
    assert bound.relation is Relation.SELF and bound.current_agent_trust is Trust.TOKEN_BOUND
    assert "asserted agent_id codex was ignored" in bound.explanation
    same = resolve_caller(BOUND, asserted_agent_id="claude", asserted_instance_id=None)
    assert same.ignored_agent_id is None and "ignored" not in boundary(same, memory()).explanation


def test_instance_hash_never_contains_the_raw_id_and_differs_per_owner() -> None:
    other = replace(TENANT, owner_id="globex")
    digest = instance_hash(TENANT, "xmemo-build-host-7")
    assert "build-host" not in digest and len(digest) == 64
    assert digest != instance_hash(other, "xmemo-build-host-7")


# -- recall -------------------------------------------------------------------------------------

def test_every_visible_memory_is_ranked_even_without_a_shared_word() -> None:
    rows = [memory("a", content="Use the hosted network MCP transport for remote agents.", updated=1),
            memory("b", content="Fixed streamable-http token identity fallback.", updated=2)]
    ranked = rank(rows, "deployment adapter decision, Codex fix, and handoff status", True)
    assert {r.memory.id for r in ranked} == {"a", "b"}


def test_lexical_relevance_outranks_recency_and_working_is_preferred_only_when_asked() -> None:
    rows = [memory("old", content="redis timeout retry decision", updated=1),
            memory("new", content="unrelated words", updated=2),
            memory("state", content="unrelated state", updated=0, memory_type=MemoryType.WORKING)]
    assert [r.memory.id for r in rank(rows, "redis timeout", False)][0] == "old"
    by_working = rank(rows, "nothing matches", True)
    assert by_working[0].memory.id == "state"
    assert rank(rows, "nothing matches", False)[0].memory.id == "new"


def test_ties_fall_to_the_newer_memory_then_the_smaller_id() -> None:
    rows = [memory("b", updated=5), memory("a", updated=5), memory("c", updated=9)]
    assert [r.memory.id for r in rank(rows, "zzz", False)] == ["c", "a", "b"]


def _pack(rows: list[Memory], max_items: int, max_tokens: int):  # type: ignore[no-untyped-def]
    caller = resolve_caller(UNBOUND, asserted_agent_id="codex", asserted_instance_id=None)
    return pack(rank(rows, "q", True), max_items=max_items, max_tokens=max_tokens,
                boundary_of=lambda m: boundary(caller, m))


@settings(max_examples=150, deadline=None)
@given(contents=st.lists(st.text(min_size=1, max_size=300), min_size=0, max_size=12),
       max_items=st.integers(1, 15), max_tokens=st.integers(1, 400))
def test_a_packet_never_exceeds_either_bound(contents: list[str], max_items: int, max_tokens: int) -> None:
    rows = [memory(f"m{i:02d}", content=c, updated=i) for i, c in enumerate(contents)]
    packet = _pack(rows, max_items, max_tokens)
    assert len(packet.items) <= max_items
    assert estimate_tokens(packet.context_text) == packet.used_tokens <= max_tokens
    assert packet.candidates == len(rows)
    assert packet.omitted_by_items + packet.omitted_by_tokens + len(packet.items) == len(rows)
    for item in packet.items:
        assert f"id={item.memory.id}" in packet.context_text


def test_the_top_item_is_truncated_rather_than_dropped_and_a_later_short_one_still_fits() -> None:
    rows = [memory("big", content="x " * 400, updated=2), memory("small", content="ok", updated=1)]
    packet = _pack(rows, 5, 60)
    assert [i.memory.id for i in packet.items] == ["big"]
    assert packet.items[0].truncated and packet.context_text.endswith(" …")
    rows = [memory("fits", content="short", updated=3), memory("huge", content="y" * 2000, updated=2),
            memory("tiny", content="z", updated=1)]
    packet = _pack(rows, 5, 60)
    assert [i.memory.id for i in packet.items] == ["fits", "tiny"] and packet.omitted_by_tokens == 1


def test_token_estimate_is_four_utf8_bytes_per_token_rounded_up() -> None:
    assert [estimate_tokens(t) for t in ("", "a", "abcd", "abcde", "한국")] == [0, 1, 1, 2, 2]


# -- capture decisions --------------------------------------------------------------------------

class Existing:
    def __init__(self, *rows: Memory) -> None:
        self.rows = rows

    def by_semantic_key(self, scope: str | None, semantic_key: str) -> Memory | None:
        return next((m for m in self.rows if m.semantic_key == semantic_key and m.scope == scope), None)

    def duplicate(self, write: Remember) -> Memory | None:
        return next((m for m in self.rows if m.content == write.content and m.kind is Kind.MEMORY), None)

    def slot(self, bucket: str, scope: str | None, state_key: str) -> Memory | None:
        return next((m for m in self.rows if m.state_key == state_key and m.kind is Kind.STATE), None)

    def by_id(self, memory_id: str) -> Memory | None:
        return next((m for m in self.rows if m.id == memory_id), None)


def remember(content: str = "text", **fields: object) -> Remember:
    base = Remember(content=content, path="notes", bucket="work", scope="memory-os", team_id=None,
                    memory_type=MemoryType.SEMANTIC, status="active", importance=None, confidence=None,
                    semantic_key=None, dedupe=False, source=None, metadata_json="{}", expires_at_ms=None)
    return base._replace(**fields)  # type: ignore[arg-type]


CODEX = resolve_caller(UNBOUND, asserted_agent_id="codex", asserted_instance_id=None)
KEYED = memory("m1", semantic_key="k1", content="same")


@pytest.mark.parametrize(("write", "existing", "outcome", "memory_id"), [
    (remember("same", semantic_key="k1"), Existing(KEYED), Outcome.UNCHANGED, "m1"),
    (remember("changed", semantic_key="k1"), Existing(KEYED), Outcome.UPDATED, "m1"),
    (remember("same", semantic_key="k2"), Existing(KEYED), Outcome.CREATED, "new"),
    (remember("same", dedupe=True), Existing(KEYED), Outcome.UNCHANGED, "m1"),
    (remember("same"), Existing(KEYED), Outcome.CREATED, "new"),
    (remember("changed", memory_id="m1"), Existing(KEYED), Outcome.UPDATED, "m1"),
])
def test_remember_decisions(write: Remember, existing: Existing, outcome: Outcome, memory_id: str) -> None:
    decision = decide(write, existing, CODEX, 5_000, "new")
    assert decision.outcome is outcome and decision.memory.id == memory_id
    if outcome is Outcome.UPDATED:
        assert decision.memory.version == 2 and decision.memory.content == write.content
        assert decision.memory.created_at_ms == KEYED.created_at_ms and decision.memory.updated_at_ms == 5_000


def test_a_new_memory_of_a_remember_is_the_keyword_record_field_for_field() -> None:
    """``_new`` builds it positionally: every field gets a value of its own, so a swap shows."""
    write = Remember(content="c", path="p", bucket="b", scope="s", team_id="t", memory_type=MemoryType.PROCEDURAL,
                     status="st", importance=0.25, confidence=0.75, semantic_key="k", dedupe=False, source="src",
                     metadata_json='{"m":1}', expires_at_ms=9_000)
    caller = resolve_caller(UNBOUND, asserted_agent_id="codex", asserted_instance_id="desk")
    made = decide(write, Existing(), caller, 5_000, "new").memory
    assert made == Memory(
        id="new", tenant=TENANT, kind=Kind.MEMORY, content="c", path="p", bucket="b", scope="s", team_id="t",
        memory_type=MemoryType.PROCEDURAL, status="st", importance=0.25, confidence=0.75, semantic_key="k",
        state_key=None, event_type=None, session_id=None, source="src", agent_id="codex",
        agent_instance_id_hash=instance_hash(TENANT, "desk"), agent_trust=Trust.CLIENT_ASSERTED,
        metadata_json='{"m":1}', version=1, created_at_ms=5_000, updated_at_ms=5_000, expires_at_ms=9_000)


def test_remember_of_an_unknown_memory_id_is_404() -> None:
    with pytest.raises(RequestError) as caught:
        decide(remember(memory_id="missing"), Existing(), CODEX, 1, "new")
    assert caught.value.status == 404


def test_state_is_one_versioned_working_slot_and_events_always_append() -> None:
    state = UpdateState(state_key="active_task", content="doing", bucket="work", scope=None, team_id=None,
                        ttl_seconds=60, source=None, metadata_json="{}")
    first = decide(state, Existing(), CODEX, 1_000, "s1")
    assert first.outcome is Outcome.CREATED and first.memory.memory_type is MemoryType.WORKING
    assert first.memory.expires_at_ms == 61_000
    second = decide(replace(state, content="done", ttl_seconds=0), Existing(first.memory), CODEX, 2_000, "s2")
    assert (second.outcome, second.memory.id, second.memory.version) == (Outcome.UPDATED, "s1", 2)
    assert second.memory.expires_at_ms is None
    event = RecordEvent(content="deployed", event_type="milestone", occurred_at_ms=None, session_id="s", path="t",
                        bucket="work", scope=None, team_id=None, importance=None, confidence=None, source=None,
                        metadata_json="{}")
    twice = Existing(decide(event, Existing(), CODEX, 1, "e1").memory)
    again = decide(event, twice, CODEX, 2, "e2")
    assert again.outcome is Outcome.CREATED and again.memory.id == "e2"
    assert again.memory.memory_type is MemoryType.EPISODIC
