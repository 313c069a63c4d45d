"""The suite's exception tree; the verdict engine maps each class to one verdict.

    ConformanceError            root; the CLI prints its message on one line
    +-- ConfigError             bad target file, flag or environment value (exit 2)
    +-- TargetError             the server hung, reset, or answered beyond the size bound -> FAIL
    +-- Untestable              a setup step did not succeed, so the check never reached its point
    |   +-- NotScored           the target cannot be asked (capability unclaimed, too few tokens) -> SKIP
    +-- Indeterminate           only ``503 storage_failure`` answers (ERRATA 7): retryable, no verdict

``AssertionError`` raised by a check is the server departing from the requirement.
"""

from __future__ import annotations

__all__ = ["ConfigError", "ConformanceError", "Indeterminate", "NotScored", "TargetError", "Untestable"]


class ConformanceError(Exception):
    """Root of the suite's own errors."""


class ConfigError(ConformanceError):
    """A target file, flag or environment value is unusable; the message names its origin."""


class TargetError(ConformanceError):
    """The target did not speak HTTP within bounds (timeout, reset, oversize or garbled response)."""


class Untestable(ConformanceError):
    """A prerequisite step failed, so the check could not reach the behaviour it tests."""


class NotScored(Untestable):
    """The target does not offer what the check needs; the requirement is not scored."""


class Indeterminate(ConformanceError):
    """The server kept answering the retryable ``503 storage_failure``; nothing can be concluded."""
