"""The ``xmemo`` profile: XMemo's agent-to-agent memory over HTTP (capture, bounded recall, the agent boundary).

This module is the profile's declaration and stays light: the target, the world and the checks
are imported only when a run selects the profile. Every requirement says whether it is evidenced
by the published clients, defined by the seed, or the kit's documented choice (``basis``).
"""

from __future__ import annotations

from conformance.capabilities import CORE, Capability
from conformance.profile import Profile, lazy
from conformance.profiles.xmemo.settings import SETTINGS, describe, validate

__all__ = ["PROFILE", "CAPABILITIES"]

CAPABILITIES = (
    Capability(name=CORE, covers="credentials, capture, idempotency, bounded recall, the agent boundary, isolation, "
                                 "the seed's timeline"),
    Capability(name="mcp", covers="streamable-HTTP MCP at /mcp: tools, get_mcp_identity, the recall_context text",
               detection="POST /mcp is a route (anything but 404/405)"),
    Capability(name="agent-binding", covers="keys bound to an agent identity (current_agent_trust token_bound)",
               detection="the embedded reference, a bound-key provisioning template, or a listed key with an agent"),
    Capability(name="project-context", covers="POST /v1/projects/{project_id}/context",
               detection="POST /v1/projects/probe/context is a route (anything but 404/405)"),
)


PROFILE = Profile(
    name="xmemo",
    title="XMemo",
    prefix="XM-",
    package="conformance.profiles.xmemo",
    checks="conformance.profiles.xmemo.checks",
    capabilities=CAPABILITIES,
    settings=SETTINGS,
    start=lazy("conformance.profiles.xmemo.target:start"),
    world=lazy("conformance.profiles.xmemo.world:XMemoWorld.build"),
    describe=describe,
    validate=validate,
)
