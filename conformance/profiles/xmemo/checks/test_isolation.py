"""What a caller sees: its owner only, the requested scope only, whatever its agent headers say (XM-ISO)."""

from __future__ import annotations

import pytest

from conformance.expect import shown
from conformance.marks import reads
from conformance.profiles.xmemo.world import XMemoWorld, items_of


@reads("XM-ISO-1", "owner", "single")
def test_another_owners_memories_are_never_returned(world: XMemoWorld) -> None:
    mine, theirs = world.owner().key("acme"), world.owner().key("globex")
    secret = theirs.write("globex's plan", agent="claude")
    mine.write("acme's note", agent="claude")
    for scoped in (True, False):
        ids = {item.get("id") for item in items_of(mine.recall("plan", scoped=scoped, agent="claude", max_items=100))}
        assert secret["id"] not in ids, "a recall returned another owner's memory"
    search = mine.request("GET", "/v1/memories/search", params={"query": "plan", "limit": 100})
    assert search.status == 200, shown(search)
    assert secret["id"] not in search.body.decode("utf-8", "replace"), "search returned another owner's memory"
    single = mine.request("GET", f"/v1/memories/{secret['id']}")
    assert single.status == 404, f"another owner's memory must read as 404; {shown(single)}"


@reads("XM-ISO-1", "project", "single")
def test_another_projects_memories_are_never_returned(world: XMemoWorld) -> None:
    owner = world.owner()
    main, side = owner.key("main-project"), owner.key("side-project", other_project=True)
    written = side.write("a note of the other project", agent="claude")
    for scoped in (True, False):
        ids = {item.get("id") for item in items_of(main.recall("note", scoped=scoped, max_items=100))}
        assert written["id"] not in ids, "a recall returned a memory of another project of the same owner"
    search = main.request("GET", "/v1/memories/search", params={"query": "note", "limit": 100})
    assert search.status == 200, shown(search)
    assert written["id"] not in search.body.decode("utf-8", "replace"), "search returned another project's memory"
    single = main.request("GET", f"/v1/memories/{written['id']}")
    assert single.status == 404, f"another project's memory must read as 404; {shown(single)}"


@pytest.mark.requirement("XM-ISO-2")
def test_a_scope_filter_returns_only_that_scope(world: XMemoWorld) -> None:
    key = world.owner().key("writer")
    inside = key.write("inside the scope")
    other = key.write("outside the scope", scope=f"{world.scope}-other")
    items = items_of(key.recall("scope"))
    ids = {item.get("id") for item in items}
    assert inside["id"] in ids and other["id"] not in ids, f"scope {world.scope} recalled {ids}"
    assert all(item.get("scope", world.scope) == world.scope for item in items), items


@pytest.mark.requirement("XM-ISO-3")
def test_agent_headers_never_change_what_is_visible(world: XMemoWorld) -> None:
    claude, codex = world.pair()
    claude.write("claude's", agent="claude", instance="c-1")
    codex.write("codex's", agent="codex", instance="x-1")
    seen = [{item.get("id") for item in items_of(codex.recall(agent=agent, instance=instance))}
            for agent, instance in ((None, None), ("claude", "c-1"), ("codex", "x-1"), ("intruder", "i-1"))]
    assert all(s == seen[0] for s in seen) and len(seen[0]) == 2, f"visibility followed the agent header: {seen}"
