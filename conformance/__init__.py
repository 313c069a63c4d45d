"""AideMemo conformance suite: a pytest plugin and a command line."""

from conformance.errors import ConformanceError

__all__ = ["ConformanceError"]
