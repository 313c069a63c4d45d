"""API keys: how long they must be and the only form in which they are stored (SHA-256)."""

from __future__ import annotations

import hashlib
from typing import Final

__all__ = ["key_digest", "key_problem", "MIN_KEY_CHARS", "MAX_KEY_CHARS"]

MIN_KEY_CHARS: Final = 24  # xmemo-agent-framework refuses shorter keys (capture gate 4)
MAX_KEY_CHARS: Final = 4_096


def key_digest(key: str) -> bytes:
    """SHA-256 of the key's bytes, as the AideMemo reference stores bearer tokens."""
    return hashlib.sha256(key.encode("utf-8")).digest()


def key_problem(key: str) -> str | None:
    """Why a key would be refused at bootstrap, or None."""
    if len(key) < MIN_KEY_CHARS:
        return f"key must be at least {MIN_KEY_CHARS} characters (xmemo-agent-framework refuses shorter keys)"
    if len(key) > MAX_KEY_CHARS:
        return f"key must be at most {MAX_KEY_CHARS} characters"
    if not key.isascii() or any(not 0x20 < ord(ch) < 0x7F for ch in key):
        return "key must be visible ASCII without whitespace or control characters"
    return None
