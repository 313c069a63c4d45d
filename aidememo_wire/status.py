"""The handoff's wire enums, shared by the remote core (``_records``) and the local flow.

Kept apart from ``_records`` so the token-free local command line can name a status without
loading the remote core's records and canonical JSON (agents start it dozens of times a task).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Status", "Outcome"]


class Status(StrEnum):
    """Handoff lifecycle state (upstream ``HandoffStatus``)."""

    PENDING = "pending"  # routed, not yet claimed
    ACCEPTED = "accepted"  # claimed by the receiver (possibly after a failed attempt)
    COMPLETED = "completed"  # returned with succeeded evidence; final


class Outcome(StrEnum):
    """What the receiver reported with its result fact (upstream ``HandoffOutcome``)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
