"""Local identifiers: 26-character ULIDs for facts, ``session-<ULID>``, ``handoff-<ULID>``."""

from __future__ import annotations

import os

from refkit.ulid import CROCKFORD
from refkit.ulid import encode_ulid

__all__ = ["new_ulid", "is_ulid", "new_session_id", "new_handoff_id", "new_worker_claim"]

_VALID = frozenset(CROCKFORD)


def new_ulid(now_ms: int) -> str:
    """A ULID: 48-bit millisecond time then 80 fresh random bits, 26 Crockford characters."""
    return encode_ulid(now_ms, os.urandom(10))


def is_ulid(text: str) -> bool:
    """Whether ``text`` parses as a ULID (26 characters, first one at most 7)."""
    upper = text.upper()
    return len(upper) == 26 and upper[0] in "01234567" and set(upper) <= _VALID


def new_session_id(now_ms: int) -> str:
    return f"session-{new_ulid(now_ms)}"


def new_handoff_id(now_ms: int) -> str:
    return f"handoff-{new_ulid(now_ms)}"


def new_worker_claim() -> str:
    # Same shape as upstream's worker lane: ``worker-`` and 32 hex characters.
    return f"worker-{os.urandom(16).hex()}"
