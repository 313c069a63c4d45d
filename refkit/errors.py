"""refkit's one exception root: ``UsageError`` (``args``) and ``ServerStartError`` (``process``,
also a ``RuntimeError``) derive from it."""

from __future__ import annotations

__all__ = ["RefkitError"]


class RefkitError(Exception):
    """Root of every exception refkit defines."""
