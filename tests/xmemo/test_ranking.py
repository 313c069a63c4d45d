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

from xmemo_ref._boundary import instance_hash
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


# -- packing stops early, reading an exact path reads only that path ------------------------------


class _Listed(list[Any]):
    """Ranked candidates that name their shortest id, as the index's ``Ranking`` does."""

    shortest_id: int | None = None


@st.composite
def tight(draw: Any) -> list[Memory]:
    """Memories whose entries come near the shortest an entry can be: no content or a word, the
    shortest type, the caller's own one-letter agent (relation ``self``), one-letter ids."""
    rows = []
    for i in range(draw(st.integers(0, 12))):
        memory = draw(memories(f"{draw(st.sampled_from(['', 'm', 'long-memory-id-']))}{i}"))
        rows.append(memory._replace(
            content=draw(st.sampled_from(["", "a", "ab", "fix", memory.content])),
            memory_type=draw(st.sampled_from([MemoryType.WORKING, memory.memory_type])),
            agent_id=draw(st.sampled_from(["x", None])), expires_at_ms=None,
            agent_instance_id_hash=instance_hash(TENANT, "laptop")))
    return rows


@settings(max_examples=500, deadline=None)
@given(tight(), queries, st.booleans(), st.integers(1, 9), st.integers(1, 90))
def test_a_packet_that_stops_once_nothing_fits_is_the_packet_that_walked_everything(
        rows: list[Memory], query: str, prefer: bool, max_items: int, max_tokens: int) -> None:
    from xmemo_ref._boundary import boundary, resolve_caller
    from xmemo_ref._recall import pack
    from xmemo_ref._records import Principal

    ranked = rank(rows, query, prefer)
    caller = resolve_caller(Principal(tenant=TENANT, scopes=("memory:read",)), asserted_agent_id="x",
                            asserted_instance_id="laptop")
    assert all(boundary(caller, m).relation.value == "self" for m in rows if m.agent_id == "x")

    def packed(candidates: Any) -> Any:
        packet = pack(candidates, max_items=max_items, max_tokens=max_tokens,
                      boundary_of=lambda m: boundary(caller, m))
        return ([(i.memory.id, i.truncated) for i in packet.items], packet.context_text, packet.used_tokens,
                packet.candidates, packet.omitted_by_items, packet.omitted_by_tokens)

    stopping = _Listed(ranked)
    stopping.shortest_id = min((len(m.id) for m in rows), default=None)
    assert packed(stopping) == packed(ranked)


@settings(max_examples=200, deadline=None)
@given(tenants(), queries, st.sampled_from(["notes", "decisions/redis", "a", "absent", "decisions/%", "%"]),
       st.sampled_from([None, "memory-os"]), st.sampled_from([NOW - 1, NOW, NOW + 100_000]))
def test_a_read_on_an_exact_path_ranks_what_a_scan_of_every_memory_ranks(
        world: tuple[TenantMemories, list[Memory]], query: str, path: str, scope: str | None, now_ms: int) -> None:
    tenant, later = world
    for memory in later:
        tenant.put(memory)
    filters = ReadFilter(scope=scope, path=path)
    exact = not path.endswith(("%", "*"))
    pool = tenant.at_path(path) if exact else list(tenant.memories.values())
    scan = [m for m in tenant.memories.values() if filters.admits(m, now_ms)]
    assert [(r.memory.id, r.score) for r in rank([m for m in pool if filters.admits(m, now_ms)], query, True)] == \
        [(r.memory.id, r.score) for r in rank(scan, query, True)]


def test_an_entry_of_the_least_possible_size_still_fits_a_budget_of_exactly_its_size() -> None:
    from xmemo_ref._boundary import boundary, resolve_caller
    from xmemo_ref._recall import ENTRY_SEPARATOR, pack, render_entry
    from xmemo_ref._records import Principal

    caller = resolve_caller(Principal(tenant=TENANT, scopes=("memory:read",)), asserted_agent_id="x",
                            asserted_instance_id="laptop")
    base = Memory(id="", tenant=TENANT, kind=Kind.MEMORY, content="", path="p", bucket="work", scope=None, team_id=None,
                  memory_type=MemoryType.WORKING, status="active", importance=None, confidence=None, semantic_key=None,
                  state_key=None, event_type=None, session_id=None, source=None, agent_id="x",
                  agent_instance_id_hash=instance_hash(TENANT, "laptop"), agent_trust=Trust.CLIENT_ASSERTED,
                  metadata_json="{}", version=1, created_at_ms=NOW - 100, updated_at_ms=NOW, expires_at_ms=None)
    for first_id in ("a", "ab", "abc", "abcd"):  # one of them makes the entries a whole number of tokens
        rows = [base._replace(id=first_id, updated_at_ms=NOW),
                base._replace(id="z" * len(first_id), updated_at_ms=NOW - 1)]
        entries = [render_entry(n, m, boundary(caller, m), "") for n, m in enumerate(rows, 1)]
        size = len(entries[0]) + len(ENTRY_SEPARATOR) + len(entries[1])
        if size % 4:
            continue
        listed = _Listed(rank(rows, "", True))
        listed.shortest_id = len(first_id)
        packet = pack(listed, max_items=5, max_tokens=size // 4, boundary_of=lambda m: boundary(caller, m))
        assert [i.memory.id for i in packet.items] == [m.id for m in rows] and not packet.omitted_by_tokens
        alone = _Listed(rank(rows[:1], "", True))
        alone.shortest_id = len(first_id)
        packet = pack(alone, max_items=5, max_tokens=-(-len(entries[0]) // 4), boundary_of=lambda m: boundary(caller, m))
        assert [i.memory.id for i in packet.items] == [first_id]
        return
    raise AssertionError("no id length gave a whole number of tokens")
