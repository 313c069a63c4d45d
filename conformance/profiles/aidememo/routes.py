"""The write routes of the AideMemo surface (wire §1.2, §1.9-1.17, §2.2), as data.

One row per route a command id is spent on: its path, the operation its fingerprint names, the
kind of resource its receipt names, whether it takes ``expected_revision``, its payload fields in
upstream's order, and the field a second request changes to send *another body* for the same
resource. Upstream looks a command id up before any state check on every one of them (wire §2.4,
``svc/lib.rs`` ``replay``): the same body answers the stored receipt, another body 409
``command_conflict``. Checks build their requests from this table, and so can any generator of
request streams that wants every write route.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["RAW", "TYPED_WRITES", "WriteRoute", "typed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRoute:
    """One write route and what distinguishes two bodies on it."""

    name: str  # how checks and reports name the route
    operation: str  # the operation name the fingerprint covers (never sent on typed routes)
    path: str  # under /v1/projects/{project_id} for typed routes; {handoff_id} is the path's handoff
    kind: str  # the receipt's resource kind
    transition: bool  # takes a required expected_revision
    fields: tuple[str, ...]  # the payload's fields
    resource_field: str | None  # the payload field naming the resource; None when the path names it
    varied: str  # what another body for the same resource changes (a payload field, or expected_revision)


RAW: Final = WriteRoute(name="commands", operation="resource.put", path="/v1/commands", kind="custom.*",
                        transition=False, fields=(), resource_field=None, varied="payload")

TYPED_WRITES: Final[tuple[WriteRoute, ...]] = (
    WriteRoute(name="sessions", operation="session.create", path="sessions", kind="session", transition=False,
               fields=("session_id", "source_id", "topic"), resource_field="session_id", varied="topic"),
    WriteRoute(name="facts", operation="fact.create", path="facts", kind="fact", transition=False,
               fields=("fact_id", "session_id", "content"), resource_field="fact_id", varied="content"),
    WriteRoute(name="handoff-contexts", operation="handoff_context.create", path="handoff-contexts",
               kind="handoff_context", transition=False,
               fields=("context_id", "handoff_id", "session_id", "to_actor", "content"), resource_field="context_id",
               varied="content"),
    WriteRoute(name="handoffs", operation="handoff.send", path="handoffs", kind="handoff", transition=False,
               fields=("handoff_id", "session_id", "to_actor", "focus", "done_when", "context_id"),
               resource_field="handoff_id", varied="focus"),
    # Transitions: another claim, the current revision instead of the spent one, another outcome:
    # each is a request a server without the receipt lookup would simply execute.
    WriteRoute(name="accept", operation="handoff.accept", path="handoffs/{handoff_id}/accept", kind="handoff",
               transition=True, fields=("claim_id",), resource_field=None, varied="claim_id"),
    WriteRoute(name="heartbeat", operation="handoff.heartbeat", path="handoffs/{handoff_id}/heartbeat",
               kind="handoff", transition=True, fields=("claim_id",), resource_field=None, varied="expected_revision"),
    WriteRoute(name="return", operation="handoff.return", path="handoffs/{handoff_id}/return", kind="handoff",
               transition=True, fields=("claim_id", "result_fact_id", "outcome"), resource_field=None,
               varied="outcome"),
)


def typed(name: str) -> WriteRoute:
    """The typed write route called ``name``."""
    return next(route for route in TYPED_WRITES if route.name == name)
