"""What an actor may see. Every read path asks here (wire spec §5.1).

Handoffs and their contexts are participant-scoped: only their ``from_actor`` and ``to_actor``
see them, and their tombstones are visible to nobody. Every other kind is visible to every
active member of the project, readers included.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Final

from ._records import CONTEXT, HANDOFF

__all__ = ["PARTICIPANT_KINDS", "visible_to"]

PARTICIPANT_KINDS: Final = frozenset({HANDOFF, CONTEXT})


def visible_to(kind: str, body: str | None, actor_id: str) -> bool:
    """Whether ``actor_id`` may see a resource of ``kind`` whose canonical body is ``body``
    (None for a tombstone)."""
    if kind not in PARTICIPANT_KINDS:
        return True
    if body is None:
        return False
    return actor_id in _participants(body)


@lru_cache(maxsize=4096)
def _participants(body: str) -> tuple[object, object]:
    """A participant-scoped body's ``from_actor`` and ``to_actor``: bodies are immutable
    strings, and a feed or snapshot asks about the same few again and again."""
    record = json.loads(body)
    if not isinstance(record, dict):
        return (None, None)
    return (record.get("from_actor"), record.get("to_actor"))
