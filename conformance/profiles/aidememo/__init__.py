"""The ``aidememo`` profile: the AideMemo handoff protocol over HTTP (``aidememo-server``).

This module is the profile's declaration and stays light: the target, the world and the checks
are imported only when a run selects the profile.
"""

from __future__ import annotations

from conformance.capabilities import CORE, Capability
from conformance.profile import Profile, lazy
from conformance.profiles.aidememo.settings import SETTINGS, configure, describe, validate
from refkit.version import PROTOCOL_COMMIT

__all__ = ["PROFILE"]

CAPABILITIES = (
    Capability(name=CORE, covers="identity, commands, receipts, typed creates, handoff transitions, visibility, mailbox"),
    Capability(name="leases", covers="lease length and heartbeat renewal", detection="heartbeat route exists"),
    Capability(name="test-clock", covers="the kit's virtual-clock extension: lease expiry without waiting",
               detection="GET /__test__/clock answers {\"now_ms\": N}"),
    Capability(name="replica-feeds", covers="change feed, materialized feed, snapshot, cursor rules",
               detection="snapshot route exists"),
    Capability(name="search", covers="lexical search", detection="search route exists"),
    Capability(name="mcp", covers="the stateless MCP gateway", detection="MCP route exists"),
    Capability(name="mcp-bindings", covers="bearer tokens bound to one source and actor on the MCP gateway"
               " (the kit's --auth-bindings-file extension)",
               detection="the embedded reference, or a target file's provision.bound_command (the suite binds "
                         "tokens only through them)"),
    Capability(name="artifacts", covers="artifact reservations, upload, publish, download",
               detection="resolve route exists"),
    Capability(name="concurrency",
               covers="races one request at a time cannot show: receipts against the change feed, revisions and "
                      "project_seq in one order, reads after a write while others are in flight",
               detection="the command route exists (any server; declare it absent to leave AM-RACE-* unscored)"),
    Capability(name="large-projects",
               covers="the 10,000-resource bound of snapshots and searches (AM-EDGE-5): a project filled with 10,001 "
                      "resources, about 20 s against the embedded reference",
               detection="never detected, for its cost: claim it with --capability large-projects"),
)


PROFILE = Profile(
    name="aidememo",
    title="AideMemo",
    prefix="AM-",
    package="conformance.profiles.aidememo",
    checks="conformance.profiles.aidememo.checks",
    capabilities=CAPABILITIES,
    settings=SETTINGS,
    start=lazy("conformance.profiles.aidememo.target:start"),
    world=lazy("conformance.profiles.aidememo.world:World.build"),
    describe=describe,
    validate=validate,
    markers=("fresh_project: the check needs a project nobody else writes to",
             "isolation(level): what the check needs of its identities: none, shared, actors or project "
             "(conformance.profiles.aidememo.isolation)",
             "lease_expiry(arrange): the check observes lease expiry after arrange(world) set up its lease",
             "real_http: the check's answers depend on HTTP's bytes: it goes over a socket even to the embedded "
             "reference"),
    configure=configure,
    hookspecs="conformance.profiles.aidememo.hooks",
    aliases=("aidememo-remote",),
    diff=lazy("conformance.profiles.aidememo.diff:main"),
    protocol_commit=PROTOCOL_COMMIT,
    expectations=lazy("conformance.profiles.aidememo.oracle:expect"),
)
