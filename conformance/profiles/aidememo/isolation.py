"""What isolation each AideMemo check needs, the identities shared where it needs none, and the guard.

A bootstrap process per identity was nearly all of a run against a served target, and most
checks never needed fresh identities: they create resources under ids they mint themselves and
read them back by those ids. So each check declares (``@pytest.mark.isolation(LEVEL)`` and a
line ``Isolation: LEVEL`` in its docstring) the least it needs:

* ``none``: no identity at all (health, framework answers);
* ``reads``: the process's shared read-only project and its actors: the check sends only reads
  (listings included), and as no check writes there, no listing holds any check's data;
* ``shared``: the process's shared project and actors (one per actor name, provisioned once per
  run and process, in the run's namespace); the check reads back only ids it minted itself and
  never a project-wide listing;
* ``actors``: fresh actors in the shared project: their own mailboxes (inbox, outbox), still no
  project-wide listing. ``actors(NAME, ...)`` names its own actors: those whose mailboxes it lists
  and every party to their handoffs. The others (bystanders handing off among themselves, the
  parties of a handoff only a non-participant lists) are the process's shared actors, provisioned
  once, whose mailboxes it may not list: no listed mailbox holds another check's handoff on a
  conforming server, and what a shared actor holds of other checks is what the check creates
  itself, so a bug that shows it shows alone too. A bootstrap per listed actor, not per actor;
* ``project``: a fresh project with fresh actors (feeds, snapshots, search, first-commit
  numbering, a second project). An undeclared check gets this, as every check did before.

The declaration is enforced, not trusted: before sending it, a world refuses an authenticated
request its level does not allow (``refusal``: a write in ``reads``, a listing in ``shared``, a
listing other than its own actors' mailboxes in ``actors``), and a second project; the check
then reads ERROR (a bug of the kit's declaration, never the target's FAIL).
A request without a token reads nothing of a project on a conforming server, and a check that
sends one expects a refusal, so the guard lets it through.

``fresh_identities`` (``--fresh-identities``) gives every check ``project``, the old behaviour.
The shared ids carry the run tag, so a rerun provisions new ones, as it does every check's own.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Any, Final

import pytest

from conformance.errors import ConformanceError

__all__ = ["ACTORS", "NONE", "PROJECT", "READS", "SHARED", "Isolation", "IsolationError", "actors", "isolation_of",
           "own_actors", "refusal", "shares_actor", "shared_tag"]

MARKER: Final = "isolation"


class Isolation(StrEnum):
    """The least a check needs of its identities (see the module docstring)."""

    NONE = "none"
    READS = "reads"
    SHARED = "shared"
    ACTORS = "actors"
    PROJECT = "project"


class IsolationError(ConformanceError, RuntimeError):
    """A check does what its declared isolation forbids: the kit's bug, so it reads ERROR."""


NONE, READS, SHARED, ACTORS, PROJECT = (pytest.mark.isolation(level.value) for level in Isolation)

# Authenticated reads whose answer lists the project's data, not one resource the check named.
_LISTING: Final = re.compile(r"/v1/projects/[^/]+/(?P<route>snapshot|changes|changes/materialized|search|handoffs)\Z")
_MCP: Final = re.compile(r"/v1/projects/[^/]+/mcp\Z")
_MAILBOX_TOOLS: Final = frozenset({"handoff_list"})
_LISTING_TOOLS: Final = frozenset({"search"})
_WRITE_TOOLS: Final = frozenset({"session_create", "fact_create", "handoff_context_create", "handoff_send",
                                 "handoff_accept", "handoff_return"})


def actors(*own: str) -> pytest.MarkDecorator:
    """``actors`` with only ``own`` fresh: the actors whose mailboxes the check lists."""
    return pytest.mark.isolation(Isolation.ACTORS.value, *own)


def own_actors(markers: Mapping[str, tuple[object, ...]], *, fresh: bool = False) -> frozenset[str] | None:
    """The actors an ``actors(NAME, ...)`` check lists the mailboxes of (None: all its actors are its own)."""
    args = markers.get(MARKER) or ()
    if fresh or len(args) < 2 or Isolation(str(args[0])) is not Isolation.ACTORS:
        return None
    return frozenset(str(name) for name in args[1:])


def shares_actor(level: Isolation, own: frozenset[str] | None, name: str) -> bool:
    """Whether a check at ``level`` gets the process's shared actor ``name`` rather than a fresh one."""
    return level in (Isolation.SHARED, Isolation.READS) or (level is Isolation.ACTORS and own is not None
                                                            and name not in own)


def isolation_of(markers: Mapping[str, tuple[object, ...]], *, fresh: bool = False) -> Isolation:
    """A check's declared isolation (``project`` when undeclared, or every check with ``fresh``)."""
    args = markers.get(MARKER)
    level = Isolation(str(args[0])) if args else Isolation.PROJECT
    return Isolation.PROJECT if fresh and level is not Isolation.NONE else level


def refusal(level: Isolation, method: str, path: str, json_body: Any = None) -> str | None:
    """Why ``level`` forbids this authenticated request, or None."""
    if level is Isolation.PROJECT:
        return None
    tool = _tool(method, path, json_body)
    if level is Isolation.READS:
        if method in ("GET", "HEAD") or (_MCP.match(path) and tool not in _WRITE_TOOLS):
            return None
        return f"{method} {path} writes" if tool is None else f"the MCP tool {tool} writes"
    listing = _LISTING.match(path)
    if method == "GET" and listing is not None:
        route = listing.group("route")
        if route == "handoffs" and level is Isolation.ACTORS:
            return None  # its own actors' mailboxes: only its own handoffs
        return f"GET {route} lists the project's data"
    if tool in _LISTING_TOOLS or (tool in _MAILBOX_TOOLS and level is not Isolation.ACTORS):
        return f"the MCP tool {tool} lists the project's data"
    return None


def _tool(method: str, path: str, json_body: Any) -> str | None:
    """The tool a gateway request calls (None: not a tools/call)."""
    if method != "POST" or not _MCP.match(path) or not isinstance(json_body, dict):
        return None
    params = json_body.get("params")
    name = params.get("name") if isinstance(params, dict) and json_body.get("method") == "tools/call" else None
    return name if isinstance(name, str) else None


def shared_tag() -> str:
    """The tag of this process's shared ids: one set per xdist worker (``shared-gw0``), or ``shared``."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"shared-{worker}" if worker else "shared"
