"""The project context route MAF's capture identity needs (XM-PROJECT)."""

from __future__ import annotations

import pytest

from conformance.answers import parse
from conformance.errors import NotScored
from conformance.expect import expect_status
from conformance.profiles.xmemo.world import Key, XMemoWorld, identity_fields

pytestmark = pytest.mark.capability("project-context")


def project_and_owner(world: XMemoWorld, key: Key) -> tuple[str, str | None]:
    """The key's project (from get_mcp_identity when MCP is served, else from the target file) and Owner ID."""
    if world.target.claims.claimed("mcp"):
        fields = identity_fields(key.tool_text("get_mcp_identity"))
        return parse(fields["Tenant"], "get_mcp_identity's Tenant line")["project_id"], fields["Owner ID"]
    if key.project_id:
        return key.project_id, None
    raise NotScored("the key's project id is unknown: serve MCP or list the key's project in the target file")


@pytest.mark.requirement("XM-PROJECT-1")
def test_project_context_echoes_the_project_scope_within_max_items(world: XMemoWorld) -> None:
    key = world.owner().key("maf")
    for n in range(3):
        key.write(world.text(f"project memory {n}"))
    project, owner = project_and_owner(world, key)
    data = expect_status(key.request("POST", f"/v1/projects/{project}/context",
                                     json_body={"max_items": 2, "max_tokens": 2000, "durable_query": "project"}), 200)
    scope = data.get("project_scope")
    assert isinstance(scope, dict), f"no project_scope object: {data}"
    assert scope.get("project_id") == project and scope.get("team_id", "absent") is None, scope
    assert scope.get("scope_key") == f"tenant:project:{project}", scope
    if owner is not None:
        assert scope.get("owner_id") == owner, f"owner_id {scope.get('owner_id')!r} is not the Owner ID {owner!r}"
    used = (data.get("budget") or {}).get("used_items", 0)
    assert used <= 2, f"budget.used_items {used} exceeds max_items 2"
