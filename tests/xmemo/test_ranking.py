"""The recall index ranks exactly as ``_recall.rank`` over every visible memory.

``_recall.rank`` scores every visible memory and sorts them: it is the ranking's definition, and
what a replaced rank rule (the kit's broken variants) still gets. ``_ranking.Ranking`` reads a
partition of the index lazily and must yield the same memories with the same scores in the same
order, ties included, for any partition, query, expiry, scope and bonus, and after the tenant's
later writes have been caught up. Any difference found here is a bug in the index, not a change
of ranking. Memories are drawn from a small vocabulary with repeated words, few paths, few
timestamps and few lengths, so that equal scores, equal update times and equal term statistics
are common.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from xmemo_ref._index import RecallIndex
from xmemo_ref._ranking import Ranking, View
from xmemo_ref._recall import rank
from xmemo_ref._records import Kind, Memory, MemoryType, Tenant, Trust
from xmemo_ref._state import TenantMemories
from xmemo_ref._store import ReadFilter

TENANT = Tenant(owner_id="acme", organization_id="org-acme", workspace_id="ws-acme", project_id="acme")
NOW = 1_000_000
WORDS = ["redis", "cache", "deploy", "Adapter", "fix", "the", "a", "timeout", "pool", "decision"]
TYPES = [MemoryType.WORKING, MemoryType.SEMANTIC, MemoryType.EPISODIC]


@st.composite
def memories(draw: Any, memory_id: str) -> Memory:
    updated = draw(st.sampled_from([NOW - 5_000, NOW - 3_000, NOW - 3_000, NOW - 10, NOW]))
    expires = draw(st.one_of(st.none(), st.sampled_from([NOW - 1, NOW, NOW + 1, NOW + 60_000])))
    return Memory(
        id=memory_id, tenant=TENANT, kind=Kind.MEMORY,
        content=" ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8))),
        path=draw(st.sampled_from(["notes", "decisions/redis", "work/fix-the-pool", "a"])), bucket="work",
        scope=draw(st.sampled_from([None, "memory-os", "other"])), team_id=None,
        memory_type=draw(st.sampled_from(TYPES)), status="active", importance=None, confidence=None,
        semantic_key=None, state_key=None, event_type=None, session_id=None, source=None, agent_id=None,
        agent_instance_id_hash=None, agent_trust=Trust.CLIENT_ASSERTED, metadata_json="{}", version=1,
        created_at_ms=updated - 100, updated_at_ms=updated, expires_at_ms=expires,
    )


@st.composite
def tenants(draw: Any) -> tuple[TenantMemories, list[Memory]]:
    """A tenant with some memories, and the writes that come after its index was built."""
    count = draw(st.integers(0, 30))
    tenant = TenantMemories(TENANT)
    for i in range(count):
        tenant.put(draw(memories(f"m-{i:02d}")))
    later = [draw(memories(f"m-{i:02d}")) for i in draw(st.lists(st.integers(0, count + 5), max_size=8))]
    return tenant, later


queries = st.one_of(st.just(""), st.lists(st.sampled_from([*WORDS, "absent", "REDIS"]), min_size=1, max_size=5)
                    .map(" ".join))
scopes = st.sampled_from([None, "memory-os", "absent"])


def indexed(tenant: TenantMemories, scope: str | None, query: str, prefer: bool, now_ms: int) -> list[Any]:
    assert tenant.recall is not None
    ranking = Ranking(View(tenant.recall.partition(tenant.memories, scope), now_ms), query, prefer)
    out = [(r.memory.id, r.score) for r in ranking]
    assert len(ranking) == len(out)
    return out


def scanned(tenant: TenantMemories, scope: str | None, query: str, prefer: bool, now_ms: int) -> list[Any]:
    visible = [m for m in tenant.memories.values() if ReadFilter(scope=scope).admits(m, now_ms)]
    return [(r.memory.id, r.score) for r in rank(visible, query, prefer)]


@settings(max_examples=300, deadline=None)
@given(tenants(), queries, scopes, st.booleans(), st.sampled_from([NOW - 1, NOW, NOW + 1, NOW + 100_000]))
def test_the_index_yields_rank_order_and_scores_exactly(world: tuple[TenantMemories, list[Memory]], query: str,
                                                        scope: str | None, prefer: bool, now_ms: int) -> None:
    tenant, later = world
    tenant.recall = RecallIndex()
    assert indexed(tenant, scope, query, prefer, now_ms) == scanned(tenant, scope, query, prefer, now_ms)
    for memory in later:  # rewritten or new memories, caught up by the next recall
        tenant.put(memory)
    assert indexed(tenant, scope, query, prefer, now_ms) == scanned(tenant, scope, query, prefer, now_ms)
    assert indexed(tenant, None, query, not prefer, now_ms) == scanned(tenant, None, query, not prefer, now_ms)


def test_the_first_items_of_a_large_partition_are_ranks_first_items() -> None:
    # Every memory holds the query's words, so every one is a candidate for the top: the index
    # must still release the first items in rank's order (its bounds, not a full sort).
    tenant = TenantMemories(TENANT)
    tenant.recall = RecallIndex()
    for i in range(3_000):
        words = [WORDS[(i + k) % len(WORDS)] for k in range(6)]
        tenant.put(Memory(
            id=f"m-{i:05d}", tenant=TENANT, kind=Kind.MEMORY, content=" ".join(words), path=f"bench/{i % 50}",
            bucket="work", scope=None, team_id=None, memory_type=TYPES[i % 3], status="active", importance=None,
            confidence=None, semantic_key=None, state_key=None, event_type=None, session_id=None, source=None,
            agent_id=None, agent_instance_id_hash=None, agent_trust=Trust.CLIENT_ASSERTED, metadata_json="{}",
            version=1, created_at_ms=i // 7, updated_at_ms=i // 7, expires_at_ms=None))
    for query, prefer in (("redis cache decision", True), ("deploy adapter", False), ("absent", True)):
        ranking = Ranking(View(tenant.recall.partition(tenant.memories, None), NOW), query, prefer)
        first = [(r.memory.id, r.score) for _, r in zip(range(12), ranking)]
        assert first == scanned(tenant, None, query, prefer, NOW)[:12]


def test_a_rewritten_memory_leaves_its_old_terms_behind() -> None:
    tenant = TenantMemories(TENANT)
    tenant.recall = RecallIndex()
    base = Memory(id="m-1", tenant=TENANT, kind=Kind.MEMORY, content="redis cache", path="notes", bucket="work",
                  scope="memory-os", team_id=None, memory_type=MemoryType.SEMANTIC, status="active", importance=None,
                  confidence=None, semantic_key=None, state_key=None, event_type=None, session_id=None, source=None,
                  agent_id=None, agent_instance_id_hash=None, agent_trust=Trust.CLIENT_ASSERTED, metadata_json="{}",
                  version=1, created_at_ms=1, updated_at_ms=1, expires_at_ms=None)
    tenant.put(base)
    tenant.put(base._replace(id="m-2", content="deploy"))
    assert indexed(tenant, "memory-os", "redis", True, NOW)[0][0] == "m-1"
    tenant.put(base._replace(content="deploy adapter", scope="other", version=2, updated_at_ms=2))
    partition = tenant.recall.partition(tenant.memories, "memory-os")
    assert "redis" not in partition.postings and set(partition.docs) == {"m-2"}
    assert indexed(tenant, None, "redis", True, NOW) == scanned(tenant, None, "redis", True, NOW)
