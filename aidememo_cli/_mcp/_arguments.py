"""How the stdio MCP tools read their arguments: serde's lenient reads of one JSON value, a
wrong type taking the default (as upstream's ``as_str``/``as_bool``/``as_u64``)."""

from __future__ import annotations

__all__ = ["text", "raw", "uint", "flag", "strings"]


def text(value: object) -> str | None:
    return value.strip() or None if isinstance(value, str) else None


def raw(value: object) -> str | None:
    return value if isinstance(value, str) else None


def uint(value: object, default: int) -> int:
    # serde's as_u64: only non-negative integers count; anything else takes the default.
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def flag(value: object, default: bool) -> bool:
    return value if isinstance(value, bool) else default


def strings(value: object) -> list[str]:
    return [item for item in value if isinstance(item, str)] if isinstance(value, list) else []
