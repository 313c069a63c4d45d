"""The agent boundary object on recalled items (XM-BND, XM-INST). Attribution only: never what is visible."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conformance.expect import expect_status
from conformance.marks import reads
from conformance.profiles.xmemo.world import BOUNDARY_FIELDS, Key, XMemoWorld, items_of


def boundary_of(key: Key, memory_id: str, **recall: Any) -> dict[str, Any]:
    items = {item.get("id"): item for item in items_of(key.recall(**recall))}
    assert memory_id in items, f"memory {memory_id} was not recalled"
    bound = items[memory_id].get("agent_boundary")
    assert isinstance(bound, dict), f"item {memory_id} carries no agent_boundary object: {items[memory_id]}"
    return bound


@pytest.mark.requirement("XM-BND-1")
def test_every_item_has_the_seven_boundary_fields(world: XMemoWorld) -> None:
    claude, codex = world.pair()
    claude.write("from claude", agent="claude", instance="claude-1")
    codex.write("from codex", agent="codex", instance="codex-1")
    items = items_of(codex.recall(agent="codex", instance="codex-1"))
    assert len(items) == 2
    for item in items:
        bound = item.get("agent_boundary")
        assert isinstance(bound, dict) and tuple(bound) == BOUNDARY_FIELDS, \
            f"agent_boundary must have exactly {BOUNDARY_FIELDS}, in that order: {bound}"
        assert isinstance(bound["explanation"], str) and bound["explanation"] and "\n" not in bound["explanation"]


@reads("XM-BND-2", "relation", "ids")
def test_another_agents_memory_is_other_agent(world: XMemoWorld) -> None:
    claude, codex = world.pair()
    written = claude.write("Use the hosted network MCP transport for remote agents.", agent="claude",
                           instance="claude-1")
    bound = boundary_of(codex, written["id"], agent="codex", instance="codex-1")
    assert (bound["relation"], bound["ownership"]) == ("other_agent", "other_agent"), bound
    assert (bound["memory_agent_id"], bound["current_agent_id"]) == ("claude", "codex"), bound


@pytest.mark.requirement("XM-BND-3")
def test_the_same_agent_from_another_installation(world: XMemoWorld) -> None:
    claude, _ = world.pair()
    written = claude.write("from the laptop", agent="claude", instance="claude-laptop")
    bound = boundary_of(claude, written["id"], agent="claude", instance="claude-desktop")
    assert bound["relation"] == "same_agent_other_instance", bound


@pytest.mark.requirement("XM-BND-4")
def test_the_same_agent_and_installation_is_self(world: XMemoWorld) -> None:
    claude, other_key = world.pair()
    written = claude.write("my own note", agent="claude", instance="claude-laptop")
    for key in (claude, other_key):  # the label follows the agent, not the key
        bound = boundary_of(key, written["id"], agent="claude", instance="claude-laptop")
        assert (bound["relation"], bound["ownership"]) == ("self", "self"), bound


@pytest.mark.requirement("XM-BND-5")
def test_a_header_asserted_agent_is_client_asserted(world: XMemoWorld) -> None:
    claude, codex = world.pair()
    written = claude.write("note", agent="claude")
    bound = boundary_of(codex, written["id"], agent="codex")
    assert (bound["current_agent_id"], bound["current_agent_trust"]) == ("codex", "client_asserted"), bound


@pytest.mark.requirement("XM-BND-6")
def test_an_agent_bound_to_the_credential_is_token_bound(world: XMemoWorld) -> None:
    world.target.require("agent-binding")
    owner = world.owner()
    writer, bound_key = owner.key("writer"), owner.key("bound-codex", agent="codex")
    written = writer.write("note", agent="claude")
    bound = boundary_of(bound_key, written["id"])
    assert (bound["current_agent_id"], bound["current_agent_trust"]) == ("codex", "token_bound"), bound


@pytest.mark.requirement("XM-BND-7")
def test_boundary_authority_is_always_attribution_only(world: XMemoWorld) -> None:
    claude, codex = world.pair()
    claude.write("one", agent="claude", instance="c-1")
    claude.write("two", agent="claude", instance="c-2")
    codex.write("three", agent="codex")
    for agent, instance in (("claude", "c-1"), ("codex", None), (None, None)):
        for item in items_of(codex.recall(agent=agent, instance=instance)):
            assert item["agent_boundary"]["boundary_authority"] == "attribution_only", item


@reads("XM-BND-8", "current", "writer")
def test_a_bound_credential_keeps_its_identity_against_another_header(world: XMemoWorld) -> None:
    world.target.require("agent-binding")
    owner = world.owner()
    bound_key, reader = owner.key("bound-claude", agent="claude"), owner.key("reader")
    written = bound_key.write("written by the bound key", agent="codex")
    seen_by_other = boundary_of(reader, written["id"], agent="hermes")
    assert seen_by_other["memory_agent_id"] == "claude", \
        f"a header overrode the credential's agent on a capture: {seen_by_other}"
    own = boundary_of(bound_key, written["id"], agent="codex")
    assert (own["current_agent_id"], own["current_agent_trust"]) == ("claude", "token_bound"), own


@pytest.mark.requirement("XM-INST-1")
def test_the_raw_installation_id_is_never_echoed(world: XMemoWorld) -> None:
    claude, codex = world.pair()
    raw = f"install-{world.rng.getrandbits(64):016x}"
    written = claude.write("from a named installation", agent="claude", instance=raw)
    answers = [claude.recall(agent="claude", instance=raw), codex.recall(agent="codex"),
               claude.request("GET", f"/v1/memories/{written['id']}", agent="claude", instance=raw),
               claude.request("GET", "/v1/memories/search", params={"query": "installation"}, agent="claude",
                              instance=raw)]
    for answer in answers:
        expect_status(answer, 200)
        assert raw not in answer.body.decode("utf-8", "replace"), f"the raw instance id came back: {answer.url}"
    assert raw not in json.dumps(written), "the write answer echoed the raw instance id"
