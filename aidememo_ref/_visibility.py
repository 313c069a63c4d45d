"""What an actor may see. Every read path asks here (wire spec §5.1).

Handoffs and their contexts are participant-scoped: only their ``from_actor`` and ``to_actor``
see them, and their tombstones are visible to nobody. Every other kind is visible to every
active member of the project, readers included.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["PARTICIPANT_KINDS", "visible_to"]

PARTICIPANT_KINDS: Final = frozenset({"handoff", "handoff_context"})


def visible_to(kind: str, body: Any, deleted: bool, actor_id: str) -> bool:
    """Whether ``actor_id`` may see a resource of ``kind`` in this state."""
    if kind not in PARTICIPANT_KINDS:
        return True
    if deleted or not isinstance(body, dict):
        return False
    return actor_id in (body.get("from_actor"), body.get("to_actor"))
