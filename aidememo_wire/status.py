"""The wire's enums: a handoff's status and outcome, a membership's role.

Shared by the server's records, the wire shapes and the local flow, and kept apart from the
records so the token-free local command line can name a status without loading the server's
records and canonical JSON (agents start it dozens of times a task).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

__all__ = ["Status", "Outcome", "Role", "WRITABLE_ROLES"]


class Status(StrEnum):
    """Handoff lifecycle state (upstream ``HandoffStatus``)."""

    PENDING = "pending"  # routed, not yet claimed
    ACCEPTED = "accepted"  # claimed by the receiver (possibly after a failed attempt)
    COMPLETED = "completed"  # returned with succeeded evidence; final


class Outcome(StrEnum):
    """What the receiver reported with its result fact (upstream ``HandoffOutcome``)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"


class Role(StrEnum):
    """Project membership role (upstream ``MembershipRole``)."""

    OWNER = "owner"
    ADMIN = "admin"
    WRITER = "writer"
    READER = "reader"


WRITABLE_ROLES: Final = frozenset({Role.OWNER, Role.ADMIN, Role.WRITER})
