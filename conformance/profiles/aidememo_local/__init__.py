"""The ``aidememo-local`` profile: the token-free local handoff rules, checked through a CLI.

The target is a command line (``--cli "aidememo"``, upstream's binary or anything speaking its
local surface); without one, this kit's ``aidememo-ref`` is used. Every check works on a fresh
store file of its own (``--store``), drives the CLI as a user would and, for the ``mcp``
capability, the same CLI's ``mcp`` server as upstream's SDK does; for the ``remote`` capability, the
CLI's remote verbs against this kit's reference server (started on loopback when a remote check runs). This module stays light: the
target, the world and the checks are imported only when a run selects the profile.
"""

from __future__ import annotations

from conformance.capabilities import CORE, Capability
from conformance.profile import Profile, lazy
from conformance.profiles.aidememo_local.settings import SETTINGS, describe
from refkit.version import PROTOCOL_COMMIT

__all__ = ["PROFILE"]

CAPABILITIES = (
    Capability(name=CORE, covers="sessions, facts, send, inbox/outbox/show/status visibility, accept, heartbeat, "
                                 "fail-closed return, run refusals, compare-and-swap under concurrent writers"),
    Capability(name="mcp", covers="worker claims and the worker lane's sequence through the stdio MCP server",
               detection="`mcp` answers initialize with protocolVersion"),
    Capability(name="remote", covers="two accounts of one remote project (the handoff guide's second half): "
                                     "credential profiles, remote send/inbox/accept/return/outbox against the "
                                     "kit's reference server, identity only from the token, recovery on reruns",
               detection="`auth list` answers in an empty HOME"),
)


PROFILE = Profile(
    name="aidememo-local",
    title="AideMemo local",
    prefix="AML-",
    package="conformance.profiles.aidememo_local",
    checks="conformance.profiles.aidememo_local.checks",
    capabilities=CAPABILITIES,
    settings=SETTINGS,
    start=lazy("conformance.profiles.aidememo_local.target:start"),
    world=lazy("conformance.profiles.aidememo_local.world:LocalWorld.build"),
    describe=describe,
    # Each check is a few dozen processes of the CLI on a store (and, remote, a project) of its own,
    # so three run at once (conformance.overlap).
    overlap=3,
    protocol_commit=PROTOCOL_COMMIT,
    expectations=lazy("conformance.profiles.aidememo_local.oracle:expect"),
)
