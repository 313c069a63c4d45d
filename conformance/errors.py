"""The suite's exception tree; the verdict engine maps each class to one verdict.

    ConformanceError            root; the CLI prints its message on one line
    +-- ConfigError             bad target file, flag or environment value (exit 2)
    +-- TargetError             the server hung, reset, or answered beyond the size bound -> FAIL
    +-- Untestable              a setup step did not succeed, so the check never reached its point
    |   +-- NotScored           the target cannot be asked (capability unclaimed, too few tokens) -> SKIP
    +-- Indeterminate           only ``503 storage_failure`` answers (ERRATA 7): retryable, no verdict
    +-- Departure               an answer is not what the check expected (also an AssertionError) -> FAIL
        +-- ShapeError          an answer lacks a promised field, or has an array for an object...
    +-- IsolationError          a check does what its declared isolation forbids (also a
                                RuntimeError; ``profiles.aidememo.isolation``) -> ERROR

``AssertionError`` raised by a check is the server departing from the requirement; a
``Departure`` also names the step that departed and what was expected of it, for the reports.
Anything else a check raises (``KeyError``, ``AttributeError``, ...) is a bug in the kit and
reads ERROR: checks read answers through ``conformance.answers``, which raises ``ShapeError``
where the answer, not the check, is at fault.
"""

from __future__ import annotations

__all__ = ["ConfigError", "ConformanceError", "Departure", "Indeterminate", "NotScored", "ShapeError", "TargetError",
           "Untestable"]


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


class Departure(ConformanceError, AssertionError):
    """An answer departs from what the check expected of it.

    Args:
        entry: the transcript entry (step) that answered, when the check knows it.
        expected: what was expected of that step, for reports (``HTTP 409 stale_revision``).
    """

    def __init__(self, message: str, *, entry: object = None, expected: str = "") -> None:
        super().__init__(message)
        self.entry = entry
        self.expected = expected


class ShapeError(Departure):
    """An answer lacks a field it promised, or holds another kind of value there (``path``: ``$.record``)."""

    def __init__(self, message: str, *, entry: object = None, path: str = "$") -> None:
        super().__init__(message, entry=entry, expected=f"a JSON answer with the promised shape at {path}")
        self.path = path
