"""Bounded recall: both bounds, stripped items, ranking everything, wildcards, safe retries (XM-RECALL, XM-RETRY)."""

from __future__ import annotations

import json

import pytest

from conformance.expect import expect_status, shown
from conformance.marks import reads
from conformance.profiles.xmemo.world import XMemoWorld, estimate_tokens, items_of


@pytest.mark.requirement("XM-RECALL-1")
@pytest.mark.parametrize("max_items", [1, 2, 4])
def test_never_more_items_than_max_items(world: XMemoWorld, max_items: int) -> None:
    key = world.owner().key("writer")
    for n in range(5):
        key.write(world.text(f"memory {n}"))
    items = items_of(key.recall("memory", max_items=max_items))
    assert 0 < len(items) <= max_items, f"max_items {max_items} answered {len(items)} items"


@pytest.mark.requirement("XM-RECALL-2")
@pytest.mark.parametrize("max_tokens", [40, 120, 400])
def test_context_text_never_exceeds_max_tokens(world: XMemoWorld, max_tokens: int) -> None:
    key = world.owner().key("writer")
    for n in range(4):
        key.write(f"memory {n}: " + " ".join(world.text("detail") for _ in range(12)))
    answer = key.recall("memory detail", max_items=10, max_tokens=max_tokens)
    data = expect_status(answer, 200)
    text = data.get("context_text")
    assert isinstance(text, str), f"no context_text string: {shown(answer)}"
    assert estimate_tokens(text) <= max_tokens, (
        f"context_text is {len(text.encode())} UTF-8 bytes, {estimate_tokens(text)} estimated tokens, "
        f"over max_tokens {max_tokens}")


@reads("XM-RECALL-3", "no-content", "text", "ids")
def test_items_carry_ids_and_no_content_and_one_text_holds_it_all(world: XMemoWorld) -> None:
    key = world.owner().key("writer")
    contents = [world.text(f"fact {n}") for n in range(3)]
    ids = {key.write(content)["id"] for content in contents}
    answer = key.recall("fact", max_items=10, max_tokens=4000)
    items = items_of(answer)
    assert {item.get("id") for item in items} == ids, f"items' ids are {[i.get('id') for i in items]}, not {ids}"
    assert all("content" not in item for item in items), "an item carries its content (it belongs in context_text)"
    text = answer.json().get("context_text")
    assert isinstance(text, str) and all(content in text for content in contents), \
        f"context_text does not hold every item's content: {text!r}"


@pytest.mark.requirement("XM-RECALL-4")
def test_a_memory_sharing_no_word_with_the_query_is_still_recalled(world: XMemoWorld) -> None:
    key = world.owner().key("claude")
    decision = key.write("Use the hosted network MCP transport for remote agents.", agent="claude")
    key.write("Fixed streamable-http token identity fallback.", agent="codex")
    items = items_of(key.recall("deployment adapter decision, Codex fix, and handoff status", max_items=6,
                                max_tokens=1200))
    assert decision["id"] in {item.get("id") for item in items}, \
        "the decision shares no word with the query and was dropped although the bounds left room"


@pytest.mark.requirement("XM-RECALL-5")
def test_percent_bucket_and_auto_type_mean_no_filter(world: XMemoWorld) -> None:
    key = world.owner().key("hermes")
    ids = {key.write("in the work bucket", bucket="work", memory_type="semantic")["id"],
           key.write("in another bucket", bucket="private", memory_type="procedural")["id"],
           key.write("working state", bucket="work", memory_type="working")["id"]}
    plain = {item.get("id") for item in items_of(key.recall("bucket"))}
    wild = {item.get("id") for item in items_of(key.recall("bucket", bucket="%", memory_type="auto"))}
    assert plain == ids, f"a recall without filters missed memories: {plain} vs {ids}"
    assert wild == ids, f"bucket % and memory_type auto filtered: {wild} vs {ids}"


@pytest.mark.requirement("XM-RETRY-1")
def test_reads_repeat_identically_and_store_nothing(world: XMemoWorld) -> None:
    key = world.owner().key("writer")
    written = [key.write(world.text(f"fact {n}"))["id"] for n in range(2)]
    answers = [key.recall("fact") for _ in range(3)]
    seen = [[item.get("id") for item in items_of(a)] for a in answers]
    assert seen[0] == seen[1] == seen[2], f"repeated recalls answered differently: {seen}"
    assert sorted(map(str, seen[0])) == sorted(written), f"recalls stored or lost memories: {seen[0]} vs {written}"
    first, again = (key.request("GET", f"/v1/memories/{written[0]}") for _ in range(2))
    assert first.status == again.status == 200
    assert json.dumps(first.json(), sort_keys=True) == json.dumps(again.json(), sort_keys=True), \
        "a repeated GET answered another memory"
